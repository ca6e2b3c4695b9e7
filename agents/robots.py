"""robots.txt per origin for the fetcher: LRU → robots table → fetch (RFC 9309).

The decisions (status handling, TTL, back-off, last good copy) are
:mod:`squall.policy.robots_rules`'s; this module only does the I/O: it fetches
``/robots.txt`` following up to 5 redirects (RFC 9309 §2.3.1.2, other hosts
included), caps the body, and stores the entry in the durable robots table
(written inside the fetch event of the origin's partition).

Every redirect hop is a request too (docs/architecture.md invariant 2): the caller
passes ``pause``, awaited before each hop after the first, which waits the
delay in force of the asking queue. A URL that repeats in the chain ends it at
once, as does a chain longer than 5 hops: both are "unreachable" (complete
disallow, retried with the robots back-off) — RFC 9309 §2.3.1.2 lets a
crawler treat more than five redirects as unavailable; squall takes the
politer reading. The result is cached for the origin that asked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from agents.observe import observe_robots
from squall.errors import BlockedAddress, FetchError, InvalidURL, MessageError
from squall.net.http import HttpFetcher
from squall.policy.robots_rules import RobotsConfig, RobotsRules
from squall.policy.robots_status import RobotsCache, RobotsEntry, RobotsFetchOutcome, conditional_headers, decide
from squall.policy.urls import origin_of, robots_url
from topology import robots_table

log = logging.getLogger("squall.robots")
MAX_ROBOTS_REDIRECTS = 5  # RFC 9309 §2.3.1.2


class RobotsService:
    """Cached robots decisions of the origins this worker fetches (one per event loop)."""

    def __init__(
        self, config: RobotsConfig, lru_size: int, before_request: Callable[[str, int], None] | None = None
    ) -> None:
        """``before_request(origin, hop)`` runs right before each request (the politeness audit)."""
        self.config = config
        self.before_request = before_request
        self.cache = RobotsCache(lru_size, config)
        self._inflight: dict[str, asyncio.Future[tuple[RobotsEntry, RobotsRules]]] = {}

    def cached(self, origin: str) -> tuple[RobotsEntry, RobotsRules] | None:
        """The entry known for ``origin`` (LRU first, then the durable table), or None."""
        hit = self.cache.get(origin)
        if hit is not None:
            return hit
        raw = robots_table.get(origin.encode())
        if raw is None:
            return None
        try:
            entry = RobotsEntry.from_dict(raw)
        except MessageError:
            return None
        return entry, self.cache.put(origin, entry)

    async def refresh(
        self, origin: str, http: HttpFetcher, pause: Callable[[], Awaitable[None]], address: str | None = None
    ) -> tuple[RobotsEntry, RobotsRules]:
        """Fetch robots.txt of ``origin`` now (one fetch per origin at a time) and store the decision.

        ``pause`` is awaited before each redirect hop (the queue's delay).
        ``address`` (byIP): requests to ``origin`` itself connect there, with
        the origin's Host header (hops to other origins are resolved as usual).

        Raises:
            BlockedAddress: the origin's own address is refused (no request was made).
        """
        running = self._inflight.get(origin)
        if running is not None:
            return await asyncio.shield(running)
        future: asyncio.Future[tuple[RobotsEntry, RobotsRules]] = asyncio.get_running_loop().create_future()
        self._inflight[origin] = future
        try:
            previous = self.cached(origin)
            validators = conditional_headers(previous[0] if previous else None)  # a 304 keeps the cached copy
            outcome = await self._fetch(origin, http, validators, pause, address)
            result = self._store(origin, outcome, previous[0] if previous else None)
            future.set_result(result)
            return result
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved
            raise
        finally:
            del self._inflight[origin]

    def _store(
        self, origin: str, outcome: RobotsFetchOutcome, previous: RobotsEntry | None
    ) -> tuple[RobotsEntry, RobotsRules]:
        """Decide what the answer means (:func:`squall.policy.robots_status.decide`), store and cache it."""
        observe_robots(outcome.status)
        entry = decide(outcome, previous, time.time(), self.config)
        if entry.truncated and outcome.status is not None and 200 <= outcome.status < 300:
            log.warning(
                "squall: robots.txt of %s is %d bytes: only the first %d parsed (http.robots.content.limit)",
                origin,
                len(outcome.body),
                self.config.content_limit,
            )
        if entry.permissive_fallback:
            log.warning(
                "squall: robots.txt of %s unreachable (status %s): allowing all (http.robots.5xx.allow is true)",
                origin,
                outcome.status,
            )
        robots_table[origin.encode()] = entry.to_dict()
        return entry, self.cache.put(origin, entry)

    async def _fetch(
        self,
        origin: str,
        http: HttpFetcher,
        validators: dict[str, str],
        pause: Callable[[], Awaitable[None]],
        address: str | None,
    ) -> RobotsFetchOutcome:
        url = robots_url(origin + "/")
        chain = [url]
        for hop in range(MAX_ROBOTS_REDIRECTS + 1):
            if hop:
                await pause()  # each hop is a request: it waits the delay like any other
            answer = await self._request(origin, http, url, validators if hop == 0 else None, hop, address)
            if isinstance(answer, RobotsFetchOutcome):
                return answer
            if answer in chain:
                log.info("squall: robots.txt of %s redirects in a loop (%s): unreachable", origin, answer)
                return RobotsFetchOutcome(status=None, redirects=hop)
            chain.append(answer)
            url = answer
        log.info("squall: robots.txt of %s: more than %d redirects: unreachable", origin, MAX_ROBOTS_REDIRECTS)
        return RobotsFetchOutcome(status=None, redirects=MAX_ROBOTS_REDIRECTS)

    async def _request(
        self, origin: str, http: HttpFetcher, url: str, validators: dict[str, str] | None, hop: int, address: str | None
    ) -> RobotsFetchOutcome | str:
        """One request of the robots.txt chain of ``origin``: the final outcome, or the redirect's location.

        Raises:
            BlockedAddress: the origin's own address is refused (hop 0: no request was made).
        """
        try:
            if self.before_request is not None:  # the politeness audit: every hop is a request
                self.before_request(origin, hop)
            result = await http.fetch(url, headers=validators, address=address if _same_origin(url, origin) else None)
        except BlockedAddress:
            if hop == 0:
                raise  # the origin itself may not be contacted: the fetcher refuses its URLs (no request)
            log.info("squall: robots.txt of %s redirects to a refused address: %s", origin, url)
            return RobotsFetchOutcome(status=None, redirects=hop)
        except FetchError as exc:
            log.info("squall: robots.txt %s failed: %s", url, exc)
            return RobotsFetchOutcome(status=None, redirects=hop)
        location = result.location
        if 300 <= result.status < 400 and location:
            return location
        headers = {k: v for k, v in result.headers}
        return RobotsFetchOutcome(
            status=result.status, body=result.body, truncated=result.truncated, headers=headers, redirects=hop
        )


def _same_origin(url: str, origin: str) -> bool:
    try:
        return origin_of(url) == origin
    except InvalidURL:
        return False  # not requestable anyway: the fetch refuses it
