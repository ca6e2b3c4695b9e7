"""Sitemaps through a real broker and a recording loopback server, measured at the server.

One crawl, one worker, two hosts:

* ``127.0.0.30`` lists three sitemaps in its robots.txt: an index (a plain
  urlset and a gzipped one), a broken file, and one under a disallowed path.
  Its pages are reachable ONLY from the sitemaps; the home page links to
  nothing but the plain urlset, and the index answers 500 first (retried
  after ``fetchInterval.fetch.error``), so the urlset is fetched as a page
  before the index names it a sitemap: it must then be fetched again and
  read as one. One listed page is disallowed by robots.txt.
* ``127.0.0.31`` has no robots.txt; as a seeded host its ``/sitemap.xml`` is
  tried, and it answers an HTML page (wrong type).

Checked: every listed page fetched once, the disallowed one never; every
request to a host (robots.txt, sitemaps, pages) at least
``fetcher.server.delay`` after the previous one, at the server; the broken
sitemaps end ERROR with their reason; lastmod / changefreq / priority reach
the URL records.
"""

from __future__ import annotations

import gzip
import time

from aiohttp import web

from squall.tools.site_spec import PORT, HostSpec, Page, RobotsSpec, SiteSpec, url

SM = "127.0.0.30"
DEF = "127.0.0.31"
DELAY_S = 0.5
RETRY_MIN = 0.1  # the index's 500 is retried after 6 s: long after the home page's link to /sm-a.xml was fetched
NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
A_PAGES = ("/a1", "/a2", "/a3")
B_PAGES = ("/b1", "/b2", "/b3")


def _urlset(paths, extra: str = "") -> str:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>'
            + "".join(f"<url><loc>{url(SM, p)}</loc>{extra}</url>" for p in paths) + "</urlset>\n")


def _gzipped_sitemap(request: web.Request) -> Page:
    xml = _urlset(B_PAGES).replace(PORT, str(request.url.port))
    return Page(body=gzip.compress(xml.encode()), content_type="application/gzip")


def _site() -> SiteSpec:
    robots = (f"User-agent: *\nDisallow: /private/\nSitemap: {url(SM, '/sitemap_index.xml')}\n"
              f"Sitemap: {url(SM, '/broken.xml')}\nSitemap: {url(SM, '/private/hidden.xml')}\n")
    index = (f"<sitemapindex {NS}><sitemap><loc>{url(SM, '/sm-a.xml')}</loc></sitemap>"
             f"<sitemap><loc>{url(SM, '/sm-b.xml.gz')}</loc></sitemap></sitemapindex>")
    fields = "<lastmod>2024-04-30T12:00:00Z</lastmod><changefreq>weekly</changefreq><priority>0.9</priority>"
    pages = {
        "/": Page(title="home", links=("/sm-a.xml",)),
        "/sitemap_index.xml": Page(body=index, content_type="application/xml", statuses=(500,)),
        "/sm-a.xml": Page(body=_urlset((*A_PAGES, "/private/secret"), fields), content_type="application/xml"),
        "/sm-b.xml.gz": _gzipped_sitemap,
        # cut in the middle of its second entry: the first is kept, the sitemap ends ERROR sitemap.malformed
        "/broken.xml": Page(body=f"<urlset {NS}><url><loc>{url(SM, '/c1')}</loc></url><url><lo",
                            content_type="text/xml"),
        "/private/secret": Page(title="secret"),
        "/private/hidden.xml": Page(body=_urlset(("/never",)), content_type="application/xml"),
        **{p: Page(title=p) for p in (*A_PAGES, *B_PAGES, "/c1")},
    }
    return SiteSpec(hosts={
        SM: HostSpec(pages=pages, robots=RobotsSpec(text=robots)),
        DEF: HostSpec(pages={"/": Page(title="home"), "/sitemap.xml": Page(title="an HTML page, not a sitemap")}),
    })


