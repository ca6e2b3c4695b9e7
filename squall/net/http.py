"""The fetch protocol: one HTTP GET under squall's safety rules, aiohttp errors translated here.

This module is the one boundary where aiohttp exceptions become
:class:`squall.errors.FetchError` (seed 003: timeouts, public-network
restrictions, response-size limits, compression bombs, DNS rebinding):

* the host is resolved once (DNS, or an ``http.resolve`` pin) by
  :class:`PolicyResolver`, every address is judged by
  :func:`squall.policy.netsafety.check_address`, and aiohttp connects only to the
  addresses that were judged — it never looks the name up a second time;
  an IP-literal host is judged before the request starts;
* redirects are not followed: the caller gets the 3xx and
  :attr:`FetchResult.location` and decides (``http.redirect.max`` belongs to
  the caller, which must fetch the target through this module again);
* ``http.content.limit`` bounds the decoded body; a longer body is cut,
  marked ``truncated`` and its connection closed. Content codings (gzip,
  deflate, br, zstd, and stacks such as ``gzip, gzip``) are undone here, not
  by aiohttp, in bounded steps (:mod:`squall.net.content_coding`), so a
  decompression bomb costs memory of the limit, not of its size;
  ``Accept-Encoding`` names only the codings that can be decoded;
* a response is read to its declared ``Content-Length`` and no further:
  bytes a server sends past it (in the same packet or later) are dropped and
  the connection is not reused (:class:`DeclaredLengthFramer`), where
  aiohttp's parser would fail the whole response;
* ``http.header.limit`` bounds each header line and the whole header block;
* ``http.timeout.connect`` / ``.read`` / ``.total`` become aiohttp's
  ``ClientTimeout(connect=, sock_read=, total=)``.

Failure reasons (:class:`squall.policy.records.Reason`): ``fetch.blocked_address``
(raised as :class:`~squall.errors.BlockedAddress`), ``fetch.dns``,
``fetch.connection`` (refused, reset, closed before an answer),
``fetch.timeout``, ``fetch.protocol`` (malformed or oversized answer,
undecodable body, TLS failure), ``url.scheme`` / ``url.host`` /
``url.malformed`` for a URL aiohttp cannot request.
"""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.client_proto import ResponseHandler
from multidict import CIMultiDict
from yarl import URL

from squall.errors import BlockedAddress, FetchError
from squall.policy.netsafety import NetworkPolicy, check_address
from squall.policy.records import Reason
from squall.settings import Settings

from squall.net.content_coding import ACCEPT_ENCODING, HAS_BROTLI, decoder_for  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from squall.policy.render_policy import RenderOutcome

# The schemes this client speaks (aiohttp), not a configuration default:
# urlfilters.schemes chooses what is crawled; a URL of another scheme ends ERROR url.scheme here.
PROTOCOL_SCHEMES = frozenset({"http", "https"})
_READ_CHUNK = 64 * 1024  # bytes asked of the stream per read; aiohttp's own buffer size
_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_NO_BODY_STATUSES = frozenset({204, 304})   # RFC 9110 §6.4.1: no content whatever the headers say
_HEADER_END = re.compile(rb"\r?\n\r?\n")
log = logging.getLogger("squall.net.http")

AddrInfo = tuple[Any, Any, int, str, tuple[Any, ...]]
GetAddrInfo = Callable[[str, int, int], Awaitable[Sequence[AddrInfo]]]


@dataclass(frozen=True)
class HttpConfig:
    """Settings of :class:`HttpFetcher`; sizes in bytes, durations in seconds.

    ``content_limit``: decoded body bytes kept, -1 = no limit
    (``http.content.limit``). ``header_limit``: bytes of one header line and of
    the whole header block (``http.header.limit``). Timeouts: connecting
    (DNS included), between two reads, whole request (``http.timeout.*``).
    """

    user_agent: str
    content_limit: int
    header_limit: int
    connect_timeout_s: float
    read_timeout_s: float
    total_timeout_s: float
    network: NetworkPolicy

    @classmethod
    def from_settings(cls, settings: Settings) -> "HttpConfig":
        """Copy the ``http.*`` keys and the user agent of ``settings`` (checked by :mod:`squall.settings.rules`).

        Raises:
            ConfigError: a bad ``http.private.networks.allow`` / ``http.resolve`` entry (key named).
        """
        return cls(user_agent=settings.user_agent, content_limit=settings.http_content_limit,
                   header_limit=settings.http_header_limit, connect_timeout_s=settings.http_timeout_connect,
                   read_timeout_s=settings.http_timeout_read, total_timeout_s=settings.http_timeout_total,
                   network=NetworkPolicy.from_settings(settings))


