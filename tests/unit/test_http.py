"""squall.net.http against real aiohttp servers on loopback (127.0.0.x, random ports).

Nothing here connects outside 127.0.0.0/8; other ranges are tested at the
address-check level (test_netsafety.py, and PolicyResolver called directly).
The one real DNS lookup is of ``no-such-host.invalid`` (RFC 6761: never resolves).
"""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from aiohttp import web

from squall.errors import BlockedAddress, ConfigError, FetchError
from squall.net.http import ACCEPT_ENCODING, HAS_BROTLI, FetchResult, HttpConfig, HttpFetcher, PolicyResolver
from squall.policy.netsafety import NetworkPolicy
from squall.policy.reasons import Reason
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


# ---------------------------------------------------------------- answers

async def test_a_200_answer_carries_body_headers_address_and_what_was_sent():
    handler = text(b"<html>hello</html>", headers={"Content-Type": "Text/HTML; charset=utf-8", "X-One": "1"})
    async with serve({"/page": handler}) as server:
        clock = iter([100.0, 101.5])
        async with HttpFetcher(make_config(http_agent_name="testbot"), clock=lambda: next(clock)) as fetcher:
            result = await fetcher.fetch(server.url("/page"), headers={"If-None-Match": '"v1"'})
    assert result.status == 200
    assert result.body == b"<html>hello</html>" and not result.truncated
    assert result.url == server.url("/page")
    assert result.ip == "127.0.0.1"
    assert result.http_version == "HTTP/1.1"
    assert (result.started_at_s, result.ended_at_s) == (100.0, 101.5)
    assert result.content_type == "text/html"
    assert result.header("x-one") == "1" and result.header("X-ONE") == "1" and result.header("X-Two") is None
    assert ("X-One", "1") in result.headers
    assert result.location is None
    sent = dict(result.request_headers)
    assert sent["User-Agent"].startswith("testbot/")
    assert sent["Accept-Encoding"] == ACCEPT_ENCODING
    assert sent["If-None-Match"] == '"v1"'
    [request] = server.requests
    assert request.headers["User-Agent"] == sent["User-Agent"]
    assert request.headers["If-None-Match"] == '"v1"'


async def test_the_configured_user_agent_replaces_a_callers_one():
    async with serve({"/": text(b"ok")}) as server:
        result = await fetch(make_config(), server.url(), headers={"user-agent": "spoof/1"})
    assert server.requests[0].headers.getall("User-Agent") == [make_settings().user_agent]
    assert dict(result.request_headers)["User-Agent"] == make_settings().user_agent


async def test_a_callers_accept_encoding_replaces_the_default_whatever_its_case():
    async with serve({"/": text(b"ok")}) as server:
        await fetch(make_config(), server.url(), headers={"accept-encoding": "identity"})
    assert server.requests[0].headers.getall("Accept-Encoding") == ["identity"]


def test_br_is_accepted_only_when_brotli_can_decode_it():
    assert ("br" in ACCEPT_ENCODING) == HAS_BROTLI
    assert ACCEPT_ENCODING.startswith("gzip, deflate")


# ---------------------------------------------------------------- raw servers: framing and codings

@asynccontextmanager
async def raw_server(answers: list[bytes], host: str = "127.0.0.1") -> AsyncIterator[tuple[int, list[bytes]]]:
    """A raw asyncio server: the n-th request on a connection gets ``answers[n]`` written in one piece.

    Yields ``(port, requests)``; ``requests`` gets each request head as received. The connection
    stays open after the answers (the client decides when to close it).
    """
    requests: list[bytes] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            for answer in answers:
                requests.append(await reader.readuntil(b"\r\n\r\n"))
                writer.write(answer)
                await writer.drain()
            await reader.read()   # until the client hangs up
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    listener = await asyncio.start_server(on_connect, host, 0)
    try:
        yield listener.sockets[0].getsockname()[1], requests
    finally:
        listener.close()
        await listener.wait_closed()


def answer(body: bytes, *headers: str, status: str = "200 OK", extra: bytes = b"") -> bytes:
    head = "".join(f"{h}\r\n" for h in (f"HTTP/1.1 {status}", "Content-Type: text/html",
                                          f"Content-Length: {len(body)}", *headers))
    return head.encode("latin-1") + b"\r\n" + body + extra


