"""Tests of squall.host_pacing (the queue regulator's policy, seeds 000/002): fake clock, seeded jitter."""

from __future__ import annotations

import pytest

from squall.backoff import BackoffConfig, backoff_delay_s
from squall.crawl_delay_policy import CrawlDelayConfig
from squall.frontier import HostRecord
from squall.host_pacing import SEEN_FETCH_IDS, apply_signal
from squall.records import SignalKind, SignalMessage

NOW = 1_714_564_800.0  # the fake clock
BACKOFF = BackoffConfig(base_s=1.0, max_s=60.0, ttl_s=3600.0)
CRAWL_ON = CrawlDelayConfig(enabled=True, max_delay_s=86400, decay_s=1800.0)
CRAWL_OFF = CrawlDelayConfig(enabled=False, max_delay_s=86400, decay_s=1800.0)
KEY = "example.com"


def signal(kind: SignalKind = SignalKind.SUCCESS, *, url: str = "https://example.com/a", fetch_id: str = "f1",
           at_s: float = NOW, delay_s: float = 1.0, **kw) -> SignalMessage:
    return SignalMessage(key=KEY, url=url, fetch_id=fetch_id, kind=kind, at_s=at_s, delay_s=delay_s, **kw)


def host(**kw) -> HostRecord:
    return HostRecord(key=KEY, **kw)


# ---------------------------------------------------------------- the hand-out slot and the pace


def test_a_signal_frees_the_in_flight_slot_of_its_url_only():
    h = host().with_handout(["https://example.com/a", "https://example.com/b"], NOW - 2)
    new = apply_signal(h, signal(), BACKOFF, CRAWL_ON)
    assert new.in_flight == {"https://example.com/b": NOW - 2}
    assert h.in_flight == {"https://example.com/a": NOW - 2, "https://example.com/b": NOW - 2}


