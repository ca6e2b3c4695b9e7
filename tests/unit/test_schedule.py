"""Tests of squall.policy.schedule (StormCrawler DefaultScheduler): fake clock, one transition function."""

from __future__ import annotations

import ast
import itertools
import json
import pathlib
from dataclasses import replace

import pytest
import yaml

from squall.policy.adaptive import AdaptiveConfig, IntervalReason, adaptive_interval
from squall.policy.records import StatusMessage
from squall.policy.reasons import Reason, Status
from squall.policy.schedule import (
    DISCOVERED_PRIORITY,
    SEED_PRIORITY,
    Incoming,
    ScheduleConfig,
    UrlRecord,
    apply,
    kind_of,
    new_record,
)
from squall.settings import DEFAULTS_FILE, load_settings

NOW = 1_714_564_800.0  # 2024-05-01 12:00:00 UTC, the fake clock
MIN = 60.0
CONFIG = ScheduleConfig(default_interval_s=1440 * MIN, fetch_error_interval_s=120 * MIN,
                        error_interval_s=None, max_fetch_errors=3, max_rate_limits=None, changefreq_revisit=False)
URL = "https://example.com/a"
KEY = "example.com"


def discovered(**kw) -> UrlRecord:
    """A record as new_record makes it: DISCOVERED, due at NOW."""
    fields = dict(url=URL, key=KEY, next_fetch_at_s=NOW, discovered_at_s=NOW)
    fields.update(kw)
    return UrlRecord(**fields)


def result(status: Status, at_s: float, **kw) -> StatusMessage:
    return StatusMessage(url=URL, status=status, fetched_at_s=at_s, **kw)


# ---------------------------------------------------------------- new_record


@pytest.mark.parametrize(
    ("seed", "priority", "expected"),
    [
        (True, None, SEED_PRIORITY),
        (False, None, DISCOVERED_PRIORITY),
        (True, 7, 7),    # an explicit priority wins over the seed default
        (False, -2, -2),
    ],
)
def test_a_new_record_takes_the_seed_priority_unless_the_message_names_one(seed, priority, expected):
    msg = StatusMessage(url=URL, seed=seed, priority=priority)
    rec = new_record(msg, url=URL, key=KEY, now_s=NOW, metadata={})
    assert rec.priority == expected


def test_seeds_outrank_discovered_urls():
    assert SEED_PRIORITY > DISCOVERED_PRIORITY


def test_a_new_record_is_discovered_and_due_at_once_with_its_depth_metadata_and_chain():
    msg = StatusMessage(url=URL, depth=3, chain=["https://example.com/"])
    rec = new_record(msg, url=URL, key=KEY, now_s=NOW, metadata={"k": ["v"]})
    assert rec == UrlRecord(url=URL, key=KEY, status=Status.DISCOVERED, depth=3, priority=DISCOVERED_PRIORITY,
                            next_fetch_at_s=NOW, discovered_at_s=NOW, metadata={"k": ["v"]},
                            chain=["https://example.com/"])
    assert rec.pending
    assert rec.chain is not msg.chain  # a copy: the frozen record shares no list with the message


# ---------------------------------------------------------------- no-ops (dedup, re-delivery)


def test_a_rediscovery_of_a_known_url_returns_the_same_record():
    rec = discovered()
    assert apply(rec, StatusMessage(url=URL), CONFIG) is rec
    assert apply(rec, StatusMessage(url=URL, seed=True, depth=0, metadata={"x": ["y"]}), CONFIG) is rec


@pytest.mark.parametrize("redelivered_at", [NOW + 10, NOW + 5])
def test_a_result_not_newer_than_the_last_fetch_is_a_redelivery_and_changes_nothing(redelivered_at):
    rec = apply(discovered(), result(Status.FETCHED, NOW + 10, http_status=200), CONFIG)
    again = apply(rec, result(Status.FETCH_ERROR, redelivered_at, reason=Reason.FETCH_TIMEOUT), CONFIG)
    assert again is rec


@pytest.mark.parametrize(
    "msg",
    [
        result(Status.FETCHED, NOW, http_status=200, etag='"e"'),
        result(Status.REDIRECTION, NOW, http_status=301, redirect_to="https://example.com/b"),
        result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_TIMEOUT),
        result(Status.FETCH_ERROR, NOW, http_status=429, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=NOW + 30),
        result(Status.ERROR, NOW, http_status=404, reason=Reason.HTTP_NOT_FOUND),
        result(Status.DISCOVERED, NOW, reason=Reason.FETCH_DEFERRED, retry_after_s=NOW + 60),
    ],
    ids=["fetched", "redirection", "fetch_error", "rate_limited", "error", "not_attempted"],
)
def test_applying_the_same_result_twice_gives_the_same_record(msg):
    once = apply(discovered(), msg, CONFIG)
    assert apply(once, msg, CONFIG) is once


