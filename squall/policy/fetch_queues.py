"""The fetcher's fetch queues: one queue per host/domain, served in next-fetch-time order.

StormCrawler's ``FetchItemQueues`` (apache/stormcrawler PR #2129) adapted to one asyncio
thread, so there are no locks but the same design:

* one :class:`FetchQueue` per queue key (host, domain or IP, per
  ``partition.url.mode``) holding the items waiting to be fetched, the number
  of fetches in flight and the earliest time the next fetch may start;
* a heap of *tickets* ``(ready_at_s, seq, key)`` for the queues that may have
  an item ready (pending items and a free slot). A queue holds at most one
  valid ticket (its ``ticket_seq``); a ticket whose ``seq`` is not the queue's
  ``ticket_seq`` any more (the queue was re-timed or dropped) is stale and
  discarded when it reaches the top of the heap (lazy invalidation).

The queues do not compute delays: *when* a queue may start its next fetch is
the pace model's (:mod:`squall.policy.pace`), passed in as a time (``ready_at_s``)
when an item is added, when a fetch finishes and when the pace changes while
items wait (a Retry-After). One formula, in one place (docs/architecture.md
invariant 2); this module only orders.

Consequences: :meth:`FetchQueues.take` is O(log n) amortised (it never looks at
a queue that is waiting on its delay); :meth:`FetchQueues.add` never waits and
refuses (``False``) rather than drops when a queue is full; queues are served
in strict next-fetch-time order, ties in the order they became due (FIFO by
``seq``, stricter than Java's ``DelayQueue``); a queue is removed as soon as it
has no pending item and nothing in flight (its pace lives on in the caller).

Times are seconds as floats on one clock chosen by the caller (Unix time in
squall), passed as arguments. Pure: no asyncio, no clock, no I/O.

Configuration: ``fetcher.threads.per.queue``, ``fetcher.max.queue.size`` (see
:meth:`FetchQueues.from_settings`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from squall.settings import Settings

T = TypeVar("T")


# A timer wakes the loop late: the selector rounds its timeout up to the next millisecond
# (epoll_wait(2) counts milliseconds) and asyncio.wait_for takes more turns of the loop.
PRECISE_WAKE_S = 0.0015
PRECISE_DELAY_S = 0.25  # queues whose delay in force (s) is under this get the precise wake-up


def wake_after_s(ready_at_s: float, now_s: float, delay_s: float | None) -> float:
    """How long (s) the fetch dispatcher's timer may sleep before the earliest queue is due at ``ready_at_s``.

    ``delay_s``: that queue's delay in force (s; None: not known yet). For a
    short delay (under ``PRECISE_DELAY_S``), where a millisecond is a share of
    the pace worth having, the timer ends ``PRECISE_WAKE_S`` early and the
    last stretch is 0.0 before the due time: the dispatcher takes a turn of
    the event loop (``asyncio.sleep(0)``), then looks again. Never lets a
    queue start early: the queues grant nothing before its time
    (:meth:`FetchQueues.take`); this only decides how the wait is spent.
    Longer delays keep the timer alone (no turn spent).
    """
    wait_s = max(0.0, ready_at_s - now_s)
    if delay_s is None or delay_s >= PRECISE_DELAY_S:
        return wait_s
    return 0.0 if wait_s <= PRECISE_WAKE_S else wait_s - PRECISE_WAKE_S


@dataclass(eq=False)
class FetchQueue(Generic[T]):
    """State of one fetch queue (StormCrawler ``FetchItemQueue``).

    Fields:
        ready_at_s: earliest start (s) of the next fetch, from the pace model.
        pending: items waiting to be fetched, oldest first.
        in_flight: items taken and not yet finished; never above
            ``threads_per_queue``.
        ticket_seq: sequence number of the queue's valid ticket (None: none).
    """

    ready_at_s: float
    pending: deque[T] = field(default_factory=deque)
    in_flight: int = 0
    ticket_seq: int | None = None


def _check_time(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
        raise ValueError(f"{name} must be a number of seconds, got {value!r}")
    return float(value)


class FetchQueues(Generic[T]):
    """All fetch queues of one fetcher, keyed by queue key (StormCrawler ``FetchItemQueues``).

    Args:
        threads_per_queue: ``fetcher.threads.per.queue``, fetches of one queue
            in flight at once (>= 1).
        max_queue_size: ``fetcher.max.queue.size``, pending items per queue
            (in-flight items not counted); -1 = unbounded.

    Raises:
        ValueError: ``threads_per_queue`` < 1, ``max_queue_size`` < -1.

    Why its own ticket heap beside :class:`squall.policy.due_index.DueIndex`'s:
    the two order different things with different invalidation. Here a
    queue's ticket is re-timed on every fetch end and Retry-After (often, by
    ``seq``), queues are few (the hosts being fetched now) and a ticket is
    never compacted; the due index holds a ticket per host of a partition
    (up to millions), invalidated by identity when the host's due time or
    eligibility moves, and compacts its heap when stale tickets pile up.
    One shared class would carry both schemes and the cost of the larger.
    """

    def __init__(self, threads_per_queue: int, max_queue_size: int) -> None:
        if not isinstance(threads_per_queue, int) or threads_per_queue < 1:
            raise ValueError(f"threads_per_queue must be an int >= 1, got {threads_per_queue!r}")
        if not isinstance(max_queue_size, int) or max_queue_size < -1:
            raise ValueError(f"max_queue_size must be an int >= 0 or -1 (unbounded), got {max_queue_size!r}")
        self.threads_per_queue = threads_per_queue
        self.max_queue_size = max_queue_size
        self._queues: dict[str, FetchQueue[T]] = {}
        self._tickets: list[tuple[float, int, str]] = []
        self._seq = 0
        self._pending_total = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> FetchQueues[Any]:
        """Build from loaded settings (``fetcher.threads.per.queue``, ``fetcher.max.queue.size``)."""
        return cls(threads_per_queue=settings.fetcher_threads_per_queue, max_queue_size=settings.fetcher_max_queue_size)

    # ------------------------------------------------------------------ adding

    def add(self, key: str, item: T, ready_at_s: float) -> bool:
        """Append ``item`` to the queue ``key``, creating the queue if needed; never waits.

        ``ready_at_s`` (s) is the earliest start the pace model allows for the
        queue now; an existing queue keeps the later of its own time and this one.

        Returns:
            True if queued; False if the queue already holds
            ``max_queue_size`` pending items. The item was NOT taken: the
            caller keeps it and offers it again later (back-pressure).

        Raises:
            ValueError: ``ready_at_s`` is not a number.
        """
        ready_at_s = _check_time("ready_at_s", ready_at_s)
        queue = self._queues.get(key)
        if queue is not None and 0 <= self.max_queue_size <= len(queue.pending):
            return False
        if queue is None:
            if self.max_queue_size == 0:
                return False
            queue = FetchQueue(ready_at_s=ready_at_s)
            self._queues[key] = queue
        elif ready_at_s > queue.ready_at_s:
            queue.ready_at_s = ready_at_s
            queue.ticket_seq = None  # its ticket (if any) is stale now
        queue.pending.append(item)
        self._pending_total += 1
        self._schedule(key, queue)
        return True

    # ------------------------------------------------------------------ taking

    def take(self, now_s: float) -> tuple[str, T] | None:
        """Take the oldest item of the queue that has been due the longest; O(log n).

        The item counts as in flight until :meth:`finish` or :meth:`release`
        is called for its key.

        Returns:
            ``(key, item)``, or None when no queue is due at ``now_s`` (see
            :meth:`next_ready_at_s` for when to try again).
        """
        tickets = self._tickets
        while tickets:
            ready_at_s, seq, key = tickets[0]
            queue = self._queues.get(key)
            if queue is None or queue.ticket_seq != seq:
                heapq.heappop(tickets)  # stale: queue dropped or re-timed
                continue
            if ready_at_s > now_s:
                return None
            heapq.heappop(tickets)
            queue.ticket_seq = None
            item = queue.pending.popleft()
            queue.in_flight += 1
            self._pending_total -= 1
            # With several threads per queue another item may start at once
            # (StormCrawler applies the delay only after a fetch ends).
            self._schedule(key, queue)
            return key, item
        return None

    def next_ready_at_s(self) -> float | None:
        """When (s) the earliest queue is due; None when no queue has an item it may start."""
        ready = self.next_ready()
        return None if ready is None else ready[0]

    def next_ready(self) -> tuple[float, str] | None:
        """(when (s), key) of the earliest queue due; None when no queue has an item it may start."""
        tickets = self._tickets
        while tickets:
            ready_at_s, seq, key = tickets[0]
            queue = self._queues.get(key)
            if queue is not None and queue.ticket_seq == seq:
                return ready_at_s, key
            heapq.heappop(tickets)
        return None

    # ------------------------------------------------------------------ finishing and timing

    def finish(self, key: str, ready_at_s: float) -> bool:
        """Mark one fetch of queue ``key`` done; the next may start at ``ready_at_s`` (the pace model's time).

        Returns:
            True; False if ``key`` has no queue (dropped by :meth:`drop_keys`
            while the fetch was in flight), in which case nothing changes.

        Raises:
            ValueError: the queue has no fetch in flight, or ``ready_at_s`` is not a number.
        """
        ready_at_s = _check_time("ready_at_s", ready_at_s)
        queue = self._queues.get(key)
        if queue is None:
            return False
        if queue.in_flight <= 0:
            raise ValueError(f"finish({key!r}) without a fetch in flight")
        queue.in_flight -= 1
        queue.ready_at_s = ready_at_s
        self._retime(key, queue)
        self._reap(key, queue)
        return True

    def release(self, key: str) -> bool:
        """Give back a turn taken with :meth:`take` that sent no request (its time stays as it was).

        Returns:
            True; False when ``key`` has no queue.

        Raises:
            ValueError: the queue has no fetch in flight.
        """
        queue = self._queues.get(key)
        if queue is None:
            return False
        if queue.in_flight <= 0:
            raise ValueError(f"release({key!r}) without a fetch in flight")
        queue.in_flight -= 1
        self._retime(key, queue)
        self._reap(key, queue)
        return True

    def set_ready_at(self, key: str, ready_at_s: float) -> bool:
        """Re-time queue ``key``: its next fetch starts no sooner than ``ready_at_s`` (later times win).

        For a pace change while items wait (a Retry-After or back-off learned
        from another fetch of the queue).

        Returns:
            True; False when ``key`` has no queue.
        """
        ready_at_s = _check_time("ready_at_s", ready_at_s)
        queue = self._queues.get(key)
        if queue is None:
            return False
        if ready_at_s > queue.ready_at_s:
            queue.ready_at_s = ready_at_s
            self._retime(key, queue)
        return True

    def ready_at_s(self, key: str) -> float | None:
        """The queue's earliest next start (s); None when there is no such queue."""
        queue = self._queues.get(key)
        return queue.ready_at_s if queue is not None else None

    # ------------------------------------------------------------------ dropping and sizes

    def drain(self, key: str) -> list[T]:
        """Remove and return the pending items of queue ``key`` (oldest first); in-flight ones stay."""
        queue = self._queues.get(key)
        if queue is None:
            return []
        items = list(queue.pending)
        queue.pending.clear()
        self._pending_total -= len(items)
        queue.ticket_seq = None
        self._reap(key, queue)
        return items

    def drop_keys(self, predicate: Callable[[str], bool]) -> list[tuple[str, T]]:
        """Remove every queue whose key satisfies ``predicate`` (Kafka partitions revoked).

        Returns:
            The pending items of the removed queues as ``(key, item)``, queue
            by queue, oldest first. Items in flight are the caller's; a later
            :meth:`finish` of a dropped key returns False.
        """
        dropped: list[tuple[str, T]] = []
        for key in [k for k in self._queues if predicate(k)]:
            queue = self._queues.pop(key)
            dropped.extend((key, item) for item in queue.pending)
            self._pending_total -= len(queue.pending)
            queue.ticket_seq = None  # its ticket is now stale
        return dropped

    def queue_size(self, key: str) -> int:
        """Pending (not in-flight) items of queue ``key``; 0 when there is no such queue."""
        queue = self._queues.get(key)
        return len(queue.pending) if queue is not None else 0

    def in_flight(self, key: str) -> int:
        """Fetches of queue ``key`` in flight; 0 when there is no such queue."""
        queue = self._queues.get(key)
        return queue.in_flight if queue is not None else 0

    def pending_total(self) -> int:
        """Pending items over all queues (in-flight items not counted)."""
        return self._pending_total

    def keys(self) -> list[str]:
        """The keys of the queues that exist now."""
        return list(self._queues)

    def __len__(self) -> int:
        """Number of queues (each has a pending item or a fetch in flight)."""
        return len(self._queues)

    def __contains__(self, key: object) -> bool:
        return key in self._queues

    # ------------------------------------------------------------------ internals

    def _schedule(self, key: str, queue: FetchQueue[T]) -> None:
        """Give ``queue`` a ticket if it has an item it may start and has none yet."""
        if queue.ticket_seq is not None or not queue.pending or queue.in_flight >= self.threads_per_queue:
            return
        self._seq += 1
        queue.ticket_seq = self._seq
        heapq.heappush(self._tickets, (queue.ready_at_s, self._seq, key))

    def _retime(self, key: str, queue: FetchQueue[T]) -> None:
        """Replace the queue's ticket after its ready time changed (the old one goes stale)."""
        queue.ticket_seq = None
        self._schedule(key, queue)

    def _reap(self, key: str, queue: FetchQueue[T]) -> None:
        """Remove a drained queue (the caller keeps its pace)."""
        if queue.pending or queue.in_flight:
            return
        del self._queues[key]
        queue.ticket_seq = None
