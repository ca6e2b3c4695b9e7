"""What the agent tests share: the agents' sends recorded per topic (``sent``) and a fresh fetch runtime per test.

Each agent is tested as an agent, through Faust's ``test_context()`` (memory store, no broker).
What is checked is the agent's own loop: decode, call policy, write its tables, emit, and send
bad input to the dead-letter topic without stopping. Politeness, ordering and loss are proven
through a real broker elsewhere (tests/integration).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import topology
from agents import worker_state as agent_runtime
from agents.common import forget_cached_records, new_fetch_runtime
from squall.policy.due_index import DueIndex
from squall.policy.partition import partition_for_key
from squall.worker.fetch_runtime import FetcherRuntime

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
    forget_cached_records()  # and so does the host-record cache (agents.common)
    yield record


def _async(fn):
    async def wrapper(*args: Any, **kwargs: Any) -> None:
        fn(*args, **kwargs)

    return wrapper