# ---------------------------------------------------------------- FETCHED / 304 / REDIRECTION


def test_fetched_schedules_the_revisit_after_the_default_interval_and_resets_fetch_errors():
    rec = discovered(fetch_errors=2, attempts=2, status=Status.FETCH_ERROR, reason=Reason.FETCH_TIMEOUT)
    new = apply(rec, result(Status.FETCHED, NOW + 5, http_status=200), CONFIG)
    assert new.status is Status.FETCHED
    assert new.next_fetch_at_s == NOW + 5 + 1440 * MIN
    assert new.last_fetch_at_s == NOW + 5
    assert (new.fetch_errors, new.attempts) == (0, 3)
    assert (new.http_status, new.reason) == (200, None)
    assert not new.pending


def test_fetched_keeps_the_validators_of_the_answer():
    new = apply(discovered(), result(Status.FETCHED, NOW, http_status=200, etag='"v1"',
                                     last_modified="Wed, 01 May 2024 10:00:00 GMT"), CONFIG)
    assert (new.etag, new.last_modified) == ('"v1"', "Wed, 01 May 2024 10:00:00 GMT")


def test_a_full_answer_without_validators_forgets_the_previous_ones():
    rec = discovered(etag='"old"', last_modified="old date", last_fetch_at_s=NOW - 100)
    new = apply(rec, result(Status.FETCHED, NOW, http_status=200), CONFIG)
    assert (new.etag, new.last_modified) == (None, None)


def test_a_304_not_modified_keeps_the_previous_validators():
    rec = discovered(status=Status.FETCHED, etag='"old"', last_modified="old date", last_fetch_at_s=NOW - 100)
    new = apply(rec, result(Status.FETCHED, NOW, http_status=304, not_modified=True), CONFIG)
    assert (new.etag, new.last_modified) == ('"old"', "old date")
    assert new.next_fetch_at_s == NOW + 1440 * MIN


def test_a_304_with_a_fresh_etag_takes_it():
    rec = discovered(status=Status.FETCHED, etag='"old"', last_modified="old date", last_fetch_at_s=NOW - 100)
    new = apply(rec, result(Status.FETCHED, NOW, http_status=304, not_modified=True, etag='"new"'), CONFIG)
    assert (new.etag, new.last_modified) == ('"new"', "old date")


def test_a_redirection_records_its_target_and_is_revisited_after_the_default_interval():
    new = apply(discovered(), result(Status.REDIRECTION, NOW, http_status=301, redirect_to="https://example.com/b"),
                CONFIG)
    assert new.status is Status.REDIRECTION
    assert new.redirect_to == "https://example.com/b"
    assert (new.http_status, new.attempts, new.fetch_errors) == (301, 1, 0)
    assert new.next_fetch_at_s == NOW + 1440 * MIN


def test_fetch_interval_minus_one_means_never_revisit():
    config = replace(CONFIG, default_interval_s=None)
    assert apply(discovered(), result(Status.FETCHED, NOW, http_status=200), config).next_fetch_at_s is None
    assert apply(discovered(), result(Status.REDIRECTION, NOW, redirect_to="https://example.com/b"),
                 config).next_fetch_at_s is None


# ---------------------------------------------------------------- FETCH_ERROR: counted, doubled, capped


def test_fetch_errors_are_counted_with_a_doubling_interval_until_max_fetch_errors_makes_an_error():
    config = replace(CONFIG, max_fetch_errors=4)
    rec = discovered()
    gaps = []
    at = NOW
    for _ in range(3):
        rec = apply(rec, result(Status.FETCH_ERROR, at, reason=Reason.FETCH_TIMEOUT), config)
        assert rec.status is Status.FETCH_ERROR and rec.pending
        gaps.append(rec.next_fetch_at_s - at)
        at = rec.next_fetch_at_s
    assert gaps == [120 * MIN, 240 * MIN, 480 * MIN]
    assert (rec.fetch_errors, rec.attempts) == (3, 3)
    final = apply(rec, result(Status.FETCH_ERROR, at, reason=Reason.FETCH_TIMEOUT), config)
    assert final.status is Status.ERROR
    assert final.reason == Reason.FETCH_TOO_MANY_ERRORS
    assert (final.fetch_errors, final.attempts) == (4, 4)
    assert final.next_fetch_at_s is None  # fetchInterval.error -1: never
    assert not final.pending


