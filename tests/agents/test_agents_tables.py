"""The tables as the agents use them: the host- and URL-record caches (agents.common); their changelog records at squall's producer."""

from __future__ import annotations

import asyncio
import json

import pytest
from faust.types import TP

import topology
from agents import upkeep
from agents.common import (
    Tables,
    delete_url,
    forget_cached_records,
    load_host,
    save_host,
    save_url,
    stored_host,
    stored_url,
    tables,
)
from agents.status_updater import status_updater
from squall.policy.frontier import HostRecord
from squall.policy.schedule import Status, UrlRecord
from squall.worker.changelog_producer import Producer

from .agent_helper import HOST, P, Sent

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
    forget_cached_records()
    assert stored_host(HOST) == HostRecord(key=HOST, delay_s=9.0)
    assert stored_host("absent.example") is None and len(tables().host_cache) == 1  # an absent record is not cached


URL = "https://example.com/a"


def test_a_saved_url_record_is_read_back_from_the_cache_until_deleted_or_a_rebalance_empties_it(
    sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    urls: dict[bytes, dict] = {}
    monkeypatch.setattr(topology.app, "squall_tables", Tables(urls=urls, hosts={}))
    saved = UrlRecord(url=URL, key=HOST, next_fetch_at_s=10.0)
    save_url(saved)
    assert UrlRecord.from_dict(urls[URL.encode()]) == saved  # written through to the table
    urls[URL.encode()] = UrlRecord(url=URL, key=HOST, status=Status.FETCHED).to_dict()  # as a recovery writes the store
    assert stored_url(URL) is saved  # not read again: the cache answers
    asyncio.run(upkeep._rebuild_after_recovery(None))  # the end of any rebalance empties it
    assert stored_url(URL) == UrlRecord(url=URL, key=HOST, status=Status.FETCHED)  # read from the table, then cached
    assert stored_url(URL) is stored_url(URL)
    delete_url(URL)
    assert urls == {} and stored_url(URL) is None  # gone from both
    with pytest.raises(KeyError):
        delete_url(URL)
    assert stored_url("https://example.com/absent") is None and len(tables().url_cache) == 0  # absence is not cached


async def test_a_table_write_in_an_agent_s_event_queues_its_changelog_record_at_squall_s_producer(sent: Sent) -> None:
    producer = topology.app.producer  # not started in these tests: what is queued stays queued
    assert isinstance(producer, Producer), "the app's transport does not build squall's producer"
    urls = TP(topology.urls_table.changelog_topic.get_topic_name(), P)
    hosts = TP(topology.hosts_table.changelog_topic.get_topic_name(), P)
    async with status_updater.test_context() as agent:
        await agent.put(key=HOST.encode(), value=b'{"url": "https://example.com/c", "seed": true}', partition=P)
    key, value = producer.changelog_queued(urls)[-1]
    assert key == b"https://example.com/c" and value is not None
    assert json.loads(value) == topology.urls_table[b"https://example.com/c"]  # the bytes the store has too
    assert producer.changelog_queued(hosts)[-1][0] == HOST.encode()
