"""HTTP content codings, decoded in bounded steps: gzip, deflate, br, zstd, and stacks of them.

:func:`decoder_for` turns a ``Content-Encoding`` header into a
:class:`Decoder`; the fetcher feeds it the body as received and reads the
decoded bytes in pieces of at most the size it asks for, so memory stays
bounded by what it keeps (``http.content.limit``) plus one step per coding,
whatever the compression ratio (a decompression bomb stops at the limit).

Rules: RFC 9110 §8.4 (codings are listed in the order they were applied,
so they are undone from the last to the first; ``identity`` is no coding;
``x-gzip`` is ``gzip``, §8.4.1.3); gzip streams of several members are
decoded whole (RFC 1952 §2.2); ``deflate`` is the zlib format (§8.4.1.2) but,
like browsers, raw deflate is accepted too. Unknown codings are passed
through undecoded (like browsers, lenient). ``br`` needs Brotli >= 1.2 (its
bounded ``process``), ``zstd`` the standard library's ``compression.zstd``
(Python >= 3.14) or its backport ``backports.zstd``; :data:`ACCEPT_ENCODING`
advertises only what can be decoded here.
"""

from __future__ import annotations

import zlib
from typing import Protocol

from squall.errors import FetchError
from squall.policy.reasons import Reason

try:
    import brotli

    HAS_BROTLI = hasattr(brotli.Decompressor(), "can_accept_more_data")  # Brotli >= 1.2: bounded output
except ImportError:  # pragma: no cover - a dependency
    HAS_BROTLI = False

try:
    from compression.zstd import ZstdDecompressor, ZstdError

    HAS_ZSTD = True
except ImportError:
    try:
        from backports.zstd import ZstdDecompressor, ZstdError

        HAS_ZSTD = True
    except ImportError:  # pragma: no cover - a dependency
        HAS_ZSTD = False

STEP = 64 * 1024  # bytes one intermediate coding hands to the next at a time
ACCEPT_ENCODING = ", ".join(["gzip", "deflate"] + (["br"] if HAS_BROTLI else []) + (["zstd"] if HAS_ZSTD else []))
_ALIASES = {"x-gzip": "gzip"}


def decodable(coding: str) -> bool:
    """True for a coding (lower case) this module decodes."""
    return coding in ("gzip", "deflate") or (coding == "br" and HAS_BROTLI) or (coding == "zstd" and HAS_ZSTD)


def codings(header: str | None) -> list[str]:
    """Content-Encoding values in the order they were applied, lower case, ``identity`` dropped.

    ``"gzip, br"`` → ``["gzip", "br"]``; ``"x-gzip"`` → ``["gzip"]``;
    ``None`` or ``""`` → ``[]``. Several headers are joined by the caller
    with ``,`` (RFC 9110 §5.3).
    """
    out = []
    for value in (header or "").split(","):
        name = _ALIASES.get(value.strip().lower(), value.strip().lower())
        if name and name != "identity":
            out.append(name)
    return out


class _Stage(Protocol):
    def feed(self, data: bytes) -> None: ...
    def read(self, size: int) -> bytes: ...


class _Zlib:
    """gzip (``wbits`` 31, members after the first too) or deflate (zlib, else raw, chosen on the first bytes)."""

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._obj: zlib._Decompress | None = zlib.decompressobj(31) if coding == "gzip" else None
        self._pending = b""

    def feed(self, data: bytes) -> None:
        self._pending += data

    def read(self, size: int) -> bytes:
        while self._pending:
            if self._obj is None:  # deflate: zlib header (RFC 1950) or, as some servers send, raw RFC 1951
                if len(self._pending) < 2:
                    return b""
                zlib_header = (self._pending[0] & 0x0F) == 8 and int.from_bytes(self._pending[:2], "big") % 31 == 0
                self._obj = zlib.decompressobj(15 if zlib_header else -15)
            if self._obj.eof:
                if self._coding != "gzip" or not self._pending.lstrip(b"\0"):
                    self._pending = b""  # trailing bytes after the stream (or gzip padding): ignored
                    return b""
                self._obj = zlib.decompressobj(31)  # another gzip member (RFC 1952 §2.2)
            out = self._obj.decompress(self._pending, size)
            self._pending = self._obj.unconsumed_tail
            if self._obj.eof:
                self._pending = self._obj.unused_data + self._pending
            if out:
                return out
        return b""