@dataclass(frozen=True)
class FetchResult:
    """One HTTP answer, redirects not followed.

    ``url``: the URL requested. ``headers``: response headers in received
    order, names and values decoded as Latin-1 (``.encode("latin-1")`` gives
    the bytes back, for WARC). ``body``: decoded (gzip/deflate/br/zstd and stacks of them undone),
    at most ``http.content.limit`` bytes; ``truncated`` when more was sent.
    Note that ``headers`` still carry the server's ``Content-Encoding`` and
    ``Content-Length`` of the encoded body. ``ip``: the judged address
    connected to. ``started_at_s`` / ``ended_at_s``: Unix time before the
    request and after the body. ``request_headers``: the headers sent.
    ``http_version``: the status line's protocol, e.g. ``"HTTP/1.1"`` (the
    form :meth:`squall.net.warc.WarcWriter.write_fetch` takes). ``render``: set
    by the render step (:mod:`agents.render`) when the page went through a
    browser; ``body`` is then the rendered DOM when the render succeeded.
    """

    url: str
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    truncated: bool
    ip: str
    started_at_s: float
    ended_at_s: float
    request_headers: list[tuple[str, str]]
    http_version: str
    render: "RenderOutcome | None" = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None if absent."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def content_type(self) -> str | None:
        """Mime type of Content-Type, lower-case, without parameters; None if absent or empty."""
        value = self.header("Content-Type")
        mime = value.split(";", 1)[0].strip().lower() if value else ""
        return mime or None

    @property
    def location(self) -> str | None:
        """The Location header resolved against ``url`` (RFC 9110 §10.2.2), or None if absent or unusable."""
        value = self.header("Location")
        if value is None or not value.strip():
            return None
        try:
            return urljoin(self.url, value.strip())
        except ValueError:
            return None


class PolicyResolver(AbstractResolver):
    """aiohttp resolver that resolves once and returns only addresses the policy allows.

    A pinned ``(host, port)`` (``http.resolve``) is used instead of DNS. If
    any resolved address is refused by :func:`check_address`, the whole
    host is refused: :class:`BlockedAddress` is raised and nothing is
    connected to. DNS failures surface as :class:`socket.gaierror`, which
    aiohttp wraps in ``ClientConnectorDNSError``. ``getaddrinfo`` replaces
    the event loop's (for tests): ``(host, port, family) -> addrinfo list``.
    """

    def __init__(self, policy: NetworkPolicy, getaddrinfo: GetAddrInfo | None = None) -> None:
        self._policy = policy
        self._getaddrinfo = getaddrinfo

    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        pinned = self._policy.pinned(host, port)
        if pinned is not None:
            infos: Sequence[AddrInfo] = [(_family_of(pinned), socket.SOCK_STREAM, 0, "", (pinned, port))]
        elif self._getaddrinfo is not None:
            infos = await self._getaddrinfo(host, port, family)
        else:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, family=family, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG)
        results: list[ResolveResult] = []
        for info_family, _, proto, _, sockaddr in infos:
            address = await self._numeric_host(info_family, sockaddr)
            if check_address(address, self._policy) is not None:
                raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS.value, f"{host} resolves to {address}")
            results.append(ResolveResult(hostname=host, host=address, port=port, family=info_family,
                                         proto=proto, flags=_NUMERIC_FLAGS))
        if not results:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no usable address")
        return results

    async def _numeric_host(self, family: int, sockaddr: tuple[Any, ...]) -> str:
        if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
            # a scoped (link-local) IPv6 address needs its %zone to be connectable
            host, _ = await asyncio.get_running_loop().getnameinfo(sockaddr[:4], socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)
            return host
        return str(sockaddr[0])

    async def close(self) -> None:
        pass


def _family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class _PeerResponse(aiohttp.ClientResponse):
    """ClientResponse that records the peer address of its connection (``peer_ip``)."""

    peer_ip: str = ""

    async def start(self, connection: Any) -> "aiohttp.ClientResponse":
        transport = connection.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        if peer:
            self.peer_ip = str(peer[0])
        return await super().start(connection)


