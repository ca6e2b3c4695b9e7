"""Tests of squall.policy.robots_status: RFC 9309 §2.3.1 status decisions, §2.4 caching, JSON, the LRU cache, conditional refresh."""

from __future__ import annotations

import json

import pytest

from squall.errors import ConfigError, MessageError
from squall.policy.robots_rules import RobotsKind
from squall.policy.robots_status import (
    RobotsCache,
    RobotsEntry,
    RobotsFetchOutcome,
    cache_ttl_s,
    conditional_headers,
    decide,
)
from tests.unit.robots_helper import CONFIG, SETTINGS, config

NOW_S = 1_700_000_000.0  # fake clock: 2023-11-14T22:13:20Z
DAY_S = 86_400.0


# ---------------------------------------------------------------- fetch status decisions (RFC 9309 §2.3.1)

ROBOTS_BODY = b"User-agent: *\nDisallow: /private\n"


def outcome(status, body=b"", headers=None, redirects=0):
    return RobotsFetchOutcome(status=status, body=body, headers=headers or {}, redirects=redirects)


STATUS_CASES = [
    # (status, cfg changes, kind, /private allowed, /public allowed, blocks origin, permissive)
    (200, {}, "rules", False, True, False, False),
    (301, {}, "allow_all", True, True, False, False),  # still 3xx after 5 redirects: unavailable
    (308, {}, "allow_all", True, True, False, False),
    (401, {}, "allow_all", True, True, False, False),
    (403, {}, "allow_all", True, True, False, False),
    (403, {"allow_on_403": False}, "disallow_all", False, False, False, False),
    (401, {"allow_on_403": False}, "disallow_all", False, False, False, False),
    (404, {}, "allow_all", True, True, False, False),
    (410, {}, "allow_all", True, True, False, False),
    (429, {}, "disallow_all", False, False, True, False),
    (500, {}, "disallow_all", False, False, True, False),
    (503, {}, "disallow_all", False, False, True, False),
    (None, {}, "disallow_all", False, False, True, False),  # timeout / DNS / connection
    (503, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
    (None, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
    (429, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
]


@pytest.mark.parametrize("status, changes, kind, private_ok, public_ok, blocks, permissive", STATUS_CASES)
def test_each_robots_status_leads_to_the_rfc_9309_decision(
    status, changes, kind, private_ok, public_ok, blocks, permissive
):
    cfg = config(**changes)
    entry = decide(outcome(status, ROBOTS_BODY, redirects=5 if status and 300 <= status < 400 else 0), None, NOW_S, cfg)
    rules = entry.rules(cfg)
    assert entry.kind == kind
    assert rules.allowed("https://example.com/private/x") is private_ok
    assert rules.allowed("https://example.com/public") is public_ok
    assert entry.blocks_origin is blocks
    assert entry.permissive_fallback is permissive
    assert entry.http_status == status


def test_an_answered_fetch_resets_the_failure_state():
    failed = decide(outcome(503), None, NOW_S, CONFIG)
    entry = decide(outcome(200, ROBOTS_BODY), failed, NOW_S + 60, CONFIG)
    assert (entry.failures, entry.unreachable_since_s, entry.retry_at_s) == (0, None, None)
    assert entry.last_good_text == ROBOTS_BODY.decode() and entry.last_good_at_s == NOW_S + 60


def test_retry_back_off_doubles_per_consecutive_failure_and_is_capped():
    entry = None
    delays = []
    now_s = NOW_S
    for _ in range(9):
        entry = decide(outcome(503), entry, now_s, CONFIG)
        delays.append(entry.retry_at_s - now_s)
        now_s = entry.retry_at_s
    assert delays == [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
    assert entry.failures == 9 and entry.unreachable_since_s == NOW_S


def test_an_unreachable_entry_is_refreshed_when_its_retry_is_due():
    entry = decide(outcome(None), None, NOW_S, CONFIG)
    assert not entry.needs_refresh(NOW_S + 59, CONFIG)
    assert entry.needs_refresh(NOW_S + 60, CONFIG)
    assert entry.is_fresh(NOW_S + 59) and not entry.is_fresh(NOW_S + 60)


def test_a_still_fresh_cached_copy_is_kept_while_a_refresh_fails():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = decide(outcome(503), good, good.expires_at_s - 300, CONFIG)
    assert entry.kind == "rules" and not entry.blocks_origin
    assert entry.expires_at_s == good.expires_at_s and entry.failures == 1
    assert entry.retry_at_s == good.expires_at_s - 300 + 60


def test_unreachable_after_the_cached_copy_expires_means_complete_disallow():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = decide(outcome(500), good, good.expires_at_s + 1, CONFIG)
    assert entry.kind == "disallow_all" and entry.blocks_origin
    assert entry.last_good_text == ROBOTS_BODY.decode()


def _unreachable_for(duration_s: float, first: RobotsEntry | None) -> RobotsEntry:
    """Fail at NOW_S + 1 day (after ``first`` expired), then again ``duration_s`` later."""
    start_s = NOW_S + DAY_S + 1
    entry = decide(outcome(503), first, start_s, CONFIG)
    return decide(outcome(503), entry, start_s + duration_s, CONFIG)


def test_the_last_good_copy_is_used_after_30_days_unreachable():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = _unreachable_for(30 * DAY_S + 1, good)
    assert entry.kind == "rules" and not entry.blocks_origin and not entry.permissive_fallback
    assert not entry.rules(CONFIG).allowed("/private") and entry.rules(CONFIG).allowed("/public")


def test_within_30_days_unreachable_the_origin_stays_disallowed():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = _unreachable_for(30 * DAY_S - 1, good)
    assert entry.kind == "disallow_all" and entry.blocks_origin


def test_without_a_good_copy_the_origin_stays_disallowed_after_30_days():
    entry = _unreachable_for(40 * DAY_S, None)
    assert entry.kind == "disallow_all" and entry.blocks_origin


def test_a_404_is_a_good_copy_that_allows_everything_after_30_days():
    gone = decide(outcome(404), None, NOW_S, CONFIG)
    entry = _unreachable_for(31 * DAY_S, gone)
    assert entry.kind == "rules" and entry.rules(CONFIG).allowed("/private")


def test_the_permissive_5xx_opt_in_prefers_the_last_good_copy_over_allow_all():
    cfg = config(allow_on_5xx=True)
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, cfg)
    entry = decide(outcome(503), good, NOW_S + DAY_S + 1, cfg)
    assert entry.permissive_fallback and not entry.blocks_origin
    assert not entry.rules(cfg).allowed("/private") and entry.rules(cfg).allowed("/public")


# ---------------------------------------------------------------- cache lifetime (RFC 9309 §2.4)

TTL_CASES = [
    ({}, 86_400),
    ({"Cache-Control": "public, max-age=3600"}, 3600),
    ({"cache-control": "max-age=0"}, 0),
    ({"Cache-Control": "max-age=604800"}, 86_400),  # capped at 24 h
    ({"Expires": "Tue, 14 Nov 2023 23:13:20 GMT"}, 3600),  # from now
    ({"Expires": "Wed, 15 Nov 2023 00:00:00 GMT", "Date": "Tue, 14 Nov 2023 22:00:00 GMT"}, 7200),
    ({"Expires": "Fri, 01 Dec 2023 00:00:00 GMT"}, 86_400),  # capped at 24 h
    ({"Expires": "Mon, 13 Nov 2023 00:00:00 GMT"}, 0),  # already past
    ({"Expires": "0"}, 86_400),  # unparseable: default
    ({"Cache-Control": "max-age=60", "Expires": "Fri, 01 Dec 2023 00:00:00 GMT"}, 60),  # max-age wins
    ({"Cache-Control": "no-cache"}, 86_400),
]


@pytest.mark.parametrize("headers, ttl_s", TTL_CASES)
def test_cache_lifetime_comes_from_the_headers_and_never_exceeds_24_hours(headers, ttl_s):
    assert cache_ttl_s(headers, NOW_S, CONFIG) == ttl_s
    entry = decide(outcome(200, ROBOTS_BODY, headers), None, NOW_S, CONFIG)
    assert entry.expires_at_s == NOW_S + ttl_s


def test_a_404_is_cached_with_the_same_lifetime_rules():
    entry = decide(outcome(404, headers={"Cache-Control": "max-age=120"}), None, NOW_S, CONFIG)
    assert entry.expires_at_s == NOW_S + 120


@pytest.mark.parametrize(
    "offset_s, due",
    [
        (0, False),
        (DAY_S - 601, False),
        (DAY_S - 600, True),
        (DAY_S - 1, True),
        (DAY_S + 5, True),
    ],
)
def test_a_refresh_is_due_from_refresh_ahead_seconds_before_expiry(offset_s, due):
    entry = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    assert entry.needs_refresh(NOW_S + offset_s, CONFIG) is due
    assert entry.is_fresh(NOW_S + offset_s) is (offset_s < DAY_S)


# ---------------------------------------------------------------- serialization


@pytest.mark.parametrize("status, previous_status", [(200, None), (404, None), (503, 200), (None, None), (403, None)])
def test_entries_survive_a_json_round_trip(status, previous_status):
    previous = (
        decide(outcome(previous_status, ROBOTS_BODY), None, NOW_S - DAY_S * 2, CONFIG) if previous_status else None
    )
    entry = decide(outcome(status, ROBOTS_BODY), previous, NOW_S, CONFIG)
    stored = entry.to_dict()
    assert type(stored["kind"]) is str and stored["kind"] == entry.kind.value  # the table holds the value
    again = RobotsEntry.from_dict(json.loads(json.dumps(stored)))
    assert again == entry and isinstance(again.kind, RobotsKind)
    assert again.rules(CONFIG).allowed("/private") is entry.rules(CONFIG).allowed("/private")


@pytest.mark.parametrize(
    "obj",
    [
        [],
        {"kind": "rules"},
        {"kind": "maybe", "robots_text": None, "fetched_at_s": 1, "expires_at_s": 2},
        {"kind": "rules", "robots_text": None, "fetched_at_s": 1, "expires_at_s": 2},
        {"kind": "allow_all", "robots_text": 5, "fetched_at_s": 1, "expires_at_s": 2},
        {"kind": "allow_all", "robots_text": None, "fetched_at_s": "soon", "expires_at_s": 2},
    ],
)
def test_a_corrupt_stored_entry_raises_message_error(obj):
    with pytest.raises(MessageError):
        RobotsEntry.from_dict(obj)


# ---------------------------------------------------------------- LRU cache


def _entry(text: str = "User-agent: *\nDisallow: /x\n") -> RobotsEntry:
    return RobotsEntry(kind=RobotsKind.RULES, robots_text=text, fetched_at_s=NOW_S, expires_at_s=NOW_S + DAY_S)


def test_the_lru_cache_evicts_the_least_recently_used_origin():
    cache = RobotsCache(2, CONFIG)
    cache.put("https://a.example", _entry())
    cache.put("https://b.example", _entry())
    assert cache.get("https://a.example") is not None  # a is now the most recent
    cache.put("https://c.example", _entry())
    assert len(cache) == 2
    assert cache.get("https://b.example") is None
    assert cache.get("https://a.example") is not None and cache.get("https://c.example") is not None


def test_the_lru_cache_returns_the_entry_with_its_rules():
    cache = RobotsCache(10, CONFIG)
    entry = _entry()
    rules = cache.put("https://a.example", entry)
    cached_entry, cached_rules = cache.get("https://a.example")
    assert cached_entry is entry and cached_rules is rules and not rules.allowed("/x")
    cache.put("https://a.example", _entry("User-agent: *\nDisallow:\n"))
    assert len(cache) == 1 and cache.get("https://a.example")[1].allowed("/x")


def test_the_lru_cache_needs_room_for_one_entry():
    with pytest.raises(ValueError):
        RobotsCache(0, CONFIG)
    with pytest.raises(ConfigError) as err:  # the key is checked at load
        SETTINGS.with_overrides({"http.robots.cache.lru.size": 0})
    assert err.value.key == "http.robots.cache.lru.size"


# ---------------------------------------------------------------- truncation and conditional refresh


def test_a_body_over_the_content_limit_is_cut_and_marked_truncated():
    small = config(content_limit=32)
    body = b"User-agent: *\nDisallow: /early\n" + b"Disallow: /late\n"
    entry = decide(outcome(200, body), None, NOW_S, small)
    assert entry.truncated
    assert entry.rules(small).allowed("/late") and not entry.rules(small).allowed("/early")


def test_a_body_within_the_limit_is_not_truncated_unless_the_fetcher_cut_it():
    assert not decide(outcome(200, b"User-agent: *\nDisallow: /x\n"), None, NOW_S, CONFIG).truncated
    cut = RobotsFetchOutcome(status=200, body=b"User-agent: *\nDisallow: /x\n", truncated=True)
    assert decide(cut, None, NOW_S, CONFIG).truncated


def test_truncation_survives_a_json_round_trip_and_a_failed_refresh():
    small = config(content_limit=16)
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n"), None, NOW_S, small)
    assert RobotsEntry.from_dict(entry.to_dict()).truncated
    assert decide(outcome(503), entry, NOW_S + 60, small).truncated


VALIDATED = {"ETag": '"r1"', "Last-Modified": "Tue, 14 Nov 2023 20:00:00 GMT", "Cache-Control": "max-age=3600"}


def test_etag_and_last_modified_of_a_200_are_kept_and_sent_on_the_next_fetch():
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    assert (entry.etag, entry.last_modified) == ('"r1"', "Tue, 14 Nov 2023 20:00:00 GMT")
    assert conditional_headers(entry) == {"If-None-Match": '"r1"', "If-Modified-Since": "Tue, 14 Nov 2023 20:00:00 GMT"}
    assert RobotsEntry.from_dict(entry.to_dict()) == entry


@pytest.mark.parametrize(
    "headers, expected",
    [
        ({"ETag": '"r1"'}, {"If-None-Match": '"r1"'}),
        ({"Last-Modified": "Tue, 14 Nov 2023 20:00:00 GMT"}, {"If-Modified-Since": "Tue, 14 Nov 2023 20:00:00 GMT"}),
        ({}, {}),
    ],
)
def test_only_the_validators_the_server_gave_are_sent(headers, expected):
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", headers), None, NOW_S, CONFIG)
    assert conditional_headers(entry) == expected


def test_nothing_is_sent_without_a_cached_copy_or_for_a_redirected_answer():
    assert conditional_headers(None) == {}
    redirected = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED, redirects=1), None, NOW_S, CONFIG)
    assert conditional_headers(redirected) == {}
    assert conditional_headers(decide(outcome(404, headers=VALIDATED), None, NOW_S, CONFIG)) == {}


def test_a_304_keeps_the_cached_copy_and_restarts_its_lifetime():
    first = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    later = NOW_S + 3500
    entry = decide(outcome(304, headers={"Cache-Control": "max-age=3600"}), first, later, CONFIG)
    assert entry.kind == "rules" and entry.robots_text == first.robots_text
    assert not entry.rules(CONFIG).allowed("/x")
    assert (entry.fetched_at_s, entry.expires_at_s, entry.last_good_at_s) == (later, later + 3600, later)
    assert (entry.etag, entry.last_modified) == (first.etag, first.last_modified)
    assert entry.http_status == 304 and entry.failures == 0


def test_a_304_after_failures_ends_the_failure_state_and_takes_new_validators():
    first = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    failing = decide(outcome(503), first, NOW_S + 90_000, CONFIG)
    assert failing.blocks_origin and conditional_headers(failing)  # the last good copy can still be validated
    entry = decide(outcome(304, headers={"ETag": '"r2"'}), failing, NOW_S + 90_100, CONFIG)
    assert not entry.blocks_origin and entry.unreachable_since_s is None and entry.retry_at_s is None
    assert entry.etag == '"r2"' and not entry.rules(CONFIG).allowed("/x")


def test_a_304_with_nothing_cached_is_an_unavailable_robots_txt():
    assert decide(outcome(304), None, NOW_S, CONFIG).kind == "allow_all"
