"""Servers, settings and a one-shot fetch that the squall.net.http tests share (real aiohttp servers on loopback).

Nothing here connects outside 127.0.0.0/8; other ranges are tested at the
address-check level (test_netsafety.py, and PolicyResolver called directly).
The one real DNS lookup is of ``no-such-host.invalid`` (RFC 6761: never resolves).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web

from squall.net.http import FetchResult, HttpConfig, HttpFetcher
from squall.settings import DEFAULTS_FILE, Settings, load_settings
from tests.unit.settings_helper import from_settings

DEFAULTS = yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8"))
LOOPBACK = ["127.0.0.0/8"]
MB = 1024 * 1024


def make_settings(**overrides: Any) -> Settings:
    """Defaults plus overrides, keys given with '_' for '.' (http_content_limit=...)."""
    values = dict(DEFAULTS)
    for name, value in overrides.items():
        key = name.replace("_", ".")
        assert key in values, key
        values[key] = value
    return load_settings(overrides=values)


def make_config(**overrides: Any) -> HttpConfig:
    overrides.setdefault("http_private_networks_allow", LOOPBACK)
    overrides.setdefault("http_timeout_connect", 2.0)
    overrides.setdefault("http_timeout_read", 2.0)
    overrides.setdefault("http_timeout_total", 5.0)
    return from_settings(HttpConfig, make_settings(**overrides))


@dataclass
class Server:
    host: str
    port: int
    requests: list[web.Request] = field(default_factory=list)

    def url(self, path: str = "/", host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"


@asynccontextmanager
async def serve(routes: dict[str, Callable[[web.Request], Any]], host: str = "127.0.0.1") -> AsyncIterator[Server]:
    """An aiohttp app on ``host`` and a random port that records every request it receives."""
    server = Server(host, 0)

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        server.requests.append(request)
        return await handler(request)

    app = web.Application(middlewares=[record])
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, 0)
    await site.start()
    server.port = runner.addresses[0][1]
    try:
        yield server
    finally:
        await runner.cleanup()


@asynccontextmanager
async def tcp_listener(host: str = "127.0.0.1", reply: bytes | None = None) -> AsyncIterator[tuple[int, list[int]]]:
    """A raw TCP listener: yields (port, accepted) where accepted counts connections."""
    accepted: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        if reply is not None:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(reply)
        writer.close()

    listener = await asyncio.start_server(on_connect, host, 0)
    try:
        yield listener.sockets[0].getsockname()[1], accepted
    finally:
        listener.close()
        await listener.wait_closed()


async def fetch(config: HttpConfig, url: str, **kwargs: Any) -> FetchResult:
    async with HttpFetcher(config) as fetcher:
        return await fetcher.fetch(url, **kwargs)


def text(body: bytes, status: int = 200, headers: dict[str, str] | None = None):
    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=body, status=status, headers=headers or {})

    return handler
