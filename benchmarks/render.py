"""Benchmark: pages/s of fetch + parse with and without headless rendering, on a loopback SPA.

What one fetcher slot does per page, without the broker and without the
politeness delay (both are the same with and without rendering):

* ``raw``: :meth:`squall.net.http.HttpFetcher.fetch` of the page, then
  :func:`squall.policy.parse.parse_html` (links found: 0 — the SPA's links exist
  only after its script ran);
* ``render``: the same fetch, then :meth:`squall.net.render.BrowserPool.render`
  (every browser request judged by :func:`squall.policy.render_policy.judge_request`
  and fetched through the same HttpFetcher: ``/app.js`` — from the worker's
  cache after the first page — and ``/api/<page>.json``), then parse of the
  rendered DOM (links found: the page's links).

One browser (``render.pool.size`` 1), pages rendered one after the other.
The site (:func:`squall.tools.site_spec.spa_host`) has ``--pages`` pages of
``--links`` links each. Prints a table (mode, pages, seconds, pages/s,
ms/page, links found) and the machine. A benchmark, not a test: nothing is
asserted (STYLE.md). Run::

    .venv/bin/python benchmarks/render.py [--pages 40] [--links 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import time

from squall.net.browser import find_chromium
from squall.net.http import HttpConfig, HttpFetcher
from squall.net.render import BrowserPool
from squall.policy.netsafety import NetworkPolicy
from squall.policy.parse import parse_html
from squall.policy.render_policy import RenderConfig, RobotsAnswer, judge_request
from squall.settings import load_settings
from squall.tools.site_spec import SiteSpec, spa_host
from squall.tools.testsite import RecordingServer

HOST = "127.0.0.2"


def _site(pages: int, links: int) -> SiteSpec:
    paths = ["/"] + [f"/p{i}" for i in range(1, pages)]
    return SiteSpec(
        hosts={
            HOST: spa_host(
                {p: [f"/p{(i * links + k) % pages or 1}" for k in range(links)] for i, p in enumerate(paths)}
            )
        }
    )


async def _run(pages: int, links: int) -> list[tuple[str, int, float, int]]:
    settings = load_settings(overrides={"http.private.networks.allow": ["127.0.0.0/8"], "render.enabled": True})
    config = RenderConfig.from_settings(settings)
    network = NetworkPolicy.from_settings(settings)
    rows = []
    async with RecordingServer(_site(pages, links)) as server, HttpFetcher(HttpConfig.from_settings(settings)) as http:
        urls = [server.base_url(HOST) + ("/" if i == 0 else f"/p{i}") for i in range(pages)]
        started = time.perf_counter()
        found = 0
        for u in urls:
            raw = await http.fetch(u)
            found += len(parse_html(raw.body, url=u, headers=raw.headers).outlinks)
        rows.append(("raw", pages, time.perf_counter() - started, found))

        pool = BrowserPool(config, find_chromium(config.browser_path), user_agent=settings.user_agent)
        try:
            await pool.render(
                urls[0], await http.fetch(urls[0]), fetch=lambda x, h: http.fetch(x, headers=h), judge=lambda r, s: None
            )  # start the browser outside the measurement
            pool.cache = type(pool.cache)(config.cache_bytes, config.cache_ttl_s)  # and start with an empty cache
            started = time.perf_counter()
            found = 0
            for u in urls:
                raw = await http.fetch(u)
                judge = lambda req, sent, u=u: judge_request(  # noqa: E731
                    req,
                    page_url=u,
                    config=config,
                    mode="byHost",
                    network=network,
                    robots=lambda _x: RobotsAnswer.ALLOWED,
                    sent=sent,
                )
                outcome = await pool.render(u, raw, fetch=lambda x, h: http.fetch(x, headers=h), judge=judge)
                html = (outcome.html or "").encode()
                found += len(parse_html(html, url=u, headers=[("Content-Type", "text/html")]).outlinks)
            rows.append(("render", pages, time.perf_counter() - started, found))
        finally:
            await pool.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=40)
    parser.add_argument("--links", type=int, default=5)
    args = parser.parse_args()
    rows = asyncio.run(_run(args.pages, args.links))
    print(f"machine: {platform.machine()} {os.cpu_count()} CPUs, Python {platform.python_version()}, {find_chromium()}")
    print(f"{'mode':8} {'pages':>6} {'seconds':>8} {'pages/s':>8} {'ms/page':>8} {'links':>6}")
    for mode, n, seconds, found in rows:
        print(f"{mode:8} {n:>6} {seconds:>8.2f} {n / seconds:>8.1f} {1000 * seconds / n:>8.1f} {found:>6}")


if __name__ == "__main__":
    main()
