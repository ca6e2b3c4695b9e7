"""Prometheus metrics of a squall worker (prometheus-client), all named ``squall_*``.

Declarations and the pure helpers that shape their labels; the worker's
``/metrics`` page and the gauges read from the tables at scrape time live
in :mod:`agents.observe`. Label cardinality is bounded by construction:
statuses and reasons are enums (:class:`squall.policy.reasons.Status`,
:class:`squall.policy.reasons.Reason`), robots outcomes a fixed set, and per-host
series exist only for the ``metrics.hosts.top`` hosts with the most
requests — never a label per URL.

Counters are per worker process (Prometheus sums them over workers); the
table gauges cover the partitions the worker owns.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram

ROBOTS_OUTCOMES = ("2xx", "3xx", "4xx", "5xx", "429", "unreachable")
# fetch latency buckets (s): loopback pages take milliseconds, the web up to http.timeout.total
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The counters and histograms a worker increments as it works (one registry per process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.fetch_results = Counter(
            "squall_fetch_results",
            "Results of handed-out URLs by status and reason "
            "('' = none; a robots denial is a result without a request)",
            ["status", "reason"],
            registry=r,
        )
        self.fetched_bytes = Counter(
            "squall_fetched_bytes", "Response body bytes received (pages, decoded)", registry=r
        )
        self.fetch_latency = Histogram(
            "squall_fetch_duration_seconds",
            "Page fetch time, request start to body end (s)",
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.robots_fetches = Counter(
            "squall_robots_fetches",
            "robots.txt fetches by outcome (status class, 429, unreachable)",
            ["outcome"],
            registry=r,
        )
        self.audit_requests = Counter(
            "squall_audit_requests",
            "Requests recorded by the politeness audit (pages, robots.txt and its redirect hops)",
            registry=r,
        )
        self.audit_violations = Counter(
            "squall_audit_violations",
            "Requests that started before the delay in force or inside a Retry-After/back-off block (must stay 0)",
            registry=r,
        )
        self.fenced_seconds = Counter(
            "squall_fetcher_fenced_seconds",
            "Time the fetcher started no request because the group coordinator had not confirmed this "
            "worker's membership for kafka.session.timeout.secs minus kafka.session.fence.margin.secs (s)",
            registry=r,
        )
        self.documents = Counter(
            "squall_documents",
            "FETCHED HTML pages by document outcome: sent to the documents topic, or the reason none was "
            "(noindex.meta, noindex.header); only counted with documents.enabled",
            ["outcome"],
            registry=r,
        )
        self.links_refused = Counter(
            "squall_links_refused",
            "Outlinks refused for a host that has no record in the hosts table (a host never seeded and "
            "holding no URL: counted here, not in a host record), by reason",
            ["reason"],
            registry=r,
        )
        for outcome in ROBOTS_OUTCOMES:  # export every outcome from the start (0 is information)
            self.robots_fetches.labels(outcome=outcome)


def robots_outcome(status: int | None) -> str:
    """The ``outcome`` label of a robots.txt fetch: HTTP status class, ``429``, or ``unreachable`` (None)."""
    if status is None:
        return "unreachable"
    if status == 429:
        return "429"
    return f"{min(max(status // 100, 2), 5)}xx"


class RateWindow:
    """Events per second over the last ``window_s`` seconds (times passed in; Unix seconds)."""

    def __init__(self, window_s: float = 60.0) -> None:
        if window_s <= 0:
            raise ValueError(f"window must be positive, got {window_s}")
        self.window_s = window_s
        self._times: deque[float] = deque()

    def add(self, at_s: float) -> None:
        self._times.append(at_s)

    def rate(self, now_s: float) -> float:
        """Events per second in the window ending at ``now_s``.

        Divided by the time the window really covers: from its first event
        (or the window's start, whichever is later) to ``now_s``, at least 1 s
        — a crawl that began 10 s ago, or again after an idle spell, is not
        diluted over the whole window.
        """
        while self._times and self._times[0] < now_s - self.window_s:
            self._times.popleft()
        if not self._times:
            return 0.0
        return len(self._times) / min(self.window_s, max(now_s - self._times[0], 1.0))

    def __len__(self) -> int:
        """Events kept (those of the last window, as of the last :meth:`rate`)."""
        return len(self._times)


def top_keys(counts: Iterable[tuple[str, int]], n: int) -> list[str]:
    """The ``n`` keys with the highest counts (ties by key), for the per-host series."""
    return [k for k, _ in sorted(counts, key=lambda kv: (-kv[1], kv[0]))[: max(n, 0)]]


def counter_total(counter: Counter, **labels: str) -> float:
    """The sum of ``counter``'s series whose labels include ``labels`` (every series without ``labels``)."""
    total = 0.0
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total") and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def progress_line(pages: int, pages_per_s: float, due: int, in_flight: int, violations: int) -> str:
    """The worker's periodic progress line (``metrics.log.interval.secs``): its own counts since it started.

    ``pages``: pages FETCHED; ``pages_per_s``: over the last minute; ``due``:
    URLs in its due index (scheduled, waiting for their host's turn);
    ``in_flight``: hand-outs at its fetcher (waiting for a turn or fetched
    now); ``violations``: politeness audit violations.
    """
    return (
        f"squall: progress: {pages} pages fetched ({pages_per_s:.2f}/s over the last minute), "
        f"{due} due, {in_flight} in flight, {violations} politeness violations"
    )
