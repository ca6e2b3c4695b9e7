"""The spout's view of the frontier: host records and the index of due URLs.

Two parts, both pure:

* :class:`HostRecord` — the value of the hosts table (key: partition key):
  when the host may get its next hand-out (``next_fetch_at_s``,
  ``blocked_until_s``), what is in flight, the queue regulator's state
  (forwarded robots delay, back-off) and per-reason rejection counts.
* :class:`DueIndex` — an in-memory index, one per Kafka partition, of the
  URLs waiting in each host's queue (a heap per host ordered by next fetch
  time, then priority) and of the hosts ordered by when they become eligible
  (a heap of tickets with lazy invalidation). Taking the next due host costs
  O(log n) in the number of hosts and URLs; nothing scans every stored URL.
  The index is a cache: it is rebuilt from the urls and hosts tables when a
  partition is assigned (restart, rebalance).

Eligibility (ARCHITECTURE.md invariants 2 and 6): a host gets a hand-out
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
    ``crawl_delay`` is the CrawlDelayPolicy state (seed 000) and ``backoff``
    the HostBackoff state (seed 002) as dicts; ``rejected`` counts policy
    rejections of URLs of this host per :class:`squall.policy.records.Reason` value.
    ``seeded_hosts``: the host names seeded under this key (byIP: one
    address serves several names, and only a seeded name is in scope).
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def seeded_for(self, host: str, by_name: bool) -> bool:
        """Whether ``host`` counts as seeded here: the queue was seeded, or (``by_name``, byIP) that name was."""
        return host in self.seeded_hosts if by_name else self.seeded

    def with_seed(self, host: str) -> "HostRecord":
        """This record with ``host`` seeded (and the queue marked seeded)."""
        return replace(self, seeded=True, seeded_hosts=sorted({*self.seeded_hosts, host}))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HostRecord":
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})

    def pace(self) -> PaceState:
        """The queue's pace as recorded here (the durable copy).

        Raises:
            ValueError: a stored back-off or crawl-delay state of the wrong shape.
        """
        return PaceState(next_fetch_at_s=float(self.next_fetch_at_s), delay_s=float(self.delay_s),
                         backoff=HostBackoff.from_dict(self.backoff) if self.backoff else None,
                         crawl=CrawlDelayState.from_dict(self.crawl_delay) if self.crawl_delay else None)

    def with_pace(self, pace: PaceState) -> "HostRecord":
        """This record with ``pace`` stored in it."""
        return replace(self, next_fetch_at_s=pace.next_fetch_at_s, delay_s=pace.delay_s,
                       blocked_until_s=pace.blocked_until_s,
                       backoff=pace.backoff.to_dict() if pace.backoff is not None else None,
                       crawl_delay=pace.crawl.to_dict() if pace.crawl is not None else None)

    def live_in_flight(self, inflight_timeout_s: float, now_s: float) -> dict[str, float]:
        """The hand-outs not yet reported and not timed out (URL → hand-out time)."""
        return {u: t for u, t in self.in_flight.items() if now_s - t < inflight_timeout_s}

    def places(self, ahead: int, lead_s: float) -> int:
        """How many URLs of this host may be out at once: see :func:`handout_places`."""
        return handout_places(self.delay_s, ahead, lead_s)

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
                (ARCHITECTURE.md invariant 6).

        Returns:
            max(time the host has fewer live hand-outs than its places,
            earliest start per the pace − ``lead_s``).
        """
        places = self.places(ahead, lead_s)
        live = sorted(self.live_in_flight(inflight_timeout_s, now_s).values(), reverse=True)
        held_until = live[places - 1] + inflight_timeout_s if len(live) >= places else 0.0
        return max(held_until, max(self.next_fetch_at_s, self.blocked_until_s) - lead_s)

    def with_rejection(self, reason: Reason) -> "HostRecord":
        """This record with one more rejection for ``reason`` (counted under its value)."""
        counts = dict(self.rejected)
        counts[reason.value] = counts.get(reason.value, 0) + 1
        return replace(self, rejected=counts)

    def with_handout(self, urls: list[str], now_s: float) -> "HostRecord":
        in_flight = dict(self.in_flight)
        in_flight.update({u: now_s for u in urls})
        return replace(self, in_flight=in_flight)


