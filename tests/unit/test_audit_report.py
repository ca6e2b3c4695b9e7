"""squall.cli.audit: the `squall audit` text and the parsing of changelog records."""

from __future__ import annotations

from squall.policy.audit import HostAudit, record_request
from squall.cli.audit import parse_records, to_text

NOW = 1_714_564_800.0


def audit(key: str, starts: list[tuple[float, float, float]]) -> HostAudit:
    a = None
    for start, required, blocked in starts:
        a = record_request(a, key, start, required, blocked, 0.01)
    assert a is not None
    return a


def test_records_of_another_shape_are_skipped() -> None:
    good = audit("a", [(NOW, 1.0, 0.0)])
    assert parse_records({"a": good.to_dict(), "b": {"requests": "x", "recent": 5}, "c": {"key": "c", "nope": 1}}) \
        == [good, HostAudit(key="c")]


def test_the_text_lists_the_worst_host_first_with_its_violations_and_block() -> None:
    fine = audit("fine.example", [(NOW, 1.0, 0.0), (NOW + 2, 1.0, 0.0)])
    bad = audit("bad.example", [(NOW, 1.0, 0.0), (NOW + 0.5, 1.0, NOW + 30)])
    lines = to_text([fine, bad], NOW + 10).splitlines()
    assert lines[0].startswith("politeness audit: 2 hosts, 4 requests, 1 violations (1 inside")
    assert lines[2].split()[:3] == ["bad.example", "2", "1"]
    assert "in force" in lines[2] and "1 inside" in lines[2]
    assert "gap 0.500s < 1.000s" in lines[3]
    assert lines[4].split()[:3] == ["fine.example", "2", "0"]
