"""The address key of a host (``partition.url.mode: byIP``): which key, for how long, and when a URL moves.

Pure: no DNS, no clock (``now_s`` is passed in), no Faust. The resolving
itself is :func:`squall.net.http.resolve_addresses` (the fetcher's SSRF-safe
resolver, ``http.resolve`` pins included); :mod:`agents.addresses` caches
its answers here and the status updater and the fetcher ask this module
what to do with them.

In byIP mode the queue and partition key of a URL is the address its host
resolves to (StormCrawler's ``partition.url.mode: byIP``), so several names
served from one address share one queue and one pace:

* :func:`key_address` picks the key among the judged addresses of a host
  (the lowest, so every worker picks the same one from the same answer);
* a host that cannot be resolved (DNS failure) or whose address is refused
  by the SSRF guard keys its URLs by its own name (:func:`status_key`): the
  fetcher then ends them with ``fetch.dns`` (FETCH_ERROR, retried) or
  ``fetch.blocked_address`` (ERROR), as in the other modes;
* :class:`AddressCache` keeps one :class:`Resolution` per ``(host, port)``
  for ``partition.ip.cache.secs`` (bounded to ``partition.ip.cache.size``
  entries, least recently used dropped first); an expired entry is still
  used by the status updater while it is resolved again (the fetcher
  decides on a fresh one only);
* :func:`fetch_route` is the fetcher's decision before a URL's turn:
  connect to the key's address, move the URL to its host's new key, or end
  it with the resolution's failure.

Producers that cannot resolve (``squall seed``, the parse step's outlinks,
redirect targets, sitemaps) key a URL by its host name (:func:`provisional_key`);
the status updater resolves and routes it to its address's partition before
the URL gets a record (docs/architecture.md invariant 1: the record lives with
its queue's partition).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from squall.policy.reasons import Reason

if TYPE_CHECKING:
    from squall.settings import Settings


@dataclass(frozen=True)
class AddressConfig:
    """``ttl_s``: seconds a resolution is used (``partition.ip.cache.secs``);
    ``size``: most ``(host, port)`` entries kept per worker (``partition.ip.cache.size``)."""

    ttl_s: float
    size: int

    @classmethod
    def from_settings(cls, settings: Settings) -> AddressConfig:
        """Copy the ``partition.ip.cache.*`` keys (checked by :mod:`squall.settings.rules`)."""
        return cls(ttl_s=settings.partition_ip_cache_secs, size=settings.partition_ip_cache_size)


@dataclass(frozen=True)
class Resolution:
    """What resolving one host gave at ``resolved_at_s`` (Unix s).

    ``address``: the key address (textual IP, IPv6 without brackets), or
    None when the host could not be used; ``reason`` then says why
    (``Reason.FETCH_DNS`` or ``Reason.FETCH_BLOCKED_ADDRESS``).
    """

    address: str | None
    reason: Reason | None
    resolved_at_s: float

    @classmethod
    def resolved(cls, addresses: Iterable[str], at_s: float) -> Resolution:
        """The resolution of a host whose judged addresses are ``addresses`` (none = ``fetch.dns``)."""
        address = key_address(addresses)
        return cls(address, None if address is not None else Reason.FETCH_DNS, at_s)

    @classmethod
    def failed(cls, reason: Reason, at_s: float) -> Resolution:
        return cls(None, reason, at_s)

    def fresh(self, now_s: float, ttl_s: float) -> bool:
        """True while the resolution may be used without resolving again (younger than ``ttl_s``)."""
        return 0.0 <= now_s - self.resolved_at_s < ttl_s


def key_address(addresses: Iterable[str]) -> str | None:
    """The key among a host's addresses: the lowest (IPv4 before IPv6), or None for none.

    Deterministic, so two workers given the same answer in another order
    agree; ``%zone`` suffixes and brackets are dropped. Text that is not an
    address is ignored.
    """
    parsed = []
    for text in addresses:
        try:
            parsed.append(ipaddress.ip_address(text.strip().strip("[]").split("%", 1)[0]))
        except ValueError:
            continue
    if not parsed:
        return None
    return str(min(parsed, key=lambda a: (a.version, int(a))))


def provisional_key(host: str) -> str:
    """The key a producer that cannot resolve gives a URL of ``host``: the host itself (lower case, no dot)."""
    return host.lower().rstrip(".")


def status_key(host: str, resolution: Resolution) -> str:
    """The partition key of a URL of ``host`` given its resolution: its address, else its own name."""
    return resolution.address if resolution.address is not None else provisional_key(host)


class AddressCache:
    """Resolutions per ``(host, port)``, bounded, least recently used dropped first.

    Not thread-safe; one per worker event loop.
    """

    def __init__(self, config: AddressConfig) -> None:
        self.config = config
        self._entries: OrderedDict[tuple[str, int], Resolution] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, host: str, port: int) -> Resolution | None:
        """The resolution known for ``host:port`` however old, or None."""
        name = (provisional_key(host), port)
        found = self._entries.get(name)
        if found is not None:
            self._entries.move_to_end(name)
        return found

    def fresh(self, host: str, port: int, now_s: float) -> Resolution | None:
        """The resolution of ``host:port`` if it is still fresh at ``now_s``, else None."""
        found = self.get(host, port)
        return found if found is not None and found.fresh(now_s, self.config.ttl_s) else None

    def put(self, host: str, port: int, resolution: Resolution) -> None:
        """Keep ``resolution`` (an older one than the entry held is ignored)."""
        name = (provisional_key(host), port)
        held = self._entries.get(name)
        if held is not None and held.resolved_at_s > resolution.resolved_at_s:
            return
        self._entries[name] = resolution
        self._entries.move_to_end(name)
        while len(self._entries) > self.config.size:
            self._entries.popitem(last=False)


@dataclass(frozen=True)
class Connect:
    """Fetch now, connecting to ``address`` (the key's address) with the URL's own Host header and SNI."""

    address: str


@dataclass(frozen=True)
class Move:
    """Do not fetch: the host now resolves to ``key``; the URL is handed back to go to that queue."""

    key: str


@dataclass(frozen=True)
class Fail:
    """Do not fetch: the host cannot be used (``reason`` is ``fetch.dns`` or ``fetch.blocked_address``)."""

    reason: Reason


def fetch_route(key: str, host: str, resolution: Resolution) -> Connect | Move | Fail:
    """What the fetcher does with a URL of ``host`` handed out under ``key``, given a fresh ``resolution``.

    * the host resolves to ``key``: :class:`Connect` to it;
    * it resolves to another address: :class:`Move` to that key (the
      queue of its new address paces it);
    * it cannot be resolved or is refused: :class:`Fail` with the reason,
      under its current key (a DNS failure is retried there; when the host
      is resolvable again, the next attempt moves it).
    """
    if resolution.address is None:
        return Fail(resolution.reason or Reason.FETCH_DNS)
    if resolution.address == key:
        return Connect(resolution.address)
    return Move(resolution.address)
