"""squall.net.http's network policy and byIP paths on loopback: which addresses it resolves, judges and connects to."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web

from squall.errors import BlockedAddress, FetchError
from squall.net.http import HttpFetcher, PolicyResolver
from squall.policy.netsafety import NetworkPolicy
from squall.policy.reasons import Reason
from tests.unit.http_helper import LOOPBACK, fetch, make_config, make_settings, serve, tcp_listener, text
from tests.unit.settings_helper import from_settings

# ---------------------------------------------------------------- network policy


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"])
async def test_loopback_is_refused_before_connecting_when_nothing_is_allowed(host):
    async with tcp_listener() as (port, accepted):
        with pytest.raises(BlockedAddress) as info:
            await fetch(make_config(http_private_networks_allow=[]), f"http://{host}:{port}/")
        await asyncio.sleep(0.05)
    assert info.value.reason == Reason.FETCH_BLOCKED_ADDRESS
    assert accepted == []


async def test_loopback_is_fetched_when_allowed_by_cidr():
    async with serve({"/": text(b"ok")}) as server:
        by_ip = await fetch(make_config(http_private_networks_allow=["127.0.0.1/32"]), server.url())
        by_name = await fetch(make_config(http_private_networks_allow=["127.0.0.0/8"]), server.url(host="localhost"))
    assert by_ip.body == by_name.body == b"ok"
    assert by_name.ip == "127.0.0.1"
    assert len(server.requests) == 2


async def test_a_pinned_name_connects_to_its_pinned_address():
    async with serve({"/": text(b"site a")}, host="127.0.0.2") as server:
        config = make_config(http_resolve=[f"site-a.test:{server.port}:127.0.0.2"])
        result = await fetch(config, f"http://site-a.test:{server.port}/")
    assert result.body == b"site a"
    assert result.ip == "127.0.0.2"
    assert server.requests[0].headers["Host"] == f"site-a.test:{server.port}"


async def test_a_pinned_name_is_refused_before_connecting_when_its_address_is_not_allowed():
    async with serve({"/": text(b"site a")}, host="127.0.0.2") as server:
        config = make_config(http_private_networks_allow=[], http_resolve=[f"site-a.test:{server.port}:127.0.0.2"])
        with pytest.raises(BlockedAddress):
            await fetch(config, f"http://site-a.test:{server.port}/")
    assert server.requests == []


async def test_the_address_judged_is_the_address_connected_to_with_one_lookup():
    calls: list[str] = []

    async def rebinding(host: str, port: int, family: int) -> list[Any]:
        # first answer allowed, every later answer would not be: a second lookup would fail the fetch
        calls.append(host)
        address = "127.0.0.3" if len(calls) == 1 else "127.0.0.1"
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    async with serve({"/": text(b"three")}, host="127.0.0.3") as server:
        config = make_config(http_private_networks_allow=["127.0.0.3/32"])
        async with HttpFetcher(config, resolver=PolicyResolver(config.network, rebinding)) as fetcher:
            result = await fetcher.fetch(f"http://rebind.test:{server.port}/")
    assert result.ip == "127.0.0.3" and result.body == b"three"
    assert calls == ["rebind.test"]


@pytest.mark.parametrize(
    "answers",
    [
        ["127.0.0.2", "10.0.0.1"],
        ["169.254.169.254"],
        ["8.8.8.8", "::ffff:192.168.0.1"],
    ],
)
async def test_a_name_with_any_refused_address_is_refused_whole(answers):
    # resolver level only: nothing is connected to
    async def fake(host: str, port: int, family: int) -> list[Any]:
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers
        ]

    policy = from_settings(NetworkPolicy, make_settings(http_private_networks_allow=LOOPBACK))
    with pytest.raises(BlockedAddress):
        await PolicyResolver(policy, fake).resolve("mixed.test", 80, socket.AF_UNSPEC)


async def test_the_resolver_returns_the_allowed_addresses_it_checked():
    async def fake(host: str, port: int, family: int) -> list[Any]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2606:2800:220:1::1", port, 0, 0)),
        ]

    results = await PolicyResolver(NetworkPolicy(), fake).resolve("public.test", 443, socket.AF_UNSPEC)
    assert [(r["host"], r["port"], r["family"]) for r in results] == [
        ("93.184.216.34", 443, socket.AF_INET),
        ("2606:2800:220:1::1", 443, socket.AF_INET6),
    ]


# ---------------------------------------------------------------- byIP: resolving, and connecting to the key's address


async def test_resolve_gives_the_pinned_address_of_a_name():
    async with HttpFetcher(make_config(http_resolve=["site-a.test:8080:127.0.0.2"])) as fetcher:
        assert await fetcher.resolve("site-a.test", 8080) == ["127.0.0.2"]


async def test_resolve_judges_an_address_literal_without_a_lookup():
    async with HttpFetcher(make_config()) as fetcher:
        assert await fetcher.resolve("127.0.0.5", 80) == ["127.0.0.5"]
    async with HttpFetcher(make_config(http_private_networks_allow=[])) as fetcher:
        with pytest.raises(BlockedAddress):
            await fetcher.resolve("127.0.0.5", 80)


async def test_resolve_refuses_a_name_pinned_to_a_refused_address():
    config = make_config(http_private_networks_allow=[], http_resolve=["site-a.test:80:127.0.0.2"])
    async with HttpFetcher(config) as fetcher:
        with pytest.raises(BlockedAddress):
            await fetcher.resolve("site-a.test", 80)


async def test_resolve_of_a_name_that_does_not_resolve_is_a_dns_failure():
    async def nowhere(host: str, port: int, family: int) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    config = make_config()
    async with HttpFetcher(config, resolver=PolicyResolver(config.network, getaddrinfo=nowhere)) as fetcher:
        with pytest.raises(FetchError) as caught:
            await fetcher.resolve("site-c.test", 80)
    assert caught.value.reason == Reason.FETCH_DNS


async def test_resolve_gives_every_judged_address_of_a_name():
    async def two(host: str, port: int, family: int) -> list[Any]:
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.8", port)),
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.7", port)),
        ]

    config = make_config()
    async with HttpFetcher(config, resolver=PolicyResolver(config.network, getaddrinfo=two)) as fetcher:
        assert await fetcher.resolve("site-c.test", 80) == ["127.0.0.8", "127.0.0.7"]


async def test_a_fetch_given_an_address_connects_there_with_the_urls_own_host_header():
    async with serve({"/p": text(b"pinned")}, host="127.0.0.4") as server:
        # the name is pinned elsewhere: only the address given may be connected to
        config = make_config(http_resolve=[f"site-b.test:{server.port}:127.0.0.9"])
        result = await fetch(
            config, f"http://site-b.test:{server.port}/p?q=1", address="127.0.0.4", headers={"Host": "evil.test"}
        )
    assert result.body == b"pinned" and result.ip == "127.0.0.4"
    assert result.url == f"http://site-b.test:{server.port}/p?q=1"
    assert server.requests[0].headers["Host"] == f"site-b.test:{server.port}"
    assert server.requests[0].path_qs == "/p?q=1"


async def test_a_fetch_given_a_refused_address_sends_nothing():
    async with serve({"/": text(b"no")}, host="127.0.0.4") as server:
        with pytest.raises(BlockedAddress):
            await fetch(
                make_config(http_private_networks_allow=["127.0.0.1/32"]),
                f"http://site-b.test:{server.port}/",
                address="127.0.0.4",
            )
    assert server.requests == []


def test_the_host_header_keeps_a_port_only_when_it_is_not_the_schemes_default():
    from yarl import URL

    from squall.net.http import _host_header

    assert _host_header(URL("http://a.test/x")) == "a.test"
    assert _host_header(URL("https://a.test:443/x")) == "a.test"
    assert _host_header(URL("http://a.test:8080/x")) == "a.test:8080"
    assert _host_header(URL("http://[::1]:8080/x")) == "[::1]:8080"


@asynccontextmanager
async def serve_tls(cert_name: str, host: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[int, list[str]]]:
    """An HTTPS server on ``host`` with a certificate for ``cert_name`` (trustme CA, trusted by aiohttp here)."""
    import ssl

    import aiohttp.connector
    import trustme

    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert(cert_name).configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    monkeypatch.setattr(aiohttp.connector, "_SSL_CONTEXT_VERIFIED", client_ctx)
    names: list[str] = []  # the SNI names the server was sent
    server_ctx.sni_callback = lambda _sock, name, _ctx: names.append(name)

    async def handler(request: web.Request) -> web.Response:
        return web.Response(body=request.host.encode())

    app = web.Application()
    app.router.add_get("/", handler)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, host, 0, ssl_context=server_ctx)
    await site.start()
    try:
        yield runner.addresses[0][1], names
    finally:
        await runner.cleanup()


async def test_a_pinned_https_fetch_sends_the_name_for_sni_and_checks_the_certificate_against_it(monkeypatch):
    async with serve_tls("site-t.test", "127.0.0.6", monkeypatch) as (port, names):
        result = await fetch(make_config(), f"https://site-t.test:{port}/", address="127.0.0.6")
    assert result.status == 200 and result.body == f"site-t.test:{port}".encode()
    assert names == ["site-t.test"]


async def test_a_pinned_https_fetch_refuses_a_certificate_for_another_name(monkeypatch):
    async with serve_tls("other.test", "127.0.0.6", monkeypatch) as (port, names):
        with pytest.raises(FetchError) as caught:
            await fetch(make_config(), f"https://site-t.test:{port}/", address="127.0.0.6")
    assert caught.value.reason == Reason.FETCH_PROTOCOL
    assert names == ["site-t.test"]  # the handshake named the site, and its certificate did not match
