"""The partition key of a URL and the Kafka partition of a key (``partition.url.mode``).

The key groups URLs into one fetch queue (StormCrawler's ``partition.url.mode``):
``byHost`` is the host name, ``byDomain`` the registered domain from the
Public Suffix List snapshot bundled with tldextract (never fetched: no
network), ``byIP`` the address the host resolves to — which needs DNS, so
:func:`partition_key` gives the host name as a provisional key there and
the status updater routes the URL to its address's partition
(:mod:`squall.policy.address_key`). Every topic is keyed
by this string as UTF-8 bytes and uses Kafka's default partitioner, so
:func:`partition_for_key` tells which partition (and so which worker) owns a
queue.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from functools import cache, lru_cache
from typing import TYPE_CHECKING

import tldextract
from murmurhash2 import murmurhash2

from squall.errors import ConfigError
from squall.policy.urls import host_of

if TYPE_CHECKING:
    from squall.settings import Settings

MODES = ("byHost", "byDomain", "byIP")
_KAFKA_MURMUR2_SEED = 0x9747B28C  # org.apache.kafka.common.utils.Utils.murmur2


@dataclass(frozen=True)
class PartitionMode:
    """How this crawl keys and spreads its URLs: the one reading of the partition settings.

    ``mode``: ``partition.url.mode`` (one of :data:`MODES`); ``partitions``:
    ``topology.partitions``; ``by_ip``: whether the mode is ``byIP``;
    ``parse_mode``: the mode the parse step batches outlinks by (byIP keys
    need a DNS answer the parse step does not have: its batches group by
    host name).
    """

    mode: str
    partitions: int

    @property
    def by_ip(self) -> bool:
        return self.mode == "byIP"

    @property
    def parse_mode(self) -> str:
        return "byHost" if self.by_ip else self.mode

    @classmethod
    def from_settings(cls, settings: Settings) -> PartitionMode:
        return cls(mode=settings.partition_url_mode, partitions=settings.topology_partitions)


@cache
def _extractor() -> tldextract.TLDExtract:
    """The one offline extractor: bundled suffix list snapshot, no download, no cache directory."""
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)


def registered_domain(host: str) -> str:
    """Registered domain of ``host`` (``www.bbc.co.uk`` → ``bbc.co.uk``), lower case.

    Uses the ICANN section of the Public Suffix List bundled with tldextract
    (private suffixes such as ``blogspot.com`` are not suffixes here). An IP
    address, a host without a known public suffix (``localhost``,
    ``intranet.corp``) or a bare public suffix keeps the host itself.
    """
    host = host.lower().rstrip(".")
    if is_ip_literal(host):
        return host
    return _extractor()(host).top_domain_under_public_suffix or host


def is_public_suffix(name: str) -> bool:
    """True when ``name`` is itself a public suffix (``com``, ``co.uk``), not a domain below one."""
    name = name.lower().rstrip(".")
    if not name or is_ip_literal(name):
        return False
    result = _extractor()(name)
    return result.suffix == name and not result.domain


@functools.lru_cache(maxsize=4096)
def is_ip_literal(host: str) -> bool:
    """True when ``host`` is an IPv4 or IPv6 address (brackets allowed), not a name; remembered per host."""
    try:
        ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return True


def validate_mode(mode: str) -> None:
    """Check a ``partition.url.mode`` value.

    Raises:
        ConfigError: (key ``partition.url.mode``) for a mode other than byHost, byDomain, byIP.
    """
    if mode not in MODES:
        raise ConfigError("partition.url.mode", f"unknown mode {mode!r}; use byHost, byDomain or byIP")


def partition_key(url: str, mode: str) -> str:
    """Partition key of a canonical ``url``: its host (``byHost``), registered domain (``byDomain``).

    ``byIP``: the host too — the provisional key of a producer that cannot
    resolve; the status updater resolves the host and routes the URL to its
    address (:func:`squall.policy.address_key.status_key`). The host is lower
    case, without port; an IPv6 address is given without brackets. Source:
    StormCrawler's ``partition.url.mode``.

    Raises:
        ConfigError: ``mode`` is unknown (see :func:`validate_mode`).
        InvalidURL: ``url.host`` when the URL has no host, ``url.malformed`` when it cannot be split.
    """
    validate_mode(mode)
    host = host_of(url).rstrip(".")
    return registered_domain(host) if mode == "byDomain" else host


@lru_cache(maxsize=65536)
def partition_for_key(key: str, partitions: int) -> int:
    """Kafka partition of ``key`` among ``partitions``: ``(murmur2(utf8(key)) & 0x7fffffff) % partitions``.

    The Java client's default partitioner for keyed records (Kafka's
    ``Utils.murmur2`` with seed ``0x9747b28c``; aiokafka's
    ``DefaultPartitioner`` computes the same), so producers in any language
    agree. The hash is the ``murmurhash2`` package's (compiled; about 0.2 µs
    against 4–9 µs for aiokafka's pure-Python one, which a property test
    compares it with). Memoized (bounded): the parse step asks it for every
    link while a page's links share a few hosts.

    Raises:
        ValueError: ``partitions`` is less than 1.
    """
    if partitions < 1:
        raise ValueError(f"partitions must be at least 1, got {partitions}")
    return (murmurhash2(key.encode("utf-8"), _KAFKA_MURMUR2_SEED) & 0x7FFFFFFF) % partitions
