"""Fetcher (StormCrawler's FetcherBolt): fetch topic → robots, fetch queues, HTTP, parse, WARC.

The agent loop only decodes and starts one task per handed-out URL. The
event's ack is held (one extra reference on the Kafka message) until the
task has sent the URL's results and signal, so its offset is committed only
then and a crash re-delivers it — at-least-once. (Faust's ``stream.noack()``
is not used: it disables offset tracking for the whole topic.)

Each task waits for its turn in the fetch queues (:mod:`squall.policy.fetch_queues`,
``fetcher.threads.number`` slots overall), whose start times come from the
one pace model (:mod:`squall.policy.pace`); every decision — robots consequences,
statuses, conditional headers, the pace event and the signal — is
:mod:`squall.policy.fetch_decision`'s. URLs are handed out ahead of their host's
delay (``frontier.handout.ahead``), so the next one is already waiting here
when the delay ends and starts within milliseconds of the earliest allowed
time (docs/architecture.md invariant 6).

Re-delivery and take-over (invariants 2 and 3):

* the stale-hand-out check runs *after* the turn is granted, so a copy that
  waited while the first one was fetched sees that its result was applied;
* a copy of a hand-out already waiting or fetching here is not fetched again
  (its ack waits for the first copy's result);
* a queue first seen by this worker starts from the durable hosts-table pace,
  and waits one delay after the take-over when an earlier owner's hand-outs
  were still out (:func:`squall.policy.pace.on_takeover`);
* revoked partitions drop their queues: URLs still waiting are handed back
  to the frontier (reported unattempted and acknowledged), never fetched here;
* the fence (:mod:`squall.policy.lease`): no turn is granted, and no
  robots.txt redirect hop starts, while the group coordinator has not
  confirmed this worker's membership for ``kafka.session.timeout.secs``
  minus ``kafka.session.fence.margin.secs`` — a worker cut off from the
  broker stops before another can own its hosts. URLs wait meanwhile: a
  confirmation lets them go on; an answer that ends the membership hands
  every waiting URL back at once (the revoke that follows waits for their
  acknowledgements, and the fence opens only after the rejoin).

Tasks are created inside the agent's iteration, so they carry the event's
context: the robots table write of :class:`agents.robots.RobotsService`
goes to the partition of the URL's host, as Faust requires.

``partition.url.mode: byIP`` (:func:`_address_route`): before it waits for
a turn, a URL's host is resolved (a fresh cached answer, else a lookup —
never while the queue is held, seed 004) and :func:`squall.policy.address_key.fetch_route`
decides: its requests (robots.txt of its origin included) connect to the
address its key names, with the URL's own Host header and SNI; a host that
resolves elsewhere now is handed back to move to its new key
(``fetch.address_changed``); an unresolvable one ends ``fetch.dns``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from pathlib import Path

from agents import documents, parser
from agents.addresses import addresses, host_port
from agents.common import deadletter, load_host
from agents.observe import audit_request, audits, metrics, observe_fetch, observe_result
from agents.render import close_pool, render_step
from agents.robots import RobotsService
from agents.runtime import INFLIGHT_TIMEOUT_S, PARTITIONS, owned_partitions, state
from agents.sitemaps import emit_robots_sitemaps
from squall.errors import BlockedAddress, Fenced, FetchError, InvalidURL, MessageError
from squall.net.http import FetchResult, HttpConfig, HttpFetcher
from squall.net.warc import WarcWriter
from squall.policy import fetch_decision as fd
from squall.policy.address_key import Connect, Move, fetch_route
from squall.policy.backoff import TokenBucket, try_take
from squall.policy.fetch_queues import FetchQueues
from squall.policy.frontier import HostRecord
from squall.policy.outcome import classify_failure, classify_http
from squall.policy.pace import FetchEnded, PaceState, after_fetch, delay_in_force, on_takeover, stricter
from squall.policy.partition import is_ip_literal, partition_for_key, partition_key
from squall.policy.records import FetchMessage, Reason, SignalKind, SignalMessage, Status, StatusMessage
from squall.policy.sitemaps import is_marked
from squall.policy.urls import NormalizerConfig, origin_of
from squall.worker.group_lease import GroupLease
from topology import app, fetch_topic, settings, signals_topic, status_topic

log = logging.getLogger("squall.fetcher")
CONFIG = fd.FetchConfig.from_settings(settings)
NORMALIZER = NormalizerConfig.from_settings(settings)
MODE = settings.partition_url_mode
BY_IP = MODE == "byIP"
THREADS: int = settings.fetcher_threads_number
MAX_PENDING: int = settings.fetcher_max_pending_urls
MAX_REDIRECTS: int = settings.http_redirect_max
RATE_PER_S: float = settings.fetcher_server_rate
BURST: int = settings.fetcher_server_burst
RECENT_FETCH_IDS: int = settings.fetcher_recent_fetch_ids  # finished fetch ids remembered to recognise late copies
INLINE_PARSE_BYTES: int = settings.parser_inline_max_bytes
INLINE_WARC_BYTES: int = settings.warc_inline_max_bytes
QUEUE_FULL_RETRY_S: float = settings.fetcher_queue_full_retry_secs  # a full queue is offered the item again after this
FENCE_POLL_S = 0.1  # while fenced, how often (s) the fetcher looks for a confirmation of its membership
FENCE_WAKE_S = 1.0  # at most this long (s) before an ended membership hands the waiting URLs back


@dataclass(frozen=True)
class HandBack:
    """A turn refused: the URL goes back to the frontier, due at ``until_s`` (Unix s).

    The queue is blocked beyond the hand-out lead, or its partition was revoked.
    """

    until_s: float


@dataclass
class Turn:
    """A granted turn of queue ``key``: ended exactly once, with the pace event of what it did."""

    key: str
    pace: PaceState | None = None

    def end(self, event: FetchEnded) -> PaceState:
        if self.pace is None:
            self.pace = runtime.done(self.key, event)
        return self.pace


@dataclass
class FetcherRuntime:
    """Per-worker fetch machinery, created in the worker's event loop on first use.

    ``paces`` is the fetcher's gate: one :class:`squall.policy.pace.PaceState` per
    queue, updated with the same :func:`squall.policy.pace.after_fetch` the regulator
    applies to the hosts table.
    """

    queues: FetchQueues = field(default_factory=lambda: FetchQueues.from_settings(settings))
    paces: dict[str, tuple[float, PaceState]] = field(default_factory=dict)  # key → (owned since, pace)
    robots: RobotsService = field(
        default_factory=lambda: RobotsService(
            CONFIG.robots, settings.http_robots_cache_lru_size, before_request=lambda o, h: _audit_robots(o, h)
        )
    )
    http: HttpFetcher | None = None
    buckets: dict[str, TokenBucket] = field(default_factory=dict)  # optional token bucket per queue
    refreshing: set[str] = field(default_factory=set)
    active: dict[str, list] = field(default_factory=dict)  # fetch id → events of later copies (acked with it)
    recent: OrderedDict[str, None] = field(default_factory=OrderedDict)
    warc: WarcWriter | None = None
    free_slots: int = THREADS
    # hand-outs of an earlier owner fetched here: each is a repeat if that owner had fetched it before dying
    takeover_fetches: int = 0
    ends_seen: int = 0  # ended group memberships handled (GroupLease.ended): their waiting URLs handed back
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    pending: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_PENDING))

    async def start(self) -> None:
        if self.http is None:
            self.http = await HttpFetcher(HttpConfig.from_settings(settings)).__aenter__()
            prefix = f"{settings.topology_id}-{socket.gethostname()}-{os.getpid()}"
            if settings.warc_enabled:  # warc.enabled false: no archive
                self.warc = WarcWriter(Path(settings.warc_dir), prefix, settings.warc_max_size)
            asyncio.get_running_loop().create_task(self._dispatch())

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
        since_s = state.assigned_at.get(partition_for_key(key, PARTITIONS), now_s)
        known = self.paces.get(key)
        if known is not None and known[0] == since_s:
            return known[1]
        host = load_host(key)
        earlier_owner = any(t < since_s for t in host.live_in_flight(INFLIGHT_TIMEOUT_S, now_s).values())
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
        while not self.queues.add(key, granted, self.pace(key, time.time()).ready_at_s):  # noqa: ASYNC110
            await asyncio.sleep(QUEUE_FULL_RETRY_S)  # queue at fetcher.max.queue.size: hold the item
        self.wakeup.set()
        hand_back = await granted
        return Turn(key) if hand_back is None else hand_back

    def done(self, key: str, event: FetchEnded) -> PaceState:
        """A turn of queue ``key`` ended with ``event``: apply the pace model, re-time the queue, free the slot."""
        pace = after_fetch(self.pace(key, event.at_s), event, CONFIG.pace)
        self.paces[key] = (self.paces[key][0], pace)
        if pace.capped_retry_after:
            log.warning(
                "squall: Retry-After of %s is longer than frontier.retry.after.max.secs (%.0f s): waiting the cap",
                key,
                CONFIG.pace.retry_after_max_s,
            )
        self.queues.finish(key, pace.ready_at_s)
        self._hand_back_if_blocked(key, pace, event.at_s)
        self.free_slots += 1
        self.wakeup.set()
        return pace

    def learn(self, signal: SignalMessage, record: HostRecord) -> None:
        """The queue regulator applied ``signal`` of another worker's fetch; ``record``: the host's durable record now.

        Such a signal — an earlier owner's last request, answered after this
        worker took the queue over — reaches the hosts table after
        :meth:`pace` read it; without this its Retry-After or delay would be
        unknown here (fault trial 9103: a ``Retry-After: 2`` answered to the
        cut-off worker, and this one asked the host 1.2 s later). Merged
        with :func:`squall.policy.pace.stricter`; the queue is re-timed, and a
        long block hands its waiting URLs back. Signals of this worker's own
        fetches change nothing: its pace is ahead of the record (a lagging
        record would bring back a back-off that a later success ended). A
        queue with no pace here yet reads the record when it starts.
        """
        if signal.handed_out_at_s is None or self.received(signal.url, signal.handed_out_at_s):
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
        until_s = fd.hand_back_until(pace, now_s, CONFIG)
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
        audit_request(key, now, pace.delay_s if required_delay_s is None else required_delay_s, pace.blocked_until_s)

    def hop_delay_s(self, key: str) -> float:
        """The delay (s) a robots.txt redirect hop of queue ``key`` waits (the Crawl-delay is not known yet)."""
        return delay_in_force(CONFIG.pace, None, self.pace(key, time.time()), time.time())

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
        for key, waiting in self.queues.drop_keys(lambda k: partition_for_key(k, PARTITIONS) in partitions):
            if not waiting.done():
                waiting.set_result(HandBack(max(now_s, self.pace(key, now_s).ready_at_s)))

    def forget_unowned(self, owned: set[int]) -> None:
        """Drop the paces and token buckets of queues whose partition this worker no longer owns (bounded memory).

        Only after a rebalance has completed: the paces of a partition kept
        through it stay (they may be ahead of the durable record).
        """
        for table in (self.paces, self.buckets):
            for key in [k for k in table if partition_for_key(k, PARTITIONS) not in owned]:
                del table[key]

    def first_copy(self, fid: str, event) -> bool:
        """True for the first copy of a hand-out here; a later copy is parked and acked with the first."""
        if fid in self.recent:
            event.ack()
            return False
        if fid in self.active:
            self.active[fid].append(event)
            return False
        self.active[fid] = []
        return True

    def received(self, url: str, handed_out_at_s: float) -> bool:
        """Whether this worker got the fetch message of that hand-out (waiting, fetching, or done recently)."""
        fid = fd.handout_id(url, handed_out_at_s)
        return fid in self.active or fid in self.recent

    def finished(self, fid: str) -> None:
        for copy in self.active.pop(fid, []):
            copy.ack()
        self.recent[fid] = None
        while len(self.recent) > RECENT_FETCH_IDS:
            self.recent.popitem(last=False)

    def _lease(self) -> GroupLease | None:
        """The worker's membership lease (squall's Kafka consumer, :mod:`squall.worker.kafka_consumer`), if any."""
        return getattr(app.consumer, "lease", None)

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
            metrics.fenced_seconds.inc(time.monotonic() - fenced_at)
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
            self.revoke(set(range(PARTITIONS)))
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
            ready = self.queues.next_ready_at_s()
            timeout = None if ready is None or self.free_slots == 0 else max(0.0, ready - now)
            lease = self._lease()
            if lease is not None:  # wake up in time to see the fence close, or the membership end
                open_s = min(lease.open_for_s(), FENCE_WAKE_S)
                timeout = open_s if timeout is None else min(timeout, open_s)
            self.wakeup.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wakeup.wait(), timeout)


runtime = FetcherRuntime()


@app.on_before_shutdown.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _close_on_shutdown(sender, **kwargs) -> None:
    """Close what the fetcher opened, once the consumer has stopped: the WARC file, HTTP sessions, the browser."""
    await runtime.close()
    await close_pool()


@app.on_partitions_revoked.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _drop_revoked(sender, revoked, **kwargs) -> None:
    runtime.revoke({tp.partition for tp in revoked if tp.topic == fetch_topic.get_topic_name()})


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _forget_unowned(sender, **kwargs) -> None:
    owned = owned_partitions()
    runtime.forget_unowned(owned)
    audits.forget_unowned(owned)


@app.agent(fetch_topic)
async def fetcher(stream):
    await runtime.start()
    async for event in stream.events():
        try:
            msg = FetchMessage.from_bytes(event.value)
        except MessageError as exc:
            await deadletter(event.value, exc)
            continue
        await runtime.pending.acquire()
        event.message.incref()  # hold the ack: the stream's own ack leaves it pending until _run acks
        asyncio.get_running_loop().create_task(_run(msg, event))


async def _run(msg: FetchMessage, event) -> None:
    fid = fd.fetch_id(msg)
    try:
        if not runtime.first_copy(fid, event):
            return
        reported = await _fetch(msg, event)
        if reported is not None:
            statuses, event_ended, pace = reported
            await _send(msg, statuses, event_ended, pace)
        event.ack()
        runtime.finished(fid)
    except Exception:  # a bug must not kill the worker nor hold the host: fail the URL transiently
        log.exception("squall: fetch of %s failed unexpectedly", msg.url)
        await _fail_transiently(msg, event, fid)
    finally:
        runtime.pending.release()


async def _send(msg: FetchMessage, statuses: list[StatusMessage], event_ended: FetchEnded, pace: PaceState) -> None:
    """Send the URL's other statuses, wait until the broker has them, then its own result with its signal.

    The handed-out URL's own result carries the signal that frees the
    hand-out and the page's outlinks of its own partition (one message: the
    status updater applies them in one event, with one write of each host
    record). The order matters across a crash: a signal applied frees the
    hand-out in the hosts table, and a re-delivered copy of it is then
    skipped as stale (:func:`_stale`); were it on the broker before the
    outlinks of other partitions and a redirect's target (a SIGKILL between
    their produce batches), those would be lost. A delivery error raises:
    the fetch message stays unacknowledged and is re-delivered.
    """
    observe_result(statuses[0])
    own = next((i for i, s in enumerate(statuses) if s.url == msg.url and s.fetched_at_s is not None), None)
    batch = None if own is None or BY_IP else _same_partition_batch(statuses, own, msg.key)
    pending = []
    for i, status in enumerate(statuses):
        if i != own and i != batch:
            key = msg.key if status.url == msg.url else partition_key(status.url, MODE)  # its own: the queue's key
            pending.append(await status_topic.send(key=key.encode(), value=status.to_bytes()))
    await asyncio.gather(*pending)
    signal = fd.signal(msg, event_ended, pace)
    if own is None:  # no result of the URL itself to carry it: the signal alone, to the queue regulator
        await signals_topic.send(key=msg.key.encode(), value=signal.to_bytes())
        return
    result = replace(statuses[own], signal=signal, discovered=None if batch is None else statuses[batch])
    await status_topic.send(key=msg.key.encode(), value=result.to_bytes())


def _same_partition_batch(statuses: list[StatusMessage], own: int, key: str) -> int | None:
    """Index of the first outlink batch (plain DISCOVERED) of queue ``key``'s partition, or None."""
    partition = partition_for_key(key, PARTITIONS)
    for i, status in enumerate(statuses):
        if (
            i != own
            and status.fetched_at_s is None
            and status.status is Status.DISCOVERED
            and not status.seed
            and partition_for_key(partition_key(status.url, MODE), PARTITIONS) == partition
        ):
            return i
    return None


