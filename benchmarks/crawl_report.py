"""The report of a run set, as text or as Markdown, and its JSON form (``--json``, read back by ``--report``).

:func:`report_lines` gives the whole report: the header (:func:`header_lines`:
profile, farm, commit, machine), the per-run table (:data:`COLUMNS`, when a
crawler ran more than once), the summary (:data:`SUMMARY_COLUMNS`, min /
median / max), the squall / Scrapy ratios and the records per page by
topic. Times in seconds (``s``, the gaps, ``wall s``), ``cpu/1k`` in
CPU-seconds per 1 000 pages, ``rss MB`` in MiB; "-" is unknown. In text the
header and the notes are ``#`` comment lines, in Markdown bullet lists.
:func:`report_data` is the same as JSON-ready data (NaN as None) and
:func:`from_report_data` reads it back. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from benchmarks.crawl_history import Meta, history_rows
from benchmarks.crawl_measures import Row
from benchmarks.crawl_summary import FIGURES, by_crawler, compare, spread, summarize, topic_spreads

COLUMNS = (
    "run",
    "crawler",
    "pages",
    "s",
    "pages/s",
    "bound",
    "ratio",
    "min gap",
    "p1 gap",
    "viol",
    "dup",
    "cpu/1k",
    "rec/page",
    "links/cpu-s",
    "rss MB",
    "wall s",
)


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def finite(value: Any) -> Any:
    """``value`` (dicts, lists, tuples, numbers) with NaN and infinities as None: what JSON can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def cells(row: Row) -> list[str]:
    """One crawl's cells, in :data:`COLUMNS` order ("-": unknown)."""
    return [
        str(row.run),
        row.crawler,
        f"{row.pages}/{row.available}",
        _fmt(row.elapsed_s, ".1f"),
        _fmt(row.pps, ".1f"),
        _fmt(row.bound_pps, ".1f"),
        _fmt(row.ratio, ".2f"),
        _fmt(row.min_gap_s, ".3f"),
        _fmt(row.p1_gap_s, ".3f"),
        str(row.violations),
        str(row.duplicates),
        _fmt(row.cpu_per_1k, ".2f"),
        _fmt(row.records_per_page, ".2f"),
        _fmt(row.links_per_cpu_s, ",.0f"),
        _fmt(row.rss_mb, ".0f"),
        _fmt(row.wall_s, ".1f"),
    ]


SUMMARY_COLUMNS = ("crawler", "runs", *FIGURES)

# Row field → its words in the "seconds beyond the delays" note (crawl_measures.pace_losses)
LOSSES = {"start_lag_s": "start lag", "gap_excess_s": "gaps over the delay", "end_lag_s": "end lag"}


def losses_note(label: str, rows: Sequence[Row]) -> str | None:
    """Where ``label``'s seconds went beyond the delays, medians over ``rows`` (seconds, mean host); None if unknown."""
    medians: dict[str, float] = {}
    for name in (*LOSSES, "median_gap_s", "elapsed_s"):
        s = spread(getattr(r, name) for r in rows)
        if s is None:
            return None
        medians[name] = s.median
    parts = ", ".join(f"{words} {medians[name]:.2f}" for name, words in LOSSES.items())
    return (
        f"seconds beyond the delays, {label}, medians, s a host: {parts} "
        f"(of {medians['elapsed_s']:.1f} s; median gap {medians['median_gap_s']:.3f} s)"
    )


def summary_cells(label: str, rows: Sequence[Row]) -> list[str]:
    """One crawler's summary cells, in :data:`SUMMARY_COLUMNS` order: min / median / max of each figure."""
    summary = summarize(rows)
    out = [label, str(len(rows))]
    for name, (_get, spec) in FIGURES.items():
        s = summary[name]
        out.append("-" if s is None else s.cell(spec))
    return out


def render_table(header: Sequence[str], body: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    """A table as lines: Markdown (``| a | b |`` and a ``|---|`` rule) or plain text, columns aligned."""
    if markdown:
        return [
            "| " + " | ".join(header) + " |",
            "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in body),
        ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)]


