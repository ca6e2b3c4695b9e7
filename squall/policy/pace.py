"""The one model of a host's pace: when the next request to a queue may start.

Pure: no clock, no I/O, no Faust. The fetcher's in-memory gate (the fetch
queues) and the durable hosts-table record (the queue regulator) are two uses
of this module — both call :func:`after_fetch` with the same
:class:`FetchEnded` event and get the same :class:`PaceState`, so they never
disagree (docs/architecture.md invariant 2).

The delay in force (seconds, from the END of one request to the START of the
next, StormCrawler ``FetcherBolt`` semantics) is the maximum of:

* the operator's delay: ``fetcher.server.delay`` (``fetcher.server.min.delay``
  when ``fetcher.threads.per.queue`` > 1), or the one an operator command set
  for the queue (``host.delay``, :mod:`squall.policy.control`; a floor under
  the Crawl-delay whatever ``fetcher.server.delay.force`` says);
* the robots.txt Crawl-delay of the host, capped per ``fetcher.max.crawl.delay``
  / ``fetcher.max.crawl.delay.force`` (StormCrawler's CrawlDelayPolicy; the cap is applied by
  :func:`squall.policy.robots_rules.effective_crawl_delay`). With
  ``fetcher.server.delay.force`` true (the default) the operator's delay is a
  floor: a site's lower Crawl-delay never speeds up its host. With false, a
  lower Crawl-delay replaces it, never below ``fetcher.server.min.delay``. A
  Crawl-delay of 0 is ignored either way;
* the frontier's robots delay (StormCrawler's CrawlDelayPolicy, whole seconds,
  max-observed-wins; only with ``frontier.robots.crawl.delay.enabled``);
* for a host backing off for longer than ``frontier.backoff.ttl.secs``:
  ``frontier.backoff.max.secs`` (a deprioritised host).

On top of the delay, a block (``blocked_until_s``) holds the host:

* Retry-After (RFC 9110 §10.2.3) is honoured in full up to
  ``frontier.retry.after.max.secs`` (default one day; above it the host waits
  the cap, and :attr:`PaceState.capped_retry_after` tells the caller to log it);
* a 429/503 without a usable Retry-After (absent, invalid, 0 or a date in the
  past) gets the exponential back-off of :mod:`squall.policy.backoff` (
  ``frontier.backoff.base.secs`` doubling per consecutive answer, jitter that
  only lengthens, capped at ``frontier.backoff.max.secs``), so repeated
  answers make the gaps grow;
* a success resets the back-off.

The jitter is drawn from a generator seeded by the fetch id, so the fetcher
and the regulator (and a re-delivered signal) compute the same wait.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from squall.policy.backoff import BackoffConfig, HostBackoff, deprioritised, on_rate_limited, on_success
from squall.policy.codec import evolve
from squall.policy.crawl_delay import CrawlDelayConfig, CrawlDelayState, observe_crawl_delay
from squall.policy.records import SignalKind

if TYPE_CHECKING:
    from squall.settings import Settings


@dataclass(frozen=True)
class PaceConfig:
    """Settings of the pace model (all durations in seconds).

    Fields:
        server_delay_s: the operator's delay — ``fetcher.server.delay``, or
            ``fetcher.server.min.delay`` when ``fetcher.threads.per.queue`` > 1.
        min_delay_s: ``fetcher.server.min.delay``, the lowest delay a site's
            Crawl-delay may set when ``force`` is false.
        force: ``fetcher.server.delay.force``; True = the operator's delay is
            a floor under any Crawl-delay.
        retry_after_max_s: ``frontier.retry.after.max.secs``, longest
            Retry-After honoured (> 0).
        backoff: ``frontier.backoff.*``.
        crawl: ``frontier.robots.*`` (frontier robots pacing, StormCrawler's CrawlDelayPolicy).
    """

    server_delay_s: float
    min_delay_s: float
    force: bool
    retry_after_max_s: float
    backoff: BackoffConfig
    crawl: CrawlDelayConfig

    @classmethod
    def from_settings(cls, settings: Settings) -> PaceConfig:
        """Build from loaded settings (checked by :mod:`squall.settings.rules`)."""
        one_thread = settings.fetcher_threads_per_queue == 1
        return cls(
            server_delay_s=settings.fetcher_server_delay if one_thread else settings.fetcher_server_min_delay,
            min_delay_s=settings.fetcher_server_min_delay,
            force=settings.fetcher_server_delay_force,
            retry_after_max_s=settings.frontier_retry_after_max_secs,
            backoff=BackoffConfig.from_settings(settings),
            crawl=CrawlDelayConfig.from_settings(settings),
        )


@dataclass(frozen=True)
class PaceState:
    """The pace of one queue (host, domain or IP). Times are Unix seconds.

    Fields:
        next_fetch_at_s: earliest start of the next request allowed by the
            delay (end of the last request + the delay in force then).
        delay_s: the delay in force after the last request (s); a new owner
            of the queue waits it after taking over (see :func:`on_takeover`).
        backoff: Retry-After / back-off state; None = never rate limited.
        crawl: the frontier's robots delay (StormCrawler's CrawlDelayPolicy); None = none.
        capped_retry_after: the last Retry-After was longer than
            ``frontier.retry.after.max.secs`` and was cut to it (for logging).
        operator_delay_s: the operator's delay of this queue (s, a ``host.delay``
            command, :mod:`squall.policy.control`): replaces the configured
            ``fetcher.server.delay`` for it; None = the configured one.
        operator_blocked_until_s: an operator's block (``host.block``, Unix s); 0.0 = none.
    """

    next_fetch_at_s: float = 0.0
    delay_s: float = 0.0
    backoff: HostBackoff | None = None
    crawl: CrawlDelayState | None = None
    capped_retry_after: bool = False
    operator_delay_s: float | None = None
    operator_blocked_until_s: float = 0.0

    @property
    def blocked_until_s(self) -> float:
        """No request before this (s): the Retry-After or back-off block, or the operator's; 0.0 = none."""
        return max(self.rate_blocked_until_s, self.operator_blocked_until_s)

    @property
    def rate_blocked_until_s(self) -> float:
        """The Retry-After or back-off block alone (s); 0.0 = none."""
        return self.backoff.blocked_until_s if self.backoff is not None else 0.0

    @property
    def ready_at_s(self) -> float:
        """Earliest start (s) of the next request: max(delay, block)."""
        return max(self.next_fetch_at_s, self.blocked_until_s)


