"""What a fault trial measured: lost URLs, repeat fetches, politeness violations, recovery and stall times.

Pure functions over two records of a trial, so the fault suite
(tests/faults) and its unit tests share one definition:

* the recording server's request log (:class:`squall.tools.testsite.RecordingServer`:
  dicts with ``ip``, ``path``, ``t`` — arrival, Unix seconds —, ``status``
  — None if the client went away —, and ``retry_after`` when the answer
  carried one), and
* the latest URL records from the ``urls`` table (canonical URL → dict with ``status``).

Definitions (docs/faults.md):

* **lost**: an expected URL (a correct crawler fetches it; robots and
  scope applied) without a final status (FETCHED, REDIRECTION, ERROR).
* **repeats**: page requests beyond the answers the site scripted for that
  path (a page scripted ``statuses=(503,)`` is asked twice on purpose).
* **violations**: two requests to a host (robots.txt included) closer than
  that host's delay in force, or a request before a Retry-After answered to
  that host has run out (measured from the arrival of the answered request,
  which is earlier than the crawler's receipt of the answer: conservative).
* **recovery**: from a fault to the first page request after it to a host
  of the affected partitions; **stall**: the longest time, after a fault,
  without any request to the given hosts while they still had work.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

FINAL = frozenset({"FETCHED", "REDIRECTION", "ERROR"})
ROBOTS_PATH = "/robots.txt"


def page_url(request: Mapping[str, Any], port: int) -> str:
    return f"http://{request['ip']}:{port}{request['path']}"


def lost_urls(expected: Iterable[str], records: Mapping[str, Mapping[str, Any]]) -> set[str]:
    """Expected URLs whose record is missing or not final."""
    return {u for u in expected if (records.get(u) or {}).get("status") not in FINAL}


def repeat_counts(
    requests: Iterable[Mapping[str, Any]], port: int, scripted_answers: Mapping[str, int]
) -> Counter[str]:
    """URL → requests beyond its scripted answers (default 1), robots.txt excluded; only URLs with repeats."""
    asked: Counter[str] = Counter(page_url(r, port) for r in requests if r["path"] != ROBOTS_PATH)
    return Counter({u: n - scripted_answers.get(u, 1) for u, n in asked.items() if n > scripted_answers.get(u, 1)})


@dataclass(frozen=True)
class Violation:
    """One request that came too early: ``gap_s`` after the previous one (or the Retry-After's start)."""

    ip: str
    path: str
    at_s: float
    gap_s: float
    required_s: float
    rule: str  # "delay" or "retry-after"


def politeness_violations(
    requests: Sequence[Mapping[str, Any]], delay_s: Mapping[str, float], default_delay_s: float
) -> list[Violation]:
    """Requests closer to the previous one of their host than its delay, or inside a Retry-After.

    ``delay_s``: host ip → delay in force (s) between two request starts
    (max of ``fetcher.server.delay`` and its Crawl-delay); other hosts get
    ``default_delay_s``. A Retry-After of N seconds on an answer blocks that
    host for N seconds from the answered request's arrival.
    """
    by_host: dict[str, list[Mapping[str, Any]]] = {}
    for r in sorted(requests, key=lambda r: r["t"]):
        by_host.setdefault(r["ip"], []).append(r)
    out: list[Violation] = []
    for ip, reqs in by_host.items():
        need = delay_s.get(ip, default_delay_s)
        blocked_until = float("-inf")
        blocked_from = 0.0
        for prev, cur in itertools.pairwise(reqs):
            gap = cur["t"] - prev["t"]
            retry = _retry_after_s(prev)
            if retry is not None:
                blocked_from, blocked_until = prev["t"], max(blocked_until, prev["t"] + retry)
            if gap < need:
                out.append(Violation(ip, cur["path"], cur["t"], gap, need, "delay"))
            elif cur["t"] < blocked_until:
                out.append(
                    Violation(
                        ip, cur["path"], cur["t"], cur["t"] - blocked_from, blocked_until - blocked_from, "retry-after"
                    )
                )
    return out


def _retry_after_s(request: Mapping[str, Any]) -> float | None:
    """Seconds of a Retry-After on a 429/503 answer (the statuses that carry one: RFC 9110 §10.2.3)."""
    value = request.get("retry_after") if request.get("status") in (429, 503) else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def first_request_after(requests: Iterable[Mapping[str, Any]], t_s: float, ips: Iterable[str]) -> float | None:
    """Arrival time of the first page request after ``t_s`` to one of ``ips`` (None if none)."""
    wanted = set(ips)
    times = [r["t"] for r in requests if r["t"] > t_s and r["ip"] in wanted and r["path"] != ROBOTS_PATH]
    return min(times, default=None)


def longest_silence(requests: Iterable[Mapping[str, Any]], start_s: float, end_s: float, ips: Iterable[str]) -> float:
    """Longest interval inside [start_s, end_s] without a request to any of ``ips`` (seconds)."""
    wanted = set(ips)
    times = sorted(r["t"] for r in requests if r["ip"] in wanted and start_s <= r["t"] <= end_s)
    edges = [start_s, *times, end_s]
    return max((b - a for a, b in itertools.pairwise(edges)), default=0.0)


def inflight_at(hosts: Mapping[str, Mapping[str, Any]], keys: Iterable[str] | None = None) -> set[str]:
    """URLs handed out and not finished in the given hosts-table records (all hosts if ``keys`` is None)."""
    wanted = None if keys is None else set(keys)
    return {u for k, h in hosts.items() if wanted is None or k in wanted for u in (h.get("in_flight") or {})}
