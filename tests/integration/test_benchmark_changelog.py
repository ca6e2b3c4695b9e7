"""benchmarks/changelog.py times both ways against the broker and prints one row per records-a-turn figure."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.changelog import main


def test_every_row_has_both_timings_and_their_ratio(kafka_bootstrap: str, capsys) -> None:
    assert main(["--bootstrap", kafka_bootstrap, "--records", "200", "--rounds", "1", "--per-turn", "1,8"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:]
    assert [int(row.split()[0]) for row in rows] == [1, 8]
    for row in rows:
        faust_us, squall_us, ratio = (float(cell) for cell in row.split()[1:])
        assert faust_us > 0 and squall_us > 0
        assert abs(ratio - squall_us / faust_us) <= 0.01 + 0.05 * ratio  # the printed figures are rounded