class DeclaredLengthFramer:
    """Splits what a connection receives into the responses' declared bytes and what comes after.

    Pure (no I/O): :meth:`feed` takes bytes as received and returns
    ``(kept, dropped)``. A response whose head (status line and headers,
    up to ``header_limit`` bytes) declares a ``Content-Length`` ends after
    that many body bytes (none for 1xx, 204, 304 or an answer to HEAD,
    RFC 9110 §6.4.1); bytes after it, before the next request
    (:meth:`expect_response`), are dropped: squall never pipelines, so they
    can only be excess of the response just read. A response framed
    otherwise (chunked, read to close, an unreadable head) is passed
    through whole, and the connection stops being framed.
    """

    def __init__(self, header_limit: int) -> None:
        self._header_limit = header_limit
        self._head = b""
        self._state = "head"        # head | body | done | pass
        self._remaining = 0
        self._head_only = False

    def expect_response(self, *, head_only: bool = False) -> None:
        """A request was sent: the next bytes are its response (``head_only`` for a HEAD request)."""
        if self._state != "pass":
            self._state, self._head, self._remaining, self._head_only = "head", b"", 0, head_only

    def feed(self, data: bytes) -> tuple[bytes, int]:
        """``(bytes to parse, count of bytes dropped)`` for ``data`` as received."""
        if self._state == "body" and len(data) < self._remaining:
            self._remaining -= len(data)   # the common case, a piece of a body: passed on without a copy
            return data, 0
        kept = bytearray()
        while data and self._state != "pass":
            if self._state == "done":
                return bytes(kept), len(data)
            if self._state == "body":
                take = min(self._remaining, len(data))
                kept += data[:take]
                data, self._remaining = data[take:], self._remaining - take
                if self._remaining == 0:
                    self._state = "done"
                continue
            # head: find where the header block ends
            self._head += data
            match = _HEADER_END.search(self._head)
            if match is None:
                if len(self._head) > self._header_limit:
                    self._state = "pass"   # aiohttp's parser refuses it; nothing to frame
                    kept += self._head
                    data = b""
                return bytes(kept), 0
            head, data = self._head[:match.end()], self._head[match.end():]
            self._head = b""
            kept += head
            length = self._body_length(head)
            if length is None:
                self._state = "pass"
            elif length == -1:
                self._state = "head"   # an interim 1xx answer: the final one follows
            elif length == 0:
                self._state = "done"
            else:
                self._state, self._remaining = "body", length
        return bytes(kept) + data, 0

    def _body_length(self, head: bytes) -> int | None:
        """Body bytes a response head declares; -1 for an interim 1xx; None when not framed by length."""
        lines = head.decode("latin-1").splitlines()
        parts = lines[0].split(None, 2) if lines else []
        if len(parts) < 2 or not parts[1].isdigit():
            return None
        status = int(parts[1])
        if 100 <= status < 200:
            return -1
        if status in _NO_BODY_STATUSES or self._head_only:
            return 0
        lengths: set[str] = set()
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            name = name.strip().lower()
            if name == "transfer-encoding":
                return None   # chunked (or worse): framed by its encoding, not by length
            if name == "content-length":
                lengths.update(v.strip() for v in value.split(","))
        if len(lengths) != 1:
            return None       # absent (read to close) or contradictory: aiohttp decides
        value = lengths.pop()
        return int(value) if value.isdigit() else None


