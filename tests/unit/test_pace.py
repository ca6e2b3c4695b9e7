"""Tests of squall.policy.pace, the one model of a host's pace: fake clock, jitter seeded by the fetch id."""

from __future__ import annotations

from dataclasses import replace

import pytest

from squall.policy.backoff import BackoffConfig, HostBackoff, backoff_delay_s
from squall.policy.crawl_delay import CrawlDelayConfig, CrawlDelayState
from squall.errors import ConfigError
from squall.policy.frontier import HostRecord
from squall.policy.pace import FetchEnded, PaceConfig, PaceState, after_fetch, delay_in_force, on_takeover, stricter
from squall.policy.records import SignalKind
from squall.settings import load_settings

NOW = 1_714_564_800.0
BACKOFF = BackoffConfig(base_s=1.0, max_s=60.0, ttl_s=3600.0)
CRAWL_OFF = CrawlDelayConfig(enabled=False, max_delay_s=86400, decay_s=1800.0)
CRAWL_ON = replace(CRAWL_OFF, enabled=True)
FORCED = PaceConfig(server_delay_s=1.0, min_delay_s=0.0, force=True, retry_after_max_s=86400.0, backoff=BACKOFF,
                    crawl=CRAWL_OFF)
NOT_FORCED = replace(FORCED, force=False, min_delay_s=0.25)


def ended(kind=SignalKind.SUCCESS, at_s=NOW, fid="f1", **kw) -> FetchEnded:
    return FetchEnded(fetch_id=fid, kind=kind, at_s=at_s, **kw)


# ---------------------------------------------------------------- the delay in force


@pytest.mark.parametrize(
    ("config", "crawl_delay_s", "expected"),
    [
        (FORCED, None, 1.0),         # no Crawl-delay: the operator's delay
        (FORCED, 0.0, 1.0),          # Crawl-delay 0 is ignored
        (FORCED, 0.2, 1.0),          # a lower Crawl-delay never speeds up the host (force: the delay is a floor)
        (FORCED, 2.5, 2.5),          # a higher one slows it down
        (NOT_FORCED, 0.5, 0.5),      # opt-out: the site's lower delay speeds up its own host
        (NOT_FORCED, 0.1, 0.25),     # ... never below fetcher.server.min.delay
        (NOT_FORCED, 0.0, 1.0),      # ... and a Crawl-delay of 0 is still ignored
        (NOT_FORCED, None, 1.0),
        (NOT_FORCED, 3.0, 3.0),
    ],
)
def test_the_delay_in_force_combines_the_operator_delay_and_the_crawl_delay(config, crawl_delay_s, expected):
    assert delay_in_force(config, crawl_delay_s, None, NOW) == expected


def test_the_frontier_robots_delay_raises_the_delay_only_when_robots_pacing_is_enabled():
    state = after_fetch(None, ended(forwarded_crawl_delay_s=5), replace(FORCED, crawl=CRAWL_ON))
    assert delay_in_force(replace(FORCED, crawl=CRAWL_ON), 1.0, state, NOW) == 5.0
    assert delay_in_force(FORCED, 1.0, state, NOW) == 1.0


def test_a_host_backing_off_longer_than_the_ttl_is_spaced_by_the_maximum_back_off():
    state = PaceState(backoff=HostBackoff(attempts=1, blocked_until_s=0.0, backing_off_since_s=NOW - 3600))
    assert delay_in_force(FORCED, None, state, NOW) == 60.0
    assert delay_in_force(FORCED, None, state, NOW - 1) == 1.0  # not yet a whole ttl


# ---------------------------------------------------------------- after a fetch: the delay


def test_the_next_start_is_the_end_of_the_request_plus_the_delay():
    state = after_fetch(None, ended(crawl_delay_s=2.0), FORCED)
    assert (state.next_fetch_at_s, state.delay_s, state.ready_at_s) == (NOW + 2.0, 2.0, NOW + 2.0)


def test_a_decision_without_a_request_does_not_restart_the_delay():
    first = after_fetch(None, ended(), FORCED)
    second = after_fetch(first, ended(SignalKind.OTHER, at_s=NOW + 0.5, fid="f2", requested=False), FORCED)
    assert second.next_fetch_at_s == NOW + 1.0


