"""Rendering a page in headless Chromium, every browser request served by squall (the network boundary).

:class:`BrowserPool` keeps ``render.pool.size`` Chromium processes (Playwright
for Python, the system browser of :func:`squall.net.browser.find_chromium`; no
download) and renders one page per browser at a time in a fresh context
(no cookies, no cache, service workers blocked).

Chromium opens no connection of its own for a render: every request is
intercepted (``BrowserContext.route``) and either

* the page's own document: fulfilled from the raw fetch (the page is not
  requested twice);
* refused: ``route.abort`` after the judge (:func:`squall.policy.render_policy.judge_request`
  through the caller's ``judge``) said no — counted per reason;
* or fetched by squall itself (the caller's ``fetch``, i.e.
  :meth:`squall.net.http.HttpFetcher.fetch`: the address is resolved once,
  judged and pinned, redirects come back to the browser and are judged
  again) and handed to Chromium with ``route.fulfill``.

Scripts and stylesheets are kept in a per-worker cache
(:class:`squall.policy.render_policy.SubresourceCache`, ``render.cache.size``) so an
application's bundle is requested once, not once per page. Requests are fetched one at a time (like ``fetcher.threads.per.queue: 1``)
and a render ends when no request was in flight or started for
``render.idle.secs`` after the load event, or at ``render.timeout``, or on
the request past ``render.max.requests``. When it ends, requests still in
flight are cancelled before :meth:`BrowserPool.render` returns, so the host's
delay starts after the last byte squall asked of it. WebSockets are never
connected. :data:`squall.net.browser.CHROMIUM_ARGS` point anything else
Chromium might try at a closed loopback port.

Outcomes (:class:`squall.policy.render_policy.RenderFailure`): ``render.timeout``,
``render.crash`` (the browser process is dropped and the next render starts
a new one), ``render.budget``, ``render.unavailable`` (Chromium cannot be
started), ``render.error``. :meth:`BrowserPool.render` never raises for a
page's fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, BrowserContext, Playwright, Request, Route, async_playwright
from playwright.async_api import Error as PlaywrightError

from squall.errors import BlockedAddress, FetchError
from squall.net.browser import CHROMIUM_ARGS
from squall.net.http import FetchResult
from squall.policy.render_policy import (
    Refusal,
    RenderConfig,
    RenderFailure,
    RenderOutcome,
    RenderTally,
    SubRequest,
    SubresourceCache,
    cacheable,
)

__all__ = ["BrowserPool", "Fetch", "Judge"]

log = logging.getLogger("squall.net.render")

Fetch = Callable[[str, Mapping[str, str]], Awaitable[FetchResult]]
"""``fetch(url, headers)``: one GET through squall's rules (:meth:`squall.net.http.HttpFetcher.fetch`)."""
Judge = Callable[[SubRequest, int], "Refusal | None"]
"""``judge(request, sent)``: None to send it, else the refusal (:func:`squall.policy.render_policy.judge_request`)."""

# Response headers that describe the wire, not the decoded body squall hands to Chromium.
_WIRE_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding", "connection", "keep-alive"})
# Request headers of the browser passed on to the server (no cookies: a context never has any).
_FORWARDED = ("accept", "accept-language", "referer")
_POLL_S = 0.02  # how often the settle loop looks at the request counters
_CLOSE_TIMEOUT_S = 5.0  # a context that does not close in this long means a wedged browser


class _Slot:
    """One Chromium process of the pool (started on first use, dropped after a crash)."""

    def __init__(self) -> None:
        self.browser: Browser | None = None

    @property
    def alive(self) -> bool:
        return self.browser is not None and self.browser.is_connected()


