"""benchmarks/outlinks.py times the parse step's three link steps on the 41-link farm's pages and prints one row each."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.outlinks import main


def test_each_step_prints_its_microseconds_a_page_and_the_links_a_page(capsys) -> None:
    assert main(["--rounds", "1", "--hosts", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Outlinks micro-benchmark: commit ") and "1 rounds x 76 pages" in lines[0]
    rows = {line.split()[0]: float(line.split()[1]) for line in lines[3:7]}
    assert list(rows) == ["parse_html", "batch_outlinks", "left_to_send", "total"]
    assert all(value > 0 for value in rows.values())
    assert rows["total"] >= max(rows["parse_html"], rows["batch_outlinks"], rows["left_to_send"])
    assert lines[7] == "links a page (distinct, as found): 29.0"  # 18 of its host, 1 cross-host, 10 offsite
