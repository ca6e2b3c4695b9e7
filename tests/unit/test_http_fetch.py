"""squall.net.http against real aiohttp servers on loopback: answers, statuses, content and header limits, transport failures, config."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
import tracemalloc
import zlib
from typing import Any

import pytest
from aiohttp import web

from squall.errors import BlockedAddress, ConfigError, FetchError
from squall.net.http import ACCEPT_ENCODING, HAS_BROTLI, HttpConfig, HttpFetcher, PolicyResolver
from squall.policy.reasons import Reason
from tests.unit.http_helper import LOOPBACK, MB, fetch, make_config, make_settings, serve, tcp_listener, text
from tests.unit.settings_helper import from_settings

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


@pytest.mark.parametrize(
    "status, location, expected",
    [
        (301, "/target?x=1", "/target?x=1"),
        (302, "other", "/dir/other"),
        (303, "http://site-b.test/abs", "http://site-b.test/abs"),
        (307, "//site-c.test/p", "http://site-c.test/p"),
        (308, "  /spaced  ", "/spaced"),
    ],
)
async def test_a_redirect_is_returned_not_followed_with_an_absolute_location(status, location, expected):
    async with serve(
        {
            "/dir/page": text(b"", status=status, headers={"Location": location}),
            "/target": text(b"target"),
            "/dir/other": text(b"other"),
        }
    ) as server:
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


@pytest.mark.parametrize(
    "limit, truncated",
    [
        (1000, True),
        (len(BODY) - 1, True),
        (len(BODY), False),
        (len(BODY) + 1, False),
        (0, True),
        (-1, False),
    ],
)
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


@pytest.mark.parametrize(
    "url, reason",
    [
        ("ftp://127.0.0.1/file", Reason.URL_SCHEME),
        ("file:///etc/passwd", Reason.URL_SCHEME),
        ("http:///path-only", Reason.URL_HOST),
    ],
)
async def test_a_url_that_cannot_be_requested_fails_with_a_url_reason(url, reason):
    with pytest.raises(FetchError) as info:
        await fetch(make_config(), url)
    assert info.value.reason == reason


async def test_fetch_outside_the_context_manager_is_refused():
    with pytest.raises(RuntimeError):
        await HttpFetcher(make_config()).fetch("http://127.0.0.1/")


# ---------------------------------------------------------------- configuration


def test_the_config_is_read_from_settings():
    config = from_settings(
        HttpConfig,
        make_settings(
            http_content_limit=123,
            http_header_limit=4567,
            http_timeout_connect=1.5,
            http_timeout_read=2.5,
            http_timeout_total=9.0,
            http_private_networks_allow=LOOPBACK,
            http_resolve=["a.test:80:127.0.0.9"],
            http_agent_name="bot",
            http_agent_version="2",
            http_agent_url="https://example.org/bot",
        ),
    )
    assert config.user_agent == "bot/2 (+https://example.org/bot)"
    assert (config.content_limit, config.header_limit) == (123, 4567)
    assert (config.connect_timeout_s, config.read_timeout_s, config.total_timeout_s) == (1.5, 2.5, 9.0)
    assert config.network.pinned("a.test", 80) == "127.0.0.9"


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"http_content_limit": -2}, "http.content.limit"),
        ({"http_header_limit": 0}, "http.header.limit"),
        ({"http_timeout_read": 0.0}, "http.timeout.read"),
        ({"http_timeout_total": -1.0}, "http.timeout.total"),
        ({"http_resolve": ["nonsense"]}, "http.resolve"),
    ],
)
def test_an_out_of_range_http_setting_fails_with_the_key_named(overrides, key):
    with pytest.raises(ConfigError) as info:
        from_settings(HttpConfig, make_settings(**overrides))
    assert info.value.key == key
