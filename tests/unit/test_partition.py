"""Partition keys and Kafka partitions (squall.policy.partition)."""

from __future__ import annotations

import socket

import pytest
from aiokafka.partitioner import DefaultPartitioner, murmur2
from hypothesis import given
from hypothesis import strategies as st

from squall.policy import partition
from squall.errors import ConfigError, InvalidURL
from squall.policy.partition import is_public_suffix, partition_for_key, partition_key, registered_domain, validate_mode

KEYS = [
    # (url, byHost, byDomain)
    ("http://www.example.com/a", "www.example.com", "example.com"),
    ("http://WWW.Example.COM:8080/a", "www.example.com", "example.com"),
    ("https://a.b.example.com/", "a.b.example.com", "example.com"),
    ("http://news.bbc.co.uk/", "news.bbc.co.uk", "bbc.co.uk"),
    ("http://example.com./", "example.com", "example.com"),
    ("http://192.0.2.1:8080/", "192.0.2.1", "192.0.2.1"),
    ("http://[2001:db8::1]/", "2001:db8::1", "2001:db8::1"),
    ("http://localhost:8000/", "localhost", "localhost"),
    ("http://wiki.corp.internal/", "wiki.corp.internal", "wiki.corp.internal"),
    ("http://xn--bcher-kva.example/", "xn--bcher-kva.example", "xn--bcher-kva.example"),
    ("http://foo.blogspot.com/", "foo.blogspot.com", "blogspot.com"),   # ICANN suffixes only
]


@pytest.mark.parametrize(("url", "by_host", "by_domain"), KEYS)
def test_partition_key_is_the_host_or_the_registered_domain(url: str, by_host: str, by_domain: str) -> None:
    assert partition_key(url, "byHost") == by_host
    assert partition_key(url, "byDomain") == by_domain


@pytest.mark.parametrize(("url", "by_host", "by_domain"), KEYS)
def test_by_ip_producers_key_a_url_by_its_host_until_the_status_updater_resolves_it(
        url: str, by_host: str, by_domain: str) -> None:
    assert partition_key(url, "byIP") == by_host


@pytest.mark.parametrize("mode", ["byip", "host", "", "byDomainName"])
def test_unknown_modes_are_refused_naming_the_key(mode: str) -> None:
    with pytest.raises(ConfigError) as caught:
        validate_mode(mode)
    assert caught.value.key == "partition.url.mode"


@pytest.mark.parametrize("mode", ["byHost", "byDomain"])
def test_implemented_modes_are_valid(mode: str) -> None:
    validate_mode(mode)


def test_a_url_without_host_has_no_partition_key() -> None:
    with pytest.raises(InvalidURL):
        partition_key("mailto:a@example.com", "byHost")


def test_registered_domain_needs_no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("tldextract tried to use the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket, "getaddrinfo", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    partition._extractor.cache_clear()   # build the extractor afresh, with the network cut
    assert registered_domain("www.example.co.jp") == "example.co.jp"


@pytest.mark.parametrize(("name", "expected"), [
    ("com", True), ("co.uk", True), ("example.com", False), ("localhost", False), ("192.0.2.1", False), ("", False),
])
def test_is_public_suffix_tells_suffixes_from_domains(name: str, expected: bool) -> None:
    assert is_public_suffix(name) is expected


# Kafka's org.apache.kafka.common.utils.UtilsTest#testMurmur2: key -> Java signed murmur2.
JAVA_MURMUR2 = [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
]


@pytest.mark.parametrize(("key", "java_hash"), JAVA_MURMUR2)
def test_partition_matches_the_java_default_partitioner(key: str, java_hash: int) -> None:
    # Java: Utils.toPositive(murmur2(bytes)) % numPartitions, toPositive = & 0x7fffffff
    for partitions in (1, 3, 8, 1000, 2**31 - 1):
        assert partition_for_key(key, partitions) == (java_hash & 0x7FFFFFFF) % partitions


# kafka-python's test_murmur2_java_compatibility: partition among 1000 from the Java client.
@pytest.mark.parametrize(("key", "partition"), [("", 681), ("a", 524), ("ab", 434), ("abc", 107),
                                                ("123456789", 566), ("\x00 ", 742)])
def test_partition_among_1000_matches_the_java_client(key: str, partition: int) -> None:
    assert partition_for_key(key, 1000) == partition


@pytest.mark.parametrize("key", ["example.com", "www.bbc.co.uk", "xn--bcher-kva.example", "2001:db8::1", "é"])
def test_partition_equals_aiokafkas_default_partitioner_choice(key: str) -> None:
    partitions = list(range(8))
    assert partition_for_key(key, 8) == DefaultPartitioner()(key.encode("utf-8"), partitions, partitions)


@given(key=st.text(max_size=300), partitions=st.integers(min_value=1, max_value=2**31 - 1))
def test_partition_equals_aiokafkas_pure_python_murmur2_for_any_key(key: str, partitions: int) -> None:
    partition_for_key.cache_clear()
    assert partition_for_key(key, partitions) == (murmur2(key.encode("utf-8")) & 0x7FFFFFFF) % partitions


def test_zero_partitions_is_an_error() -> None:
    with pytest.raises(ValueError):
        partition_for_key("example.com", 0)


@pytest.mark.parametrize(("mode", "by_ip", "parse_mode"),
                         [("byHost", False, "byHost"), ("byDomain", False, "byDomain"), ("byIP", True, "byHost")])
def test_the_partition_mode_is_read_once_from_the_settings(mode, by_ip, parse_mode):
    from squall.policy.partition import PartitionMode
    from tests.unit.settings_helper import settings_of

    read = PartitionMode.from_settings(settings_of({"partition.url.mode": mode, "topology.partitions": 6}))
    assert (read.mode, read.partitions, read.by_ip, read.parse_mode) == (mode, 6, by_ip, parse_mode)
