"""squall.net.http's body framing and content codings, on raw asyncio servers, and the DeclaredLengthFramer itself."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import brotli as _brotli
import pytest

from squall.net.connection import DeclaredLengthFramer
from squall.net.http import ACCEPT_ENCODING, HttpFetcher
from tests.unit.http_helper import MB, fetch, make_config

try:
    from compression import zstd as _zstd  # type: ignore[import-not-found]
except ImportError:
    from backports import zstd as _zstd


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
            await reader.read()  # until the client hangs up
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
    head = "".join(
        f"{h}\r\n" for h in (f"HTTP/1.1 {status}", "Content-Type: text/html", f"Content-Length: {len(body)}", *headers)
    )
    return head.encode("latin-1") + b"\r\n" + body + extra


@pytest.mark.parametrize("extra", [b"X", b"EXTRA BYTES\r\n", b"HTTP/1.1 200 OK\r\n\r\n", b"\0" * 5000])
async def test_bytes_after_the_declared_content_length_are_dropped_and_the_body_kept(extra: bytes):
    async with raw_server([answer(b"hello", extra=extra)]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert (result.status, result.body, result.truncated) == (200, b"hello", False)


async def test_a_connection_that_sent_excess_bytes_is_not_reused():
    async with raw_server([answer(b"one", extra=b"junk"), answer(b"two")]) as (port, requests):  # noqa: SIM117 (moved verbatim)
        async with HttpFetcher(make_config()) as fetcher:
            first = await fetcher.fetch(f"http://127.0.0.1:{port}/1")
            second = await fetcher.fetch(f"http://127.0.0.1:{port}/2")
    assert (first.body, second.body) == (b"one", b"one")  # each on a fresh connection: its first answer
    assert len(requests) == 2


async def test_a_clean_keep_alive_connection_is_reused():
    async with raw_server([answer(b"one"), answer(b"two")]) as (port, requests):  # noqa: SIM117, RUF059 (moved verbatim)
        async with HttpFetcher(make_config()) as fetcher:
            bodies = [(await fetcher.fetch(f"http://127.0.0.1:{port}/{i}")).body for i in (1, 2)]
    assert bodies == [b"one", b"two"]


async def test_a_304_with_a_content_length_and_no_body_is_not_waited_for():
    head = b'HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\nETag: "v1"\r\n\r\n'
    async with raw_server([head]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert (result.status, result.body) == (304, b"")


async def test_a_chunked_body_is_read_whole():
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    async with raw_server([chunked]) as (port, _):
        result = await fetch(make_config(), f"http://127.0.0.1:{port}/")
    assert result.body == b"hello world"


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
    assert result.header("Content-Encoding") == coding  # the headers stay as received (WARC rewrites them)


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
    assert peak < 4 * MB  # the 20 MiB are never held


async def test_connections_use_the_framing_protocol_through_aiohttps_factory_hook():
    from squall.net.connection import _FramingConnector, _FramingProtocol

    connector = _FramingConnector(header_limit=1024)
    try:
        assert isinstance(connector._factory(), _FramingProtocol)
    finally:
        await connector.close()


# ---------------------------------------------------------------- DeclaredLengthFramer (pure)


FRAMES = [
    # (what the connection receives, in pieces; bytes kept; bytes dropped)
    (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA"],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        5,
    ),
    (
        [b"HTTP/1.1 200 OK\r\nContent-Len", b"gth: 5\r\n\r\nhe", b"llo", b"++"],
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        2,
    ),
    (
        [b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokXX"],
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        2,
    ),
    (
        [b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\nXX"],
        b"HTTP/1.1 204 No Content\r\nContent-Length: 9\r\n\r\n",
        2,
    ),
    ([b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nokX"], b"HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", 1),
    # not framed by a length: passed through for aiohttp to judge
    (
        [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n"],
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\n2\r\nok\r\n0\r\n\r\n",
        0,
    ),
    (
        [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabcd"],
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabcd",
        0,
    ),
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
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na") == (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na",
        0,
    )
    assert framer.feed(b"late") == (b"", 4)
    framer.expect_response()
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nbc") == (
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
        1,
    )


def test_the_framer_ignores_the_body_length_of_an_answer_to_head():
    framer = DeclaredLengthFramer(header_limit=4096)
    framer.expect_response(head_only=True)
    assert framer.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nX") == (
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        1,
    )


def test_the_framer_passes_an_oversized_head_through_for_the_parser_to_refuse():
    framer = DeclaredLengthFramer(header_limit=16)
    framer.expect_response()
    data = b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 100
    assert framer.feed(data) == (data, 0)
