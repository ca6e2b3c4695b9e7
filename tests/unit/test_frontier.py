"""Tests of squall.policy.frontier (host records and the due index of the spout): fake clock, fixed seeds."""

from __future__ import annotations

import json
import random

import pytest

from squall.policy.due_index import DueIndex, DueIndexSizes
from squall.policy.frontier import INF, HostRecord
from squall.policy.reasons import Reason

NOW = 1_714_564_800.0  # the fake clock
TIMEOUT = 600.0        # frontier.inflight.timeout.secs in these tests


# ---------------------------------------------------------------- HostRecord.eligible_at_s


@pytest.mark.parametrize(
    ("next_fetch_at_s", "blocked_until_s", "expected"),
    [
        (0.0, 0.0, 0.0),
        (NOW + 5, 0.0, NOW + 5),
        (NOW + 5, NOW + 60, NOW + 60),   # a back-off block outlasts the pace
        (NOW + 60, NOW + 5, NOW + 60),
        (NOW - 100, NOW - 50, NOW - 50),  # in the past: eligible now
    ],
)
def test_an_idle_host_is_eligible_at_the_later_of_its_next_fetch_and_its_block(next_fetch_at_s, blocked_until_s,
                                                                              expected):
    host = HostRecord(key="h", next_fetch_at_s=next_fetch_at_s, backoff={"attempts": 0, "blocked_until_s": blocked_until_s})
    assert host.eligible_at_s(TIMEOUT, NOW) == expected


def test_a_url_in_flight_holds_the_host_until_its_timeout():
    host = HostRecord(key="h", next_fetch_at_s=NOW + 1).with_handout(["u"], NOW)
    for now in (NOW, NOW + 1, NOW + TIMEOUT - 1):
        assert host.eligible_at_s(TIMEOUT, now) == NOW + TIMEOUT
        assert host.eligible_at_s(TIMEOUT, now) > now


def test_a_url_in_flight_longer_than_the_timeout_no_longer_holds_the_host():
    host = HostRecord(key="h", next_fetch_at_s=NOW + 1, backoff={"attempts": 0, "blocked_until_s": NOW + 2}).with_handout(["u"], NOW)
    assert host.eligible_at_s(TIMEOUT, NOW + TIMEOUT) == NOW + 2
    assert host.eligible_at_s(TIMEOUT, NOW + 10 * TIMEOUT) == NOW + 2


def test_with_two_urls_in_flight_the_host_is_held_until_the_later_one_times_out():
    host = HostRecord(key="h").with_handout(["a"], NOW).with_handout(["b"], NOW + 100)
    eligible = host.eligible_at_s(TIMEOUT, NOW + 200)
    assert eligible == NOW + 100 + TIMEOUT
    assert host.eligible_at_s(TIMEOUT, eligible) <= eligible  # at the time it names, the host is eligible


def test_a_host_in_flight_is_never_eligible_before_its_block_ends():
    # a late result of an earlier URL blocked the host (Retry-After) while another URL is in flight
    host = HostRecord(key="h", backoff={"attempts": 0, "blocked_until_s": NOW + 3600}).with_handout(["b"], NOW)
    eligible = host.eligible_at_s(TIMEOUT, NOW + 10)
    assert eligible >= NOW + 3600
    assert host.eligible_at_s(TIMEOUT, eligible) <= eligible


# ---------------------------------------------------------------- HostRecord updates and serialisation


def test_a_rejection_is_counted_per_reason_in_a_new_record():
    host = HostRecord(key="h")
    once = host.with_rejection(Reason.SCOPE_HOST)
    twice = once.with_rejection(Reason.SCOPE_HOST).with_rejection(Reason.TRAP_DEPTH)
    assert host.rejected == {} and once.rejected == {"scope.host": 1}
    assert twice.rejected == {"scope.host": 2, "trap.depth": 1}


def test_a_hand_out_records_each_url_at_its_time_in_a_new_record():
    host = HostRecord(key="h", in_flight={"old": NOW - 5})
    new = host.with_handout(["a", "b"], NOW)
    assert new.in_flight == {"old": NOW - 5, "a": NOW, "b": NOW}
    assert host.in_flight == {"old": NOW - 5}


