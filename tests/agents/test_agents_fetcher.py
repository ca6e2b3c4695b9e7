"""The fetcher agent and its runtime, through Faust's ``test_context()``: dead letters, sends, shutdown, fence, paces, audit."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import topology
from agents import fetch_report
from agents.common import new_fetch_runtime
from squall.policy.frontier import HostRecord
from squall.policy.pace import FetchEnded
from squall.policy.partition import partition_for_key
from squall.policy.records import FetchMessage, SignalKind
from squall.worker.fetch_runtime import HandBack, Turn

from .agent_helper import HOST, PARTITIONS, P, Sent, _fresh_runtime

# A Faust setting changed after it was read (the store of tests/agents/conftest.py set late) fails the test.
pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")


# ---------------------------------------------------------------- fetcher


async def test_the_fetcher_dead_letters_an_undecodable_hand_out_and_goes_on(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents import fetcher as fetcher_module

    async def no_start(_run_here) -> None:  # no HTTP client, no WARC file: only the agent's decode path runs
        return None

    monkeypatch.setattr(_fresh_runtime(monkeypatch), "start", no_start)
    async with fetcher_module.fetcher.test_context() as agent:
        await agent.put(key=HOST.encode(), value=b'{"url": 3}', partition=P)
        await agent.put(key=HOST.encode(), value=b"\x00garbage", partition=P)
    assert len(sent.of(topology.deadletter_topic)) == 2
    assert sent.of(topology.fetch_topic) == [] and sent.of(topology.status_topic) == []


@pytest.mark.parametrize("path", ["status topic", "in process"])
async def test_the_fetcher_sends_its_result_with_the_signal_only_once_the_broker_has_the_outlinks(
    monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    import asyncio

    from squall.policy.pace import FetchEnded, PaceState
    from squall.policy.reasons import Status
    from squall.policy.records import StatusMessage

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
    rt = _fresh_runtime(monkeypatch)

    async def apply_here(result: StatusMessage, _event: Any) -> bool:  # the status updater's, applying it here
        order.append(("applied", json.loads(result.to_bytes())))
        return True

    rt.apply_here = apply_here
    ended = FetchEnded(fetch_id="f", kind=SignalKind.OTHER, at_s=11.0)
    event = object() if path == "in process" else None  # None: a report that goes through the topic
    task = asyncio.ensure_future(fetch_report.send_report(rt, msg, [own, same, other], ended, PaceState(), event))
    await asyncio.sleep(0.05)
    assert [v["url"] for _, v in order] == [other.url]  # a SIGKILL now loses the result, never the other links
    delivered.set_result(None)
    await task
    kinds = ["status", "applied" if path == "in process" else "status"]
    assert [kind for kind, _ in order] == kinds  # no signal of its own: it rides with the result
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