def test_the_next_start_is_never_brought_forward():
    state = PaceState(next_fetch_at_s=NOW + 30)
    assert after_fetch(state, ended(), FORCED).next_fetch_at_s == NOW + 30


@pytest.mark.parametrize("kind", list(SignalKind))
def test_every_kind_of_request_waits_at_least_the_delay(kind):
    state = after_fetch(None, ended(kind, retry_until_s=NOW + 10, crawl_delay_s=3.0), FORCED)
    assert state.ready_at_s >= NOW + 3.0


# ---------------------------------------------------------------- Retry-After


def test_retry_after_blocks_the_host_until_the_retry_time():
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER, retry_until_s=NOW + 90), FORCED)
    assert state.blocked_until_s == NOW + 90
    assert state.ready_at_s == NOW + 90
    assert not state.capped_retry_after


def test_retry_after_longer_than_the_back_off_cap_is_honoured_in_full():
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER, retry_until_s=NOW + 7200), FORCED)
    assert state.blocked_until_s == NOW + 7200  # never cut to frontier.backoff.max.secs (60 s)


def test_retry_after_beyond_its_own_cap_waits_the_cap_and_says_so():
    config = replace(FORCED, retry_after_max_s=3600.0)
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER, retry_until_s=NOW + 10 * 86400), config)
    assert state.blocked_until_s == NOW + 3600
    assert state.capped_retry_after


def test_an_earlier_retry_after_never_shortens_a_block_in_force():
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER, retry_until_s=NOW + 100), FORCED)
    state = after_fetch(state, ended(SignalKind.RETRY_AFTER, at_s=NOW + 1, fid="f2", retry_until_s=NOW + 5), FORCED)
    assert state.blocked_until_s == NOW + 100


def test_a_retry_after_kind_without_a_time_backs_off_like_a_headerless_answer():
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER), FORCED)
    assert state.backoff is not None and state.backoff.attempts == 1
    assert state.blocked_until_s >= NOW + BACKOFF.base_s


# ---------------------------------------------------------------- back-off without a usable Retry-After


def test_repeated_rate_limits_make_the_gaps_grow_with_jitter_that_only_lengthens():
    state, at, waits = None, NOW, []
    for attempt in range(9):
        state = after_fetch(state, ended(SignalKind.RATE_LIMITED, at_s=at, fid=f"f{attempt}"), FORCED)
        wait = state.blocked_until_s - at
        plain = backoff_delay_s(attempt, BACKOFF)
        assert plain <= wait <= min(BACKOFF.max_s, plain * 1.5)
        waits.append(wait)
        at = state.ready_at_s
    assert waits[0] < waits[3] < waits[6]
    assert waits[-1] == BACKOFF.max_s


def test_the_jitter_is_a_function_of_the_fetch_id_so_the_gate_and_the_record_agree():
    a = after_fetch(None, ended(SignalKind.RATE_LIMITED, fid="x"), FORCED)
    b = after_fetch(None, ended(SignalKind.RATE_LIMITED, fid="x"), FORCED)
    assert a == b


def test_a_success_resets_the_back_off():
    state = after_fetch(None, ended(SignalKind.RATE_LIMITED), FORCED)
    state = after_fetch(state, ended(SignalKind.SUCCESS, at_s=state.ready_at_s, fid="f2"), FORCED)
    assert state.backoff == HostBackoff()
    assert state.blocked_until_s == 0.0


def test_an_other_outcome_keeps_the_block_in_force():
    state = after_fetch(None, ended(SignalKind.RETRY_AFTER, retry_until_s=NOW + 50), FORCED)
    state = after_fetch(state, ended(SignalKind.OTHER, at_s=NOW + 1, fid="f2"), FORCED)
    assert state.blocked_until_s == NOW + 50


# ---------------------------------------------------------------- frontier robots delay (StormCrawler's CrawlDelayPolicy)


