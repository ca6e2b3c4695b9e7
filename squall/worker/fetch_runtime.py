"""The fetcher's runtime: one object per worker holding its gate, fence, duplicate-copy tracking and hand-backs.

Created once when the worker's fetcher agent starts (:func:`agents.common.fetch_runtime`)
and handed to the agents that need it; nothing here is a module global.

* **The gate.** One :class:`squall.policy.pace.PaceState` per queue, updated
  with the same :func:`squall.policy.pace.after_fetch` the queue regulator
  applies to the hosts table; the fetch queues (:mod:`squall.policy.fetch_queues`,
  ``fetcher.threads.number`` slots overall) grant each turn no earlier than
  that pace allows (docs/architecture.md invariant 6).
* **Take-over and copies** (invariants 2 and 3): see :meth:`FetcherRuntime.pace`,
  :meth:`FetcherRuntime.revoke` and :class:`squall.worker.handout_copies.HandoutCopies`.
* **The fence** (:mod:`squall.policy.lease`). No turn is granted, and no
  robots.txt redirect hop starts, while the group coordinator has not
  confirmed this worker's membership for ``kafka.session.timeout.secs``
  minus ``kafka.session.fence.margin.secs`` (KIP-62's session timeout) — a
  worker cut off from the broker stops before another can own its hosts.
  URLs wait meanwhile: a confirmation lets them go on; an answer that ends
  the membership hands every waiting URL back at once (the revoke that
  follows waits for their acknowledgements, and the fence opens only after
  the rejoin).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from squall.errors import Fenced
from squall.net.http import FetchResult, HttpConfig, HttpFetcher
from squall.net.warc import WarcWriter
from squall.policy import fetch_decision as fd
from squall.policy.backoff import TokenBucket, try_take
from squall.policy.control import OperatorState
from squall.policy.fetch_queues import FetchQueues, wake_after_s
from squall.policy.frontier import HostRecord
from squall.policy.pace import FetchEnded, PaceState, after_fetch, delay_in_force, on_takeover, stricter
from squall.policy.partition import PartitionMode, partition_for_key, partition_key
from squall.policy.records import FetchMessage, SignalMessage, StatusMessage
from squall.policy.urls import NormalizerConfig
from squall.settings import Settings
from squall.worker.fetch_archive import archive_fetch
from squall.worker.group_lease import GroupLease
from squall.worker.handout_copies import HandoutCopies

if TYPE_CHECKING:
    from agents.robots import RobotsService

log = logging.getLogger("squall.fetcher")
FENCE_POLL_S = 0.1  # while fenced, how often (s) the fetcher looks for a confirmation of its membership
FENCE_WAKE_S = 1.0  # at most this long (s) before an ended membership hands the waiting URLs back


class Ownership(Protocol):
    """Since when (Unix s) this worker owns each partition: ``agents.worker_state.WorkerState``."""

    @property
    def assigned_at(self) -> Mapping[int, float]: ...


@dataclass(frozen=True)
class HandBack:
    """A turn refused: the URL goes back to the frontier, due at ``until_s`` (Unix s).

    The queue is blocked beyond the hand-out lead, or its partition was revoked.
    """

    until_s: float


@dataclass
class Turn:
    """A granted turn of queue ``key`` of ``runtime``: ended exactly once, with the pace event of what it did."""

    key: str
    runtime: FetcherRuntime
    pace: PaceState | None = None

    def end(self, event: FetchEnded) -> PaceState:
        if self.pace is None:
            self.pace = self.runtime.done(self.key, event)
        return self.pace


class FetcherRuntime:
    """Per-worker fetch machinery (see the module docstring), created in the worker's event loop.

    Args:
        settings: the worker's settings (read here, when the worker starts).
        ownership: since when each partition is owned (take-over rule).
        load_host: the durable host record of a key (the hosts table).
        audit: records a request start in the politeness audit:
            ``(key, start_s, required_delay_s, blocked_until_s)``.
        fenced_seconds: adds seconds spent fenced to the worker's metric.
        lease: the worker's membership lease, or None (no squall consumer).
        robots: makes the robots.txt service, given the callback that audits
            each robots.txt request (``(origin, hop)``, :meth:`audit_robots`).
    """

    def __init__(
        self,
        settings: Settings,
        *,
        ownership: Ownership,
        load_host: Callable[[str], HostRecord],
        audit: Callable[[str, float, float, float], None],
        fenced_seconds: Callable[[float], None],
        lease: Callable[[], GroupLease | None],
        robots: Callable[[Callable[[str, int], None]], RobotsService],
    ) -> None:
        self.settings = settings
        self.config = fd.FetchConfig.from_settings(settings)
        partition = PartitionMode.from_settings(settings)  # the one reading of the partition settings
        self.partitions, self.mode, self.by_ip = partition.partitions, partition.mode, partition.by_ip
        self.normalizer = NormalizerConfig.from_settings(settings)
        self.inflight_timeout_s: float = settings.frontier_inflight_timeout_secs
        self._ownership = ownership
        self._load_host = load_host
        self._audit = audit
        self._fenced_seconds = fenced_seconds
        self._lease = lease
        self.queues = FetchQueues.from_settings(settings)
        self.paces: dict[str, tuple[float, PaceState]] = {}  # key → (owned since, pace)
        self.robots = robots(self.audit_robots)
        self.http: HttpFetcher | None = None
        self.buckets: dict[str, TokenBucket] = {}  # optional token bucket per queue
        self.refreshing: set[str] = set()
        self.copies = HandoutCopies(settings.fetcher_recent_fetch_ids)  # which copy of a hand-out to fetch
        self.warc: WarcWriter | None = None
        self.free_slots: int = settings.fetcher_threads_number
        self.takeover_fetches = 0  # an earlier owner's hand-outs fetched here (a repeat if it had fetched one)
        self.ends_seen = 0  # ended group memberships handled (GroupLease.ended): their waiting URLs handed back
        self.wakeup = asyncio.Event()
        self.pending = asyncio.Semaphore(settings.fetcher_max_pending_urls)
        self.run_here: Callable[[FetchMessage, Any], Coroutine[Any, Any, None]] | None = None  # see start()
        self.apply_here: Callable[[StatusMessage, Any], Awaitable[bool]] | None = None  # the status updater's
        self.operator = OperatorState(self.config.pace, self.partitions)  # crawl.pause, crawl.delay

    async def start(self, run_here: Callable[[FetchMessage, Any], Coroutine[Any, Any, None]]) -> None:
        """Open the HTTP sessions and the archive, start the dispatcher; ``run_here``: the fetcher's task of one hand-out."""
        self.run_here = run_here
        if self.http is None:
            self.http = await HttpFetcher(HttpConfig.from_settings(self.settings)).__aenter__()
            settings = self.settings
            prefix = f"{settings.topology_id}-{socket.gethostname()}-{os.getpid()}"
            if settings.warc_enabled:  # warc.enabled false: no archive
                self.warc = WarcWriter(Path(settings.warc_dir), prefix, settings.warc_max_size)
            asyncio.get_running_loop().create_task(self._dispatch())

    async def start_here(self, msg: FetchMessage, event: Any) -> bool:
        """Start ``msg``, handed out by this worker in ``event`` (a status or a fetch), here; False: use the fetch topic.

        The task runs in ``event``'s context (writes go to the host's partition) and holds its ack until
        the fetch is reported: a rebalance waits for it; after a crash the next owner hands the URL out
        again (:func:`squall.policy.takeover.stranded`). False when ``frontier.handout.inprocess`` is off,
        under byIP, before the fetcher agent started, with ``fetcher.max.pending.urls`` out, or once ``event``
        is ``frontier.handout.inprocess.hold.secs`` old (Kafka's record timestamp: a chain of results
        applied in process holds its first message, whose offset must move on).
        """
        if self.run_here is None or not self.settings.frontier_handout_inprocess or self.by_ip or self.pending.locked():
            return False
        if time.time() - (event.message.timestamp or 0.0) > self.settings.frontier_handout_inprocess_hold_secs:
            return False  # (no timestamp, or the broker's -1: too old)
        await self.launch(msg, event)  # does not wait: not locked
        return True

    async def launch(self, msg: FetchMessage, event: Any) -> None:
        """Run ``run_here`` on ``msg`` once a ``fetcher.max.pending.urls`` slot is free (it acks ``event``); RuntimeError before :meth:`start`."""
        if self.run_here is None:
            raise RuntimeError("FetcherRuntime.launch before start()")
        await self.pending.acquire()
        event.message.incref()
        asyncio.get_running_loop().create_task(self.run_here(msg, event))

    async def close(self) -> None:
        """Close the WARC writer (its last gzip member flushed) and the HTTP sessions; idempotent."""
        if self.warc is not None:
            await asyncio.to_thread(self.warc.close)
            self.warc = None
        if self.http is not None:
            await self.http.close()
            self.http = None

    def pace(self, key: str, now_s: float) -> PaceState:
        """The queue's pace; a queue new to this worker's ownership starts from the durable record.

        A partition kept through a rebalance keeps its paces (the durable
        record may lag them by the signals in flight); one that was away
        and came back starts from the record with the take-over rule, made
        stricter by what this worker still remembers of the queue
        (:func:`squall.policy.pace.stricter`: a Retry-After it was answered
        may not be in the record yet).
        """
        since_s = self._ownership.assigned_at.get(partition_for_key(key, self.partitions), now_s)
        known = self.paces.get(key)
        if known is not None and known[0] == since_s:
            return known[1]
        host = self._load_host(key)
        earlier_owner = any(t < since_s for t in host.live_in_flight(self.inflight_timeout_s, now_s).values())
        pace = on_takeover(host.pace(), now_s, earlier_owner)
        if known is not None:
            pace = stricter(pace, known[1])
        self.paces[key] = (since_s, pace)
        return pace

    async def turn(self, key: str) -> Turn | HandBack:
        """Wait until queue ``key`` may start a request and a slot is free (a Turn), or a HandBack.

        A HandBack comes when the queue is blocked beyond the hand-out lead, or
        its partition was revoked while the URL waited.
        """
        granted: asyncio.Future[HandBack | None] = asyncio.get_running_loop().create_future()
        if until_s := self.operator.hand_back_at(key, self.pace(key, time.time()), time.time(), self.config.lead_s):
            return HandBack(until_s)  # paused, or blocked by the operator: back to the frontier at once
        while not self.queues.add(key, granted, self.pace(key, time.time()).ready_at_s):  # noqa: ASYNC110
            await asyncio.sleep(self.settings.fetcher_queue_full_retry_secs)  # at fetcher.max.queue.size: hold it
        self.wakeup.set()
        hand_back = await granted
        return Turn(key, self) if hand_back is None else hand_back

    def done(self, key: str, event: FetchEnded) -> PaceState:
        """A turn of queue ``key`` ended with ``event``: apply the pace model, re-time the queue, free the slot."""
        pace = after_fetch(self.pace(key, event.at_s), event, self.operator.pace_config(key))
        self.paces[key] = (self.paces[key][0], pace)
        if pace.capped_retry_after:
            log.warning(
                "squall: Retry-After of %s is longer than frontier.retry.after.max.secs (%.0f s): waiting the cap",
                key,
                self.config.pace.retry_after_max_s,
            )
        self.queues.finish(key, pace.ready_at_s)
        self._hand_back_if_blocked(key, pace, event.at_s)
        self.free_slots += 1
        self.wakeup.set()
        return pace

    def learn(self, signal: SignalMessage, record: HostRecord) -> None:
        """The queue regulator applied ``signal`` of another worker's fetch; ``record``: the host's durable record now.

        Such a signal — an earlier owner's last request, answered after this
        worker took the queue over — reaches the hosts table after :meth:`pace`
        read it; without this its Retry-After or delay would be unknown here
        (e.g. a ``Retry-After: 2`` answered to a cut-off worker). Merged with
        :func:`squall.policy.pace.stricter`; the queue is re-timed, and a long
        block hands its waiting URLs back. Signals of this worker's own fetches
        change nothing: its pace is ahead of the record (a lagging record would
        bring back a back-off a later success ended). A queue with no pace here
        yet reads the record when it starts.
        """
        if signal.handed_out_at_s is None or self.copies.received(signal.url, signal.handed_out_at_s):
            return
        key = signal.key
        known = self.paces.get(key)
        if known is None:
            return
        pace = stricter(record.pace(), known[1])  # decoded only here: most signals are this worker's own
        if pace == known[1]:
            return
        self.paces[key] = (known[0], pace)
        self.queues.set_ready_at(key, pace.ready_at_s)
        self._hand_back_if_blocked(key, pace, time.time())
        self.wakeup.set()

    def _hand_back_if_blocked(self, key: str, pace: PaceState, now_s: float) -> None:
        """A long block of queue ``key`` (:func:`squall.policy.fetch_decision.hand_back_until`): its waiting URLs go back."""
        until_s = fd.hand_back_until(pace, now_s, self.config)
        if until_s is not None:
            for waiting in self.queues.drain(key):
                if not waiting.done():
                    waiting.set_result(HandBack(until_s))

    def audit(self, key: str, required_delay_s: float | None = None) -> None:
        """Record in the politeness audit that a request of queue ``key`` starts now (right before it is sent).

        The delay in force is the pace model's: the delay after the queue's last request
        (``required_delay_s`` overrides it, for a robots.txt redirect hop); the block is the pace's.
        """
        now = time.time()
        pace = self.pace(key, now)
        self._audit(key, now, pace.delay_s if required_delay_s is None else required_delay_s, pace.blocked_until_s)

    def hop_delay_s(self, key: str) -> float:
        """The delay (s) a robots.txt redirect hop of queue ``key`` waits (the Crawl-delay is not known yet)."""
        return delay_in_force(self.operator.pace_config(key), None, self.pace(key, time.time()), time.time())

    def revoke(self, partitions: set[int]) -> None:
        """Hand back the URLs of revoked partitions still waiting here: they are not fetched by this worker.

        Each is reported "not attempted, due when this worker's pace would
        have let it start" (and acknowledged), so the new owner — maybe this
        worker again — hands it out anew and no offset stays unacknowledged
        (an unacknowledged offset would hold back every later commit of its
        partition). Paces stay: a partition kept through the rebalance goes on
        from them (see :meth:`pace`); fetches already started finish and report.
        """
        now_s = time.time()
        for key, waiting in self.queues.drop_keys(lambda k: partition_for_key(k, self.partitions) in partitions):
            if not waiting.done():
                waiting.set_result(HandBack(max(now_s, self.pace(key, now_s).ready_at_s)))

    def forget_unowned(self, owned: set[int]) -> None:
        """Drop the paces and token buckets of queues whose partition this worker no longer owns (bounded memory).

        Only after a rebalance has completed: the paces of a partition kept
        through it stay (they may be ahead of the durable record).
        """
        for table in (self.paces, self.buckets):
            for key in [k for k in table if partition_for_key(k, self.partitions) not in owned]:
                del table[key]

    def stale(self, msg: FetchMessage) -> bool:
        """The hosts table no longer has this hand-out in flight: its result was applied, or it was superseded."""
        if self._load_host(msg.key).in_flight.get(msg.url) == msg.handed_out_at_s:
            return False
        log.info("squall: skipping stale hand-out of %s", msg.url)
        return True

    async def fence_open(self, ended: int | None = None) -> bool:
        """Wait while the fence is closed (see the module docstring), or until the membership ends.

        Args:
            ended: the count of ended memberships (:attr:`GroupLease.ended`) the
                caller started under; default: the last one this fetcher handled.

        Returns:
            True when the fence is open under the same membership; False when
            the membership ended since ``ended``: the group is giving this
            worker's partitions away, so every URL waiting here was handed back
            (the revoke that follows waits for their acknowledgements, and the
            fence would open only after it: no waiting across it).
        """
        lease = self._lease()
        if lease is None:
            return True
        start = self.ends_seen if ended is None else ended
        fenced_at: float | None = None  # set once a membership was ever confirmed: before it nothing is owned
        while lease.ended == start and not lease.holds():
            if fenced_at is None and lease.ever_confirmed and not lease.leaving:
                fenced_at = time.monotonic()
                log.warning(
                    "squall: fenced: the group coordinator has not confirmed this worker's membership for "
                    "kafka.session.timeout.secs (%g s) minus kafka.session.fence.margin.secs (%g s): "
                    "no request starts",
                    lease.fence.session_timeout_s,
                    lease.fence.margin_s,
                )
            await asyncio.sleep(FENCE_POLL_S)  # renewed in the consumer thread: polled
        if fenced_at is not None:
            self._fenced_seconds(time.monotonic() - fenced_at)
        if lease.ended == start:
            if fenced_at is not None:
                log.warning(
                    "squall: membership confirmed again after %.1f s fenced: requests start again",
                    time.monotonic() - fenced_at,
                )
            return True
        if self.ends_seen != lease.ended:
            self.ends_seen = lease.ended
            if lease.leaving:
                log.info("squall: leaving the group: the URLs waiting here go back to the frontier")
            else:
                log.warning("squall: membership ended: the URLs waiting here go back to the frontier")
            self.revoke(set(range(self.partitions)))
        return False

    async def _dispatch(self) -> None:
        while True:
            while not await self.fence_open():  # an ended membership hands its waiting URLs back here
                continue  # then the fence stays closed until the rejoined group confirms this worker
            now = time.time()
            while self.free_slots > 0:
                taken = self.queues.take(now)
                if taken is None:
                    break
                key, granted = taken
                self.free_slots -= 1
                if granted.done():  # its task was cancelled: give the turn back at once
                    self.queues.release(key)
                    self.free_slots += 1
                else:
                    granted.set_result(None)
            ready = self.queues.next_ready()
            delay_s = self.paces[ready[1]][1].delay_s if ready is not None and ready[1] in self.paces else None
            timeout = None if ready is None or self.free_slots == 0 else wake_after_s(ready[0], now, delay_s)
            if timeout == 0.0 and ready is not None and ready[0] > now:  # the last stretch: a turn of the loop
                await asyncio.sleep(0)
                continue
            lease = self._lease()
            if lease is not None:  # wake up in time to see the fence close, or the membership end
                open_s = min(lease.open_for_s(), FENCE_WAKE_S)
                timeout = open_s if timeout is None else min(timeout, open_s)
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), timeout)

    def count_takeover_fetch(self, msg: FetchMessage) -> None:
        """Count (and log) a fetch of a hand-out an earlier owner of the partition made: a repeat if it fetched it."""
        since_s = self._ownership.assigned_at.get(partition_for_key(msg.key, self.partitions), msg.handed_out_at_s)
        if msg.handed_out_at_s is not None and since_s is not None and msg.handed_out_at_s < since_s:
            self.takeover_fetches += 1
            log.info(
                "squall: fetching %s handed out by an earlier owner (a repeat if it was fetched before the "
                "take-over; %d so far)",
                msg.url,
                self.takeover_fetches,
            )

    async def archive(self, msg: FetchMessage, result: FetchResult) -> float | None:
        """Write one fetch to the WARC file: :func:`squall.worker.fetch_archive.archive_fetch` (None: not archiving)."""
        if self.warc is None:
            return None
        settings = self.settings
        return await archive_fetch(self.warc, msg, result, settings.warc_inline_max_bytes, settings.warc_revisits)

    async def token(self, key: str) -> None:
        """Wait for a token of the queue's bucket (``fetcher.server.rate``; 0 = off)."""
        rate_per_s, burst = self.settings.fetcher_server_rate, self.settings.fetcher_server_burst
        while True:
            allowed, bucket, wait_s = try_take(self.buckets.get(key), time.time(), rate_per_s, burst)
            if bucket is not None:
                self.buckets[key] = bucket
            if allowed:
                return
            await asyncio.sleep(wait_s)

    def audit_robots(self, origin: str, hop: int) -> None:
        """The politeness audit of a robots.txt request of ``origin`` (``hop`` 0: /robots.txt, then each redirect)."""
        key = partition_key(origin + "/", self.mode)
        self.audit(key, self.hop_delay_s(key) if hop else None)

    async def hop_pause(self, key: str) -> None:
        """Before a robots.txt redirect hop: wait the queue's delay, as between any two requests, and the fence.

        Raises:
            Fenced: the group membership ended during the pause (or its wait at
            the fence): the hop's partition is being given away, the hop is not
            made here.
        """
        ended = self.ends_seen
        await asyncio.sleep(self.hop_delay_s(key))
        if not await self.fence_open(ended):
            raise Fenced(f"robots.txt hop of {key}: the group membership ended")
