"""Does a Kafka broker answer at an address? A TCP connect, then a metadata request.

Usable from sync code (:func:`is_answering`) and from a running event loop
(:func:`is_answering_async`); never raises: a broker that cannot be reached,
refuses the client or is not Kafka answers False.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import socket
from typing import Any

from squall.net.kafka_security import Broker, as_connection, quiet_client_log


def _run_coro(coro: Any) -> Any:
    """Run a coroutine to completion from sync code, even inside a running loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


def _split_servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in (bootstrap or "").split(","):
        item = item.strip().split("://")[-1]
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port_text = rest.lstrip(":")
        else:
            host, _, port_text = item.rpartition(":")
        if host and port_text.isdigit():
            out.append((host, int(port_text)))
    return out


def tcp_open(host: str, port: int, timeout_s: float = 1.0) -> bool:
    """True if a TCP connection to ``host:port`` succeeds within ``timeout_s`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


async def is_answering_async(bootstrap: Broker, timeout_s: float = 5.0) -> bool:
    """True if a Kafka broker at ``bootstrap`` answers a metadata request.

    A TCP connect first (cheap, no client log noise), then aiokafka's admin
    client bootstraps (MetadataRequest) and describes the cluster through the
    advertised listener. ``timeout_s`` (seconds) bounds the whole probe.
    ``bootstrap`` may be a :class:`~squall.net.kafka_security.KafkaConnection`
    (a secured broker answers only to a client it lets in).
    """
    from aiokafka.admin import AIOKafkaAdminClient

    conn = as_connection(bootstrap)
    bootstrap = conn.bootstrap
    servers = _split_servers(bootstrap)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    reachable = False
    for host, port in servers:
        left = max(0.05, deadline - loop.time())
        if await loop.run_in_executor(None, tcp_open, host, port, min(left, 2.0)):
            reachable = True
            break
    if not reachable:
        return False
    left = max(0.1, deadline - loop.time())
    with quiet_client_log():
        admin = AIOKafkaAdminClient(**conn.client_kwargs(), request_timeout_ms=max(100, int(left * 1000)))
        try:
            async with asyncio.timeout(left):
                await admin.start()
                cluster = await admin.describe_cluster()
            return bool(cluster.get("brokers"))
        except Exception:
            return False
        finally:
            with contextlib.suppress(Exception):
                await admin.close()


def is_answering(bootstrap: Broker, timeout_s: float = 5.0) -> bool:
    """Sync :func:`is_answering_async`: does a Kafka broker answer at ``bootstrap``?"""
    return bool(_run_coro(is_answering_async(bootstrap, timeout_s)))
