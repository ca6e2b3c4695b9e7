"""URL records and the one transition function of URL status (StormCrawler's DefaultScheduler).

A :class:`UrlRecord` is the value of the urls table (key: canonical URL). The
status updater calls :func:`apply` for every message of the status topic; the
function is pure and idempotent: applying the same message twice gives the
same record (re-delivery is normal under at-least-once, docs/architecture.md
invariant 3).

Rules (transient vs permanent failures; StormCrawler keys):

* DISCOVERED for an unknown URL creates the record, due now. For a known URL
  it changes nothing (deduplication is exact on the canonical URL).
* A fetcher result (``fetched_at_s`` set) updates the record once: a message
  whose ``fetched_at_s`` is not newer than the record's ``last_fetch_at_s``
  is a re-delivery and changes nothing.
* FETCHED / REDIRECTION: next fetch after ``fetchInterval.default`` minutes.
* FETCH_ERROR: counted; retried after ``fetchInterval.fetch.error`` minutes,
  doubled for each further error; at ``max.fetch.errors`` the URL becomes
  ERROR ``fetch.too_many_errors``. A rate-limited answer (429/503) is
  rescheduled at its host's Retry-After/back-off time and is *not* counted as
  a fetch failure; it counts as a rate limit instead: after ``max.rate.limits``
  consecutive rate-limited answers (no success between) the URL ends ERROR
  ``http.rate_limited.too_many`` instead of cycling forever.
* ERROR: next fetch after ``fetchInterval.error`` minutes (-1: never).
* Sitemaps (:mod:`squall.policy.sitemaps`): a FETCHED URL whose record carries
  ``sitemap.changefreq`` is revisited after that interval instead of
  ``fetchInterval.default`` (``sitemap.changefreq.revisit``); a DISCOVERED
  message for a known FETCHED / REDIRECTION URL whose ``sitemap.lastmod``
  is newer than the last fetch makes it due at that lastmod (so at once)
  and records its ``sitemap.*`` metadata — idempotent, and a no-op once the
  URL was fetched after that lastmod. A known URL that a robots.txt or an
  index now names as a sitemap takes the ``isSitemap`` marker (due again if
  it was fetched as a page, or at once after a fetch handed out unmarked).
* DISCOVERED *with* ``fetched_at_s`` is "not attempted, try again at
  ``retry_after_s``" (:attr:`Incoming.NOT_ATTEMPTED`): robots.txt
  unavailable (``robots.unavailable``), a hand-out given back because its
  host is blocked (``fetch.deferred``) or moved (``fetch.address_changed``).
  The status stays as it was and no attempt is counted. That is the whole
  meaning of the pair, decided once: the wire keeps StormCrawler's five
  statuses (no new status value, so existing messages and tables read the
  same), :meth:`StatusMessage.from_bytes` refuses the pair without one of
  those reasons, and :func:`kind_of` names it, so no code tests for it
  by hand.

The transitions, by record status (any) × :class:`Incoming` kind of the
message — :func:`apply` is the only code that changes a record's status
(:func:`new_record` creates it DISCOVERED; the status updater only moves a
record to a new key, byIP):

==================  ===================  =====================  ==================================
incoming            to status            reason                 next fetch at
==================  ===================  =====================  ==================================
DISCOVERY           unchanged            unchanged              unchanged (sitemap news aside)
NOT_ATTEMPTED       unchanged            the message's          ``retry_after_s``, else the time
FETCHED             FETCHED              the message's (none)   + revisit interval (None: never),
                                                                adaptive if configured (below)
REDIRECTION         REDIRECTION          the message's (none)   + ``fetchInterval.default``
RATE_LIMITED        unchanged            http.rate_limited      ``retry_after_s``, else the time
 (the max.rate.     ERROR                http.rate_limited      + ``fetchInterval.error``
 limits-th)                               .too_many
FETCH_ERROR         FETCH_ERROR          the message's          + ``fetchInterval.fetch.error``
                                                                × 2^(errors−1), ≥ ``retry_after_s``
 (the max.fetch.    ERROR                fetch.too_many_errors  + ``fetchInterval.error``
 errors-th)
ERROR               ERROR                the message's          + ``fetchInterval.error``
==================  ===================  =====================  ==================================

Adaptive revisits (``scheduler.adaptive.*``, StormCrawler's AdaptiveScheduler,
:func:`squall.policy.adaptive.adaptive_interval`): a FETCHED result whose payload digest equals the
record's, or a 304, multiplies the record's interval by 1 + rate.incr (at most
the maximum); a new digest moves it towards the minimum; the first one keeps
the default. The record keeps the interval, the reason and the digest (a 304
keeps the earlier digest: it carries no body).

Every result counts one attempt except NOT_ATTEMPTED and an ERROR without
``http_status`` (a policy rejection: no request was made); FETCHED and
REDIRECTION reset ``fetch_errors`` and ``rate_limits``. A result whose
``fetched_at_s`` is not newer than the record's last one changes nothing,
whatever its kind. ``tests/unit/test_schedule_table.py`` checks every cell, from
each of the five statuses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from squall.policy.adaptive import AdaptiveConfig, IntervalReason, adaptive_interval
from squall.policy.codec import evolve, field_values
from squall.policy.reasons import Reason, Status
from squall.policy.records import StatusMessage
from squall.policy.sitemaps import (
    CHANGEFREQ_KEY,
    LASTMOD_KEY,
    LEVEL_KEY,
    SITEMAP_KEY,
    changefreq_interval_s,
    is_marked,
    lastmod_of,
)

if TYPE_CHECKING:
    from squall.settings import Settings

SEED_PRIORITY = 1
DISCOVERED_PRIORITY = 0


@dataclass(frozen=True)
class ScheduleConfig:
    """Revisit and retry rules; intervals in SECONDS (converted from StormCrawler's minutes)."""

    default_interval_s: float | None  # fetchInterval.default; None = never revisit
    fetch_error_interval_s: float | None  # fetchInterval.fetch.error; None = never retry
    error_interval_s: float | None  # fetchInterval.error; None = never
    max_fetch_errors: int  # max.fetch.errors
    max_rate_limits: int | None  # max.rate.limits; None = never give up
    changefreq_revisit: bool  # sitemap.changefreq.revisit
    adaptive: AdaptiveConfig | None = None  # scheduler.adaptive.*; None = scheduler.adaptive.enabled false

    @classmethod
    def from_settings(cls, settings: Settings) -> ScheduleConfig:
        def minutes(value: float) -> float | None:
            return None if value < 0 else value * 60.0

        limit = settings.max_rate_limits
        return cls(
            minutes(settings.fetch_interval_default),
            minutes(settings.fetch_interval_fetch_error),
            minutes(settings.fetch_interval_error),
            settings.max_fetch_errors,
            None if limit < 0 else limit,
            settings.sitemap_changefreq_revisit,
            AdaptiveConfig.from_settings(settings) if settings.scheduler_adaptive_enabled else None,
        )


@dataclass(frozen=True)
class UrlRecord:
    """One URL of the frontier (value of the urls table).

    Times are Unix seconds; ``next_fetch_at_s`` None means never again.
    ``attempts`` counts requests made for this URL, ``fetch_errors`` the
    consecutive transient failures, ``rate_limits`` the consecutive
    rate-limited answers (429/503). ``chain`` is the redirect chain that led
    here (oldest first). ``payload_digest``: the ``WARC-Payload-Digest`` form
    digest of the last full body fetched; ``archived_at_s``: the WARC-Date
    (Unix s) of the full response record holding it (None: not archived).
    ``fetch_interval_s`` /
    ``interval_reason``: the adaptive revisit interval (s) and why
    (``scheduler.adaptive.enabled``; None otherwise). ``status``,
    ``reason`` and ``interval_reason`` are enums; the table holds their
    values (:meth:`to_dict`).
    """

    url: str
    key: str
    status: Status = Status.DISCOVERED
    depth: int = 0
    priority: int = DISCOVERED_PRIORITY
    attempts: int = 0
    fetch_errors: int = 0
    rate_limits: int = 0
    next_fetch_at_s: float | None = None
    last_fetch_at_s: float | None = None
    discovered_at_s: float = 0.0
    reason: Reason | None = None
    http_status: int | None = None
    redirect_to: str | None = None
    etag: str | None = None
    last_modified: str | None = None
    metadata: dict[str, list[str]] = field(default_factory=dict)
    chain: list[str] = field(default_factory=list)
    truncated: bool = False
    payload_digest: str | None = None
    archived_at_s: float | None = None
    fetch_interval_s: float | None = None
    interval_reason: IntervalReason | None = None

    def to_dict(self) -> dict[str, Any]:
        d = field_values(self)
        d["status"] = self.status.value
        d["reason"] = None if self.reason is None else self.reason.value
        d["interval_reason"] = None if self.interval_reason is None else self.interval_reason.value
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> UrlRecord:
        """Rebuild a record from :meth:`to_dict` output (unknown fields are ignored).

        Raises:
            ValueError: an unknown status or reason value.
            KeyError: no status.
        """
        d = dict(d)
        d["status"] = Status(d["status"])
        if d.get("reason") is not None:
            d["reason"] = Reason.of(d["reason"])
        if d.get("interval_reason") is not None:
            d["interval_reason"] = IntervalReason(d["interval_reason"])
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})

    @property
    def pending(self) -> bool:
        """True while the URL waits for a (first or repeated) fetch attempt."""
        return self.status in (Status.DISCOVERED, Status.FETCH_ERROR) and self.next_fetch_at_s is not None

    def reported_since(self, handed_out_at_s: float) -> bool:
        """Whether a result of the hand-out at ``handed_out_at_s`` (Unix s) is in this record already.

        The fetcher sends a URL's status before its signal, and the signal
        frees the host's hand-out place: between the two the host record
        still lists the URL in flight while this record is due again. A due
        index rebuilt then must index it (nothing else would: in the broker kill -9
        fault trial a deferred URL was left out of the index for good).
        """
        return self.last_fetch_at_s is not None and self.last_fetch_at_s >= handed_out_at_s

    def awaited(self, handed_out_at_s: float | None) -> bool:
        """Whether the URL waits for the result of its hand-out at ``handed_out_at_s`` (Unix s; None: not in flight).

        Such a URL stays out of the due index: its result puts it back. A
        record written again without that result — a rebuild reading it, or
        an earlier result delivered again after a rebalance (Kafka re-reads a
        partition from its committed offset) — must not index it, or the
        URL is handed out twice.
        """
        return handed_out_at_s is not None and not self.reported_since(handed_out_at_s)


