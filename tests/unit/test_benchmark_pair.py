"""benchmarks/pair.py pairs two crawls' runs in order and reports the CPU-per-page ratio of each pair."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pytest

from benchmarks.pair import cpu_per_1k, main


def _report(path: Path, cpu_s: list[float], crawler: str = "squall (1 worker, WARC on)") -> Path:
    rows = [{"crawler": crawler, "run": i + 1, "pages": 4000, "cpu_s": c, "pps": 190.0} for i, c in enumerate(cpu_s)]
    rows.append({"crawler": "scrapy", "run": 1, "pages": 4000, "cpu_s": 1.0, "pps": 190.0})  # left out
    path.write_text(json.dumps({"meta": {"commit": path.stem}, "rows": rows}))
    return path


def test_each_pair_of_runs_gets_its_ratio_and_the_summary_their_mean_and_median(tmp_path: Path, capsys) -> None:
    before = _report(tmp_path / "a.json", [10.0, 8.0, 12.0])
    after = _report(tmp_path / "b.json", [9.0, 8.0, 9.0])
    assert main(["--report", str(before), str(after)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines.pop(0) == f"pair: before = {before} (a), after = {after} (b)"  # each file's commit
    pairs = [line.split() for line in lines[2:5]]
    assert [float(p[1]) for p in pairs] == [2.5, 2.0, 3.0]  # CPU-s per 1 000 pages
    assert [float(p[-1]) for p in pairs] == [0.9, 1.0, 0.75]
    assert lines[5].endswith("3 pair(s): mean 0.883, median 0.900, min 0.750, max 1.000")


def test_cpu_per_1k_is_nan_without_pages() -> None:
    assert cpu_per_1k({"cpu_s": 2.0, "pages": 4000}) == 0.5
    assert cpu_per_1k({"cpu_s": 2.0, "pages": 0}) != cpu_per_1k({"cpu_s": 2.0, "pages": 0})


def test_runs_of_different_crawlers_are_not_paired(tmp_path: Path) -> None:
    before = _report(tmp_path / "a.json", [10.0])
    after = _report(tmp_path / "b.json", [9.0], crawler="squall (1 worker, WARC off)")
    with pytest.raises(ValueError, match="paired with"):
        main(["--report", str(before), str(after)])