class BrowserPool:
    """``config.pool_size`` headless Chromium processes rendering one page each at a time.

    ``executable``: the Chromium binary. ``user_agent``: the User-Agent the
    page's scripts see (``navigator.userAgent``); squall's fetcher sends its
    own on the wire anyway. Use ``await pool.close()`` at the end.
    """

    def __init__(self, config: RenderConfig, executable: Path, *, user_agent: str) -> None:
        self.config = config
        self.executable = Path(executable)
        self.user_agent = user_agent
        self._playwright: Playwright | None = None
        self._start_lock = asyncio.Lock()
        self._free: asyncio.Queue[_Slot] = asyncio.Queue()
        for _ in range(config.pool_size):
            self._free.put_nowait(_Slot())
        self.launches = 0  # browser processes started so far (a restart after a crash adds one)
        self.cache = SubresourceCache(config.cache_bytes, config.cache_ttl_s)

    async def render(self, url: str, raw: FetchResult, *, fetch: Fetch, judge: Judge) -> RenderOutcome:
        """Render ``url`` whose raw answer is ``raw``; never raises for the page's fault.

        The wait for a free browser is not part of ``render.timeout``.
        """
        slot = await self._free.get()
        started = time.monotonic()
        tally = RenderTally()
        try:
            try:
                browser = await self._browser(slot)
            except Exception as exc:
                log.warning("squall: cannot start chromium %s: %s", self.executable, exc)
                return self._outcome(None, RenderFailure.UNAVAILABLE, tally, started)
            try:
                html, failure = await _Render(
                    self.config, browser, self.user_agent, url, raw, fetch, judge, tally, self.cache
                ).run()
            except Exception:
                log.exception("squall: render of %s failed unexpectedly", url)
                await self._drop(slot)
                return self._outcome(None, RenderFailure.ERROR, tally, started)
            if failure is RenderFailure.CRASH or not slot.alive:
                await self._drop(slot)
                failure = failure or RenderFailure.CRASH
                html = None if failure else html
            return self._outcome(html, failure, tally, started)
        finally:
            self._free.put_nowait(slot)

    @staticmethod
    def _outcome(html: str | None, failure: RenderFailure | None, tally: RenderTally, started: float) -> RenderOutcome:
        return RenderOutcome(
            html=html,
            failure=failure,
            sent=tally.sent,
            refused=dict(tally.refused),
            elapsed_s=time.monotonic() - started,
            cached=tally.cached,
        )

    async def _browser(self, slot: _Slot) -> Browser:
        if slot.alive:
            assert slot.browser is not None
            return slot.browser
        await self._drop(slot)
        async with self._start_lock:
            if self._playwright is None:
                self._playwright = await async_playwright().start()
            try:
                slot.browser = await self._playwright.chromium.launch(
                    executable_path=str(self.executable),
                    args=list(CHROMIUM_ARGS),
                    headless=True,
                    handle_sigint=False,
                    handle_sigterm=False,
                    handle_sighup=False,
                    timeout=30_000,
                )
            except Exception:
                # perhaps the Playwright driver itself died: the next attempt starts a new one
                driver, self._playwright = self._playwright, None
                with contextlib.suppress(Exception):
                    await driver.stop()
                raise
            self.launches += 1
            log.info("squall: chromium %s started (%s)", slot.browser.version, self.executable)
        return slot.browser

    async def _drop(self, slot: _Slot) -> None:
        browser, slot.browser = slot.browser, None
        if browser is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(browser.close(), _CLOSE_TIMEOUT_S)

    async def crash_for_test(self) -> None:
        """Crash every running browser process (CDP ``Browser.crash``): tests of the restart."""
        slots = [self._free.get_nowait() for _ in range(self._free.qsize())]
        try:
            for slot in slots:
                if slot.alive:
                    assert slot.browser is not None
                    with contextlib.suppress(PlaywrightError):
                        session = await slot.browser.new_browser_cdp_session()
                        await session.send("Browser.crash")
        finally:
            for slot in slots:
                self._free.put_nowait(slot)

    async def close(self) -> None:
        """Stop every browser and the Playwright driver (idempotent)."""
        slots = [self._free.get_nowait() for _ in range(self._free.qsize())]
        for slot in slots:
            await self._drop(slot)
            self._free.put_nowait(slot)
        if self._playwright is not None:
            with contextlib.suppress(Exception):
                await self._playwright.stop()
            self._playwright = None


