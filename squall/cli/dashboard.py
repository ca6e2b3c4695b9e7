"""``squall dashboard``: a web page of the crawl on 127.0.0.1, read from the changelogs like ``squall status``.

``GET /`` is one self-contained HTML page (``squall/cli/dashboard.html``: plain
HTML, inline SVG and a little inline JavaScript; nothing from the
internet) that polls ``GET /api/report`` and shows:

* the totals (the same numbers as ``squall status --json``), pages/s, ETA,
  what waits for a Retry-After / robots.txt retry / back-off;
* crawl progress over time: URLs discovered and fetched, cumulated, from
  the URL records' own times (:func:`progress`);
* a per-host table, sortable by any column (the fields of the live view);
* the politeness audit as a chart of each host's minimum start-to-start
  gap against the delay in force for it: the diagonal is "gap = delay", a
  point below it is a violation;
* rejection reasons (scope and trap guards) and final error reasons.

``GET /api/report`` returns ``{"topology": id, "report": <squall status --json>, "audit":
<squall audit --json>, "progress": [...]}``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from squall.policy.url_view import url_view

if TYPE_CHECKING:
    from squall.settings import Settings

PAGE = Path(__file__).with_name("dashboard.html")
PROGRESS_POINTS = 60  # points of the progress curve


def progress(
    urls: Mapping[str, Mapping[str, Any]], now_s: float, points: int = PROGRESS_POINTS
) -> list[dict[str, Any]]:
    """Cumulative URLs discovered and FETCHED over time, from the URL records (pure).

    Returns up to ``points`` + 1 dicts ``{"t": Unix s, "discovered": n, "fetched": n}`` from the
    first discovery to ``now_s``, evenly spaced; ``[]`` without URLs. ``discovered`` counts every
    URL known at ``t`` (whatever its status now), ``fetched`` the URLs FETCHED whose last fetch was
    at or before ``t``.
    """
    views = [url_view(r) for r in urls.values()]
    found = sorted(v.discovered_at_s for v in views)
    fetched = sorted(v.last_fetch_at_s for v in views if v.status == "FETCHED" and v.last_fetch_at_s)
    if not found:
        return []
    start = min(found[0], fetched[0]) if fetched else found[0]
    end = max(now_s, found[-1], fetched[-1] if fetched else 0.0)
    step = (end - start) / points if end > start else 0.0
    out, i, j = [], 0, 0
    for k in range(points + 1):
        t = start + step * k if k < points else end
        while i < len(found) and found[i] <= t:
            i += 1
        while j < len(fetched) and fetched[j] <= t:
            j += 1
        out.append({"t": t, "discovered": i, "fetched": j})
    return out


async def snapshot(settings: Settings) -> dict[str, Any]:
    """What ``/api/report`` answers, read now from the broker."""
    from squall.cli.audit import parse_records
    from squall.cli.status_counts import report_of
    from squall.cli.status_read import collect_records
    from squall.policy.audit import summary
    from squall.policy.topics import agent_topics

    records = await collect_records(settings)
    now = time.time()
    return {
        "topology": settings.topology_id,
        "report": report_of(records, now, agent_topics(settings)).to_json(),
        "audit": summary(parse_records(records["audit"])),
        "progress": progress(records["urls"], now),
    }


def make_app(settings: Settings):
    """The aiohttp application of the dashboard (one snapshot at a time, shared by concurrent requests)."""
    from aiohttp import web

    lock = asyncio.Lock()
    cache: dict[str, Any] = {"at": 0.0, "body": None}

    async def page(_request: web.Request) -> web.Response:
        return web.Response(text=PAGE.read_text(encoding="utf-8"), content_type="text/html")

    async def report(_request: web.Request) -> web.Response:
        async with lock:  # a slow broker read is not repeated for every open tab
            if cache["body"] is None or time.monotonic() - cache["at"] > 1.0:
                cache["body"] = await snapshot(settings)
                cache["at"] = time.monotonic()
        return web.json_response(cache["body"], headers={"Cache-Control": "no-store"})

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/api/report", report)
    return app


def _dashboard_command(args: argparse.Namespace) -> int:
    from aiohttp import web

    from squall.settings import load_settings

    settings = load_settings(args.conf)
    print(
        f"squall dashboard: http://127.0.0.1:{args.port}/ (topology {settings.topology_id!r}; Ctrl-C stops)", flush=True
    )
    web.run_app(make_app(settings), host="127.0.0.1", port=args.port, print=None)
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("dashboard", help="serve a dashboard of the crawl on 127.0.0.1")
    p.add_argument("--port", type=int, default=8090, help="port on 127.0.0.1 (default 8090)")
    p.set_defaults(func=_dashboard_command)
