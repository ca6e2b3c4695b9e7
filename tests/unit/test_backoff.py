"""Tests of squall.policy.backoff (StormCrawler #1973/#1984): fake clock, fixed seeds."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import pytest

from squall.policy.backoff import (
    BackoffConfig,
    HostBackoff,
    TokenBucket,
    backoff_delay_s,
    deprioritised,
    on_rate_limited,
    on_retry_after,
    on_success,
    parse_http_date,
    parse_retry_after,
    try_take,
)
from squall.errors import ConfigError
from tests.unit.settings_helper import from_settings

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc).timestamp()
CONFIG = BackoffConfig(base_s=1.0, max_s=60.0, ttl_s=3600.0)

# ---------------------------------------------------------------- Retry-After (RFC 9110 §10.2.3)

RETRY_AFTER_CASES = [
    # value, expected absolute time (None = absent / invalid)
    ("120", NOW + 120),
    ("0", NOW),
    ("  30 ", NOW + 30),
    ("Wed, 01 May 2024 12:05:00 GMT", NOW + 300),  # IMF-fixdate
    ("Wednesday, 01-May-24 12:05:00 GMT", NOW + 300),  # obsolete RFC 850
    ("Wed May  1 12:05:00 2024", NOW + 300),  # obsolete asctime (GMT)
    ("Tue, 30 Apr 2024 12:00:00 GMT", NOW),  # past date: now
    ("soon", None),
    ("-5", None),
    ("1.5", None),
    ("", None),
    ("   ", None),
    ("+5", None),
    ("5s", None),
    ("Wed, 99 Foo 2024 12:05:00 GMT", None),
    (None, None),
]


@pytest.mark.parametrize(("value", "expected"), RETRY_AFTER_CASES)
def test_parse_retry_after(value, expected):
    assert parse_retry_after(value, NOW) == expected


def utc(*fields: int) -> float:
    return datetime(*fields, tzinfo=timezone.utc).timestamp()


NOW_2026 = utc(2026, 12, 2, 3, 0, 0)

HTTP_DATE_CASES = [
    # (value, now, the date's Unix time; None = not an HTTP-date)
    ("Sun, 06 Nov 1994 08:49:37 GMT", NOW_2026, utc(1994, 11, 6, 8, 49, 37)),  # RFC 9110 §5.6.7's example
    ("Sunday, 06-Nov-94 08:49:37 GMT", NOW_2026, utc(1994, 11, 6, 8, 49, 37)),
    ("Sun Nov  6 08:49:37 1994", NOW_2026, utc(1994, 11, 6, 8, 49, 37)),
    ("Sun Nov 16 08:49:37 1994", NOW_2026, utc(1994, 11, 16, 8, 49, 37)),
    # RFC 850 two-digit years: the century of now, unless that is more than 50 years ahead
    ("Wednesday, 01-Jan-70 00:00:00 GMT", NOW_2026, utc(2070, 1, 1)),  # 2070: 44 years ahead, stays
    ("Thursday, 01-Jan-99 00:00:00 GMT", NOW_2026, utc(1999, 1, 1)),  # 2099: 73 years ahead → 1999
    ("Friday, 01-Jan-27 00:00:00 GMT", NOW_2026, utc(2027, 1, 1)),
    ("Monday, 01-Jan-20 00:00:00 GMT", NOW_2026, utc(2020, 1, 1)),  # past in this century: as read
    ("Saturday, 02-Dec-76 03:00:00 GMT", NOW_2026, utc(2076, 12, 2, 3)),  # exactly 50 years: not more
    ("Saturday, 02-Dec-76 03:00:01 GMT", NOW_2026, utc(1976, 12, 2, 3, 0, 1)),  # one second more than 50
    ("Thursday, 01-Jan-70 00:00:00 GMT", utc(2024, 2, 29), utc(2070, 1, 1)),  # now on 29 February
    ("Wednesday, 01-Jan-2070 00:00:00 GMT", NOW_2026, utc(2070, 1, 1)),  # four digits: no guessing
    # lenient: case, short or long day names, white space, a one-digit day
    ("wed, 01 may 2024 12:05:00 gmt", NOW_2026, utc(2024, 5, 1, 12, 5)),
    ("Wednesday,  1 May 2024  12:05:00 GMT", NOW_2026, utc(2024, 5, 1, 12, 5)),
    ("Wed, 01-May-24 12:05:00 GMT", NOW_2026, utc(2024, 5, 1, 12, 5)),
    ("Sat, 31 Dec 2016 23:59:60 GMT", NOW_2026, utc(2017, 1, 1)),  # a leap second
    # HTTP-date is always GMT (RFC 9110 §5.6.7): another zone, or none, is not an HTTP-date
    ("Wed, 01 May 2024 12:05:00 UTC", NOW_2026, None),
    ("Wed, 01 May 2024 12:05:00 +0000", NOW_2026, None),
    ("Wed, 01 May 2024 14:05:00 +0200", NOW_2026, None),
    ("Wed, 01 May 2024 05:05:00 PST", NOW_2026, None),
    ("Wed, 01 May 2024 12:05:00", NOW_2026, None),
    ("Wednesday, 01-May-24 12:05:00 UTC", NOW_2026, None),
    ("Wed May  1 12:05:00 2024 GMT", NOW_2026, None),
    ("Wed May  1 12:05:00 2024 +0200", NOW_2026, None),
    # out of range or malformed
    ("Wed, 32 May 2024 12:05:00 GMT", NOW_2026, None),
    ("Thu, 29 Feb 2023 12:05:00 GMT", NOW_2026, None),
    ("Wed, 01 May 2024 24:05:00 GMT", NOW_2026, None),
    ("Wed, 01 May 2024 12:60:00 GMT", NOW_2026, None),
    ("Wed, 01 May 2024 12:05:61 GMT", NOW_2026, None),
    ("Wed, 01 May 0000 12:05:00 GMT", NOW_2026, None),
    ("Foo, 01 May 2024 12:05:00 GMT", NOW_2026, None),
    ("Wed, 01 May 24 12:05:00 GMT", NOW_2026, None),
    ("Wednesday, 01-May-124 12:05:00 GMT", NOW_2026, None),
    ("Wed, 01 May 2024 12:05 GMT", NOW_2026, None),
    ("Wed, 01 May 2024 12:05:00 GMT trailing", NOW_2026, None),
]


@pytest.mark.parametrize(("value", "now", "expected"), HTTP_DATE_CASES)
def test_an_http_date_is_read_as_rfc_9110_says(value, now, expected):
    assert parse_http_date(value, now) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("Wednesday, 01-Jan-70 00:00:00 GMT", utc(2070, 1, 1)),  # a date in the future: a block (capped by the pace model)
    ("Thursday, 01-Jan-99 00:00:00 GMT", NOW_2026),           # 1999, in the past: now, i.e. the back-off
    ("Wed, 01 May 2030 12:05:00 +0200", None),               # invalid: like an absent header
    ("Wed, 01 May 2030 12:05:00 PST", None),
    ("Tue Jan  1 00:00:00 2030", utc(2030, 1, 1)),           # asctime stays valid
])
def test_a_retry_after_date_is_a_future_block_or_else_the_back_off(value, expected):
    assert parse_retry_after(value, NOW_2026) == expected


# ---------------------------------------------------------------- Retry-After blocks


def test_retry_after_blocks_the_host_until_the_given_time():
    s = on_retry_after(None, NOW + 30, NOW, CONFIG)
    assert s == HostBackoff(attempts=0, blocked_until_s=NOW + 30, backing_off_since_s=NOW)


def test_retry_after_is_capped_by_max():
    assert on_retry_after(None, NOW + 86400, NOW, CONFIG).blocked_until_s == NOW + 60


def test_retry_after_never_shortens_an_existing_block():
    s = on_retry_after(None, NOW + 50, NOW, CONFIG)
    assert on_retry_after(s, NOW + 10, NOW + 1, CONFIG) is s


# ---------------------------------------------------------------- exponential back-off


def test_back_off_grows_exponentially_from_the_base_up_to_the_cap():
    assert [backoff_delay_s(a, CONFIG) for a in range(8)] == [1, 2, 4, 8, 16, 32, 60, 60]
    assert backoff_delay_s(10_000, CONFIG) == 60  # no overflow


def test_growth_sequence_with_a_fixed_seed():
    rng = random.Random(7)
    s, waits = None, []
    for _ in range(8):
        s = on_rate_limited(s, NOW, CONFIG, rng)
        waits.append(s.blocked_until_s - NOW)
    assert s.attempts == 8
    # waits grow and are never below 1, 2, 4, ... nor above the cap
    floors = [1, 2, 4, 8, 16, 32, 60, 60]
    assert all(f <= w <= min(60, f * 1.5) for f, w in zip(floors, waits))
    assert waits == sorted(waits)
    # reproducible
    rng2, s2 = random.Random(7), None
    for _ in range(8):
        s2 = on_rate_limited(s2, NOW, CONFIG, rng2)
    assert s2 == s


@pytest.mark.parametrize("attempts", [0, 1, 3, 5, 6, 20])
def test_jitter_only_adds_and_never_passes_the_cap_over_many_seeds(attempts):
    delay = backoff_delay_s(attempts, CONFIG)
    waits = []
    for seed in range(500):
        s = on_rate_limited(HostBackoff(attempts=attempts), NOW, CONFIG, random.Random(seed))
        waits.append(s.blocked_until_s - NOW)
    assert min(waits) >= delay
    assert max(waits) <= min(CONFIG.max_s, delay * 1.5)
    if delay * 1.5 <= CONFIG.max_s:
        assert max(waits) > delay * 1.4  # the jitter really spreads over [0, delay/2]


def test_a_rate_limit_never_shortens_an_existing_block():
    s = on_retry_after(None, NOW + 55, NOW, CONFIG)
    s2 = on_rate_limited(s, NOW, CONFIG, random.Random(0))
    assert s2.blocked_until_s == NOW + 55 and s2.attempts == 1


def test_success_resets_everything():
    s = on_rate_limited(on_rate_limited(None, NOW, CONFIG, random.Random(1)), NOW + 5, CONFIG, random.Random(2))
    assert on_success(s) == HostBackoff()
    idle = HostBackoff()
    assert on_success(idle) is idle


def test_a_host_backing_off_longer_than_the_ttl_is_deprioritised():
    s = on_rate_limited(None, NOW, CONFIG, random.Random(0))
    assert not deprioritised(s, NOW + 3599, CONFIG)
    s = on_rate_limited(s, NOW + 3000, CONFIG, random.Random(0))  # keeps the episode start
    assert s.backing_off_since_s == NOW
    assert deprioritised(s, NOW + 3600, CONFIG)
    assert not deprioritised(on_success(s), NOW + 9999, CONFIG)
    assert not deprioritised(None, NOW, CONFIG)


def test_host_backoff_round_trips_through_json():
    s = HostBackoff(attempts=3, blocked_until_s=NOW + 8.5, backing_off_since_s=NOW)
    assert HostBackoff.from_dict(json.loads(json.dumps(s.to_dict()))) == s
    assert HostBackoff.from_dict({}) == HostBackoff()
    with pytest.raises(ValueError):
        HostBackoff.from_dict({"attempts": -1})


def test_config_from_settings_and_validation():
    settings = {"frontier.backoff.base.secs": 1.0, "frontier.backoff.max.secs": 60.0, "frontier.backoff.ttl.secs": 3600}
    assert from_settings(BackoffConfig, settings) == CONFIG
    with pytest.raises(ConfigError) as err:
        from_settings(BackoffConfig, {**settings, "frontier.backoff.max.secs": 0.5})
    assert err.value.key == "frontier.backoff.max.secs"
    with pytest.raises(ValueError):
        BackoffConfig(base_s=-1.0, max_s=1.0, ttl_s=1.0)


# ---------------------------------------------------------------- token bucket


def test_a_new_bucket_allows_a_burst_then_refuses_with_the_wait():
    bucket, allowed = None, []
    for _ in range(4):
        ok, bucket, wait_s = try_take(bucket, 0.0, rate_per_s=2.0, burst=3)
        allowed.append(ok)
    assert allowed == [True, True, True, False]
    assert wait_s == pytest.approx(0.5)


def test_the_bucket_refills_at_the_rate_and_never_above_the_burst():
    bucket = TokenBucket(tokens=0.0, updated_at_s=0.0)
    ok, bucket, wait_s = try_take(bucket, 0.25, rate_per_s=2.0, burst=3)
    assert (ok, bucket.tokens, wait_s) == (False, 0.5, pytest.approx(0.25))
    ok, bucket, _ = try_take(bucket, 0.5, rate_per_s=2.0, burst=3)
    assert ok and bucket.tokens == pytest.approx(0.0)
    ok, bucket, _ = try_take(bucket, 100.0, rate_per_s=2.0, burst=3)
    assert ok and bucket.tokens == pytest.approx(2.0)  # refilled to 3, one taken


def test_a_clock_going_backwards_refills_nothing():
    bucket = TokenBucket(tokens=0.5, updated_at_s=10.0)
    ok, new, _ = try_take(bucket, 5.0, rate_per_s=1.0, burst=1)
    assert not ok and new.tokens == 0.5 and new.updated_at_s == 10.0


def test_a_rate_of_zero_turns_the_bucket_off():
    bucket = TokenBucket(tokens=0.0, updated_at_s=0.0)
    assert try_take(bucket, 0.0, rate_per_s=0.0, burst=1) == (True, bucket, 0.0)


@pytest.mark.parametrize(("rate", "burst"), [(-1.0, 1), (float("nan"), 1), (1.0, 0)])
def test_invalid_bucket_parameters_are_refused(rate, burst):
    with pytest.raises(ValueError):
        try_take(None, 0.0, rate_per_s=rate, burst=burst)
