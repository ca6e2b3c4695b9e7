"""Tests of squall.policy.schedule.apply, result by result (StormCrawler DefaultScheduler): new records, re-deliveries, fetched, errors, rate limits."""

from __future__ import annotations

from dataclasses import replace

import pytest

from squall.policy.reasons import Reason, Status
from squall.policy.records import StatusMessage
from squall.policy.schedule import DISCOVERED_PRIORITY, SEED_PRIORITY, UrlRecord, apply, new_record
from tests.unit.schedule_helper import CONFIG, KEY, MIN, NOW, URL, discovered, result

# ---------------------------------------------------------------- new_record


@pytest.mark.parametrize(
    ("seed", "priority", "expected"),
    [
        (True, None, SEED_PRIORITY),
        (False, None, DISCOVERED_PRIORITY),
        (True, 7, 7),  # an explicit priority wins over the seed default
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
    assert rec == UrlRecord(
        url=URL,
        key=KEY,
        status=Status.DISCOVERED,
        depth=3,
        priority=DISCOVERED_PRIORITY,
        next_fetch_at_s=NOW,
        discovered_at_s=NOW,
        metadata={"k": ["v"]},
        chain=["https://example.com/"],
    )
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
    new = apply(
        discovered(),
        result(Status.FETCHED, NOW, http_status=200, etag='"v1"', last_modified="Wed, 01 May 2024 10:00:00 GMT"),
        CONFIG,
    )
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
    new = apply(
        discovered(), result(Status.REDIRECTION, NOW, http_status=301, redirect_to="https://example.com/b"), CONFIG
    )
    assert new.status is Status.REDIRECTION
    assert new.redirect_to == "https://example.com/b"
    assert (new.http_status, new.attempts, new.fetch_errors) == (301, 1, 0)
    assert new.next_fetch_at_s == NOW + 1440 * MIN


def test_fetch_interval_minus_one_means_never_revisit():
    config = replace(CONFIG, default_interval_s=None)
    assert apply(discovered(), result(Status.FETCHED, NOW, http_status=200), config).next_fetch_at_s is None
    assert (
        apply(
            discovered(), result(Status.REDIRECTION, NOW, redirect_to="https://example.com/b"), config
        ).next_fetch_at_s
        is None
    )


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
    new = apply(discovered(), result(Status.FETCH_ERROR, NOW, http_status=500, reason=Reason.HTTP_SERVER_ERROR), config)
    assert (new.status, new.reason) == (Status.ERROR, Reason.FETCH_TOO_MANY_ERRORS)
    assert new.next_fetch_at_s == NOW + 30 * MIN


def test_a_fetch_error_with_a_later_retry_after_waits_for_it():
    new = apply(
        discovered(),
        result(
            Status.FETCH_ERROR, NOW, http_status=500, reason=Reason.HTTP_SERVER_ERROR, retry_after_s=NOW + 10_000 * MIN
        ),
        CONFIG,
    )
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
        rec = apply(
            rec,
            result(
                Status.FETCH_ERROR, at, http_status=http_status, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=at + 30
            ),
            CONFIG,
        )
        assert rec.status is Status.DISCOVERED
        assert rec.next_fetch_at_s == at + 30
        assert rec.fetch_errors == 0
        assert rec.attempts == i + 1
        assert rec.pending


def test_a_rate_limited_answer_without_retry_after_is_due_again_at_once():
    new = apply(discovered(), result(Status.FETCH_ERROR, NOW, http_status=429, reason=Reason.HTTP_RATE_LIMITED), CONFIG)
    assert new.next_fetch_at_s == NOW
    assert (new.status, new.fetch_errors, new.attempts) == (Status.DISCOVERED, 0, 1)


def test_a_rate_limited_answer_keeps_earlier_fetch_errors_as_they_were():
    rec = apply(discovered(), result(Status.FETCH_ERROR, NOW, reason=Reason.FETCH_TIMEOUT), CONFIG)
    new = apply(
        rec,
        result(Status.FETCH_ERROR, NOW + 1, http_status=503, reason=Reason.HTTP_RATE_LIMITED, retry_after_s=NOW + 60),
        CONFIG,
    )
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
        (None, Reason.ROBOTS_DENIED, 0),  # policy rejection: no request made
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
    new = apply(
        discovered(), result(Status.DISCOVERED, NOW, reason=Reason.ROBOTS_UNAVAILABLE, retry_after_s=NOW + 600), CONFIG
    )
    assert new.status is Status.DISCOVERED
    assert new.next_fetch_at_s == NOW + 600
    assert (new.attempts, new.fetch_errors) == (0, 0)
    assert new.last_fetch_at_s == NOW
    assert new.pending


def test_a_not_attempted_result_without_retry_after_is_due_at_its_time():
    assert (
        apply(
            discovered(), result(Status.DISCOVERED, NOW + 7, reason=Reason.ROBOTS_UNAVAILABLE), CONFIG
        ).next_fetch_at_s
        == NOW + 7
    )


# ---------------------------------------------------------------- metadata


def test_apply_takes_the_persisted_metadata_when_given_and_keeps_the_old_one_otherwise():
    rec = discovered(metadata={"a": ["1"]})
    msg = result(Status.FETCHED, NOW, http_status=200)
    assert apply(rec, msg, CONFIG).metadata == {"a": ["1"]}
    assert apply(rec, msg, CONFIG, metadata={"b": ["2"]}).metadata == {"b": ["2"]}