def test_a_forwarded_delay_paces_later_fetches_that_do_not_carry_it():
    config = replace(FORCED, crawl=CRAWL_ON)
    state = after_fetch(None, ended(forwarded_crawl_delay_s=3), config)
    assert state.next_fetch_at_s == NOW + 3
    state = after_fetch(state, ended(at_s=NOW + 3, fid="f2"), config)
    assert state.next_fetch_at_s == NOW + 6


# ---------------------------------------------------------------- take-over


def test_a_new_owner_waits_one_delay_when_an_earlier_owner_had_hand_outs_out():
    state = PaceState(next_fetch_at_s=NOW - 5, delay_s=2.0)
    assert on_takeover(state, NOW, previous_owner_active=True).next_fetch_at_s == NOW + 2.0
    assert on_takeover(state, NOW, previous_owner_active=False) == state


def test_a_take_over_never_brings_a_later_start_forward():
    state = PaceState(next_fetch_at_s=NOW + 50, delay_s=2.0)
    assert on_takeover(state, NOW, previous_owner_active=True).next_fetch_at_s == NOW + 50


# ---------------------------------------------------------------- storage and settings


def test_the_state_round_trips_through_the_durable_host_record():
    state = after_fetch(None, ended(SignalKind.RATE_LIMITED, forwarded_crawl_delay_s=4), replace(FORCED, crawl=CRAWL_ON))
    stored = HostRecord.from_dict(HostRecord("example.com").with_pace(state).to_dict())
    assert stored.pace() == replace(state, capped_retry_after=False)
    assert HostRecord("example.com").pace() == PaceState()


def test_the_config_comes_from_the_defaults_file():
    config = PaceConfig.from_settings(load_settings())
    assert config.force is True
    assert config.retry_after_max_s == 86400.0
    assert config.server_delay_s == 1.0


def test_several_threads_per_queue_use_the_min_delay():
    settings = load_settings().with_overrides({"fetcher.threads.per.queue": 2, "fetcher.server.min.delay": 0.3})
    assert PaceConfig.from_settings(settings).server_delay_s == 0.3


def test_a_retry_after_cap_that_is_not_positive_names_its_key():
    with pytest.raises(ConfigError, match="frontier.retry.after.max.secs"):
        load_settings().with_overrides({"frontier.retry.after.max.secs": 0})


def test_a_queue_back_after_a_gap_keeps_the_retry_after_only_this_worker_knows():
    record = on_takeover(PaceState(next_fetch_at_s=90.0, delay_s=0.3), now_s=100.0, previous_owner_active=True)
    memory = PaceState(next_fetch_at_s=95.3, delay_s=0.3, backoff=HostBackoff(attempts=0, blocked_until_s=105.0))
    merged = stricter(record, memory)
    assert merged.ready_at_s == 105.0 and merged.next_fetch_at_s == 100.3


def test_the_stricter_pace_takes_the_later_start_the_longer_delay_and_the_higher_exponent():
    record = PaceState(next_fetch_at_s=120.0, delay_s=1.0, backoff=HostBackoff(attempts=1, blocked_until_s=130.0))
    memory = PaceState(next_fetch_at_s=110.0, delay_s=2.0, backoff=HostBackoff(attempts=3, blocked_until_s=125.0))
    merged = stricter(record, memory)
    assert (merged.next_fetch_at_s, merged.delay_s, merged.blocked_until_s) == (120.0, 2.0, 130.0)
    assert merged.backoff is not None and merged.backoff.attempts == 3
    assert stricter(record, PaceState()) == record
    assert stricter(PaceState(), memory).ready_at_s == memory.ready_at_s


def test_the_stricter_pace_keeps_the_longer_robots_delay_of_the_two():
    longer = PaceState(crawl=CrawlDelayState(delay_s=4, max_observed_s=4, max_observed_at_s=10.0))
    shorter = PaceState(crawl=CrawlDelayState(delay_s=2, max_observed_s=2, max_observed_at_s=20.0))
    assert stricter(shorter, longer).crawl == longer.crawl
    assert stricter(longer, shorter).crawl == longer.crawl
    assert stricter(PaceState(), longer).crawl == longer.crawl
    assert stricter(shorter, PaceState()).crawl == shorter.crawl
