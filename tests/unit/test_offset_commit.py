"""squall.worker.offset_commit: the committed offset never passes an offset still being processed."""

from __future__ import annotations

import random

import pytest

from squall.worker.offset_commit import StuckWatch, committable_offset

CASES = [
    # (acked, committed, first_unacked, expected offset, covered)
    ([], 10, None, None, 0),
    ([10, 11, 12], 10, None, 13, 3),                 # in order
    ([10, 11, 12], 10, 13, 13, 3),
    ([10, 11, 12, 15, 16], 10, 13, 13, 3),            # a gap in the middle: commit the first run
    ([11, 12], 10, 10, None, 0),                      # one unacked at the head: Faust 0.15.3 commits 13
    ([12, 13], 10, 10, None, 0),                      # two at the head: Faust's own check
    ([3, 4], None, 0, None, 0),                       # nothing committed yet: Faust commits 5 over 0..2
    ([0, 1, 2, 4], None, 3, 3, 3),
    ([5, 6, 7, 8], 5, 7, 7, 2),                       # an unacked offset inside the run (gap bookkeeping)
    ([11, 12], 10, None, None, 0),                    # offset 10 never acknowledged nor tracked: not skipped
]


@pytest.mark.parametrize(("acked", "committed", "first_unacked", "offset", "covered"), CASES)
def test_the_commit_stops_at_the_first_offset_still_in_processing(acked, committed, first_unacked, offset, covered):
    assert committable_offset(acked, committed, first_unacked) == (offset, covered)


def test_out_of_order_acks_never_commit_a_message_that_was_not_acknowledged():
    rng = random.Random(20261201)
    for _ in range(300):
        n = rng.randint(1, 40)
        start = rng.choice([0, 5, 100])
        order = list(range(start, start + n))
        rng.shuffle(order)
        done: set[int] = set()
        acked: list[int] = []
        committed: int | None = start or None
        for offset in order:
            done.add(offset)
            acked = sorted(set(acked) | {offset})
            pending = [o for o in range(start, start + n) if o not in done]
            result, covered = committable_offset(acked, committed, min(pending) if pending else None)
            if result is not None:
                assert all(o in done for o in range(start, result))
                del acked[:covered]
                committed = result
        assert committed == start + n or (committed is None and start + n == 0)


# ---------------------------------------------------------------- StuckWatch


def test_a_partition_whose_messages_stop_coming_is_stuck_after_the_wait_and_then_re_armed():
    watch = StuckWatch(30.0)
    seen = [watch.observe("p0", committed=18, end=29, busy=False, now_s=t) for t in (0.0, 10.0, 29.9, 30.0, 31.0, 60.0)]
    assert seen == [False, False, False, True, False, True]


@pytest.mark.parametrize("committed, end, busy", [
    (29, 29, False),    # everything committed
    (18, 29, True),     # a message of it is in processing (a slow fetch, a queue wait)
    (None, 29, False),  # nothing known yet
    (18, None, False),
])
def test_a_fed_busy_or_caught_up_partition_is_never_stuck(committed, end, busy):
    watch = StuckWatch(30.0)
    assert not any(watch.observe("p0", committed=committed, end=end, busy=busy, now_s=t) for t in range(0, 200, 10))


def test_a_partition_whose_commit_moves_is_not_stuck_however_long_its_backlog_stays():
    watch = StuckWatch(30.0)
    assert not any(watch.observe("p0", committed=10 + t, end=100 + t, busy=False, now_s=float(t)) for t in range(0, 200, 5))


def test_the_watch_is_off_at_zero_and_forgets_revoked_partitions():
    assert not any(StuckWatch(0.0).observe("p0", committed=1, end=9, busy=False, now_s=t) for t in range(0, 500, 10))
    watch = StuckWatch(30.0)
    watch.observe("p0", committed=1, end=9, busy=False, now_s=0.0)
    watch.forget(["p1"])
    assert not watch.observe("p0", committed=1, end=9, busy=False, now_s=40.0)  # its clock started over
    assert watch.observe("p0", committed=1, end=9, busy=False, now_s=70.0)