async def _fail_transiently(msg: FetchMessage, event, fid: str) -> None:
    """FETCH_ERROR (retried later) and a signal that frees the host, then ack; never raises."""
    try:
        status, event_ended = fd.failed_unexpectedly(msg, time.time())
        pace = after_fetch(runtime.pace(msg.key, event_ended.at_s), event_ended, CONFIG.pace)
        await _send(msg, [status], event_ended, pace)
        event.ack()
        runtime.finished(fid)
    except Exception:  # un-acked: re-delivered to the partition's next owner
        log.exception("squall: could not report the failure of %s", msg.url)


def _stale(msg: FetchMessage) -> bool:
    """The hosts table no longer has this hand-out in flight: its result was applied, or it was superseded."""
    return load_host(msg.key).in_flight.get(msg.url) != msg.handed_out_at_s


async def _fetch(msg: FetchMessage, event) -> tuple[list[StatusMessage], FetchEnded, PaceState] | None:
    """One hand-out, turn by turn: robots.txt first (its own request), then the page → what to report.

    Returns None when there is nothing to report (a stale copy).
    """
    try:
        origin = origin_of(msg.url)
    except InvalidURL as exc:  # a hand-out no frontier would make (a bad message): it ends with its reason
        status, event_ended = fd.skipped(msg, fd.Skip(Status.ERROR, exc.reason), time.time())
        return [status], event_ended, runtime.pace(msg.key, event_ended.at_s)
    address = None
    if BY_IP:
        if _stale(msg):  # a late copy must not move nor fail a URL whose result was applied
            log.info("squall: skipping stale hand-out of %s", msg.url)
            return None
        routed = await _address_route(msg)
        if not isinstance(routed, Connect):
            return routed
        address = routed.address
    while True:
        turn = await runtime.turn(msg.key)
        now = time.time()
        if isinstance(turn, HandBack):
            status, event_ended = fd.deferred(msg, turn.until_s, now)
            return [status], event_ended, after_fetch(runtime.pace(msg.key, now), event_ended, CONFIG.pace)
        try:
            if _stale(msg):  # checked after the turn: a copy that waited sees the first copy's result
                log.info("squall: skipping stale hand-out of %s", msg.url)
                turn.end(fd.ended(msg, SignalKind.OTHER, now, requested=False))
                return None
            known = runtime.robots.cached(origin)
            if known is None or not known[0].is_fresh(now):
                blocked = await _robots_turn(msg, origin, turn, address)
                if blocked is not None:
                    return blocked
                continue  # robots.txt was a request to this host: the page waits its own turn
            if known[0].needs_refresh(now, CONFIG.robots) and origin not in runtime.refreshing:
                # still fresh: use it now, refresh in the background (created here, so it carries this event)
                runtime.refreshing.add(origin)
                asyncio.get_running_loop().create_task(_refresh_robots(origin, msg.key, event))
            return await _fetch_page(msg, turn, *known, now, address)
        finally:
            # an unexpected error never holds the host: the turn ends as a request (the politer reading)
            turn.end(FetchEnded(fetch_id="aborted:" + fd.fetch_id(msg), kind=SignalKind.OTHER, at_s=time.time()))