def new_record(msg: StatusMessage, *, url: str, key: str, now_s: float, metadata: dict[str, list[str]]) -> UrlRecord:
    """The record of a newly discovered URL, due at once (seeds get a higher priority)."""
    priority = msg.priority if msg.priority is not None else (SEED_PRIORITY if msg.seed else DISCOVERED_PRIORITY)
    return UrlRecord(
        url=url,
        key=key,
        depth=msg.depth,
        priority=priority,
        next_fetch_at_s=now_s,
        discovered_at_s=now_s,
        metadata=metadata,
        chain=list(msg.chain),
    )


class Incoming(Enum):
    """What a status message is for a known URL's record: the columns of the transition table."""

    DISCOVERY = "discovery"  # no fetched_at_s: the URL was found (again), whatever the status
    NOT_ATTEMPTED = "not_attempted"  # DISCOVERED with fetched_at_s: handed back without a request
    FETCHED = "fetched"
    REDIRECTION = "redirection"
    RATE_LIMITED = "rate_limited"  # FETCH_ERROR http.rate_limited: a rate signal, not a failure
    FETCH_ERROR = "fetch_error"  # any other FETCH_ERROR: a transient failure, counted
    ERROR = "error"  # permanent (404/410, robots denial, policy rejection, redirect loop, ...)


