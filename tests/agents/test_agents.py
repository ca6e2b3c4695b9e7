"""Each agent tested as an agent, through Faust's ``test_context()`` (memory store, no broker).

What is checked here is the agent's own loop: decode, call policy, write its
tables, emit, and send bad input to the dead-letter topic without stopping.
Politeness, ordering and loss are proven through a real broker elsewhere
(tests/integration).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

import topology
from agents import worker_state as agent_runtime
from agents.common import new_fetch_runtime
from agents.regulator import regulator
from agents.spout import spout
from agents.status_updater import status_updater
from squall.policy import fetch_decision as fd
from squall.policy.due_index import DueIndex
from squall.policy.frontier import HostRecord
from squall.policy.pace import FetchEnded
from squall.policy.partition import partition_for_key
from squall.policy.records import FetchMessage, SignalKind, SignalMessage
from squall.policy.schedule import UrlRecord
from squall.worker.fetch_runtime import HandBack, Turn

# A Faust setting changed after it was read (the store of tests/agents/conftest.py set late) fails the test.
pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")

PARTITIONS: int = topology.settings["topology.partitions"]
HOST = "example.com"
P = partition_for_key(HOST, PARTITIONS)


class Sent:
    """Messages the agents sent, per topic name, as (key, decoded JSON value, partition)."""

    def __init__(self) -> None:
        self.by_topic: dict[str, list[tuple[bytes | None, Any, int | None]]] = {}

    def of(self, topic: Any) -> list[tuple[bytes | None, Any, int | None]]:
        return self.by_topic.get(topic.get_topic_name(), [])


def _fresh_runtime(monkeypatch: pytest.MonkeyPatch) -> FetcherRuntime:
    """A new fetch runtime handed to the agents for one test (the app holds the worker's one)."""
    runtime = new_fetch_runtime()
    monkeypatch.setattr(topology.app, "squall_fetch_runtime", runtime)
    return runtime


@pytest.fixture()
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sent]:
    assert str(topology.app.conf.store) == "memory:", "tests/agents/conftest.py sets the memory store"
    topology.app.finalize()
    topology.app.flow_control.resume()
    record = Sent()
    for topic in (
        topology.status_topic,
        topology.fetch_topic,
        topology.signals_topic,
        topology.ticks_topic,
        topology.deadletter_topic,
    ):

        def send(
            *,
            key: bytes | None = None,
            value: bytes | None = None,
            partition: int | None = None,
            _name: str = topic.get_topic_name(),
            **_kw: Any,
        ) -> None:
            decoded = json.loads(value) if value else value
            record.by_topic.setdefault(_name, []).append((key, decoded, partition))

        monkeypatch.setattr(topic, "send", _async(send))
    held = agent_runtime.WorkerState()  # handed in: this test's due indexes and assignment times
    held.indexes = {p: DueIndex() for p in range(PARTITIONS)}
    monkeypatch.setattr(topology.app, "squall_worker_state", held)
    for table in (topology.urls_table, topology.hosts_table, topology.robots_table):
        table.data.clear()  # the memory store outlives a test: start each one empty
    yield record


def _async(fn):
    async def wrapper(*args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)

    return wrapper


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
    lost, received, mine = "https://example.com/lost", "https://example.com/received", "https://example.com/mine"
    since = now - 10  # owned since 10 s ago: past the grace (frontier.takeover.grace.secs) and the delay
    for url in (lost, received, mine):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 20).to_dict()
    host = HostRecord(key=HOST, delay_s=0.2).with_handout([lost, received], since - 5).with_handout([mine], since + 1)
    topology.hosts_table.data[HOST.encode()] = host.to_dict()
    agent_runtime.state().assigned_at = {P: since}
    agent_runtime.state().stranded = {P: {HOST: since + 5}}
    runtime = _fresh_runtime(monkeypatch)
    monkeypatch.setattr(runtime, "received", lambda url, at_s: url == received)
    async with spout.test_context() as agent:
        await agent.put(key=b"tick", value=b"", partition=P)
    handed = [FetchMessage.from_bytes(json.dumps(v).encode()) for _k, v, _p in sent.of(topology.fetch_topic)]
    assert [m.url for m in handed] == [lost]  # the received one reports itself; this owner's own is not touched
    record = HostRecord.from_dict(topology.hosts_table[HOST.encode()])
    assert record.in_flight == {received: since - 5, mine: since + 1, lost: handed[0].handed_out_at_s}
    assert record.next_fetch_at_s >= since + 0.2  # the take-over rule is in the durable pace
    assert agent_runtime.state().stranded == {P: {}}


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
    runtime.active[fd.handout_id(mine, now - 0.5)] = []  # this worker's own fetch of `mine`
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


