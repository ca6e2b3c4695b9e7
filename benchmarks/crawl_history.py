"""What a run set ran on (:class:`Meta`) and its rows in the history file (benchmarks/history.csv).

:func:`history_rows` gives one :data:`HISTORY_FIELDS` row per squall crawler:
the medians of its runs as text, pages/s and CPU-seconds per 1 000 pages
with two decimals, ratios with three ("" where unknown), beside the commit,
date, machine and load average of :class:`Meta`; :func:`append_history`
appends them to the CSV file, refusing one whose header differs.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks.crawl_measures import Row
from benchmarks.crawl_summary import Spread, by_crawler, compare, summarize


@dataclass(frozen=True)
class Meta:
    """What a run set ran on and with: the report's header and the history row's first columns."""

    commit: str  # short hash, "-dirty" if tracked files (the history file aside) differ from it
    date: str  # UTC, ISO 8601 to the second, at the start
    cpu_model: str
    cores: int
    load: tuple[float, float, float]  # load average (1, 5, 15 min) at the start
    python: str
    profile: str  # --name
    farm: str  # the farm and crawl parameters, e.g. "100x10 d=1 w=1 links=3 offsite=0"
    runs: int
    bound_pps: float
    scrapy: str | None = None  # Scrapy's version, None without --peer scrapy
    notes: tuple[str, ...] = ()

    @property
    def machine(self) -> str:
        return f"{self.cores} × {self.cpu_model}"


def _csv(v: float | None, spec: str) -> str:
    return "" if v is None or math.isnan(v) else format(v, spec)


HISTORY_FIELDS = (
    "commit",
    "date",
    "machine",
    "load_1m",
    "python",
    "scrapy",
    "profile",
    "farm",
    "runs",
    "crawler",
    "squall_pages_per_s",
    "squall_ratio_to_bound",
    "squall_cpu_s_per_1k_pages",
    "squall_records_per_page",
    "scrapy_pages_per_s",
    "scrapy_cpu_s_per_1k_pages",
    "pages_per_s_ratio",
    "cpu_per_page_ratio",
)


def history_rows(meta: Meta, rows: Sequence[Row]) -> list[dict[str, str]]:
    """One :data:`HISTORY_FIELDS` row per squall crawler of ``rows``: the medians of its runs ("" = unknown)."""
    summaries = {label: summarize(rs) for label, rs in by_crawler(rows).items()}
    theirs = summaries.get("scrapy", {})
    ratios = {c.squall: c for c in compare(summaries)}

    def med(s: Mapping[str, Spread | None], name: str, spec: str) -> str:
        v = s.get(name)
        return _csv(None if v is None else v.median, spec)

    out = []
    for label, s in summaries.items():
        if not label.startswith("squall"):
            continue
        c = ratios.get(label)
        out.append(
            {
                "commit": meta.commit,
                "date": meta.date,
                "machine": meta.machine,
                "load_1m": f"{meta.load[0]:.2f}",
                "python": meta.python,
                "scrapy": meta.scrapy or "",
                "profile": meta.profile,
                "farm": meta.farm,
                "runs": str(meta.runs),
                "crawler": label,
                "squall_pages_per_s": med(s, "pages/s", ".2f"),
                "squall_ratio_to_bound": med(s, "ratio", ".3f"),
                "squall_cpu_s_per_1k_pages": med(s, "cpu/1k", ".2f"),
                "squall_records_per_page": med(s, "rec/page", ".2f"),
                "scrapy_pages_per_s": med(theirs, "pages/s", ".2f"),
                "scrapy_cpu_s_per_1k_pages": med(theirs, "cpu/1k", ".2f"),
                "pages_per_s_ratio": _csv(c.pages_per_s if c else None, ".3f"),
                "cpu_per_page_ratio": _csv(c.cpu_per_page if c else None, ".3f"),
            }
        )
    return out


def append_history(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """Append ``rows`` to the CSV file ``path``, writing the header first if the file is new or empty.

    Raises:
        ValueError: the file's header is not :data:`HISTORY_FIELDS` (rows would land in the wrong columns).
    """
    fresh = not path.exists() or path.stat().st_size == 0
    if not fresh:
        with path.open(newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
        if tuple(header) != HISTORY_FIELDS:
            raise ValueError(f"{path}: its header {header} is not {list(HISTORY_FIELDS)}")
    with path.open("a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=HISTORY_FIELDS)
        if fresh:
            writer.writeheader()
        writer.writerows(rows)