def test_a_host_record_survives_a_json_round_trip():
    host = HostRecord(key="example.com", seeded=True, next_fetch_at_s=NOW + 1.5,
                      in_flight={"https://example.com/a": NOW}, url_count=12, rejected={"trap.depth": 3},
                      seen_fetch_ids=["f1", "f2"], crawl_delay={"delay_s": 5, "max_observed_s": 5,
                                                                "max_observed_at_s": NOW, "last_signal_id": "f1"},
                      backoff={"attempts": 1, "blocked_until_s": NOW + 9, "backing_off_since_s": NOW})
    assert HostRecord.from_dict(json.loads(json.dumps(host.to_dict()))) == host


# ---------------------------------------------------------------- DueIndex: hosts


def test_hosts_are_handed_out_in_next_fetch_time_order():
    index = DueIndex()
    index.push("h1", "h1/a", NOW + 30)
    index.push("h2", "h2/a", NOW + 10)
    index.push("h3", "h3/a", NOW + 1)
    index.set_host_ready("h3", NOW + 20)  # due earliest, but its host is eligible later
    assert index.pop_due(NOW + 100, per_host=1) == [("h2", ["h2/a"]), ("h3", ["h3/a"]), ("h1", ["h1/a"])]


def test_max_hosts_limits_the_hosts_of_one_call_and_the_rest_wait_for_the_next():
    index = DueIndex()
    for i in range(3):
        index.push(f"h{i}", f"h{i}/a", NOW + i)
    assert index.pop_due(NOW + 10, per_host=1, max_hosts=2) == [("h0", ["h0/a"]), ("h1", ["h1/a"])]
    assert index.pop_due(NOW + 10, per_host=1, max_hosts=2) == [("h2", ["h2/a"])]


def test_a_host_gets_at_most_per_host_urls_at_a_time():
    index = DueIndex()
    for i in range(5):
        index.push("h", f"u{i}", NOW)
    [(key, urls)] = index.pop_due(NOW, per_host=2)
    assert key == "h" and len(urls) == 2
    assert len(index) == 3


def test_a_host_handed_out_is_not_eligible_again_until_set_host_ready():
    index = DueIndex()
    index.push("h", "u1", NOW)
    index.push("h", "u2", NOW)
    assert index.pop_due(NOW, per_host=1) == [("h", ["u1"])]
    index.push("h", "u3", NOW)  # new URLs do not make it eligible either
    assert index.pop_due(NOW + 10_000, per_host=1) == []
    assert index.next_due_s() is None
    index.set_host_ready("h", NOW + 5)
    assert index.next_due_s() == NOW + 5
    assert index.pop_due(NOW + 5, per_host=5) == [("h", ["u2", "u3"])]


def test_set_host_ready_in_the_future_delays_the_hand_out():
    index = DueIndex()
    index.set_host_ready("h", NOW + 50)
    index.push("h", "u", NOW + 10)
    assert index.next_due_s() == NOW + 50
    assert index.pop_due(NOW + 49.999, per_host=1) == []
    assert index.pop_due(NOW + 50, per_host=1) == [("h", ["u"])]


def test_set_host_ready_earlier_brings_the_hand_out_forward():
    index = DueIndex()
    index.set_host_ready("h", NOW + 50)
    index.push("h", "u", NOW)
    index.set_host_ready("h", NOW + 5)
    assert index.next_due_s() == NOW + 5
    assert index.pop_due(NOW + 5, per_host=1) == [("h", ["u"])]


def test_set_host_ready_inf_parks_the_host():
    index = DueIndex()
    index.push("h", "u", NOW)
    index.set_host_ready("h", INF)
    assert index.next_due_s() is None
    assert index.pop_due(NOW + 1e9, per_host=1) == []
    assert len(index) == 1


# ---------------------------------------------------------------- DueIndex: URLs within a host