@dataclass(frozen=True)
class FetchEnded:
    """What the pace model needs to know about one finished request (or a decision that made none).

    Fields:
        fetch_id: identifies the fetch (seeds the jitter; re-delivery gives the same result).
        kind: SUCCESS, RETRY_AFTER, RATE_LIMITED or OTHER (see :mod:`squall.policy.outcome`).
        at_s: when the request ended (Unix s).
        requested: a request was sent to the host (False: decided without one,
            e.g. robots denial — then the delay does not restart).
        crawl_delay_s: the host's robots Crawl-delay after the cap (s), None = none.
        retry_until_s: for RETRY_AFTER, the Retry-After time (Unix s).
        forwarded_crawl_delay_s: whole seconds forwarded to the frontier
            (metadata ``robots.crawl.delay``, StormCrawler's CrawlDelayPolicy), None = none.
    """

    fetch_id: str
    kind: SignalKind
    at_s: float
    requested: bool = True
    crawl_delay_s: float | None = None
    retry_until_s: float | None = None
    forwarded_crawl_delay_s: int | None = None


def delay_in_force(config: PaceConfig, crawl_delay_s: float | None, state: PaceState | None, now_s: float) -> float:
    """The delay (s) between the end of one request of a queue and the start of the next.

    Args:
        config: see :class:`PaceConfig`.
        crawl_delay_s: the host's robots.txt Crawl-delay after the
            ``fetcher.max.crawl.delay`` cap (s); None or 0 = none (RFC 9309
            has no Crawl-delay; 0 would only remove politeness, so it is ignored).
        state: the queue's state (frontier robots delay, back-off); None = fresh.
        now_s: current time (Unix s), for the deprioritisation age.

    Returns:
        max(operator delay or Crawl-delay per ``fetcher.server.delay.force``,
        frontier robots delay, deprioritised spacing) — see the module docstring.
    """
    delay_s = config.server_delay_s
    operator_s = state.operator_delay_s if state is not None else None
    if operator_s is not None:
        # the operator's delay of this queue replaces the configured one and is a floor under the Crawl-delay
        delay_s = max(operator_s, crawl_delay_s or 0.0)
    elif crawl_delay_s is not None and crawl_delay_s > 0:
        if config.force:
            delay_s = max(delay_s, crawl_delay_s)  # the operator's delay is a floor
        else:
            delay_s = max(crawl_delay_s, config.min_delay_s)  # the site may speed up its own host, down to min
    if state is not None:
        if config.crawl.enabled and state.crawl is not None and state.crawl.delay_s:
            delay_s = max(delay_s, float(state.crawl.delay_s))  # frontier robots pacing, whole seconds
        if deprioritised(state.backoff, now_s, config.backoff):
            delay_s = max(delay_s, config.backoff.max_s)  # deprioritised: one request per maximum back-off
    return delay_s


