"""The byIP mode's resolver for the agents (a helper): one cache per worker, one lookup per host at a time.

The decisions (key choice, TTL, move or fail) are :mod:`squall.policy.address_key`'s;
this module only does the DNS I/O, through the fetcher's SSRF-safe resolver
(:meth:`squall.net.http.HttpFetcher.resolve`: ``http.resolve`` pins, address
judging). The status updater and the fetcher of a worker share it: the
worker that owns a queue's partition in both topics resolves once for both.

Lookups run in their own tasks, never under the fetch queues' turn nor in
the status updater's loop (DNS is never done while the queue is held: a
slow answer must not delay the host's other URLs); concurrent askers of one
``host:port`` share one lookup. The worker's one service is :func:`agents.common.addresses`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol
from urllib.parse import urlsplit

from squall.errors import BlockedAddress, FetchError
from squall.policy.address_key import AddressCache, AddressConfig, Resolution
from squall.policy.reasons import Reason
from squall.policy.urls import host_of

log = logging.getLogger("squall.addresses")


def host_port(url: str) -> tuple[str, int]:
    """``(host, port)`` of a canonical URL, the scheme's default port when none is given.

    Raises:
        InvalidURL: the URL has no host.
    """
    parts = urlsplit(url)
    return host_of(url).rstrip("."), parts.port or (443 if parts.scheme == "https" else 80)


class Resolver(Protocol):
    """What looks a host up: :meth:`squall.net.http.HttpFetcher.resolve` (judged addresses; raises FetchError)."""

    async def resolve(self, host: str, port: int) -> list[str]: ...


class AddressService:
    """Cached resolutions of the hosts this worker keys (one per event loop).

    ``resolver``: the fetcher's SSRF-safe resolver (an :class:`squall.net.http.HttpFetcher`;
    only its resolver is used, no session is opened).
    """

    def __init__(self, config: AddressConfig, resolver: Resolver) -> None:
        self.cache = AddressCache(config)
        self.resolver = resolver
        self._running: dict[tuple[str, int], asyncio.Future[Resolution]] = {}

    def known(self, host: str, port: int) -> Resolution | None:
        """The resolution held for ``host:port`` however old (an expired one is refreshed in the background)."""
        found = self.cache.get(host, port)
        if found is not None and not found.fresh(time.time(), self.cache.config.ttl_s):
            self._start(host, port)
        return found

    async def fresh(self, host: str, port: int) -> Resolution:
        """A usable resolution of ``host:port``: a fresh success from the cache, else a lookup now.

        A cached failure is looked up again: a retried URL of an unresolvable
        host is a new attempt. Never raises.
        """
        found = self.cache.fresh(host, port, time.time())
        if found is not None and found.address is not None:
            return found
        return await self.resolve(host, port)

    async def resolve(self, host: str, port: int) -> Resolution:
        """Look ``host:port`` up (sharing a lookup already running), cache and return it; never raises."""
        return await asyncio.shield(self._start(host, port))

    def _start(self, host: str, port: int) -> asyncio.Future[Resolution]:
        name = (host, port)
        running = self._running.get(name)
        if running is None:
            running = asyncio.ensure_future(self._lookup(host, port))
            self._running[name] = running
            running.add_done_callback(lambda _: self._running.pop(name, None))
        return running

    async def _lookup(self, host: str, port: int) -> Resolution:
        try:
            resolution = Resolution.resolved(await self.resolver.resolve(host, port), time.time())
        except BlockedAddress:
            resolution = Resolution.failed(Reason.FETCH_BLOCKED_ADDRESS, time.time())
        except FetchError as exc:
            log.info("squall: %s:%d does not resolve: %s", host, port, exc)
            resolution = Resolution.failed(Reason.FETCH_DNS, time.time())
        except Exception:  # never let a lookup bug hold a URL: treated as unresolvable, retried
            log.exception("squall: resolving %s:%d failed unexpectedly", host, port)
            resolution = Resolution.failed(Reason.FETCH_DNS, time.time())
        held = self.cache.get(host, port)
        if held is not None and held.address is not None and resolution.address not in (None, held.address):
            log.info("squall: %s:%d moved from %s to %s", host, port, held.address, resolution.address)
        self.cache.put(host, port, resolution)
        return resolution
