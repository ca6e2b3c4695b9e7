"""Small helpers the agents share (a helper, no agent).

Host and URL records (read through bounded caches), the agents' configuration objects and canonicalizer memo
(:func:`config`), the fetch runtime (:func:`fetch_runtime`) and the dead-letter topic.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from agents.addresses import AddressService
from squall.net.http import HttpConfig, HttpFetcher
from squall.policy import fetch_decision as fd
from squall.policy.address_key import AddressConfig
from squall.policy.frontier import HostRecord
from squall.policy.handout import HandoutConfig
from squall.policy.memo import BoundedMemo, V
from squall.policy.netsafety import NetworkPolicy
from squall.policy.pace import PaceConfig
from squall.policy.partition import PartitionMode
from squall.policy.render_policy import RenderConfig
from squall.policy.robots_rules import product_token
from squall.policy.schedule import ScheduleConfig, UrlRecord
from squall.policy.scope import LinkJudge, ScopeConfig
from squall.policy.sitemaps import SitemapConfig
from squall.policy.urls import CanonicalCache, NormalizerConfig
from squall.settings import Settings
from squall.worker.fetch_runtime import FetcherRuntime
from squall.worker.group_lease import GroupLease
from topology import app, deadletter_topic, hosts_table, settings, urls_table

log = logging.getLogger("squall.agents")


@dataclass(frozen=True)
class AgentConfig:
    """The configuration objects the agents use, built from the settings once, when the worker first needs them.

    The partition mode for the agents: ``mode``, ``by_ip``, ``partitions``
    and ``parse_mode`` are those of :class:`squall.policy.partition.PartitionMode`
    (the one reading of ``partition.url.mode`` and ``topology.partitions``,
    shared with the fetch runtime). Plain values are read from the
    settings where they are used; a test hands in another config by setting
    ``app.squall_agent_config``.
    """

    mode: str
    by_ip: bool
    partitions: int
    parse_mode: str
    normalizer: NormalizerConfig
    canonical: CanonicalCache  # one memo per worker, shared by the parse step and the status updater
    scope: ScopeConfig
    judge: LinkJudge
    schedule: ScheduleConfig
    pace: PaceConfig
    handout: HandoutConfig
    sitemap: SitemapConfig
    render: RenderConfig
    network: NetworkPolicy
    agent_token: str  # the robots.txt product token of http.agent.name
    mimetypes: tuple[str, ...]  # parser.mimetypes
    transfer: tuple[str, ...]  # metadata.transfer
    persist: tuple[str, ...]  # metadata.persist

    @classmethod
    def from_settings(cls, s: Settings) -> AgentConfig:
        scope = ScopeConfig.from_settings(s)
        partition = PartitionMode.from_settings(s)
        normalizer = NormalizerConfig.from_settings(s)
        return cls(
            mode=partition.mode,
            by_ip=partition.by_ip,
            partitions=partition.partitions,
            parse_mode=partition.parse_mode,
            normalizer=normalizer,
            canonical=CanonicalCache(normalizer),
            scope=scope,
            judge=LinkJudge(scope),
            schedule=ScheduleConfig.from_settings(s),
            pace=PaceConfig.from_settings(s),
            handout=HandoutConfig.from_settings(s),
            sitemap=SitemapConfig.from_settings(s),
            render=RenderConfig.from_settings(s),
            network=NetworkPolicy.from_settings(s),
            agent_token=product_token(s.http_agent_name),
            mimetypes=tuple(s.parser_mimetypes),
            transfer=tuple(s.metadata_transfer),
            persist=tuple(s.metadata_persist),
        )


def config() -> AgentConfig:
    """The worker's :class:`AgentConfig`, built on first use and held by the app (``app.squall_agent_config``)."""
    held = app.squall_agent_config
    if held is None:
        held = app.squall_agent_config = AgentConfig.from_settings(settings)
    return held


HOST_CACHE_ENTRIES = 4096  # decoded host records kept per worker (a page reads its host's record 2-3 times)
URL_CACHE_ENTRIES = 16384  # decoded URL records kept per worker (a URL is read at its hand-out and at its result)


@dataclass(frozen=True)
class Tables:
    """The tables the agents read and write: ``urls`` (URL bytes → UrlRecord dict), ``hosts`` (key bytes → HostRecord dict).

    The worker's are :mod:`topology`'s; a test hands in its own by setting ``app.squall_tables``.
    ``host_cache``: the last host records read or written (key → record),
    written through by :func:`save_host`, the only writer of ``hosts``;
    ``url_cache``: the same for URL records (URL → record), written through
    by :func:`save_url` and :func:`delete_url`, the only writers of
    ``urls``. Both are emptied at every rebalance
    (:func:`forget_cached_records`), when a recovery may change the stores
    beneath them. Records are immutable, so a cached one is the stored one.
    """

    urls: MutableMapping[bytes, Any]
    hosts: MutableMapping[bytes, Any]
    host_cache: BoundedMemo[str, HostRecord] = field(default_factory=lambda: BoundedMemo(HOST_CACHE_ENTRIES))
    url_cache: BoundedMemo[str, UrlRecord] = field(default_factory=lambda: BoundedMemo(URL_CACHE_ENTRIES))


