"""Tests of squall.policy.host_pacing (the queue regulator's policy) and of the durable pace of HostRecord."""

from __future__ import annotations

import random

import pytest

from squall.policy.backoff import BackoffConfig
from squall.policy.crawl_delay import CrawlDelayConfig
from squall.policy.frontier import HostRecord
from squall.policy.host_pacing import apply_signal, ended_of
from squall.policy.pace import FetchEnded, PaceConfig, after_fetch
from squall.policy.records import SignalKind, SignalMessage

NOW = 1_714_564_800.0
PACE = PaceConfig(server_delay_s=1.0, min_delay_s=0.0, force=True, retry_after_max_s=86400.0,
                  backoff=BackoffConfig(1.0, 60.0, 3600.0), crawl=CrawlDelayConfig(True, 86400, 1800.0))
KEY = "example.com"


def signal(kind: SignalKind = SignalKind.SUCCESS, *, url: str = "https://example.com/a", fetch_id: str = "f1",
           at_s: float = NOW, **kw) -> SignalMessage:
    return SignalMessage(key=KEY, url=url, fetch_id=fetch_id, kind=kind, at_s=at_s, **kw)


def host(**kw) -> HostRecord:
    return HostRecord(key=KEY, **kw)


def test_a_signal_frees_the_hand_out_place_of_its_url_only():
    h = host().with_handout(["https://example.com/a", "https://example.com/b"], NOW - 2)
    new = apply_signal(h, signal(), PACE, 64)
    assert new.in_flight == {"https://example.com/b": NOW - 2}
    assert h.in_flight == {"https://example.com/a": NOW - 2, "https://example.com/b": NOW - 2}


def test_a_late_signal_of_an_older_hand_out_does_not_free_a_newer_hand_out_of_the_same_url():
    h = HostRecord(key="h").with_handout(["http://h/a"], 200.0)  # handed out again at 200
    late = SignalMessage(key="h", url="http://h/a", fetch_id="old", kind=SignalKind.SUCCESS, at_s=150.0,
                         handed_out_at_s=100.0)
    after = apply_signal(h, late, PACE, 64)
    assert after.in_flight == {"http://h/a": 200.0}
    current = SignalMessage(key="h", url="http://h/a", fetch_id="new", kind=SignalKind.SUCCESS, at_s=250.0,
                            handed_out_at_s=200.0)
    assert apply_signal(after, current, PACE, 64).in_flight == {}


@pytest.mark.parametrize("kind", list(SignalKind))
def test_the_same_fetch_id_applied_twice_returns_the_same_object(kind):
    sig = signal(kind, retry_until_s=NOW + 10, robots_crawl_delay_s=20)
    once = apply_signal(host().with_handout([sig.url], NOW - 1), sig, PACE, 64)
    assert once.seen_fetch_ids == ["f1"]
    assert apply_signal(once, sig, PACE, 64) is once


def test_only_the_last_fetch_ids_are_remembered():
    h = host()
    for i in range(20):
        h = apply_signal(h, signal(fetch_id=f"f{i}", at_s=NOW + i), PACE, 8)
    assert h.seen_fetch_ids == [f"f{i}" for i in range(12, 20)]



def test_a_signal_no_topic_can_deliver_again_is_applied_without_its_fetch_id():
    h = host(seen_fetch_ids=["f0"]).with_handout(["https://example.com/a"], NOW - 1)
    after = apply_signal(h, signal(), PACE, 0)
    assert after.seen_fetch_ids == ["f0"]
    assert after.in_flight == {} and after.next_fetch_at_s == apply_signal(h, signal(), PACE, 64).next_fetch_at_s

def test_the_record_and_the_fetchers_gate_compute_the_same_pace_from_the_same_fetches():
    """Invariant 2: one model, two uses. Any sequence of fetch outcomes gives one pace in both."""
    rng = random.Random(7)
    record, gate, at = host(), None, NOW
    for i in range(300):
        kind = rng.choice(list(SignalKind))
        at += rng.choice([0.0, 0.5, 2.0, 30.0])
        event = FetchEnded(fetch_id=f"f{i}", kind=kind, at_s=at, requested=rng.random() < 0.9,
                           crawl_delay_s=rng.choice([None, 0.0, 0.5, 3.0]),
                           retry_until_s=at + rng.choice([0, 5, 90, 7200]) if kind is SignalKind.RETRY_AFTER else None,
                           forwarded_crawl_delay_s=rng.choice([None, None, 2, 40]))
        gate = after_fetch(gate, event, PACE)
        sig = SignalMessage(key=KEY, url=f"https://example.com/{i}", fetch_id=event.fetch_id, kind=kind, at_s=at,
                            requested=event.requested, crawl_delay_s=event.crawl_delay_s,
                            retry_until_s=event.retry_until_s, robots_crawl_delay_s=event.forwarded_crawl_delay_s)
        assert ended_of(sig) == event
        record = apply_signal(record, SignalMessage.from_bytes(sig.to_bytes()), PACE, 64)
        assert record.pace().ready_at_s == gate.ready_at_s
        assert record.pace().next_fetch_at_s == gate.next_fetch_at_s


# ---------------------------------------------------------------- eligibility: hand-outs ahead of the delay


def test_with_one_place_a_host_is_held_while_its_hand_out_is_out():
    h = host().with_handout(["a"], NOW)
    assert h.eligible_at_s(600.0, NOW + 1, ahead=1) == NOW + 600.0


def test_with_two_places_a_second_url_may_leave_while_the_first_is_out():
    h = host(next_fetch_at_s=NOW + 1.0, delay_s=1.0).with_handout(["a"], NOW)
    assert h.eligible_at_s(600.0, NOW, ahead=2, lead_s=5.0) == NOW - 4.0  # at once: the fetcher paces it
    full = h.with_handout(["b"], NOW)
    assert full.eligible_at_s(600.0, NOW, ahead=2, lead_s=5.0) == NOW + 600.0  # until one reports or times out


def test_a_block_holds_hand_outs_until_the_lead_before_it_ends():
    h = host(backoff={"attempts": 0, "blocked_until_s": NOW + 3600})
    assert h.eligible_at_s(600.0, NOW, ahead=2, lead_s=5.0) == NOW + 3595.0


@pytest.mark.parametrize(("delay_s", "ahead", "lead_s", "places"), [
    (1.0, 8, 0.5, 2), (0.05, 8, 0.5, 8), (0.2, 8, 0.5, 4), (30.0, 8, 0.5, 2), (0.0, 8, 0.5, 2),
    (1.0, 1, 0.5, 1), (0.05, 3, 0.5, 3), (1.0, 8, 0.0, 1),
])
def test_a_queue_gets_enough_places_to_cover_the_lead_at_its_delay(delay_s, ahead, lead_s, places):
    assert host(delay_s=delay_s).places(ahead, lead_s) == places


def test_a_hand_out_older_than_the_in_flight_timeout_no_longer_holds_the_host():
    h = host().with_handout(["a"], NOW - 601)
    assert h.eligible_at_s(600.0, NOW, ahead=1) == 0.0
    assert h.live_in_flight(600.0, NOW) == {}