_BY_STATUS = {
    Status.DISCOVERED: Incoming.NOT_ATTEMPTED,
    Status.FETCHED: Incoming.FETCHED,
    Status.REDIRECTION: Incoming.REDIRECTION,
    Status.FETCH_ERROR: Incoming.FETCH_ERROR,
    Status.ERROR: Incoming.ERROR,
}


def kind_of(msg: StatusMessage) -> Incoming:
    """The :class:`Incoming` kind of ``msg`` (see the module table)."""
    if msg.fetched_at_s is None:
        return Incoming.DISCOVERY
    if msg.status is Status.FETCH_ERROR and msg.reason is Reason.HTTP_RATE_LIMITED:
        return Incoming.RATE_LIMITED
    return _BY_STATUS[msg.status]


def apply(
    record: UrlRecord, msg: StatusMessage, config: ScheduleConfig, metadata: dict[str, list[str]] | None = None
) -> UrlRecord:
    """The one transition function: ``record`` after ``msg``; ``record`` itself when nothing changes.

    ``metadata`` is the record's metadata after ``metadata.persist`` was
    applied (None keeps it). Plain DISCOVERED messages for a known URL return
    ``record`` unchanged. Rules: the module table, by :func:`kind_of`.
    """
    kind = kind_of(msg)
    if kind is Incoming.DISCOVERY:
        return _listed_again(record, msg)  # a rediscovery: exact dedup, unless a sitemap says it changed
    at = msg.fetched_at_s
    assert at is not None
    if record.last_fetch_at_s is not None and at <= record.last_fetch_at_s:
        return record  # re-delivery of a result already applied
    meta = record.metadata if metadata is None else metadata
    base = evolve(
        record,
        last_fetch_at_s=at,
        http_status=msg.http_status,
        reason=msg.reason,
        metadata=meta,
        truncated=msg.truncated,
    )
    if kind is Incoming.NOT_ATTEMPTED:  # robots.txt unavailable, deferred or moved: wait and try again
        return evolve(base, next_fetch_at_s=msg.retry_after_s if msg.retry_after_s is not None else at)
    attempts = record.attempts + 1
    if kind is Incoming.FETCHED:
        interval_s, why = _fetched_interval(record, msg, meta, config)
        return evolve(
            base,
            status=Status.FETCHED,
            attempts=attempts,
            fetch_errors=0,
            rate_limits=0,
            next_fetch_at_s=at if _read_as_page_too_early(meta, msg) else _after(at, interval_s),
            etag=msg.etag or (record.etag if msg.not_modified else None),
            last_modified=msg.last_modified or (record.last_modified if msg.not_modified else None),
            payload_digest=record.payload_digest if msg.not_modified else (msg.payload_digest or record.payload_digest),
            archived_at_s=record.archived_at_s if msg.not_modified else msg.archived_at_s,
            fetch_interval_s=interval_s if why is not None else None,
            interval_reason=why,
        )
    if kind is Incoming.REDIRECTION:
        return evolve(
            base,
            status=Status.REDIRECTION,
            attempts=attempts,
            fetch_errors=0,
            rate_limits=0,
            redirect_to=msg.redirect_to,
            next_fetch_at_s=_after(at, config.default_interval_s),
        )
    if kind is Incoming.RATE_LIMITED:
        # a rate signal, not a failure of this URL: reschedule when the host's block ends
        limits = record.rate_limits + 1
        if config.max_rate_limits is not None and limits >= config.max_rate_limits:
            return evolve(
                base,
                status=Status.ERROR,
                attempts=attempts,
                rate_limits=limits,
                reason=Reason.HTTP_RATE_LIMITED_TOO_MANY,
                next_fetch_at_s=_after(at, config.error_interval_s),
            )
        return evolve(
            base, attempts=attempts, rate_limits=limits, next_fetch_at_s=msg.retry_after_s if msg.retry_after_s else at
        )
    if kind is Incoming.FETCH_ERROR:
        errors = record.fetch_errors + 1
        if errors >= config.max_fetch_errors:
            return evolve(
                base,
                status=Status.ERROR,
                attempts=attempts,
                fetch_errors=errors,
                reason=Reason.FETCH_TOO_MANY_ERRORS,
                next_fetch_at_s=_after(at, config.error_interval_s),
            )
        interval = None if config.fetch_error_interval_s is None else config.fetch_error_interval_s * 2 ** (errors - 1)
        next_at = _after(at, interval)
        if msg.retry_after_s is not None and next_at is not None:
            next_at = max(next_at, msg.retry_after_s)
        return evolve(base, status=Status.FETCH_ERROR, attempts=attempts, fetch_errors=errors, next_fetch_at_s=next_at)
    # ERROR: permanent (404/410, robots denial, policy rejection, redirect loop, ...)
    counted = attempts if msg.http_status is not None else record.attempts  # a policy rejection made no request
    return evolve(base, status=Status.ERROR, attempts=counted, next_fetch_at_s=_after(at, config.error_interval_s))


