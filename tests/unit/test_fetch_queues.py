"""Tests of squall.policy.fetch_queues (StormCrawler FetchItemQueues, apache/stormcrawler PR #2129): fake clock, fixed seeds.

The queues order; the pace model (squall.policy.pace) says when. These tests pass
the start times in as the fetcher does.
"""

from __future__ import annotations

import random

import pytest

from squall.policy.fetch_queues import PRECISE_DELAY_S, PRECISE_WAKE_S, FetchQueues, wake_after_s
from tests.unit.settings_helper import from_settings


def make(threads_per_queue=1, max_queue_size=-1) -> FetchQueues:
    return FetchQueues(threads_per_queue, max_queue_size)


# ---------------------------------------------------------------- timing comes from the caller


def test_a_new_queue_is_ready_at_the_time_it_is_given():
    q = make()
    assert q.add("a", "a1", ready_at_s=10.0)
    assert q.next_ready_at_s() == 10.0
    assert q.take(9.999) is None
    assert q.take(10.0) == ("a", "a1")


def test_the_next_ready_queue_is_named_with_its_time():
    q = make()
    assert q.next_ready() is None
    q.add("a", "a1", ready_at_s=10.0)
    q.add("b", "b1", ready_at_s=7.0)
    assert q.next_ready() == (7.0, "b")
    assert q.take(7.0) == ("b", "b1")
    assert q.next_ready() == (10.0, "a")


@pytest.mark.parametrize(
    ("ready_at_s", "delay_s", "wait_s"),
    [
        (10.5, 1.0, 0.5),  # a long delay: the timer alone, to the due time
        (10.5, PRECISE_DELAY_S, 0.5),
        (10.5, None, 0.5),  # no pace known yet: the timer alone
        (10.5, 0.05, 0.5 - PRECISE_WAKE_S),  # a short delay: the timer ends early
        (10.001, 0.05, 0.0),  # then turns of the loop until due
        (9.0, 0.05, 0.0),
        (9.0, 1.0, 0.0),  # already due
    ],
)
def test_the_dispatcher_wakes_early_only_for_short_delays(ready_at_s, delay_s, wait_s):
    assert wake_after_s(ready_at_s, 10.0, delay_s) == pytest.approx(wait_s)


def test_the_next_fetch_waits_for_the_time_given_at_finish():
    q = make()
    q.add("a", "a1", 0.0)
    q.add("a", "a2", 0.0)
    assert q.take(0.0) == ("a", "a1")
    assert q.take(0.5) is None  # one thread per queue: a1 still in flight
    q.finish("a", ready_at_s=5.0)
    assert q.next_ready_at_s() == 5.0
    assert q.take(4.999) is None
    assert q.take(5.0) == ("a", "a2")


def test_finish_sets_the_time_even_when_it_is_earlier_than_before():
    """The pace model is authoritative at finish (a success may end a back-off)."""
    q = make()
    q.add("a", 1, 100.0)
    q.add("a", 2, 100.0)
    q.take(100.0)
    q.finish("a", ready_at_s=101.0)
    assert q.next_ready_at_s() == 101.0


def test_adding_to_an_existing_queue_keeps_the_later_time():
    q = make()
    q.add("a", 1, 5.0)
    q.add("a", 2, 3.0)
    assert q.next_ready_at_s() == 5.0
    q.add("a", 3, 8.0)
    assert q.next_ready_at_s() == 8.0
    assert q.take(7.9) is None


def test_set_ready_at_pushes_back_waiting_items_and_never_pulls_them_forward():
    q = make()
    q.add("a", 1, 0.0)
    q.add("a", 2, 0.0)
    q.take(0.0)
    q.finish("a", 1.0)
    assert q.set_ready_at("a", 60.0)  # a Retry-After arrived
    assert q.take(59.0) is None
    assert q.set_ready_at("a", 10.0)  # an earlier time changes nothing
    assert q.next_ready_at_s() == 60.0
    assert q.take(60.0) == ("a", 2)


