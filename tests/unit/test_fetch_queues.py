"""Tests of squall.fetch_queues (seed 004, StormCrawler FetchItemQueues): fake clock, fixed seeds."""

from __future__ import annotations

import random

import pytest

from squall.fetch_queues import FetchQueues


def make(server_delay_s=1.0, min_delay_s=0.0, threads_per_queue=1, max_queue_size=-1) -> FetchQueues:
    return FetchQueues(server_delay_s, min_delay_s, threads_per_queue, max_queue_size)


# ---------------------------------------------------------------- politeness


def test_a_new_queue_is_ready_at_once():
    q = make()
    assert q.add("a", "a1", now_s=10.0)
    assert q.next_ready_at_s() == 10.0
    assert q.take(10.0) == ("a", "a1")


def test_the_next_fetch_of_a_queue_waits_the_server_delay_after_the_end_of_the_last():
    q = make(server_delay_s=2.0)
    q.add("a", "a1", 0.0)
    q.add("a", "a2", 0.0)
    assert q.take(0.0) == ("a", "a1")
    assert q.take(0.5) is None  # one thread per queue: a1 still in flight
    q.finish("a", now_s=3.0)  # the fetch took 3 s
    assert q.next_ready_at_s() == 5.0
    assert q.take(4.999) is None
    assert q.take(5.0) == ("a", "a2")


def test_several_threads_per_queue_use_the_min_delay_and_never_exceed_the_thread_count():
    q = make(server_delay_s=5.0, min_delay_s=0.5, threads_per_queue=2)
    for i in range(4):
        q.add("a", i, 0.0)
    assert q.take(0.0) == ("a", 0)
    assert q.take(0.0) == ("a", 1)
    assert q.take(0.0) is None
    assert q.in_flight("a") == 2
    q.finish("a", 1.0)
    assert q.take(1.4) is None
    assert q.take(1.5) == ("a", 2)


def test_a_finished_queue_with_nothing_left_is_reaped():
    q = make()
    q.add("a", "a1", 0.0)
    q.take(0.0)
    assert len(q) == 1  # in flight keeps it
    q.finish("a", 0.1)
    assert len(q) == 0
    assert "a" not in q
    assert q.next_ready_at_s() is None


def test_a_reaped_queue_keeps_its_delay_for_the_next_url_of_the_same_key():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    q.take(0.0)
    q.finish("a", 0.2)
    q.add("a", "a2", 0.3)  # new queue object, same host
    assert q.take(0.3) is None
    assert q.take(1.2) == ("a", "a2")


def test_the_cooling_memory_is_forgotten_once_the_delay_has_passed():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    q.take(0.0)
    q.finish("a", 0.0)
    q.add("b", "b1", 5.0)  # any call after the delay prunes it
    assert q._cooling == {}
    q.add("a", "a2", 5.0)
    assert {q.take(5.0), q.take(5.0)} == {("b", "b1"), ("a", "a2")}


def test_a_robots_crawl_delay_overrides_the_server_delay():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0, crawl_delay_s=10.0)
    q.add("a", "a2", 0.0)
    q.take(0.0)
    q.finish("a", 1.0)
    assert q.next_ready_at_s() == 11.0


def test_a_longer_crawl_delay_set_while_waiting_pushes_back_the_next_fetch():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    q.add("a", "a2", 0.0)
    q.take(0.0)
    q.finish("a", 1.0)
    assert q.next_ready_at_s() == 2.0
    assert q.set_crawl_delay("a", 5.0)
    assert q.next_ready_at_s() == 6.0
    assert q.take(2.0) is None
    assert q.take(6.0) == ("a", "a2")


def test_clearing_the_crawl_delay_restores_the_server_delay_from_the_next_finish():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0, crawl_delay_s=5.0)
    q.add("a", "a2", 0.0)
    q.set_crawl_delay("a", None)
    q.take(0.0)
    q.finish("a", 1.0)
    assert q.next_ready_at_s() == 2.0


def test_set_crawl_delay_on_an_unknown_queue_is_a_no_op():
    q = make()
    assert q.set_crawl_delay("nope", 3.0) is False
    assert len(q) == 0


def test_a_delay_override_at_finish_only_lengthens_the_wait():
    q = make(server_delay_s=2.0)
    for i in range(3):
        q.add("a", i, 0.0)
    q.take(0.0)
    q.finish("a", 1.0, delay_override_s=30.0)  # Retry-After / back-off
    assert q.next_ready_at_s() == 31.0
    q.take(31.0)
    q.finish("a", 32.0, delay_override_s=0.5)  # shorter than the delay: ignored
    assert q.next_ready_at_s() == 34.0