def tables() -> Tables:
    """The agents' :class:`Tables`, held by the app (``app.squall_tables``; the topology's by default)."""
    held = app.squall_tables
    if held is None:
        held = app.squall_tables = Tables(urls=urls_table, hosts=hosts_table)
    return held


def addresses() -> AddressService:
    """The worker's byIP resolutions (:class:`agents.addresses.AddressService`), held by the app (``app.squall_addresses``)."""
    held = app.squall_addresses
    if held is None:
        resolver = HttpFetcher(HttpConfig.from_settings(settings))  # its resolver only: no session is opened
        held = app.squall_addresses = AddressService(AddressConfig.from_settings(settings), resolver)
    return held


def stored(table: MutableMapping[bytes, Any], key: bytes) -> Any:
    """The value of ``key`` in ``table`` (a Faust table or a test's dict), None when absent, read once.

    A Faust table's own ``get`` asks its store twice (``key in store``, then
    ``store[key]``: two RocksDB lookups and two key encodings); its store
    (``Table.data``, the underlying storage) answers ``get`` with one.
    """
    return getattr(table, "data", table).get(key)


def _read_through(
    cache: BoundedMemo[str, V], table: MutableMapping[bytes, Any], key: str, decode: Callable[[Any], V]
) -> V | None:
    """``key``'s record: ``cache``'s, else ``table``'s value made a record by ``decode`` and cached; None when absent (not cached)."""
    record = cache.get(key)
    if record is None:
        raw = stored(table, key.encode())
        if raw is None:
            return None
        record = decode(raw)
        cache.put(key, record)
    return record


def stored_host(key: str) -> HostRecord | None:
    """The host record of queue ``key`` as stored, None when the hosts table has none (records are immutable)."""
    held = tables()
    return _read_through(held.host_cache, held.hosts, key, HostRecord.from_dict)


def load_host(key: str) -> HostRecord:
    """The host record of queue ``key``: as stored, or a new one (no record yet)."""
    return stored_host(key) or HostRecord(key=key)


def save_host(host: HostRecord) -> None:
    held = tables()
    held.hosts[host.key.encode()] = host.to_dict()
    held.host_cache.put(host.key, host)


def stored_url(url: str) -> UrlRecord | None:
    """The record of canonical ``url`` as stored in the urls table, None when it has none."""
    held = tables()
    return _read_through(held.url_cache, held.urls, url, UrlRecord.from_dict)


def save_url(record: UrlRecord) -> None:
    """Write ``record`` to the urls table (inside an event of its URL's partition: Faust's changelog)."""
    held = tables()
    held.urls[record.url.encode()] = record.to_dict()
    held.url_cache.put(record.url, record)


def delete_url(url: str) -> None:
    """Delete the record of ``url`` from the urls table (a tombstone in its changelog).

    Raises:
        KeyError: the table has no record of ``url``.
    """
    held = tables()
    held.url_cache.discard(url)
    del held.urls[url.encode()]


def forget_cached_records() -> None:
    """Empty the host and URL record caches (a rebalance: the tables' recovery writes the stores, not squall)."""
    held = tables()
    held.host_cache.clear()
    held.url_cache.clear()


async def deadletter(value: bytes | None, exc: Exception) -> None:
    """Send an undecodable message to the dead-letter topic with the reason; never raises."""
    log.warning("squall: dead-lettered a message: %s", exc)
    body = {
        "reason": type(exc).__name__,
        "detail": str(exc),
        "value": (value or b"").decode("utf-8", errors="replace")[:10000],
    }
    await deadletter_topic.send(key=b"deadletter", value=json.dumps(body).encode())


def group_lease() -> GroupLease | None:
    """This worker's group membership lease (:class:`squall.worker.group_lease.GroupLease` of squall's consumer).

    None before the worker started its consumer (Faust creates it on first
    use of ``app.consumer``, which this never does) and with a consumer
    that has none.
    """
    return getattr(getattr(app, "_consumer", None), "lease", None)


def fetch_runtime() -> FetcherRuntime:
    """The worker's one :class:`squall.worker.fetch_runtime.FetcherRuntime`, created when its fetcher agent starts.

    Held by the app (``app.squall_fetch_runtime``), not by a module: the
    fetcher, the spout, the queue regulator and the progress line all get
    this same object; a test hands in its own by setting that attribute.
    """
    runtime = app.squall_fetch_runtime
    if runtime is None:
        runtime = app.squall_fetch_runtime = new_fetch_runtime()
    return runtime


def new_fetch_runtime() -> FetcherRuntime:
    """A fresh fetch runtime wired to this worker's tables, audit, metrics and membership lease."""
    from agents.observe import audit_request, observed  # the audit and metrics of this worker
    from agents.robots import RobotsService
    from agents.worker_state import state

    robots = fd.FetchConfig.from_settings(settings).robots
    return FetcherRuntime(
        settings,
        ownership=state(),
        load_host=load_host,
        audit=audit_request,
        fenced_seconds=observed().metrics.fenced_seconds.inc,
        lease=group_lease,
        robots=lambda audit: RobotsService(robots, settings.http_robots_cache_lru_size, before_request=audit),
    )
