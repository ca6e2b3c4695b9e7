"""Tests of squall.policy.fetch_decision, branch by branch: fake clock, no I/O."""

from __future__ import annotations

from dataclasses import replace

import pytest

from squall.policy.backoff import BackoffConfig
from squall.policy.crawl_delay import CrawlDelayConfig
from squall.policy.fetch_decision import (
    FetchConfig,
    Fetched,
    Go,
    Skip,
    before_fetch,
    deferred,
    ended,
    failed_unexpectedly,
    fetch_id,
    hand_back_until,
    made_request,
    report,
    signal,
    skipped,
)
from squall.policy.outcome import Outcome
from squall.policy.pace import PaceConfig, PaceState, after_fetch
from squall.policy.records import FetchMessage, SignalKind, SignalMessage, StatusMessage
from squall.policy.reasons import Reason, Status
from squall.policy.robots_rules import RobotsConfig, RobotsKind
from squall.policy.robots_status import RobotsEntry, RobotsFetchOutcome, decide
from squall.settings import load_settings

NOW = 1_714_564_800.0
SETTINGS = load_settings()
ROBOTS = RobotsConfig.from_settings(SETTINGS)
PACE = PaceConfig(
    server_delay_s=1.0,
    min_delay_s=0.0,
    force=True,
    retry_after_max_s=86400.0,
    backoff=BackoffConfig(1.0, 60.0, 3600.0),
    crawl=CrawlDelayConfig(False, 86400, 1800.0),
)
CONFIG = FetchConfig(robots=ROBOTS, pace=PACE, lead_s=5.0, robots_retry_s=60.0, max_wait_s=300.0)
MSG = FetchMessage(
    url="https://example.com/a",
    key="example.com",
    depth=1,
    metadata={"k": ["v"]},
    handed_out_at_s=NOW - 1,
    chain=["https://example.com/old"],
)


def robots(text: str = "User-agent: *\nAllow: /\n", **kw) -> tuple[RobotsEntry, object]:
    entry = RobotsEntry(kind=RobotsKind.RULES, robots_text=text, fetched_at_s=NOW - 10, expires_at_s=NOW + 3600, **kw)
    return entry, entry.rules(ROBOTS)


# ---------------------------------------------------------------- before a fetch


def test_an_unreachable_robots_txt_skips_the_url_until_the_robots_retry():
    entry, rules = robots()
    entry = replace(entry, kind=RobotsKind.DISALLOW_ALL, unreachable_since_s=NOW - 5, failures=1, retry_at_s=NOW + 120)
    decision = before_fetch(MSG, entry, entry.rules(ROBOTS), NOW, CONFIG)
    assert decision == Skip(Status.DISCOVERED, Reason.ROBOTS_UNAVAILABLE, NOW + 120)


def test_an_unreachable_robots_txt_without_a_retry_time_waits_the_robots_retry_base():
    entry, _ = robots()
    entry = replace(entry, kind=RobotsKind.DISALLOW_ALL, unreachable_since_s=NOW - 5, failures=1, retry_at_s=None)
    decision = before_fetch(MSG, entry, entry.rules(ROBOTS), NOW, CONFIG)
    assert decision.retry_after_s == NOW + 60.0


@pytest.mark.parametrize(
    ("answer", "allow_on_403", "expected"),
    [
        (503, True, Skip(Status.DISCOVERED, Reason.ROBOTS_UNAVAILABLE, NOW + 60.0)),  # unreachable: wait
        (None, True, Skip(Status.DISCOVERED, Reason.ROBOTS_UNAVAILABLE, NOW + 60.0)),  # no answer at all: wait
        (429, True, Skip(Status.DISCOVERED, Reason.ROBOTS_UNAVAILABLE, NOW + 60.0)),
        (403, False, Skip(Status.ERROR, Reason.ROBOTS_DENIED)),  # a disallow-all chosen for 403: disallowed
        (200, True, Skip(Status.ERROR, Reason.ROBOTS_DENIED)),  # the rules disallow /a
    ],
)
def test_unreachable_robots_waits_as_unavailable_and_only_a_disallow_is_denied(answer, allow_on_403, expected):
    config = replace(CONFIG, robots=replace(ROBOTS, allow_on_403=allow_on_403, allow_on_5xx=False, retry_base_s=60.0))
    entry = decide(RobotsFetchOutcome(status=answer, body=b"User-agent: *\nDisallow: /a\n"), None, NOW, config.robots)
    assert before_fetch(MSG, entry, entry.rules(config.robots), NOW, config) == expected


