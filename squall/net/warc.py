"""WARC output: one gzip WARC file at a time, a request and a response record per fetch.

A fetch whose payload is identical to one already archived for the URL (same
payload digest) may be written as a ``revisit`` record instead of a second
full copy (WARC 1.1 §6.7.2, profile identical-payload-digest;
:meth:`WarcWriter.write_revisit`), as Heritrix does.

A rendered page (:mod:`agents.render`) adds a ``conversion`` record (WARC 1.1
§6.8: another version of a record's content made by an archival process)
holding the rendered DOM, whose ``WARC-Refers-To`` is the ``WARC-Record-ID``
of the page's response record (:meth:`WarcWriter.write_conversion`).

Files are named ``<prefix>-<UTC yyyymmddHHMMSS>-<serial, 5 digits>.warc.gz``
(the timestamp is when the file was opened; the serial counts files of this
writer from 00000 and is bumped past any name that already exists). Each file
starts with a ``warcinfo`` record. Each record is laid out as WARC 1.1 §4
gives it (the version line, the named fields, an empty line, the block, two
line ends: byte for byte what FastWARC's ``WarcRecord.write`` makes of the
same fields, which the tests hold it to, without building its header map
field by field) and compressed on its own into one gzip member (WARC/1.1
Annex D) by zlib-ng (python-zlib-ng) at level 6; each record's ``WARC-Block-Digest`` and
``WARC-Payload-Digest`` are SHA-1 in base32 (§5.8, §5.9), as warcio writes and
``warcio check`` verifies. After every fetch the file is flushed to the
operating system, so a worker killed at any point leaves a file that reads
complete up to its last flushed record.

The stored body is the *decoded* body the fetcher kept, so the HTTP headers in
the response record are rewritten to match it (ISO 28500 §6.3.2 asks for the
payload "as received"; squall stores it after content decoding, like
StormCrawler's WARC module): ``Content-Encoding``, ``Transfer-Encoding`` and
``Content-Length`` are replaced by ``X-Squall-Original-<Name>`` and a
``Content-Length`` of the stored body is set.

Synchronous and thread-safe (one lock): the fetcher writes small pages on the
event loop and large ones through ``asyncio.to_thread``.
Config keys: ``warc.dir``, ``warc.max.size``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from warcio.timeutils import datetime_to_iso_date
from zlib_ng import zlib_ng

__all__ = ["ORIGINAL_HEADER_PREFIX", "WarcWriter", "payload_digest"]

ORIGINAL_HEADER_PREFIX = "X-Squall-Original-"
# Headers describing the bytes on the wire, not the decoded body that is stored.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding", "content-length")
_SOFTWARE = "squall/0.1"
_GZIP_LEVEL, _GZIP_WBITS = 6, 31  # zlib's default level; deflate in a gzip header and trailer (RFC 1952)
_HTTP_RESPONSE = "application/http; msgtype=response"
_HTTP_REQUEST = "application/http; msgtype=request"
# Response record IDs remembered for write_conversion, newest last (a render follows its fetch within seconds).
_RECENT_RESPONSES = 4096


class WarcWriter:
    """Writes fetches into rotating gzip WARC files in ``directory``.

    ``max_size_bytes``: a file is closed once its size (compressed bytes) is
    at least this many; the next fetch opens a new one. 0 or negative = never
    rotate. ``warc_version``: ``"1.1"`` (default) or ``"1.0"``. ``clock``
    returns Unix seconds; it names the files (tests pass a fake one).
    """

    def __init__(
        self,
        directory: Path,
        prefix: str,
        max_size_bytes: int,
        *,
        warc_version: str = "1.1",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if warc_version not in ("1.0", "1.1"):
            raise ValueError(f"warc_version must be '1.0' or '1.1', not {warc_version!r}")
        self.directory = Path(directory)
        self.prefix = prefix
        self.max_size_bytes = max_size_bytes
        self.warc_version = warc_version
        self._clock = clock
        self._serial = 0
        self._paths: list[Path] = []
        self._file: io.BufferedWriter | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._responses: OrderedDict[tuple[str, str], str] = OrderedDict()

    # ------------------------------------------------------------------ public API

    @property
    def paths(self) -> tuple[Path, ...]:
        """Every file this writer opened, oldest first (the last one may still be open)."""
        return tuple(self._paths)

    @property
    def current_path(self) -> Path | None:
        """The file the next fetch goes to, or None if none is open."""
        return self._paths[-1] if self._file is not None else None

    def write_fetch(
        self,
        url: str,
        *,
        request_headers: list[tuple[str, str]],
        status: int,
        reason: str,
        response_headers: list[tuple[str, str]],
        body: bytes,
        ip: str | None,
        fetched_at_s: float,
        truncated: bool,
        http_version: str = "HTTP/1.1",
        method: str = "GET",
        payload_digest: str | None = None,
    ) -> Path:
        """Write a ``response`` and a ``request`` record for one fetch; return the file written to.

        ``body`` is the decoded (possibly truncated) body; ``truncated`` adds
        ``WARC-Truncated: length``. ``ip`` becomes ``WARC-IP-Address`` (None
        leaves it out). ``fetched_at_s`` (Unix seconds) is the ``WARC-Date`` of
        both records, which point at each other with ``WARC-Concurrent-To``.
        ``payload_digest``: :func:`payload_digest` of ``body`` when the caller
        already has it (written as ``WARC-Payload-Digest``, not computed again);
        None = computed here.

        Raises:
            ValueError: the writer was closed.
            OSError: the file could not be created or written.
        """
        with self._lock:
            path = self._writable()
            date = _warc_date(fetched_at_s, micros=self.warc_version == "1.1")
            req_id, resp_id = _record_id(), _record_id()
            resp_warc = [("WARC-Date", date), ("WARC-Concurrent-To", req_id)]
            if ip:
                resp_warc.append(("WARC-IP-Address", ip))
            if truncated:
                resp_warc.append(("WARC-Truncated", "length"))
            resp_warc += [
                ("WARC-Target-URI", url),
                ("WARC-Payload-Digest", payload_digest or _payload_digest(body)),
                ("Content-Type", _HTTP_RESPONSE),
            ]
            head = _response_head(status, reason, response_headers, len(body), http_version)
            self._write("response", resp_id, resp_warc, head + body)
            self._write_request(url, request_headers, http_version, method, req_id, date, resp_id)
            self._responses[(url, date)] = resp_id
            while len(self._responses) > _RECENT_RESPONSES:
                self._responses.popitem(last=False)
            self._flush_and_rotate()
            return path

    def write_revisit(
        self,
        url: str,
        *,
        request_headers: list[tuple[str, str]],
        status: int,
        reason: str,
        response_headers: list[tuple[str, str]],
        body_length: int,
        ip: str | None,
        fetched_at_s: float,
        payload_digest: str,
        refers_to_date_s: float,
        http_version: str = "HTTP/1.1",
        method: str = "GET",
    ) -> Path:
        """Write a ``revisit`` record (the payload identical to an archived one) and its ``request``; return the file.

        WARC 1.1 §6.7.2, profile identical-payload-digest: the record keeps the
        HTTP status line and headers, not the payload; ``WARC-Payload-Digest``
        is ``payload_digest`` and ``WARC-Refers-To-Target-URI`` /
        ``WARC-Refers-To-Date`` name the full response it repeats (``url`` at
        ``refers_to_date_s``, the ``fetched_at_s`` given to :meth:`write_fetch`
        then; Unix s). ``body_length``: the (decoded) body's bytes, for the
        stored Content-Length.

        Raises:
            ValueError: the writer was closed.
            OSError: the file could not be created or written.
        """
        with self._lock:
            path = self._writable()
            micros = self.warc_version == "1.1"
            date = _warc_date(fetched_at_s, micros=micros)
            req_id, rev_id = _record_id(), _record_id()
            rev_warc = [("WARC-Date", date), ("WARC-Concurrent-To", req_id)]
            if ip:
                rev_warc.append(("WARC-IP-Address", ip))
            rev_warc += [
                ("WARC-Target-URI", url),
                ("WARC-Profile", f"http://netpreserve.org/warc/{self.warc_version}/revisit/identical-payload-digest"),
                ("WARC-Refers-To-Target-URI", url),
                ("WARC-Refers-To-Date", _warc_date(refers_to_date_s, micros=micros)),
                ("WARC-Payload-Digest", payload_digest),
                ("Content-Type", _HTTP_RESPONSE),
            ]
            head = _response_head(status, reason, response_headers, body_length, http_version)
            self._write("revisit", rev_id, rev_warc, head)
            self._write_request(url, request_headers, http_version, method, req_id, date, rev_id)
            self._flush_and_rotate()
            return path

    def write_conversion(
        self, url: str, *, body: bytes, content_type: str, fetched_at_s: float, converted_at_s: float
    ) -> Path:
        """Write a ``conversion`` record of ``url`` (e.g. the rendered DOM); return the file written to.

        ``fetched_at_s`` is the ``fetched_at_s`` given to :meth:`write_fetch`
        for the response it was made from: its record ID becomes
        ``WARC-Refers-To`` (when this writer wrote it among its last
        4096 responses; always ``WARC-Refers-To-Target-URI`` and
        ``WARC-Refers-To-Date``). ``converted_at_s`` is the ``WARC-Date``.

        Raises:
            ValueError: the writer was closed.
            OSError: the file could not be created or written.
        """
        with self._lock:
            path = self._writable()
            micros = self.warc_version == "1.1"
            refers_date = _warc_date(fetched_at_s, micros=micros)
            headers = [
                ("WARC-Date", _warc_date(converted_at_s, micros=micros)),
                ("WARC-Target-URI", url),
                ("WARC-Refers-To-Target-URI", url),
                ("WARC-Refers-To-Date", refers_date),
            ]
            refers_to = self._responses.get((url, refers_date))
            if refers_to:
                headers.append(("WARC-Refers-To", refers_to))
            digest = _payload_digest(body)
            headers += [("WARC-Payload-Digest", digest), ("Content-Type", _clean(content_type))]
            self._write("conversion", _record_id(), headers, body, block_digest=digest)
            self._flush_and_rotate()
            return path

    def close(self) -> None:
        """Close the open file; further writes raise ValueError. Idempotent."""
        with self._lock:
            self._close_file()
            self._closed = True

    def __enter__(self) -> WarcWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ------------------------------------------------------------------ records

    def _write(
        self,
        kind: str,
        record_id: str,
        headers: list[tuple[str, str]],
        block: bytes,
        *,
        block_digest: str | None = None,
    ) -> None:
        """One record as one gzip member: ``WARC-Type`` ``kind``, ``record_id``, ``headers``, the block's length and digest.

        ``kind``: ``response``, ``request``, ``revisit``, ``conversion`` or
        ``warcinfo``; ``record_id`` is ``<urn:uuid:…>`` (:func:`_record_id`);
        ``headers``: clean (name, value) pairs (no CR or LF), ``WARC-Date``
        first, placed second as FastWARC placed it (WARC-Type, WARC-Date,
        WARC-Record-ID, Content-Length, the others in order). ``block_digest``:
        the block's :func:`payload_digest` when the caller has it. Lock held.
        """
        assert self._file is not None and headers[0][0] == "WARC-Date"
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers[1:])
        head = (
            f"WARC/{self.warc_version}\r\nWARC-Type: {kind}\r\nWARC-Date: {headers[0][1]}\r\n"
            f"WARC-Record-ID: {record_id}\r\nContent-Length: {len(block)}\r\n{fields}"
            f"WARC-Block-Digest: {block_digest or _payload_digest(block)}\r\n\r\n"
        )
        record = b"".join((head.encode("utf-8"), block, b"\r\n\r\n"))  # the record before it is compressed
        self._file.write(zlib_ng.compress(record, level=_GZIP_LEVEL, wbits=_GZIP_WBITS))

    def _write_request(
        self,
        url: str,
        headers: list[tuple[str, str]],
        http_version: str,
        method: str,
        req_id: str,
        date: str,
        concurrent_to: str,
    ) -> None:
        """The ``request`` record of a fetch of ``url``, concurrent to the record ``concurrent_to``. Lock held."""
        version = _clean(http_version) or "HTTP/1.1"
        line = f"{_clean(method) or 'GET'} {_request_target(url)} {version}"
        block = _http_head(line, _request_headers(url, headers))
        warc = [
            ("WARC-Date", date),
            ("WARC-Concurrent-To", concurrent_to),
            ("WARC-Target-URI", url),
            ("WARC-Payload-Digest", _EMPTY_DIGEST),  # a GET's payload: no bytes
            ("Content-Type", _HTTP_REQUEST),
        ]
        self._write("request", req_id, warc, block)

    # ------------------------------------------------------------------ files

    def _writable(self) -> Path:
        """The open file's path (opened now if needed); ValueError once closed. Lock held."""
        if self._closed:
            raise ValueError("WarcWriter is closed")
        return self._open_if_needed()

    def _flush_and_rotate(self) -> None:
        """Flush the records just written to the OS; close the file once it reached ``max_size_bytes``. Lock held."""
        assert self._file is not None
        self._file.flush()
        if self.max_size_bytes > 0 and self._file.tell() >= self.max_size_bytes:
            self._close_file()

    def _open_if_needed(self) -> Path:
        if self._file is not None:
            return self._paths[-1]
        self.directory.mkdir(parents=True, exist_ok=True)
        stamp = datetime.fromtimestamp(self._clock(), UTC).strftime("%Y%m%d%H%M%S")
        while True:
            path = self.directory / f"{self.prefix}-{stamp}-{self._serial:05d}.warc.gz"
            self._serial += 1
            try:
                self._file = open(path, "xb")  # noqa: SIM115  # open until rotated; "x": never clobber another file
                break
            except FileExistsError:
                continue
        self._paths.append(path)
        info = {
            "software": _SOFTWARE,
            "hostname": socket.gethostname(),
            "format": f"WARC File Format {self.warc_version}",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/"
            f"warc-{self.warc_version}/",
        }
        fields = "".join(f"{_clean(k)}: {_clean(v)}\r\n" for k, v in info.items()).encode("utf-8")
        now = _warc_date(self._clock(), micros=self.warc_version == "1.1")
        headers = [("WARC-Date", now), ("WARC-Filename", path.name), ("Content-Type", "application/warc-fields")]
        self._write("warcinfo", _record_id(), headers, fields)
        self._file.flush()
        return path

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None