def test_pages_listed_only_in_sitemaps_are_crawled_politely_and_broken_sitemaps_end_with_a_reason(site, crawl):
    served = site(_site())
    port = served.server.port
    c = crawl(**{"fetcher.server.delay": DELAY_S, "fetchInterval.fetch.error": RETRY_MIN,
                 "sitemap.default.path": "/sitemap.xml"})
    c.start_worker()
    assert c.seed(served.seeds) == 2

    def u(ip: str, path: str) -> str:
        return f"http://{ip}:{port}{path}"

    # the index answers 500 first and is retried after fetchInterval.fetch.error: a FETCH_ERROR retry is
    # neither due nor in flight, so the crawl can look idle before it; wait for the listed pages too
    deadline = time.monotonic() + 240
    while True:
        report = c.wait_idle(timeout_s=max(1.0, deadline - time.monotonic()))
        records = c.records()
        if all(records.get(u(SM, p), {}).get("status") == "FETCHED" for p in (*A_PAGES, *B_PAGES)) \
                or time.monotonic() > deadline:
            break
        time.sleep(1.0)

    requested = served.page_requests()
    sitemaps = {u(SM, p) for p in ("/sitemap_index.xml", "/sm-a.xml", "/sm-b.xml.gz", "/broken.xml")}
    listed = {u(SM, p) for p in (*A_PAGES, *B_PAGES, "/c1")}
    expected = sitemaps | listed | {u(SM, "/"), u(DEF, "/"), u(DEF, "/sitemap.xml")}
    assert set(requested) == expected, set(requested) ^ expected
    # once each, but the index (500, then 200) and /sm-a.xml (as a page, then as a sitemap) twice
    twice = {u(SM, "/sitemap_index.xml"), u(SM, "/sm-a.xml")}
    assert {k: n for k, n in requested.items()} == {k: 2 if k in twice else 1 for k in expected}
    assert u(SM, "/private/secret") not in requested and u(SM, "/private/hidden.xml") not in requested
    for ip in (SM, DEF):
        # sitemap fetches are ordinary paced requests: every request to the host, robots.txt and
        # sitemaps included, starts at least fetcher.server.delay after the previous one
        assert served.min_gap(ip) >= DELAY_S, (ip, served.start_times(ip))

    records = c.records()
    assert all(records[x]["status"] == "FETCHED" for x in listed), {x: records[x]["status"] for x in listed}
    assert records[u(SM, "/private/secret")]["reason"] == "robots.denied"
    assert records[u(SM, "/private/hidden.xml")]["reason"] == "robots.denied"  # a sitemap obeys robots.txt too
    assert records[u(SM, "/sm-a.xml")]["metadata"]["parse.sitemap.urls"] == ["4"]
    assert records[u(SM, "/broken.xml")]["status"] == "ERROR"
    assert records[u(SM, "/broken.xml")]["reason"] == "sitemap.malformed"
    assert records[u(DEF, "/sitemap.xml")]["status"] == "ERROR"
    assert records[u(DEF, "/sitemap.xml")]["reason"] == "sitemap.wrong_type"
    assert report.reasons["sitemap.malformed"] == 1 and report.reasons["sitemap.wrong_type"] == 1

    index = records[u(SM, "/sitemap_index.xml")]
    assert index["status"] == "FETCHED" and index["metadata"]["parse.sitemap.kind"] == ["index"]
    assert records[u(SM, "/sm-b.xml.gz")]["metadata"]["parse.sitemap.urls"] == ["3"]
    a1 = records[u(SM, "/a1")]
    assert a1["depth"] == 2 and a1["priority"] == 4  # index (0) → sm-a.xml (1) → a1 (2); priority 0.9 → 4
    assert a1["metadata"]["sitemap.changefreq"] == ["weekly"]
    assert a1["metadata"]["sitemap.lastmod"] == ["2024-04-30T12:00:00Z"]
    # changefreq weekly: revisited after 7 days instead of fetchInterval.default (1 day)
    assert abs(a1["next_fetch_at_s"] - a1["last_fetch_at_s"] - 7 * 86400) < 1
    b1 = records[u(SM, "/b1")]
    assert abs(b1["next_fetch_at_s"] - b1["last_fetch_at_s"] - 86400) < 1
