"""Small helpers the agents share: host records, the canonicalizer memo, the fetch runtime and the dead-letter topic."""

from __future__ import annotations

import json
import logging

from squall.policy import fetch_decision as fd
from squall.policy.frontier import HostRecord
from squall.policy.urls import CanonicalCache, NormalizerConfig
from squall.worker.fetch_runtime import FetcherRuntime
from topology import app, deadletter_topic, hosts_table, settings

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
    from agents.observe import audit_request, metrics  # the audit and metrics of this worker
    from agents.robots import RobotsService
    from agents.worker_state import state

    robots = fd.FetchConfig.from_settings(settings).robots
    return FetcherRuntime(
        settings,
        ownership=state,
        load_host=load_host,
        audit=audit_request,
        fenced_seconds=metrics.fenced_seconds.inc,
        lease=lambda: getattr(app.consumer, "lease", None),
        robots=lambda audit: RobotsService(robots, settings.http_robots_cache_lru_size, before_request=audit),
    )