def test_too_many_errors_is_retried_after_fetch_interval_error_when_it_is_set():
    config = replace(CONFIG, max_fetch_errors=1, error_interval_s=30 * MIN)
    new = apply(discovered(), result(Status.FETCH_ERROR, NOW, http_status=500,
                                     reason=Reason.HTTP_SERVER_ERROR), config)
    assert (new.status, new.reason) == (Status.ERROR, Reason.FETCH_TOO_MANY_ERRORS)
    assert new.next_fetch_at_s == NOW + 30 * MIN


def test_a_fetch_error_with_a_later_retry_after_waits_for_it():
    new = apply(discovered(), result(Status.FETCH_ERROR, NOW, http_status=500, reason=Reason.HTTP_SERVER_ERROR,
                                     retry_after_s=NOW + 10_000 * MIN), CONFIG)
    assert new.next_fetch_at_s == NOW + 10_000 * MIN


def test_a_success_between_fetch_errors_restarts_the_count():
    rec = apply(discovered(), result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_DNS), CONFIG)
    rec = apply(rec, result(Status.FETCH_ERROR, NOW + 1, reason=Reason.FETCH_DNS), CONFIG)
    rec = apply(rec, result(Status.FETCHED, NOW + 2, http_status=200), CONFIG)
    rec = apply(rec, result(Status.FETCH_ERROR, NOW + 3, reason=Reason.FETCH_DNS), CONFIG)
    assert (rec.status, rec.fetch_errors) == (Status.FETCH_ERROR, 1)


# ---------------------------------------------------------------- rate limits (429/503): not a failure


@pytest.mark.parametrize("http_status", [429, 503])
def test_a_rate_limited_answer_is_rescheduled_at_retry_after_and_not_counted_as_a_fetch_error(http_status):
    rec = discovered()
    for i in range(5):  # more than max.fetch.errors: never turns into ERROR
        at = NOW + i * 100
        rec = apply(rec, result(Status.FETCH_ERROR, at, http_status=http_status,
                                reason=Reason.HTTP_RATE_LIMITED, retry_after_s=at + 30), CONFIG)
        assert rec.status is Status.DISCOVERED
        assert rec.next_fetch_at_s == at + 30
        assert rec.fetch_errors == 0
        assert rec.attempts == i + 1
        assert rec.pending


def test_a_rate_limited_answer_without_retry_after_is_due_again_at_once():
    new = apply(discovered(), result(Status.FETCH_ERROR, NOW, http_status=429,
                                     reason=Reason.HTTP_RATE_LIMITED), CONFIG)
    assert new.next_fetch_at_s == NOW
    assert (new.status, new.fetch_errors, new.attempts) == (Status.DISCOVERED, 0, 1)


def test_a_rate_limited_answer_keeps_earlier_fetch_errors_as_they_were():
    rec = apply(discovered(), result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_TIMEOUT), CONFIG)
    new = apply(rec, result(Status.FETCH_ERROR, NOW + 1, http_status=503, reason=Reason.HTTP_RATE_LIMITED,
                            retry_after_s=NOW + 60), CONFIG)
    assert (new.status, new.fetch_errors, new.attempts) == (Status.FETCH_ERROR, 1, 2)
    assert new.next_fetch_at_s == NOW + 60


# ---------------------------------------------------------------- ERROR: attempts only for real requests


@pytest.mark.parametrize(
    ("http_status", "reason", "attempts"),
    [
        (404, Reason.HTTP_NOT_FOUND, 1),
        (410, Reason.HTTP_NOT_FOUND, 1),
        (403, Reason.HTTP_CLIENT_ERROR, 1),
        (301, Reason.REDIRECT_LOOP, 1),
        (None, Reason.ROBOTS_DENIED, 0),          # policy rejection: no request made
        (None, Reason.CRAWL_DELAY_TOO_LONG, 0),
        (None, Reason.FETCH_BLOCKED_ADDRESS, 0),
    ],
)
def test_an_error_counts_an_attempt_only_when_a_request_was_made(http_status, reason, attempts):
    new = apply(discovered(), result(Status.ERROR, NOW, http_status=http_status, reason=reason.value), CONFIG)
    assert new.status is Status.ERROR
    assert new.reason == reason.value
    assert new.attempts == attempts
    assert new.next_fetch_at_s is None


