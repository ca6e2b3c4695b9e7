"""Per-worker, in-memory state shared by the agents (a helper, no agent): caches of the tables, never the truth.

One :class:`WorkerState` per worker (:func:`state`). The due indexes are rebuilt from the urls and hosts tables after every
rebalance (restart included); losing them loses nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, MutableMapping
from typing import Any

from faust.types import TP

from agents.common import config, group_lease, tables
from squall.policy.due_index import DueIndex
from squall.policy.frontier import HostRecord
from squall.policy.handout import eligible_at_s
from squall.policy.partition import partition_for_key, partition_key
from squall.policy.reasons import Reason
from squall.policy.schedule import UrlRecord
from squall.policy.takeover import assigned_since, read_through, release_at_s, results_applied
from topology import app, fetch_topic, settings, status_topic, ticks_topic

log = logging.getLogger("squall.worker_state")


class WorkerState:
    """Due index per owned partition, when a tick was last sent to each, and since when it is owned.

    ``assigned_at`` (partition → Unix s) tells a hand-out of this worker
    from one of an earlier owner (the take-over rule of :mod:`squall.policy.pace`);
    ``stranded`` (partition → {key: Unix s}) lists the hosts holding such
    hand-outs and when they may be handed out again (:mod:`squall.policy.takeover`);
    ``results_end`` (partition → offset) is the status partition's end
    offset when a release first came due.
    ``watched`` (partition → (due Unix s, key, URL, hand-out Unix s) in time
    order) holds this worker's own hand-outs until their fetch messages are
    known to have reached the fetcher (:func:`squall.policy.takeover.own_handout`).
    """

    def __init__(self) -> None:
        self.indexes: dict[int, DueIndex] = {}
        self.tick_sent_at: dict[int, float] = {}
        self.assigned_at: dict[int, float] = {}
        self._assignment_generation: int | None = None  # consumer generation of the last rebuild
        self.stranded: dict[int, dict[str, float]] = {}
        self.results_end: dict[int, int] = {}
        self.watched: dict[int, deque[tuple[float, str, str, float]]] = {}
        self._rebuild_generation = 0

    def index_for_key(self, key: str) -> DueIndex | None:
        return self.indexes.get(partition_for_key(key, settings.topology_partitions))

    async def rebuild(self, partitions: set[int], chunk: int = 2000) -> None:
        """Rebuild the due indexes of ``partitions`` from the tables (after recovery).

        Runs while Faust keeps the assigned partitions' streams paused (it
        resumes them when the rebalance-complete signal returns), so no agent
        pushes or hands out meanwhile; it yields to the loop every ``chunk``
        records, so a million stored URLs do not block the consumer's
        heartbeats past ``kafka.session.timeout.secs`` (which would rebalance
        again, and rebuild again). A rebuild started later (another
        rebalance) makes this one stop.
        """
        self._rebuild_generation += 1
        generation = self._rebuild_generation
        now = time.time()
        started = time.monotonic()
        consumer_generation = app.consumer_generation_id
        self.assigned_at = assigned_since(
            self.assigned_at, partitions, now, self._assignment_generation, consumer_generation
        )
        self._assignment_generation = consumer_generation
        self.indexes = indexes = {p: DueIndex() for p in partitions}
        self.tick_sent_at = {}
        self.stranded = {}
        self.results_end = {}
        self.watched = {}
        try:
            counts = await self._fill(indexes, now, generation, chunk)
        except RuntimeError:  # the tables' stores changed under the iteration: a rebalance, which rebuilds again
            log.info("squall: due index rebuild interrupted by a rebalance")
            return
        if counts is None:
            return
        count, in_flight = counts
        log.info(
            "squall: due index rebuilt for partitions %s: %d URLs scheduled, %d in flight (%.1f s)",
            sorted(partitions),
            count,
            in_flight,
            time.monotonic() - started,
        )

    async def _fill(
        self, indexes: dict[int, DueIndex], now: float, generation: int, chunk: int
    ) -> tuple[int, int] | None:
        """Fill ``indexes`` from the tables: (URLs scheduled, URLs in flight), or None (superseded)."""
        in_flight: dict[str, float] = {}  # URL → hand-out time (s)
        for n, value in enumerate(tables().hosts.values(), 1):
            host = HostRecord.from_dict(value)
            index = indexes.get(partition_for_key(host.key, settings.topology_partitions))
            if index is not None:
                index.set_host_ready(
                    host.key,
                    eligible_at_s(host, now, config().handout),
                )
                live = host.live_in_flight(settings.frontier_inflight_timeout_secs, now)
                in_flight.update(live)
                partition = partition_for_key(host.key, settings.topology_partitions)
                since = self.assigned_at[partition]
                at = release_at_s(live, since, host.delay_s, settings.frontier_takeover_grace_secs)
                if at is not None:
                    self.stranded.setdefault(partition, {})[host.key] = at
                for url, at_s in live.items():  # this worker's own: their messages may have been dropped
                    if at_s >= since:
                        self.watch(partition, host.key, [url], at_s, now)
            if n % chunk == 0 and not await self._still(generation):
                return None
        count = 0
        for n, value in enumerate(tables().urls.values(), 1):
            rec = UrlRecord.from_dict(value)
            index = indexes.get(partition_for_key(rec.key, settings.topology_partitions))
            handed_out_at_s = in_flight.get(rec.url)
            if index is not None and rec.next_fetch_at_s is not None and not rec.awaited(handed_out_at_s):
                index.push(rec.key, rec.url, rec.next_fetch_at_s, rec.priority)
                count += 1
            if n % chunk == 0 and not await self._still(generation):
                return None
        return count, len(in_flight)

    def results_in(self, partition: int) -> bool:
        """Whether the status updater here applied the status messages ``partition`` held when first asked.

        The first call after a rebuild notes the status partition's end
        offset as the consumer last saw it (``highwater``); this and later
        calls compare it with the partition's committed offset
        (:func:`squall.policy.takeover.results_applied`).
        False while the consumer or the end offset is not known yet.
        """
        consumer = getattr(app, "_consumer", None)  # None until the worker started its consumer
        if consumer is None:
            return False
        tp = TP(status_topic.get_topic_name(), partition)
        end = self.results_end.get(partition)
        if end is None:
            try:
                end = consumer.highwater(tp)
            except Exception:  # not fetched from yet
                return False
            if end is None:
                return False
            self.results_end[partition] = end
        committed = getattr(consumer, "_committed_offset", {}).get(tp)
        return results_applied(end, committed)

    def watch(self, partition: int, key: str, urls: Iterable[str], handed_out_at_s: float, now_s: float) -> None:
        """Watch hand-outs of this worker from ``frontier.takeover.grace.secs`` after ``now_s`` (0: off)."""
        grace = settings.frontier_takeover_grace_secs
        if grace > 0:
            self.watched.setdefault(partition, deque()).extend((now_s + grace, key, u, handed_out_at_s) for u in urls)

    def settle_watched(self, partition: int, now_s: float, received: Callable[[str, float], bool]) -> None:
        """Drop the watched hand-outs of ``partition`` due by ``now_s`` that the fetcher ``received``, oldest first.

        Stops at the first one it has not received (or not due yet): only
        such a hand-out makes the next release time due, so a tick is sent
        for it and not for every hand-out's watch.
        """
        watched = self.watched.get(partition)
        while watched and watched[0][0] <= now_s and received(watched[0][2], watched[0][3]):
            watched.popleft()

    def fetches_read(self, partition: int) -> bool:
        """Whether this worker's consumer has read fetch partition ``partition`` up to its end offset now.

        The end offset is the consumer's last view of it (``highwater``); the
        read offset Faust's, the last message it read from the partition
        (:func:`squall.policy.takeover.read_through`). False while either
        is not known, and while the fence is closed (a broker outage: the
        consumer reads nothing and its view of the end offset is old).
        """
        consumer = getattr(app, "_consumer", None)  # None until the worker started its consumer
        lease = group_lease()
        if consumer is None or (lease is not None and not lease.holds()):
            return False
        tp = TP(fetch_topic.get_topic_name(), partition)
        try:
            end = consumer.highwater(tp)
        except Exception:  # not fetched from yet
            return False
        return read_through(end, getattr(consumer, "_read_offset", {}).get(tp))

    def next_release_s(self, partition: int) -> float | None:
        """Earliest time a host of ``partition`` may get hand-outs back: an earlier owner's or a watched one."""
        pending, watched = self.stranded.get(partition), self.watched.get(partition)
        times = [*pending.values()] if pending else []
        if watched:
            times.append(watched[0][0])
        return min(times, default=None)

    async def _still(self, generation: int) -> bool:
        """Yield to the loop; whether the rebuild of ``generation`` is still the latest one."""
        await asyncio.sleep(0)
        if generation != self._rebuild_generation:
            log.info("squall: due index rebuild superseded by a later rebalance")
            return False
        return True


