"""squall.policy.takeover: when a new owner hands out again the hand-outs an earlier owner left in flight."""

from __future__ import annotations

import pytest

from squall.policy.takeover import Watch, own_handout, read_through, release_at_s, results_applied, stranded

SINCE = 1000.0  # this worker owns the partition since then (Unix s)


def never(url: str, at_s: float) -> bool:
    return False


def done() -> bool:  # every status message of the partition up to the release time is applied
    return True


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
    assert stranded({"u": SINCE - 3}, SINCE, 1.0, 5.0, SINCE + 4.99, never, results_in=done) is None


def test_after_the_release_time_the_earlier_owners_hand_outs_not_received_are_released_sorted():
    in_flight = {"b": SINCE - 3, "a": SINCE - 2, "mine": SINCE + 1}
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 5.0, never, results_in=done) == ["a", "b"]


def test_a_hand_out_whose_fetch_message_this_worker_received_is_left_to_report_itself():
    in_flight = {"a": SINCE - 2, "b": SINCE - 3}
    seen = {("a", SINCE - 2)}
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 6, lambda u, t: (u, t) in seen, results_in=done) == ["b"]


def test_a_received_copy_of_another_hand_out_of_the_same_url_does_not_count():
    # the fetcher got the URL's hand-out of another time: the one recorded in flight is still stranded
    assert stranded({"a": SINCE - 2}, SINCE, 1.0, 5.0, SINCE + 6, lambda u, t: t == SINCE - 9, results_in=done) == ["a"]


def test_with_nothing_of_an_earlier_owner_the_answer_is_an_empty_list_at_once():
    assert stranded({"mine": SINCE + 1}, SINCE, 1.0, 5.0, SINCE, never, results_in=done) == []
    assert stranded({"u": SINCE - 1}, SINCE, 1.0, 0.0, SINCE + 100, never, results_in=done) == []


def test_a_partition_is_kept_only_through_consecutive_generations():
    from squall.policy.takeover import assigned_since

    before = {0: 100.0, 1: 100.0}
    assert assigned_since(before, [0, 1, 2], 200.0, 7, 8) == {0: 100.0, 1: 100.0, 2: 200.0}
    # cut off from the broker: generations 8 and 9 went on without this worker, which gets 0 and 1 back in 10
    assert assigned_since(before, [0, 1], 200.0, 7, 10) == {0: 200.0, 1: 200.0}
    assert assigned_since(before, [0, 1], 200.0, None, 3) == {0: 200.0, 1: 200.0}  # the first rebalance
    assert assigned_since(before, [0], 200.0, 7, 7) == {0: 200.0}  # the same generation again: taken as new


def test_an_earlier_owners_result_still_unapplied_at_the_release_time_holds_the_release():
    asked: list[float] = []

    def pending() -> bool:
        asked.append(1.0)
        return False

    in_flight = {"a": SINCE - 2}
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 4.0, never, results_in=pending) is None
    assert asked == []  # not asked before the release time: the end offset is noted when it comes
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 9.0, never, results_in=pending) is None
    assert asked == [1.0]
    assert stranded(in_flight, SINCE, 1.0, 5.0, SINCE + 9.0, never, results_in=done) == ["a"]


@pytest.mark.parametrize(("end", "committed", "expected"), [
    (None, 10, False),  # the end offset is not known yet
    (0, None, True),    # an empty partition
    (12, None, False),  # messages, none committed
    (12, 11, False),    # one still to apply (or dropped below a later one that was applied)
    (12, 12, True),     # committed up to the end
    (12, 15, True),     # past it (results sent after the end was noted)
])
def test_results_are_applied_once_the_committed_offset_reaches_the_end(end, committed, expected):
    assert results_applied(end, committed) is expected


# ---------------------------------------------------------------- this worker's own hand-outs

AT = 2000.0  # the watched hand-out's time (Unix s)


def _unasked() -> bool:
    raise AssertionError("asked although the earlier facts settle it")


@pytest.mark.parametrize(("received", "in_flight_at_s", "read_past", "expected"), [
    (True, AT, True, Watch.DONE),      # the fetcher has it: it reports itself
    (False, None, True, Watch.DONE),   # its result freed it
    (False, AT + 3, True, Watch.DONE),  # a newer hand-out of the same URL replaced it
    (False, AT, False, Watch.WAIT),    # the fetcher has not read that far yet
    (False, AT, True, Watch.LOST),     # read past, never received, still in flight: lost on its way
])
def test_an_own_hand_out_is_lost_only_when_still_in_flight_unreceived_and_read_past(
    received, in_flight_at_s, read_past, expected
):
    assert own_handout(AT, received, lambda: in_flight_at_s, lambda: read_past) is expected


def test_a_received_hand_out_asks_neither_the_host_record_nor_the_consumer():
    assert own_handout(AT, True, _unasked, _unasked) is Watch.DONE


@pytest.mark.parametrize(("end", "read", "expected"), [
    (None, 5, False),  # the end offset is not known yet
    (0, None, True),   # an empty partition: nothing to read
    (6, None, False),  # nothing read since the assignment, six messages there
    (6, 4, False),     # offset 5 not read yet
    (6, 5, True),      # the last message read
    (6, 9, True),      # read beyond an older view of the end
])
def test_read_through_compares_the_last_offset_read_with_the_end_offset(end, read, expected):
    assert read_through(end, read) is expected