def after_fetch(state: PaceState | None, ended: FetchEnded, config: PaceConfig) -> PaceState:
    """The queue's pace after one request (or decision) ended.

    Rules, in order:
        1. SUCCESS resets the back-off; RETRY_AFTER blocks until
           min(``retry_until_s``, ``at_s`` + ``retry_after_max_s``) (never
           earlier than a block already in force); RATE_LIMITED (a 429/503
           whose Retry-After was absent, invalid, 0 or past) adds one
           exponential back-off step with jitter seeded by ``fetch_id``; OTHER
           leaves the back-off as it is.
        2. The forwarded robots delay (StormCrawler's CrawlDelayPolicy) is applied to the frontier's
           robots-delay state (max-observed-wins, decay window).
        3. When a request was made: ``next_fetch_at_s`` = max(previous,
           ``at_s`` + :func:`delay_in_force`). Without a request the delay does
           not restart (nothing reached the server).

    Pure and deterministic: the same (state, ended) always gives the same result.
    """
    state = state or PaceState()
    backoff = state.backoff
    capped = False
    if ended.kind is SignalKind.SUCCESS:
        backoff = on_success(backoff) if backoff is not None else None
    elif ended.kind is SignalKind.RETRY_AFTER and ended.retry_until_s is not None:
        limit_s = ended.at_s + config.retry_after_max_s
        capped = ended.retry_until_s > limit_s
        backoff = _block(backoff, min(ended.retry_until_s, limit_s), ended.at_s)
    elif ended.kind in (SignalKind.RATE_LIMITED, SignalKind.RETRY_AFTER):
        rng = random.Random(zlib.crc32(ended.fetch_id.encode()))  # same jitter on every replay
        backoff = on_rate_limited(backoff, ended.at_s, config.backoff, rng)
    crawl = state.crawl
    if ended.forwarded_crawl_delay_s is not None:
        crawl = observe_crawl_delay(crawl, ended.forwarded_crawl_delay_s, ended.at_s, config.crawl, ended.fetch_id)
    new = evolve(state, backoff=backoff, crawl=crawl, capped_retry_after=capped)
    if not ended.requested:
        return new
    delay_s = delay_in_force(config, ended.crawl_delay_s, new, ended.at_s)
    return evolve(new, delay_s=delay_s, next_fetch_at_s=max(state.next_fetch_at_s, ended.at_s + delay_s))


def on_takeover(state: PaceState | None, now_s: float, previous_owner_active: bool) -> PaceState:
    """The pace a new owner of a queue starts from (restart or rebalance).

    Args:
        state: the durable state (hosts table); None = never seen.
        now_s: when this worker took the queue over (Unix s).
        previous_owner_active: the durable record shows hand-outs of an earlier
            owner that never reported back: one of them may have been fetching
            when that owner died, so its end is unknown but not after ``now_s``.

    Returns:
        ``state``, with ``next_fetch_at_s`` raised to ``now_s`` + the last
        delay in force when ``previous_owner_active`` (docs/architecture.md
        invariant 2: a new owner never starts a host sooner than the old
        owner's pace allowed).
    """
    state = state or PaceState()
    if not previous_owner_active:
        return state
    return evolve(state, next_fetch_at_s=max(state.next_fetch_at_s, now_s + state.delay_s))


def stricter(record: PaceState, memory: PaceState) -> PaceState:
    """The politer union of two views of one queue's pace: ``record`` where ``memory`` asks no more.

    For a worker that gets a queue back after consumer generations it took
    no part in (:func:`squall.policy.takeover.assigned_since`): ``record`` is
    the durable state with the take-over rule (:func:`on_takeover`: what
    another owner did meanwhile), ``memory`` this worker's own pace, which
    may hold what the record does not have yet — its last request, a
    Retry-After answered just before the rebalance (the broker kill -9
    fault trial: a 503 with ``Retry-After: 2`` forgotten across generations 1 → 3,
    the next request 1.7 s later). The later next start, the longer delay
    and the later block win (the block's back-off state with it; the higher
    back-off exponent); of the two robots delay states the one with the
    longer delay (the record's on a tie).

    Also for a signal applied to the record after this worker read it
    (:meth:`squall.worker.fetch_runtime.FetcherRuntime.learn`): an earlier owner's last
    request, answered after the take-over.
    """
    later = memory.backoff is not None and (record.backoff is None or memory.blocked_until_s > record.blocked_until_s)
    backoff = memory.backoff if later else record.backoff
    if backoff is not None and record.backoff is not None and memory.backoff is not None:
        backoff = evolve(backoff, attempts=max(record.backoff.attempts, memory.backoff.attempts))
    return evolve(
        record,
        next_fetch_at_s=max(record.next_fetch_at_s, memory.next_fetch_at_s),
        delay_s=max(record.delay_s, memory.delay_s),
        backoff=backoff,
        crawl=memory.crawl if _crawl_delay_s(memory) > _crawl_delay_s(record) else record.crawl,
    )


def _crawl_delay_s(state: PaceState) -> int:
    """The frontier robots delay (whole s) of ``state``; 0 = none."""
    return (state.crawl.delay_s or 0) if state.crawl is not None else 0


def _block(backoff: HostBackoff | None, until_s: float, now_s: float) -> HostBackoff:
    """A Retry-After block until ``until_s`` (later blocks win); the back-off exponent is kept."""
    current = backoff or HostBackoff()
    since_s = current.backing_off_since_s if current.backing_off_since_s is not None else now_s
    return HostBackoff(
        attempts=current.attempts, blocked_until_s=max(current.blocked_until_s, until_s), backing_off_since_s=since_s
    )
