"""Cross-key configuration rules checked once at start (fail fast, key named).

Single-key type checks live in :mod:`squall.settings`; this module holds the
rules that relate keys to each other, with their sources:

* ``partition.url.mode`` is one of byHost, byDomain, byIP; byIP's cache
  keys are in range (:meth:`squall.policy.address_key.AddressConfig.from_settings`).
* Robots pacing (``frontier.robots.crawl.delay.enabled``, seed 000's
  configuration contract) needs ``partition.url.mode: byHost``,
  ``fetcher.max.crawl.delay.force: true``, ``robots.crawl.delay`` in
  ``metadata.persist`` and *not* matched by ``metadata.transfer`` (wildcards
  such as ``robots.*`` included: an outlink must never inherit its parent's
  delay). Seed 000 also asks for ``frontier.max.urls.per.bucket: 1``: with
  URLFrontier a bucket of several URLs reached a fetcher that knew nothing of
  the frontier's delay. In squall the frontier and the fetcher of a host are
  the same worker and both apply the one pace model (:mod:`squall.policy.pace`,
  frontier robots delay included) to every URL, however many were handed out
  ahead, so that check protects nothing and is gone.
* ``kafka.group.instance.id`` uses only the fields {hostname} and {datadir}.
* Numeric ranges: delays and timeouts are not negative, counts are positive.
* ``sitemap.*`` ranges (:meth:`squall.policy.sitemaps.SitemapConfig.from_settings`).
* ``render.*``: :meth:`squall.policy.render_policy.RenderConfig.from_settings` (ranges, resource type names).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import ConfigError
from squall.worker.membership import check_template
from squall.policy.metadata import key_matches

ROBOTS_DELAY_KEY = "robots.crawl.delay"


def validate(values: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the first key that breaks a rule."""
    check_template(values["kafka.group.instance.id"])
    from squall.policy.address_key import AddressConfig
    from squall.policy.partition import validate_mode

    validate_mode(values["partition.url.mode"])
    AddressConfig.from_settings(values)  # raises ConfigError naming a partition.ip.cache.* key out of range
    for key in ("fetcher.server.delay", "fetcher.server.min.delay", "fetcher.max.crawl.delay",
                "http.timeout.connect", "http.timeout.read", "http.timeout.total",
                "frontier.backoff.base.secs", "frontier.backoff.max.secs", "frontier.tick.interval.secs",
                "frontier.inflight.timeout.secs", "frontier.robots.delay.decay.secs", "fetcher.server.rate",
                "frontier.handout.lead.secs", "audit.tolerance.secs", "metrics.hosts.top"):
        if values[key] < 0:
            raise ConfigError(key, f"must not be negative, got {values[key]}")
    for key in ("topology.partitions", "fetcher.threads.number", "fetcher.threads.per.queue",
                "frontier.max.urls.per.bucket", "max.fetch.errors", "http.redirect.max",
                "topology.replication.factor", "fetcher.server.burst", "topology.web.port",
                "frontier.handout.ahead", "frontier.signals.remembered", "fetcher.max.pending.urls"):
        if values[key] < 1:
            raise ConfigError(key, f"must be at least 1, got {values[key]}")
    if values["frontier.retry.after.max.secs"] <= 0:
        raise ConfigError("frontier.retry.after.max.secs", "must be positive")
    if values["max.rate.limits"] == 0 or values["max.rate.limits"] < -1:
        raise ConfigError("max.rate.limits", f"must be at least 1, or -1 for never, got {values['max.rate.limits']}")
    for key in ("kafka.session.timeout.secs", "kafka.outage.log.interval.secs", "kafka.outage.quiet.secs"):
        if values[key] <= 0:
            raise ConfigError(key, "must be positive")
    if values["frontier.robots.crawl.delay.enabled"]:
        _validate_robots_pacing(values)
    from squall.policy.sitemaps import SitemapConfig

    SitemapConfig.from_settings(values)  # raises ConfigError naming a sitemap.* key out of range
    from squall.policy.render_policy import RenderConfig  # here: settings loading must not import the parser eagerly

    RenderConfig.from_settings(values)


def _validate_robots_pacing(values: Mapping[str, Any]) -> None:
    why = "is required when frontier.robots.crawl.delay.enabled is true (seed 000)"
    if values["partition.url.mode"] != "byHost":
        raise ConfigError("partition.url.mode", f"byHost {why}")
    if not values["fetcher.max.crawl.delay.force"]:
        raise ConfigError("fetcher.max.crawl.delay.force", f"true {why}")
    if ROBOTS_DELAY_KEY not in values["metadata.persist"]:
        raise ConfigError("metadata.persist", f"an entry {ROBOTS_DELAY_KEY!r} {why}")
    for pattern in values["metadata.transfer"]:
        if key_matches(pattern, ROBOTS_DELAY_KEY):
            raise ConfigError("metadata.transfer",
                              f"{pattern!r} matches {ROBOTS_DELAY_KEY!r}: an outlink must never inherit its parent's delay")
