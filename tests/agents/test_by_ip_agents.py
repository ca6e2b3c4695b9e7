"""The byIP paths of the status updater, as an agent through Faust's ``test_context()`` (no broker).

The worker's resolutions (:func:`agents.common.addresses`, handed in per test) are filled in,
or its resolver replaced, so no DNS is done; the mode is switched on by
handing the agents a config with ``by_ip`` set.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

import topology
from agents.addresses import AddressService
from agents.common import config, new_fetch_runtime
from agents.status_updater import status_updater
from squall.errors import FetchError
from squall.policy.address_key import AddressCache, AddressConfig, Resolution
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.reasons import Reason
from squall.policy.records import FetchMessage
from squall.policy.schedule import UrlRecord

from .agent_helper import PARTITIONS, Sent

# A Faust setting changed after it was read (the store of tests/agents/conftest.py set late) fails the test.
pytestmark = pytest.mark.filterwarnings("error::faust.exceptions.AlreadyConfiguredWarning")

HOST = "shop.example"
URL = f"https://{HOST}/p"


def _two_addresses_on_other_partitions() -> tuple[str, str]:
    """Two addresses whose partitions differ from each other and from the host name's."""
    home = partition_for_key(HOST, PARTITIONS)
    found: list[str] = []
    for n in range(1, 250):
        ip = f"192.0.2.{n}"
        p = partition_for_key(ip, PARTITIONS)
        if p != home and all(partition_for_key(f, PARTITIONS) != p for f in found):
            found.append(ip)
        if len(found) == 2:
            return found[0], found[1]
    raise AssertionError("no two addresses on distinct partitions")


OLD_IP, NEW_IP = _two_addresses_on_other_partitions()


class _Resolver:
    """A resolver answering with ``resolve`` (by default: no host resolves)."""

    def __init__(self, resolve=None) -> None:
        self._resolve = resolve

    async def resolve(self, host: str, port: int) -> list[str]:
        if self._resolve is None:
            raise FetchError(Reason.FETCH_DNS, f"{host} is not resolved in this test")
        return await self._resolve(host, port)


@pytest.fixture()
def by_ip(monkeypatch: pytest.MonkeyPatch, sent: Sent) -> Iterator[AddressCache]:
    monkeypatch.setattr(topology.app, "squall_agent_config", replace(config(), by_ip=True))  # handed in
    service = AddressService(AddressConfig.from_settings(topology.settings), _Resolver())
    monkeypatch.setattr(topology.app, "squall_addresses", service)  # handed in
    cache = service.cache
    yield cache


async def test_a_url_of_a_resolved_host_is_routed_to_its_addresses_partition(by_ip: AddressCache, sent: Sent) -> None:
    by_ip.put(HOST, 443, Resolution.resolved([OLD_IP], time.time()))
    async with status_updater.test_context() as agent:
        await agent.put(
            key=HOST.encode(), value=f'{{"url": "{URL}"}}'.encode(), partition=partition_for_key(HOST, PARTITIONS)
        )
    assert [(k, p) for k, _v, p in sent.of(topology.status_topic)] == [
        (OLD_IP.encode(), partition_for_key(OLD_IP, PARTITIONS))
    ]
    assert URL.encode() not in topology.urls_table  # no record on the host name's partition


async def test_a_url_arriving_on_its_addresses_partition_is_recorded_under_the_address(
    by_ip: AddressCache, sent: Sent
) -> None:
    by_ip.put(HOST, 443, Resolution.resolved([OLD_IP], time.time()))
    async with status_updater.test_context() as agent:
        await agent.put(
            key=OLD_IP.encode(),
            value=f'{{"url": "{URL}", "seed": true}}'.encode(),
            partition=partition_for_key(OLD_IP, PARTITIONS),
        )
    assert UrlRecord.from_dict(topology.urls_table[URL.encode()]).key == OLD_IP
    host = HostRecord.from_dict(topology.hosts_table[OLD_IP.encode()])
    assert host.seeded_hosts == [HOST]
    assert not host.seeded_for("other.example", True)  # a name sharing the address is not seeded with it