class _Render:
    """One page in one fresh browser context; :meth:`run` returns (html, failure)."""

    def __init__(
        self,
        config: RenderConfig,
        browser: Browser,
        user_agent: str,
        url: str,
        raw: FetchResult,
        fetch: Fetch,
        judge: Judge,
        tally: RenderTally,
        cache: SubresourceCache,
    ) -> None:
        self.config, self.browser, self.user_agent, self.cache = config, browser, user_agent, cache
        self.url, self.raw, self.fetch, self.judge, self.tally = url, raw, fetch, judge, tally
        self.document_served = False
        self.in_flight = 0
        self.last_activity = time.monotonic()
        self.failure: RenderFailure | None = None
        self.closed = False
        self.one_at_a_time = asyncio.Lock()
        self.fetches: set[asyncio.Task[FetchResult]] = set()

    async def run(self) -> tuple[str | None, RenderFailure | None]:
        context: BrowserContext | None = None
        html: str | None = None
        try:
            async with asyncio.timeout(self.config.timeout_s):
                context = await self.browser.new_context(
                    user_agent=self.user_agent,
                    service_workers="block",
                    accept_downloads=False,
                    java_script_enabled=True,
                )
                await context.route("**/*", self._route)
                await context.route_web_socket("**/*", self._websocket)
                page = await context.new_page()
                page.on("crash", lambda _page: self._fail(RenderFailure.CRASH))
                await page.goto(self.url, wait_until="load", timeout=0)
                await self._settle()
                if self.failure is None:
                    html = await page.content()
        except TimeoutError:
            self._fail(RenderFailure.TIMEOUT)
        except PlaywrightError as exc:
            if self.failure is None:
                crashed = not self.browser.is_connected() or "crash" in str(exc).lower()
                self._fail(RenderFailure.CRASH if crashed else RenderFailure.ERROR)
                log.info("squall: render of %s failed: %s", self.url, str(exc).splitlines()[0] if str(exc) else exc)
        finally:
            await self._end(context)
        return (html if self.failure is None else None), self.failure

    def _fail(self, failure: RenderFailure) -> None:
        if self.failure is None:
            self.failure = failure

    async def _settle(self) -> None:
        """Wait until nothing was in flight or started for ``render.idle.secs`` (or a failure)."""
        while self.failure is None:
            quiet_s = time.monotonic() - self.last_activity
            if self.in_flight == 0 and quiet_s >= self.config.idle_s:
                return
            await asyncio.sleep(_POLL_S)

    async def _end(self, context: BrowserContext | None) -> None:
        """Cancel squall's fetches still running, then close the context (bounded)."""
        self.closed = True
        for task in list(self.fetches):
            task.cancel()
        if self.fetches:
            await asyncio.gather(*self.fetches, return_exceptions=True)
        if context is not None:
            try:
                await asyncio.wait_for(context.close(), _CLOSE_TIMEOUT_S)
            except Exception:
                self._fail(RenderFailure.CRASH)
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.browser.close(), _CLOSE_TIMEOUT_S)

    async def _route(self, route: Route, request: Request) -> None:
        """Every request of the browser: serve the document, refuse, or fetch through squall."""
        self.last_activity = time.monotonic()
        try:
            if self.closed:
                await route.abort("blockedbyclient")
                return
            main_frame_navigation = request.is_navigation_request() and request.frame.parent_frame is None
            if main_frame_navigation and not self.document_served:  # page.goto(url): the raw answer
                self.document_served = True
                await route.fulfill(status=self.raw.status, headers=_headers(self.raw.headers), body=self.raw.body)
                return
            sub = SubRequest(
                url=request.url,
                method=request.method,
                resource_type=request.resource_type,
                main_frame_navigation=main_frame_navigation,
            )
            refusal = self.judge(sub, self.tally.sent)
            if refusal is not None:
                self.tally.refuse(refusal)
                if refusal is Refusal.BUDGET:
                    self._fail(RenderFailure.BUDGET)
                await route.abort("blockedbyclient")
                return
            await self._fetch_and_fulfill(route, request)
        except PlaywrightError:
            pass  # the context closed under the handler (end of render, crash): nothing to answer
        except Exception:  # a bug must not leave the browser waiting for an answer until the timeout
            log.exception("squall: render of %s: handling %s failed", self.url, request.url)
            self._fail(RenderFailure.ERROR)
            with contextlib.suppress(PlaywrightError):
                await route.abort("failed")
        finally:
            self.last_activity = time.monotonic()

    async def _fetch_and_fulfill(self, route: Route, request: Request) -> None:
        hit = self.cache.get(request.url, time.time())
        if hit is not None:  # a script or stylesheet an earlier render fetched: no request to the host
            self.tally.cached += 1
            await route.fulfill(status=hit.status, headers=_headers(hit.headers), body=hit.body)
            return
        self.in_flight += 1
        try:
            async with self.one_at_a_time:  # one request of the render at a time, like one thread per queue
                if self.closed or self.failure is not None:
                    await route.abort("blockedbyclient")
                    return
                if self.tally.sent >= self.config.max_requests:  # judged while another one was waiting
                    self.tally.refuse(Refusal.BUDGET)
                    self._fail(RenderFailure.BUDGET)
                    await route.abort("blockedbyclient")
                    return
                self.tally.sent += 1
                headers = {k: v for k, v in (await request.all_headers()).items() if k.lower() in _FORWARDED}
                task = asyncio.ensure_future(self.fetch(request.url, headers))
                self.fetches.add(task)
                try:
                    result = await task
                except BlockedAddress:
                    self.tally.refuse(Refusal.BLOCKED_ADDRESS)
                    await route.abort("addressunreachable")
                    return
                except (FetchError, asyncio.CancelledError):
                    self.tally.refuse(Refusal.FAILED)
                    if not self.closed:
                        await route.abort("failed")
                    return
                finally:
                    self.fetches.discard(task)
            if cacheable(request.resource_type, result.status, result.headers) and not result.truncated:
                self.cache.put(request.url, result, len(result.body), time.time())
            await route.fulfill(status=result.status, headers=_headers(result.headers), body=result.body)
        finally:
            self.in_flight -= 1

    async def _websocket(self, ws: Any) -> None:  # playwright WebSocketRoute: never connected to a server
        self.tally.refuse(Refusal.WEBSOCKET)
        with contextlib.suppress(PlaywrightError):
            await ws.close(code=1008, reason="refused by the crawler")


def _headers(headers: list[tuple[str, str]]) -> dict[str, str]:
    """Response headers for Chromium: wire headers dropped (the body is decoded), repeats joined."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if key in _WIRE_HEADERS:
            continue
        out[key] = (
            f"{out[key]}\n{value}"
            if key in out and key == "set-cookie"
            else (f"{out[key]}, {value}" if key in out else value)
        )
    return out