@pytest.mark.parametrize("reason", [Reason.ROBOTS_DENIED, Reason.FETCH_TIMEOUT, Reason.HTTP_RATE_LIMITED])
def test_a_discovered_skip_must_say_why_it_was_not_attempted(reason):
    with pytest.raises(ValueError):
        Skip(Status.DISCOVERED, reason, NOW)
    assert Skip(Status.ERROR, reason).reason is reason


def test_a_disallowed_url_ends_in_error_robots_denied():
    entry, rules = robots("User-agent: *\nDisallow: /a\n")
    assert before_fetch(MSG, entry, rules, NOW, CONFIG) == Skip(Status.ERROR, Reason.ROBOTS_DENIED)


def test_a_crawl_delay_over_the_cap_without_force_ends_in_error():
    entry, rules = robots("User-agent: *\nCrawl-delay: 999\n")
    assert before_fetch(MSG, entry, rules, NOW, CONFIG) == Skip(Status.ERROR, Reason.CRAWL_DELAY_TOO_LONG)


def test_a_crawl_delay_over_the_cap_with_force_fetches_at_the_cap_and_forwards_the_whole_seconds():
    config = replace(CONFIG, robots=replace(ROBOTS, max_crawl_delay_force=True))
    entry, rules = robots("User-agent: *\nCrawl-delay: 40.5\n")
    assert before_fetch(MSG, entry, rules, NOW, config) == Go(crawl_delay_s=ROBOTS.max_crawl_delay_s, forward_s=41)


def test_an_allowed_url_is_fetched_with_its_crawl_delay_and_conditional_headers():
    entry, rules = robots("User-agent: *\nCrawl-delay: 2\n")
    msg = replace(MSG, etag='"x1"', last_modified="Wed, 01 May 2024 10:00:00 GMT")
    assert before_fetch(msg, entry, rules, NOW, CONFIG) == Go(
        headers={"If-None-Match": '"x1"', "If-Modified-Since": "Wed, 01 May 2024 10:00:00 GMT"}, crawl_delay_s=2.0
    )


def test_a_first_fetch_sends_no_conditional_headers():
    entry, rules = robots()
    assert before_fetch(MSG, entry, rules, NOW, CONFIG) == Go()


# ---------------------------------------------------------------- decisions without a request


def test_a_skipped_url_reports_its_status_and_an_event_without_a_request():
    status, event = skipped(MSG, Skip(Status.ERROR, Reason.ROBOTS_DENIED), NOW)
    assert (status.status, status.reason, status.fetched_at_s, status.chain) == (
        Status.ERROR,
        "robots.denied",
        NOW,
        MSG.chain,
    )
    assert (event.kind, event.requested, event.at_s, event.fetch_id) == (SignalKind.OTHER, False, NOW, fetch_id(MSG))


def test_a_deferred_hand_out_is_due_again_when_the_block_ends():
    status, event = deferred(MSG, NOW + 300, NOW)
    assert (status.status, status.reason, status.retry_after_s) == (Status.DISCOVERED, "fetch.deferred", NOW + 300)
    assert not event.requested


def test_an_unexpected_failure_is_retried_later_and_assumed_to_have_reached_the_host():
    status, event = failed_unexpectedly(MSG, NOW)
    assert (status.status, status.reason) == (Status.FETCH_ERROR, "fetch.protocol")
    assert event.requested  # the politer assumption: the host waits its delay


@pytest.mark.parametrize(
    ("reason", "requested"),
    [
        (Reason.FETCH_BLOCKED_ADDRESS, False),
        (Reason.URL_SCHEME, False),
        (Reason.URL_HOST, False),
        (Reason.FETCH_TIMEOUT, True),
        (Reason.FETCH_CONNECTION, True),
        (Reason.FETCH_PROTOCOL, True),
        (Reason.FETCH_DNS, True),
    ],
)
def test_a_transport_failure_counts_as_a_request_unless_nothing_was_sent(reason, requested):
    assert made_request(reason) is requested


# ---------------------------------------------------------------- hand-back of waiting URLs