@pytest.mark.parametrize(
    ("previous", "at_s", "delay_s", "expected"),
    [
        (0.0, NOW, 1.0, NOW + 1.0),
        (0.0, NOW, 0.0, NOW),             # no request made: no wait added
        (NOW + 30, NOW, 1.0, NOW + 30),   # never brought forward
        (NOW + 0.5, NOW, 2.5, NOW + 2.5),
    ],
)
def test_next_fetch_is_the_later_of_the_previous_one_and_the_signal_time_plus_the_delay(previous, at_s, delay_s,
                                                                                       expected):
    new = apply_signal(host(next_fetch_at_s=previous), signal(at_s=at_s, delay_s=delay_s), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == expected


@pytest.mark.parametrize("kind", list(SignalKind))
def test_every_kind_of_signal_paces_the_host(kind):
    new = apply_signal(host(), signal(kind, delay_s=3.0, retry_until_s=NOW + 10), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == NOW + 3.0
    assert new.in_flight == {}


# ---------------------------------------------------------------- back-off: Retry-After, rate limits, success


def test_retry_after_blocks_the_host_until_the_retry_time():
    new = apply_signal(host(), signal(SignalKind.RETRY_AFTER, retry_until_s=NOW + 30), BACKOFF, CRAWL_ON)
    assert new.blocked_until_s == NOW + 30
    assert new.eligible_at_s(600.0, NOW) == NOW + 30


def test_retry_after_is_capped_at_backoff_max_from_the_signal_time():
    new = apply_signal(host(), signal(SignalKind.RETRY_AFTER, retry_until_s=NOW + 86400), BACKOFF, CRAWL_ON)
    assert new.blocked_until_s == NOW + BACKOFF.max_s


def test_rate_limits_grow_the_block_exponentially_with_jitter_never_below_the_plain_delay():
    h = host()
    at = NOW
    for attempt in range(10):
        h = apply_signal(h, signal(SignalKind.RATE_LIMITED, fetch_id=f"f{attempt}", at_s=at, delay_s=0.0),
                         BACKOFF, CRAWL_ON)
        wait = h.blocked_until_s - at
        plain = backoff_delay_s(attempt, BACKOFF)
        assert plain <= wait <= min(BACKOFF.max_s, 1.5 * plain), (attempt, wait)
        at = h.blocked_until_s + 1  # the next answer comes after the block
    assert h.backoff["attempts"] == 10


def test_rate_limit_jitter_is_a_function_of_the_fetch_id():
    a = apply_signal(host(), signal(SignalKind.RATE_LIMITED, fetch_id="x"), BACKOFF, CRAWL_ON)
    b = apply_signal(host(), signal(SignalKind.RATE_LIMITED, fetch_id="x"), BACKOFF, CRAWL_ON)
    assert a == b  # a replay on another worker computes the same wait


def test_a_success_resets_the_back_off():
    h = host()
    for i in range(3):
        h = apply_signal(h, signal(SignalKind.RATE_LIMITED, fetch_id=f"r{i}", at_s=NOW + 100 * i), BACKOFF, CRAWL_ON)
    assert h.blocked_until_s > NOW + 200
    ok = apply_signal(h, signal(SignalKind.SUCCESS, fetch_id="ok", at_s=NOW + 300), BACKOFF, CRAWL_ON)
    assert ok.blocked_until_s == 0.0
    assert ok.backoff == {"attempts": 0, "blocked_until_s": 0.0, "backing_off_since_s": None}
    again = apply_signal(ok, signal(SignalKind.RATE_LIMITED, fetch_id="r9", at_s=NOW + 400), BACKOFF, CRAWL_ON)
    assert again.blocked_until_s - (NOW + 400) < 2 * BACKOFF.base_s  # back to the first step


def test_an_other_signal_keeps_the_current_block():
    h = apply_signal(host(), signal(SignalKind.RETRY_AFTER, fetch_id="ra", retry_until_s=NOW + 40), BACKOFF, CRAWL_ON)
    new = apply_signal(h, signal(SignalKind.OTHER, fetch_id="o", at_s=NOW + 1), BACKOFF, CRAWL_ON)
    assert new.blocked_until_s == NOW + 40


# ---------------------------------------------------------------- idempotent re-delivery


@pytest.mark.parametrize("kind", list(SignalKind))
def test_the_same_fetch_id_applied_twice_returns_the_same_object(kind):
    sig = signal(kind, retry_until_s=NOW + 10, robots_crawl_delay_s=20)
    once = apply_signal(host().with_handout([sig.url], NOW - 1), sig, BACKOFF, CRAWL_ON)
    assert once.seen_fetch_ids == ["f1"]
    assert apply_signal(once, sig, BACKOFF, CRAWL_ON) is once


def test_only_the_last_fetch_ids_are_remembered():
    h = host()
    for i in range(SEEN_FETCH_IDS + 10):
        h = apply_signal(h, signal(fetch_id=f"f{i}", at_s=NOW + i), BACKOFF, CRAWL_ON)
    assert len(h.seen_fetch_ids) == SEEN_FETCH_IDS
    assert h.seen_fetch_ids[-1] == f"f{SEEN_FETCH_IDS + 9}"


# ---------------------------------------------------------------- forwarded robots Crawl-delay (seed 000)


def test_a_forwarded_robots_delay_raises_the_pace_when_crawl_delay_pacing_is_enabled():
    new = apply_signal(host(), signal(delay_s=30.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == NOW + 120
    assert new.crawl_delay["delay_s"] == 120


def test_a_forwarded_robots_delay_is_ignored_when_crawl_delay_pacing_is_disabled():
    new = apply_signal(host(), signal(delay_s=30.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_OFF)
    assert new.next_fetch_at_s == NOW + 30
    assert new.crawl_delay is None


def test_the_forwarded_delay_keeps_pacing_later_signals_that_do_not_carry_it():
    h = apply_signal(host(), signal(fetch_id="a", delay_s=30.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_ON)
    new = apply_signal(h, signal(fetch_id="b", at_s=NOW + 500, delay_s=30.0), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == NOW + 500 + 120


def test_the_maximum_observed_robots_delay_wins_inside_the_decay_window():
    h = apply_signal(host(), signal(fetch_id="a", delay_s=30.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_ON)
    lower = apply_signal(h, signal(fetch_id="b", at_s=NOW + 200, delay_s=30.0, robots_crawl_delay_s=40),
                         BACKOFF, CRAWL_ON)
    assert lower.crawl_delay["delay_s"] == 120
    assert lower.next_fetch_at_s == NOW + 200 + 120
    higher = apply_signal(lower, signal(fetch_id="c", at_s=NOW + 400, delay_s=30.0, robots_crawl_delay_s=300),
                          BACKOFF, CRAWL_ON)
    assert higher.next_fetch_at_s == NOW + 400 + 300


def test_the_fetchers_own_longer_delay_is_never_lowered_by_a_shorter_robots_delay():
    new = apply_signal(host(), signal(delay_s=30.0, robots_crawl_delay_s=10), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == NOW + 30


def test_a_signal_without_a_request_does_not_apply_the_forwarded_delay():
    new = apply_signal(host(), signal(SignalKind.OTHER, delay_s=0.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_ON)
    assert new.next_fetch_at_s == NOW
    h = apply_signal(host(), signal(fetch_id="a", delay_s=30.0, robots_crawl_delay_s=120), BACKOFF, CRAWL_ON)
    none = apply_signal(h, signal(SignalKind.OTHER, fetch_id="b", at_s=NOW + 500, delay_s=0.0), BACKOFF, CRAWL_ON)
    assert none.next_fetch_at_s == NOW + 500  # eligible at once: no request, so no robots delay to wait


def test_a_late_signal_of_an_older_hand_out_does_not_free_a_newer_hand_out_of_the_same_url():
    from squall.backoff import BackoffConfig
    from squall.crawl_delay_policy import CrawlDelayConfig
    from squall.frontier import HostRecord
    from squall.host_pacing import apply_signal
    from squall.records import SignalKind, SignalMessage

    host = HostRecord(key="h").with_handout(["http://h/a"], 200.0)  # handed out again at 200
    late = SignalMessage(key="h", url="http://h/a", fetch_id="100.000000:http://h/a", kind=SignalKind.SUCCESS,
                         at_s=150.0, delay_s=1.0, handed_out_at_s=100.0)
    after = apply_signal(host, late, BackoffConfig(1.0, 60.0, 3600.0), CrawlDelayConfig(False, 86400, 1800.0))
    assert after.in_flight == {"http://h/a": 200.0}
    current = SignalMessage(key="h", url="http://h/a", fetch_id="200.000000:http://h/a", kind=SignalKind.SUCCESS,
                            at_s=250.0, delay_s=1.0, handed_out_at_s=200.0)
    assert apply_signal(after, current, BackoffConfig(1.0, 60.0, 3600.0),
                        CrawlDelayConfig(False, 86400, 1800.0)).in_flight == {}


def test_a_host_backing_off_longer_than_the_ttl_gets_hand_outs_spaced_by_the_maximum_back_off():
    from squall.backoff import BackoffConfig
    from squall.crawl_delay_policy import CrawlDelayConfig
    from squall.frontier import HostRecord
    from squall.host_pacing import apply_signal
    from squall.records import SignalKind, SignalMessage

    config = BackoffConfig(1.0, 60.0, 3600.0)
    crawl = CrawlDelayConfig(False, 86400, 1800.0)
    host = HostRecord(key="h", backoff={"attempts": 12, "blocked_until_s": 0.0, "backing_off_since_s": 0.0})
    young = SignalMessage(key="h", url="http://h/a", fetch_id="1", kind=SignalKind.OTHER, at_s=3599.0, delay_s=1.0)
    assert apply_signal(host, young, config, crawl).next_fetch_at_s == 3600.0  # within the TTL: the normal delay
    old = SignalMessage(key="h", url="http://h/a", fetch_id="2", kind=SignalKind.OTHER, at_s=3600.0, delay_s=1.0)
    assert apply_signal(host, old, config, crawl).next_fetch_at_s == 3660.0   # past it: the maximum back-off
    ok = SignalMessage(key="h", url="http://h/a", fetch_id="3", kind=SignalKind.SUCCESS, at_s=3600.0, delay_s=1.0)
    assert apply_signal(host, ok, config, crawl).next_fetch_at_s == 3601.0    # a success ends it
