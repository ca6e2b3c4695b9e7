"""The fetch decision: what the fetcher does with one handed-out URL, before and after its request.

Pure: no I/O, no clock (``now_s`` is passed in), no Faust. The fetcher agent
(:mod:`agents.fetcher`) is a loop over these functions; every status, reason,
conditional header, pace event and signal of a fetch is decided here.

Before a fetch (:func:`before_fetch`), with the origin's robots.txt known:

====================================  ==========================================
robots / Crawl-delay                  decision
====================================  ==========================================
robots.txt unreachable (§2.3.1.4)     :class:`Skip` DISCOVERED robots.unavailable,
                                      retried when the robots retry is due
disallowed for our agent              :class:`Skip` ERROR robots.denied
Crawl-delay above the cap, no force   :class:`Skip` ERROR crawl_delay.too_long
otherwise                             :class:`Go` with conditional headers
                                      (If-None-Match / If-Modified-Since from
                                      the last fetch), the capped Crawl-delay
                                      and the delay forwarded to the frontier
====================================  ==========================================

After it (:func:`report`): the status messages (the URL's outcome, the
redirect target, the outlinks), and the signal for the queue regulator — the
same :class:`squall.policy.pace.FetchEnded` event the fetcher's gate applied, so
the durable record and the gate agree. A rate-limited URL is due again when
its host's block ends (:attr:`squall.policy.pace.PaceState.ready_at_s`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from squall.errors import InvalidURL
from squall.policy.outcome import Outcome
from squall.policy.pace import FetchEnded, PaceConfig, PaceState
from squall.policy.partition import partition_for_key, partition_key
from squall.policy.reasons import Reason, Status
from squall.policy.records import FetchMessage, SignalKind, SignalMessage, StatusMessage
from squall.policy.robots_rules import RobotsConfig, RobotsRules, effective_crawl_delay
from squall.policy.robots_status import RobotsEntry
from squall.policy.sitemaps import settle_status
from squall.policy.urls import origin_of

if TYPE_CHECKING:
    from squall.settings import Settings

ROBOTS_DELAY_KEY = "robots.crawl.delay"  # metadata forwarded to the frontier (StormCrawler's CrawlDelayPolicy)


@dataclass(frozen=True)
class FetchConfig:
    """What the decisions need from the settings.

    Fields:
        robots: robots.txt settings (Crawl-delay cap and force, StormCrawler's CrawlDelayPolicy).
        pace: the pace model's settings.
        lead_s: ``frontier.handout.lead.secs``: a URL waiting at the fetcher
            for a block that ends later than this is handed back.
        robots_retry_s: ``http.robots.retry.base.secs``: when an unreachable
            robots.txt gives no retry time, its URLs wait this long.
        max_wait_s: half of ``frontier.inflight.timeout.secs``: a URL that
            would wait longer at the fetcher is handed back (else the frontier
            would hand it out again while it waits).
    """

    robots: RobotsConfig
    pace: PaceConfig
    lead_s: float
    robots_retry_s: float
    max_wait_s: float

    @classmethod
    def from_settings(cls, settings: Settings) -> FetchConfig:
        """Build from loaded settings (checked by :mod:`squall.settings.rules`)."""
        return cls(
            robots=RobotsConfig.from_settings(settings),
            pace=PaceConfig.from_settings(settings),
            lead_s=settings.frontier_handout_lead_secs,
            robots_retry_s=settings.http_robots_retry_base_secs,
            max_wait_s=settings.frontier_inflight_timeout_secs / 2,
        )


@dataclass(frozen=True)
class Skip:
    """No request: the URL ends now with ``status`` / ``reason`` (``retry_after_s``: Unix s, or None).

    A DISCOVERED skip is "not attempted, due again at ``retry_after_s``" and
    its reason says why (:attr:`Reason.not_attempted`: ``robots.unavailable``,
    ``fetch.deferred``, ``fetch.address_changed``); the status updater refuses
    the pair otherwise.

    Raises:
        ValueError: DISCOVERED with a reason that is not a "not attempted" one.
    """

    status: Status
    reason: Reason
    retry_after_s: float | None = None

    def __post_init__(self) -> None:
        if self.status is Status.DISCOVERED and not self.reason.not_attempted:
            raise ValueError(f"a DISCOVERED skip needs a 'not attempted' reason, got {self.reason.value}")


@dataclass(frozen=True)
class Go:
    """Fetch now with ``headers``.

    ``crawl_delay_s``: the robots Crawl-delay after the cap (s), None = none;
    ``forward_s``: whole seconds forwarded as ``robots.crawl.delay`` when the
    cap cut a longer delay (StormCrawler's CrawlDelayPolicy), None = none.
    """

    headers: dict[str, str] = field(default_factory=dict)
    crawl_delay_s: float | None = None
    forward_s: int | None = None


def fetch_id(msg: FetchMessage) -> str:
    """The id of one hand-out's fetch: re-deliveries of the same hand-out share it."""
    return handout_id(msg.url, msg.handed_out_at_s)


def handout_id(url: str, handed_out_at_s: float) -> str:
    """The fetch id of the hand-out of ``url`` at ``handed_out_at_s`` (Unix s), as the hosts table records it."""
    return f"{handed_out_at_s:.6f}:{url}"


def before_fetch(
    msg: FetchMessage, entry: RobotsEntry, rules: RobotsRules, now_s: float, config: FetchConfig
) -> Skip | Go:
    """Decide what to do with ``msg`` once its origin's robots.txt is known (see the module table)."""
    if entry.blocks_origin:  # RFC 9309 §2.3.1.4: unreachable robots.txt = complete disallow; the URL waits
        return Skip(Status.DISCOVERED, Reason.ROBOTS_UNAVAILABLE, entry.retry_at_s or now_s + config.robots_retry_s)
    if not rules.allowed(msg.url):
        return Skip(Status.ERROR, Reason.ROBOTS_DENIED)
    decision = effective_crawl_delay(rules.crawl_delay_s, config.robots)
    if decision.too_long:
        return Skip(Status.ERROR, Reason.CRAWL_DELAY_TOO_LONG)
    headers = {}
    if msg.etag:
        headers["If-None-Match"] = msg.etag
    if msg.last_modified:
        headers["If-Modified-Since"] = msg.last_modified
    return Go(headers=headers, crawl_delay_s=decision.delay_s, forward_s=decision.forward_s)


def hand_back_until(pace: PaceState, now_s: float, config: FetchConfig) -> float | None:
    """When URLs waiting at the fetcher for this queue should be handed back to the frontier.

    Returns:
        The queue's earliest start (Unix s) when a Retry-After or back-off
        block ends more than ``lead_s`` from now, or the start is more than
        ``max_wait_s`` away (holding the URLs that long would only hide them
        from the frontier and risk the in-flight timeout); else None.
    """
    if pace.blocked_until_s - now_s > config.lead_s or pace.ready_at_s - now_s > config.max_wait_s:
        return pace.ready_at_s
    return None


def ended(
    msg: FetchMessage,
    kind: SignalKind,
    at_s: float,
    *,
    requested: bool,
    go: Go | None = None,
    retry_until_s: float | None = None,
) -> FetchEnded:
    """The pace event of one fetch (or of a decision that made no request)."""
    return FetchEnded(
        fetch_id=fetch_id(msg),
        kind=kind,
        at_s=at_s,
        requested=requested,
        crawl_delay_s=go.crawl_delay_s if go is not None else None,
        retry_until_s=retry_until_s if kind is SignalKind.RETRY_AFTER else None,
        forwarded_crawl_delay_s=go.forward_s if go is not None else None,
    )


def robots_ended(fid: str, rules: RobotsRules, at_s: float, config: FetchConfig) -> FetchEnded:
    """The pace event of a robots.txt request: the Crawl-delay it just taught spaces the next request.

    Its kind is OTHER whatever the answer: a robots.txt never resets nor
    extends a back-off (its own unavailability is handled by the robots retry).
    """
    decision = effective_crawl_delay(rules.crawl_delay_s, config.robots)
    return FetchEnded(fetch_id=fid, kind=SignalKind.OTHER, at_s=at_s, crawl_delay_s=decision.delay_s)


def signal(msg: FetchMessage, event: FetchEnded, pace: PaceState) -> SignalMessage:
    """The signal that carries ``event`` to the queue regulator (the durable use of the pace model)."""
    return SignalMessage(
        key=msg.key,
        url=msg.url,
        fetch_id=event.fetch_id,
        kind=event.kind,
        at_s=event.at_s,
        requested=event.requested,
        delay_s=pace.delay_s,
        crawl_delay_s=event.crawl_delay_s,
        retry_until_s=event.retry_until_s,
        robots_crawl_delay_s=event.forwarded_crawl_delay_s,
        handed_out_at_s=msg.handed_out_at_s,
    )


def admitted_origin(url: str, depth: int, judge: Callable[[str, int], Reason | None]) -> tuple[str, Reason | None]:
    """The origin of a handed-out URL, and why it may not be fetched now (None: it may).

    ``judge`` is the scope in force now (:class:`squall.policy.scope.LinkJudge`:
    ``urlfilters.*``, depth, URL-shape guards): a URL queued under an earlier
    configuration that it now refuses ends with that reason instead of being
    fetched. A URL without a usable origin (a hand-out no frontier would
    make) ends with its ``url.*`` reason (origin ``""``).
    """
    try:
        return origin_of(url), judge(url, depth)
    except InvalidURL as exc:
        return "", exc.reason


def skipped(msg: FetchMessage, skip: Skip, now_s: float) -> tuple[StatusMessage, FetchEnded]:
    """The status and pace event of a URL decided without a request."""
    return _ended_as(msg, skip, now_s), ended(msg, SignalKind.OTHER, now_s, requested=False)


def _ended_as(msg: FetchMessage, skip: Skip, now_s: float) -> StatusMessage:
    """The status of a hand-out that ends as ``skip`` says, with nothing fetched."""
    return StatusMessage(
        url=msg.url,
        status=skip.status,
        reason=skip.reason,
        depth=msg.depth,
        metadata=msg.metadata,
        fetched_at_s=now_s,
        retry_after_s=skip.retry_after_s,
        chain=msg.chain,
    )


def deferred(msg: FetchMessage, until_s: float, now_s: float) -> tuple[StatusMessage, FetchEnded]:
    """A hand-out given back unattempted: due again at ``until_s`` (its host is blocked)."""
    return skipped(msg, Skip(Status.DISCOVERED, Reason.FETCH_DEFERRED, until_s), now_s)


def failed_unexpectedly(msg: FetchMessage, now_s: float) -> tuple[StatusMessage, FetchEnded]:
    """A bug in the fetch path: the URL is retried later (FETCH_ERROR fetch.protocol); no request is assumed."""
    status = _ended_as(msg, Skip(Status.FETCH_ERROR, Reason.FETCH_PROTOCOL), now_s)
    # requested=True is the politer assumption: the host waits a delay as if a request was made
    return status, ended(msg, SignalKind.OTHER, now_s, requested=True)


def made_request(reason: Reason) -> bool:
    """Whether a transport failure with ``reason`` reached the host.

    An address refused by the SSRF guard, or a URL refused before connecting
    (``url.*``), sent nothing; a timeout, a connection or protocol error did
    (or may have: the politer reading).
    """
    return reason is not Reason.FETCH_BLOCKED_ADDRESS and not reason.is_url


@dataclass(frozen=True)
class Fetched:
    """What :func:`report` needs of an HTTP answer (None fields: no answer)."""

    etag: str | None = None
    last_modified: str | None = None
    truncated: bool = False
    payload_digest: str | None = None  # squall.net.warc.payload_digest of the body (None: not computed)
    archived_at_s: float | None = None  # WARC-Date (Unix s) of the full record of this payload (None: not archived)


def revisit_of(msg: FetchMessage, payload_digest: str | None) -> float | None:
    """The WARC-Date (Unix s) of the archived response this fetch repeats, or None to archive it in full.

    A fetch whose payload digest equals the one of the URL's last archived
    full response (carried by the hand-out) is written as a revisit record
    of it (WARC 1.1 §6.7.2, identical-payload-digest; Heritrix's duplicate
    reduction).
    """
    if payload_digest is None or msg.archived_at_s is None or msg.payload_digest != payload_digest:
        return None
    return msg.archived_at_s


def report(
    msg: FetchMessage,
    outcome: Outcome,
    fetched: Fetched | None,
    at_s: float,
    pace: PaceState,
    parsed: tuple[dict[str, list[str]], list[StatusMessage]] | None,
    go: Go | None,
) -> list[StatusMessage]:
    """The status messages of one fetch: the URL's own, a redirect target's, the outlinks'.

    Args:
        msg: the hand-out.
        outcome: :func:`squall.policy.outcome.classify_http` / ``classify_failure``.
        fetched: the answer's validators and truncation; None after a transport failure.
        at_s: when the fetch ended (Unix s).
        pace: the queue's pace after this fetch (its ``ready_at_s`` is when a
            rate-limited URL is due again).
        parsed: the parse step's (metadata to record, outlinks), or None.
        go: the decision the fetch was made under (its forwarded Crawl-delay).
    """
    # robots.crawl.delay is rebuilt from the local rules, never taken from incoming metadata
    metadata = {k: v for k, v in msg.metadata.items() if k != ROBOTS_DELAY_KEY}
    if go is not None and go.forward_s is not None:
        metadata[ROBOTS_DELAY_KEY] = [str(go.forward_s)]
    retry_after_s = outcome.retry_after_s
    if outcome.reason is Reason.HTTP_RATE_LIMITED:
        retry_after_s = pace.ready_at_s  # due again when the host's Retry-After / back-off block ends
    if parsed is not None:
        metadata.update(parsed[0])
    own = StatusMessage(
        url=msg.url,
        status=outcome.status,
        depth=msg.depth,
        metadata=metadata,
        reason=outcome.reason,
        http_status=outcome.http_status,
        redirect_to=outcome.redirect_to,
        fetched_at_s=at_s,
        retry_after_s=retry_after_s,
        etag=fetched.etag if fetched else None,
        last_modified=fetched.last_modified if fetched else None,
        not_modified=outcome.not_modified,
        truncated=bool(fetched and fetched.truncated),
        payload_digest=fetched.payload_digest if fetched and outcome.status is Status.FETCHED else None,
        archived_at_s=fetched.archived_at_s if fetched and outcome.status is Status.FETCHED else None,
        chain=msg.chain,
    )
    out = [settle_status(own)]  # a fetched sitemap that cannot be read ends ERROR with its reason
    if outcome.status is Status.REDIRECTION and outcome.redirect_to:
        out.append(
            StatusMessage(
                url=outcome.redirect_to,
                depth=msg.depth,
                chain=[*msg.chain, msg.url],
                metadata={k: v for k, v in metadata.items() if k != ROBOTS_DELAY_KEY and not k.startswith("parse.")},
            )
        )
    if parsed is not None:
        out.extend(parsed[1])
    return out


def same_partition_batch(statuses: list[StatusMessage], own: int, key: str, mode: str, partitions: int) -> int | None:
    """Index in ``statuses`` of the first outlink batch of queue ``key``'s partition, or None.

    The batch (plain DISCOVERED, not a seed) rides in the page's own result
    (``StatusMessage.discovered``), so the status updater applies both in one
    event; ``own`` is the index of that result, ``mode`` is
    ``partition.url.mode``, ``partitions`` is ``topology.partitions``.
    """
    partition = partition_for_key(key, partitions)
    for i, status in enumerate(statuses):
        if (
            i != own
            and status.fetched_at_s is None
            and status.status is Status.DISCOVERED
            and not status.seed
            and partition_for_key(partition_key(status.url, mode), partitions) == partition
        ):
            return i
    return None