def test_set_ready_at_of_an_unknown_queue_is_a_no_op():
    assert make().set_ready_at("nope", 5.0) is False


def test_release_gives_the_turn_back_without_changing_the_time():
    q = make()
    q.add("a", 1, 2.0)
    q.add("a", 2, 2.0)
    assert q.take(2.0) == ("a", 1)
    assert q.release("a")
    assert q.take(2.0) == ("a", 2)


def test_several_threads_per_queue_never_exceed_the_thread_count():
    q = make(threads_per_queue=2)
    for i in range(4):
        q.add("a", i, 0.0)
    assert q.take(0.0) == ("a", 0)
    assert q.take(0.0) == ("a", 1)
    assert q.take(0.0) is None
    assert q.in_flight("a") == 2
    q.finish("a", 1.5)
    assert q.take(1.4) is None
    assert q.take(1.5) == ("a", 2)


def test_a_finished_queue_with_nothing_left_is_reaped():
    q = make()
    q.add("a", "a1", 0.0)
    q.take(0.0)
    assert len(q) == 1  # in flight keeps it
    q.finish("a", 1.0)
    assert len(q) == 0
    assert "a" not in q
    assert q.next_ready_at_s() is None
    assert q.ready_at_s("a") is None


# ---------------------------------------------------------------- ordering


def test_queues_are_served_in_next_fetch_time_order_not_insertion_order():
    q = make()
    q.add("late", 1, 5.0)
    q.add("early", 1, 1.0)
    q.add("mid", 1, 3.0)
    assert [q.take(10.0)[0] for _ in range(3)] == ["early", "mid", "late"]


def test_queues_due_at_the_same_time_are_served_in_the_order_they_became_due():
    q = make()
    for key in ("c", "a", "b"):
        q.add(key, 1, 0.0)
    assert [q.take(0.0)[0] for _ in range(3)] == ["c", "a", "b"]


# ---------------------------------------------------------------- sizes, draining, dropping


def test_a_full_queue_refuses_without_taking_the_item():
    q = make(max_queue_size=2)
    assert q.add("a", 1, 0.0) and q.add("a", 2, 0.0)
    assert not q.add("a", 3, 0.0)
    assert q.queue_size("a") == 2
    q.take(0.0)
    assert q.add("a", 3, 0.0)  # one pending left: room again


def test_a_queue_size_of_zero_accepts_nothing_and_creates_no_queue():
    q = make(max_queue_size=0)
    assert not q.add("a", 1, 0.0)
    assert len(q) == 0


def test_sizes_count_queues_and_pending_items():
    q = make()
    q.add("a", 1, 0.0)
    q.add("a", 2, 0.0)
    q.add("b", 1, 0.0)
    q.take(0.0)
    assert (len(q), q.pending_total(), q.queue_size("a"), q.in_flight("a")) == (2, 2, 1, 1)
    assert sorted(q.keys()) == ["a", "b"]


def test_drain_returns_pending_items_and_keeps_the_one_in_flight():
    q = make()
    for i in range(3):
        q.add("a", i, 0.0)
    q.take(0.0)
    assert q.drain("a") == [1, 2]
    assert q.pending_total() == 0 and q.in_flight("a") == 1
    assert q.take(100.0) is None
    q.finish("a", 1.0)
    assert len(q) == 0
    assert q.drain("nope") == []


def test_drop_keys_removes_whole_queues_and_returns_their_items():
    q = make()
    q.add("a", 1, 0.0)
    q.add("a", 2, 0.0)
    q.add("b", 1, 0.0)
    q.take(0.0)  # a:1 in flight
    assert q.drop_keys(lambda k: k == "a") == [("a", 2)]
    assert "a" not in q and q.pending_total() == 1
    assert q.finish("a", 5.0) is False  # its in-flight fetch ends after the drop: ignored
    assert q.take(0.0) == ("b", 1)


def test_finish_or_release_without_a_fetch_in_flight_is_an_error():
    q = make()
    q.add("a", 1, 0.0)
    with pytest.raises(ValueError):
        q.finish("a", 1.0)
    with pytest.raises(ValueError):
        q.release("a")