# ---------------------------------------------------------------- fetcher


async def test_the_fetcher_dead_letters_an_undecodable_hand_out_and_goes_on(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import fetcher as fetcher_module

    async def no_start() -> None:  # no HTTP client, no WARC file: only the agent's decode path runs
        return None

    monkeypatch.setattr(_fresh_runtime(monkeypatch), "start", no_start)
    async with fetcher_module.fetcher.test_context() as agent:
        await agent.put(key=HOST.encode(), value=b'{"url": 3}', partition=P)
        await agent.put(key=HOST.encode(), value=b"\x00garbage", partition=P)
    assert len(sent.of(topology.deadletter_topic)) == 2
    assert sent.of(topology.fetch_topic) == [] and sent.of(topology.status_topic) == []


async def test_the_fetcher_sends_its_result_with_the_signal_only_once_the_broker_has_the_outlinks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from agents import fetcher
    from squall.policy.pace import FetchEnded, PaceState
    from squall.policy.records import StatusMessage
    from squall.policy.reasons import Status

    order: list[tuple[str, dict]] = []
    delivered: asyncio.Future = asyncio.get_running_loop().create_future()

    async def status_send(*, value: bytes, **_kw: Any) -> asyncio.Future:
        order.append(("status", json.loads(value)))
        return delivered

    async def signal_send(**_kw: Any) -> None:
        order.append(("signal", {}))

    monkeypatch.setattr(topology.status_topic, "send", status_send)
    monkeypatch.setattr(topology.signals_topic, "send", signal_send)
    msg = FetchMessage(url="https://example.com/s", key=HOST, handed_out_at_s=10.0)
    own = StatusMessage(url=msg.url, status=Status.FETCHED, fetched_at_s=11.0)
    elsewhere = next(f"h{i}.example" for i in range(100) if partition_for_key(f"h{i}.example", PARTITIONS) != P)
    same = StatusMessage(url="https://example.com/a", more_urls=["https://example.com/b"], depth=1)
    other = StatusMessage(url=f"https://{elsewhere}/x", depth=1)
    task = asyncio.ensure_future(
        fetcher._send(
            _fresh_runtime(monkeypatch),
            msg,
            [own, same, other],
            FetchEnded(fetch_id="f", kind=SignalKind.OTHER, at_s=11.0),
            PaceState(),
        )
    )
    await asyncio.sleep(0.05)
    assert [v["url"] for _, v in order] == [other.url]  # a SIGKILL now loses the result, never the other links
    delivered.set_result(None)
    await task
    assert [kind for kind, _ in order] == ["status", "status"]  # no signal of its own: it rides with the result
    result = order[1][1]
    assert (result["url"], result["signal"]["fetch_id"], result["signal"]["handed_out_at_s"]) == (msg.url, "f", 10.0)
    assert result["discovered"] == {
        "url": same.url,
        "more_urls": same.more_urls,
        "status": "DISCOVERED",
        "depth": 1,
        "metadata": {},
        "seed": False,
        "not_modified": False,
        "truncated": False,
        "chain": [],
    }


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
    from agents import status_updater as su

    now = time.time()
    url = "https://example.com/1"
    fetched = UrlRecord(url=url, key=HOST, next_fetch_at_s=now + 86400).to_dict()
    topology.urls_table.data[url.encode()] = {**fetched, "status": "FETCHED", "last_fetch_at_s": now}
    written: list[UrlRecord] = []
    store = su._store
    monkeypatch.setattr(su, "_store", lambda record: (written.append(record), store(record)))
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


# ---------------------------------------------------------------- fetcher shutdown


async def test_the_fetcher_closes_its_warc_file_and_http_sessions_on_shutdown(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from warcio.archiveiterator import ArchiveIterator

    from agents import upkeep
    from squall.net.http import HttpConfig, HttpFetcher
    from squall.net.warc import WarcWriter

    runtime = _fresh_runtime(monkeypatch)
    runtime.http = await HttpFetcher(HttpConfig.from_settings(topology.settings)).__aenter__()
    runtime.warc = WarcWriter(tmp_path, "t", 10**6)
    path = runtime.warc.write_fetch(
        "https://example.com/a",
        request_headers=[("Host", "example.com")],
        status=200,
        reason="OK",
        response_headers=[("Content-Type", "text/html")],
        body=b"<p>a</p>",
        ip="127.0.0.1",
        fetched_at_s=time.time(),
        truncated=False,
    )
    http = runtime.http
    await upkeep._close_on_shutdown(None)
    assert runtime.warc is None and runtime.http is None and http._session is None
    with path.open("rb") as handle:
        kinds = [record.rec_type for record in ArchiveIterator(handle)]
    assert kinds == ["warcinfo", "response", "request"]
    await upkeep._close_on_shutdown(None)  # idempotent: a second signal closes nothing twice


# ---------------------------------------------------------------- fetcher fence (squall.policy.lease)


async def test_a_closed_fence_grants_no_turn_until_the_coordinator_confirms_the_membership(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from squall.policy.lease import HEARTBEAT, NONE, SYNC_GROUP, UNKNOWN_MEMBER_ID, Fence
    from squall.worker.group_lease import GroupLease

    runtime = _fresh_runtime(monkeypatch)
    lease = GroupLease(Fence(6.0, 2.0))
    lease.watched = True  # a consumer in a group, not confirmed yet
    monkeypatch.setattr(runtime, "_lease", lambda: lease)
    dispatch = asyncio.get_running_loop().create_task(runtime._dispatch())
    try:
        waiting = asyncio.get_running_loop().create_task(runtime.turn(HOST))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "a turn was granted behind a closed fence"
        lease.answered(SYNC_GROUP, NONE, time.monotonic())
        lease.answered(HEARTBEAT, NONE, time.monotonic())
        turn = await asyncio.wait_for(waiting, 2.0)
        assert isinstance(turn, Turn)
        turn.end(FetchEnded(fetch_id="t1", kind=SignalKind.OTHER, at_s=time.time()))
        lease.answered(HEARTBEAT, UNKNOWN_MEMBER_ID, time.monotonic())  # the group forgot this worker
        second = asyncio.get_running_loop().create_task(runtime.turn(HOST))
        handed_back = await asyncio.wait_for(second, 3.0)  # not held across the revoke that follows
        assert isinstance(handed_back, HandBack)
        third = asyncio.get_running_loop().create_task(runtime.turn(HOST))
        await asyncio.sleep(0.5)
        assert not third.done(), "a turn was granted before the rejoined group confirmed this worker"
        lease.answered(SYNC_GROUP, NONE, time.monotonic())
        assert isinstance(await asyncio.wait_for(third, 2.0), Turn)
    finally:
        dispatch.cancel()
    from agents.observe import observed

    assert observed().metrics.fenced_seconds._value.get() >= 0.4


def test_paces_of_partitions_no_longer_owned_are_forgotten(sent: Sent) -> None:
    from squall.policy.pace import PaceState

    runtime = new_fetch_runtime()
    other = next(h for h in (f"h{i}.example" for i in range(100)) if partition_for_key(h, PARTITIONS) != P)
    runtime.paces = {HOST: (1.0, PaceState()), other: (1.0, PaceState())}
    runtime.forget_unowned({P})
    assert list(runtime.paces) == [HOST]


# ---------------------------------------------------------------- politeness audit, written per batch


def test_the_audit_is_written_per_batch_at_once_on_a_violation_and_when_the_host_goes_idle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agents import observe
    from squall.policy.audit import HostAudit

    table: dict[bytes, dict] = {}
    writes: list[int] = []

    class Recording(dict):
        def __setitem__(self, k: bytes, v: dict) -> None:
            writes.append(v["requests"])
            super().__setitem__(k, v)

    recording = Recording(table)
    buffer = observe.AuditBuffer(flush_s=5.0, table=recording)  # handed in
    for i in range(4):  # one request a second, each 1 s after the last: a write, then none for 5 s
        buffer.record(HOST, 100.0 + i, 1.0, 0.0)
    assert writes == [1]
    buffer.record(HOST, 103.5, 1.0, 0.0)  # 0.5 s after the last under a 1 s delay: written at once
    assert writes == [1, 5]
    buffer.record(HOST, 105.0, 1.0, 0.0)
    buffer.flush_if_idle(HOST, HostRecord(key=HOST).with_handout(["https://example.com/x"], 105.0), 105.5)
    assert writes == [1, 5]  # still fetching: the table may lag
    buffer.flush_if_idle(HOST, HostRecord(key=HOST), 106.0)  # its last result: caught up
    assert writes == [1, 5, 6]
    assert HostAudit.from_dict(recording[HOST.encode()]).violations == 1
    buffer.flush_if_idle(HOST, HostRecord(key=HOST), 107.0)
    assert writes == [1, 5, 6]  # nothing new: no write