def _fetched_interval(
    record: UrlRecord, msg: StatusMessage, metadata: Mapping[str, list[str]], config: ScheduleConfig
) -> tuple[float | None, IntervalReason | None]:
    """Revisit interval (s, None = never) of a FETCHED result and its adaptive reason (None: not adaptive)."""
    default_s = _revisit_interval_s(metadata, config)
    if config.adaptive is None or default_s is None:
        return default_s, None
    return adaptive_interval(
        record.fetch_interval_s, record.payload_digest, msg.payload_digest, msg.not_modified, default_s, config.adaptive
    )


def _revisit_interval_s(metadata: Mapping[str, list[str]], config: ScheduleConfig) -> float | None:
    """Revisit interval of a FETCHED URL: its sitemap changefreq when known and enabled, else the default."""
    if config.changefreq_revisit:
        known, interval_s = changefreq_interval_s(metadata)
        if known:
            return interval_s
    return config.default_interval_s


def _read_as_page_too_early(metadata: Mapping[str, list[str]], msg: StatusMessage) -> bool:
    """The record became a sitemap while this fetch of it, handed out unmarked, was in flight."""
    return is_marked(metadata) and not is_marked(msg.metadata)


def _listed_again(record: UrlRecord, msg: StatusMessage) -> UrlRecord:
    """A known URL discovered again: changes only when a sitemap says something new about it.

    * Marked as a sitemap (``isSitemap``) while the record is not (it was
      first found as a link): the record takes the marker and, if already
      fetched, is due again at once so it is read as a sitemap.
    * Listed with a ``sitemap.lastmod`` newer than its last fetch (FETCHED
      or REDIRECTION): due at that lastmod (so at once), ``sitemap.*`` kept.
    """
    if is_marked(msg.metadata) and not is_marked(record.metadata):
        metadata = {**record.metadata, SITEMAP_KEY: ["true"], LEVEL_KEY: list(msg.metadata.get(LEVEL_KEY, ["0"]))}
        due = record.next_fetch_at_s
        if record.last_fetch_at_s is not None and (due is None or due > record.last_fetch_at_s):
            due = record.last_fetch_at_s  # in the past: due at once
        return evolve(record, metadata=metadata, next_fetch_at_s=due)
    lastmod_s = lastmod_of(msg.metadata)
    if (
        lastmod_s is None
        or record.status not in (Status.FETCHED, Status.REDIRECTION)
        or record.last_fetch_at_s is None
        or lastmod_s <= record.last_fetch_at_s
    ):
        return record
    if record.next_fetch_at_s is not None and record.next_fetch_at_s <= lastmod_s:
        return record  # already due by then
    metadata = dict(record.metadata)
    for key in (LASTMOD_KEY, CHANGEFREQ_KEY):
        if key in msg.metadata:
            metadata[key] = list(msg.metadata[key])
    return evolve(record, next_fetch_at_s=lastmod_s, metadata=metadata)


def _after(at_s: float, interval_s: float | None) -> float | None:
    return None if interval_s is None else at_s + interval_s
