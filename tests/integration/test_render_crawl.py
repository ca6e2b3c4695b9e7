"""Rendering through the real broker, measured at the recording server (docs/frontier.md: JavaScript pages).

One single-page application whose links exist only after its script runs,
crawled twice by a real worker: with ``render.enabled`` every page is found
(and pages whose render fails keep their raw links, i.e. none); without it
only the shell is fetched. Politeness is measured at the server: what the
browser was refused never arrives, a render's requests stay within
``render.max.requests``, and the host's next page fetch starts at least
``fetcher.server.delay`` after the render ended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from squall.tools.site_spec import Page, RobotsSpec, SiteSpec, spa_host

HOST, OTHER = "127.0.0.2", "127.0.0.3"
DELAY_S = 1.0
TIMEOUT_S = 4.0
MAX_REQUESTS = 6
LINKS = {"/": ["/a", "/b", "/sneaky", "/burst", "/hang"], "/a": ["/a1"], "/a1": [], "/b": [],
         "/sneaky": [], "/burst": ["/burst-child"], "/hang": ["/hang-child"]}
SCRIPTS = {
    "/sneaky": ('fetch("/private/secret.json").catch(function () {});'
                'fetch("http://10.0.0.1/steal").catch(function () {});'
                'fetch("http://127.0.0.3:{port}/other.json").catch(function () {});'),
    "/burst": "for (var i = 0; i < 40; i++) { fetch('/r/' + i).catch(function () {}); }",
    "/hang": "fetch('/slow').catch(function () {});",
}
RENDERED = {"/", "/a", "/a1", "/b", "/sneaky"}


def _site() -> SiteSpec:
    extra: dict[str, Any] = {f"/r/{i}": Page(body="{}", content_type="application/json") for i in range(40)}
    extra.update({"/private/secret.json": Page(body="[]", content_type="application/json"),
                  "/slow": Page(body="late", delay_s=30.0), "/burst-child": Page(title="never linked in raw HTML"),
                  "/hang-child": Page(title="never linked in raw HTML")})
    host = spa_host(LINKS, scripts=SCRIPTS, extra=extra,
                    robots=RobotsSpec(text="User-agent: *\nDisallow: /private/\n"))
    return SiteSpec(hosts={HOST: host, OTHER: spa_host({"/": []}, extra={"/other.json": Page(body="[]")})})


def _overrides(enabled: bool) -> dict[str, Any]:
    return {"fetcher.server.delay": DELAY_S, "render.enabled": enabled, "render.timeout": TIMEOUT_S,
            "render.max.requests": MAX_REQUESTS, "render.requests.hosts.allow": ["10.0.0.1"]}


def _conversions(warcs: list[Path]) -> tuple[dict[str, str], dict[str, str]]:
    """(response record id → URL, conversion URL → the record id it refers to)."""
    responses, conversions = {}, {}
    for path in warcs:
        with open(path, "rb") as f:
            for rec in ArchiveIterator(f):
                uri = rec.rec_headers.get_header("WARC-Target-URI")
                if rec.rec_type == "response":
                    responses[rec.rec_headers.get_header("WARC-Record-ID")] = uri
                elif rec.rec_type == "conversion":
                    conversions[uri] = rec.rec_headers.get_header("WARC-Refers-To")
    return responses, conversions


def test_a_single_page_application_is_crawled_completely_and_politely_with_rendering(site, crawl, chromium):
    served = site(_site())
    c = crawl(**_overrides(True))
    c.start_worker()
    c.seed([served.url(HOST, "/")])
    report = c.wait_idle(timeout_s=300)
    page = lambda p: served.url(HOST, p)  # noqa: E731

    # every page linked only by script is found; failed renders keep the raw (link-less) HTML
    records = c.records()
    fetched = {u for u, r in records.items() if r["status"] == "FETCHED"}
    assert fetched == {page(p) for p in LINKS}
    assert page("/burst-child") not in records and page("/hang-child") not in records
    render = {u: r["metadata"].get("parse.render") for u, r in records.items()}
    assert {u for u, v in render.items() if v == ["rendered"]} == {page(p) for p in RENDERED}
    assert render[page("/burst")] == ["failed", "render.budget"]
    assert render[page("/hang")] == ["failed", "render.timeout"]
    assert report.rendered == len(RENDERED)
    assert report.render_failures == {"render.budget": 1, "render.timeout": 1}
    refused = dict(x.split("=") for x in records[page("/sneaky")]["metadata"]["parse.render.refused"])
    assert refused == {"robots.denied": "1", "blocked_address": "1", "other_site": "1"}

    # the server never saw what was refused; the burst stayed within the budget
    requests = served.requests()
    assert not [r for r in requests if r["path"].startswith("/private/")]
    assert served.server.requests_for(OTHER) == []
    assert len([r for r in requests if r["path"].startswith("/r/")]) <= MAX_REQUESTS
    counts = served.page_requests()
    assert all(counts[page(p)] == 1 for p in LINKS), counts  # no page twice (the browser got the raw answer)
    assert counts[page("/app.js")] == 1, counts  # the bundle came from the worker's cache after the first render

    # pacing: each page fetch (robots.txt included) starts >= the delay after the previous request of the host,
    # and after the timed-out render >= timeout + delay after that page's own fetch (the render ran in between)
    times = sorted(requests, key=lambda r: r["t"])
    pages = {p for p in LINKS} | {"/robots.txt"}
    for prev, cur in zip(times, times[1:]):
        if cur["path"] in pages:
            assert cur["t"] - prev["t"] >= DELAY_S * 0.98, (prev, cur)
    hang = next(r for r in times if r["path"] == "/hang")
    after = next((r for r in times if r["t"] > hang["t"] and r["path"] in pages), None)
    if after is not None:
        assert after["t"] - hang["t"] >= TIMEOUT_S + DELAY_S * 0.98, (hang, after)
    assert next(r for r in times if r["path"] == "/slow")["status"] is None  # abandoned at the timeout

    # the rendered DOM is archived as a conversion record referring to the page's response record
    responses, conversions = _conversions(c.warc_files())
    assert set(conversions) == {page(p) for p in RENDERED}
    assert all(responses.get(ref) == u for u, ref in conversions.items()), conversions


def test_without_rendering_only_the_shell_is_fetched(site, crawl):
    served = site(_site())
    c = crawl(**_overrides(False))
    c.start_worker()
    c.seed([served.url(HOST, "/")])
    report = c.wait_idle(timeout_s=240)
    assert [r["path"] for r in served.requests()] == ["/robots.txt", "/"]
    assert report.rendered == 0 and not report.render_failures
    assert json.dumps(report.to_json())  # still a JSON report
