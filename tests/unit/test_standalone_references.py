"""Comments, docstrings and docs stand alone: no reference a reader of the repository cannot open.

A rule's source is something public — RFC 9309 §2.3.1.4, RFC 9110 §10.2.3, a StormCrawler key or
pull request (apache/stormcrawler #1973), a Kafka KIP, the URLFrontier API — or a page of docs/.
Never a private design document ("seed" plus a three-digit number, a path into a seeds folder),
a ticket ("issue" plus a number), a fault trial by its number, a refinement or session number.
Every text file git tracks is scanned; a hit fails naming ``file:line``.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from squall.settings import ROOT

# Each alternative names one kind of private reference; case-insensitive.
PRIVATE = re.compile(
    r"\bseeds? 0\d\d\b"  # a design seed by number
    r"|\bseeds?/\d"  # a path into a seeds folder
    r"|\bissues? #?\d+"  # a ticket
    r"|\btickets? #?\d+"
    r"|\b(?:fault )?trials? (?:seed )?#?\d+"  # a fault trial by its number
    r"|\bseed 9\d{3}\b"  # a fault trial by its seed
    r"|\brefinement \d"
    r"|\bsession \d+\b",
    re.IGNORECASE,
)


def private_references(path: Path, rel: str) -> list[str]:
    """``rel:line: text`` for every line of ``path`` that names a private reference ([] for a binary file)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return []
    return [f"{rel}:{n}: {line.strip()[:160]}" for n, line in enumerate(text.splitlines(), 1) if PRIVATE.search(line)]


def tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout (git ls-files failed): nothing to scan")
    return [line for line in out.splitlines() if line]


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("# the permissive choice (seed " + "002)", True),
        ("see Seeds " + "000/001", True),
        ("(issue " + "9, item 1)", True),
        ("Issue " + "#12", True),
        ("fault trial " + "9103: a heartbeat", True),
        ("trial seed " + "9102", True),
        ("refinement " + "6e", True),
        ("RFC 9309 §2.3.1.4 and apache/stormcrawler #1973", False),
        ("kafka.session.timeout.secs (KIP-345)", False),
        ("the random seed 42 of the property tests", False),
        ("an issue with the broker", False),
    ],
)
def test_the_pattern_tells_private_references_from_public_ones(line: str, found: bool) -> None:
    assert bool(PRIVATE.search(line)) is found


def test_a_planted_reference_is_reported_with_its_file_and_line(tmp_path: Path) -> None:
    f = tmp_path / "x.py"
    planted = "# see issue " + "9 for why"  # split, so this file does not name one itself
    f.write_text(f'"""Fine."""\n\n{planted}\n', encoding="utf-8")
    assert private_references(f, "x.py") == [f"x.py:3: {planted}"]


def test_no_tracked_file_names_a_private_reference() -> None:
    hits = [hit for rel in tracked_files() for hit in private_references(ROOT / rel, rel)]
    assert not hits, "private references (state the rule and its public source instead):\n" + "\n".join(hits)
