"""squall.policy.address_key: the byIP key of a host, its cache (fake clock) and the fetcher's route."""

from __future__ import annotations

import pytest

from squall.policy.address_key import (AddressCache, AddressConfig, Connect, Fail, Move, Resolution, fetch_route,
                                key_address, provisional_key, status_key)
from squall.errors import ConfigError
from squall.policy.reasons import Reason
from tests.unit.settings_helper import from_settings

TTL_S = 300.0


def cache(size: int = 100) -> AddressCache:
    return AddressCache(AddressConfig(ttl_s=TTL_S, size=size))


@pytest.mark.parametrize("addresses, key", [
    (["10.0.0.2", "10.0.0.1"], "10.0.0.1"),                 # the lowest, whatever the answer's order
    (["10.0.0.1", "10.0.0.2"], "10.0.0.1"),
    (["2001:db8::1", "192.0.2.7"], "192.0.2.7"),            # IPv4 before IPv6
    (["[2001:db8::2]", "2001:db8::1"], "2001:db8::1"),      # brackets dropped
    (["fe80::1%eth0"], "fe80::1"),                          # a zone is not part of the key
    (["10.0.0.9", "not an address"], "10.0.0.9"),
    ([], None),
    (["garbage"], None),
])
def test_the_key_of_a_host_is_its_lowest_address(addresses: list[str], key: str | None) -> None:
    assert key_address(addresses) == key


def test_a_resolution_without_any_address_is_a_dns_failure() -> None:
    assert Resolution.resolved([], 5.0) == Resolution(None, Reason.FETCH_DNS, 5.0)


def test_a_resolved_host_is_keyed_by_its_address_an_unusable_one_by_its_own_name() -> None:
    assert status_key("A.Example.", Resolution.resolved(["192.0.2.1"], 0.0)) == "192.0.2.1"
    assert status_key("A.Example.", Resolution.failed(Reason.FETCH_DNS, 0.0)) == "a.example"
    assert status_key("a.example", Resolution.failed(Reason.FETCH_BLOCKED_ADDRESS, 0.0)) == "a.example"
    assert provisional_key("WWW.Example.COM.") == "www.example.com"


@pytest.mark.parametrize("age_s, fresh", [(0.0, True), (TTL_S - 0.001, True), (TTL_S, False), (TTL_S * 3, False),
                                          (-1.0, False)])   # a clock that went back: resolve again
def test_a_resolution_is_fresh_for_the_ttl(age_s: float, fresh: bool) -> None:
    assert Resolution.resolved(["192.0.2.1"], 1000.0).fresh(1000.0 + age_s, TTL_S) is fresh


def test_the_cache_keeps_an_expired_entry_for_the_status_updater_but_not_as_fresh() -> None:
    c = cache()
    c.put("a.example", 80, Resolution.resolved(["192.0.2.1"], 1000.0))
    assert c.fresh("A.EXAMPLE.", 80, 1000.0 + TTL_S / 2).address == "192.0.2.1"
    assert c.fresh("a.example", 80, 1000.0 + TTL_S) is None
    assert c.get("a.example", 80).address == "192.0.2.1"          # stale, still known
    assert c.get("a.example", 443) is None                          # pins are per port


def test_an_older_answer_never_replaces_a_newer_one() -> None:
    c = cache()
    c.put("a.example", 80, Resolution.resolved(["192.0.2.2"], 2000.0))
    c.put("a.example", 80, Resolution.resolved(["192.0.2.1"], 1000.0))   # a slow lookup that ended late
    assert c.get("a.example", 80).address == "192.0.2.2"
    c.put("a.example", 80, Resolution.resolved(["192.0.2.3"], 3000.0))
    assert c.get("a.example", 80).address == "192.0.2.3"


def test_the_cache_drops_the_least_recently_used_entry_beyond_its_size() -> None:
    c = cache(size=2)
    c.put("a.example", 80, Resolution.resolved(["192.0.2.1"], 0.0))
    c.put("b.example", 80, Resolution.resolved(["192.0.2.2"], 0.0))
    assert c.get("a.example", 80) is not None                        # a is now the most recent
    c.put("c.example", 80, Resolution.resolved(["192.0.2.3"], 0.0))
    assert len(c) == 2
    assert c.get("b.example", 80) is None
    assert c.get("a.example", 80) is not None and c.get("c.example", 80) is not None


@pytest.mark.parametrize("key, resolution, route", [
    ("192.0.2.1", Resolution.resolved(["192.0.2.1"], 0.0), Connect("192.0.2.1")),
    ("192.0.2.1", Resolution.resolved(["192.0.2.9"], 0.0), Move("192.0.2.9")),       # the host moved
    ("a.example", Resolution.resolved(["192.0.2.1"], 0.0), Move("192.0.2.1")),       # resolvable again
    ("a.example", Resolution.failed(Reason.FETCH_DNS, 0.0), Fail(Reason.FETCH_DNS)),
    ("192.0.2.1", Resolution.failed(Reason.FETCH_DNS, 0.0), Fail(Reason.FETCH_DNS)),  # stays, retried there
    ("a.example", Resolution.failed(Reason.FETCH_BLOCKED_ADDRESS, 0.0), Fail(Reason.FETCH_BLOCKED_ADDRESS)),
])
def test_the_fetcher_connects_to_the_keys_address_moves_or_fails(key: str, resolution: Resolution,
                                                                  route: object) -> None:
    assert fetch_route(key, "a.example", resolution) == route


@pytest.mark.parametrize("values, key", [
    ({"partition.ip.cache.secs": 0, "partition.ip.cache.size": 10}, "partition.ip.cache.secs"),
    ({"partition.ip.cache.secs": -5.0, "partition.ip.cache.size": 10}, "partition.ip.cache.secs"),
    ({"partition.ip.cache.secs": "300", "partition.ip.cache.size": 10}, "partition.ip.cache.secs"),
    ({"partition.ip.cache.secs": 300, "partition.ip.cache.size": 0}, "partition.ip.cache.size"),
    ({"partition.ip.cache.secs": 300, "partition.ip.cache.size": True}, "partition.ip.cache.size"),
])
def test_a_cache_setting_out_of_range_names_its_key(values: dict, key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        from_settings(AddressConfig, values)
    assert caught.value.key == key


def test_the_cache_settings_are_read_in_seconds_and_entries() -> None:
    assert from_settings(AddressConfig, {"partition.ip.cache.secs": 60, "partition.ip.cache.size": 5}) == \
        AddressConfig(ttl_s=60.0, size=5)