def test_among_due_urls_higher_priority_comes_first_then_earlier_due():
    index = DueIndex()
    index.push("h", "low-early", NOW - 50, priority=0)
    index.push("h", "seed-late", NOW - 5, priority=1)
    index.push("h", "seed-early", NOW - 10, priority=1)
    index.push("h", "low-late", NOW - 1, priority=0)
    assert index.pop_due(NOW, per_host=4) == [("h", ["seed-early", "seed-late", "low-early", "low-late"])]


def test_a_high_priority_url_not_yet_due_does_not_block_a_due_one():
    index = DueIndex()
    index.push("h", "seed-later", NOW + 100, priority=9)
    index.push("h", "due", NOW - 1, priority=0)
    assert index.pop_due(NOW, per_host=1) == [("h", ["due"])]
    index.set_host_ready("h", NOW)
    assert index.pop_due(NOW + 99, per_host=1) == []
    assert index.next_due_s() == NOW + 100
    assert index.pop_due(NOW + 100, per_host=1) == [("h", ["seed-later"])]


@pytest.mark.parametrize(("first_due", "second_due"), [(NOW + 10, NOW + 50), (NOW + 50, NOW + 10)])
def test_pushing_a_known_url_replaces_its_due_time(first_due, second_due):
    index = DueIndex()
    index.push("h", "u", first_due)
    index.push("h", "u", second_due)
    assert len(index) == 1
    assert index.next_due_s() == second_due
    assert index.pop_due(second_due - 1, per_host=5) == []
    assert index.pop_due(second_due, per_host=5) == [("h", ["u"])]
    index.set_host_ready("h", 0.0)
    assert index.pop_due(NOW + 1e6, per_host=5) == []  # never handed out twice
    assert len(index) == 0


def test_pushing_a_url_already_due_to_a_later_time_takes_it_out_of_the_due_set():
    index = DueIndex()
    index.push("h", "u", NOW, priority=0)
    index.push("h", "v", NOW, priority=1)
    assert index.pop_due(NOW, per_host=1) == [("h", ["v"])]  # u is now among the host's due URLs
    index.push("h", "u", NOW + 100)
    index.set_host_ready("h", NOW)
    assert index.pop_due(NOW + 1, per_host=1) == []
    assert index.next_due_s() == NOW + 100
    assert index.pop_due(NOW + 100, per_host=1) == [("h", ["u"])]


def test_pushing_a_known_url_again_can_change_its_priority():
    index = DueIndex()
    index.push("h", "a", NOW, priority=0)
    index.push("h", "b", NOW, priority=1)
    index.push("h", "a", NOW, priority=5)
    assert index.pop_due(NOW, per_host=2) == [("h", ["a", "b"])]


def test_a_removed_url_is_never_handed_out():
    index = DueIndex()
    index.push("h", "a", NOW)
    index.push("h", "b", NOW + 1)
    index.remove("a")
    index.remove("never-pushed")  # unknown: no-op
    assert len(index) == 1
    assert index.next_due_s() == NOW + 1
    assert index.pop_due(NOW + 1, per_host=5) == [("h", ["b"])]


def test_removing_a_hosts_last_url_leaves_nothing_due():
    index = DueIndex()
    index.push("h", "a", NOW)
    index.remove("a")
    assert index.next_due_s() is None
    assert index.pop_due(NOW + 1e6, per_host=1) == []


def test_next_due_s_is_none_for_an_empty_index_and_the_earliest_eligible_time_otherwise():
    index = DueIndex()
    assert index.next_due_s() is None
    index.push("h1", "a", NOW + 30)
    index.push("h2", "b", NOW + 20)
    index.set_host_ready("h2", NOW + 40)
    assert index.next_due_s() == NOW + 30


def test_drop_forgets_everything_and_the_index_stays_usable():
    index = DueIndex()
    index.push("h1", "a", NOW)
    index.set_host_ready("h2", INF)
    index.push("h2", "b", NOW)
    index.drop()
    assert (len(index), index.hosts(), index.next_due_s()) == (0, 0, None)
    assert index.pop_due(NOW + 1e6, per_host=1) == []
    index.push("h2", "b", NOW)  # h2's old parking is forgotten too
    assert index.pop_due(NOW, per_host=1) == [("h2", ["b"])]


# ---------------------------------------------------------------- DueIndex: stale entries stay bounded


