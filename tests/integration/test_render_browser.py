"""BrowserPool against a recording loopback site: real Chromium, real HttpFetcher, no broker.

Every request of the browser goes through squall: what the judge refuses
never reaches the server, the budget bounds what does, a page that never
settles ends at the timeout, and a crashed browser is replaced.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from squall.net.http import HttpConfig, HttpFetcher
from squall.policy.netsafety import NetworkPolicy
from squall.policy.parse import parse_html
from squall.net.render import BrowserPool
from squall.policy.render_policy import RenderConfig, RenderFailure, RobotsAnswer, judge_request
from squall.settings import load_settings
from squall.tools.site_spec import Page, RobotsSpec, SiteSpec, spa_host

HOST, OTHER = "127.0.0.2", "127.0.0.3"
SNEAKY = """
fetch("/private/secret.json").catch(function () {});
fetch("http://10.0.0.1/steal").catch(function () {});
fetch("http://rebind.example/steal").catch(function () {});
fetch("http://127.0.0.3:{port}/other.json").catch(function () {});
fetch("/api/extra.json", {method: "POST", body: "x"}).catch(function () {});
var img = new Image(); img.src = "/logo.png";
"""
BURST = "for (var i = 0; i < 40; i++) { fetch('/r/' + i).catch(function () {}); }"
HANG = "fetch('/slow').catch(function () {});"


def _site() -> SiteSpec:
    extra: dict[str, Any] = {f"/r/{i}": Page(body="{}", content_type="application/json") for i in range(40)}
    extra.update({"/private/secret.json": Page(body="[]", content_type="application/json"),
                  "/logo.png": Page(body=b"png", content_type="image/png"),
                  "/slow": Page(body="late", delay_s=30.0)})
    host = spa_host({"/": ["/a", "/b"], "/sneaky": ["/c"], "/burst": ["/d"], "/hang": ["/e"]},
                    scripts={"/sneaky": SNEAKY, "/burst": BURST, "/hang": HANG},
                    robots=RobotsSpec(text="User-agent: *\nDisallow: /private/\n"), extra=extra)
    other = spa_host({"/": []}, extra={"/other.json": Page(body="[]", content_type="application/json")})
    return SiteSpec(hosts={HOST: host, OTHER: other})


def _settings(**overrides: Any):
    values = {"http.private.networks.allow": ["127.0.0.0/8"], "render.enabled": True, "render.timeout": 4.0,
              "render.max.requests": 10, "render.requests.hosts.allow": ["10.0.0.1", "rebind.example"],
              # a name whose (one, pinned) answer is a private address: refused by squall's resolver, no packet
              "http.resolve": ["rebind.example:80:10.0.0.1"]}
    values.update(overrides)
    return load_settings(overrides=values)


class Harness:
    def __init__(self, settings, chromium: Path) -> None:
        self.settings = settings
        self.config = RenderConfig.from_settings(settings)
        self.network = NetworkPolicy.from_settings(settings)
        self.pool = BrowserPool(self.config, chromium, user_agent=settings.user_agent)
        self.http = HttpFetcher(HttpConfig.from_settings(settings))

    def robots(self, u: str) -> RobotsAnswer:  # the site's robots.txt, as squall's cache would answer
        return RobotsAnswer.DENIED if "/private/" in u else RobotsAnswer.ALLOWED

    async def render(self, page_url: str):
        raw = await self.http.fetch(page_url)
        judge = lambda req, sent: judge_request(req, page_url=page_url, config=self.config,  # noqa: E731
                                                mode="byHost", network=self.network, robots=self.robots, sent=sent)
        return await self.pool.render(page_url, raw, fetch=lambda u, h: self.http.fetch(u, headers=h), judge=judge)


@pytest.fixture
def harness(chromium: Path):
    async def make(**overrides: Any) -> Harness:  # each test closes it (_close)
        h = Harness(_settings(**overrides), chromium)
        await h.http.__aenter__()
        return h

    return make


async def _close(h: Harness) -> None:
    await h.pool.close()
    await h.http.close()


def _links(html: str, base: str) -> list[str]:
    return list(parse_html(html.encode(), url=base, headers=[("Content-Type", "text/html")]).outlinks)


async def test_the_links_of_a_shell_exist_only_in_the_rendered_dom(site, harness):
    served = site(_site())
    h = await harness()
    try:
        page = served.url(HOST, "/")
        raw = await h.http.fetch(page)
        assert _links(raw.body.decode(), page) == []
        outcome = await h.render(page)
        assert outcome.failure is None, outcome
        assert _links(outcome.html, page) == [served.url(HOST, "/a"), served.url(HOST, "/b")]
        assert outcome.sent == 2  # /app.js and /api/index.json; the document came from the raw fetch
        assert served.page_requests()[page] == 2  # our two raw fetches, never the browser
    finally:
        await _close(h)


async def test_disallowed_private_other_site_post_and_image_requests_never_reach_the_server(site, harness):
    served = site(_site())
    h = await harness()
    try:
        outcome = await h.render(served.url(HOST, "/sneaky"))
        assert outcome.failure is None, outcome
        # 10.0.0.1 refused by the judge (IP literal), rebind.example by HttpFetcher's resolver after its one answer
        assert dict(outcome.refused) == {"robots.denied": 1, "blocked_address": 2, "other_site": 1, "method": 1,
                                         "resource_type": 1}
        paths = [r["path"] for r in served.requests()]
        assert not [p for p in paths if p.startswith("/private/") or p == "/logo.png" or p == "/api/extra.json"]
        assert served.server.requests_for(OTHER) == []
    finally:
        await _close(h)


async def test_a_burst_of_requests_is_cut_at_the_page_budget(site, harness):
    served = site(_site())
    h = await harness(**{"render.max.requests": 5})
    try:
        outcome = await h.render(served.url(HOST, "/burst"))
        assert outcome.failure is RenderFailure.BUDGET
        assert outcome.sent == 5
        sent = [r for r in served.requests() if r["path"] != "/burst"]
        assert len(sent) <= 5, sent
    finally:
        await _close(h)


async def test_a_page_that_never_settles_ends_at_the_timeout_and_its_request_is_cancelled(site, harness):
    served = site(_site())
    h = await harness(**{"render.timeout": 3.0})
    try:
        started = time.monotonic()
        outcome = await h.render(served.url(HOST, "/hang"))
        assert outcome.failure is RenderFailure.TIMEOUT
        assert time.monotonic() - started < 3.0 + 6.0  # the timeout plus closing the context, never /slow's 30 s
        assert any(r["path"] == "/slow" for r in served.requests())
        assert [r for r in served.requests() if r["path"] == "/slow"][0]["status"] is None  # abandoned, not answered
    finally:
        await _close(h)


async def test_a_crashed_browser_fails_its_render_and_the_next_render_starts_a_new_one(site, harness):
    served = site(_site())
    h = await harness()
    try:
        assert (await h.render(served.url(HOST, "/"))).failure is None
        await h.pool.crash_for_test()
        await asyncio.sleep(0.5)
        outcome = await h.render(served.url(HOST, "/"))
        assert outcome.failure in (None, RenderFailure.CRASH)
        if outcome.failure is RenderFailure.CRASH:
            outcome = await h.render(served.url(HOST, "/"))
        assert outcome.failure is None
        assert h.pool.launches == 2
    finally:
        await _close(h)