@pytest.mark.parametrize("kwargs", [{"threads_per_queue": 0}, {"max_queue_size": -2}])
def test_invalid_construction_is_refused(kwargs):
    with pytest.raises(ValueError):
        FetchQueues(**{"threads_per_queue": 1, "max_queue_size": -1, **kwargs})


def test_a_time_that_is_not_a_number_is_refused():
    with pytest.raises(ValueError):
        make().add("a", 1, float("nan"))


def test_from_settings_reads_the_fetcher_keys():
    q = from_settings(FetchQueues, {"fetcher.threads.per.queue": 1, "fetcher.max.queue.size": 7})
    assert (q.threads_per_queue, q.max_queue_size) == (1, 7)


# ---------------------------------------------------------------- invariants under a random interleaving


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("threads_per_queue", [1, 3])
def test_random_interleaving_loses_nothing_duplicates_nothing_and_starts_nothing_early(seed, threads_per_queue):
    rng = random.Random(seed)
    q = make(threads_per_queue, max_queue_size=5)
    keys = [f"h{i}" for i in range(6)]
    now_s = 0.0
    next_item = 0
    backlog: list[tuple[str, int]] = []  # refused items the caller keeps (back-pressure)
    added: set[int] = set()
    taken: list[int] = []
    in_flight: list[tuple[str, int]] = []
    earliest_s: dict[str, float] = {}  # the caller's pace: key -> earliest allowed start
    count = {k: 0 for k in keys}
    for _ in range(4000):
        now_s += rng.choice([0.0, 0.01, 0.1, 0.3])
        op = rng.random()
        if op < 0.4:
            if backlog and rng.random() < 0.5:
                key, item = backlog.pop(0)
            else:
                key, item = rng.choice(keys), next_item
                next_item += 1
            if q.add(key, item, earliest_s.get(key, now_s)):
                added.add(item)
            else:
                backlog.append((key, item))
            assert q.queue_size(key) <= 5
        elif op < 0.75:
            got = q.take(now_s)
            if got is not None:
                key, item = got
                assert now_s >= earliest_s.get(key, -1.0), "a take before the pace allows"
                taken.append(item)
                in_flight.append(got)
                count[key] += 1
                assert q.in_flight(key) == count[key] <= threads_per_queue
            else:
                ready = q.next_ready_at_s()
                assert ready is None or ready > now_s
        elif op < 0.97 and in_flight:
            key, _item = in_flight.pop(rng.randrange(len(in_flight)))
            earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + rng.choice([0.25, 1.0, 3.0]))
            q.finish(key, earliest_s[key])
            count[key] -= 1
        elif op >= 0.97:
            key = rng.choice(keys)
            if key in q:
                earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + 2.0)
                q.set_ready_at(key, earliest_s[key])
        assert len(q) == sum(1 for k in keys if q.queue_size(k) or q.in_flight(k))
        assert q.pending_total() == len(added) - len(taken)
    while in_flight or q.pending_total():
        now_s += 0.5
        while in_flight:
            key, _ = in_flight.pop()
            earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + 1.0)
            q.finish(key, earliest_s[key])
        while (got := q.take(now_s)) is not None:
            assert now_s >= earliest_s.get(got[0], -1.0)
            taken.append(got[1])
            in_flight.append(got)
    assert len(taken) == len(set(taken)), "an item was handed out twice"
    assert set(taken) == added, "an item was lost"
    assert len(q) == 0 and q.next_ready_at_s() is None


def test_take_stays_cheap_with_many_queues_waiting():
    """Structural check of O(log n): a take only inspects due tickets, not waiting queues."""
    q = make()
    for i in range(5000):
        q.add(f"h{i}", 0, 0.0)
        q.add(f"h{i}", 1, 0.0)
    for _ in range(5000):
        key, _ = q.take(0.0)
        q.finish(key, 100.0)
    assert q.take(50.0) is None
    assert len(q._tickets) == 5000  # one valid ticket per waiting queue, no stale backlog