async def _address_route(msg: FetchMessage) -> Connect | tuple[list[StatusMessage], FetchEnded, PaceState]:
    """byIP: Connect to the key's address, or what to report of a URL whose host moved or cannot be used."""
    host, port = host_port(msg.url)
    route = fetch_route(msg.key, host, await addresses.fresh(host, port))
    if isinstance(route, Connect):
        return route
    now = time.time()
    if isinstance(route, Move):  # not attempted: the status updater moves its record to the new key
        log.info("squall: %s now resolves to %s (queued under %s): moving it", host, route.key, msg.key)
        status, event_ended = fd.skipped(msg, fd.Skip(Status.DISCOVERED, Reason.FETCH_ADDRESS_CHANGED, now), now)
        statuses = [status]
    else:  # fetch.dns (FETCH_ERROR, retried) or fetch.blocked_address (ERROR); no request was made
        event_ended = fd.ended(msg, SignalKind.OTHER, now, requested=False)
        statuses = fd.report(msg, classify_failure(route.reason), None, now, runtime.pace(msg.key, now), None, None)
    return statuses, event_ended, after_fetch(runtime.pace(msg.key, now), event_ended, CONFIG.pace)


async def _robots_turn(
    msg: FetchMessage, origin: str, turn: Turn, address: str | None
) -> tuple[list[StatusMessage], FetchEnded, PaceState] | None:
    """Fetch robots.txt of ``origin`` in ``turn``; what to report if the origin may not be contacted, else None."""
    try:
        assert runtime.http is not None  # started before the first hand-out
        entry, rules = await runtime.robots.refresh(origin, runtime.http, lambda: _hop_pause(msg.key), address)
    except BlockedAddress as exc:  # SSRF guard: the origin's address is refused, nothing was requested
        event_ended = fd.ended(msg, SignalKind.OTHER, time.time(), requested=False)
        pace = turn.end(event_ended)
        return fd.report(msg, classify_failure(exc.reason), None, event_ended.at_s, pace, None, None), event_ended, pace
    except Fenced as exc:  # the new owner of the host's partition fetches the URL: back to the frontier
        log.info("squall: %s", exc)
        now = time.time()
        status, event_ended = fd.deferred(msg, now, now)
        return [status], event_ended, turn.end(event_ended)
    turn.end(fd.robots_ended(f"robots:{fd.fetch_id(msg)}", rules, time.time(), CONFIG))
    await emit_robots_sitemaps(origin, entry, msg.key)  # its Sitemap: lines enter as DISCOVERED (marked)
    return None