# ---------------------------------------------------------------------- helpers


def payload_digest(body: bytes) -> str:
    """``WARC-Payload-Digest`` of a stored body: ``sha1:`` and the base32 SHA-1 (WARC 1.1 §5.9, warcio's form)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


_payload_digest = payload_digest  # the methods' name for it: their parameter ``payload_digest`` shadows the function
_EMPTY_DIGEST = payload_digest(b"")


def _record_id() -> str:
    """A new ``WARC-Record-ID``: ``<urn:uuid:…>`` with a random (version 4) UUID (WARC 1.1 §5.2)."""
    return f"<urn:uuid:{uuid.uuid4()}>"


def _warc_date(at_s: float, *, micros: bool) -> str:
    dt = datetime.fromtimestamp(at_s, UTC).replace(tzinfo=None)
    return datetime_to_iso_date(dt, use_micros=micros)


def _clean(value: str) -> str:
    """A header name/value/status part without CR/LF, which would break the record framing; whitespace runs as one space."""
    text = str(value)
    if text.isprintable() and text[:1] != " " and text[-1:] != " " and "  " not in text:
        return text  # its only whitespace is single inner spaces (isprintable refuses every other kind): as it is
    return " ".join(text.replace("\r", " ").replace("\n", " ").split())


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(int(status)).phrase
    except ValueError:
        return "Unknown"


def _http_head(start_line: str, headers: list[tuple[str, str]]) -> bytes:
    """An HTTP message head (RFC 9112 §2.1): the start line, the header lines, the empty line; UTF-8."""
    lines = [start_line, *(f"{name}: {value}" for name, value in headers), "", ""]
    return "\r\n".join(lines).encode("utf-8")


def _response_head(status: int, reason: str, headers: list[tuple[str, str]], body_len: int, http_version: str) -> bytes:
    """The stored HTTP status line and headers of a response (or revisit) record, ``body_len`` bytes of body."""
    line = f"{_clean(http_version) or 'HTTP/1.1'} {int(status)} {_clean(reason) or _phrase(status)}"
    return _http_head(line, _stored_response_headers(headers, body_len))


def _stored_response_headers(headers: list[tuple[str, str]], body_len: int) -> list[tuple[str, str]]:
    """Response headers that describe the stored (decoded) body; wire headers kept as X-Squall-Original-*."""
    out: list[tuple[str, str]] = []
    originals: list[tuple[str, str]] = []
    for name, value in headers:
        name, value = _clean(name), _clean(value)
        if not name:
            continue
        if name.lower() in _WIRE_HEADERS:
            originals.append((ORIGINAL_HEADER_PREFIX + "-".join(p.capitalize() for p in name.split("-")), value))
        else:
            out.append((name, value))
    return out + originals + [("Content-Length", str(body_len))]


def _request_headers(url: str, headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    out = [(_clean(k), _clean(v)) for k, v in headers if _clean(k)]
    if not any(k.lower() == "host" for k, _ in out):
        # HTTP/1.1 always sends Host (RFC 9112 §3.2); aiohttp adds it below our headers
        out.insert(0, ("Host", urlsplit(url).netloc.rpartition("@")[2]))
    return out


def _request_target(url: str) -> str:
    """Origin-form request target (RFC 9112 §3.2.1): path and query, never empty."""
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return target.replace(" ", "%20")
