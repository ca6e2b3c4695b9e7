"""agents.parser.parse_fetched without a broker: what the worker settles itself never becomes a message.

The tables are dicts handed in (as :mod:`tests.unit.test_status_updater` does);
the worker owns every partition, its due indexes built.
"""

from __future__ import annotations

import asyncio

import pytest

import topology  # declares the app
import agents.common as common
from agents import parser
from agents.observe import observed
from agents.worker_state import WorkerState
from squall.net.http import FetchResult
from squall.policy.due_index import DueIndex
from squall.policy.records import FetchMessage

PARTITIONS = topology.settings.topology_partitions
PAGE = (
    b"<html><body><a href='/known'>k</a><a href='/new'>n</a>"
    b"<a href='http://b.example/known'>b</a><a href='http://offsite.example/x'>o</a></body></html>"
)


def _result(body: bytes) -> FetchResult:
    return FetchResult(
        url="http://a.example/page",
        status=200,
        headers=[("Content-Type", "text/html; charset=utf-8")],
        body=body,
        truncated=False,
        ip="127.0.0.1",
        started_at_s=1.0,
        ended_at_s=1.1,
        request_headers=[],
        http_version="HTTP/1.1",
    )


@pytest.fixture
def owned(monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict, WorkerState]:
    urls = {b"http://a.example/known": {}, b"http://b.example/known": {}}
    hosts = {b"a.example": {"key": "a.example", "seeded": True}, b"b.example": {"key": "b.example", "seeded": True}}
    monkeypatch.setattr(topology.app, "squall_tables", common.Tables(urls=urls, hosts=hosts))
    held = WorkerState()
    held.indexes = {p: DueIndex() for p in range(PARTITIONS)}
    monkeypatch.setattr(topology.app, "squall_worker_state", held)
    return urls, hosts, held


def _links(owned_partitions: set[int] | None = None) -> tuple[list[str], float]:
    msg = FetchMessage(url="http://a.example/page", key="a.example", depth=0)
    refused = observed().metrics.links_refused.labels(reason="scope.host")
    before = refused._value.get()
    _, statuses = asyncio.run(parser.parse_fetched(msg, _result(PAGE), 1 << 20))
    return sorted(u for s in statuses for u in (s.url, *s.more_urls)), refused._value.get() - before


def test_known_links_and_links_to_hosts_without_a_record_are_not_sent(owned) -> None:
    links, refused = _links()
    assert links == ["http://a.example/new"]
    assert refused == 1  # offsite.example: never seeded, no record: counted here


def test_a_partition_the_worker_does_not_own_gets_its_links_as_before(owned) -> None:
    owned[2].indexes = {}
    links, refused = _links()
    assert links == [
        "http://a.example/known",
        "http://a.example/new",
        "http://b.example/known",
        "http://offsite.example/x",
    ]
    assert refused == 0
