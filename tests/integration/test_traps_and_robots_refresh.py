"""URL-shape traps and the conditional robots.txt refresh, through a real broker, measured at the server.

One crawl, one worker, two simulated hosts:

* ``TRAPS``: relative links that keep resolving against their own page
  (``a/b/c/d/`` on ``/a/b/c/d/``, ``shop.example/x/`` on ``/x/...``), a
  query repeating one name, a segment repeated four times. The admitted
  URLs are fetched; the first URL past each guard is refused with its
  reason (counted in ``squall status``) and never reaches the server.
* ``REFRESH``: a robots.txt with an ETag and a 2 s cache lifetime, and a
  chain of pages that keeps the crawl on the host for several lifetimes:
  the refreshes carry If-None-Match, are answered 304, and the cached rules
  stay in force (its disallowed page is never requested).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.tools.harness import Crawl
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec

from .conftest import BASE_OVERRIDES, ServedSite

SQUALL = str(Path(sys.executable).parent / "squall")
TRAPS = "127.0.0.30"
REFRESH = "127.0.0.31"
ETAG = '"robots-v1"'
CHAIN = 14   # pages /p0 ... /p13 on REFRESH, one link to the next: 14 fetches at 0.4 s at least 5 s
OVERRIDES: dict[str, Any] = {
    "fetcher.server.delay": 0.4,
    "http.robots.cache.ttl.secs": 2,
    "http.robots.refresh.ahead.secs": 1,
    "urlfilters.max.depth": 20,
}

RUN = "a/b/c/d/"
HOST_LINK = "shop.example/x/"
# path on TRAPS -> (expected: fetched, or the reason the URL is refused)
TRAP_URLS = {
    "/": "fetched",
    "/a/b/c/d/": "fetched",
    "/a/b/c/d/a/b/c/d/": "fetched",                                       # two copies of a 4-segment run
    "/a/b/c/d/a/b/c/d/a/b/c/d/": "trap.repeated_run",                    # a third copy
    "/x/": "fetched",
    "/x/shop.example/x/": "fetched",                                      # one host-like segment
    "/x/shop.example/x/shop.example/x/": "trap.host_segment",            # the same one again
    "/list?p=1&p=1": "fetched",
    "/list?p=1&p=1&p=1": "trap.repeated_query_param",
    "/img/img/img/": "fetched",
    "/img/img/img/img/": "trap.repeated_segments",                       # the existing key, still in force
}


def _site() -> SiteSpec:
    trap_pages = {
        "/": Page(title="traps", links=("a/b/c/d/", "x/", "list?p=1&p=1", "list?p=1&p=1&p=1", "img/img/img/",
                                        "img/img/img/img/")),
        "/a/b/c/d/": Page(title="run 1", links=(RUN,)),
        "/a/b/c/d/a/b/c/d/": Page(title="run 2", links=(RUN,)),
        "/x/": Page(title="host 0", links=(HOST_LINK,)),
        "/x/shop.example/x/": Page(title="host 1", links=(HOST_LINK,)),
        "/list?p=1&p=1": Page(title="list"),
        "/img/img/img/": Page(title="img"),
    }
    chain = {f"/p{i}": Page(title=f"p{i}", links=(f"/p{i + 1}", "/private/x") if i + 1 < CHAIN else ("/private/x",))
             for i in range(CHAIN)}
    return SiteSpec(hosts={
        TRAPS: HostSpec(pages=trap_pages),
        REFRESH: HostSpec(pages={**chain, "/private/x": Page(title="private")},
                          robots=RobotsSpec(text="User-agent: *\nDisallow: /private/\n", etag=ETAG)),
    })


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("traps")
    served = ServedSite(_site(), tmp / "requests.jsonl")
    crawl = Crawl(tmp / "crawl", kafka_bootstrap, {**BASE_OVERRIDES, **OVERRIDES})
    try:
        crawl.start_worker()
        crawl.seed([served.url(TRAPS, "/"), served.url(REFRESH, "/p0")])
        report = crawl.wait_idle(timeout_s=240)
        yield {"served": served, "crawl": crawl, "report": report, "records": crawl.records()}
    finally:
        crawl.stop()
        served.close()


def test_admitted_trap_shaped_urls_are_fetched_once_and_refused_ones_never_requested(env: dict[str, Any]) -> None:
    served: ServedSite = env["served"]
    requested = [r["path"] for r in served.requests() if r["ip"] == TRAPS and r["path"] != "/robots.txt"]
    fetched = sorted(p for p, want in TRAP_URLS.items() if want == "fetched")
    assert sorted(requested) == fetched   # each admitted URL once; no refused URL reached the server
    records = env["records"]
    for path in fetched:
        assert records[served.url(TRAPS, path)]["status"] == "FETCHED", path
    for path, want in TRAP_URLS.items():
        if want != "fetched":
            assert served.url(TRAPS, path) not in records, path   # refused before entering the frontier


def test_each_trap_guard_counts_its_refusals_in_squall_status(env: dict[str, Any]) -> None:
    rejected = env["report"].rejected
    for reason in ("trap.repeated_run", "trap.host_segment", "trap.repeated_query_param", "trap.repeated_segments"):
        assert rejected.get(reason, 0) >= 1, (reason, dict(rejected))
    crawl: Crawl = env["crawl"]
    environ = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    out = subprocess.run([SQUALL, "--conf", str(crawl.conf_path), "status", "--json"], env=environ,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    shown = json.loads(out)["rejected"]
    assert {r for r in shown if r.startswith("trap.")} >= {
        "trap.repeated_run", "trap.host_segment", "trap.repeated_query_param", "trap.repeated_segments"}


def test_robots_txt_is_refreshed_conditionally_and_a_304_keeps_the_cached_rules(env: dict[str, Any]) -> None:
    served: ServedSite = env["served"]
    robots = [r for r in served.requests() if r["ip"] == REFRESH and r["path"] == "/robots.txt"]
    assert robots[0]["if_none_match"] is None and robots[0]["status"] == 200
    refreshes = robots[1:]
    assert refreshes, "the crawl outlived the 2 s robots lifetime: robots.txt must have been fetched again"
    assert all(r["if_none_match"] == ETAG and r["status"] == 304 for r in refreshes), refreshes
    pages = [r["path"] for r in served.requests() if r["ip"] == REFRESH and r["path"] != "/robots.txt"]
    assert sorted(pages) == sorted(f"/p{i}" for i in range(CHAIN))   # /private/x never requested
    record = env["records"][served.url(REFRESH, "/private/x")]
    assert record["status"] == "ERROR" and record["reason"] == "robots.denied"
