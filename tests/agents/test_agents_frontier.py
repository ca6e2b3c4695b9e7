"""The frontier's agents as agents, through Faust's ``test_context()``: status updater, spout, queue regulator, results."""

from __future__ import annotations

import json
import time

import pytest

import topology
from agents import worker_state as agent_runtime
from agents.regulator import regulator
from agents.spout import send_due_ticks, spout
from agents.status_updater import status_updater
from squall.policy import fetch_decision as fd
from squall.policy.frontier import HostRecord
from squall.policy.records import FetchMessage, SignalKind, SignalMessage
from squall.policy.schedule import UrlRecord
from squall.worker.fetch_runtime import HandBack

from .agent_helper import HOST, PARTITIONS, P, Sent, _fresh_runtime

# A Faust setting changed after it was read (the store of tests/agents/conftest.py set late) fails the test.
pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")


# ---------------------------------------------------------------- status updater


async def test_the_status_updater_stores_a_seed_as_a_due_record(sent: Sent) -> None:
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=b'{"url": "https://EXAMPLE.com/a#frag", "seed": true}', partition=P)
    record = UrlRecord.from_dict(topology.urls_table[b"https://example.com/a"])
    assert (record.key, record.status.value, record.priority) == (HOST, "DISCOVERED", 1)
    assert HostRecord.from_dict(topology.hosts_table[HOST.encode()]).seeded
    assert agent_runtime.state().indexes[P].next_due_s() is not None


async def test_the_status_updater_routes_a_message_from_another_partitioner_to_its_owner(sent: Sent) -> None:
    wrong = (P + 1) % PARTITIONS
    async with status_updater.test_context() as agent:
        await agent.put(key=b"whatever", value=b'{"url": "https://example.com/b"}', partition=wrong)
    assert [(k, p) for k, _v, p in sent.of(topology.status_topic)] == [(HOST.encode(), P)]


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b'{"url": "ftp://x/"}',
        b'{"no": "url"}',
        b"\xff\xfe",
        # an unknown reason or status value, and a "not attempted" result that does not say why: bad input
        b'{"url": "https://example.com/a", "status": "ERROR", "reason": "robots.maybe", "fetched_at_s": 1.0}',
        b'{"url": "https://example.com/a", "status": "LOST", "fetched_at_s": 1.0}',
        b'{"url": "https://example.com/a", "status": "DISCOVERED", "fetched_at_s": 1.0, "retry_after_s": 9.0}',
    ],
)
async def test_the_status_updater_dead_letters_bad_input_and_goes_on(sent: Sent, value: bytes) -> None:
    async with status_updater.test_context() as agent:
        await agent.put(key=b"k", value=value, partition=P)
        await agent.put(key=HOST.encode(), value=b'{"url": "https://example.com/c", "seed": true}', partition=P)
    assert len(sent.of(topology.deadletter_topic)) == 1
    assert sent.of(topology.deadletter_topic)[0][1]["reason"]
    assert b"https://example.com/c" in topology.urls_table  # the stream went on


# ---------------------------------------------------------------- spout


async def test_the_spout_hands_out_a_due_url_and_records_it_in_flight(sent: Sent) -> None:
    now = time.time()
    url = "https://example.com/d"
    # set up through the store: a table write needs a current event (Faust)
    topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 1).to_dict()
    agent_runtime.state().indexes[P].push(HOST, url, now - 1)
    async with spout.test_context() as agent:
        await agent.put(key=b"tick", value=b"", partition=P)
    [(key, value, _p)] = sent.of(topology.fetch_topic)
    msg = FetchMessage.from_bytes(json.dumps(value).encode())
    assert (key, msg.url, msg.key) == (HOST.encode(), url, HOST)
    assert HostRecord.from_dict(topology.hosts_table[HOST.encode()]).in_flight == {url: msg.handed_out_at_s}