def state() -> WorkerState:
    """The worker's :class:`WorkerState`, created on first use and held by the app (``app.squall_worker_state``).

    A test hands in its own (its due indexes, assignment times) by setting that attribute.
    """
    held = app.squall_worker_state
    if held is None:
        held = app.squall_worker_state = WorkerState()
    return held


def owned_partitions() -> set[int]:
    """The partitions this worker owns now (every topic is co-partitioned: those of the ticks topic)."""
    topic = ticks_topic.get_topic_name()
    return {tp.partition for tp in app.assignor.assigned_actives() if tp.topic == topic}


def known_here(url: str, partition: int) -> bool:
    """Whether canonical ``url`` (of Kafka ``partition``) has a record in this worker's urls table.

    Asked by the parse step of its outlinks (:func:`squall.policy.admission.left_to_send`);
    answers only for a partition this worker owns and has rebuilt its due
    index from (recovery done): for any other partition False, so the link
    goes out as it would have.
    """
    if partition not in state().indexes:
        return False
    held = tables()
    return held.url_cache.get(url) is not None or _in_partition(held.urls, url.encode(), partition)


def refused_here(url: str, partition: int, depth: int) -> Reason | None:
    """Why the status updater would refuse canonical outlink ``url`` at ``depth``, its host having no record.

    The status updater's own check (:func:`squall.policy.scope.check`) with
    what a host without a record gives it (not seeded, no URL): under the
    seeded-hosts scope a link to a host never seeded is refused
    (``scope.host``). None when the host has a record (the status updater
    decides), when the check admits it, or for a partition this worker does
    not own or has not recovered.
    """
    if partition not in state().indexes:
        return None
    key = partition_key(url, config().mode)
    held = tables()
    if held.host_cache.get(key) is not None or _in_partition(held.hosts, key.encode(), partition):
        return None
    return config().judge.check(url, depth=depth, host_seeded=False, host_url_count=0)


def _in_partition(table: MutableMapping[bytes, Any], key: bytes, partition: int) -> bool:
    """Whether ``table`` holds ``key`` in ``partition``'s store: one RocksDB lookup, its bloom filter first.

    Faust's own ``in`` looks in the store of the current event's partition,
    which is not ``key``'s when the event is another partition's; a test's
    dict table is asked directly.
    """
    dbs = getattr(getattr(table, "data", None), "_dbs", None)  # faust.stores.rocksdb.Store: partition → Rdict
    if dbs is None:
        return key in table
    db = dbs.get(partition)
    return db is not None and db.key_may_exist(key) and db.get(key) is not None