def test_an_error_is_retried_after_fetch_interval_error_when_it_is_set():
    config = replace(CONFIG, error_interval_s=60 * MIN)
    new = apply(discovered(), result(Status.ERROR, NOW, http_status=404, reason=Reason.HTTP_NOT_FOUND), config)
    assert new.next_fetch_at_s == NOW + 60 * MIN


# ---------------------------------------------------------------- DISCOVERED with fetched_at: not attempted


def test_a_not_attempted_result_reschedules_at_retry_after_without_counting_an_attempt():
    new = apply(discovered(), result(Status.DISCOVERED, NOW, reason=Reason.ROBOTS_UNAVAILABLE, retry_after_s=NOW + 600), CONFIG)
    assert new.status is Status.DISCOVERED
    assert new.next_fetch_at_s == NOW + 600
    assert (new.attempts, new.fetch_errors) == (0, 0)
    assert new.last_fetch_at_s == NOW
    assert new.pending


def test_a_not_attempted_result_without_retry_after_is_due_at_its_time():
    assert apply(discovered(), result(Status.DISCOVERED, NOW + 7, reason=Reason.ROBOTS_UNAVAILABLE), CONFIG).next_fetch_at_s == NOW + 7


# ---------------------------------------------------------------- metadata


def test_apply_takes_the_persisted_metadata_when_given_and_keeps_the_old_one_otherwise():
    rec = discovered(metadata={"a": ["1"]})
    msg = result(Status.FETCHED, NOW, http_status=200)
    assert apply(rec, msg, CONFIG).metadata == {"a": ["1"]}
    assert apply(rec, msg, CONFIG, metadata={"b": ["2"]}).metadata == {"b": ["2"]}


# ---------------------------------------------------------------- serialisation and config


def test_a_url_record_survives_a_json_round_trip():
    rec = UrlRecord(url=URL, key=KEY, status=Status.FETCH_ERROR, depth=2, priority=1, attempts=3, fetch_errors=2,
                    next_fetch_at_s=NOW + 1, last_fetch_at_s=NOW, discovered_at_s=NOW - 5,
                    reason=Reason.FETCH_TIMEOUT, http_status=None, redirect_to=None, etag='"e"',
                    last_modified="d", metadata={"k": ["v1", "v2"]}, chain=["https://example.com/"])
    d = rec.to_dict()
    assert d["status"] == "FETCH_ERROR"
    assert type(d["reason"]) is str and d["reason"] == "fetch.timeout"  # the table holds the values
    again = UrlRecord.from_dict(json.loads(json.dumps(d)))
    assert again == rec and again.reason is Reason.FETCH_TIMEOUT


@pytest.mark.parametrize(("field", "value"), [("status", "LOST"), ("reason", "fetch.maybe")])
def test_a_stored_record_with_an_unknown_status_or_reason_raises_value_error(field, value):
    d = {**UrlRecord(url=URL, key=KEY).to_dict(), field: value}
    with pytest.raises(ValueError):
        UrlRecord.from_dict(d)


def test_schedule_config_converts_stormcrawler_minutes_to_seconds(tmp_path):
    conf = tmp_path / "conf.yaml"
    conf.write_text("fetchInterval.default: 60\nfetchInterval.fetch.error: 2.5\nfetchInterval.error: -1\n"
                    "max.fetch.errors: 5\n")
    config = ScheduleConfig.from_settings(load_settings(conf))
    assert config == ScheduleConfig(default_interval_s=3600.0, fetch_error_interval_s=150.0,
                                    error_interval_s=None, max_fetch_errors=5, max_rate_limits=20,
                                    changefreq_revisit=True)


def test_schedule_config_from_the_defaults_follows_the_defaults_file(tmp_path):
    conf = tmp_path / "empty.yaml"
    conf.write_text("{}\n")
    defaults = yaml.safe_load(DEFAULTS_FILE.read_text())
    config = ScheduleConfig.from_settings(load_settings(conf))
    assert config.default_interval_s == defaults["fetchInterval.default"] * 60.0
    assert config.max_fetch_errors == defaults["max.fetch.errors"]
    if defaults["fetchInterval.error"] < 0:
        assert config.error_interval_s is None


# ---------------------------------------------------------------- sitemaps: changefreq revisits, lastmod refreshes

SITEMAP_CONFIG = replace(CONFIG, changefreq_revisit=True)


