"""The index of due URLs of one Kafka partition, kept in memory by the spout (pure).

:class:`DueIndex` indexes the URLs waiting in each host's queue (a heap per
host and priority, ordered by next fetch time) and the hosts ordered by when
they become eligible (a heap of tickets, one live per host, stale ones
bounded). Taking the next due URL costs O(log n) in the number of hosts and
URLs (times the few distinct priorities of one host); nothing scans a host's
or every stored URL. The index is a cache: it is rebuilt from the urls and
hosts tables when a partition is assigned (restart, rebalance). When a host
is eligible is :class:`squall.policy.frontier.HostRecord`'s to say.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

from squall.policy.frontier import INF


class _Heap(list[tuple[float, int, str, "_Heap"]]):
    """One queue's URLs of one priority: a heap of entries ``(due_s, seq, url, heap)``."""

    __slots__ = ("priority", "queue")

    def __init__(self, queue: _Queue, priority: int) -> None:
        super().__init__()
        self.queue = queue
        self.priority = priority


class _Queue:
    """The index's state of one queue (host): its URL heaps per priority and its ticket.

    ``stale`` counts the entries of its heaps that no longer are the live
    entry of their URL (replaced or removed); ``ticket`` is the queue's one
    live ticket in the index's ticket heap (None: no ticket).
    """

    __slots__ = ("heaps", "key", "live", "priorities", "ready_s", "stale", "ticket")

    def __init__(self, key: str) -> None:
        self.key = key
        self.heaps: dict[int, _Heap] = {}
        self.priorities: list[int] = []  # the keys of ``heaps``, highest first
        self.live = 0
        self.stale = 0
        self.ready_s = 0.0
        self.ticket: tuple[float, int, str] | None = None


@dataclass(frozen=True)
class DueIndexSizes:
    """What a :class:`DueIndex` holds: live items and heap entries (live and stale).

    ``urls``: URLs indexed; ``queues``: queues with at least one URL;
    ``url_entries``: entries in the per-queue heaps (≤ 2 × ``urls`` +
    ``DueIndex.SLACK`` per queue); ``tickets``: entries in the heap of
    queues (≤ 2 × ``live_tickets`` + ``DueIndex.SLACK``); ``live_tickets``:
    queues that have a URL and are not parked.
    """

    urls: int
    queues: int
    url_entries: int
    tickets: int
    live_tickets: int