class _Brotli:
    def __init__(self) -> None:
        self._obj = brotli.Decompressor()
        self._pending = b""
        self._extra = b""  # output past ``size``: the limit stops the buffer's growth, not at a byte

    def feed(self, data: bytes) -> None:
        self._pending += data

    def read(self, size: int) -> bytes:
        if self._extra:
            out, self._extra = self._extra[:size], self._extra[size:]
            return out
        out = self._process(size)
        out, self._extra = out[:size], out[size:]
        return out

    def _process(self, size: int) -> bytes:
        if self._obj.is_finished():
            self._pending = b""  # bytes after the stream: ignored
            return b""
        if self._obj.can_accept_more_data():
            data, self._pending = self._pending, b""
        else:
            data = b""  # the decoder still holds input: it must be drained with empty input first
        # the limit is a floor of about 32 KiB in Brotli 1.2: output past ``size`` waits in _extra
        return self._obj.process(data, output_buffer_limit=size)


class _Zstd:
    def __init__(self) -> None:
        self._obj = ZstdDecompressor()
        self._pending = b""

    def feed(self, data: bytes) -> None:
        self._pending += data

    def read(self, size: int) -> bytes:
        while True:
            if self._obj.eof:
                rest = self._obj.unused_data + self._pending
                if not rest:
                    return b""
                self._obj, self._pending = ZstdDecompressor(), rest  # another frame
            if self._obj.needs_input:
                data, self._pending = self._pending, b""
                if not data:
                    return b""
            else:
                data = b""
            out = self._obj.decompress(data, size)
            if out or not self._obj.eof:
                return out


class Decoder:
    """Undoes a stack of content codings; ``feed`` the body as received, ``read`` what it decodes to.

    ``read(size)`` returns at most ``size`` bytes (``size`` > 0), ``b""``
    when more input is needed (or the body is complete). Nothing is decoded
    ahead of a ``read``: each coding holds at most :data:`STEP` bytes of
    output for the next one.

    Raises (from ``read``):
        FetchError: ``fetch.protocol`` for data that is not valid in its coding.
    """

    def __init__(self, applied: list[str]) -> None:
        self.codings = list(applied)
        self._stages: list[_Stage] = [_make(c) for c in reversed(applied) if decodable(c)]
        self._raw = b""

    def feed(self, data: bytes) -> None:
        """Add body bytes as received (still encoded)."""
        if self._stages:
            self._stages[0].feed(data)
        else:
            self._raw += data

    def read(self, size: int) -> bytes:
        """Up to ``size`` decoded bytes; ``b""`` when the input fed so far is used up."""
        if not self._stages:
            out, self._raw = self._raw[:size], self._raw[size:]
            return out
        try:
            return self._read(len(self._stages) - 1, size)
        except _DECODE_ERRORS as exc:
            raise FetchError(
                Reason.FETCH_PROTOCOL, f"body not valid {'/'.join(self.codings)}: {type(exc).__name__}: {exc}"
            ) from None

    def _read(self, index: int, size: int) -> bytes:
        stage = self._stages[index]
        while True:
            out = stage.read(size)
            if out or index == 0:
                return out
            upstream = self._read(index - 1, STEP)  # the coding applied before this one
            if not upstream:
                return b""
            stage.feed(upstream)


def _make(coding: str) -> _Stage:
    if coding == "br":
        return _Brotli()
    if coding == "zstd":
        return _Zstd()
    return _Zlib(coding)


def decoder_for(content_encoding: str | None) -> Decoder:
    """A :class:`Decoder` for a ``Content-Encoding`` header value (``None`` = no coding)."""
    return Decoder(codings(content_encoding))


_CODING_ERRORS: tuple[type[BaseException], ...] = tuple(
    e for e in ((brotli.error if HAS_BROTLI else None), (ZstdError if HAS_ZSTD else None)) if e is not None
)
_DECODE_ERRORS: tuple[type[BaseException], ...] = (zlib.error, EOFError, *_CODING_ERRORS)
