"""The connection layer under :class:`squall.net.http.HttpFetcher`: address safety and response framing.

* :class:`PolicyResolver` resolves a host once (DNS, or an ``http.resolve``
  pin) and returns only addresses :func:`squall.policy.netsafety.check_address`
  allows (no request to a private network, no DNS rebinding): aiohttp
  connects to what was judged and never looks the name up again.
* :class:`DeclaredLengthFramer` (in front of aiohttp's parser, through
  :class:`_FramingConnector`) reads a response to its declared
  ``Content-Length`` and drops what a server sends past it, closing the
  connection, where aiohttp's parser would fail the whole response.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import socket
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.client_proto import ResponseHandler

from squall.errors import BlockedAddress
from squall.policy.netsafety import NetworkPolicy, check_address
from squall.policy.reasons import Reason

_NUMERIC_FLAGS = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_NO_BODY_STATUSES = frozenset({204, 304})  # RFC 9110 §6.4.1: no content whatever the headers say
_HEADER_END = re.compile(rb"\r?\n\r?\n")
log = logging.getLogger("squall.net.http")

AddrInfo = tuple[Any, Any, int, str, tuple[Any, ...]]
GetAddrInfo = Callable[[str, int, int], Awaitable[Sequence[AddrInfo]]]


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

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        pinned = self._policy.pinned(host, port)
        if pinned is not None:
            infos: Sequence[AddrInfo] = [(_family_of(pinned), socket.SOCK_STREAM, 0, "", (pinned, port))]
        elif self._getaddrinfo is not None:
            infos = await self._getaddrinfo(host, port, family)
        else:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, family=family, type=socket.SOCK_STREAM, flags=socket.AI_ADDRCONFIG
            )
        results: list[ResolveResult] = []
        for info_family, _, proto, _, sockaddr in infos:
            address = await self._numeric_host(info_family, sockaddr)
            if check_address(address, self._policy) is not None:
                raise BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS, f"{host} resolves to {address}")
            results.append(
                ResolveResult(
                    hostname=host, host=address, port=port, family=info_family, proto=proto, flags=_NUMERIC_FLAGS
                )
            )
        if not results:
            raise socket.gaierror(socket.EAI_NONAME, f"{host}: no usable address")
        return results

    async def _numeric_host(self, family: int, sockaddr: tuple[Any, ...]) -> str:
        if family == socket.AF_INET6 and len(sockaddr) >= 4 and sockaddr[3]:
            # a scoped (link-local) IPv6 address needs its %zone to be connectable
            host, _ = await asyncio.get_running_loop().getnameinfo(
                sockaddr[:4], socket.NI_NUMERICHOST | socket.NI_NUMERICSERV
            )
            return host
        return str(sockaddr[0])

    async def close(self) -> None:
        pass


def _family_of(address: str) -> int:
    return socket.AF_INET6 if ":" in address else socket.AF_INET


class _PeerResponse(aiohttp.ClientResponse):
    """ClientResponse that records the peer address of its connection (``peer_ip``)."""

    peer_ip: str = ""

    async def start(self, connection: Any) -> aiohttp.ClientResponse:
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
        self._state = "head"  # head | body | done | pass
        self._remaining = 0
        self._head_only = False

    def expect_response(self, *, head_only: bool = False) -> None:
        """A request was sent: the next bytes are its response (``head_only`` for a HEAD request)."""
        if self._state != "pass":
            self._state, self._head, self._remaining, self._head_only = "head", b"", 0, head_only

    def feed(self, data: bytes) -> tuple[bytes, int]:
        """``(bytes to parse, count of bytes dropped)`` for ``data`` as received."""
        if self._state == "body" and len(data) < self._remaining:
            self._remaining -= len(data)  # the common case, a piece of a body: passed on without a copy
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
                    self._state = "pass"  # aiohttp's parser refuses it; nothing to frame
                    kept += self._head
                    data = b""
                return bytes(kept), 0
            head, data = self._head[: match.end()], self._head[match.end() :]
            self._head = b""
            kept += head
            length = self._body_length(head)
            if length is None:
                self._state = "pass"
            elif length == -1:
                self._state = "head"  # an interim 1xx answer: the final one follows
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
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "transfer-encoding":
                return None  # chunked (or worse): framed by its encoding, not by length
            if name == "content-length":
                lengths.update(v.strip() for v in value.split(","))
        if len(lengths) != 1:
            return None  # absent (read to close) or contradictory: aiohttp decides
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
        if not data:  # aiohttp's own call to resume a paused read: not from the network
            super().data_received(data)
            return
        kept, dropped = self._framer.feed(data)
        if dropped:
            log.info("squall: dropped %d byte(s) sent after the declared Content-Length", dropped)
            self.force_close()  # the connection's state is unknown: never reuse it
        if kept:
            super().data_received(kept)


class _FramingConnector(aiohttp.TCPConnector):
    """TCPConnector whose connections use :class:`_FramingProtocol`.

    aiohttp has no public hook for the protocol class; ``_factory`` is the
    attribute its connector calls for each connection (checked by
    tests/unit/test_http_framing.py, which fails if a new aiohttp renames it).
    """

    def __init__(self, *args: Any, header_limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not hasattr(self, "_factory"):
            raise RuntimeError("aiohttp's TCPConnector has no _factory: squall.net.http needs updating")
        self._factory = functools.partial(  # type: ignore[assignment]  # a ResponseHandler subclass
            _FramingProtocol, loop=self._loop, header_limit=header_limit
        )
