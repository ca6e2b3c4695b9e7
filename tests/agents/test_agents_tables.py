"""The tables as the agents use them: the host-record cache (agents.common)."""

from __future__ import annotations

import asyncio

import pytest

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
