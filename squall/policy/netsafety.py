"""Which network addresses the fetcher may connect to (the SSRF guard), and name pinning.

Pure: no I/O, no DNS. :mod:`squall.net.http` resolves a host once, judges every
address with :func:`check_address`, and connects only to an address judged
here: the fetch layer has to validate resolved destinations
against network policy and to guard against DNS rebinding.

Refused unless inside an allowed CIDR (``http.private.networks.allow``):
loopback, private (RFC 1918), link-local (169.254.169.254 cloud metadata
included), multicast, reserved, unspecified, documentation, shared address
space 100.64.0.0/10 (RFC 6598), IPv6 unique-local fc00::/7 and site-local
fec0::/10 — every address Python's :mod:`ipaddress` does not call global.
IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``) and NAT64
(``64:ff9b::a.b.c.d``, RFC 6052) IPv6 addresses are judged as their IPv4
address; 6to4 (2002::/16) and Teredo (2001::/32, never public
in :mod:`ipaddress`) addresses are refused when an IPv4 address they embed
would be.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from squall.errors import ConfigError
from squall.policy.reasons import Reason

if TYPE_CHECKING:
    from squall.settings import Settings

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ALLOW_KEY = "http.private.networks.allow"
RESOLVE_KEY = "http.resolve"

# RFC 6598 shared address space (carrier-grade NAT): neither private nor global in ipaddress.
_SHARED = ipaddress.IPv4Network("100.64.0.0/10")
# RFC 6052 well-known NAT64 prefix: the last 32 bits are an IPv4 address.
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


@dataclass(frozen=True)
class NetworkPolicy:
    """Networks the fetcher may reach although not public, and pinned names.

    ``allow``: CIDRs exempt from the public-address rule (``http.private.networks.allow``;
    empty = only public addresses). ``pins``: ``(host, port)`` → IP address
    used instead of DNS, like ``curl --resolve`` (``http.resolve``); host is
    lower-case without a trailing dot; a pinned address is still judged by
    :func:`check_address`.
    """

    allow: tuple[IPNetwork, ...] = ()
    pins: Mapping[tuple[str, int], str] = field(default_factory=lambda: MappingProxyType({}))

    @classmethod
    def from_settings(cls, settings: Settings) -> NetworkPolicy:
        """Build the policy from ``http.private.networks.allow`` and ``http.resolve``.

        Raises:
            ConfigError: an entry that is not a CIDR / not ``host:port:address``
                (IPv6 address optionally in brackets), a port outside 1–65535,
                or the same ``host:port`` pinned twice; the key is named
                (:func:`squall.settings.rules.validate` calls this at start).
        """
        allow = tuple(_parse_network(entry) for entry in settings.http_private_networks_allow)
        pins: dict[tuple[str, int], str] = {}
        for entry in settings.http_resolve:
            host, port, address = _parse_pin(entry)
            if (host, port) in pins:
                raise ConfigError(RESOLVE_KEY, f"{host}:{port} is pinned twice")
            pins[(host, port)] = address
        return cls(allow=allow, pins=MappingProxyType(pins))

    def pinned(self, host: str, port: int) -> str | None:
        """The pinned address of ``host:port``, or None to use DNS."""
        return self.pins.get((normalize_host(host), port))


def normalize_host(host: str) -> str:
    """Host name as pins are keyed: lower-case, no trailing dot."""
    return host.lower().rstrip(".")


def check_address(ip: str, policy: NetworkPolicy) -> Reason | None:
    """Judge one IP address: None if it may be fetched, else ``Reason.FETCH_BLOCKED_ADDRESS``.

    ``ip`` is a textual IPv4 or IPv6 address (brackets and an IPv6 ``%zone``
    are tolerated). Text that is not an IP address is refused. An address is
    refused when any of its views — itself, or the IPv4 address it maps or
    embeds (see the module docstring) — is not public and not inside one of
    ``policy.allow``. Memoized (bounded): a fetcher judges the same few
    addresses on every request.
    """
    return _judged(ip, policy.allow)


@lru_cache(maxsize=4096)
def _judged(ip: str, allow: tuple[IPNetwork, ...]) -> Reason | None:
    """:func:`check_address` of ``ip`` with ``allow`` its policy's networks."""
    try:
        address = ipaddress.ip_address(ip.strip().strip("[]").split("%", 1)[0])
    except ValueError:
        return Reason.FETCH_BLOCKED_ADDRESS
    for view in _views(address):
        if not _is_public(view) and not any(view in net for net in allow):
            return Reason.FETCH_BLOCKED_ADDRESS
    return None


def _views(address: IPAddress) -> list[IPAddress]:
    """The addresses that judge ``address``: mapped/compatible IPv6 is only its IPv4."""
    if isinstance(address, ipaddress.IPv4Address):
        return [address]
    if address.ipv4_mapped is not None:
        return [address.ipv4_mapped]
    as_int = int(address)
    if 1 < as_int < 2**32:
        # IPv4-compatible ::a.b.c.d (RFC 4291 §2.5.5.1, deprecated); :: and ::1 stay IPv6.
        return [ipaddress.IPv4Address(as_int)]
    if address in _NAT64:
        # ipaddress files 64:ff9b::/96 under reserved ::/8; the IPv4 address decides.
        return [ipaddress.IPv4Address(as_int & 0xFFFFFFFF)]
    views: list[IPAddress] = [address]
    if address.sixtofour is not None:
        views.append(address.sixtofour)
    if address.teredo is not None:
        views.extend(address.teredo)  # (server, client)
    return views


def _is_public(address: IPAddress) -> bool:
    """True for a globally routable unicast address.

    ``is_global`` alone misses multicast (224.0.0.0/4 is "global") and has
    moved between Python patch releases, so the named ranges are checked too.
    """
    if (
        not address.is_global
        or address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
    ):
        return False
    if isinstance(address, ipaddress.IPv4Address):
        return address not in _SHARED
    return not address.is_site_local


def _parse_network(entry: str) -> IPNetwork:
    try:
        return ipaddress.ip_network(entry.strip())
    except ValueError as exc:
        raise ConfigError(ALLOW_KEY, f"{entry!r} is not a CIDR network ({exc})") from None


def _parse_pin(entry: str) -> tuple[str, int, str]:
    """Split ``host:port:address`` (curl --resolve syntax; ``[v6]`` allowed)."""
    parts = entry.strip().split(":", 2)
    if len(parts) != 3 or not parts[0] or not parts[2]:
        raise ConfigError(RESOLVE_KEY, f"{entry!r} is not host:port:address")
    host, port_text, address_text = parts
    try:
        port = int(port_text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise ConfigError(RESOLVE_KEY, f"{entry!r}: port must be 1-65535")
    if address_text.startswith("[") != address_text.endswith("]"):
        raise ConfigError(RESOLVE_KEY, f"{entry!r}: unbalanced brackets around the address")
    try:
        address = ipaddress.ip_address(address_text.strip("[]"))
    except ValueError:
        raise ConfigError(RESOLVE_KEY, f"{entry!r}: {address_text!r} is not one IP address") from None
    return normalize_host(host), port, str(address)