@pytest.mark.parametrize(("blocked_for_s", "handed_back"), [(0.0, False), (5.0, False), (5.1, True), (3600.0, True)])
def test_urls_waiting_at_the_fetcher_are_handed_back_only_for_a_block_beyond_the_lead(blocked_for_s, handed_back):
    pace = (
        after_fetch(
            None, ended(MSG, SignalKind.RETRY_AFTER, NOW, requested=True, retry_until_s=NOW + blocked_for_s), PACE
        )
        if blocked_for_s
        else PaceState(next_fetch_at_s=NOW + 30)
    )
    until = hand_back_until(pace, NOW, CONFIG)
    assert (until is not None) is handed_back
    if handed_back:
        assert until == NOW + blocked_for_s


def test_a_delay_alone_hands_urls_back_only_when_it_outlasts_half_the_in_flight_timeout():
    assert hand_back_until(PaceState(next_fetch_at_s=NOW + 30, delay_s=30.0), NOW, CONFIG) is None
    assert hand_back_until(PaceState(next_fetch_at_s=NOW + 301, delay_s=301.0), NOW, CONFIG) == NOW + 301


# ---------------------------------------------------------------- after a fetch


def test_the_pace_event_carries_the_crawl_delay_and_only_a_retry_after_keeps_its_time():
    go = Go(crawl_delay_s=2.0, forward_s=3)
    event = ended(MSG, SignalKind.RETRY_AFTER, NOW, requested=True, go=go, retry_until_s=NOW + 9)
    assert (event.crawl_delay_s, event.forwarded_crawl_delay_s, event.retry_until_s) == (2.0, 3, NOW + 9)
    assert ended(MSG, SignalKind.SUCCESS, NOW, requested=True, retry_until_s=NOW + 9).retry_until_s is None


def test_the_signal_is_the_pace_event_and_round_trips_through_the_topic():
    go = Go(crawl_delay_s=2.0, forward_s=3)
    event = ended(MSG, SignalKind.RATE_LIMITED, NOW, requested=True, go=go)
    pace = after_fetch(None, event, PACE)
    sig = SignalMessage.from_bytes(signal(MSG, event, pace).to_bytes())
    assert (sig.key, sig.url, sig.fetch_id, sig.kind, sig.at_s, sig.requested) == (
        MSG.key,
        MSG.url,
        event.fetch_id,
        SignalKind.RATE_LIMITED,
        NOW,
        True,
    )
    assert (sig.crawl_delay_s, sig.robots_crawl_delay_s, sig.handed_out_at_s, sig.delay_s) == (
        2.0,
        3,
        MSG.handed_out_at_s,
        pace.delay_s,
    )


def test_a_page_reports_itself_with_its_validators_and_its_outlinks():
    outcome = Outcome(Status.FETCHED, SignalKind.SUCCESS, http_status=200, parse=True)
    link = StatusMessage(url="https://example.com/b", depth=2)
    out = report(
        MSG,
        outcome,
        Fetched(etag='"e"', last_modified="lm", truncated=True),
        NOW,
        PaceState(),
        ({"parse.title": ["A"]}, [link]),
        Go(),
    )
    own = out[0]
    assert (own.status, own.http_status, own.etag, own.last_modified, own.truncated, own.fetched_at_s) == (
        Status.FETCHED,
        200,
        '"e"',
        "lm",
        True,
        NOW,
    )
    assert own.metadata == {"k": ["v"], "parse.title": ["A"]}
    assert out[1:] == [link]


def test_a_rate_limited_url_is_due_again_when_its_hosts_block_ends():
    outcome = Outcome(Status.FETCH_ERROR, SignalKind.RETRY_AFTER, Reason.HTTP_RATE_LIMITED, 429, retry_after_s=NOW + 9)
    pace = after_fetch(None, ended(MSG, SignalKind.RETRY_AFTER, NOW, requested=True, retry_until_s=NOW + 9), PACE)
    own = report(MSG, outcome, Fetched(), NOW, pace, None, Go())[0]
    assert (own.reason, own.retry_after_s) == ("http.rate_limited", NOW + 9)


