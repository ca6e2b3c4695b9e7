"""squall.policy.takeover: when a new owner hands out again the hand-outs an earlier owner left in flight."""

from __future__ import annotations

import pytest

from squall.policy.takeover import release_at_s, stranded

SINCE = 1000.0  # this worker owns the partition since then (Unix s)


def never(url: str, at_s: float) -> bool:
    return False


@pytest.mark.parametrize(("in_flight", "delay_s", "grace_s", "expected"), [
    ({}, 1.0, 5.0, None),                                   # nothing in flight
    ({"u": SINCE + 0.1}, 1.0, 5.0, None),                   # only this owner's own hand-outs
    ({"u": SINCE}, 1.0, 5.0, None),                         # handed out at the take-over instant: ours
    ({"u": SINCE - 3, "v": SINCE + 1}, 1.0, 5.0, SINCE + 5.0),  # an earlier owner's: after the grace
    ({"u": SINCE - 3}, 12.0, 5.0, SINCE + 12.0),            # never sooner than one delay after the take-over
    ({"u": SINCE - 3}, 1.0, 0.0, None),                     # grace 0: the rule is off
])
def test_the_release_time_is_the_grace_or_one_delay_after_the_takeover(in_flight, delay_s, grace_s, expected):
    assert release_at_s(in_flight, SINCE, delay_s, grace_s) == expected


def test_nothing_is_released_before_the_release_time():
    assert stranded({"u": SINCE - 3}, SINCE, 1.0, 5.0, SINCE + 4.99, never) is None


def test_after_the_release_time_the_earlier_owners_hand_outs_not_received_are_released_sorted():
    in_flight = {"b": SINCE - 3, "a": SINCE - 2, "mine": SINCE + 1}
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 5.0, never) == ["a", "b"]


def test_a_hand_out_whose_fetch_message_this_worker_received_is_left_to_report_itself():
    in_flight = {"a": SINCE - 2, "b": SINCE - 3}
    seen = {("a", SINCE - 2)}
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 6, lambda u, t: (u, t) in seen) == ["b"]


def test_a_received_copy_of_another_hand_out_of_the_same_url_does_not_count():
    # the fetcher got the URL's hand-out of another time: the one recorded in flight is still stranded
    assert stranded({"a": SINCE - 2}, SINCE, 1.0, 5.0, SINCE + 6, lambda u, t: t == SINCE - 9) == ["a"]


def test_with_nothing_of_an_earlier_owner_the_answer_is_an_empty_list_at_once():
    assert stranded({"mine": SINCE + 1}, SINCE, 1.0, 5.0, SINCE, never) == []
    assert stranded({"u": SINCE - 1}, SINCE, 1.0, 0.0, SINCE + 100, never) == []


def test_a_partition_is_kept_only_through_consecutive_generations():
    from squall.policy.takeover import assigned_since

    before = {0: 100.0, 1: 100.0}
    assert assigned_since(before, [0, 1, 2], 200.0, 7, 8) == {0: 100.0, 1: 100.0, 2: 200.0}
    # cut off from the broker: generations 8 and 9 went on without this worker, which gets 0 and 1 back in 10
    assert assigned_since(before, [0, 1], 200.0, 7, 10) == {0: 200.0, 1: 200.0}
    assert assigned_since(before, [0, 1], 200.0, None, 3) == {0: 200.0, 1: 200.0}  # the first rebalance
    assert assigned_since(before, [0], 200.0, 7, 7) == {0: 200.0}  # the same generation again: taken as new
