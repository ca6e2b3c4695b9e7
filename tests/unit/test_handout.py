"""squall.policy.handout: which due URLs of a host leave now."""

from __future__ import annotations

import pytest

from squall.policy.frontier import HostRecord
from squall.policy.handout import HandoutConfig, choose, due_at_s, eligible_at_s, next_soon
from squall.policy.schedule import UrlRecord

NOW = 1_000.0
CONFIG = HandoutConfig(ahead=2, lead_s=1.0, inflight_timeout_s=60.0, per_bucket=10)


def records(*due_at_s: float) -> list[tuple[UrlRecord, float]]:
    return [(UrlRecord(url=f"https://example.com/{i}", key="example.com"), t) for i, t in enumerate(due_at_s)]


def test_a_free_host_gets_its_due_urls_as_far_as_it_has_places() -> None:
    host = HostRecord(key="example.com", delay_s=1.0)
    got = choose(host, records(NOW - 3, NOW - 2, NOW - 1, NOW + 5), NOW, NOW, CONFIG)
    assert [r.url for r in got] == ["https://example.com/0", "https://example.com/1"]  # two places, one not due


def test_a_host_with_every_place_taken_gets_nothing() -> None:
    host = HostRecord(key="example.com", delay_s=1.0).with_handout(
        ["https://example.com/a", "https://example.com/b"], NOW
    )
    assert choose(host, records(NOW - 1), NOW, NOW, CONFIG) == []


@pytest.mark.parametrize(
    ("blocked_for_s", "by_s", "gets"), [(30.0, NOW, False), (30.0, NOW + 40, True), (0.0, NOW, True)]
)
def test_a_blocked_host_gets_urls_only_if_it_is_eligible_by_the_time_asked(
    blocked_for_s: float, by_s: float, gets: bool
) -> None:
    host = HostRecord(key="example.com", delay_s=1.0, backoff={"attempts": 0, "blocked_until_s": NOW + blocked_for_s})
    assert bool(choose(host, records(NOW - 1), NOW, by_s, CONFIG)) is gets


def test_a_backlogged_host_gets_its_next_url_in_the_same_event_only_within_one_delay() -> None:
    free = HostRecord(key="example.com", delay_s=2.0)
    assert next_soon(free, NOW, CONFIG)
    blocked = HostRecord(key="example.com", delay_s=2.0, backoff={"attempts": 0, "blocked_until_s": NOW + 30})
    assert not next_soon(blocked, NOW, CONFIG)
    assert eligible_at_s(blocked, NOW, CONFIG) > NOW + 2.0


@pytest.mark.parametrize(
    ("status", "next_s", "blocked_s", "due"),
    [
        ("DISCOVERED", NOW - 1, 0.0, NOW - 1),
        ("FETCH_ERROR", NOW - 1, NOW + 30, NOW + 30),  # the host's block is later: due then
        ("FETCHED", NOW - 1, None, None),  # fetched: never due by this count
        ("DISCOVERED", None, None, None),
    ],
)
def test_one_due_time_for_metrics_and_status(
    status: str, next_s: float | None, blocked_s: float | None, due: float | None
) -> None:
    assert due_at_s(status, next_s, blocked_s) == due