async def test_the_spout_hands_out_again_an_earlier_owners_hand_out_that_never_reached_this_worker(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    lost, waiting, mine = "https://example.com/lost", "https://example.com/waiting", "https://example.com/mine"
    # fetched by this worker's fetcher: before the take-over (under a membership it lost since), and after it
    before, after = "https://example.com/fetched-before", "https://example.com/fetched-after"
    since = now - 10  # owned since 10 s ago: past the grace (frontier.takeover.grace.secs) and the delay
    for url in (lost, waiting, mine, before, after):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 20).to_dict()
    earlier = [lost, waiting, before, after]
    host = HostRecord(key=HOST, delay_s=0.2).with_handout(earlier, since - 5).with_handout([mine], since + 1)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    agent_runtime.state().assigned_at = {P: since}
    agent_runtime.state().stranded = {P: {HOST: since + 5}}
    runtime = _fresh_runtime(monkeypatch)
    runtime.copies.active[fd.handout_id(waiting, since - 5)] = []  # its fetch message is here, waiting for its turn
    runtime.copies.finished(fd.handout_id(before, since - 5), since - 3)
    runtime.copies.finished(fd.handout_id(after, since - 5), since + 2)
    results_in = [False]  # the status messages up to the release time: not all applied yet, then applied
    monkeypatch.setattr(agent_runtime.state(), "results_in", lambda partition: results_in[0])
    async with spout.test_context() as agent:
        await agent.put(key=b"tick", value=b"", partition=P)
        assert sent.of(topology.fetch_topic) == []  # a result of the earlier owner may still free it
        assert agent_runtime.state().stranded[P][HOST] > now  # asked again one delay later
        results_in[0] = True
        agent_runtime.state().stranded[P][HOST] = now
        await agent.put(key=b"tick", value=b"", partition=P)
    handed = [FetchMessage.from_bytes(json.dumps(v).encode()) for _k, v, _p in sent.of(topology.fetch_topic)]
    # the waiting one and the one fetched since the take-over report themselves; this owner's own is not touched;
    # the one fetched before the take-over was not reported once the status partition was read through: both it
    # and the lost one leave the earlier hand-out and go out again (as the host's places allow: one now)
    assert handed and {m.url for m in handed} <= {before, lost}
    record = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert record.in_flight == {
        waiting: since - 5,
        after: since - 5,
        mine: since + 1,
        handed[0].url: handed[0].handed_out_at_s,
    }
    assert record.next_fetch_at_s >= since + 0.2  # the take-over rule is in the durable pace
    assert agent_runtime.state().stranded == {P: {}}