def test_block_until_holds_a_queue_and_an_earlier_block_does_not_shorten_it():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    assert q.block_until("a", 20.0)
    assert q.block_until("a", 5.0)  # earlier: ignored
    assert q.next_ready_at_s() == 20.0
    assert q.take(19.9) is None
    assert q.take(20.0) == ("a", "a1")
    assert q.block_until("unknown", 99.0) is False


def test_a_block_survives_reaping():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    q.take(0.0)
    q.block_until("a", 60.0)
    q.finish("a", 1.0)
    assert len(q) == 0
    q.add("a", "a2", 2.0)
    assert q.take(30.0) is None
    assert q.take(60.0) == ("a", "a2")


# ---------------------------------------------------------------- ordering


def test_queues_are_served_in_next_fetch_time_order_not_insertion_order():
    q = make(server_delay_s=1.0)
    for key in ("a", "b", "c"):
        q.add(key, key + "1", 0.0)
        q.add(key, key + "2", 0.0)
    taken = [q.take(0.0) for _ in range(3)]
    assert taken == [("a", "a1"), ("b", "b1"), ("c", "c1")]
    q.finish("c", 0.1)
    q.finish("a", 0.2)
    q.finish("b", 0.3)
    assert q.take(2.0) == ("c", "c2")
    assert q.take(2.0) == ("a", "a2")
    assert q.take(2.0) == ("b", "b2")


def test_a_newly_seen_queue_is_served_before_queues_still_waiting_on_their_delay():
    q = make(server_delay_s=1.0)
    q.add("a", "a1", 0.0)
    q.add("a", "a2", 0.0)
    q.take(0.0)
    q.finish("a", 0.0)
    q.add("new", "n1", 0.5)
    assert q.take(0.5) == ("new", "n1")
    assert q.take(0.5) is None


def test_queues_due_at_the_same_time_are_served_in_the_order_they_became_due():
    q = make()
    for key in ("z", "y", "x"):
        q.add(key, 1, 0.0)
    assert [q.take(0.0)[0] for _ in range(3)] == ["z", "y", "x"]


# ---------------------------------------------------------------- sizes and back-pressure


def test_a_full_queue_refuses_without_taking_the_item():
    q = make(max_queue_size=2)
    assert q.add("a", 1, 0.0)
    assert q.add("a", 2, 0.0)
    assert q.add("a", 3, 0.0) is False
    assert q.queue_size("a") == 2
    assert q.pending_total() == 2
    assert q.add("b", 1, 0.0)  # other queues unaffected
    q.take(0.0)  # a1 now in flight: room for one more pending
    assert q.add("a", 3, 0.0)
    assert q.queue_size("a") == 2


def test_a_queue_size_of_zero_accepts_nothing_and_creates_no_queue():
    q = make(max_queue_size=0)
    assert q.add("a", 1, 0.0) is False
    assert len(q) == 0


def test_sizes_count_queues_and_pending_items():
    q = make()
    q.add("a", 1, 0.0)
    q.add("a", 2, 0.0)
    q.add("b", 1, 0.0)
    assert (len(q), q.pending_total(), q.queue_size("a"), q.queue_size("zz")) == (2, 3, 2, 0)
    q.take(0.0)
    assert q.pending_total() == 2


def test_drop_keys_removes_whole_queues_and_returns_their_items():
    q = make()
    for key in ("p0-a", "p1-b", "p0-c"):
        q.add(key, key + "/1", 0.0)
        q.add(key, key + "/2", 0.0)
    assert q.take(0.0) == ("p0-a", "p0-a/1")
    dropped = q.drop_keys(lambda k: k.startswith("p0-"))
    assert dropped == [("p0-a", "p0-a/2"), ("p0-c", "p0-c/1"), ("p0-c", "p0-c/2")]
    assert len(q) == 1 and q.pending_total() == 2
    assert q.finish("p0-a", 0.5) is False  # the in-flight fetch ends after the revoke
    assert [q.take(0.0), q.take(0.0)] == [("p1-b", "p1-b/1"), None]


def test_finish_without_a_fetch_in_flight_is_an_error():
    q = make()
    q.add("a", 1, 0.0)
    with pytest.raises(ValueError):
        q.finish("a", 0.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"server_delay_s": -1.0},
        {"min_delay_s": float("nan")},
        {"threads_per_queue": 0},
        {"max_queue_size": -2},
    ],
)
def test_invalid_construction_is_refused(kwargs):
    with pytest.raises(ValueError):
        make(**kwargs)


