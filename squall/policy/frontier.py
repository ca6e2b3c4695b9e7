"""The spout's view of a host: its record in the hosts table and its hand-out places (pure).

:class:`HostRecord` is the value of the hosts table (key: partition key):
when the host may get its next hand-out (``next_fetch_at_s``,
``blocked_until_s``), what is in flight, the queue regulator's state
(forwarded robots delay, back-off) and per-reason rejection counts. The
index of the URLs waiting in each host's queue is
:class:`squall.policy.due_index.DueIndex`.

Eligibility (docs/architecture.md invariants 2 and 6): a host gets a hand-out
when fewer than ``frontier.handout.ahead`` of its URLs are out and its
earliest start (delay, Retry-After, back-off) is at most
``frontier.handout.lead.secs`` away; the fetcher's queue then starts each URL
on time. It gets at most ``frontier.max.urls.per.bucket`` URLs, never more
than the free hand-out places.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.policy.backoff import HostBackoff
from squall.policy.codec import evolve, field_values
from squall.policy.crawl_delay import CrawlDelayState
from squall.policy.pace import PaceState
from squall.policy.reasons import Reason

INF = float("inf")


@dataclass(frozen=True)
class HostRecord:
    """State of one queue (host, or domain per ``partition.url.mode``). Times: Unix seconds.

    The pace fields (``next_fetch_at_s``, ``delay_s``, ``backoff``,
    ``crawl_delay``) are the durable copy of the queue's
    :class:`squall.policy.pace.PaceState` (see :meth:`pace` / :meth:`with_pace`),
    written by the queue regulator from the same model the fetcher's gate uses;
    the Retry-After / back-off block (:attr:`blocked_until_s`) is the back-off
    state's, stored once (:meth:`to_dict` also writes it under its own key for
    readers of that shape; :meth:`from_dict` reads it back from ``backoff``).
    ``in_flight`` maps each handed-out URL to its hand-out time; ``seen_fetch_ids``
    keeps the last signals applied (re-delivery is idempotent);
    ``crawl_delay`` is the CrawlDelayPolicy state (StormCrawler's) and ``backoff``
    the HostBackoff state as dicts; ``rejected`` counts policy
    rejections of URLs of this host per :class:`squall.policy.reasons.Reason` value.
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

    @property
    def blocked_until_s(self) -> float:
        """End of the host's Retry-After or back-off block (Unix s; 0.0 = none): its back-off state's."""
        return float((self.backoff or {}).get("blocked_until_s") or 0.0)

    @property
    def backoff_attempts(self) -> int:
        """Consecutive 429/503 answers without Retry-After in the host's back-off state (0 = not backing off)."""
        return int((self.backoff or {}).get("attempts") or 0)

    def to_dict(self) -> dict[str, Any]:
        """The hosts-table value: the fields, and ``blocked_until_s`` (derived) as records always had it."""
        out = field_values(self)
        out["blocked_until_s"] = self.blocked_until_s
        return out

    def seeded_for(self, host: str, by_name: bool) -> bool:
        """Whether ``host`` counts as seeded here: the queue was seeded, or (``by_name``, byIP) that name was."""
        return host in self.seeded_hosts if by_name else self.seeded

    def with_seed(self, host: str) -> HostRecord:
        """This record with ``host`` seeded (and the queue marked seeded)."""
        return evolve(self, seeded=True, seeded_hosts=sorted({*self.seeded_hosts, host}))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostRecord:
        """Rebuild a record from :meth:`to_dict` output; unknown keys (and the derived ``blocked_until_s``) ignored."""
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
        return evolve(
            self,
            next_fetch_at_s=pace.next_fetch_at_s,
            delay_s=pace.delay_s,
            # the rate block is the back-off's (blocked_until_s); the operator's block is its own field
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
        return evolve(self, rejected=counts)

    def without_handouts(self, urls: list[str]) -> HostRecord:
        """This record with the hand-outs of ``urls`` no longer in flight (handed out again: squall.policy.takeover)."""
        return evolve(self, in_flight={u: t for u, t in self.in_flight.items() if u not in urls})

    def with_handout(self, urls: list[str], now_s: float) -> HostRecord:
        in_flight = dict(self.in_flight)
        in_flight.update({u: now_s for u in urls})
        return evolve(self, in_flight=in_flight)


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
