"""The tables as the agents use them: the host-record cache (agents.common) and the persisted changelog offsets."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from faust.types import TP

import topology
from agents import upkeep
from agents.common import Tables, forget_cached_hosts, load_host, save_host, stored_host, tables
from squall.policy.frontier import HostRecord

from .agent_helper import HOST, Sent

pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")


def test_a_saved_host_record_is_read_back_from_the_cache_until_a_rebalance_empties_it(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    hosts: dict[bytes, dict] = {}
    monkeypatch.setattr(topology.app, "squall_tables", Tables(urls={}, hosts=hosts))
    saved = HostRecord(key=HOST, delay_s=2.0).with_handout(["https://example.com/1"], 10.0)
    save_host(saved)
    assert HostRecord.from_dict(hosts[HOST.encode()]) == saved  # written through to the table
    hosts[HOST.encode()] = HostRecord(key=HOST, delay_s=7.0).to_dict()  # as a recovery writes the store
    assert load_host(HOST) is saved  # not read again: the cache answers
    asyncio.run(upkeep._drop_revoked(None, revoked=set()))  # any rebalance empties it
    assert load_host(HOST).delay_s == 7.0
    hosts[HOST.encode()] = HostRecord(key=HOST, delay_s=9.0).to_dict()
    forget_cached_hosts()
    assert stored_host(HOST) == HostRecord(key=HOST, delay_s=9.0)
    assert stored_host("absent.example") is None and len(tables().host_cache) == 1  # an absent record is not cached


def test_the_hosts_table_writes_its_persisted_offsets_at_most_once_a_second_and_all_at_a_rebalance(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = topology.hosts_table
    written: list[tuple[TP, int]] = []
    monkeypatch.setattr(table.data, "set_persisted_offset", lambda tp, offset: written.append((tp, offset)))
    monkeypatch.setattr(table, "_offsets", None)
    tp = TP(table.changelog_topic.get_topic_name(), 1)

    def acked(offset: int) -> SimpleNamespace:
        return SimpleNamespace(result=lambda: SimpleNamespace(topic_partition=tp, offset=offset))

    for offset in (3, 4, 5):
        table._on_changelog_sent(acked(offset))
    assert written == [(tp, 3)]  # the first at once, the others kept
    rebalanced: list[bool] = []

    async def faust_rebalance(*_args, **_kw) -> None:  # Faust's: closes the stores of revoked partitions
        rebalanced.append(written[-1] == (tp, 5))

    monkeypatch.setattr(table.data, "on_rebalance", faust_rebalance)
    asyncio.run(table.on_rebalance(set(), {tp}, set()))
    assert written == [(tp, 3), (tp, 5)] and rebalanced == [True]  # written before the stores closed