async def _fetch_page(
    msg: FetchMessage, turn: Turn, entry, rules, now: float, address: str | None
) -> tuple[list[StatusMessage], FetchEnded, PaceState]:
    """The page request of a granted turn, and what to report of it."""
    decision = fd.before_fetch(msg, entry, rules, now, CONFIG)
    if isinstance(decision, fd.Skip):
        status, event_ended = fd.skipped(msg, decision, now)
        return [status], event_ended, turn.end(event_ended)
    _count_takeover_fetch(msg)
    await _token(msg.key)
    assert runtime.http is not None
    runtime.audit(msg.key)
    try:
        result = await runtime.http.fetch(msg.url, headers=decision.headers, address=address)
    except FetchError as exc:
        outcome = classify_failure(exc.reason)
        event_ended = fd.ended(msg, outcome.signal, time.time(), requested=fd.made_request(exc.reason), go=decision)
        pace = turn.end(event_ended)
        return fd.report(msg, outcome, None, event_ended.at_s, pace, None, decision), event_ended, pace
    outcome = classify_http(
        result.status,
        url=msg.url,
        location=result.location,
        retry_after=result.header("Retry-After"),
        chain=msg.chain,
        now_s=result.ended_at_s,
        max_redirects=MAX_REDIRECTS,
        normalizer=NORMALIZER,
    )
    observe_fetch(result)
    archived_at_s = await _archive(msg, result)
    if outcome.parse:  # a JavaScript page is rendered inside this turn (issue 12): it counts as a fetch of its host
        result = await render_step(msg, result, runtime)
    event_ended = fd.ended(
        msg, outcome.signal, result.ended_at_s, requested=True, go=decision, retry_until_s=outcome.retry_after_s
    )
    pace = turn.end(event_ended)  # the delay runs from the end of the request (or of its render)
    parsed = await _parse(msg, result) if outcome.parse else None
    await documents.emit(msg, result, parsed)  # documents.enabled: the page's document (documents topic)
    fetched = fd.Fetched(
        etag=result.header("ETag"),
        last_modified=result.header("Last-Modified"),
        truncated=result.truncated,
        payload_digest=result.payload_digest,
        archived_at_s=archived_at_s,
    )
    return fd.report(msg, outcome, fetched, result.ended_at_s, pace, parsed, decision), event_ended, pace


