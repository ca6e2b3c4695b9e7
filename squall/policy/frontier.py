"""The spout's view of the frontier: host records and the index of due URLs.

Two parts, both pure:

* :class:`HostRecord` — the value of the hosts table (key: partition key):
  when the host may get its next hand-out (``next_fetch_at_s``,
  ``blocked_until_s``), what is in flight, the queue regulator's state
  (forwarded robots delay, back-off) and per-reason rejection counts.
* :class:`DueIndex` — an in-memory index, one per Kafka partition, of the
  URLs waiting in each host's queue (a heap per host and priority, ordered by
  next fetch time) and of the hosts ordered by when they become eligible (a
  heap of tickets, one live per host, stale ones bounded). Taking the next
  due URL costs O(log n) in the number of hosts and URLs (times the few
  distinct priorities of one host); nothing scans a host's or every stored URL.
  The index is a cache: it is rebuilt from the urls and hosts tables when a
  partition is assigned (restart, rebalance).

Eligibility (docs/architecture.md invariants 2 and 6): a host gets a hand-out
when fewer than ``frontier.handout.ahead`` of its URLs are out and its
earliest start (delay, Retry-After, back-off) is at most
``frontier.handout.lead.secs`` away; the fetcher's queue then starts each URL
on time. It gets at most ``frontier.max.urls.per.bucket`` URLs, never more
than the free hand-out places.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from squall.policy.backoff import HostBackoff
from squall.policy.crawl_delay import CrawlDelayState
from squall.policy.pace import PaceState
from squall.policy.records import Reason

INF = float("inf")


@dataclass(frozen=True)
class HostRecord:
    """State of one queue (host, or domain per ``partition.url.mode``). Times: Unix seconds.

    The pace fields (``next_fetch_at_s``, ``delay_s``, ``blocked_until_s``,
    ``backoff``, ``crawl_delay``) are the durable copy of the queue's
    :class:`squall.policy.pace.PaceState` (see :meth:`pace` / :meth:`with_pace`),
    written by the queue regulator from the same model the fetcher's gate uses.
    ``in_flight`` maps each handed-out URL to its hand-out time; ``seen_fetch_ids``
    keeps the last signals applied (re-delivery is idempotent);
    ``crawl_delay`` is the CrawlDelayPolicy state (StormCrawler's) and ``backoff``
    the HostBackoff state as dicts; ``rejected`` counts policy
    rejections of URLs of this host per :class:`squall.policy.records.Reason` value.
    ``seeded_hosts``: the host names seeded under this key (byIP: one
    address serves several names, and only a seeded name is in scope).

    Operator state (commands of :mod:`squall.policy.control`, durable here so
    it follows the host to its next owner): ``operator_delay_s`` (s, replaces
    ``fetcher.server.delay`` for this queue; None = the configured one),
    ``operator_blocked_until_s`` (Unix s, 0.0 = not blocked) and its
    ``operator_block_reason``, ``page_limit`` (most pages fetched; None = no
    limit) against ``pages_fetched`` (requests made for handed-out URLs,
    counted when their signal is applied), and ``operator_log`` (the last
    commands applied: ``{"at", "op", "by", "args"}``).
    """

    key: str
    seeded: bool = False
    next_fetch_at_s: float = 0.0
    blocked_until_s: float = 0.0
    delay_s: float = 0.0
    in_flight: dict[str, float] = field(default_factory=dict)
    url_count: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    seen_fetch_ids: list[str] = field(default_factory=list)
    crawl_delay: dict[str, Any] | None = None
    backoff: dict[str, Any] | None = None
    seeded_hosts: list[str] = field(default_factory=list)
    operator_delay_s: float | None = None
    operator_blocked_until_s: float = 0.0
    operator_block_reason: str | None = None
    page_limit: int | None = None
    pages_fetched: int = 0
    operator_log: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def seeded_for(self, host: str, by_name: bool) -> bool:
        """Whether ``host`` counts as seeded here: the queue was seeded, or (``by_name``, byIP) that name was."""
        return host in self.seeded_hosts if by_name else self.seeded

    def with_seed(self, host: str) -> HostRecord:
        """This record with ``host`` seeded (and the queue marked seeded)."""
        return replace(self, seeded=True, seeded_hosts=sorted({*self.seeded_hosts, host}))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostRecord:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})

    def pace(self) -> PaceState:
        """The queue's pace as recorded here (the durable copy).

        Raises:
            ValueError: a stored back-off or crawl-delay state of the wrong shape.
        """
        return PaceState(
            next_fetch_at_s=float(self.next_fetch_at_s),
            delay_s=float(self.delay_s),
            backoff=HostBackoff.from_dict(self.backoff) if self.backoff else None,
            crawl=CrawlDelayState.from_dict(self.crawl_delay) if self.crawl_delay else None,
            operator_delay_s=self.operator_delay_s,
            operator_blocked_until_s=float(self.operator_blocked_until_s),
        )

    def with_pace(self, pace: PaceState) -> HostRecord:
        """This record with ``pace`` stored in it."""
        return replace(
            self,
            next_fetch_at_s=pace.next_fetch_at_s,
            delay_s=pace.delay_s,
            blocked_until_s=pace.rate_blocked_until_s,  # the operator's block is its own field
            backoff=pace.backoff.to_dict() if pace.backoff is not None else None,
            crawl_delay=pace.crawl.to_dict() if pace.crawl is not None else None,
        )

    def live_in_flight(self, inflight_timeout_s: float, now_s: float) -> dict[str, float]:
        """The hand-outs not yet reported and not timed out (URL → hand-out time)."""
        return {u: t for u, t in self.in_flight.items() if now_s - t < inflight_timeout_s}

    def places(self, ahead: int, lead_s: float) -> int:
        """How many URLs of this host may be out at once: see :func:`handout_places`.

        Under a page limit (``page_limit``, URLFrontier's SetCrawlLimit) at
        most the pages it still allows: 0 once reached (the host's URLs stay
        queued, held by the limit).
        """
        places = handout_places(self.delay_s, ahead, lead_s)
        if self.page_limit is not None:
            places = min(places, max(0, self.page_limit - self.pages_fetched))
        return places

    def eligible_at_s(self, inflight_timeout_s: float, now_s: float, ahead: int = 1, lead_s: float = 0.0) -> float:
        """When the host may get its next hand-out (Unix s).

        Args:
            inflight_timeout_s: ``frontier.inflight.timeout.secs``: a hand-out
                with no result after this long no longer holds the host (its
                result was lost; it is handed out again).
            now_s: current time (Unix s).
            ahead: ``frontier.handout.ahead``, the most hand-outs of the host
                out at once (fetching or waiting their turn at the fetcher,
                whose queue paces them); see :meth:`places`.
            lead_s: ``frontier.handout.lead.secs``, how long before the host's
                earliest start (delay, Retry-After, back-off) a hand-out may
                leave, so the Kafka round trip is hidden inside the delay
                (docs/architecture.md invariant 6).

        Returns:
            max(time the host has fewer live hand-outs than its places,
            earliest start per the pace and the operator's block − ``lead_s``);
            INF when its page limit is reached (until a command raises it).
        """
        places = self.places(ahead, lead_s)
        if places <= 0:
            return INF
        live = sorted(self.live_in_flight(inflight_timeout_s, now_s).values(), reverse=True)
        held_until = live[places - 1] + inflight_timeout_s if len(live) >= places else 0.0
        start_s = max(self.next_fetch_at_s, self.blocked_until_s, self.operator_blocked_until_s)
        return max(held_until, start_s - lead_s)

    def with_rejection(self, reason: Reason) -> HostRecord:
        """This record with one more rejection for ``reason`` (counted under its value)."""
        counts = dict(self.rejected)
        counts[reason.value] = counts.get(reason.value, 0) + 1
        return replace(self, rejected=counts)

    def without_handouts(self, urls: list[str]) -> HostRecord:
        """This record with the hand-outs of ``urls`` no longer in flight (handed out again: squall.policy.takeover)."""
        return replace(self, in_flight={u: t for u, t in self.in_flight.items() if u not in urls})

    def with_handout(self, urls: list[str], now_s: float) -> HostRecord:
        in_flight = dict(self.in_flight)
        in_flight.update({u: now_s for u in urls})
        return replace(self, in_flight=in_flight)


def handout_places(delay_s: float, ahead: int, lead_s: float) -> int:
    """URLs of one queue that may be out at once (docs/architecture.md invariant 6).

    One is being fetched; enough more wait at the fetcher to cover the
    hand-out round trip (``lead_s``: result → signal → tick → fetch) at the
    queue's delay ``delay_s`` (s): ``1 + ceil(lead_s / delay_s)``, at least 1
    and at most ``ahead`` (``frontier.handout.ahead``). A 1 s host with a
    0.5 s lead gets 2 places; a 0.05 s host gets ``ahead``; a host whose
    delay is not known yet (``delay_s`` 0: nothing reported) gets 2.
    """
    if ahead <= 1:
        return 1
    if delay_s <= 0:
        return 2  # no fetch reported yet (delay unknown), or no delay at all: one fetching, one waiting
    return max(1, min(ahead, 1 + math.ceil(lead_s / delay_s)))


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
