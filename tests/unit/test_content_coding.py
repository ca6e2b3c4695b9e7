"""Content codings decoded in bounded steps (squall.net.content_coding): gzip, deflate, br, zstd, stacks."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from squall.net.content_coding import ACCEPT_ENCODING, STEP, codings, decodable, decoder_for
from squall.errors import FetchError
from squall.policy.reasons import Reason

try:
    from compression import zstd   # type: ignore[import-not-found]
except ImportError:
    from backports import zstd

TEXT = b"<html>" + b"squall crawls politely. " * 4000 + b"</html>"


def raw_deflate(data: bytes) -> bytes:
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    return comp.compress(data) + comp.flush()


ENCODERS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": zstd.compress,
    "identity": lambda b: b,
}


def encode(data: bytes, header: str) -> bytes:
    for name in (v.strip().lower() for v in header.split(",")):
        data = ENCODERS[name](data)
    return data


def decode_all(header: str | None, body: bytes, *, piece: int = 1000, size: int = 4096) -> bytes:
    """Feed ``body`` in pieces of ``piece`` bytes, reading ``size`` at a time, like the fetcher does."""
    decoder = decoder_for(header)
    out = []
    for i in range(0, len(body), piece):
        decoder.feed(body[i:i + piece])
        while chunk := decoder.read(size):
            assert len(chunk) <= size
            out.append(chunk)
    return b"".join(out)


@pytest.mark.parametrize(("header", "expected"), [
    (None, []),
    ("", []),
    ("identity", []),
    ("GZIP", ["gzip"]),
    ("x-gzip", ["gzip"]),
    ("gzip, br", ["gzip", "br"]),
    ("gzip,gzip", ["gzip", "gzip"]),
    (" br , identity, zstd ", ["br", "zstd"]),
])
def test_codings_lists_the_codings_in_the_order_they_were_applied(header: str | None, expected: list[str]) -> None:
    assert codings(header) == expected


@pytest.mark.parametrize("header", ["gzip", "x-gzip", "deflate", "br", "zstd", "identity",
                                    "gzip, gzip", "gzip, br", "br, gzip", "deflate, zstd, gzip", "zstd, br"])
def test_every_coding_and_stack_of_codings_decodes_to_the_original(header: str) -> None:
    assert decode_all(header, encode(TEXT, header)) == TEXT


@pytest.mark.parametrize("piece", [1, 7, 65536])
def test_decoding_does_not_depend_on_how_the_body_is_cut(piece: int) -> None:
    body = encode(TEXT, "gzip, br")
    assert decode_all("gzip, br", body, piece=piece) == TEXT


def test_raw_deflate_is_accepted_as_deflate_like_browsers_do() -> None:
    assert decode_all("deflate", raw_deflate(TEXT)) == TEXT


def test_gzip_members_are_all_decoded() -> None:
    assert decode_all("gzip", gzip.compress(b"first ") + gzip.compress(b"second")) == b"first second"


def test_zstd_frames_are_all_decoded() -> None:
    assert decode_all("zstd", zstd.compress(b"first ") + zstd.compress(b"second")) == b"first second"


def test_an_unknown_coding_is_passed_through_undecoded() -> None:
    assert decode_all("compress", b"as sent") == b"as sent"
    assert decode_all("compress, gzip", gzip.compress(b"as sent")) == b"as sent"


@pytest.mark.parametrize("header", ["gzip", "deflate", "br", "zstd"])
def test_garbage_in_a_coding_is_a_protocol_failure(header: str) -> None:
    with pytest.raises(FetchError) as caught:
        decode_all(header, b"\x1f\x8b this is not compressed at all" * 10)
    assert caught.value.reason == Reason.FETCH_PROTOCOL


@pytest.mark.parametrize("header", ["gzip", "br", "zstd", "gzip, gzip", "gzip, br"])
def test_a_bomb_is_decoded_only_as_far_as_it_is_read(header: str) -> None:
    bomb = encode(b"\0" * (64 * 1024 * 1024), header)   # 64 MiB of zeros, a few KB to a few hundred on the wire
    decoder = decoder_for(header)
    decoder.feed(bomb)
    first = decoder.read(1000)
    assert len(first) == 1000 and first == b"\0" * 1000
    # reading on gives more, in steps no larger than asked: nothing was decoded ahead of the reads
    assert 0 < len(decoder.read(STEP)) <= STEP


def test_accept_encoding_names_only_decodable_codings() -> None:
    names = [n.strip() for n in ACCEPT_ENCODING.split(",")]
    assert names[:2] == ["gzip", "deflate"]
    assert all(decodable(n) for n in names)
    assert {"br", "zstd"} <= set(names)   # both packages are dependencies of squall