class _FramingProtocol(ResponseHandler):
    """aiohttp's response protocol with a :class:`DeclaredLengthFramer` in front of its parser."""

    def __init__(self, *args: Any, header_limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._framer = DeclaredLengthFramer(header_limit)

    def set_response_params(self, *args: Any, **kwargs: Any) -> None:
        self._framer.expect_response(head_only=bool(kwargs.get("skip_payload", False)))
        super().set_response_params(*args, **kwargs)

    def data_received(self, data: bytes) -> None:
        if not data:   # aiohttp's own call to resume a paused read: not from the network
            super().data_received(data)
            return
        kept, dropped = self._framer.feed(data)
        if dropped:
            log.info("squall: dropped %d byte(s) sent after the declared Content-Length", dropped)
            self.force_close()   # the connection's state is unknown: never reuse it
        if kept:
            super().data_received(kept)


class _FramingConnector(aiohttp.TCPConnector):
    """TCPConnector whose connections use :class:`_FramingProtocol`.

    aiohttp has no public hook for the protocol class; ``_factory`` is the
    attribute its connector calls for each connection (checked by
    tests/unit/test_http.py, which fails if a new aiohttp renames it).
    """

    def __init__(self, *args: Any, header_limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not hasattr(self, "_factory"):
            raise RuntimeError("aiohttp's TCPConnector has no _factory: squall.net.http needs updating")
        self._factory = functools.partial(_FramingProtocol, loop=self._loop, header_limit=header_limit)


class HttpFetcher:
    """Fetches URLs with one aiohttp session; use as ``async with HttpFetcher(config) as f``.

    Cookies are never stored or sent, proxies from the environment are not
    used, TLS certificates are verified. ``resolver`` replaces the
    :class:`PolicyResolver` built from ``config.network`` (tests);
    ``clock`` gives Unix seconds for ``started_at_s`` / ``ended_at_s``.
    """

    def __init__(self, config: HttpConfig, *, resolver: AbstractResolver | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self._resolver = resolver if resolver is not None else PolicyResolver(config.network)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> "HttpFetcher":
        cfg = self.config
        self._session = aiohttp.ClientSession(
            connector=_FramingConnector(resolver=self._resolver, header_limit=cfg.header_limit),
            auto_decompress=False,   # content codings are undone by squall.net.content_coding, bounded
            timeout=aiohttp.ClientTimeout(total=cfg.total_timeout_s, connect=cfg.connect_timeout_s,
                                          sock_read=cfg.read_timeout_s),
            cookie_jar=aiohttp.DummyCookieJar(),
            response_class=_PeerResponse,
            # per-line bounds inside aiohttp's parser; the block total is checked in fetch()
            max_line_size=cfg.header_limit,
            max_field_size=cfg.header_limit,
            trust_env=False,
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the session and its connections (idempotent)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def fetch(self, url: str, *, headers: Mapping[str, str] | None = None,
                    address: str | None = None) -> FetchResult:
        """GET ``url`` once, redirects not followed.

        ``headers`` are sent in addition to ``User-Agent`` (always the
        configured one) and ``Accept-Encoding`` (which they may replace).
        Any HTTP status is a result, not an error. ``address`` (an IP
        address, ``partition.url.mode: byIP``): connect there instead of
        resolving the host, still judged by the SSRF guard; the request keeps
        the URL's own ``Host`` header and, over TLS, its name for SNI and the
        certificate check.

        Raises:
            BlockedAddress: the host is, or resolves to, a refused address.
            FetchError: ``fetch.dns``, ``fetch.connection``, ``fetch.timeout``,
                ``fetch.protocol``, ``url.scheme``, ``url.host`` or
                ``url.malformed`` (see the module docstring).
            RuntimeError: used outside ``async with``.
        """
        if self._session is None:
            raise RuntimeError("HttpFetcher.fetch() outside 'async with HttpFetcher(...)'")
        target = _checked_target(url, self.config.network)
        request_headers = CIMultiDict({"Accept-Encoding": ACCEPT_ENCODING})
        for name, value in (headers or {}).items():
            if name.lower() not in ("user-agent", "host"):
                request_headers[name] = value  # case-insensitive: replaces a default
        request_headers["User-Agent"] = self.config.user_agent
        server_hostname = None
        if address is not None and address != target.raw_host:
            target, server_hostname = _pinned_target(target, address, self.config.network)
            request_headers["Host"] = _host_header(URL(url))
        started_at_s = self._clock()
        try:
            async with self._session.get(target, headers=request_headers, allow_redirects=False,
                                         server_hostname=server_hostname) as response:
                self._check_header_block(response)
                body, truncated = await self._read_body(response)
        except FetchError:
            raise
        except Exception as exc:  # the translation boundary: nothing aiohttp-specific escapes
            raise _translate(exc, url) from exc
        assert isinstance(response, _PeerResponse)
        return FetchResult(
            url=url, status=response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            body=body, truncated=truncated, ip=response.peer_ip, started_at_s=started_at_s,
            ended_at_s=self._clock(),
            request_headers=[(str(k), str(v)) for k, v in response.request_info.headers.items()],
            http_version=f"HTTP/{response.version.major}.{response.version.minor}" if response.version else "",
        )

    async def resolve(self, host: str, port: int) -> list[str]:
        """The judged addresses of ``host:port`` through this fetcher's resolver (``http.resolve`` pins included).

        An IP-literal host is judged, never looked up. The byIP mode keys a
        host by one of them (:mod:`agents.addresses`, :mod:`squall.policy.address_key`).

        Raises:
            BlockedAddress: the host is, or resolves to, an address the SSRF guard refuses.
            FetchError: ``fetch.dns``: no answer, no usable address, or none
                within ``http.timeout.connect``.
        """
        literal = host.strip("[]")
        try:
            ipaddress.ip_address(literal)
        except ValueError:
            pass
        else:
            if check_address(literal, self.config.network) is not None:
                raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS.value, f"address {host}")
            return [literal]
        try:
            results = await asyncio.wait_for(self._resolver.resolve(host, port, socket.AF_UNSPEC),
                                             self.config.connect_timeout_s)
        except BlockedAddress:
            raise
        except (OSError, TimeoutError, asyncio.TimeoutError) as exc:  # socket.gaierror is an OSError
            raise FetchError(Reason.FETCH_DNS.value, f"{host}: {type(exc).__name__}: {exc}") from None
        return [r["host"] for r in results]

    def _check_header_block(self, response: aiohttp.ClientResponse) -> None:
        # aiohttp bounds single lines only; the block may hold up to 128 such lines
        size = sum(len(k) + len(v) + 4 for k, v in response.raw_headers)  # "k: v\r\n"
        if size > self.config.header_limit:
            response.close()
            raise FetchError(Reason.FETCH_PROTOCOL.value,
                             f"response headers of {size} bytes exceed http.header.limit {self.config.header_limit}")

    async def _read_body(self, response: aiohttp.ClientResponse) -> tuple[bytes, bool]:
        """Read and decode the body up to the content limit (on decoded bytes); (body, truncated)."""
        limit = self.config.content_limit
        decoder = decoder_for(",".join(response.headers.getall("Content-Encoding", [])) or None)
        chunks: list[bytes] = []
        kept = 0
        while True:
            # ask for one byte past the limit: getting it is how a longer body shows
            while limit < 0 or kept <= limit:
                out = decoder.read(_READ_CHUNK if limit < 0 else min(_READ_CHUNK, limit + 1 - kept))
                if not out:
                    break
                chunks.append(out)
                kept += len(out)
            if 0 <= limit < kept:
                # cut: drop the connection instead of draining the rest (it may be endless)
                response.close()
                return b"".join(chunks)[:limit], True
            raw = await response.content.read(_READ_CHUNK)
            if not raw:
                return b"".join(chunks), False
            decoder.feed(raw)


def _checked_target(url: str, policy: NetworkPolicy) -> URL:
    """Parse ``url`` and judge an IP-literal host (aiohttp skips the resolver for those)."""
    try:
        target = URL(url)
    except (ValueError, TypeError) as exc:
        raise FetchError(Reason.URL_MALFORMED.value, f"{url!r}: {exc}") from None
    if target.scheme not in PROTOCOL_SCHEMES:
        raise FetchError(Reason.URL_SCHEME.value, url)
    host = target.raw_host
    if not host:
        raise FetchError(Reason.URL_HOST.value, url)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return target  # a name: PolicyResolver judges what it resolves to
    if check_address(host, policy) is not None:
        raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS.value, f"{url}: address {host}")
    return target


def _pinned_target(target: URL, address: str, policy: NetworkPolicy) -> tuple[URL, str | None]:
    """``target`` with its host replaced by ``address`` (judged), and the name for TLS (None over http).

    Raises:
        BlockedAddress: ``address`` is refused by the SSRF guard, or is not an IP address.
    """
    if check_address(address, policy) is not None:
        raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS.value, f"{target}: address {address}")
    name = target.raw_host
    return target.with_host(address.strip("[]")), (name if target.scheme == "https" else None)


def _host_header(url: URL) -> str:
    """The Host header of ``url`` (RFC 9110 §7.2): its host, and its port unless the scheme's default."""
    host = url.raw_host or ""
    if ":" in host:
        host = f"[{host}]"
    return host if url.is_default_port() else f"{host}:{url.port}"


def _translate(exc: BaseException, url: str) -> FetchError:
    """Map an aiohttp/OS exception to a FetchError with a Reason value."""
    detail = f"{url}: {type(exc).__name__}: {exc}"
    if isinstance(exc, BlockedAddress):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):  # ServerTimeoutError is one
        return FetchError(Reason.FETCH_TIMEOUT.value, detail)
    if isinstance(exc, aiohttp.ClientConnectorDNSError) or isinstance(exc, socket.gaierror):
        return FetchError(Reason.FETCH_DNS.value, detail)
    if isinstance(exc, aiohttp.ClientSSLError):
        return FetchError(Reason.FETCH_PROTOCOL.value, detail)
    if isinstance(exc, aiohttp.NonHttpUrlClientError):
        return FetchError(Reason.URL_SCHEME.value, detail)
    if isinstance(exc, aiohttp.InvalidURL):
        return FetchError(Reason.URL_MALFORMED.value, detail)
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return FetchError(Reason.FETCH_CONNECTION.value, detail)
    return FetchError(Reason.FETCH_PROTOCOL.value, detail)  # ClientResponseError, ClientPayloadError, ...
