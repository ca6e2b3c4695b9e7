"""A restarted worker whose local store holds a result its changelog lacks (agents.spout, agents.fetch_report).

After a SIGKILL, Faust recovers a table's local store by replaying its changelog from the last offset
it noted as written: a host record can come back older (the URL in flight again) while the URL record
written after it keeps the result applied in this worker (``frontier.result.inprocess``). Such a
hand-out must be settled, its URL record written again (only a write reaches the changelog), and
the URL neither fetched again nor put back as due.
"""

from __future__ import annotations

import time

import pytest

import topology
from agents import worker_state as agent_runtime
from agents.common import Tables
from agents.fetch_report import superseded
from agents.spout import release_stranded
from squall.policy.frontier import HostRecord
from squall.policy.reasons import Status
from squall.policy.records import FetchMessage
from squall.policy.schedule import UrlRecord
from squall.worker.fetch_runtime import FetcherRuntime

from .agent_helper import HOST, P, Sent, _fresh_runtime

pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")

DONE, TODO = "https://example.com/done", "https://example.com/todo"


class Written(dict):
    """A table that notes the keys written (a write is what reaches the changelog)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []

    def __setitem__(self, key: bytes, value: dict) -> None:
        self.writes.append(key)
        super().__setitem__(key, value)


def _restarted(monkeypatch: pytest.MonkeyPatch, now: float) -> tuple[Written, float, float, FetcherRuntime]:
    """Tables as a restart left them (DONE and TODO in flight since before the take-over, DONE's result stored)."""
    since, handed_out_at_s = now - 10, now - 15
    urls, hosts = Written(), Written()
    monkeypatch.setattr(topology.app, "squall_tables", Tables(urls=urls, hosts=hosts))
    tomorrow = now + 86400
    urls[DONE.encode()] = UrlRecord(
        url=DONE, key=HOST, status=Status.FETCHED, last_fetch_at_s=handed_out_at_s + 1, next_fetch_at_s=tomorrow
    ).to_dict()
    urls[TODO.encode()] = UrlRecord(url=TODO, key=HOST, next_fetch_at_s=now - 20).to_dict()
    host = HostRecord(key=HOST, delay_s=0.2, page_limit=5, pages_fetched=2)
    hosts[HOST.encode()] = host.with_handout([DONE, TODO], handed_out_at_s).to_dict()
    urls.writes.clear()
    hosts.writes.clear()
    agent_runtime.state().assigned_at = {P: since}
    return urls, since, handed_out_at_s, _fresh_runtime(monkeypatch)


def test_a_stranded_hand_out_whose_result_is_stored_is_written_again_and_not_put_back_as_due(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    urls, since, _at, runtime = _restarted(monkeypatch, now)
    monkeypatch.setattr(runtime.copies, "received", lambda url, at_s, since_s=None: False)
    monkeypatch.setattr(agent_runtime.state(), "results_in", lambda partition: True)
    agent_runtime.state().stranded = {P: {HOST: now - 1}}
    release_stranded(P, now)
    assert urls.writes == [DONE.encode()]  # its result reaches the changelog; the other is not touched
    host = HostRecord.from_dict(topology.app.squall_tables.hosts[HOST.encode()])
    assert host.in_flight == {} and host.next_fetch_at_s >= since + 0.2  # both released, the take-over rule kept
    assert host.pages_fetched == 3  # DONE's request counts against a page limit; TODO made none
    index = agent_runtime.state().indexes[P]
    assert index.take(HOST, now + 1, 10) == [TODO]  # DONE is not due again before tomorrow
    assert index.take(HOST, now + 86400, 10) == [DONE]


def test_a_copy_of_a_hand_out_whose_result_is_stored_is_settled_and_not_fetched(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = time.time()
    urls, _since, at, runtime = _restarted(monkeypatch, now)
    copy = FetchMessage(url=DONE, key=HOST, handed_out_at_s=at)
    assert superseded(runtime, copy)
    assert urls.writes == [DONE.encode()]
    host = HostRecord.from_dict(topology.app.squall_tables.hosts[HOST.encode()])
    assert host.in_flight == {TODO: at}  # its place is free again
    assert host.pages_fetched == 3  # and its request counted, as its lost signal would have (a page limit holds)
    assert not superseded(runtime, FetchMessage(url=TODO, key=HOST, handed_out_at_s=at))  # no result yet: fetched
    assert urls.writes == [DONE.encode()]


def test_a_hand_out_made_since_the_take_over_is_never_looked_up(sent: Sent, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    urls, since, _at, runtime = _restarted(monkeypatch, now)
    read: list[bytes] = []
    get = urls.get
    monkeypatch.setattr(urls, "get", lambda key, default=None: (read.append(key), get(key, default))[1], raising=False)
    topology.app.squall_tables.hosts[HOST.encode()] = (
        HostRecord(key=HOST, delay_s=0.2).with_handout([DONE], since + 1).to_dict()
    )
    assert not superseded(runtime, FetchMessage(url=DONE, key=HOST, handed_out_at_s=since + 1))
    assert urls.writes == [] and read == []