async def test_the_spout_hands_out_again_its_own_hand_out_whose_fetch_message_the_fetcher_read_past(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch message dropped on its way (a rebalance suspending the flow, a broker restart): not held for 600 s."""
    now = time.time()
    lost, received, freed = "https://example.com/lost", "https://example.com/got", "https://example.com/freed"
    for url in (lost, received, freed):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 20).to_dict()
    host = HostRecord(key=HOST, delay_s=0.2).with_handout([lost, received], now - 6)  # `freed`: its result came
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    held = agent_runtime.state()
    held.assigned_at = {P: now - 60}
    held.watch(P, HOST, [lost, received, freed], now - 6, now - 6)  # due (frontier.takeover.grace.secs) 1 s ago
    runtime = _fresh_runtime(monkeypatch)
    monkeypatch.setattr(runtime.copies, "received", lambda url, at_s: url == received)
    read = [False]  # the fetcher's consumer has not read the fetch partition that far, then has
    monkeypatch.setattr(held, "fetches_read", lambda partition: read[0])
    async with spout.test_context() as agent:
        await agent.put(key=b"tick", value=b"", partition=P)
        assert sent.of(topology.fetch_topic) == []  # its message may still come
        assert [e[2] for e in held.watched[P]] == [lost]  # looked at again a tick later; the others settled
        assert held.next_release_s(P) > now
        read[0] = True
        held.watched[P][0] = (now - 1, *held.watched[P][0][1:])
        await agent.put(key=b"tick", value=b"", partition=P)
    handed = [FetchMessage.from_bytes(json.dumps(v).encode()) for _k, v, _p in sent.of(topology.fetch_topic)]
    assert [m.url for m in handed] == [lost]
    record = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert record.in_flight == {received: now - 6, lost: handed[0].handed_out_at_s}
    assert [e[2:] for e in held.watched[P]] == [(lost, handed[0].handed_out_at_s)]  # the new hand-out is watched


async def test_the_tick_timer_ticks_for_a_watched_hand_out_only_when_the_fetcher_has_not_received_it(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hand-out is watched; a tick for every watch would add a ticks record to every few pages."""
    now = time.time()
    held = agent_runtime.state()
    held.watch(P, HOST, ["https://example.com/got", "https://example.com/lost"], now - 6, now - 6)
    runtime = _fresh_runtime(monkeypatch)
    got = {"https://example.com/got"}
    monkeypatch.setattr(runtime.copies, "received", lambda url, at_s: url in got)
    await send_due_ticks(now)
    assert [p for _k, _v, p in sent.of(topology.ticks_topic)] == [P]  # for the one not received
    assert [e[2] for e in held.watched[P]] == ["https://example.com/lost"]
    got.add("https://example.com/lost")
    held.tick_sent_at.clear()
    await send_due_ticks(now)
    assert [p for _k, _v, p in sent.of(topology.ticks_topic)] == [P]  # no second tick: nothing left to look at
    assert not held.watched[P]


async def test_a_rebuild_watches_this_workers_own_hand_outs_and_leaves_an_earlier_owners_to_the_take_over_rule(
    sent: Sent,
) -> None:
    now = time.time()
    held = agent_runtime.state()
    held.assigned_at, held._assignment_generation = {P: now - 30}, topology.app.consumer_generation_id - 1
    host = HostRecord(key=HOST).with_handout(["https://example.com/old"], now - 40)
    host = host.with_handout(["https://example.com/mine"], now - 2)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    await held.rebuild({P})
    assert [e[1:] for e in held.watched[P]] == [(HOST, "https://example.com/mine", now - 2)]
    assert held.watched[P][0][0] >= now + topology.settings.frontier_takeover_grace_secs
    assert HOST in held.stranded[P]


async def test_a_rebuilt_due_index_keeps_a_url_whose_status_came_before_its_signal(sent: Sent) -> None:
    """The broker kill -9 fault trial: a rebalance between a deferral's status and its signal left the URL out of the index for good."""
    now = time.time()
    reported, awaited = "https://example.com/reported", "https://example.com/awaited"
    host = HostRecord(key=HOST).with_handout([reported], now - 3).with_handout([awaited], now - 1)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    for url, last in ((reported, now - 2.5), (awaited, now - 2.0)):  # `awaited`: its result is not in yet
        record = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 1, last_fetch_at_s=last)
        topology.urls_table.data[url.encode()] = record.to_dict()
    await agent_runtime.state().rebuild({P})
    index = agent_runtime.state().indexes[P]
    assert len(index) == 1
    index.set_host_ready(HOST, now)  # its places are taken by `awaited` until the signals come
    assert index.pop_due(now + 10, per_host=10) == [(HOST, [reported])]


# ---------------------------------------------------------------- queue regulator


async def test_the_regulator_applies_a_signal_to_the_host_record(sent: Sent) -> None:
    topology.hosts_table.data[HOST.encode()] = (
        HostRecord(key=HOST).with_handout(["https://example.com/e"], 99.0).to_dict()
    )
    signal = SignalMessage(
        key=HOST,
        url="https://example.com/e",
        fetch_id="f1",
        kind=SignalKind.RETRY_AFTER,
        at_s=100.0,
        retry_until_s=190.0,
        handed_out_at_s=99.0,
    )
    async with regulator.test_context() as agent:
        await agent.put(key=HOST.encode(), value=signal.to_bytes(), partition=P)
        await agent.put(key=HOST.encode(), value=signal.to_bytes(), partition=P)  # re-delivered: applied once
    host = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert (host.in_flight, host.blocked_until_s, host.next_fetch_at_s) == ({}, 190.0, 101.0)
    assert host.seen_fetch_ids == ["f1"]