class DueIndex:
    """Index of the due URLs of the hosts of one partition (see module docstring).

    Within a host, URLs whose next fetch time has come are taken by higher
    ``priority`` first, then earlier next fetch time, then first pushed
    (seeds before discovered URLs); a URL not yet due never
    blocks one that is. Not thread-safe; used from one asyncio loop. URLs are
    identified by their canonical string; pushing a URL already indexed
    replaces its entry.

    Shape (a flat hand-out cost, docs/benchmarks.md: a million URLs): per queue, one heap per distinct
    priority of ``(due_s, seq, url, heap)`` entries, and ``url → entry`` for
    the live ones (an entry is live when it is the one mapped: replacing or
    removing a URL leaves its old entry in its heap, skipped when reached).
    One heap of tickets ``(time, seq, key)`` orders the queues by when they
    next have a due URL and are eligible; each queue has at most one live
    ticket, and a ticket whose queue moved on is skipped when reached.
    Stale entries are bounded: when a queue's heaps hold more stale entries
    than live ones plus :attr:`SLACK`, they are rebuilt from the live ones, and
    so is the ticket heap (O(n) at most once per n stale entries, so O(1)
    amortised per push). Costs: :meth:`push`, :meth:`remove`,
    :meth:`set_host_ready` O(P + log n); :meth:`pop_due` O(P + log n) per URL
    and per host taken, P being the distinct priorities of one queue's URLs
    (1 or 2 in a crawl: seeds and discovered URLs); nothing scans the URLs of
    a queue or of the index. Its ticket heap is not the fetch queues' (see
    :class:`squall.policy.fetch_queues.FetchQueues` for why the two keep their own).
    """

    SLACK = 64  #: stale entries allowed beyond the live ones before a heap is rebuilt

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._entry_of: dict[str, tuple[float, int, str, _Heap]] = {}  # url -> its live entry
        self._queues: dict[str, _Queue] = {}
        self._tickets: list[tuple[float, int, str]] = []  # heap(time, seq, key); live iff its queue's ticket
        self._live_tickets = 0
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entry_of)

    def hosts(self) -> int:
        """Queues with at least one indexed URL."""
        return sum(1 for q in self._queues.values() if q.live)

    def sizes(self) -> DueIndexSizes:
        """Live items and heap entries, stale ones included (see :class:`DueIndexSizes`). O(queues)."""
        return DueIndexSizes(
            urls=len(self._entry_of),
            queues=self.hosts(),
            url_entries=sum(len(h) for q in self._queues.values() for h in q.heaps.values()),
            tickets=len(self._tickets),
            live_tickets=self._live_tickets,
        )

    def push(self, key: str, url: str, due_s: float, priority: int = 0) -> None:
        """Index ``url`` of queue ``key`` as due at ``due_s`` (replaces an earlier entry)."""
        old = self._entry_of.pop(url, None)
        if old is not None:
            self._forget(old)
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(key)
        heap = queue.heaps.get(priority)
        if heap is None:
            heap = queue.heaps[priority] = _Heap(queue, priority)
            queue.priorities = sorted(queue.heaps, reverse=True)
        entry = (due_s, next(self._seq), url, heap)
        self._entry_of[url] = entry
        queue.live += 1
        heapq.heappush(heap, entry)
        self._reschedule(queue)
        if old is not None and old[3].queue is not queue:
            self._reschedule(old[3].queue)

    def remove(self, url: str) -> None:
        """Forget ``url`` (lazy: its heap entry is skipped when reached)."""
        entry = self._entry_of.pop(url, None)
        if entry is not None:
            self._forget(entry)
            self._reschedule(entry[3].queue)

    def set_host_ready(self, key: str, eligible_at_s: float) -> None:
        """Record when queue ``key`` may next get a hand-out (INF = not until told)."""
        queue = self._queues.get(key)
        if queue is None:
            queue = self._queues[key] = _Queue(key)
        queue.ready_s = eligible_at_s
        self._reschedule(queue)

    def next_due_s(self) -> float | None:
        """Earliest time some host has a due URL and is eligible (None: nothing)."""
        tickets = self._tickets
        while tickets:
            ticket = tickets[0]
            if self._queues[ticket[2]].ticket is ticket:
                return ticket[0]
            heapq.heappop(tickets)
        return None

    def pop_due(self, now_s: float, per_host: int, max_hosts: int | None = None) -> list[tuple[str, list[str]]]:
        """Take up to ``per_host`` due URLs of each eligible host, hosts in next-fetch-time order.

        Returns ``[(key, [url, ...]), ...]``. A host that got URLs is marked not
        eligible (INF) until :meth:`set_host_ready` is called again.
        """
        out: list[tuple[str, list[str]]] = []
        tickets = self._tickets
        while tickets and (max_hosts is None or len(out) < max_hosts):
            ticket = tickets[0]
            queue = self._queues[ticket[2]]
            if queue.ticket is not ticket:
                heapq.heappop(tickets)
                continue
            if ticket[0] > now_s:
                break
            heapq.heappop(tickets)
            queue.ticket = None
            self._live_tickets -= 1
            urls = self._take_urls(queue, now_s, per_host)
            if urls:
                out.append((queue.key, urls))
                queue.ready_s = INF
            self._reschedule(queue)
        return out

    def take(self, key: str, now_s: float, n: int) -> list[str]:
        """Take up to ``n`` due URLs of queue ``key`` (highest priority, then earliest due), whatever its ticket.

        For a hand-out decided outside :meth:`pop_due` (the queue's result
        just freed a place): like :meth:`pop_due`, the queue is then not
        eligible (INF) until :meth:`set_host_ready` is called again. ``[]``:
        the queue has no URL due at ``now_s`` (nothing changes).
        """
        queue = self._queues.get(key)
        if queue is None or not queue.live:
            return []
        urls = self._take_urls(queue, now_s, n)
        if urls:
            queue.ready_s = INF
            self._reschedule(queue)
        return urls

    def drop(self) -> None:
        """Forget everything (the partition was revoked)."""
        self._reset()

    # -- internals ---------------------------------------------------------------------
    def _forget(self, entry: tuple[float, int, str, _Heap]) -> None:
        """Account for ``entry`` (no longer in ``_entry_of``: its URL was replaced or removed) being stale."""
        queue = entry[3].queue
        queue.live -= 1
        queue.stale += 1
        if queue.stale > queue.live + self.SLACK or not queue.live:
            self._compact(queue)

    def _compact(self, queue: _Queue) -> None:
        """Rebuild the heaps of ``queue`` from its live entries (drops every stale one)."""
        entry_of = self._entry_of
        if not queue.live:  # every entry is stale
            queue.heaps.clear()
            queue.priorities = []
            queue.stale = 0
            return
        for priority, heap in list(queue.heaps.items()):
            heap[:] = [e for e in heap if entry_of.get(e[2]) is e]
            if heap:
                heapq.heapify(heap)
            else:
                del queue.heaps[priority]
        queue.priorities = sorted(queue.heaps, reverse=True)
        queue.stale = 0

    def _top(self, queue: _Queue, heap: _Heap) -> tuple[float, int, str, _Heap] | None:
        """The live entry at the top of ``heap`` after dropping stale ones (None: empty, and removed)."""
        entry_of = self._entry_of
        while heap:
            entry = heap[0]
            if entry_of.get(entry[2]) is entry:
                return entry
            heapq.heappop(heap)
            queue.stale -= 1
        del queue.heaps[heap.priority]
        queue.priorities.remove(heap.priority)
        return None

    def _earliest(self, queue: _Queue) -> float | None:
        """Earliest due time among the live URLs of ``queue`` (None: none)."""
        if not queue.live:
            return None
        earliest = INF
        for priority in list(queue.priorities):
            top = self._top(queue, queue.heaps[priority])
            if top is not None and top[0] < earliest:
                earliest = top[0]
        return earliest

    def _take_urls(self, queue: _Queue, now_s: float, n: int) -> list[str]:
        """Up to ``n`` due URLs of ``queue``: highest priority first, then earliest due (taken out)."""
        urls: list[str] = []
        while len(urls) < n and queue.live:
            best = None
            for priority in list(queue.priorities):  # highest first: the first due top wins
                top = self._top(queue, queue.heaps[priority])
                if top is not None and top[0] <= now_s:
                    best = top
                    break
            if best is None:
                break
            heapq.heappop(best[3])
            del self._entry_of[best[2]]
            queue.live -= 1
            urls.append(best[2])
        if queue.stale > queue.live + self.SLACK or (not queue.live and queue.heaps):
            self._compact(queue)  # taking lowered the live count: keep the bound (or only stale entries are left)
        return urls

    def _reschedule(self, queue: _Queue) -> None:
        """Give ``queue`` its one live ticket at max(earliest due, eligible time), or none."""
        earliest = self._earliest(queue)
        current = queue.ticket
        if earliest is None or queue.ready_s == INF:
            if current is not None:
                queue.ticket = None
                self._live_tickets -= 1
        else:
            t = max(earliest, queue.ready_s)
            if current is not None and current[0] == t:
                return
            if current is not None:
                self._live_tickets -= 1
            queue.ticket = ticket = (t, next(self._seq), queue.key)
            self._live_tickets += 1
            heapq.heappush(self._tickets, ticket)
        if len(self._tickets) > 2 * self._live_tickets + self.SLACK:  # O(len) once per len/2 stale tickets
            queues = self._queues
            self._tickets = [t for t in self._tickets if queues[t[2]].ticket is t]
            heapq.heapify(self._tickets)
