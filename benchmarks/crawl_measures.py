"""The measures of one crawl, from the recording server's requests, and its :class:`Row`: pure functions.

Units: times and gaps in seconds (a request's ``t`` and a sample's time are
Unix seconds, as :class:`squall.tools.testsite.RecordingServer` records them;
``elapsed_s``, ``min_gap_s``, ``p1_gap_s``, ``wall_s`` are durations in
seconds), CPU in CPU-seconds (user + system), ``rss_mb`` in MiB, rates in
pages per second; ``cpu_per_1k`` is CPU-seconds per 1 000 pages. What each
figure says: benchmarks/crawl.py's docstring. The samples these functions
read are taken by :mod:`crawl_sampling`.
"""

from __future__ import annotations

import itertools
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

VIOLATION_SLACK_S = 0.010  # a gap shorter than delay - 10 ms is a violation (clock and scheduling noise below)


@dataclass
class Row:
    """One crawler's crawl of one host set; see benchmarks/crawl.py's docstring for each column.

    ``records``: topic label (:func:`topic_label`) → records written to the
    broker during the crawl; None for a crawler without Kafka (Scrapy).
    """

    crawler: str
    pages: int
    available: int
    elapsed_s: float
    bound_pps: float
    min_gap_s: float
    p1_gap_s: float
    violations: int
    duplicates: int
    cpu_s: float | None
    rss_mb: float | None
    wall_s: float
    links: int = 0
    run: int = 1
    records: dict[str, int] | None = None
    start_lag_s: float = float("nan")
    gap_excess_s: float = float("nan")
    end_lag_s: float = float("nan")
    median_gap_s: float = float("nan")

    @property
    def links_per_cpu_s(self) -> float | None:
        return None if not self.cpu_s or not self.links else self.links / self.cpu_s

    @property
    def pps(self) -> float:
        return self.pages / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    @property
    def ratio(self) -> float:
        return self.pps / self.bound_pps if self.bound_pps > 0 else float("nan")

    @property
    def cpu_per_1k(self) -> float | None:
        return None if self.cpu_s is None or not self.pages else self.cpu_s * 1000 / self.pages

    @property
    def records_by_topic_per_page(self) -> dict[str, float] | None:
        """Topic label → records per page (None without records or pages)."""
        if self.records is None or not self.pages:
            return None
        return {topic: n / self.pages for topic, n in self.records.items()}

    @property
    def records_per_page(self) -> float | None:
        per_topic = self.records_by_topic_per_page
        return None if per_topic is None else sum(per_topic.values())

    def to_json(self) -> dict[str, Any]:
        """The row's fields and derived figures (``pps``, ``ratio``, ...), for ``--json``."""
        derived = ("pps", "ratio", "cpu_per_1k", "links_per_cpu_s", "records_per_page", "records_by_topic_per_page")
        return {**asdict(self), **{name: getattr(self, name) for name in derived}}


def records_written(before: Mapping[tuple[str, int], int], after: Mapping[tuple[str, int], int]) -> dict[str, int]:
    """Records appended per topic between two snapshots of end offsets ((topic, partition) → end offset).

    A partition absent from ``before`` (its topic created in between) counts
    from offset 0; an end offset that went down (a topic deleted and
    created again) counts as 0, not as a negative number.
    """
    out: dict[str, int] = {}
    for (topic, partition), end in after.items():
        out[topic] = out.get(topic, 0) + max(0, end - before.get((topic, partition), 0))
    return out


def topic_label(topic: str, topology_id: str) -> str:
    """``<id>-status`` → ``status``; ``<id>-hosts-changelog`` → ``hosts changelog`` (others: the name itself)."""
    name = topic.removeprefix(f"{topology_id}-")
    return name.removesuffix("-changelog") + " changelog" if name.endswith("-changelog") else name


def sample_at(samples: Sequence[tuple[float, Any]], t_s: float) -> Any:
    """The value of the first sample at or after ``t_s`` (else the last); ``samples``: (Unix time, value), in order."""
    return next((value for t, value in samples if t >= t_s), samples[-1][1])


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered))))]


