"""agents.status_apply.handle without a broker: the tables replaced by JSON-encoding dicts (as Faust stores them).

The agent loop itself (decode, route, dead-letter through test_context()) is in tests/agents.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import topology  # declares the app
import agents.common as common
import agents.status_apply as su
from agents.observe import observed
from agents.worker_state import WorkerState, state
from squall.policy.due_index import DueIndex
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.records import StatusMessage
from squall.policy.reasons import Reason, Status

NOW = 1_714_564_800.0
PARTITIONS = topology.settings.topology_partitions


class JsonTable(dict):
    """A dict standing for a Faust table with a JSON value serializer."""

    def __setitem__(self, key: bytes, value: Any) -> None:
        super().__setitem__(key, json.dumps(value).encode())

    def __getitem__(self, key: bytes) -> Any:
        return json.loads(super().__getitem__(key))

    def get(self, key: bytes, default: Any = None) -> Any:
        raw = super().get(key)
        return default if raw is None else json.loads(raw)


@pytest.fixture
def tables(monkeypatch: pytest.MonkeyPatch) -> tuple[JsonTable, JsonTable]:
    urls, hosts = JsonTable(), JsonTable()
    monkeypatch.setattr(topology.app, "squall_tables", common.Tables(urls=urls, hosts=hosts))  # handed in
    held = WorkerState()  # handed in: this test's due indexes
    held.indexes = {p: DueIndex() for p in range(PARTITIONS)}
    monkeypatch.setattr(topology.app, "squall_worker_state", held)
    return urls, hosts


def deliver(msg: StatusMessage, key: str) -> su.Handled:
    return su.handle(msg.to_bytes(), partition_for_key(key, PARTITIONS), NOW)


def host(hosts: JsonTable, key: str) -> dict[str, Any]:
    return hosts.get(key.encode())


def seed(key: str) -> None:
    assert not deliver(StatusMessage(url=f"http://{key}/", seed=True), key).reroutes


def test_a_batch_admits_every_new_url_of_its_hosts_with_one_host_record_each(tables):
    urls, hosts = tables
    seed("a.example")
    batch = StatusMessage(url="http://a.example/1", depth=1, more_urls=["http://a.example/2", "http://A.example/3#x"])
    done = deliver(batch, "a.example")
    assert done.reroutes == [] and done.dead == []
    assert {k.decode() for k in urls} == {
        "http://a.example/",
        "http://a.example/1",
        "http://a.example/2",
        "http://a.example/3",
    }
    assert host(hosts, "a.example")["url_count"] == 4
    assert len(state().index_for_key("a.example")) == 4


def test_a_rediscovered_url_changes_nothing_and_unseeded_hosts_are_refused_and_counted(tables):
    urls, hosts = tables
    seed("a.example")
    deliver(StatusMessage(url="http://a.example/1", depth=1), "a.example")
    before = dict(urls)
    deliver(StatusMessage(url="http://a.example/1", depth=2, more_urls=["http://a.example/"]), "a.example")
    assert dict(urls) == before and host(hosts, "a.example")["url_count"] == 2
    refused = observed().metrics.links_refused.labels(reason="scope.host")
    counted = refused._value.get()
    deliver(StatusMessage(url="http://elsewhere.example/x", depth=1), "elsewhere.example")
    assert b"elsewhere.example" not in hosts  # a host with no record gets none for its refusals
    assert refused._value.get() == counted + 1  # they are the worker's metrics


def test_refusals_of_a_host_with_a_record_are_counted_in_it(tables):
    _, hosts = tables
    seed("a.example")
    hosts[b"elsewhere.example"] = {"key": "elsewhere.example"}  # e.g. a host that held URLs once
    deliver(StatusMessage(url="http://elsewhere.example/x", depth=1), "elsewhere.example")
    assert host(hosts, "elsewhere.example")["rejected"] == {"scope.host": 1}


def test_the_parse_steps_refusal_counts_are_added_to_their_hosts(tables):
    _, hosts = tables
    seed("a.example")
    batch = StatusMessage(url="http://a.example/1", depth=1, rejected={"a.example": {Reason.TRAP_DEPTH: 2}})
    deliver(batch, "a.example")
    deliver(batch, "a.example")  # a re-delivery counts again (the counts are statistics, at least once)
    assert host(hosts, "a.example")["rejected"] == {"trap.depth": 4}


def test_urls_of_a_batch_owned_by_another_partition_are_sent_there_one_by_one(tables):
    urls, _ = tables
    a_part = partition_for_key("a.example", PARTITIONS)
    other = next(f"h{i}.example" for i in range(100) if partition_for_key(f"h{i}.example", PARTITIONS) != a_part)
    seed("a.example")
    done = deliver(StatusMessage(url="http://a.example/1", more_urls=[f"http://{other}/p"]), "a.example")
    assert b"http://a.example/1" in urls and f"http://{other}/p".encode() not in urls
    assert [(k, p) for k, p, _ in done.reroutes] == [(other.encode(), partition_for_key(other, PARTITIONS))]
    assert StatusMessage.from_bytes(done.reroutes[0][2]).urls() == [f"http://{other}/p"]


def test_a_message_for_another_partition_is_sent_on_whole(tables):
    a_part = partition_for_key("a.example", PARTITIONS)
    raw = StatusMessage(url="http://a.example/1", more_urls=["http://a.example/2"]).to_bytes()
    done = su.handle(raw, (a_part + 1) % PARTITIONS, NOW)
    assert done.reroutes == [(b"a.example", a_part, raw)]


def test_bad_input_is_dead_lettered_and_the_rest_of_the_batch_applied(tables):
    urls, _ = tables
    assert su.handle(b"not json", 0, NOW).dead
    seed("a.example")
    done = deliver(StatusMessage(url="http://a.example/1", more_urls=["http://[bad/x"]), "a.example")
    assert len(done.dead) == 1 and b"http://a.example/1" in urls


def test_a_sitemap_marker_on_a_known_url_still_reaches_the_record(tables):
    urls, _ = tables
    seed("a.example")
    deliver(StatusMessage(url="http://a.example/sm.xml", depth=1), "a.example")
    deliver(StatusMessage(url="http://a.example/sm.xml", depth=1, metadata={"isSitemap": ["true"]}), "a.example")
    assert urls.get(b"http://a.example/sm.xml")["metadata"].get("isSitemap") == ["true"]


def test_a_fetch_result_updates_the_record(tables):
    urls, _ = tables
    seed("a.example")
    deliver(
        StatusMessage(url="http://a.example/", status=Status.FETCHED, fetched_at_s=NOW, http_status=200), "a.example"
    )
    assert urls.get(b"http://a.example/")["status"] == "FETCHED"


def test_an_earlier_result_delivered_again_leaves_a_url_awaiting_a_newer_hand_out_out_of_the_due_index(tables):
    """After a rebalance Kafka re-reads a status partition from its committed offset: the re-read result of an
    earlier attempt must not index a URL that was handed out again since, or it is handed out twice."""
    urls, hosts = tables
    url, key = "http://a.example/", "a.example"
    seed(key)
    index = state().index_for_key(key)
    failed = StatusMessage(url=url, status=Status.FETCH_ERROR, fetched_at_s=NOW - 10, http_status=500)
    deliver(failed, key)
    assert index.take(key, NOW + 10**9, 10) == [url]  # due again later: handed out (attempt 2) at NOW - 5
    common.save_host(HostRecord.from_dict(hosts[key.encode()]).with_handout([url], NOW - 5))  # as the spout does
    deliver(failed, key)  # the same result, read again
    assert len(index) == 0 and urls.get(url.encode())["last_fetch_at_s"] == NOW - 10
    deliver(StatusMessage(url=url, status=Status.FETCHED, fetched_at_s=NOW - 4, http_status=200), key)
    assert index.take(key, NOW + 10**9, 10) == [url]  # the newer hand-out's result indexes it again