@pytest.mark.parametrize("extra", [b"X", b"EXTRA BYTES\r\n", b"HTTP/1.1 200 OK\r\n\r\n", b"\0" * 5000])
async def test_bytes_after_the_declared_content_length_are_dropped_and_the_body_kept(extra: bytes):
    async with raw_server([answer(b"hello", extra=extra)]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert (result.status, result.body, result.truncated) == (200, b"hello", False)


async def test_a_connection_that_sent_excess_bytes_is_not_reused():
    async with raw_server([answer(b"one", extra=b"junk"), answer(b"two")]) as (port, requests):
        async with HttpFetcher(make_config()) as fetcher:
            first = await fetcher.fetch(f"http://127.0.0.1:{port}/1")
            second = await fetcher.fetch(f"http://127.0.0.1:{port}/2")
    assert (first.body, second.body) == (b"one", b"one")   # each on a fresh connection: its first answer
    assert len(requests) == 2


async def test_a_clean_keep_alive_connection_is_reused():
    async with raw_server([answer(b"one"), answer(b"two")]) as (port, requests):
        async with HttpFetcher(make_config()) as fetcher:
            bodies = [(await fetcher.fetch(f"http://127.0.0.1:{port}/{i}")).body for i in (1, 2)]
    assert bodies == [b"one", b"two"]


async def test_a_304_with_a_content_length_and_no_body_is_not_waited_for():
    head = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: \"v1\"\r\n\r\n"
    async with raw_server([head]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert (result.status, result.body) == (304, b"")


async def test_a_chunked_body_is_read_whole():
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    async with raw_server([chunked]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert result.body == b"hello world"


try:
    from compression import zstd as _zstd   # type: ignore[import-not-found]
except ImportError:
    from backports import zstd as _zstd
import brotli as _brotli

_ENCODE = {"gzip": gzip.compress, "deflate": zlib.compress, "br": _brotli.compress, "zstd": _zstd.compress}


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "gzip, br", "deflate, zstd"])
async def test_br_zstd_and_stacked_codings_are_decoded(coding: str):
    page = b"<html><body>" + b"a polite page " * 500 + b"</body></html>"
    body = page
    for name in coding.split(", "):
        body = _ENCODE[name](body)
    async with raw_server([answer(body, f"Content-Encoding: {coding}")]) as (port, requests):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert (result.body, result.truncated) == (page, False)
    assert b"Accept-Encoding: " + ACCEPT_ENCODING.encode() in requests[0]
    assert result.header("Content-Encoding") == coding   # the headers stay as received (WARC rewrites them)


@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "gzip, br"])
async def test_the_content_limit_applies_to_decoded_bytes_of_any_coding(coding: str):
    body = b"\0" * (20 * MB)
    for name in coding.split(", "):
        body = _ENCODE[name](body)
    assert len(body) < 64 * 1024
    async with raw_server([answer(body, f"Content-Encoding: {coding}")]) as (port, _):
        tracemalloc.start()
        try:
            result = await fetch(make_config(http_content_limit=100_000), f"http://127.0.0.1:{port}/")
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert (len(result.body), result.truncated) == (100_000, True)
    assert peak < 4 * MB   # the 20 MiB are never held


async def test_connections_use_the_framing_protocol_through_aiohttps_factory_hook():
    from squall.net.connection import _FramingConnector, _FramingProtocol

    connector = _FramingConnector(header_limit=1024)
    try:
        assert isinstance(connector._factory(), _FramingProtocol)
    finally:
        await connector.close()


@pytest.mark.parametrize("status, location, expected", [
    (301, "/target?x=1", "/target?x=1"),
    (302, "other", "/dir/other"),
    (303, "http://site-b.test/abs", "http://site-b.test/abs"),
    (307, "//site-c.test/p", "http://site-c.test/p"),
    (308, "  /spaced  ", "/spaced"),
])
async def test_a_redirect_is_returned_not_followed_with_an_absolute_location(status, location, expected):
    async with serve({"/dir/page": text(b"", status=status, headers={"Location": location}),
                      "/target": text(b"target"), "/dir/other": text(b"other")}) as server:
        result = await fetch(make_config(), server.url("/dir/page"))
    assert result.status == status
    assert result.location == (server.url(expected) if expected.startswith("/") else expected)
    assert [r.path for r in server.requests] == ["/dir/page"]


async def test_a_3xx_without_location_has_none():
    async with serve({"/": text(b"", status=304)}) as server:
        result = await fetch(make_config(), server.url())
    assert result.status == 304 and result.location is None


