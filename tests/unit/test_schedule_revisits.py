"""Tests of squall.policy.schedule's revisits: sitemap changefreq and lastmod, and adaptive intervals (StormCrawler AdaptiveScheduler)."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import pytest

from squall.policy.adaptive import AdaptiveConfig, IntervalReason, adaptive_interval
from squall.policy.reasons import Status
from squall.policy.records import StatusMessage
from squall.policy.schedule import ScheduleConfig, UrlRecord, apply
from squall.settings import load_settings
from tests.unit.schedule_helper import CONFIG, MIN, NOW, URL, discovered, result

# ---------------------------------------------------------------- sitemaps: changefreq revisits, lastmod refreshes

SITEMAP_CONFIG = replace(CONFIG, changefreq_revisit=True)


@pytest.mark.parametrize(
    ("changefreq", "enabled", "interval_s"),
    [
        ("hourly", True, 3600.0),
        ("weekly", True, 7 * 86400.0),
        ("never", True, None),
        ("weekly", False, 1440 * MIN),
        (None, True, 1440 * MIN),
    ],
)
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
    as_sitemap = apply(
        fetched, result(Status.FETCHED, NOW + 10, http_status=200, metadata={"isSitemap": ["true"]}), CONFIG
    )
    assert as_sitemap.next_fetch_at_s == NOW + 10 + 1440 * MIN


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
    assert (first.payload_digest, first.fetch_interval_s, first.interval_reason) == (
        "sha1:A",
        DAY,
        IntervalReason.FIRST,
    )
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
    s = load_settings(
        overrides={
            "scheduler.adaptive.enabled": True,
            "scheduler.adaptive.fetchInterval.min": 30,
            "scheduler.adaptive.fetchInterval.max": 600,
            "scheduler.adaptive.fetchInterval.rate.incr": 0.25,
        }
    )
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
    first = apply(
        discovered(),
        result(Status.FETCHED, NOW, http_status=200, payload_digest="sha1:A", archived_at_s=NOW - 0.5),
        CONFIG,
    )
    assert (first.payload_digest, first.archived_at_s) == ("sha1:A", NOW - 0.5)
    answer = result(Status.FETCHED, NOW + 10, http_status=304, not_modified=True, archived_at_s=NOW + 9.5)
    assert apply(first, answer, CONFIG).archived_at_s == NOW - 0.5