def test_seeding_a_host_url_by_url_earliest_first_leaves_at_most_one_live_ticket_and_bounded_stale_ones():
    index = DueIndex()
    for i in range(10_000):  # each push lowers the host's earliest due time: a new ticket each time
        index.push("h", f"u{i}", NOW - i)
    sizes = index.sizes()
    assert (sizes.urls, sizes.queues, sizes.live_tickets) == (10_000, 1, 1)
    assert sizes.tickets <= 2 + DueIndex.SLACK
    assert index.next_due_s() == NOW - 9_999
    assert index.pop_due(NOW, per_host=1) == [("h", ["u9999"])]


def test_many_hosts_seeded_earliest_first_keep_the_ticket_heap_within_twice_the_live_tickets():
    index = DueIndex()
    for i in range(20_000):
        index.push(f"h{i % 100}", f"u{i}", NOW - i)
    sizes = index.sizes()
    assert sizes.live_tickets == 100
    assert sizes.tickets <= 2 * 100 + DueIndex.SLACK


def test_parked_hosts_do_not_let_stale_tickets_grow():
    index = DueIndex()
    for i in range(1_000):
        index.set_host_ready(f"parked{i}", INF)
        index.push(f"parked{i}", f"p{i}", NOW)
    for i in range(5_000):  # one live host whose ticket moves at every push
        index.push("h", f"u{i}", NOW - i)
    sizes = index.sizes()
    assert sizes.live_tickets == 1
    assert sizes.tickets <= 2 + DueIndex.SLACK


def test_pushing_one_url_again_and_again_keeps_its_hosts_heap_bounded():
    index = DueIndex()
    index.push("h", "other", NOW + 5)
    for i in range(10_000):
        index.push("h", "u", NOW + i % 7, priority=i % 3)
    sizes = index.sizes()
    assert sizes.urls == 2
    assert sizes.url_entries <= 2 * 2 + DueIndex.SLACK
    assert index.pop_due(NOW + 10, per_host=5) == [("h", ["u", "other"])]


def test_removing_a_hosts_urls_one_by_one_leaves_no_entries():
    index = DueIndex()
    for i in range(1_000):
        index.push("h", f"u{i}", NOW + i, priority=i % 2)
    for i in range(1_000):
        index.remove(f"u{i}")
    assert index.sizes() == DueIndexSizes(urls=0, queues=0, url_entries=0, tickets=index.sizes().tickets,
                                          live_tickets=0)
    assert index.next_due_s() is None and index.sizes().tickets == 0


def test_a_url_moved_to_another_host_leaves_the_first_host_with_nothing_due():
    index = DueIndex()
    index.push("a", "u", NOW)
    index.push("b", "u", NOW + 1)
    assert (len(index), index.hosts()) == (1, 1)
    assert index.pop_due(NOW + 1, per_host=5) == [("b", ["u"])]


# ---------------------------------------------------------------- DueIndex: a random walk against a model


class _EagerIndex(DueIndex):
    SLACK = 1  # rebuilds its heaps after every other stale entry: the random walk exercises compaction


def _within_bounds(index: DueIndex) -> bool:
    sizes = index.sizes()
    return (sizes.tickets <= 2 * sizes.live_tickets + index.SLACK
            and sizes.url_entries <= 2 * sizes.urls + index.SLACK * sizes.queues)


