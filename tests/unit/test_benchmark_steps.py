"""benchmarks/steps.py runs every step both ways and prints one row each (what the docs' table is cut from)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.steps import main


def test_every_step_prints_its_row_with_both_timings_and_their_ratio(capsys) -> None:
    assert main(["--ops", "50", "--rounds", "1"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert [row.split("  ")[0] for row in rows] == ["table put", "JSON read", "URL record", "fetch target"]
    for row in rows:
        cells = row.split()
        then = next(float(cell) for cell in cells if cell.replace(".", "", 1).isdigit())
        now, ratio = float(cells[-2]), float(cells[-1])
        assert then > 0 and now >= 0 and ratio >= 0  # a cache hit can round to 0.00 µs over a few operations
