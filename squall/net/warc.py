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
starts with a ``warcinfo`` record. Records are written with warcio's
``WARCWriter(gzip=True)``, one gzip member per record (WARC/1.1 Annex D).

The stored body is the *decoded* body the fetcher kept, so the HTTP headers in
the response record are rewritten to match it (ISO 28500 §6.3.2 asks for the
payload "as received"; squall stores it after content decoding, like
StormCrawler's WARC module): ``Content-Encoding``, ``Transfer-Encoding`` and
``Content-Length`` are replaced by ``X-Squall-Original-<Name>`` and a
``Content-Length`` of the stored body is set.

Synchronous and thread-safe: an agent calls it through ``asyncio.to_thread``.
Config keys: ``warc.dir``, ``warc.max.size``.
"""

from __future__ import annotations

import base64
import hashlib
import io
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from urllib.parse import urlsplit

from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date
from warcio.warcwriter import WARCWriter

__all__ = ["ORIGINAL_HEADER_PREFIX", "WarcWriter", "payload_digest"]

ORIGINAL_HEADER_PREFIX = "X-Squall-Original-"
# Headers describing the bytes on the wire, not the decoded body that is stored.
_WIRE_HEADERS = ("content-encoding", "transfer-encoding", "content-length")
_SOFTWARE = "squall/0.1 (warcio)"
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
        self._writer: WARCWriter | None = None
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
            writer, path = self._writable()
            date = _warc_date(fetched_at_s, micros=self.warc_version == "1.1")
            req_id = writer._make_warc_id()
            resp_id = writer._make_warc_id()

            resp_warc = {"WARC-Record-ID": resp_id, "WARC-Date": date, "WARC-Concurrent-To": req_id}
            if ip:
                resp_warc["WARC-IP-Address"] = ip
            if truncated:
                resp_warc["WARC-Truncated"] = "length"
            if payload_digest:
                resp_warc["WARC-Payload-Digest"] = payload_digest
            resp_http = _response_http(status, reason, response_headers, len(body), http_version)
            response = writer.create_warc_record(
                url,
                "response",
                payload=io.BytesIO(body),
                length=len(body),
                warc_headers_dict=resp_warc,
                http_headers=resp_http,
            )

            request = _request_record(writer, url, request_headers, http_version, method, req_id, date, resp_id)
            writer.write_record(response)
            writer.write_record(request)
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
            writer, path = self._writable()
            micros = self.warc_version == "1.1"
            date = _warc_date(fetched_at_s, micros=micros)
            req_id = writer._make_warc_id()
            rev_id = writer._make_warc_id()
            rev_warc = {"WARC-Record-ID": rev_id, "WARC-Date": date, "WARC-Concurrent-To": req_id}
            if ip:
                rev_warc["WARC-IP-Address"] = ip
            rev_http = _response_http(status, reason, response_headers, body_length, http_version)
            revisit = writer.create_revisit_record(
                url,
                payload_digest,
                url,
                _warc_date(refers_to_date_s, micros=micros),
                http_headers=rev_http,
                warc_headers_dict=rev_warc,
            )
            request = _request_record(writer, url, request_headers, http_version, method, req_id, date, rev_id)
            writer.write_record(revisit)
            writer.write_record(request)
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
            writer, path = self._writable()
            micros = self.warc_version == "1.1"
            refers_date = _warc_date(fetched_at_s, micros=micros)
            headers = {
                "WARC-Date": _warc_date(converted_at_s, micros=micros),
                "WARC-Refers-To-Target-URI": url,
                "WARC-Refers-To-Date": refers_date,
                "Content-Type": _clean(content_type),
            }
            refers_to = self._responses.get((url, refers_date))
            if refers_to:
                headers["WARC-Refers-To"] = refers_to
            record = writer.create_warc_record(
                url,
                "conversion",
                payload=io.BytesIO(body),
                length=len(body),
                warc_headers_dict=headers,
                warc_content_type=_clean(content_type),
            )
            writer.write_record(record)
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

    # ------------------------------------------------------------------ files

    def _writable(self) -> tuple[WARCWriter, Path]:
        """The open writer and its file (opened now if needed); ValueError once closed. Lock held."""
        if self._closed:
            raise ValueError("WarcWriter is closed")
        return self._open_if_needed()

    def _flush_and_rotate(self) -> None:
        """Flush the records just written; close the file once it reached ``max_size_bytes``. Lock held."""
        assert self._file is not None
        self._file.flush()
        if self.max_size_bytes > 0 and self._file.tell() >= self.max_size_bytes:
            self._close_file()

    def _open_if_needed(self) -> tuple[WARCWriter, Path]:
        if self._file is not None and self._writer is not None:
            return self._writer, self._paths[-1]
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
        self._writer = WARCWriter(self._file, gzip=True, warc_version=self.warc_version)
        self._paths.append(path)
        info = {
            "software": _SOFTWARE,
            "hostname": socket.gethostname(),
            "format": f"WARC File Format {self.warc_version}",
            "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/"
            f"warc-{self.warc_version}/",
        }
        self._writer.write_record(self._writer.create_warcinfo_record(path.name, info))
        return self._writer, path

    def _close_file(self) -> None:
        if self._file is not None:
            self._file.close()
        self._file = None
        self._writer = None


# ---------------------------------------------------------------------- helpers


def payload_digest(body: bytes) -> str:
    """``WARC-Payload-Digest`` of a stored body: ``sha1:`` and the base32 SHA-1 (WARC 1.1 §5.9, warcio's form)."""
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode("ascii")


def _warc_date(at_s: float, *, micros: bool) -> str:
    dt = datetime.fromtimestamp(at_s, UTC).replace(tzinfo=None)
    return datetime_to_iso_date(dt, use_micros=micros)


def _clean(value: str) -> str:
    """A header name/value/status part without CR/LF, which would break the record framing."""
    return " ".join(str(value).replace("\r", " ").replace("\n", " ").split())


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(int(status)).phrase
    except ValueError:
        return "Unknown"


def _response_http(
    status: int, reason: str, headers: list[tuple[str, str]], body_len: int, http_version: str
) -> StatusAndHeaders:
    """The stored HTTP status line and headers of a response (or revisit) record, ``body_len`` bytes of body."""
    return StatusAndHeaders(
        f"{int(status)} {_clean(reason) or _phrase(status)}",
        _stored_response_headers(headers, body_len),
        protocol=_clean(http_version) or "HTTP/1.1",
    )


def _request_record(
    writer: WARCWriter,
    url: str,
    headers: list[tuple[str, str]],
    http_version: str,
    method: str,
    req_id: str,
    date: str,
    concurrent_to: str,
) -> ArcWarcRecord:
    """The ``request`` record of a fetch of ``url``, concurrent to the record ``concurrent_to``."""
    # warcio's request line shape: protocol slot = method, status line = "target version"
    req_http = StatusAndHeaders(
        f"{_request_target(url)} {_clean(http_version) or 'HTTP/1.1'}",
        _request_headers(url, headers),
        protocol=_clean(method) or "GET",
    )
    return writer.create_warc_record(
        url,
        "request",
        payload=io.BytesIO(b""),
        length=0,
        warc_headers_dict={"WARC-Record-ID": req_id, "WARC-Date": date, "WARC-Concurrent-To": concurrent_to},
        http_headers=req_http,
    )


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
