"""Cross-key configuration rules checked once at start (fail fast, key named).

Single-key type checks live in :mod:`squall.settings`; this module holds the
rules that relate keys to each other, with their sources:

* ``partition.url.mode`` is one of byHost, byDomain (byIP is not implemented
  yet and is refused with a clear message).
* Robots pacing (``frontier.robots.crawl.delay.enabled``, seed 000's
  configuration contract) needs ``partition.url.mode: byHost``,
  ``fetcher.max.crawl.delay.force: true``, ``frontier.max.urls.per.bucket: 1``,
  ``robots.crawl.delay`` in ``metadata.persist`` and *not* matched by
  ``metadata.transfer`` (wildcards such as ``robots.*`` included: an outlink
  must never inherit its parent's delay).
* ``kafka.group.instance.id`` uses only the fields {hostname} and {datadir}.
* Numeric ranges: delays and timeouts are not negative, counts are positive.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from squall.errors import ConfigError
from squall.membership import check_template
from squall.metadata import key_matches

ROBOTS_DELAY_KEY = "robots.crawl.delay"


def validate(values: Mapping[str, Any]) -> None:
    """Raise :class:`ConfigError` naming the first key that breaks a rule."""
    check_template(values["kafka.group.instance.id"])
    mode = values["partition.url.mode"]
    if mode == "byIP":
        raise ConfigError("partition.url.mode", "byIP is not implemented yet; use byHost or byDomain")
    if mode not in ("byHost", "byDomain"):
        raise ConfigError("partition.url.mode", f"unknown mode {mode!r}; expected byHost or byDomain")
    for key in ("fetcher.server.delay", "fetcher.server.min.delay", "fetcher.max.crawl.delay",
                "http.timeout.connect", "http.timeout.read", "http.timeout.total",
                "frontier.backoff.base.secs", "frontier.backoff.max.secs", "frontier.tick.interval.secs",
                "frontier.inflight.timeout.secs", "frontier.robots.delay.decay.secs", "fetcher.server.rate"):
        if values[key] < 0:
            raise ConfigError(key, f"must not be negative, got {values[key]}")
    for key in ("topology.partitions", "fetcher.threads.number", "fetcher.threads.per.queue",
                "frontier.max.urls.per.bucket", "max.fetch.errors", "http.redirect.max",
                "topology.replication.factor", "fetcher.server.burst", "topology.web.port"):
        if values[key] < 1:
            raise ConfigError(key, f"must be at least 1, got {values[key]}")
    for key in ("kafka.session.timeout.secs", "kafka.outage.log.interval.secs", "kafka.outage.quiet.secs"):
        if values[key] <= 0:
            raise ConfigError(key, "must be positive")
    if values["frontier.robots.crawl.delay.enabled"]:
        _validate_robots_pacing(values)


def _validate_robots_pacing(values: Mapping[str, Any]) -> None:
    why = "is required when frontier.robots.crawl.delay.enabled is true (seed 000)"
    if values["partition.url.mode"] != "byHost":
        raise ConfigError("partition.url.mode", f"byHost {why}")
    if not values["fetcher.max.crawl.delay.force"]:
        raise ConfigError("fetcher.max.crawl.delay.force", f"true {why}")
    if values["frontier.max.urls.per.bucket"] != 1:
        raise ConfigError("frontier.max.urls.per.bucket", f"1 {why}")
    if ROBOTS_DELAY_KEY not in values["metadata.persist"]:
        raise ConfigError("metadata.persist", f"an entry {ROBOTS_DELAY_KEY!r} {why}")
    for pattern in values["metadata.transfer"]:
        if key_matches(pattern, ROBOTS_DELAY_KEY):
            raise ConfigError("metadata.transfer",
                              f"{pattern!r} matches {ROBOTS_DELAY_KEY!r}: an outlink must never inherit its parent's delay")
