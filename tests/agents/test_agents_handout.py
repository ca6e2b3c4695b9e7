"""In process, as agents: the hand-outs a result frees and the results applied where they were fetched."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from types import SimpleNamespace

import pytest
from faust.types.tuples import Message

import topology
from agents import status_updater as su
from agents import worker_state as agent_runtime
from agents.common import forget_cached_records
from agents.status_updater import status_updater
from squall.policy.frontier import HostRecord
from squall.policy.reasons import Status
from squall.policy.records import FetchMessage, SignalKind, SignalMessage, StatusMessage
from squall.policy.schedule import UrlRecord

from .agent_helper import HOST, P, Sent, _fresh_runtime

# A Faust setting changed after it was read (the store of tests/agents/conftest.py set late) fails the test.
pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")


def _freeing_result(now: float) -> tuple[bytes, str]:
    """A result of example.com/1 whose signal frees its place; example.com/3 is due next (stored and indexed)."""
    done_url, nxt = "https://example.com/1", "https://example.com/3"
    topology.hosts_table.data[HOST.encode()] = (
        HostRecord(key=HOST, delay_s=1.0).with_handout([done_url], now - 2).to_dict()
    )
    for url in (done_url, nxt):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 5).to_dict()
    agent_runtime.state().indexes[P].push(HOST, nxt, now - 5)
    signal = SignalMessage(
        key=HOST, url=done_url, fetch_id="f1", kind=SignalKind.SUCCESS, at_s=now, delay_s=1.0, handed_out_at_s=now - 2
    )
    result = {"url": done_url, "status": "FETCHED", "fetched_at_s": now, "http_status": 200, "signal": signal.to_dict()}
    return json.dumps(result).encode(), nxt


def _fetched(url: str, handed_out_at_s: float) -> StatusMessage:
    """The FETCHED result of ``url``'s fetch, handed out at ``handed_out_at_s``, with its signal (fetch id f2)."""
    signal = SignalMessage(
        key=HOST,
        url=url,
        fetch_id="f2",
        kind=SignalKind.SUCCESS,
        at_s=time.time(),
        delay_s=0.0,
        handed_out_at_s=handed_out_at_s,
    )
    return StatusMessage(url=url, status=Status.FETCHED, fetched_at_s=time.time(), http_status=200, signal=signal)


@pytest.mark.parametrize("case", ["in process", "setting off", "pending full", "fetcher not started", "held too long"])
async def test_the_next_url_a_result_freed_starts_in_this_workers_fetcher_holding_the_results_ack(
    sent: Sent, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    rt = _fresh_runtime(monkeypatch)
    started: list[FetchMessage] = []
    held: list[int] = []  # Message.incref calls: the result's ack held for each hand-out started here
    incref = Message.incref
    monkeypatch.setattr(Message, "incref", lambda message, n=1: (held.append(n), incref(message, n))[1])

    async def run_here(msg: FetchMessage, event) -> None:  # the fetcher agent's task (agents.fetcher._run), recorded
        started.append(msg)

    rt.run_here = None if case == "fetcher not started" else run_here
    if case == "setting off":
        monkeypatch.setattr(rt, "settings", dataclasses.replace(rt.settings, frontier_handout_inprocess=False))
    if case == "pending full":
        rt.pending = asyncio.Semaphore(0)
    value, nxt = _freeing_result(time.time())
    produced_at = time.time() - (rt.settings.frontier_handout_inprocess_hold_secs + 1 if case == "held too long" else 0)
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=value, partition=P, timestamp=produced_at)
        await asyncio.sleep(0)  # the task starts
    assert set(HostRecord.from_dict(topology.hosts_table[HOST.encode()]).in_flight) == {nxt}  # recorded either way
    if case != "in process":
        assert started == [] and held == [] and [v["url"] for _k, v, _p in sent.of(topology.fetch_topic)] == [nxt]
        return
    assert sent.of(topology.fetch_topic) == []  # no round trip through the fetch topic
    assert [(m.key, m.url) for m in started] == [(HOST, nxt)] and held == [1]
    assert rt.pending._value == rt.settings.fetcher_max_pending_urls - 1  # counted like a fetch message


