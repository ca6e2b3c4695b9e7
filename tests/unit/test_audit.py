"""The politeness audit (squall.policy.audit): start-to-start gaps, blocks, restarts, merging."""

from __future__ import annotations

import json

import pytest

from squall.policy.audit import HostAudit, audits_of, merge, record_request, summary, worst_first

TOL = 0.01


def feed(starts: list[tuple[float, float, float]], audit: HostAudit | None = None, key: str = "h") -> HostAudit:
    """Feed (start_s, required_delay_s, blocked_until_s) triples in order."""
    for start, required, blocked in starts:
        audit = record_request(audit, key, start, required, blocked, TOL)
    assert audit is not None
    return audit


# (name, requests as (start, required delay, blocked until), violations, inside block)
CASES = [
    ("a single request is never a violation", [(100.0, 1.0, 0.0)], 0, 0),
    ("gaps at or above the delay are polite", [(100.0, 1.0, 0.0), (101.0, 1.0, 0.0), (103.5, 1.0, 0.0)], 0, 0),
    ("a gap short by less than the tolerance is polite", [(100.0, 1.0, 0.0), (100.995, 1.0, 0.0)], 0, 0),
    ("a gap short by more than the tolerance is a violation", [(100.0, 1.0, 0.0), (100.98, 1.0, 0.0)], 1, 0),
    ("two requests at the same instant are a violation", [(100.0, 0.2, 0.0), (100.0, 0.2, 0.0)], 1, 0),
    ("each short gap counts", [(0.0, 2.0, 0.0), (1.0, 2.0, 0.0), (2.0, 2.0, 0.0), (5.0, 2.0, 0.0)], 2, 0),
    ("the delay in force at the request is the one compared",
     [(0.0, 0.5, 0.0), (0.6, 0.5, 0.0), (1.2, 2.0, 0.0)], 1, 0),
    ("a request after the block ends is polite", [(0.0, 0.2, 0.0), (6.0, 0.2, 5.0)], 0, 0),
    ("a request the fetcher sends inside the block it knows is a violation", [(0.0, 0.2, 0.0), (3.0, 0.2, 5.0)], 1, 1),
    ("a block seen earlier still counts for a later request", [(0.0, 0.2, 10.0), (5.0, 0.2, 0.0)], 2, 2),
    ("a request both too soon and inside a block is one violation", [(0.0, 1.0, 0.0), (0.1, 1.0, 9.0)], 1, 1),
    ("zero delay allows back-to-back requests", [(0.0, 0.0, 0.0), (0.0, 0.0, 0.0)], 0, 0),
]


@pytest.mark.parametrize("name,starts,violations,inside", CASES, ids=[c[0] for c in CASES])
def test_violations_are_counted_by_the_rules(name: str, starts, violations: int, inside: int) -> None:
    audit = feed(starts)
    assert (audit.violations, audit.inside_block) == (violations, inside)
    assert audit.requests == len(starts)
    assert len(audit.recent) == min(violations, 5)


def test_minimum_gap_and_margin_are_kept_with_the_delay_in_force_then() -> None:
    audit = feed([(0.0, 1.0, 0.0), (1.5, 1.0, 0.0), (2.7, 1.0, 0.0), (5.0, 2.0, 0.0)])
    assert audit.min_gap_s == pytest.approx(1.2)
    assert audit.required_at_min_gap_s == 1.0
    assert audit.min_margin_s == pytest.approx(0.2)
    assert audit.required_delay_s == 2.0
    assert (audit.first_start_s, audit.last_start_s) == (0.0, 5.0)


def test_the_last_block_is_remembered_with_when_it_began() -> None:
    audit = feed([(10.0, 0.2, 0.0), (20.0, 0.2, 15.0)])
    assert (audit.block_from_s, audit.blocked_until_s) == (10.0, 15.0)
    assert audit.violations == 0


def test_the_audit_survives_a_restart_through_its_json_record() -> None:
    before = feed([(0.0, 1.0, 0.0), (0.5, 1.0, 0.0)])
    stored = json.loads(json.dumps(before.to_dict()))  # the audit table's value through its changelog
    recovered = HostAudit.from_dict(stored)
    assert recovered == before
    # the first request after the restart is compared with the last one before it
    after = record_request(recovered, "h", 0.9, 1.0, 0.0, TOL)
    assert after.violations == 2 and after.requests == 3
    assert after.recent[-1].gap_s == pytest.approx(0.4)


def test_a_record_with_unknown_fields_still_loads() -> None:
    d = feed([(0.0, 1.0, 0.0)]).to_dict() | {"added_later": 1}
    assert HostAudit.from_dict(d).requests == 1


def test_only_the_latest_violations_are_kept() -> None:
    audit = feed([(float(i) * 0.1, 1.0, 0.0) for i in range(20)])
    assert audit.violations == 19
    assert len(audit.recent) == 5 and audit.recent[-1].start_s == pytest.approx(1.9)


@pytest.mark.parametrize("delay,tol", [(-1.0, TOL), (1.0, -0.01)])
def test_negative_delay_or_tolerance_is_refused(delay: float, tol: float) -> None:
    with pytest.raises(ValueError):
        record_request(None, "h", 0.0, delay, 0.0, tol)


def test_merging_keeps_the_longest_history_of_each_key() -> None:
    old = feed([(0.0, 1.0, 0.0), (2.0, 1.0, 0.0)], key="a")
    new = feed([(3.0, 1.0, 0.0)], audit=old, key="a")
    other = feed([(0.0, 1.0, 0.0)], key="b")
    merged = merge([new, other, old])
    assert merged == {"a": new, "b": other}


def test_stored_audits_are_read_by_key_merged_and_a_record_of_another_shape_is_skipped() -> None:
    old = feed([(0.0, 1.0, 0.0)], key="a")
    new = feed([(2.0, 1.0, 0.0)], audit=old, key="a")
    stored = [old.to_dict(), new.to_dict(), {"requests": 3}, {"key": "b", "recent": [5]}, ["a"], None, "x"]
    assert audits_of(stored) == {"a": new}


def test_worst_hosts_come_first_and_the_summary_totals_violations() -> None:
    fine = feed([(0.0, 1.0, 0.0), (5.0, 1.0, 0.0)], key="fine")
    close = feed([(0.0, 1.0, 0.0), (1.05, 1.0, 0.0)], key="close")
    bad = feed([(0.0, 1.0, 0.0), (0.1, 1.0, 0.0), (0.2, 1.0, 0.0)], key="bad")
    assert [a.key for a in worst_first([fine, close, bad])] == ["bad", "close", "fine"]
    s = summary([fine, close, bad])
    assert (s["hosts"], s["requests"], s["violations"]) == (3, 7, 2)
    assert [h["key"] for h in s["by_host"]] == ["bad", "close", "fine"]
    assert s["by_host"][0]["violations"] == 2