@pytest.mark.parametrize(("changefreq", "enabled", "interval_s"), [
    ("hourly", True, 3600.0), ("weekly", True, 7 * 86400.0), ("never", True, None),
    ("weekly", False, 1440 * MIN), (None, True, 1440 * MIN),
])
def test_a_fetched_url_listed_with_a_changefreq_is_revisited_after_it(changefreq, enabled, interval_s):
    meta = {"sitemap.changefreq": [changefreq]} if changefreq else {}
    config = SITEMAP_CONFIG if enabled else CONFIG
    rec = apply(discovered(metadata=meta), result(Status.FETCHED, NOW, http_status=200), config)
    assert rec.next_fetch_at_s == (None if interval_s is None else NOW + interval_s)


def listed_again(lastmod: str) -> StatusMessage:
    return StatusMessage(url=URL, metadata={"sitemap.lastmod": [lastmod], "sitemap.changefreq": ["daily"]})


def test_a_sitemap_lastmod_newer_than_the_last_fetch_makes_a_fetched_url_due_at_once_and_idempotently():
    fetched = apply(discovered(), result(Status.FETCHED, NOW, http_status=200), CONFIG)
    again = apply(fetched, listed_again("2024-05-01T13:00:00Z"), CONFIG)
    assert again.next_fetch_at_s == NOW + 3600.0 < fetched.next_fetch_at_s
    assert again.metadata["sitemap.changefreq"] == ["daily"]
    assert apply(again, listed_again("2024-05-01T13:00:00Z"), CONFIG) is again


@pytest.mark.parametrize("lastmod", ["2024-05-01T11:00:00Z", "not a date"])
def test_a_sitemap_lastmod_not_newer_than_the_last_fetch_changes_nothing(lastmod):
    fetched = apply(discovered(), result(Status.FETCHED, NOW, http_status=200), CONFIG)
    assert apply(fetched, listed_again(lastmod), CONFIG) is fetched


def test_a_sitemap_lastmod_does_not_touch_a_url_not_yet_fetched():
    rec = discovered()
    assert apply(rec, listed_again("2030-01-01"), CONFIG) is rec


def marked_again() -> StatusMessage:
    return StatusMessage(url=URL, metadata={"isSitemap": ["true"], "sitemap.level": ["1"]})


def test_a_url_fetched_as_a_page_and_then_named_a_sitemap_takes_the_marker_and_is_due_again_once():
    fetched = apply(discovered(metadata={"k": ["v"]}), result(Status.FETCHED, NOW, http_status=200), CONFIG)
    marked = apply(fetched, marked_again(), CONFIG)
    assert marked.metadata == {"k": ["v"], "isSitemap": ["true"], "sitemap.level": ["1"]}
    assert marked.next_fetch_at_s == NOW  # its last fetch: due at once
    assert apply(marked, marked_again(), CONFIG) is marked


def test_a_url_not_yet_fetched_and_named_a_sitemap_only_takes_the_marker():
    marked = apply(discovered(), marked_again(), CONFIG)
    assert marked.next_fetch_at_s == NOW and marked.metadata["isSitemap"] == ["true"]


def test_a_page_fetch_in_flight_when_its_url_was_named_a_sitemap_is_followed_by_a_fetch_at_once():
    marked = apply(discovered(), marked_again(), CONFIG)  # marked while the unmarked hand-out was in flight
    fetched = apply(marked, result(Status.FETCHED, NOW + 5, http_status=200), CONFIG)
    assert fetched.next_fetch_at_s == NOW + 5 and fetched.metadata["isSitemap"] == ["true"]
    as_sitemap = apply(fetched, result(Status.FETCHED, NOW + 10, http_status=200,
                                       metadata={"isSitemap": ["true"]}), CONFIG)
    assert as_sitemap.next_fetch_at_s == NOW + 10 + 1440 * MIN


# ---------------------------------------------------------------- the transition table, every cell

# A config where every interval is finite, so each "next fetch" rule is visible.
TABLE_CONFIG = ScheduleConfig(default_interval_s=1440 * MIN, fetch_error_interval_s=120 * MIN,
                              error_interval_s=720 * MIN, max_fetch_errors=3, max_rate_limits=4,
                              changefreq_revisit=False)
LAST = NOW - 3600.0  # the record's previous fetch (a result at NOW is newer)
RETRY = NOW + 900.0  # the retry_after_s a message carries