def header_lines(meta: Meta) -> list[str]:
    """The report's header: profile and farm, commit and date, machine and Pythons, what a cell holds."""
    load = " ".join(f"{v:.2f}" for v in meta.load)
    peer = f"; Scrapy {meta.scrapy}" if meta.scrapy else ""
    return [
        f"benchmarks/crawl.py, profile {meta.profile}"
        + ("" if meta.profile == meta.farm else f" ({meta.farm})")
        + f"; bound N / D = {meta.bound_pps:g} pages/s",
        f"commit {meta.commit}, {meta.date}",
        f"machine: {meta.cores} cores ({meta.cpu_model}), load average {load} at the start; Python {meta.python}{peer}",
        f"cells: min / median / max of {meta.runs} run(s) (one value for one run); "
        "min gap: the smallest of a run; viol, dup: per run",
        *meta.notes,
    ]


def report_lines(meta: Meta, rows: Sequence[Row], markdown: bool = False) -> list[str]:
    """The whole report: header, the runs (if more than one), the summary, the ratios, records per page by topic."""
    groups = by_crawler(rows)
    summaries = {label: summarize(rs) for label, rs in groups.items()}

    def para(lines: Iterable[str]) -> list[str]:  # comment lines in text, a bullet list in Markdown
        return [f"- {x}" if markdown else f"# {x}" for x in lines]

    out = [*para(header_lines(meta)), ""]
    if any(len(rs) > 1 for rs in groups.values()):
        out += [*render_table(COLUMNS, [cells(r) for r in rows], markdown), ""]
    out += [*render_table(SUMMARY_COLUMNS, [summary_cells(k, rs) for k, rs in groups.items()], markdown), ""]
    notes = []
    for c in compare(summaries):
        notes.append(
            f"{c.squall} / scrapy, medians of {meta.runs} run(s): pages/s {_fmt(c.pages_per_s, '.2f')}, "
            f"CPU-s per page {_fmt(c.cpu_per_page, '.2f')}"
        )
    notes += [n for label, rs in groups.items() if (n := losses_note(label, rs))]
    for label, rs in groups.items():
        topics = topic_spreads(rs)
        if topics:
            parts = [f"{topic} {s.median:.2f}" for topic, s in topics.items() if topic != "total"]
            notes.append(
                f"records/page, {label}, medians: {', '.join(parts)}; total {_fmt(topics['total'].median, '.2f')}"
                if "total" in topics
                else f"records/page, {label}, medians: {', '.join(parts)}"
            )
    return out + (para(notes) if markdown else notes)


def report_data(meta: Meta, rows: Sequence[Row], args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything the report says, as JSON-ready data (NaN as None): ``--json``'s content, read back by ``--report``."""
    groups = by_crawler(rows)
    summaries = {label: summarize(rs) for label, rs in groups.items()}
    data = {
        "meta": asdict(meta),
        "args": dict(args or {}),
        "rows": [r.to_json() for r in rows],
        "summary": {k: {f: None if s is None else asdict(s) for f, s in v.items()} for k, v in summaries.items()},
        "records_per_page": {k: {t: asdict(s) for t, s in topic_spreads(rs).items()} for k, rs in groups.items()},
        "ratios": [asdict(c) for c in compare(summaries)],
        "history": history_rows(meta, rows),
    }
    return finite(data)


def from_report_data(data: Mapping[str, Any]) -> tuple[Meta, list[Row]]:
    """The :class:`Meta` and rows of :func:`report_data`'s output (derived figures are computed again)."""
    meta = dict(data["meta"])
    meta["load"] = tuple(meta["load"])
    meta["notes"] = tuple(meta.get("notes") or ())
    names = set(Row.__dataclass_fields__)
    nan_if_none = ("min_gap_s", "p1_gap_s", *LOSSES, "median_gap_s")  # NaN became null in JSON
    rows = []
    for r in data["rows"]:
        kw: dict[str, Any] = {k: v for k, v in r.items() if k in names}
        kw.update({k: float("nan") for k in nan_if_none if kw.get(k) is None})
        rows.append(Row(**kw))
    return Meta(**meta), rows
