"""Render step of the fetcher: pages that need JavaScript, through headless Chromium.

Called once per fetched page inside the fetch turn of its host, after the raw
fetch and its WARC records and before the turn ends, so the host's next fetch
waits its delay after the render's last request (docs/architecture.md invariant 2:
a render counts as a fetch of its host)::

    result = await render_step(msg, result, runtime)

Returns ``result`` unchanged unless the page is rendered
(:func:`squall.policy.render_policy.should_render`); then a copy whose ``render``
says what happened and whose body is the rendered DOM (UTF-8,
``Content-Type: text/html; charset=utf-8``) when the render succeeded — the
parser takes its links from it; after a failure the raw body stays and the
parser records the reason. The DOM is archived as a WARC ``conversion``
record referring to the response.

The browser's requests are judged by :func:`squall.policy.render_policy.judge_request`
with squall's robots cache (:class:`agents.robots.RobotsService`, never a new
robots.txt fetch) and fetched by the fetcher's :class:`squall.net.http.HttpFetcher`.
With ``render.enabled`` and no Chromium, importing this module stops the
worker with one line naming ``render.browser.path``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agents.common import config
from squall.errors import BrowserMissing
from squall.net.browser import find_chromium
from squall.net.http import FetchResult
from squall.net.render import BrowserPool
from squall.policy.parse import is_parseable, parse_html
from squall.policy.records import FetchMessage
from squall.policy.render_policy import (
    RobotsAnswer,
    SubRequest,
    judge_request,
    robots_answer,
    shell_signals,
    should_render,
)
from squall.policy.urls import host_of, origin_of
from topology import app, settings

log = logging.getLogger("squall.net.render")
RENDERED_TYPE = "text/html; charset=utf-8"


@dataclass
class Browser:
    """The worker's browser: the Chromium executable found at start and the pool opened on first render."""

    chromium: Path
    pool: BrowserPool | None = None


def browser() -> Browser:
    """The worker's :class:`Browser`, found on first use and held by the app (``app.squall_browser``).

    Raises:
        SystemExit: no Chromium at ``render.browser.path`` (or on PATH): one line naming the key.
    """
    held = app.squall_browser
    if held is None:
        try:
            chromium = find_chromium(config().render.browser_path)
        except BrowserMissing as exc:  # a misconfiguration: stop the worker at start, one line
            raise SystemExit(
                f"squall: configuration error: render.browser.path: render.enabled is true but {exc}"
            ) from None
        held = app.squall_browser = Browser(chromium)
    return held


if config().render.enabled:
    browser()  # looked up when the worker imports its agents: a missing browser stops it at start


def pool() -> BrowserPool:
    """The worker's browser pool (created on first use, in the worker's event loop)."""
    if not config().render.enabled:  # the render step never asks for a pool then
        raise RuntimeError("the browser pool needs render.enabled: true")
    held = browser()
    if held.pool is None:
        held.pool = BrowserPool(config().render, held.chromium, user_agent=settings.user_agent)
    return held.pool


async def close_pool() -> None:
    """Close the browser pool if one was started (worker shutdown); idempotent."""
    held = app.squall_browser
    if held is not None and held.pool is not None:
        pool_, held.pool = held.pool, None
        await pool_.close()


async def render_step(msg: FetchMessage, result: FetchResult, runtime: Any) -> FetchResult:
    """Render the page of ``result`` when it needs a browser (see the module docstring); never raises.

    ``runtime``: the fetcher's :class:`squall.worker.fetch_runtime.FetcherRuntime` (its
    ``http``, ``robots`` and ``warc``).
    """
    if (
        not config().render.enabled
        or not 200 <= result.status < 300
        or not is_parseable(result.content_type, config().mimetypes)
    ):
        return result
    try:
        parsed = parse_html(result.body, url=result.url, headers=result.headers, agent_token=config().agent_token)
        decision = should_render(config().render, host_of(msg.url), shell_signals(result.body, parsed))
        if not decision.render:
            return result
        return await _render(msg, result, runtime, decision.why)
    except Exception:  # a bug here must not cost the page: keep the raw answer
        log.exception("squall: render step of %s failed", msg.url)
        return result


async def _render(msg: FetchMessage, result: FetchResult, runtime: Any, why: str) -> FetchResult:
    def robots(url: str) -> RobotsAnswer:
        return robots_answer(runtime.robots.cached(origin_of(url)), url, time.time())

    cfg = config()

    def judge(request: SubRequest, sent: int):
        return judge_request(
            request, page_url=msg.url, config=cfg.render, mode=cfg.mode, network=cfg.network, robots=robots, sent=sent
        )

    outcome = await pool().render(
        msg.url, result, fetch=lambda url, headers: runtime.http.fetch(url, headers=headers), judge=judge
    )
    log.info(
        "squall: rendered %s (%s): %s, %d requests, %d cached, refused %s, %.2f s",
        msg.url,
        why,
        outcome.failure.value if outcome.failure else "ok",
        outcome.sent,
        outcome.cached,
        dict(outcome.refused),
        outcome.elapsed_s,
    )
    ended = time.time()  # the host's delay counts from here (the signal's at_s), not from the raw fetch
    if outcome.html is None:
        return replace(result, render=outcome, ended_at_s=ended)
    body = outcome.html.encode("utf-8")
    if settings.http_content_limit >= 0:
        body = body[: settings.http_content_limit]
    if runtime.warc is not None:
        await asyncio.to_thread(
            runtime.warc.write_conversion,
            msg.url,
            body=body,
            content_type=RENDERED_TYPE,
            fetched_at_s=result.started_at_s,
            converted_at_s=ended,
        )
    return _rendered(result, outcome, body, ended)


def _rendered(result: FetchResult, outcome: Any, body: bytes, ended_s: float) -> FetchResult:
    """The fetch result whose body is the rendered DOM (UTF-8 HTML), its render outcome, ended at ``ended_s``."""
    headers = [(k, v) for k, v in result.headers if k.lower() != "content-type"] + [("Content-Type", RENDERED_TYPE)]
    return replace(result, body=body, headers=headers, render=outcome, ended_at_s=ended_s)
