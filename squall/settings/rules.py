"""Every check of a configuration value, run once at start (fail fast, key named).

Single-key *type* checks are done while merging (:mod:`squall.settings`);
this module holds every range, choice and cross-key rule, each raising
:class:`squall.errors.ConfigError` with the key (``ConfigError(key, why)``),
so the policy configs built from settings (``RobotsConfig``, ``HttpConfig``,
``BackoffConfig``, ...) only copy attributes. The range rules are tables keyed
by the dotted key, so the key an error names is the key checked. Rules and
their sources:

* Numeric ranges: delays and timeouts are not negative, counts are positive;
  ``-1`` means "no limit" where the defaults file says so.
* ``http.timeout.*`` are positive; ``http.robots.cache.ttl.secs`` is in
  (0, 86400] (RFC 9309 §2.4); ``http.robots.retry.max.secs`` is not below
  ``http.robots.retry.base.secs``; ``frontier.backoff.max.secs`` is not below
  ``frontier.backoff.base.secs``.
* ``scheduler.adaptive.fetchInterval.min`` is positive and not above
  ``.max``; ``.rate.incr`` and ``.rate.decr`` are in (0, 1] (StormCrawler's
  AdaptiveScheduler).
* ``partition.url.mode`` is one of byHost, byDomain, byIP.
* ``http.robots.agents`` (else ``http.agent.name``) each have an RFC 9309
  §2.2.1 product token.
* ``urlfilters.regex.*`` compile; ``urlfilters.domains.allow`` holds no public
  suffix (``co.uk`` would admit a whole country).
* ``http.private.networks.allow`` entries are CIDRs and ``http.resolve``
  entries ``host:port:address`` pinned once
  (:meth:`squall.policy.netsafety.NetworkPolicy.from_settings` parses them and
  names the key).
* ``render.resources.skip`` names Playwright resource types, never ``document``;
  ``sitemap.default.path`` is empty or starts with ``/``.
* ``indexer.md.mapping`` entries are ``key=field`` or ``key``
  (:func:`squall.policy.metadata.parse_mapping`).
* ``kafka.group.instance.id`` uses only the fields {hostname} and {datadir}.
* The broker's security (:func:`squall.net.kafka_security.validate`):
  ``kafka.security.protocol`` and ``kafka.sasl.mechanism`` from their lists;
  ``kafka.ssl.*`` files only with a TLS protocol and existing;
  ``kafka.ssl.keyfile`` only with ``kafka.ssl.certfile``; a SASL protocol
  needs credentials (``$SQUALL_KAFKA_USERNAME`` and ``$SQUALL_KAFKA_PASSWORD``,
  or an existing, complete ``kafka.sasl.credentials.file``), and that file
  only with a SASL protocol.
* ``kafka.session.fence.margin.secs`` is below ``kafka.session.timeout.secs``
  minus the heartbeat interval (:mod:`squall.policy.lease`), or the fence
  would close between two healthy heartbeats.
* Robots pacing (``frontier.robots.crawl.delay.enabled``, the
  configuration StormCrawler's CrawlDelayPolicy relies on) needs ``partition.url.mode: byHost``,
  ``fetcher.max.crawl.delay.force: true``, ``robots.crawl.delay`` in
  ``metadata.persist`` and *not* matched by ``metadata.transfer`` (wildcards
  such as ``robots.*`` included: an outlink must never inherit its parent's
  delay). StormCrawler's URLFrontier set-up also asks for ``frontier.max.urls.per.bucket: 1``: with
  URLFrontier a bucket of several URLs reached a fetcher that knew nothing of
  the frontier's delay. In squall the frontier and the fetcher of a host are
  the same worker and both apply the one pace model (:mod:`squall.policy.pace`,
  frontier robots delay included) to every URL, however many were handed out
  ahead, so that check protects nothing and is gone.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

from squall.errors import ConfigError
from squall.policy.lease import heartbeat_interval_s
from squall.policy.metadata import key_matches, parse_mapping
from squall.worker.membership import check_template

if TYPE_CHECKING:
    from squall.settings import Settings

ROBOTS_DELAY_KEY = "robots.crawl.delay"

# Durations (s) and counts that may be 0 but not negative.
NOT_NEGATIVE = (
    "fetcher.server.delay",
    "fetcher.server.min.delay",
    "fetcher.max.crawl.delay",
    "frontier.backoff.base.secs",
    "frontier.backoff.max.secs",
    "frontier.backoff.ttl.secs",
    "frontier.tick.interval.secs",
    "frontier.inflight.timeout.secs",
    "frontier.robots.delay.decay.secs",
    "fetcher.server.rate",
    "frontier.handout.lead.secs",
    "frontier.takeover.grace.secs",
    "audit.tolerance.secs",
    "audit.flush.secs",
    "parser.inline.max.bytes",
    "warc.inline.max.bytes",
    "metrics.hosts.top",
    "metrics.log.interval.secs",
    "http.robots.refresh.ahead.secs",
    "http.robots.unreachable.grace.secs",
    "render.max.requests",
    "render.shell.max.links",
    "render.shell.max.text",
    "render.cache.size",
    "render.cache.ttl.secs",
    "kafka.producer.linger.secs",
    "kafka.stuck.partition.secs",
    "kafka.session.fence.margin.secs",
)
# Durations (s) that must be > 0.
POSITIVE = (
    "http.timeout.connect",
    "http.timeout.read",
    "http.timeout.total",
    "http.robots.retry.base.secs",
    "frontier.retry.after.max.secs",
    "kafka.session.timeout.secs",
    "kafka.outage.log.interval.secs",
    "kafka.outage.quiet.secs",
    "kafka.consumer.fetch.max.wait.secs",
    "partition.ip.cache.secs",
    "render.timeout",
    "render.idle.secs",
    "frontier.tick.resend.secs",
    "frontier.handout.inprocess.hold.secs",
    "fetcher.queue.full.retry.secs",
    "metrics.scan.cache.secs",
    "http.header.limit",
    "index.commit.interval.secs",
)
# Counts that must be at least 1.
AT_LEAST_ONE = (
    "topology.partitions",
    "fetcher.threads.number",
    "fetcher.threads.per.queue",
    "frontier.max.urls.per.bucket",
    "max.fetch.errors",
    "http.redirect.max",
    "topology.replication.factor",
    "fetcher.server.burst",
    "topology.web.port",
    "frontier.handout.ahead",
    "frontier.signals.remembered",
    "fetcher.max.pending.urls",
    "frontier.robots.delay.max.secs",
    "partition.ip.cache.size",
    "sitemap.max.urls",
    "render.pool.size",
    "urlfilters.max.repeated.segments",
    "urlfilters.max.length",
    "parser.title.max.chars",
    "fetcher.recent.fetch.ids",
    "http.robots.cache.lru.size",
    "topology.rocksdb.write.buffer.bytes",
    "topology.rocksdb.block.cache.bytes",
)
# Limits where -1 means "none" and otherwise at least 0.
MINUS_ONE_OR_NOT_NEGATIVE = (
    "http.content.limit",
    "urlfilters.max.depth",
    "frontier.max.urls.per.host",
    "urlfilters.max.query.params",
    "sitemap.filter.hours.since.modified",
    "fetcher.max.queue.size",
    "indexer.text.maxlength",
)
# Limits where -1 means "none" and otherwise at least 1.
MINUS_ONE_OR_AT_LEAST_ONE = (
    "max.rate.limits",
    "urlfilters.max.repeated.runs",
    "urlfilters.max.host.segments",
    "urlfilters.max.query.param.copies",
)


def validate(settings: Settings) -> None:
    """Raise :class:`ConfigError` naming the first key that breaks a rule (rules in the module docstring)."""
    _validate_ranges(settings)
    _validate_choices(settings)
    if settings.frontier_robots_crawl_delay_enabled:
        _validate_robots_pacing(settings)


def _validate_ranges(settings: Settings) -> None:
    for key in NOT_NEGATIVE:
        if not math.isfinite(settings[key]) or settings[key] < 0:
            raise ConfigError(key, f"must not be negative, got {settings[key]}")
    for key in POSITIVE:
        if not math.isfinite(settings[key]) or settings[key] <= 0:
            raise ConfigError(key, f"must be positive, got {settings[key]}")
    for key in AT_LEAST_ONE:
        if settings[key] < 1:
            raise ConfigError(key, f"must be at least 1, got {settings[key]}")
    for key in MINUS_ONE_OR_NOT_NEGATIVE:
        if settings[key] < -1:
            raise ConfigError(key, f"must be -1 (no limit) or at least 0, got {settings[key]}")
    for key in MINUS_ONE_OR_AT_LEAST_ONE:
        if settings[key] == 0 or settings[key] < -1:
            raise ConfigError(key, f"must be at least 1, or -1 for no limit, got {settings[key]}")
    if settings.sitemap_max_nesting < 0:
        raise ConfigError("sitemap.max.nesting", f"must be at least 0, got {settings.sitemap_max_nesting}")
    if not 0 < settings.http_robots_cache_ttl_secs <= 86400:
        raise ConfigError("http.robots.cache.ttl.secs", "must be > 0 and at most 86400 (RFC 9309 §2.4)")
    if settings.http_robots_retry_max_secs < settings.http_robots_retry_base_secs:
        raise ConfigError("http.robots.retry.max.secs", "must be >= http.robots.retry.base.secs")
    if settings.frontier_backoff_max_secs < settings.frontier_backoff_base_secs:
        raise ConfigError("frontier.backoff.max.secs", "must be >= frontier.backoff.base.secs")
    if settings.scheduler_adaptive_fetch_interval_min <= 0:
        raise ConfigError("scheduler.adaptive.fetchInterval.min", "must be positive (minutes)")
    if settings.scheduler_adaptive_fetch_interval_max < settings.scheduler_adaptive_fetch_interval_min:
        raise ConfigError("scheduler.adaptive.fetchInterval.max", "must be >= scheduler.adaptive.fetchInterval.min")
    for key in ("scheduler.adaptive.fetchInterval.rate.incr", "scheduler.adaptive.fetchInterval.rate.decr"):
        if not 0 < settings[key] <= 1:
            raise ConfigError(key, f"must be > 0 and at most 1, got {settings[key]}")
    session_s = settings.kafka_session_timeout_secs
    open_s = session_s - heartbeat_interval_s(session_s)
    if settings.kafka_session_fence_margin_secs >= open_s:
        raise ConfigError(
            "kafka.session.fence.margin.secs",
            f"must be below kafka.session.timeout.secs minus the heartbeat interval ({open_s:g} s), "
            f"got {settings.kafka_session_fence_margin_secs}: the fence would close between healthy heartbeats",
        )


def _validate_choices(settings: Settings) -> None:
    from squall.net import kafka_security
    from squall.policy.netsafety import NetworkPolicy
    from squall.policy.partition import is_public_suffix, validate_mode
    from squall.policy.render_policy import RESOURCE_TYPES  # here: settings loading must not import the parser eagerly
    from squall.policy.robots_rules import product_token
    from squall.policy.scope import host_name

    check_template(settings.kafka_group_instance_id)
    kafka_security.validate(settings)
    validate_mode(settings.partition_url_mode)
    key = "http.robots.agents" if settings.http_robots_agents else "http.agent.name"
    for name in settings.http_robots_agents or (settings.http_agent_name,):
        if not product_token(name):
            raise ConfigError(key, f"{name!r} has no product token (letters, '_' or '-'; RFC 9309 §2.2.1)")
    for key in ("urlfilters.regex.include", "urlfilters.regex.exclude"):
        for pattern in settings[key]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(key, f"bad regular expression {pattern!r}: {exc}") from None
    for domain in settings.urlfilters_domains_allow:
        if is_public_suffix(host_name(domain)):
            raise ConfigError("urlfilters.domains.allow", f"{host_name(domain)!r} is a public suffix, not a domain")
    try:
        parse_mapping(settings.indexer_md_mapping)
    except ValueError as exc:
        raise ConfigError("indexer.md.mapping", str(exc)) from None
    NetworkPolicy.from_settings(settings)  # parses the CIDRs and pins, naming the key of a bad entry
    skip = {t.lower() for t in settings.render_resources_skip}
    if skip - RESOURCE_TYPES:
        raise ConfigError(
            "render.resources.skip",
            f"unknown resource types {sorted(skip - RESOURCE_TYPES)}; known: {sorted(RESOURCE_TYPES)}",
        )
    if "document" in skip:
        raise ConfigError("render.resources.skip", "'document' cannot be skipped (the page itself is one)")
    path = settings.sitemap_default_path
    if path and not path.startswith("/"):
        raise ConfigError("sitemap.default.path", f"must be empty or start with '/', got {path!r}")


def _validate_robots_pacing(settings: Settings) -> None:
    why = "is required when frontier.robots.crawl.delay.enabled is true (StormCrawler's CrawlDelayPolicy)"
    if settings.partition_url_mode != "byHost":
        raise ConfigError("partition.url.mode", f"byHost {why}")
    if not settings.fetcher_max_crawl_delay_force:
        raise ConfigError("fetcher.max.crawl.delay.force", f"true {why}")
    if ROBOTS_DELAY_KEY not in settings.metadata_persist:
        raise ConfigError("metadata.persist", f"an entry {ROBOTS_DELAY_KEY!r} {why}")
    for pattern in settings.metadata_transfer:
        if key_matches(pattern, ROBOTS_DELAY_KEY):
            raise ConfigError(
                "metadata.transfer",
                f"{pattern!r} matches {ROBOTS_DELAY_KEY!r}: an outlink must never inherit its parent's delay",
            )