async def test_an_earlier_owners_late_retry_after_reaches_the_fetchers_pace(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broker kill -9 fault trial: the earlier owner's last request was answered 503 + Retry-After after this worker took over."""
    import asyncio

    runtime = _fresh_runtime(monkeypatch)
    now = time.time()
    theirs, mine = "https://example.com/theirs", "https://example.com/mine"
    host = HostRecord(key=HOST, delay_s=0.3).with_handout([theirs], now - 2).with_handout([mine], now - 0.5)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    agent_runtime.state().assigned_at = {P: now - 1}
    runtime.free_slots = 0  # the turn waits in the queue, as behind a delay
    waiting = asyncio.get_running_loop().create_task(runtime.turn(HOST))
    await asyncio.sleep(0.05)
    runtime.copies.active[fd.handout_id(mine, now - 0.5)] = []  # this worker's own fetch of `mine`
    own = SignalMessage(
        key=HOST, url=mine, fetch_id="mine1", kind=SignalKind.SUCCESS, at_s=now + 5, handed_out_at_s=now - 0.5
    )
    late = SignalMessage(
        key=HOST,
        url=theirs,
        fetch_id="theirs1",
        kind=SignalKind.RETRY_AFTER,
        at_s=now - 0.2,
        retry_until_s=now + 30,
        handed_out_at_s=now - 2,
    )
    async with regulator.test_context() as agent:
        before = runtime.paces[HOST]
        await agent.put(key=HOST.encode(), value=own.to_bytes(), partition=P)
        assert runtime.paces[HOST] == before and not waiting.done()  # its own fetch: memory is ahead of the record
        await agent.put(key=HOST.encode(), value=late.to_bytes(), partition=P)
    assert runtime.paces[HOST][1].blocked_until_s >= now + 30
    handed_back = await asyncio.wait_for(waiting, 1.0)  # a block beyond the lead: back to the frontier
    assert isinstance(handed_back, HandBack) and handed_back.until_s >= now + 30


@pytest.mark.parametrize(
    "value",
    [
        b"{}",
        b"[1]",
        b'{"key": "h", "url": "u", "fetch_id": "f", "kind": "nope", "at_s": 1}',
        b'{"key": "h", "url": "u", "fetch_id": "f", "kind": "success", "at_s": "NaN"}',
    ],
)
async def test_the_regulator_dead_letters_a_bad_signal_and_goes_on(sent: Sent, value: bytes) -> None:
    good = SignalMessage(key=HOST, url="https://example.com/f", fetch_id="f2", kind=SignalKind.SUCCESS, at_s=5.0)
    async with regulator.test_context() as agent:
        await agent.put(key=HOST.encode(), value=value, partition=P)
        await agent.put(key=HOST.encode(), value=good.to_bytes(), partition=P)
    assert len(sent.of(topology.deadletter_topic)) == 1
    assert HostRecord.from_dict(topology.hosts_table[HOST.encode()]).next_fetch_at_s == 6.0


# ---------------------------------------------------------------- results, through the status updater


async def test_a_result_with_its_signal_frees_the_place_and_hands_out_the_hosts_next_url_at_once(sent: Sent) -> None:
    now = time.time()
    done_url, waiting, nxt = "https://example.com/1", "https://example.com/2", "https://example.com/3"
    host = HostRecord(key=HOST, delay_s=1.0).with_handout([done_url], now - 2).with_handout([waiting], now - 1)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    for url in (done_url, nxt):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 5).to_dict()
    agent_runtime.state().indexes[P].push(HOST, nxt, now - 5)
    signal = SignalMessage(
        key=HOST, url=done_url, fetch_id="f1", kind=SignalKind.SUCCESS, at_s=now, delay_s=1.0, handed_out_at_s=now - 2
    )
    result = json.dumps(
        {"url": done_url, "status": "FETCHED", "fetched_at_s": now, "http_status": 200, "signal": signal.to_dict()}
    ).encode()
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=result, partition=P)
        await agent.put(key=HOST.encode(), value=result, partition=P)  # re-delivered: nothing more
    host = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    [(key, value, _p)] = sent.of(topology.fetch_topic)  # the next URL left with the result: no tick
    assert (key, value["url"]) == (HOST.encode(), nxt)
    assert set(host.in_flight) == {waiting, nxt} and host.seen_fetch_ids == ["f1"]
    assert UrlRecord.from_dict(topology.urls_table[done_url.encode()]).status.value == "FETCHED"
    assert sent.of(topology.signals_topic) == []


async def test_a_result_applied_already_is_written_again_so_its_changelog_catches_up(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    # After a SIGKILL the local RocksDB store can hold a result whose changelog record was never
    # produced; the re-delivered result changes nothing, but writing it again reaches the changelog.
    from agents import status_apply as su

    now = time.time()
    url = "https://example.com/1"
    fetched = UrlRecord(url=url, key=HOST, next_fetch_at_s=now + 86400).to_dict()
    topology.urls_table.data[url.encode()] = {**fetched, "status": "FETCHED", "last_fetch_at_s": now}
    written: list[UrlRecord] = []
    store = su._store
    monkeypatch.setattr(su, "_store", lambda record, at_s: (written.append(record), store(record, at_s)))
    result = json.dumps({"url": url, "status": "FETCHED", "fetched_at_s": now, "http_status": 200}).encode()
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=result, partition=P)
    assert [(r.url, r.status.value, r.last_fetch_at_s) for r in written] == [(url, "FETCHED", now)]