@pytest.mark.parametrize("index_class", [DueIndex, _EagerIndex])
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_random_walk_loses_nothing_duplicates_nothing_and_never_hands_out_early(seed, index_class):
    rng = random.Random(seed)
    index = index_class()
    hosts = [f"h{i}" for i in range(6)]
    pending: dict[str, tuple[str, float, int]] = {}  # url -> (key, due, priority): the model
    ready_at = {k: 0.0 for k in hosts}                # key -> eligible time (INF: handed out, not told)
    handed: list[str] = []
    pushed_lifetimes = 0
    now = NOW
    serial = 0

    def check_pop(out: list[tuple[str, list[str]]], per_host: int) -> None:
        seen_keys = set()
        for key, urls in out:
            assert key not in seen_keys, "a host handed out twice in one call"
            seen_keys.add(key)
            assert ready_at[key] <= now, f"{key} handed out before its eligible time"
            assert 1 <= len(urls) <= per_host
            for u in urls:
                assert u in pending, f"{u} handed out but not pending (lost or duplicate)"
                assert pending[u][0] == key and pending[u][1] <= now, f"{u} handed out before it was due"
            due_left = [(-p, d) for u, (k, d, p) in pending.items() if k == key and d <= now and u not in urls]
            if due_left:  # the best due URLs were taken
                assert max((-pending[u][2], pending[u][1]) for u in urls) <= min(due_left)
            for u in urls:
                del pending[u]
                handed.append(u)
            ready_at[key] = INF
        # nothing starves: every eligible host with a due URL was served
        for key in hosts:
            if ready_at[key] <= now:
                assert not any(k == key and d <= now for k, d, _ in pending.values()), f"{key} was skipped"

    for _ in range(3000):
        op = rng.random()
        if op < 0.35:  # push a new URL, or move a pending one
            if pending and rng.random() < 0.3:
                url = rng.choice(sorted(pending))
                key = pending[url][0]
            else:
                serial += 1
                key = rng.choice(hosts)
                url = f"{key}/u{serial}"
                pushed_lifetimes += 1
            due = now + rng.choice([-30.0, 0.0, rng.uniform(0, 60)])
            prio = rng.choice([0, 0, 0, 1])
            index.push(key, url, due, prio)
            pending[url] = (key, due, prio)
        elif op < 0.45 and pending:
            url = rng.choice(sorted(pending))
            index.remove(url)
            del pending[url]
            pushed_lifetimes -= 1
        elif op < 0.65:
            key = rng.choice(hosts)
            t = now + rng.choice([0.0, rng.uniform(0, 30)])
            index.set_host_ready(key, t)
            ready_at[key] = t
        elif op < 0.85:
            per_host = rng.choice([1, 2, 3])
            check_pop(index.pop_due(now, per_host), per_host)
        else:
            now += rng.uniform(0, 10)
        assert len(index) == len(pending)
        assert _within_bounds(index)
        candidates = [max(ready_at[k], d) for k, d, _ in pending.values() if ready_at[k] != INF]
        assert index.next_due_s() == (min(candidates) if candidates else None)

    # drain: every host ready, time far ahead; everything left comes out exactly once
    now += 1e6
    for key in hosts:
        index.set_host_ready(key, now)
        ready_at[key] = now
    while pending:
        out = index.pop_due(now, per_host=3)
        assert out, "pending URLs that are never handed out"
        check_pop(out, 3)
        for key, _ in out:
            index.set_host_ready(key, now)
            ready_at[key] = now
    assert len(handed) == len(set(handed)) == pushed_lifetimes
    assert len(index) == 0 and index.next_due_s() is None


def test_a_host_record_keeps_its_block_once_and_reads_the_old_shape():
    backoff = {"attempts": 2, "blocked_until_s": NOW + 30, "backing_off_since_s": NOW - 5}
    host = HostRecord(key="h", backoff=backoff)
    assert host.blocked_until_s == NOW + 30 and host.to_dict()["blocked_until_s"] == NOW + 30  # written as before
    old = {"key": "h", "next_fetch_at_s": NOW + 1, "blocked_until_s": NOW + 30, "delay_s": 1.0, "backoff": backoff}
    assert HostRecord.from_dict(old) == HostRecord(key="h", next_fetch_at_s=NOW + 1, delay_s=1.0, backoff=backoff)
    assert HostRecord.from_dict(old).blocked_until_s == NOW + 30
    assert HostRecord(key="h").blocked_until_s == 0.0


def test_a_host_record_tells_its_back_off_attempts_and_none_without_a_back_off():
    assert HostRecord(key="h", backoff={"attempts": 3, "blocked_until_s": NOW + 30}).backoff_attempts == 3
    assert HostRecord(key="h", backoff={"attempts": 0, "blocked_until_s": NOW + 30}).backoff_attempts == 0
    assert HostRecord(key="h").backoff_attempts == 0
