"""The status updater's hand-outs started in the worker's own fetcher (``frontier.handout.inprocess``), as agents."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time

import pytest
from faust.types.tuples import Message

import topology
from agents import worker_state as agent_runtime
from agents.status_updater import status_updater
from squall.policy.frontier import HostRecord
from squall.policy.records import FetchMessage, SignalKind, SignalMessage
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


@pytest.mark.parametrize("case", ["in process", "setting off", "pending full", "fetcher not started"])
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
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=value, partition=P)
        await asyncio.sleep(0)  # the task starts
    assert set(HostRecord.from_dict(topology.hosts_table[HOST.encode()]).in_flight) == {nxt}  # recorded either way
    if case != "in process":
        assert started == [] and held == [] and [v["url"] for _k, v, _p in sent.of(topology.fetch_topic)] == [nxt]
        return
    assert sent.of(topology.fetch_topic) == []  # no round trip through the fetch topic
    assert [(m.key, m.url) for m in started] == [(HOST, nxt)] and held == [1]
    assert rt.pending._value == rt.settings.fetcher_max_pending_urls - 1  # counted like a fetch message