def pace_losses(by_host: Mapping[str, Sequence[float]], delay_s: float) -> dict[str, float]:
    """Where a crawl's seconds went beyond the delays, each a mean over the hosts, in seconds.

    ``by_host``: host → its requests' start times (Unix seconds, any order).
    For each host, the crawl's span (first → last request of any host) is
    its start lag (its first request after the crawl's first), its gaps
    (``len − 1`` of them, each the delay ``delay_s`` plus its excess), and
    its end lag (the crawl's last request after its own last). So
    ``elapsed = start_lag_s + gaps × delay_s + gap_excess_s + end_lag_s``
    for the mean host: a crawl that uses every allowed second has the three
    losses near 0. ``gap_excess_s`` sums ``gap − delay_s`` per host (a gap
    under the delay counts negative); ``median_gap_s`` is the median of
    every gap. All NaN without requests.
    """
    hosts = [sorted(times) for times in by_host.values() if times]
    if not hosts:
        return dict.fromkeys(("start_lag_s", "gap_excess_s", "end_lag_s", "median_gap_s"), float("nan"))
    first, last = min(h[0] for h in hosts), max(h[-1] for h in hosts)
    gaps = [b - a for h in hosts for a, b in itertools.pairwise(h)]
    return {
        "start_lag_s": statistics.fmean(h[0] - first for h in hosts),
        "gap_excess_s": statistics.fmean(h[-1] - h[0] - (len(h) - 1) * delay_s for h in hosts),
        "end_lag_s": statistics.fmean(last - h[-1] for h in hosts),
        "median_gap_s": statistics.median(gaps) if gaps else float("nan"),
    }


def measure(
    requests: list[dict[str, Any]],
    ips: set[str],
    delay_s: float,
    pages_per_host: int,
    links_per_page: dict[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """Politeness and throughput measures of the recorded ``requests`` to the hosts ``ips``.

    ``requests``: RecordingServer entries (``ip``, ``path``, ``t`` in Unix
    seconds). Returns a dict with ``pages`` (distinct non-robots paths),
    ``elapsed_s`` (first → last request), ``bound_pps`` (the pages available,
    ``len(ips) × pages_per_host``, over the shortest possible crawl: robots.txt
    then every page, ``delay_s`` apart, i.e. ``pages_per_host × delay_s``),
    ``gaps`` (every start-to-start gap within a host, seconds), ``min_gap_s``,
    ``p1_gap_s``, ``violations`` (gaps < delay − 10 ms), ``duplicates``
    (requests of an (ip, path) beyond its first), ``links`` (the links of
    the pages fetched, from ``links_per_page``: (ip, path) → number of links)
    and the four figures of :func:`pace_losses`.
    """
    mine = [r for r in requests if r["ip"] in ips]
    by_host: dict[str, list[float]] = defaultdict(list)
    for r in mine:
        by_host[r["ip"]].append(r["t"])
    gaps = [b - a for times in by_host.values() for a, b in itertools.pairwise(sorted(times))]
    counts = Counter((r["ip"], r["path"]) for r in mine)
    pages = sum(1 for (_, path) in counts if path != "/robots.txt")
    times = [r["t"] for r in mine]
    elapsed = max(times) - min(times) if times else 0.0
    shortest = pages_per_host * delay_s  # robots.txt, then the pages: pages_per_host gaps of delay_s
    return {
        "pages": pages,
        "elapsed_s": elapsed,
        "bound_pps": len(ips) * pages_per_host / shortest,
        "gaps": gaps,
        "min_gap_s": min(gaps, default=float("nan")),
        "p1_gap_s": percentile(gaps, 0.01),
        "violations": sum(1 for g in gaps if g < delay_s - VIOLATION_SLACK_S),
        "duplicates": sum(n - 1 for n in counts.values()),
        "links": sum((links_per_page or {}).get(k, 0) for k in counts),
        **pace_losses(by_host, delay_s),
    }


def cpu_until(samples: list[tuple[float, float]], t_s: float) -> float:
    """CPU seconds used from the first sample to the first one at or after ``t_s`` (else the last).

    ``samples``: (Unix time, cumulated CPU seconds) in time order, the first
    taken when the crawler was ready.
    """
    if not samples:
        return float("nan")
    return float(sample_at(samples, t_s)) - samples[0][1]


def row_of(
    crawler: str,
    m: dict[str, Any],
    available: int,
    cpu_s: float | None,
    rss_mb: float | None,
    wall_s: float,
    run: int,
    records: dict[str, int] | None = None,
) -> Row:
    """The :class:`Row` of one crawl from :func:`measure`'s figures ``m`` and the crawler's own."""
    return Row(
        crawler,
        m["pages"],
        available,
        m["elapsed_s"],
        m["bound_pps"],
        m["min_gap_s"],
        m["p1_gap_s"],
        m["violations"],
        m["duplicates"],
        cpu_s,
        rss_mb,
        wall_s,
        m["links"],
        run,
        records,
        m["start_lag_s"],
        m["gap_excess_s"],
        m["end_lag_s"],
        m["median_gap_s"],
    )