# incoming kind → (message, record fields before, expected status (None: unchanged), expected reason
# ("same": the message's), next fetch rule, attempts added)
NEXT = {
    "retry_after": lambda: RETRY,
    "default": lambda: NOW + TABLE_CONFIG.default_interval_s,
    "fetch_error": lambda: NOW + TABLE_CONFIG.fetch_error_interval_s,
    "error": lambda: NOW + TABLE_CONFIG.error_interval_s,
}
TRANSITIONS = [
    ("not attempted: robots.txt unavailable", Incoming.NOT_ATTEMPTED,
     result(Status.DISCOVERED, NOW, reason=Reason.ROBOTS_UNAVAILABLE, retry_after_s=RETRY), {},
     None, "same", "retry_after", 0),
    ("not attempted: deferred", Incoming.NOT_ATTEMPTED,
     result(Status.DISCOVERED, NOW, reason=Reason.FETCH_DEFERRED, retry_after_s=RETRY), {},
     None, "same", "retry_after", 0),
    ("not attempted: address changed", Incoming.NOT_ATTEMPTED,
     result(Status.DISCOVERED, NOW, reason=Reason.FETCH_ADDRESS_CHANGED, retry_after_s=RETRY), {},
     None, "same", "retry_after", 0),
    ("fetched", Incoming.FETCHED, result(Status.FETCHED, NOW, http_status=200), {},
     Status.FETCHED, None, "default", 1),
    ("redirection", Incoming.REDIRECTION,
     result(Status.REDIRECTION, NOW, http_status=301, redirect_to="https://example.com/b"), {},
     Status.REDIRECTION, None, "default", 1),
    ("rate limited", Incoming.RATE_LIMITED,
     result(Status.FETCH_ERROR, NOW, http_status=429, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=RETRY), {},
     None, "same", "retry_after", 1),
    ("rate limited, the max.rate.limits-th", Incoming.RATE_LIMITED,
     result(Status.FETCH_ERROR, NOW, http_status=503, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=RETRY),
     {"rate_limits": 3}, Status.ERROR, Reason.HTTP_RATE_LIMITED_TOO_MANY, "error", 1),
    ("transient failure", Incoming.FETCH_ERROR,
     result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_TIMEOUT), {},
     Status.FETCH_ERROR, "same", "fetch_error", 1),
    ("transient failure, the max.fetch.errors-th", Incoming.FETCH_ERROR,
     result(Status.FETCH_ERROR, NOW, http_status=500, reason=Reason.HTTP_SERVER_ERROR), {"fetch_errors": 2},
     Status.ERROR, Reason.FETCH_TOO_MANY_ERRORS, "error", 1),
    ("permanent failure", Incoming.ERROR,
     result(Status.ERROR, NOW, http_status=404, reason=Reason.HTTP_NOT_FOUND), {},
     Status.ERROR, "same", "error", 1),
    ("policy rejection (no request)", Incoming.ERROR,
     result(Status.ERROR, NOW, reason=Reason.ROBOTS_DENIED), {},
     Status.ERROR, "same", "error", 0),
]


def _record_in(status: Status, **fields) -> UrlRecord:
    return UrlRecord(url=URL, key=KEY, status=status, attempts=5, next_fetch_at_s=NOW, last_fetch_at_s=LAST,
                     discovered_at_s=LAST - 60, reason=Reason.FETCH_DNS if status is not Status.DISCOVERED else None,
                     **fields)


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
@pytest.mark.parametrize(("name", "kind", "msg", "before", "to_status", "reason", "next_rule", "added"), TRANSITIONS,
                         ids=[row[0] for row in TRANSITIONS])
def test_every_transition_follows_the_table(from_status, name, kind, msg, before, to_status, reason, next_rule, added):
    record = _record_in(from_status, **before)
    assert kind_of(msg) is kind
    new = apply(record, msg, TABLE_CONFIG)
    assert new.status is (from_status if to_status is None else to_status)
    assert new.reason is (msg.reason if reason == "same" else reason)
    assert new.next_fetch_at_s == NEXT[next_rule]()
    assert new.attempts == record.attempts + added
    assert new.last_fetch_at_s == NOW
    assert apply(new, msg, TABLE_CONFIG) is new  # and its re-delivery changes nothing


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
def test_a_plain_discovery_of_a_known_url_changes_nothing_whatever_its_status(from_status):
    record = _record_in(from_status)
    for msg in (StatusMessage(url=URL), StatusMessage(url=URL, status=Status.FETCHED, http_status=200)):
        assert kind_of(msg) is Incoming.DISCOVERY  # no fetched_at_s: a discovery, whatever the status says
        assert apply(record, msg, TABLE_CONFIG) is record