async def test_an_error_status_is_a_result_not_an_exception():
    async with serve({"/": text(b"gone", status=503, headers={"Retry-After": "30"})}) as server:
        result = await fetch(make_config(), server.url())
    assert result.status == 503 and result.header("Retry-After") == "30" and result.body == b"gone"


# ---------------------------------------------------------------- content limit

BODY = bytes(range(256)) * 40  # 10 240 bytes


@pytest.mark.parametrize("limit, truncated", [
    (1000, True),
    (len(BODY) - 1, True),
    (len(BODY), False),
    (len(BODY) + 1, False),
    (0, True),
    (-1, False),
])
async def test_an_identity_body_is_cut_at_the_content_limit(limit, truncated):
    async with serve({"/": text(BODY)}) as server:
        result = await fetch(make_config(http_content_limit=limit), server.url())
    expected = BODY if limit < 0 else BODY[:limit]
    assert result.body == expected
    assert result.truncated is truncated


async def test_a_gzip_body_is_limited_after_decoding():
    decoded = b"".join(b"line %d of a compressible page\n" % i for i in range(20000))  # ~650 KB
    encoded = gzip.compress(decoded)
    headers = {"Content-Encoding": "gzip", "Content-Type": "text/plain"}
    async with serve({"/": text(encoded, headers=headers)}) as server:
        cut = await fetch(make_config(http_content_limit=100_000), server.url())
        whole = await fetch(make_config(http_content_limit=len(decoded)), server.url())
    assert cut.truncated and cut.body == decoded[:100_000]
    assert not whole.truncated and whole.body == decoded
    assert whole.header("Content-Encoding") == "gzip"  # raw headers as received


