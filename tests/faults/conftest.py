"""The fault suite: markers, the profile, and the results table printed at the end of the run.

Every test here gets the ``faults`` and ``integration`` markers (a real
broker and real workers): ``pytest -m 'not faults'`` leaves it out.
``SQUALL_FAULTS_PROFILE=long`` selects the long profile; the table is also
written to ``$SQUALL_FAULTS_TABLE`` (Markdown) when that is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

_HERE = Path(__file__).resolve().parent
RESULTS: list[dict[str, Any]] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.faults)
            item.add_marker(pytest.mark.integration)


def markdown_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return ""
    cols = list(rows[0])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    totals = {c: sum(r[c] for r in rows) for c in cols if all(isinstance(r[c], int) and not isinstance(r[c], bool)
                                                                  for r in rows) and c != "seed"}
    lines.append("| **total** | " + " | ".join(str(totals.get(c, "")) for c in cols[1:]) + " |")
    return "\n".join(lines)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001 (pytest hook)
    if not RESULTS:
        return
    table = markdown_table(RESULTS)
    terminalreporter.write_sep("=", f"fault suite ({os.environ.get('SQUALL_FAULTS_PROFILE', 'ci')} profile)")
    terminalreporter.write_line(table)
    out = os.environ.get("SQUALL_FAULTS_TABLE")
    if out:
        Path(out).write_text(table + "\n", encoding="utf-8")