async def _parse(msg: FetchMessage, result: FetchResult) -> tuple[dict[str, list[str]], list[StatusMessage]]:
    """The parse step: on the loop for a page up to ``parser.inline.max.bytes``, else in a thread.

    A 50 000-entry sitemap or a large page takes seconds to read: off the
    event loop; a small page costs less than the hand-off to a thread.
    """
    if len(result.body) <= INLINE_PARSE_BYTES and not is_marked(msg.metadata):
        return parser.parse(result, depth=msg.depth, metadata=msg.metadata)
    return await asyncio.to_thread(parser.parse, result, depth=msg.depth, metadata=msg.metadata)


def _count_takeover_fetch(msg: FetchMessage) -> None:
    """Count (and log) a fetch of a hand-out an earlier owner of the partition made: a repeat if it fetched it."""
    since_s = state.assigned_at.get(partition_for_key(msg.key, PARTITIONS), msg.handed_out_at_s)
    if msg.handed_out_at_s is not None and since_s is not None and msg.handed_out_at_s < since_s:
        runtime.takeover_fetches += 1
        log.info(
            "squall: fetching %s handed out by an earlier owner (a repeat if it was fetched before the "
            "take-over; %d so far)",
            msg.url,
            runtime.takeover_fetches,
        )


async def _archive(msg: FetchMessage, result: FetchResult) -> float | None:
    """Write the request and response records of one fetch to the WARC file (if archiving).

    Returns the WARC-Date (Unix s) of the full response record holding this
    payload — this fetch's, or, for a payload identical to the URL's last
    archived one (``warc.revisits``, :func:`squall.policy.fetch_decision.revisit_of`),
    the earlier record the revisit record written instead refers to — or
    None when nothing is archived.

    A body of at most ``warc.inline.max.bytes`` is written on the event loop
    (about half a CPU-millisecond for a 12 KB page, less than handing it to a
    thread and back); a larger one in a thread, so the loop never stalls
    (the writer's lock orders the two).
    """
    if runtime.warc is None:
        return None
    refers_to_s = fd.revisit_of(msg, result.payload_digest) if settings.warc_revisits else None
    if refers_to_s is not None and result.payload_digest is not None:  # unchanged: no second copy of the body
        write = functools.partial(
            runtime.warc.write_revisit,
            msg.url,
            request_headers=result.request_headers,
            status=result.status,
            reason="",
            response_headers=result.headers,
            body_length=len(result.body),
            ip=result.ip,
            fetched_at_s=result.started_at_s,
            payload_digest=result.payload_digest,
            refers_to_date_s=refers_to_s,
            http_version=result.http_version,
        )
    else:
        refers_to_s = None
        write = functools.partial(
            runtime.warc.write_fetch,
            msg.url,
            request_headers=result.request_headers,
            status=result.status,
            reason="",
            response_headers=result.headers,
            body=result.body,
            ip=result.ip,
            fetched_at_s=result.started_at_s,
            truncated=result.truncated,
            http_version=result.http_version,
            payload_digest=result.payload_digest,
        )
    if len(result.body) <= INLINE_WARC_BYTES:
        write()
    else:
        await asyncio.to_thread(write)
    return result.started_at_s if refers_to_s is None else refers_to_s