@pytest.mark.parametrize("from_status", list(Status), ids=[s.value for s in Status])
@pytest.mark.parametrize(("name", "kind", "msg", "before", "to_status", "reason", "next_rule", "added"), TRANSITIONS,
                         ids=[row[0] for row in TRANSITIONS])
def test_a_result_older_than_the_last_fetch_changes_nothing_in_any_cell(from_status, name, kind, msg, before,
                                                                        to_status, reason, next_rule, added):
    record = replace(_record_in(from_status, **before), last_fetch_at_s=NOW)
    assert apply(record, msg, TABLE_CONFIG) is record


def test_the_table_has_a_row_for_every_incoming_kind_and_kind_of_covers_every_status():
    assert {row[1] for row in TRANSITIONS} | {Incoming.DISCOVERY} == set(Incoming)
    for status in Status:
        assert kind_of(StatusMessage(url=URL, status=status)) is Incoming.DISCOVERY
        reason = Reason.ROBOTS_UNAVAILABLE if status is Status.DISCOVERED else None
        assert isinstance(kind_of(StatusMessage(url=URL, status=status, fetched_at_s=NOW, reason=reason)), Incoming)


def _status_writes(path) -> list[str]:
    """``status=`` keywords of ``UrlRecord(...)`` / ``replace(...)`` calls in one source file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("UrlRecord", "replace")
                and any(k.arg == "status" for k in node.keywords)):
            found.append(f"{path.name}:{node.lineno} {node.func.id}(status=...)")
    return found


def test_no_code_but_the_transition_function_sets_a_url_records_status():
    root = pathlib.Path(__file__).resolve().parents[2]
    files = [*(root / "squall").rglob("*.py"), *(root / "agents").glob("*.py"), *(root / "topology").glob("*.py")]
    found = [w for f in files if f.name != "schedule.py" for w in _status_writes(f)]
    # the one other status= write is on a *message*: a fetched sitemap that cannot be read ends ERROR
    assert found == [w for w in found if w.startswith("sitemaps.py:") and "replace" in w]
    assert len(found) == 1, found


def test_a_record_knows_whether_a_hand_outs_result_is_in():
    record = UrlRecord(url="https://example.com/", key="example.com", last_fetch_at_s=100.0)
    assert record.reported_since(99.5) and record.reported_since(100.0)
    assert not record.reported_since(100.5)
    assert not UrlRecord(url="https://example.com/", key="example.com").reported_since(0.0)


# ---------------------------------------------------------------- adaptive revisits (StormCrawler AdaptiveScheduler)

ADAPTIVE = AdaptiveConfig(min_interval_s=60 * MIN, max_interval_s=20160 * MIN, rate_incr=0.5, rate_decr=0.5)
ADAPTIVE_CONFIG = replace(CONFIG, adaptive=ADAPTIVE)
DAY = 1440 * MIN

ADAPTIVE_CASES = [
    # (previous interval, old digest, new digest, 304, expected interval, reason)
    (None, None, "sha1:A", False, DAY, IntervalReason.FIRST),  # first fetch: the default
    (DAY, "sha1:A", "sha1:A", False, 1.5 * DAY, IntervalReason.UNCHANGED),
    (DAY, "sha1:A", None, True, 1.5 * DAY, IntervalReason.NOT_MODIFIED),  # a 304 grows it too
    (DAY, "sha1:A", "sha1:B", False, 0.5 * DAY + 0.5 * 60 * MIN, IntervalReason.CHANGED),
    (13000 * MIN, "sha1:A", "sha1:A", False, 19500 * MIN, IntervalReason.UNCHANGED),
    (14000 * MIN, "sha1:A", "sha1:A", False, 20160 * MIN, IntervalReason.UNCHANGED),  # capped at the maximum
    (60 * MIN, "sha1:A", "sha1:B", False, 60 * MIN, IntervalReason.CHANGED),  # the minimum holds
    (DAY, None, "sha1:B", False, DAY, IntervalReason.FIRST),  # no earlier digest: nothing to compare
]


@pytest.mark.parametrize(("previous", "old", "new", "not_modified", "interval", "reason"), ADAPTIVE_CASES)
def test_adaptive_interval_grows_when_unchanged_and_shrinks_towards_the_minimum_when_changed(
    previous, old, new, not_modified, interval, reason
):
    assert adaptive_interval(previous, old, new, not_modified, DAY, ADAPTIVE) == pytest.approx((interval, reason))


def test_a_changed_page_approaches_the_minimum_ever_more_slowly_and_never_below_it():
    interval, steps = DAY, []
    for _ in range(12):
        interval, _ = adaptive_interval(interval, "sha1:A", "sha1:B", False, DAY, ADAPTIVE)
        steps.append(interval)
    assert all(a > b >= 60 * MIN for a, b in itertools.pairwise(steps))
    assert steps[-1] - 60 * MIN < 30.0  # the distance to the minimum halves at each change


def test_the_record_keeps_digest_interval_and_reason_and_the_next_fetch_follows_them():
    first = apply(discovered(), result(Status.FETCHED, NOW, http_status=200, payload_digest="sha1:A"), ADAPTIVE_CONFIG)
    assert (first.payload_digest, first.fetch_interval_s, first.interval_reason) == ("sha1:A", DAY, IntervalReason.FIRST)
    assert first.next_fetch_at_s == NOW + DAY

    later = NOW + DAY
    same = apply(first, result(Status.FETCHED, later, http_status=200, payload_digest="sha1:A"), ADAPTIVE_CONFIG)
    assert (same.fetch_interval_s, same.interval_reason) == (1.5 * DAY, IntervalReason.UNCHANGED)
    assert same.next_fetch_at_s == later + 1.5 * DAY

    changed = apply(same, result(Status.FETCHED, later + 1, http_status=200, payload_digest="sha1:B"), ADAPTIVE_CONFIG)
    assert changed.interval_reason is IntervalReason.CHANGED and changed.payload_digest == "sha1:B"
    assert changed.fetch_interval_s == pytest.approx(0.75 * DAY + 30 * MIN)

    # a 304 carries no body: the digest stays, the interval grows
    answer = result(Status.FETCHED, later + 2, http_status=304, not_modified=True, payload_digest="sha1:EMPTY")
    kept = apply(changed, answer, ADAPTIVE_CONFIG)
    assert kept.payload_digest == "sha1:B" and kept.interval_reason is IntervalReason.NOT_MODIFIED
    assert kept.fetch_interval_s == pytest.approx(changed.fetch_interval_s * 1.5)

    # the record and its reason survive the table's JSON
    assert UrlRecord.from_dict(json.loads(json.dumps(kept.to_dict()))) == kept


def test_without_the_adaptive_schedule_the_record_has_no_interval_and_the_default_applies():
    rec = apply(discovered(), result(Status.FETCHED, NOW, http_status=200, payload_digest="sha1:A"), CONFIG)
    assert (rec.fetch_interval_s, rec.interval_reason, rec.next_fetch_at_s) == (None, None, NOW + DAY)
    assert rec.payload_digest == "sha1:A"


def test_adaptive_keys_are_stormcrawlers_in_minutes():
    s = load_settings(overrides={"scheduler.adaptive.enabled": True, "scheduler.adaptive.fetchInterval.min": 30,
                                 "scheduler.adaptive.fetchInterval.max": 600,
                                 "scheduler.adaptive.fetchInterval.rate.incr": 0.25})
    assert ScheduleConfig.from_settings(s).adaptive == AdaptiveConfig(30 * MIN, 600 * MIN, 0.25, 0.5)
    assert ScheduleConfig.from_settings(load_settings(overrides={})).adaptive is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"scheduler.adaptive.fetchInterval.min": 0},
        {"scheduler.adaptive.fetchInterval.max": 10, "scheduler.adaptive.fetchInterval.min": 20},
        {"scheduler.adaptive.fetchInterval.rate.incr": 0},
        {"scheduler.adaptive.fetchInterval.rate.decr": 1.5},
    ],
)
def test_bad_adaptive_keys_stop_the_settings_with_the_key_named(overrides):
    from squall.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        load_settings(overrides=overrides)
    assert err.value.key in overrides


def test_the_record_keeps_the_archive_date_of_its_payload_and_a_304_keeps_the_earlier_one():
    first = apply(discovered(), result(Status.FETCHED, NOW, http_status=200, payload_digest="sha1:A",
                                       archived_at_s=NOW - 0.5), CONFIG)
    assert (first.payload_digest, first.archived_at_s) == ("sha1:A", NOW - 0.5)
    answer = result(Status.FETCHED, NOW + 10, http_status=304, not_modified=True, archived_at_s=NOW + 9.5)
    assert apply(first, answer, CONFIG).archived_at_s == NOW - 0.5
