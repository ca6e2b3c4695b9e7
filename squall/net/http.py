"""The fetch protocol: one HTTP GET under squall's safety rules, aiohttp errors translated here.

This module is the one boundary where aiohttp exceptions become
:class:`squall.errors.FetchError` (timeouts, public-network
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

Failure reasons (:class:`squall.policy.reasons.Reason`): ``fetch.blocked_address``
(raised as :class:`~squall.errors.BlockedAddress`), ``fetch.dns``,
``fetch.connection`` (refused, reset, closed before an answer),
``fetch.timeout``, ``fetch.protocol`` (malformed or oversized answer,
undecodable body, TLS failure), ``url.scheme`` / ``url.host`` /
``url.malformed`` for a URL aiohttp cannot request.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin

import aiohttp
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict
from yarl import URL

from squall.errors import BlockedAddress, FetchError
from squall.net.connection import AddrInfo, GetAddrInfo, PolicyResolver, _FramingConnector, _PeerResponse  # noqa: F401
from squall.net.content_coding import ACCEPT_ENCODING, HAS_BROTLI, decoder_for  # noqa: F401 (re-exported)
from squall.net.warc import payload_digest
from squall.policy.netsafety import NetworkPolicy, check_address
from squall.policy.partition import is_ip_literal
from squall.policy.reasons import Reason
from squall.settings import Settings

if TYPE_CHECKING:
    from squall.policy.render_policy import RenderOutcome

# The schemes this client speaks (aiohttp), not a configuration default:
# urlfilters.schemes chooses what is crawled; a URL of another scheme ends ERROR url.scheme here.
PROTOCOL_SCHEMES = frozenset({"http", "https"})
_READ_CHUNK = 64 * 1024  # bytes asked of the stream per read; aiohttp's own buffer size
log = logging.getLogger("squall.net.http")


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
    payload_digest: bool = False  # compute FetchResult.payload_digest (WARC archive, documents or adaptive revisits)

    @classmethod
    def from_settings(cls, settings: Settings) -> HttpConfig:
        """Copy the ``http.*`` keys and the user agent of ``settings`` (checked by :mod:`squall.settings.rules`).

        Raises:
            ConfigError: a bad ``http.private.networks.allow`` / ``http.resolve`` entry (key named).
        """
        return cls(
            user_agent=settings.user_agent,
            content_limit=settings.http_content_limit,
            header_limit=settings.http_header_limit,
            connect_timeout_s=settings.http_timeout_connect,
            read_timeout_s=settings.http_timeout_read,
            total_timeout_s=settings.http_timeout_total,
            network=NetworkPolicy.from_settings(settings),
            payload_digest=settings.warc_enabled or settings.documents_enabled or settings.scheduler_adaptive_enabled,
        )


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
    ``payload_digest``: :func:`squall.net.warc.payload_digest` of the body
    as fetched (a render keeps it), computed once when the WARC archive or
    the documents need it, else None.
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
    render: RenderOutcome | None = None
    payload_digest: str | None = None

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


class HttpFetcher:
    """Fetches URLs with one aiohttp session; use as ``async with HttpFetcher(config) as f``.

    Cookies are never stored or sent, proxies from the environment are not
    used, TLS certificates are verified. ``resolver`` replaces the
    :class:`PolicyResolver` built from ``config.network`` (tests);
    ``clock`` gives Unix seconds for ``started_at_s`` / ``ended_at_s``.
    """

    def __init__(
        self, config: HttpConfig, *, resolver: AbstractResolver | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self.config = config
        self._resolver = resolver if resolver is not None else PolicyResolver(config.network)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> HttpFetcher:
        cfg = self.config
        self._session = aiohttp.ClientSession(
            connector=_FramingConnector(resolver=self._resolver, header_limit=cfg.header_limit),
            auto_decompress=False,  # content codings are undone by squall.net.content_coding, bounded
            timeout=aiohttp.ClientTimeout(
                total=cfg.total_timeout_s, connect=cfg.connect_timeout_s, sock_read=cfg.read_timeout_s
            ),
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

    async def fetch(
        self, url: str, *, headers: Mapping[str, str] | None = None, address: str | None = None
    ) -> FetchResult:
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
            async with self._session.get(
                target, headers=request_headers, allow_redirects=False, server_hostname=server_hostname
            ) as response:
                self._check_header_block(response)
                body, truncated = await self._read_body(response)
        except FetchError:
            raise
        except Exception as exc:  # the translation boundary: nothing aiohttp-specific escapes
            raise _translate(exc, url) from exc
        assert isinstance(response, _PeerResponse)
        return FetchResult(
            url=url,
            status=response.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.raw_headers],
            body=body,
            truncated=truncated,
            ip=response.peer_ip,
            started_at_s=started_at_s,
            ended_at_s=self._clock(),
            request_headers=[(str(k), str(v)) for k, v in response.request_info.headers.items()],
            http_version=f"HTTP/{response.version.major}.{response.version.minor}" if response.version else "",
            payload_digest=payload_digest(body) if self.config.payload_digest else None,
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
        if is_ip_literal(literal):
            if check_address(literal, self.config.network) is not None:
                raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS, f"address {host}")
            return [literal]
        try:
            results = await asyncio.wait_for(
                self._resolver.resolve(host, port, socket.AF_UNSPEC), self.config.connect_timeout_s
            )
        except BlockedAddress:
            raise
        except (OSError, TimeoutError) as exc:  # socket.gaierror is an OSError
            raise FetchError(Reason.FETCH_DNS, f"{host}: {type(exc).__name__}: {exc}") from None
        return [r["host"] for r in results]

    def _check_header_block(self, response: aiohttp.ClientResponse) -> None:
        # aiohttp bounds single lines only; the block may hold up to 128 such lines
        size = sum(len(k) + len(v) + 4 for k, v in response.raw_headers)  # "k: v\r\n"
        if size > self.config.header_limit:
            response.close()
            raise FetchError(
                Reason.FETCH_PROTOCOL,
                f"response headers of {size} bytes exceed http.header.limit {self.config.header_limit}",
            )

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
        target = URL(url, encoded=True) if _plain(url) else URL(url)
    except (ValueError, TypeError) as exc:
        raise FetchError(Reason.URL_MALFORMED, f"{url!r}: {exc}") from None
    if target.scheme not in PROTOCOL_SCHEMES:
        raise FetchError(Reason.URL_SCHEME, url)
    host = target.raw_host
    if not host:
        raise FetchError(Reason.URL_HOST, url)
    if not is_ip_literal(host):
        return target  # a name: PolicyResolver judges what it resolves to
    if check_address(host, policy) is not None:
        raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS, f"{url}: address {host}")
    return target


def _plain(url: str) -> bool:
    """Whether yarl leaves ``url`` as it is: then it is parsed as already encoded, skipping yarl's quoting.

    Plain: http(s), a lower-case name or IPv4 address, an optional port of up
    to four digits (a longer one may be out of range, which yarl finds only
    when it is read), and a path and query of RFC 3986 ``pchar`` without
    ``%`` (nothing to quote or normalize) and without dot segments (``/.``
    anywhere, to be safe).
    """
    return _PLAIN_TARGET.match(url) is not None and "/." not in url


_PLAIN_TARGET = re.compile(
    r"https?://[a-z0-9.\-]+(?::[0-9]{1,4})?(?:/[A-Za-z0-9\-._~!$&'()*+,;=:@/]*)?(?:\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?]*)?\Z"
)


def _pinned_target(target: URL, address: str, policy: NetworkPolicy) -> tuple[URL, str | None]:
    """``target`` with its host replaced by ``address`` (judged), and the name for TLS (None over http).

    Raises:
        BlockedAddress: ``address`` is refused by the SSRF guard, or is not an IP address.
    """
    if check_address(address, policy) is not None:
        raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS, f"{target}: address {address}")
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
        return FetchError(Reason.FETCH_TIMEOUT, detail)
    if isinstance(exc, (aiohttp.ClientConnectorDNSError, socket.gaierror)):
        return FetchError(Reason.FETCH_DNS, detail)
    if isinstance(exc, aiohttp.ClientSSLError):
        return FetchError(Reason.FETCH_PROTOCOL, detail)
    if isinstance(exc, aiohttp.NonHttpUrlClientError):
        return FetchError(Reason.URL_SCHEME, detail)
    if isinstance(exc, aiohttp.InvalidURL):
        return FetchError(Reason.URL_MALFORMED, detail)
    if isinstance(exc, (aiohttp.ClientConnectionError, OSError)):
        return FetchError(Reason.FETCH_CONNECTION, detail)
    return FetchError(Reason.FETCH_PROTOCOL, detail)  # ClientResponseError, ClientPayloadError, ...
