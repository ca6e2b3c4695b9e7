"""Small helpers the agents share: host records, the canonicalizer memo and the dead-letter topic."""

from __future__ import annotations

import json
import logging

from squall.policy.frontier import HostRecord
from squall.policy.urls import CanonicalCache, NormalizerConfig
from topology import deadletter_topic, hosts_table, settings

log = logging.getLogger("squall.agents")
# one memo per worker, shared by the parse step and the status updater (see CanonicalCache)
CANONICAL = CanonicalCache(NormalizerConfig.from_settings(settings))


def load_host(key: str) -> HostRecord:
    raw = hosts_table.get(key.encode())
    return HostRecord(key=key) if raw is None else HostRecord.from_dict(raw)


def save_host(host: HostRecord) -> None:
    hosts_table[host.key.encode()] = host.to_dict()


async def deadletter(value: bytes | None, exc: Exception) -> None:
    """Send an undecodable message to the dead-letter topic with the reason; never raises."""
    log.warning("squall: dead-lettered a message: %s", exc)
    body = {
        "reason": type(exc).__name__,
        "detail": str(exc),
        "value": (value or b"").decode("utf-8", errors="replace")[:10000],
    }
    await deadletter_topic.send(key=b"deadletter", value=json.dumps(body).encode())