def handout_places(delay_s: float, ahead: int, lead_s: float) -> int:
    """URLs of one queue that may be out at once (ARCHITECTURE.md invariant 6).

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


class DueIndex:
    """Index of the due URLs of the hosts of one partition (see module docstring).

    Within a host, URLs whose next fetch time has come are taken by higher
    ``priority`` first, then earlier next fetch time (seeds before discovered
    URLs, issue 4 §4); a URL not yet due never blocks one that is. Not
    thread-safe; used from one asyncio loop. URLs are identified by their
    canonical string; pushing a URL already indexed replaces its entry.
    """

    def __init__(self) -> None:
        self._waiting: dict[str, list[tuple[float, int, int, str]]] = {}  # key -> heap(due, -prio, seq, url)
        self._ready: dict[str, list[tuple[int, float, int, str]]] = {}    # key -> heap(-prio, due, seq, url)
        self._entry_of: dict[str, tuple[float, int, str, int]] = {}       # url -> (due, prio, key, seq): live
        self._host_ready: dict[str, float] = {}                           # key -> eligible time (INF: not)
        self._tickets: list[tuple[float, int, str]] = []                  # heap(time, seq, key)
        self._ticket_of: dict[str, tuple[float, int]] = {}                # key -> live ticket
        self._seq = itertools.count()

    def __len__(self) -> int:
        return len(self._entry_of)

    def hosts(self) -> int:
        return len(self._waiting.keys() | self._ready.keys())

    def push(self, key: str, url: str, due_s: float, priority: int = 0) -> None:
        """Index ``url`` of queue ``key`` as due at ``due_s`` (replaces an earlier entry)."""
        seq = next(self._seq)
        self._entry_of[url] = (due_s, priority, key, seq)
        heapq.heappush(self._waiting.setdefault(key, []), (due_s, -priority, seq, url))
        self._reschedule(key)

    def remove(self, url: str) -> None:
        """Forget ``url`` (lazy: its heap entry is skipped when reached)."""
        entry = self._entry_of.pop(url, None)
        if entry is not None:
            self._reschedule(entry[2])

    def set_host_ready(self, key: str, eligible_at_s: float) -> None:
        """Record when queue ``key`` may next get a hand-out (INF = not until told)."""
        self._host_ready[key] = eligible_at_s
        self._reschedule(key)

    def next_due_s(self) -> float | None:
        """Earliest time some host has a due URL and is eligible (None: nothing)."""
        while self._tickets:
            t, seq, key = self._tickets[0]
            if self._ticket_of.get(key) == (t, seq):
                return t
            heapq.heappop(self._tickets)
        return None

    def pop_due(self, now_s: float, per_host: int, max_hosts: int | None = None) -> list[tuple[str, list[str]]]:
        """Take up to ``per_host`` due URLs of each eligible host, hosts in next-fetch-time order.

        Returns ``[(key, [url, ...]), ...]``. A host that got URLs is marked not
        eligible (INF) until :meth:`set_host_ready` is called again.
        """
        out: list[tuple[str, list[str]]] = []
        while self._tickets and (max_hosts is None or len(out) < max_hosts):
            t, seq, key = self._tickets[0]
            if self._ticket_of.get(key) != (t, seq):
                heapq.heappop(self._tickets)
                continue
            if t > now_s:
                break
            heapq.heappop(self._tickets)
            del self._ticket_of[key]
            urls = self._take_urls(key, now_s, per_host)
            if urls:
                out.append((key, urls))
                self._host_ready[key] = INF
            self._reschedule(key)
        return out

    def drop(self) -> None:
        """Forget everything (the partition was revoked)."""
        self.__init__()

    # -- internals ---------------------------------------------------------------------
    def _live(self, url: str, seq: int) -> bool:
        entry = self._entry_of.get(url)
        return entry is not None and entry[3] == seq

    def _promote(self, key: str, now_s: float) -> None:
        """Move the URLs of ``key`` whose due time has come from the waiting heap to the ready heap."""
        waiting = self._waiting.get(key)
        while waiting and waiting[0][0] <= now_s:
            due, neg_prio, seq, url = heapq.heappop(waiting)
            if self._live(url, seq):
                heapq.heappush(self._ready.setdefault(key, []), (neg_prio, due, seq, url))
        if waiting is not None and not waiting:
            del self._waiting[key]

    def _earliest(self, key: str) -> float | None:
        """Earliest due time among the live URLs of ``key`` (None: none)."""
        ready = self._ready.get(key)
        while ready and not self._live(ready[0][3], ready[0][2]):
            heapq.heappop(ready)
        if ready:
            return ready[0][1]  # ready URLs were all due when promoted: any of their times is in the past
        if ready is not None:
            del self._ready[key]
        waiting = self._waiting.get(key)
        while waiting and not self._live(waiting[0][3], waiting[0][2]):
            heapq.heappop(waiting)
        if waiting:
            return waiting[0][0]
        if waiting is not None:
            del self._waiting[key]
        return None

    def _take_urls(self, key: str, now_s: float, n: int) -> list[str]:
        self._promote(key, now_s)
        ready = self._ready.get(key, [])
        urls: list[str] = []
        while ready and len(urls) < n:
            _, _, seq, url = heapq.heappop(ready)
            if self._live(url, seq):
                del self._entry_of[url]
                urls.append(url)
        return urls

    def _reschedule(self, key: str) -> None:
        earliest = self._earliest(key)
        ready = self._host_ready.get(key, 0.0)
        if earliest is None or ready == INF:
            self._ticket_of.pop(key, None)
            return
        t = max(earliest, ready)
        current = self._ticket_of.get(key)
        if current is not None and current[0] == t:
            return
        seq = next(self._seq)
        self._ticket_of[key] = (t, seq)
        heapq.heappush(self._tickets, (t, seq, key))