def test_a_redirect_reports_its_target_as_discovered_with_the_chain():
    outcome = Outcome(Status.REDIRECTION, SignalKind.SUCCESS, http_status=301, redirect_to="https://example.com/new")
    out = report(MSG, outcome, Fetched(), NOW, PaceState(), None, Go(forward_s=3))
    assert out[0].metadata["robots.crawl.delay"] == ["3"]
    target = out[1]
    assert (target.url, target.status, target.chain) == (
        "https://example.com/new",
        Status.DISCOVERED,
        MSG.chain + [MSG.url],
    )
    assert "robots.crawl.delay" not in target.metadata  # an outlink never inherits its parent's delay


def test_an_incoming_robots_delay_is_never_trusted_and_is_rebuilt_from_the_local_rules():
    msg = replace(MSG, metadata={"robots.crawl.delay": ["999"]})
    outcome = Outcome(Status.FETCHED, SignalKind.SUCCESS, http_status=200)
    assert "robots.crawl.delay" not in report(msg, outcome, Fetched(), NOW, PaceState(), None, Go())[0].metadata


def test_a_transport_failure_reports_no_validators():
    outcome = Outcome(Status.FETCH_ERROR, SignalKind.OTHER, Reason.FETCH_TIMEOUT)
    own = report(MSG, outcome, None, NOW, PaceState(), None, None)[0]
    assert (own.status, own.reason, own.etag, own.truncated) == (Status.FETCH_ERROR, "fetch.timeout", None, False)


def test_a_robots_request_paces_the_next_one_with_the_crawl_delay_it_taught_and_never_resets_a_back_off():
    from squall.policy.fetch_decision import robots_ended

    _entry, rules = robots("User-agent: *\nCrawl-delay: 3\n")
    event = robots_ended("r1", rules, NOW, CONFIG)
    assert (event.kind, event.requested, event.crawl_delay_s) == (SignalKind.OTHER, True, 3.0)
    blocked = after_fetch(None, ended(MSG, SignalKind.RETRY_AFTER, NOW, requested=True, retry_until_s=NOW + 99), PACE)
    assert after_fetch(blocked, replace(event, at_s=NOW + 1), PACE).blocked_until_s == NOW + 99


def test_the_config_reads_the_defaults_file():
    config = FetchConfig.from_settings(SETTINGS)
    assert (config.lead_s, config.robots_retry_s, config.max_wait_s) == (0.5, 60.0, 300.0)


def test_the_outlink_batch_of_the_pages_own_partition_rides_with_its_result() -> None:
    from squall.policy.fetch_decision import same_partition_batch
    from squall.policy.partition import partition_for_key

    partitions, key = 8, "example.com"
    elsewhere = next(
        f"h{i}.example"
        for i in range(100)
        if partition_for_key(f"h{i}.example", partitions) != partition_for_key(key, partitions)
    )
    own = StatusMessage(url="https://example.com/p", status=Status.FETCHED, fetched_at_s=1.0)
    seeded = StatusMessage(url="https://example.com/s", seed=True)
    other = StatusMessage(url=f"https://{elsewhere}/x", depth=1)
    same = StatusMessage(url="https://example.com/a", more_urls=["https://example.com/b"], depth=1)
    statuses = [own, seeded, other, same]
    assert same_partition_batch(statuses, 0, key, "byHost", partitions) == 3
    assert same_partition_batch(statuses[:3], 0, key, "byHost", partitions) is None  # a seed never rides along


REVISIT_CASES = [
    # (digest of the hand-out's record, its archive date, this fetch's digest, expected refers-to date)
    ("sha1:A", 100.0, "sha1:A", 100.0),  # unchanged: a revisit of the archived record
    ("sha1:A", 100.0, "sha1:B", None),  # changed: archived in full
    ("sha1:A", None, "sha1:A", None),  # never archived (WARC was off): nothing to refer to
    (None, None, "sha1:A", None),  # first fetch
    ("sha1:A", 100.0, None, None),  # no digest computed
]


@pytest.mark.parametrize(("digest", "archived_at_s", "fetched", "expected"), REVISIT_CASES)
def test_revisit_of_refers_to_the_archived_record_only_for_an_identical_payload(
    digest, archived_at_s, fetched, expected
):
    from squall.policy.fetch_decision import revisit_of

    msg = FetchMessage(url="http://h.test/", key="h.test", payload_digest=digest, archived_at_s=archived_at_s)
    assert revisit_of(msg, fetched) == expected