def _audit_robots(origin: str, hop: int) -> None:
    """The politeness audit of a robots.txt request of ``origin`` (``hop`` 0: /robots.txt, then each redirect)."""
    key = partition_key(origin + "/", MODE)
    runtime.audit(key, runtime.hop_delay_s(key) if hop else None)


async def _hop_pause(key: str) -> None:
    """Before a robots.txt redirect hop: wait the queue's delay, as between any two requests, and the fence.

    Raises:
        Fenced: the group membership ended during the pause (or its wait at
        the fence): the hop's partition is being given away, the hop is not
        made here.
    """
    ended = runtime.ends_seen
    await asyncio.sleep(runtime.hop_delay_s(key))
    if not await runtime.fence_open(ended):
        raise Fenced(f"robots.txt hop of {key}: the group membership ended")


async def _refresh_robots(origin: str, key: str, event) -> None:
    """Refresh a known robots.txt ahead of its expiry, in its own turn of the host's queue (seed 002)."""
    try:
        turn = await runtime.turn(key)
        if isinstance(turn, HandBack):
            return  # the host is blocked: refresh later
        assert runtime.http is not None  # started before the first hand-out
        try:
            entry, rules = await runtime.robots.refresh(
                origin, runtime.http, lambda: _hop_pause(key), key if BY_IP and is_ip_literal(key) else None
            )
            turn.end(fd.robots_ended(f"robots-refresh:{origin}:{time.time():.6f}", rules, time.time(), CONFIG))
        finally:
            turn.end(FetchEnded(fetch_id=f"robots-refresh:{origin}", kind=SignalKind.OTHER, at_s=time.time()))
        await emit_robots_sitemaps(origin, entry, key)  # its Sitemap: lines enter as DISCOVERED (marked)
    except Fenced as exc:  # the host's new owner refreshes it
        log.info("squall: %s", exc)
    except Exception:
        log.exception("squall: background refresh of robots.txt for %s failed", origin)
    finally:
        runtime.refreshing.discard(origin)
        del event


async def _token(key: str) -> None:
    """Wait for a token of the queue's bucket (``fetcher.server.rate``; 0 = off)."""
    while True:
        allowed, bucket, wait_s = try_take(runtime.buckets.get(key), time.time(), RATE_PER_S, BURST)
        if bucket is not None:
            runtime.buckets[key] = bucket
        if allowed:
            return
        await asyncio.sleep(wait_s)