def gzip_bomb(decoded_size: int) -> bytes:
    """gzip bytes that decode to ``decoded_size`` zero bytes, without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MB)
    parts = [compressor.compress(block) for _ in range(decoded_size // MB)]
    parts.append(compressor.flush())
    return b"".join(parts)


async def test_a_gzip_bomb_stops_at_the_limit_with_bounded_memory():
    bomb = gzip_bomb(50 * MB)
    assert len(bomb) < 100_000  # ~50 KB on the wire
    async with serve({"/": text(bomb, headers={"Content-Encoding": "gzip"})}) as server:
        config = make_config(http_content_limit=MB)
        tracemalloc.start()
        try:
            result = await fetch(config, server.url())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert result.truncated
    assert len(result.body) == MB
    assert peak < 8 * MB, f"peak {peak / MB:.1f} MB while decoding a 50 MB bomb"


# ---------------------------------------------------------------- header limit

async def test_one_header_line_over_the_limit_is_a_protocol_failure():
    async with serve({"/": text(b"x", headers={"X-Big": "a" * 3000})}) as server:
        with pytest.raises(FetchError) as info:
            await fetch(make_config(http_header_limit=2048), server.url())
    assert info.value.reason == Reason.FETCH_PROTOCOL


async def test_many_small_headers_over_the_limit_in_total_are_a_protocol_failure():
    headers = {f"X-H{i}": "b" * 100 for i in range(40)}  # each line < 2 KB, ~4.4 KB in all
    async with serve({"/": text(b"x", headers=headers)}) as server:
        with pytest.raises(FetchError) as info:
            await fetch(make_config(http_header_limit=2048), server.url())
        ok = await fetch(make_config(http_header_limit=8192), server.url())
    assert info.value.reason == Reason.FETCH_PROTOCOL
    assert ok.status == 200 and ok.header("X-H39") == "b" * 100


# ---------------------------------------------------------------- transport failures

async def test_a_server_that_stalls_is_a_read_timeout():
    release = asyncio.Event()

    async def stall(request: web.Request) -> web.Response:
        await asyncio.wait_for(release.wait(), 5)
        return web.Response(body=b"late")

    async with serve({"/": stall}) as server:
        started = time.monotonic()
        with pytest.raises(FetchError) as info:
            await fetch(make_config(http_timeout_read=0.3), server.url())
        elapsed = time.monotonic() - started
        release.set()
    assert info.value.reason == Reason.FETCH_TIMEOUT
    assert elapsed < 3


async def test_a_body_that_stalls_is_a_read_timeout():
    release = asyncio.Event()

    async def trickle(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_length = 100
        await response.prepare(request)
        await response.write(b"x" * 10)
        await asyncio.wait_for(release.wait(), 5)
        return response

    async with serve({"/": trickle}) as server:
        with pytest.raises(FetchError) as info:
            await fetch(make_config(http_timeout_read=0.3), server.url())
        release.set()
    assert info.value.reason == Reason.FETCH_TIMEOUT


async def test_a_closed_port_is_a_connection_failure():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(FetchError) as info:
        await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert info.value.reason == Reason.FETCH_CONNECTION
    assert not isinstance(info.value, BlockedAddress)


async def test_a_server_that_hangs_up_without_answering_is_a_connection_failure():
    async with tcp_listener(reply=b"") as (port, accepted):
        with pytest.raises(FetchError) as info:
            await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert info.value.reason == Reason.FETCH_CONNECTION
    assert 1 <= len(accepted) <= 2  # aiohttp retries an idempotent request once (RFC 9112 §9.3.1.1)


async def test_a_garbled_answer_is_a_protocol_failure():
    async with tcp_listener(reply=b"NOT HTTP AT ALL\r\n\r\n") as (port, _):
        with pytest.raises(FetchError) as info:
            await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert info.value.reason == Reason.FETCH_PROTOCOL


async def test_a_broken_gzip_body_is_a_protocol_failure():
    async with serve({"/": text(b"this is not gzip", headers={"Content-Encoding": "gzip"})}) as server:
        with pytest.raises(FetchError) as info:
            await fetch(make_config(), server.url())
    assert info.value.reason == Reason.FETCH_PROTOCOL


async def test_a_name_that_never_resolves_is_a_dns_failure():
    with pytest.raises(FetchError) as info:
        await fetch(make_config(), "http://no-such-host.invalid/")
    assert info.value.reason == Reason.FETCH_DNS


async def test_a_lookup_error_from_the_resolver_is_a_dns_failure():
    async def failing(host: str, port: int, family: int) -> list[Any]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    config = make_config()
    async with HttpFetcher(config, resolver=PolicyResolver(config.network, failing)) as fetcher:
        with pytest.raises(FetchError) as info:
            await fetcher.fetch("http://nowhere.test/")
    assert info.value.reason == Reason.FETCH_DNS


@pytest.mark.parametrize("url, reason", [
    ("ftp://127.0.0.1/file", Reason.URL_SCHEME),
    ("file:///etc/passwd", Reason.URL_SCHEME),
    ("http:///path-only", Reason.URL_HOST),
])
async def test_a_url_that_cannot_be_requested_fails_with_a_url_reason(url, reason):
    with pytest.raises(FetchError) as info:
        await fetch(make_config(), url)
    assert info.value.reason == reason


async def test_fetch_outside_the_context_manager_is_refused():
    with pytest.raises(RuntimeError):
        await HttpFetcher(make_config()).fetch("http://127.0.0.1/")


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


@pytest.mark.parametrize("answers", [
    ["127.0.0.2", "10.0.0.1"],
    ["169.254.169.254"],
    ["8.8.8.8", "::ffff:192.168.0.1"],
])
async def test_a_name_with_any_refused_address_is_refused_whole(answers):
    # resolver level only: nothing is connected to
    async def fake(host: str, port: int, family: int) -> list[Any]:
        return [(socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in answers]

    policy = from_settings(NetworkPolicy, make_settings(http_private_networks_allow=LOOPBACK))
    with pytest.raises(BlockedAddress):
        await PolicyResolver(policy, fake).resolve("mixed.test", 80, socket.AF_UNSPEC)


async def test_the_resolver_returns_the_allowed_addresses_it_checked():
    async def fake(host: str, port: int, family: int) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("2606:2800:220:1::1", port, 0, 0))]

    results = await PolicyResolver(NetworkPolicy(), fake).resolve("public.test", 443, socket.AF_UNSPEC)
    assert [(r["host"], r["port"], r["family"]) for r in results] == [
        ("93.184.216.34", 443, socket.AF_INET), ("2606:2800:220:1::1", 443, socket.AF_INET6)]


# ---------------------------------------------------------------- configuration

def test_the_config_is_read_from_settings():
    config = from_settings(HttpConfig, make_settings(
        http_content_limit=123, http_header_limit=4567, http_timeout_connect=1.5, http_timeout_read=2.5,
        http_timeout_total=9.0, http_private_networks_allow=LOOPBACK, http_resolve=["a.test:80:127.0.0.9"],
        http_agent_name="bot", http_agent_version="2", http_agent_url="https://example.org/bot"))
    assert config.user_agent == "bot/2 (+https://example.org/bot)"
    assert (config.content_limit, config.header_limit) == (123, 4567)
    assert (config.connect_timeout_s, config.read_timeout_s, config.total_timeout_s) == (1.5, 2.5, 9.0)
    assert config.network.pinned("a.test", 80) == "127.0.0.9"


@pytest.mark.parametrize("overrides, key", [
    ({"http_content_limit": -2}, "http.content.limit"),
    ({"http_header_limit": 0}, "http.header.limit"),
    ({"http_timeout_read": 0.0}, "http.timeout.read"),
    ({"http_timeout_total": -1.0}, "http.timeout.total"),
    ({"http_resolve": ["nonsense"]}, "http.resolve"),
])
def test_an_out_of_range_http_setting_fails_with_the_key_named(overrides, key):
    with pytest.raises(ConfigError) as info:
        from_settings(HttpConfig, make_settings(**overrides))
    assert info.value.key == key


# ---------------------------------------------------------------- DeclaredLengthFramer (pure)

from squall.net.connection import DeclaredLengthFramer  # noqa: E402

FRAMES = [
    # (what the connection receives, in pieces; bytes kept; bytes dropped)
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA"], b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 5),
    ([b"HTTP/1.1 200 OK\r\nContent-Len", b"gth: 5\r\n\r\nhe", b"llo", b"++"],
     b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", 2),
    ([b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokXX"],
     b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", 2),
    ([b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\nXX"], b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n", 2),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nokX"], b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", 1),
    # not framed by a length: passed through for aiohttp to judge
    ([b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
     b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n", 0),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabcd"],
     b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabcd", 0),
    ([b"HTTP/1.1 200 OK\r\n\r\nread to close"], b"HTTP/1.1 200 OK\r\n\r\nread to close", 0),
    ([b"garbage\r\n\r\nmore"], b"garbage\r\n\r\nmore", 0),
]


@pytest.mark.parametrize(("pieces", "kept", "dropped"), FRAMES)
def test_the_framer_keeps_the_declared_bytes_and_drops_the_excess(pieces: list[bytes], kept: bytes, dropped: int):
    framer = DeclaredLengthFramer(header_limit=4096)
    framer.expect_response()
    results = [framer.feed(p) for p in pieces]
    assert b"".join(k for k, _ in results) == kept
    assert sum(d for _, d in results) == dropped


def test_the_framer_frames_the_next_response_after_the_next_request():
    framer = DeclaredLengthFramer(header_limit=4096)
    framer.expect_response()
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na") == (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", 0)
    assert framer.feed(b"late") == (b"", 4)
    framer.expect_response()
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nbc") == (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb", 1)


def test_the_framer_ignores_the_body_length_of_an_answer_to_head():
    framer = DeclaredLengthFramer(header_limit=4096)
    framer.expect_response(head_only=True)
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nX") == (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", 1)


def test_the_framer_passes_an_oversized_head_through_for_the_parser_to_refuse():
    framer = DeclaredLengthFramer(header_limit=16)
    framer.expect_response()
    data = b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 100
    assert framer.feed(data) == (data, 0)


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
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.8", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.7", port))]

    config = make_config()
    async with HttpFetcher(config, resolver=PolicyResolver(config.network, getaddrinfo=two)) as fetcher:
        assert await fetcher.resolve("site-c.test", 80) == ["127.0.0.8", "127.0.0.7"]


async def test_a_fetch_given_an_address_connects_there_with_the_urls_own_host_header():
    async with serve({"/p": text(b"pinned")}, host="127.0.0.4") as server:
        # the name is pinned elsewhere: only the address given may be connected to
        config = make_config(http_resolve=[f"site-b.test:{server.port}:127.0.0.9"])
        result = await fetch(config, f"http://site-b.test:{server.port}/p?q=1", address="127.0.0.4",
                             headers={"Host": "evil.test"})
    assert result.body == b"pinned" and result.ip == "127.0.0.4"
    assert result.url == f"http://site-b.test:{server.port}/p?q=1"
    assert server.requests[0].headers["Host"] == f"site-b.test:{server.port}"
    assert server.requests[0].path_qs == "/p?q=1"


async def test_a_fetch_given_a_refused_address_sends_nothing():
    async with serve({"/": text(b"no")}, host="127.0.0.4") as server:
        with pytest.raises(BlockedAddress):
            await fetch(make_config(http_private_networks_allow=["127.0.0.1/32"]),
                        f"http://site-b.test:{server.port}/", address="127.0.0.4")
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
    names: list[str] = []   # the SNI names the server was sent
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
