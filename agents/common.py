"""Small helpers the agents share: host records, the canonicalizer memo and the dead-letter topic."""

from __future__ import annotations

import json
import logging

from squall.frontier import HostRecord
from squall.memo import BoundedMemo
from squall.urls import CanonicalCache, NormalizerConfig
from topology import app, deadletter_topic, hosts_table, settings

log = logging.getLogger("squall.agents")
# one memo per worker, shared by the parse step and the status updater (see CanonicalCache)
CANONICAL = CanonicalCache(NormalizerConfig.from_settings(settings))


# Write-through cache of the hosts table (partition key → the record last read or saved), so that the
# status updater, spout and regulator do not decode the same JSON record for every message. The table is
# the truth: every write goes through save_host, and the cache is dropped at every rebalance (the table may
# then be recovered from its changelog, or a partition come back after another worker wrote it).
HOST_CACHE_MAX = 20000  # records kept; the one saved or read from the table longest ago goes first
_hosts: BoundedMemo[str, HostRecord] = BoundedMemo(HOST_CACHE_MAX)


def load_host(key: str) -> HostRecord:
    """The hosts-table record of partition key ``key`` (a fresh one when absent), through the cache.

    The record is shared with the cache: treat it as immutable (its dicts and
    lists too) and derive changed records with ``dataclasses.replace`` and
    copies, as :class:`HostRecord`'s methods do.
    """
    host = _hosts.get(key)
    if host is None:
        raw = hosts_table.get(key.encode())
        host = HostRecord(key=key) if raw is None else HostRecord.from_dict(raw)
        _hosts.put(key, host)
    return host


def save_host(host: HostRecord) -> None:
    """Write ``host`` to the hosts table (the only way the agents write it) and to the cache."""
    hosts_table[host.key.encode()] = host.to_dict()
    _hosts.put(host.key, host)


def forget_hosts(*_args: object, **_kwargs: object) -> None:
    """Drop the cache of host records (connected to Faust's rebalance signals below)."""
    _hosts.clear()


for _signal in (app.on_partitions_revoked, app.on_partitions_assigned, app.on_rebalance_complete):
    _signal.connect(forget_hosts)


async def deadletter(value: bytes | None, exc: Exception) -> None:
    """Send an undecodable message to the dead-letter topic with the reason; never raises."""
    log.warning("squall: dead-lettered a message: %s", exc)
    body = {"reason": type(exc).__name__, "detail": str(exc),
            "value": (value or b"").decode("utf-8", errors="replace")[:10000]}
    await deadletter_topic.send(key=b"deadletter", value=json.dumps(body).encode())