@pytest.mark.parametrize("case", ["in process", "rebalancing", "membership not confirmed"])
async def test_a_result_applied_in_process_hands_the_hosts_next_url_out_here_on_the_same_held_ack(
    sent: Sent, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    """The fetched URL's result is applied in its hand-out's event, not sent: no status record, no fetch record."""
    rt = _fresh_runtime(monkeypatch)
    monkeypatch.setattr(rt, "settings", dataclasses.replace(rt.settings, frontier_result_inprocess=True))
    started: list[str] = []
    applied: list[bool] = []
    held: list[int] = []
    incref = Message.incref
    monkeypatch.setattr(Message, "incref", lambda message, n=1: (held.append(n), incref(message, n))[1])
    now = time.time()
    value, nxt = _freeing_result(now)
    third, fourth = "https://example.com/5", "https://example.com/7"  # the result of example.com/1 frees two places
    for url in (third, fourth):
        topology.urls_table.data[url.encode()] = UrlRecord(url=url, key=HOST, next_fetch_at_s=now - 4).to_dict()
        agent_runtime.state().indexes[P].push(HOST, url, now - 4)

    async def run_here(msg: FetchMessage, event) -> None:  # the fetcher's task: the fetch of nxt ends at once
        started.append(msg.url)
        if msg.url == nxt:
            applied.append(await su.apply_here(_fetched(nxt, msg.handed_out_at_s), event))

    rt.run_here = run_here
    monkeypatch.setattr(topology.app, "rebalancing", case == "rebalancing")
    if case == "membership not confirmed":  # squall's consumer's GroupLease: the fence is closed
        monkeypatch.setattr(topology.app.consumer, "lease", SimpleNamespace(holds=lambda: False), raising=False)
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=value, partition=P)
        for _ in range(3):
            await asyncio.sleep(0)  # the tasks start
    record = UrlRecord.from_dict(topology.urls_table[nxt.encode()])
    assert sent.of(topology.status_topic) == [] and sent.of(topology.fetch_topic) == []
    if case != "in process":  # the next owner reads the status topic: the fetcher sends it there
        assert applied == [False] and started == [nxt, third] and record.status != Status.FETCHED
        return
    assert applied == [True] and record.status == Status.FETCHED
    assert started == [nxt, third, fourth] and held == [1, 1, 1]  # the result's event held again for the next
    # the topic's signal is remembered (it can come again), the one applied in process is not (nothing holds it)
    assert HostRecord.from_dict(topology.hosts_table[HOST.encode()]).seen_fetch_ids == ["f1"]


async def test_a_stopping_worker_sends_its_results_to_the_status_topic(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Faust waits for the streams' acknowledgements when it stops: no result is applied, no chain goes on."""
    _fresh_runtime(monkeypatch)
    monkeypatch.setattr(type(topology.app), "should_stop", property(lambda _app: True))
    result = StatusMessage(url="https://example.com/1", status=Status.FETCHED, fetched_at_s=time.time())
    assert await su.apply_here(result, None) is False


async def test_a_result_applied_in_process_that_fails_is_dead_lettered_with_its_bytes_made_then(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No bytes are made for a result applied in process, but for a dead letter: then they are the result's."""
    rt = _fresh_runtime(monkeypatch)
    monkeypatch.setattr(rt, "settings", dataclasses.replace(rt.settings, frontier_result_inprocess=True))
    value, nxt = _freeing_result(time.time())
    results: list[StatusMessage] = []

    async def run_here(msg: FetchMessage, event) -> None:  # nxt's fetch ends at once; its host record is bad by then
        bad = HostRecord(key=HOST, backoff={"attempts": "many"}).with_handout([nxt], msg.handed_out_at_s)
        topology.hosts_table.data[HOST.encode()] = bad.to_dict()  # a record of another shape: update() fails
        forget_cached_records()
        results.append(_fetched(nxt, msg.handed_out_at_s))
        assert await su.apply_here(results[-1], event) is True

    rt.run_here = run_here
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=value, partition=P)
        for _ in range(3):
            await asyncio.sleep(0)
    ((_key, letter, _partition),) = sent.of(topology.deadletter_topic)
    assert letter["reason"] == "ValueError" and StatusMessage.from_bytes(letter["value"].encode()) == results[0]