async def test_a_result_with_its_partitions_outlinks_stores_them_and_hands_the_first_one_out(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    page = "https://example.com/"
    topology.hosts_table.data[HOST.encode()] = (
        HostRecord(key=HOST, seeded=True, url_count=1).with_handout([page], now - 2).to_dict()
    )
    topology.urls_table.data[page.encode()] = UrlRecord(url=page, key=HOST, next_fetch_at_s=now - 5).to_dict()
    writes: list[bytes] = []
    real_setitem = type(topology.hosts_table).__setitem__
    monkeypatch.setattr(
        type(topology.hosts_table),
        "__setitem__",
        lambda self, k, v: (writes.append(k) if self is topology.hosts_table else None, real_setitem(self, k, v))[1],
    )
    signal = SignalMessage(
        key=HOST, url=page, fetch_id="f1", kind=SignalKind.SUCCESS, at_s=now - 1, handed_out_at_s=now - 2
    )
    result = json.dumps(
        {
            "url": page,
            "status": "FETCHED",
            "fetched_at_s": now - 1,
            "http_status": 200,
            "signal": signal.to_dict(),
            "discovered": {"url": "https://example.com/a", "more_urls": ["https://example.com/b"], "depth": 1},
        }
    )
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=result.encode(), partition=P)
    host = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert host.url_count == 3 and host.seen_fetch_ids == ["f1"]
    handed = [value["url"] for _k, value, _p in sent.of(topology.fetch_topic)]  # discovered now, out once stored
    assert handed == ["https://example.com/a", "https://example.com/b"] == sorted(host.in_flight)  # two places
    assert writes == [HOST.encode(), HOST.encode()]  # the result's write, then the hand-out's (only in this case)
    assert UrlRecord.from_dict(topology.urls_table[b"https://example.com/b"]).status.value == "DISCOVERED"


async def test_a_result_of_a_host_blocked_by_retry_after_hands_out_nothing_until_the_tick(sent: Sent) -> None:
    now = time.time()
    done_url, nxt = "https://example.com/1", "https://example.com/3"
    topology.hosts_table.data[HOST.encode()] = HostRecord(key=HOST).with_handout([done_url], now - 2).to_dict()
    for url in (done_url, nxt):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 5).to_dict()
    agent_runtime.state().indexes[P].push(HOST, nxt, now - 5)
    signal = SignalMessage(
        key=HOST,
        url=done_url,
        fetch_id="f1",
        kind=SignalKind.RETRY_AFTER,
        at_s=now,
        retry_until_s=now + 60,
        handed_out_at_s=now - 2,
    )
    result = json.dumps(
        {
            "url": done_url,
            "status": "FETCH_ERROR",
            "reason": "http.rate_limited",
            "fetched_at_s": now,
            "http_status": 429,
            "signal": signal.to_dict(),
        }
    ).encode()
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=result, partition=P)
    host = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert sent.of(topology.fetch_topic) == [] and host.in_flight == {} and host.blocked_until_s == now + 60
    assert agent_runtime.state().indexes[P].next_due_s() == pytest.approx(
        now + 60 - topology.settings["frontier.handout.lead.secs"]
    )


async def test_a_result_whose_url_is_bad_still_frees_its_place_through_the_regulator(sent: Sent) -> None:
    signal = SignalMessage(
        key=HOST, url="https://example.com/1", fetch_id="f1", kind=SignalKind.SUCCESS, at_s=100.0, handed_out_at_s=99.0
    )
    result = json.dumps(
        {"url": "http://[::1", "status": "FETCHED", "fetched_at_s": 100.0, "signal": signal.to_dict()}
    ).encode()
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=result, partition=P)
    assert len(sent.of(topology.deadletter_topic)) == 1
    [(key, value, _p)] = sent.of(topology.signals_topic)
    assert (key, value["fetch_id"]) == (HOST.encode(), "f1")