async def test_an_unresolved_host_is_resolved_off_the_loop_then_routed(
    by_ip: AddressCache, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        await asyncio.sleep(0.05)
        return [NEW_IP]

    topology.app.squall_addresses.resolver = _Resolver(resolve)
    async with status_updater.test_context() as agent:
        await agent.put(
            key=HOST.encode(), value=f'{{"url": "{URL}"}}'.encode(), partition=partition_for_key(HOST, PARTITIONS)
        )
        assert sent.of(topology.status_topic) == []  # the loop went on; the lookup runs in its own task
        await asyncio.sleep(0.2)
    assert [(k, p) for k, _v, p in sent.of(topology.status_topic)] == [
        (NEW_IP.encode(), partition_for_key(NEW_IP, PARTITIONS))
    ]
    assert by_ip.get(HOST, 443).address == NEW_IP


async def test_an_unresolvable_host_is_keyed_by_its_own_name(
    by_ip: AddressCache, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        raise FetchError(Reason.FETCH_DNS, host)

    topology.app.squall_addresses.resolver = _Resolver(resolve)
    async with status_updater.test_context() as agent:
        await agent.put(key=b"x", value=f'{{"url": "{URL}"}}'.encode(), partition=0)
        await asyncio.sleep(0.1)
    assert [(k, p) for k, _v, p in sent.of(topology.status_topic)] == [
        (HOST.encode(), partition_for_key(HOST, PARTITIONS))
    ]
    assert by_ip.get(HOST, 443).reason is Reason.FETCH_DNS


async def test_a_record_whose_host_moved_goes_with_its_message_and_is_deleted_here(
    by_ip: AddressCache, sent: Sent
) -> None:
    old_partition = partition_for_key(OLD_IP, PARTITIONS)
    by_ip.put(HOST, 443, Resolution.resolved([OLD_IP], time.time()))
    async with status_updater.test_context() as agent:
        await agent.put(
            key=OLD_IP.encode(), value=f'{{"url": "{URL}", "seed": true}}'.encode(), partition=old_partition
        )
    by_ip.put(HOST, 443, Resolution.resolved([NEW_IP], time.time() + 1))  # the host moved
    moved_msg = (
        f'{{"url": "{URL}", "status": "DISCOVERED", "reason": "fetch.address_changed", '
        f'"fetched_at_s": {time.time()}, "retry_after_s": {time.time()}}}'
    )
    async with status_updater.test_context() as agent:
        await agent.put(key=OLD_IP.encode(), value=moved_msg.encode(), partition=old_partition)
    ((key, value, partition),) = sent.of(topology.status_topic)
    assert (key, partition) == (NEW_IP.encode(), partition_for_key(NEW_IP, PARTITIONS))
    assert value["moved"]["key"] == NEW_IP and value["moved"]["url"] == URL and value["seed"] is True
    assert URL.encode() not in topology.urls_table
    # on the new partition: the record arrives with it, under the new key, the name still seeded
    async with status_updater.test_context() as agent:
        await agent.put(key=key, value=json.dumps(value).encode(), partition=partition)
    record = UrlRecord.from_dict(topology.urls_table[URL.encode()])
    assert record.key == NEW_IP and record.reason == "fetch.address_changed"
    assert HostRecord.from_dict(topology.hosts_table[NEW_IP.encode()]).seeded_for(HOST, True)


# ---------------------------------------------------------------- fetcher: the route before the turn


def _hand_out(key: str) -> FetchMessage:
    return FetchMessage(url=URL, key=key, handed_out_at_s=1000.0)


@pytest.mark.parametrize(
    "answer, key, status, reason",
    [
        (FetchError(Reason.FETCH_DNS, HOST), HOST, "FETCH_ERROR", "fetch.dns"),  # retried later
        (FetchError(Reason.FETCH_DNS, HOST), OLD_IP, "FETCH_ERROR", "fetch.dns"),
        ([NEW_IP], OLD_IP, "DISCOVERED", "fetch.address_changed"),  # moves, unattempted
        ([NEW_IP], HOST, "DISCOVERED", "fetch.address_changed"),  # resolvable again
    ],
)
async def test_the_fetcher_ends_or_moves_a_url_before_its_turn(
    by_ip: AddressCache, sent: Sent, monkeypatch: pytest.MonkeyPatch, answer: object, key: str, status: str, reason: str
) -> None:
    from agents import fetcher

    async def resolve(host: str, port: int) -> list[str]:
        if isinstance(answer, Exception):
            raise answer
        return answer

    topology.app.squall_addresses.resolver = _Resolver(resolve)
    async with status_updater.test_context():  # a current app and tables for the hosts-table read
        statuses, ended, _pace = await fetcher._address_route(new_fetch_runtime(), _hand_out(key))
    assert [(s.url, s.status.value, s.reason) for s in statuses] == [(URL, status, reason)]
    assert ended.requested is False  # nothing was sent to the host: its pace is not spent


async def test_the_fetcher_connects_to_the_address_its_key_names(by_ip: AddressCache, sent: Sent) -> None:
    from agents import fetcher
    from squall.policy.address_key import Connect

    by_ip.put(HOST, 443, Resolution.resolved([OLD_IP], time.time()))
    async with status_updater.test_context():
        assert await fetcher._address_route(new_fetch_runtime(), _hand_out(OLD_IP)) == Connect(OLD_IP)


async def test_a_batch_of_outlinks_goes_on_per_address_and_waits_for_an_unresolved_host(
    by_ip: AddressCache, sent: Sent, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def resolve(host: str, port: int) -> list[str]:
        return [NEW_IP]

    topology.app.squall_addresses.resolver = _Resolver(resolve)
    by_ip.put("a.example", 443, Resolution.resolved([OLD_IP], time.time()))
    by_ip.put("b.example", 443, Resolution.resolved([OLD_IP], time.time()))
    batch = {
        "url": "https://a.example/1",
        "more_urls": ["https://b.example/2", "https://a.example/3", "https://new.example/4"],
        "depth": 1,
    }
    async with status_updater.test_context() as agent:
        await agent.put(key=b"a.example", value=json.dumps(batch).encode(), partition=0)
        await asyncio.sleep(0.1)
    routed = [(k, p, [v["url"], *v.get("more_urls", [])]) for k, v, p in sent.of(topology.status_topic)]
    assert routed == [
        (
            OLD_IP.encode(),
            partition_for_key(OLD_IP, PARTITIONS),
            ["https://a.example/1", "https://b.example/2", "https://a.example/3"],
        ),
        (NEW_IP.encode(), partition_for_key(NEW_IP, PARTITIONS), ["https://new.example/4"]),
    ]