def test_from_settings_reads_the_fetcher_keys():
    q = FetchQueues.from_settings(
        {"fetcher.server.delay": 1.5, "fetcher.server.min.delay": 0.0, "fetcher.threads.per.queue": 1, "fetcher.max.queue.size": 7}
    )
    assert (q.server_delay_s, q.threads_per_queue, q.max_queue_size) == (1.5, 1, 7)


# ---------------------------------------------------------------- invariants under a random interleaving


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("threads_per_queue", [1, 3])
def test_random_interleaving_loses_nothing_duplicates_nothing_and_stays_polite(seed, threads_per_queue):
    rng = random.Random(seed)
    server_delay_s, min_delay_s, max_queue_size = 1.0, 0.25, 5
    q = make(server_delay_s, min_delay_s, threads_per_queue, max_queue_size)
    delay_s = server_delay_s if threads_per_queue == 1 else min_delay_s
    robots_delay = {"h3": 2.5}
    keys = [f"h{i}" for i in range(6)]
    now_s = 0.0
    next_item = 0
    backlog: list[tuple[str, int]] = []  # refused items the caller keeps (back-pressure)
    added: set[int] = set()
    taken: list[int] = []
    in_flight: list[tuple[str, int]] = []
    last_finish_s: dict[str, float] = {}
    earliest_s: dict[str, float] = {}  # key -> earliest allowed start implied by finishes/blocks
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
            size_before = q.queue_size(key)
            if q.add(key, item, now_s, crawl_delay_s=robots_delay.get(key)):
                added.add(item)
            else:
                assert size_before == max_queue_size
                backlog.append((key, item))
            assert q.queue_size(key) <= max_queue_size
        elif op < 0.75:
            got = q.take(now_s)
            if got is not None:
                key, item = got
                assert now_s >= earliest_s.get(key, -1.0), "a take inside the delay"
                taken.append(item)
                in_flight.append(got)
                count[key] += 1
                assert q.in_flight(key) == count[key] <= threads_per_queue
            else:
                ready = q.next_ready_at_s()
                assert ready is None or ready > now_s
        elif op < 0.97 and in_flight:
            key, _item = in_flight.pop(rng.randrange(len(in_flight)))
            override = rng.choice([None, None, None, 3.0])
            q.finish(key, now_s, delay_override_s=override)
            count[key] -= 1
            wait_s = max(robots_delay.get(key, delay_s), override or 0.0)
            earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + wait_s)
            last_finish_s[key] = now_s
        elif op >= 0.97:
            key = rng.choice(keys)
            if key in q:
                q.block_until(key, now_s + 2.0)
                earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + 2.0)
        assert len(q) == sum(1 for k in keys if q.queue_size(k) or q.in_flight(k))
        assert q.pending_total() == len(added) - len(taken)
    # Drain: finish everything, then take until empty.
    while in_flight or q.pending_total():
        now_s += 0.5
        while in_flight:
            key, _ = in_flight.pop()
            q.finish(key, now_s)
            earliest_s[key] = max(earliest_s.get(key, -1.0), now_s + robots_delay.get(key, delay_s))
        while (got := q.take(now_s)) is not None:
            assert now_s >= earliest_s.get(got[0], -1.0)
            taken.append(got[1])
            in_flight.append(got)
    assert len(taken) == len(set(taken)), "an item was handed out twice"
    assert set(taken) == added, "an item was lost"
    assert len(q) == 0 and q.next_ready_at_s() is None


def test_one_thread_per_queue_takes_are_never_closer_than_finish_plus_delay():
    rng = random.Random(42)
    q = make(server_delay_s=1.0)
    for i in range(200):
        q.add(f"h{i % 7}", i, 0.0)
    now_s, last_finish = 0.0, {}
    active: dict[str, int] = {}
    while q.pending_total() or active:
        now_s += rng.uniform(0.0, 0.2)
        got = q.take(now_s)
        if got:
            key = got[0]
            assert key not in active
            assert now_s >= last_finish.get(key, -9.0) + 1.0
            active[key] = got[1]
        if active and rng.random() < 0.5:
            key = rng.choice(sorted(active))
            del active[key]
            q.finish(key, now_s)
            last_finish[key] = now_s


def test_take_stays_cheap_with_many_queues_waiting():
    """Structural check of O(log n): a take only inspects due tickets, not waiting queues."""
    q = make(server_delay_s=100.0)
    for i in range(5000):
        q.add(f"h{i}", 0, 0.0)
        q.add(f"h{i}", 1, 0.0)
    for _ in range(5000):
        key, _ = q.take(0.0)
        q.finish(key, 0.0)
    assert q.take(50.0) is None
    assert len(q._tickets) == 5000  # one valid ticket per waiting queue, no stale backlog
