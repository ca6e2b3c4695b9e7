"""The figures of a run set over its runs: min / median / max per crawler, squall / Scrapy ratios, records per page.

Pure functions of the rows (:class:`crawl_measures.Row`) of a run set. :data:`FIGURES` names each
figure of the summary with the row value it is made of, in the units of
:mod:`crawl_measures` (pages/s; CPU-seconds per 1 000 pages; seconds for the
gaps; MiB). A :class:`Spread` is one figure over the runs; the ratios of
:func:`compare` are ratios of medians, never medians of per-run ratios;
:func:`topic_spreads` gives the records written to each topic per page.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from benchmarks.crawl_measures import Row
from squall.policy.topics import TABLES, TOPIC_SUFFIXES

KNOWN_TOPICS = (*TOPIC_SUFFIXES, *(f"{table} changelog" for table in TABLES))


def topic_order(labels: Iterable[str]) -> list[str]:
    """``labels`` in a fixed order: squall's topics, then its table changelogs, then any other by name."""
    known = [t for t in KNOWN_TOPICS if t in set(labels)]
    return known + sorted(set(labels) - set(KNOWN_TOPICS))


@dataclass(frozen=True)
class Spread:
    """One figure over ``n`` runs: its smallest value, median and largest value."""

    low: float
    median: float
    high: float
    n: int

    def cell(self, spec: str) -> str:
        """``low / median / high`` formatted with ``spec``; the value alone for one run."""
        if self.n == 1:
            return format(self.median, spec)
        return " / ".join(format(v, spec) for v in (self.low, self.median, self.high))


def spread(values: Iterable[float | None]) -> Spread | None:
    """The :class:`Spread` of ``values`` without the unknown ones (None, NaN); None if none is left."""
    known = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not known:
        return None
    return Spread(min(known), statistics.median(known), max(known), len(known))


# figure → (what one row says, format): the summary's figures, in its column order
FIGURES: dict[str, tuple[Callable[[Row], float | None], str]] = {
    "pages": (lambda r: r.pages, ".0f"),
    "pages/s": (lambda r: r.pps, ".1f"),
    "ratio": (lambda r: r.ratio, ".2f"),
    "cpu/1k": (lambda r: r.cpu_per_1k, ".2f"),
    "rec/page": (lambda r: r.records_per_page, ".2f"),
    "links/cpu-s": (lambda r: r.links_per_cpu_s, ",.0f"),
    "rss MB": (lambda r: r.rss_mb, ".0f"),
    "min gap": (lambda r: r.min_gap_s, ".3f"),
    "viol": (lambda r: r.violations, ".0f"),
    "dup": (lambda r: r.duplicates, ".0f"),
}


def by_crawler(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows grouped by crawler label, in the order of each label's first row."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.crawler, []).append(row)
    return groups


def summarize(rows: Sequence[Row]) -> dict[str, Spread | None]:
    """Each of :data:`FIGURES` over ``rows`` (one crawler's runs)."""
    return {name: spread(get(r) for r in rows) for name, (get, _spec) in FIGURES.items()}


def topic_spreads(rows: Sequence[Row]) -> dict[str, Spread]:
    """Topic label → records per page over ``rows`` (a topic missing from a run counts 0 there), plus ``total``.

    squall's own topics are always there; another topic (Faust's ``__assignor-__leader``) only if it got records.
    """
    per_run = [r.records_by_topic_per_page for r in rows]
    known = [p for p in per_run if p is not None]
    out: dict[str, Spread] = {}
    for topic in topic_order({t for p in known for t in p}):
        s = spread(p.get(topic, 0.0) for p in known)
        if s is not None and (s.high > 0 or topic in KNOWN_TOPICS):  # Faust's own idle topics left out
            out[topic] = s
    total = spread(r.records_per_page for r in rows)
    if total is not None:
        out["total"] = total
    return out


def ratio_of_medians(ours: Spread | None, theirs: Spread | None) -> float | None:
    """``ours.median / theirs.median``; None if either is unknown or theirs is 0."""
    if ours is None or theirs is None or theirs.median == 0:
        return None
    return ours.median / theirs.median


@dataclass(frozen=True)
class Comparison:
    """squall / Scrapy from the medians: pages/s (above 1: squall is faster) and CPU-s per page (above 1: squall uses more)."""

    squall: str
    pages_per_s: float | None
    cpu_per_page: float | None


def compare(summaries: Mapping[str, Mapping[str, Spread | None]], peer: str = "scrapy") -> list[Comparison]:
    """One :class:`Comparison` per squall crawler of ``summaries`` (label → :func:`summarize`) against ``peer``."""
    theirs = summaries.get(peer)
    if theirs is None:
        return []
    return [
        Comparison(
            label, ratio_of_medians(s["pages/s"], theirs["pages/s"]), ratio_of_medians(s["cpu/1k"], theirs["cpu/1k"])
        )
        for label, s in summaries.items()
        if label.startswith("squall")
    ]
