"""The fetcher's fetch queues: one queue per host/domain, served in next-fetch-time order.

Seed 004 (StormCrawler #2129, ``FetchItemQueues``) adapted to one asyncio
thread, so there are no locks but the same design:

* one :class:`FetchQueue` per queue key (host, domain or IP, per
  ``partition.url.mode``) holding the items waiting to be fetched, the number
  of fetches in flight and the earliest time the next fetch may start;
* a heap of *tickets* ``(ready_at_s, seq, key)`` for the queues that may have
  an item ready (pending items and a free slot). A queue holds at most one
  valid ticket (its ``scheduled`` flag); a ticket whose ``seq`` is not the
  queue's ``ticket_seq`` any more (the queue was re-timed or dropped) is stale
  and discarded when it reaches the top of the heap (lazy invalidation).

Consequences: :meth:`FetchQueues.take` is O(log n) amortised (it never looks at
a queue that is waiting on its delay); :meth:`FetchQueues.add` never waits and
refuses (``False``) rather than drops when a queue is full; queues are served
in strict next-fetch-time order, ties in the order they became due (FIFO by
``seq``, stricter than Java's ``DelayQueue``); a queue seen for the first time
is ready at once; a queue is removed as soon as it has no pending item and
nothing in flight.

Politeness across reaping: when a queue is removed its earliest next start is
remembered (only a float per key, and only until that time has passed), so a
URL of the same host added right after the queue drained still waits for the
delay. StormCrawler forgets it; squall does not.

Times are seconds as floats on one clock chosen by the caller (monotonic or
Unix), passed as ``now_s``. Pure: no asyncio, no clock, no I/O.

Configuration: ``fetcher.server.delay``, ``fetcher.server.min.delay``,
``fetcher.threads.per.queue``, ``fetcher.max.queue.size`` (see
:meth:`FetchQueues.from_settings`).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(eq=False)
class FetchQueue(Generic[T]):
    """State of one fetch queue (StormCrawler ``FetchItemQueue``).

    Fields:
        pending: items waiting to be fetched, oldest first.
        in_flight: items taken and not yet finished; never above
            ``threads_per_queue``.
        next_fetch_at_s: earliest start of the next fetch (s, caller's clock),
            set by :meth:`FetchQueues.finish` to end of fetch + delay.
        blocked_until_s: no fetch starts before this (s); Retry-After and
            back-off blocks (:meth:`FetchQueues.block_until`). 0.0 = none.
        crawl_delay_s: override of the delay (s) from robots.txt Crawl-delay
            or metadata; None = use ``min_delay_s``.
        min_delay_s: delay (s) between the end of one fetch and the start of
            the next when there is no override: ``fetcher.server.delay`` with
            one thread per queue, ``fetcher.server.min.delay`` otherwise.
        last_finished_at_s: end of the last fetch (s), None before the first.
        scheduled: the queue has a valid ticket in the heap.
        ticket_seq: sequence number of that ticket (None when not scheduled).
    """

    min_delay_s: float
    next_fetch_at_s: float
    pending: deque[T] = field(default_factory=deque)
    in_flight: int = 0
    blocked_until_s: float = 0.0
    crawl_delay_s: float | None = None
    last_finished_at_s: float | None = None
    scheduled: bool = False
    ticket_seq: int | None = None

    @property
    def delay_s(self) -> float:
        """The delay (s) applied after a fetch: the override if set, else ``min_delay_s``."""
        return self.crawl_delay_s if self.crawl_delay_s is not None else self.min_delay_s

    @property
    def ready_at_s(self) -> float:
        """Earliest start (s) of the next fetch: next fetch time or block, the later."""
        return max(self.next_fetch_at_s, self.blocked_until_s)


def _check_delay(name: str, value: float) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


class FetchQueues(Generic[T]):
    """All fetch queues of one fetcher, keyed by queue key (StormCrawler ``FetchItemQueues``).

    Args:
        server_delay_s: ``fetcher.server.delay`` (s), delay between the end of
            one fetch and the start of the next when ``threads_per_queue`` is 1.
        min_delay_s: ``fetcher.server.min.delay`` (s), the same delay when
            ``threads_per_queue`` > 1.
        threads_per_queue: ``fetcher.threads.per.queue``, fetches of one queue
            in flight at once (>= 1).
        max_queue_size: ``fetcher.max.queue.size``, pending items per queue
            (in-flight items not counted); -1 = unbounded.

    Raises:
        ValueError: a negative or non-finite delay, ``threads_per_queue`` < 1,
            ``max_queue_size`` < -1.
    """

    def __init__(self, server_delay_s: float, min_delay_s: float, threads_per_queue: int, max_queue_size: int) -> None:
        self.server_delay_s = _check_delay("server_delay_s", server_delay_s)
        self.min_delay_s = _check_delay("min_delay_s", min_delay_s)
        if not isinstance(threads_per_queue, int) or threads_per_queue < 1:
            raise ValueError(f"threads_per_queue must be an int >= 1, got {threads_per_queue!r}")
        if not isinstance(max_queue_size, int) or max_queue_size < -1:
            raise ValueError(f"max_queue_size must be an int >= 0 or -1 (unbounded), got {max_queue_size!r}")
        self.threads_per_queue = threads_per_queue
        self.max_queue_size = max_queue_size
        # Delay used by a queue without override (StormCrawler: crawlDelay with
        # one thread per queue, minCrawlDelay with several).
        self._default_delay_s = self.server_delay_s if threads_per_queue == 1 else self.min_delay_s
        self._queues: dict[str, FetchQueue[T]] = {}
        self._tickets: list[tuple[float, int, str]] = []
        self._seq = 0
        self._pending_total = 0
        # Reaped queues whose next start is still in the future: key -> earliest
        # start (s), with a heap of (time, key) to forget them once passed.
        self._cooling: dict[str, float] = {}
        self._cooling_heap: list[tuple[float, str]] = []

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "FetchQueues[Any]":
        """Build from loaded settings (``fetcher.server.delay``, ``fetcher.server.min.delay``,
        ``fetcher.threads.per.queue``, ``fetcher.max.queue.size``)."""
        return cls(
            server_delay_s=settings["fetcher.server.delay"],
            min_delay_s=settings["fetcher.server.min.delay"],
            threads_per_queue=settings["fetcher.threads.per.queue"],
            max_queue_size=settings["fetcher.max.queue.size"],
        )

    # ------------------------------------------------------------------ adding

    def add(self, key: str, item: T, now_s: float, crawl_delay_s: float | None = None) -> bool:
        """Append ``item`` to the queue ``key``, creating the queue if needed; never waits.

        A new queue is ready at ``now_s`` (or when the delay of a queue of the
        same key that drained recently has passed). ``crawl_delay_s`` (s),
        when not None, sets the queue's delay override (robots.txt Crawl-delay
        or metadata, StormCrawler ``crawl.delay``), as :meth:`set_crawl_delay`.

        Returns:
            True if queued; False if the queue already holds
            ``max_queue_size`` pending items. The item was NOT taken: the
            caller keeps it and offers it again later (back-pressure).

        Raises:
            ValueError: ``crawl_delay_s`` negative or not finite.
        """
        if crawl_delay_s is not None:
            crawl_delay_s = _check_delay("crawl_delay_s", crawl_delay_s)
        self._forget_cooled(now_s)
        queue = self._queues.get(key)
        if queue is not None and 0 <= self.max_queue_size <= len(queue.pending):
            return False
        if queue is None:
            if self.max_queue_size == 0:
                return False
            # A queue seen for the first time is due at once; one that drained
            # recently keeps the start time its last fetch earned.
            queue = FetchQueue(min_delay_s=self._default_delay_s, next_fetch_at_s=self._cooling.pop(key, now_s))
            self._queues[key] = queue
        if crawl_delay_s is not None:
            self._set_override(key, queue, crawl_delay_s)
        queue.pending.append(item)
        self._pending_total += 1
        self._schedule(key, queue)
        return True

    # ------------------------------------------------------------------ taking

    def take(self, now_s: float) -> tuple[str, T] | None:
        """Take the oldest item of the queue that has been due the longest; O(log n).

        The item counts as in flight until :meth:`finish` is called for its key.

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
            queue.scheduled = False
            queue.ticket_seq = None
            item = queue.pending.popleft()
            queue.in_flight += 1
            self._pending_total -= 1
            # With several threads per queue another item may start at once
            # (StormCrawler applies the min delay only after a fetch ends).
            self._schedule(key, queue)
            return key, item
        return None

    def next_ready_at_s(self) -> float | None:
        """When (s) the earliest queue is due; None when no queue has an item it may start.

        A time at or before ``now_s`` means :meth:`take` returns an item now.
        """
        tickets = self._tickets
        while tickets:
            ready_at_s, seq, key = tickets[0]
            queue = self._queues.get(key)
            if queue is not None and queue.ticket_seq == seq:
                return ready_at_s
            heapq.heappop(tickets)
        return None

    # ------------------------------------------------------------------ finishing and timing

    def finish(self, key: str, now_s: float, delay_override_s: float | None = None) -> bool:
        """Mark one fetch of queue ``key`` done at ``now_s``; its next fetch may start after the delay.

        Next start = max(now_s + delay, now_s + ``delay_override_s``, any
        earlier-set later start), where delay is the queue's crawl-delay
        override if set, else ``fetcher.server.delay`` (one thread per queue)
        or ``fetcher.server.min.delay`` (several) — the delay runs "between the
        end of one fetch and the start of the next" (StormCrawler
        ``finishFetchItem``). ``delay_override_s`` (s, e.g. Retry-After or
        back-off) can only lengthen the wait. The queue is removed when it has
        nothing left.

        Returns:
            True; False if ``key`` has no queue (dropped by :meth:`drop_keys`
            while the fetch was in flight), in which case nothing changes.

        Raises:
            ValueError: the queue has no fetch in flight, or
                ``delay_override_s`` is negative or not finite.
        """
        if delay_override_s is not None:
            delay_override_s = _check_delay("delay_override_s", delay_override_s)
        queue = self._queues.get(key)
        if queue is None:
            return False
        if queue.in_flight <= 0:
            raise ValueError(f"finish({key!r}) without a fetch in flight")
        queue.in_flight -= 1
        queue.last_finished_at_s = now_s
        next_s = now_s + queue.delay_s  # politeness delay from the end of this fetch
        if delay_override_s is not None:
            next_s = max(next_s, now_s + delay_override_s)  # back-off only lengthens it
        # max(): another fetch of the queue (threads > 1) may have set a later start.
        queue.next_fetch_at_s = max(queue.next_fetch_at_s, next_s)
        self._retime(key, queue)
        self._reap(key, queue)
        self._forget_cooled(now_s)
        return True

    def set_crawl_delay(self, key: str, delay_s: float | None) -> bool:
        """Set (None: clear) the delay override (s) of queue ``key``, e.g. from robots.txt Crawl-delay.

        A longer delay also pushes back a next start already computed from the
        last finish (next start >= last finish + new delay); a shorter one takes
        effect from the next finish.

        Returns:
            True; False when ``key`` has no queue (nothing to pace; pass the
            delay again with :meth:`add`).

        Raises:
            ValueError: ``delay_s`` negative or not finite.
        """
        if delay_s is not None:
            delay_s = _check_delay("delay_s", delay_s)
        queue = self._queues.get(key)
        if queue is None:
            return False
        if delay_s is None:
            queue.crawl_delay_s = None
        else:
            self._set_override(key, queue, delay_s)
        return True

    def block_until(self, key: str, until_s: float) -> bool:
        """Start no fetch of queue ``key`` before ``until_s`` (s); later blocks win, earlier ones are ignored.

        For Retry-After and back-off (squall.backoff, StormCrawler
        ``blockQueueUntil``). A queue that drains keeps the block (see the
        module docstring).

        Returns:
            True; False when ``key`` has no queue.
        """
        queue = self._queues.get(key)
        if queue is None:
            return False
        if until_s > queue.blocked_until_s:
            queue.blocked_until_s = until_s
            self._retime(key, queue)
        return True

    # ------------------------------------------------------------------ dropping and sizes

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
            queue.scheduled = False
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

    def __len__(self) -> int:
        """Number of queues (each has a pending item or a fetch in flight)."""
        return len(self._queues)

    def __contains__(self, key: object) -> bool:
        return key in self._queues

    # ------------------------------------------------------------------ internals

    def _set_override(self, key: str, queue: FetchQueue[T], delay_s: float) -> None:
        queue.crawl_delay_s = delay_s
        if queue.last_finished_at_s is not None:
            # A longer delay applies to the wait already running, not only the next one.
            later_s = queue.last_finished_at_s + delay_s
            if later_s > queue.next_fetch_at_s:
                queue.next_fetch_at_s = later_s
                self._retime(key, queue)

    def _schedule(self, key: str, queue: FetchQueue[T]) -> None:
        """Give ``queue`` a ticket if it has an item it may start and has none yet."""
        if queue.scheduled or not queue.pending or queue.in_flight >= self.threads_per_queue:
            return
        self._seq += 1
        queue.scheduled = True
        queue.ticket_seq = self._seq
        heapq.heappush(self._tickets, (queue.ready_at_s, self._seq, key))

    def _retime(self, key: str, queue: FetchQueue[T]) -> None:
        """Replace the queue's ticket after its ready time changed (the old one goes stale)."""
        queue.scheduled = False
        queue.ticket_seq = None
        self._schedule(key, queue)

    def _reap(self, key: str, queue: FetchQueue[T]) -> None:
        """Remove a drained queue, remembering its next start while that is in the future."""
        if queue.pending or queue.in_flight:
            return
        del self._queues[key]
        queue.scheduled = False
        queue.ticket_seq = None
        ready_at_s = queue.ready_at_s
        if ready_at_s > self._cooling.get(key, -math.inf):
            self._cooling[key] = ready_at_s
            heapq.heappush(self._cooling_heap, (ready_at_s, key))

    def _forget_cooled(self, now_s: float) -> None:
        """Forget reaped queues whose next start has passed (a new queue would be due at once anyway)."""
        heap = self._cooling_heap
        while heap and heap[0][0] <= now_s:
            until_s, key = heapq.heappop(heap)
            if self._cooling.get(key) == until_s:
                del self._cooling[key]
