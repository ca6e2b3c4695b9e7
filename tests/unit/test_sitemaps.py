"""Tests of squall.policy.sitemaps: reading sitemap bytes (urlset, index, text, gzip, limits, garbage) and the decisions."""

from __future__ import annotations

import gzip
from dataclasses import replace
from datetime import datetime, timezone

import pytest

from squall.errors import ConfigError
from squall.policy.records import StatusMessage
from squall.policy.reasons import Reason, Status
from squall.settings import load_settings
from squall.policy.sitemaps import (
    LEVEL_KEY,
    SITEMAP_KEY,
    SITEMAP_PRIORITY,
    SitemapConfig,
    SitemapDocument,
    SitemapEntry,
    changefreq_interval_s,
    discovery_statuses,
    discovery_urls,
    gunzip_limited,
    is_marked,
    listed_statuses,
    parse_w3c_datetime,
    read_sitemap,
    record_priority,
    robots_sitemaps,
    settle_status,
)
from squall.policy.urls import NormalizerConfig

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
NOW = datetime(2024, 5, 1, 12, tzinfo=timezone.utc).timestamp()
DAY = 86400.0
NORMALIZER = NormalizerConfig.from_settings(load_settings(overrides={}))
CONFIG = SitemapConfig(discovery=True, default_path="/sitemap.xml", max_urls=50000, max_nesting=2,
                       content_limit=1 << 20, max_age_s=None)


def urlset(*entries: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {NS}>' + "".join(entries) + "</urlset>").encode()


def url_entry(loc: str, **fields: str) -> str:
    return "<url><loc>" + loc + "</loc>" + "".join(f"<{k}>{v}</{k}>" for k, v in fields.items()) + "</url>"


def read(body: bytes, content_type: str | None = "application/xml", truncated: bool = False,
         max_urls: int = 50000, limit: int = 1 << 20) -> SitemapDocument:
    return read_sitemap(body, content_type=content_type, truncated=truncated, max_urls=max_urls,
                        content_limit=limit)


# ---------------------------------------------------------------- reading

def test_a_urlset_gives_every_url_with_lastmod_changefreq_and_priority():
    doc = read(urlset(url_entry("https://a.example/1", lastmod="2024-04-30", changefreq="daily", priority="0.8"),
                      url_entry("https://a.example/2")))
    assert doc.kind == "urlset" and doc.error is None and doc.dropped == 0
    assert doc.entries == (
        SitemapEntry("https://a.example/1", lastmod_s=NOW - 1.5 * DAY, changefreq="daily", priority=0.8),
        SitemapEntry("https://a.example/2"),
    )


def test_a_sitemap_index_lists_its_child_sitemaps():
    body = (f"<sitemapindex {NS}><sitemap><loc>https://a.example/s1.xml</loc><lastmod>2024-01-01</lastmod>"
            "</sitemap><sitemap><loc> https://a.example/s2.xml.gz </loc></sitemap></sitemapindex>").encode()
    doc = read(body)
    assert doc.kind == "index"
    assert [e.loc for e in doc.entries] == ["https://a.example/s1.xml", "https://a.example/s2.xml.gz"]


def test_a_sitemap_without_namespace_is_read_leniently():
    doc = read(b"<urlset><url><loc>https://a.example/x</loc></url></urlset>")
    assert [e.loc for e in doc.entries] == ["https://a.example/x"]


def test_extension_locs_nested_in_an_entry_are_not_entries():
    body = urlset('<url><loc>https://a.example/p</loc><image:image xmlns:image="http://www.google.com/schemas/'
                  'sitemap-image/1.1"><image:loc>https://a.example/i.png</image:loc></image:image></url>')
    doc = read(body)
    assert [e.loc for e in doc.entries] == ["https://a.example/p"]


def test_an_rss_feed_gives_its_item_links_with_pubdate_as_lastmod():
    body = (b'<rss version="2.0"><channel><title>t</title><link>https://a.example/</link>'
            b"<item><title>one</title><link>https://a.example/1</link><pubDate>Tue, 30 Apr 2024 12:00:00 GMT</pubDate>"
            b"</item><item><link> https://a.example/2 </link></item><item><title>no link</title></item>"
            b"</channel></rss>")
    doc = read(body, content_type="application/rss+xml")
    assert doc.kind == "feed" and doc.error is None and doc.dropped == 1
    assert doc.entries == (SitemapEntry("https://a.example/1", lastmod_s=NOW - 1.0 * DAY),
                           SitemapEntry("https://a.example/2"))


def test_an_atom_feed_gives_its_alternate_entry_links_with_updated_as_lastmod():
    body = (b'<feed xmlns="http://www.w3.org/2005/Atom"><link href="https://a.example/feed" rel="self"/>'
            b'<entry><link rel="edit" href="https://a.example/edit/1"/><link href="https://a.example/1"/>'
            b"<updated>2024-04-30T12:00:00Z</updated></entry>"
            b'<entry><link rel="alternate" href="https://a.example/2"/></entry></feed>')
    doc = read(body, content_type="application/atom+xml")
    assert doc.kind == "feed"
    assert doc.entries == (SitemapEntry("https://a.example/1", lastmod_s=NOW - DAY), SitemapEntry("https://a.example/2"))


def test_a_clean_urlset_mislabelled_as_html_is_still_read():
    doc = read(urlset(url_entry("https://a.example/1")), content_type="text/html")
    assert doc.kind == "urlset" and doc.error is None


def test_a_gzipped_sitemap_is_gunzipped_first():
    doc = read(gzip.compress(urlset(url_entry("https://a.example/z"))), content_type="application/gzip")
    assert [e.loc for e in doc.entries] == ["https://a.example/z"] and doc.error is None


def test_a_gzip_bomb_stops_at_the_content_limit_and_is_too_big():
    bomb = gzip.compress(urlset(url_entry("https://a.example/first")) [:-len(b"</urlset>")] + b" " * (8 << 20))
    doc = read(bomb, content_type="application/x-gzip", limit=64 * 1024)
    assert doc.error is Reason.SITEMAP_TOO_BIG
    assert [e.loc for e in doc.entries] == ["https://a.example/first"]  # what was read before the cut is kept


def test_gunzip_limited_keeps_at_most_the_limit():
    data = gzip.compress(b"x" * 100_000)
    assert gunzip_limited(data, 1000) == (b"x" * 1000, True)
    assert gunzip_limited(data, -1) == (b"x" * 100_000, False)
    assert gunzip_limited(data, 100_000) == (b"x" * 100_000, False)


def test_a_text_sitemap_gives_one_url_a_line_and_drops_the_rest():
    doc = read(b"\xef\xbb\xbfhttps://a.example/1\n\n  http://a.example/2  \nnot a url\nftp://a.example/f\n",
               content_type="text/plain")
    assert doc.kind == "text" and [e.loc for e in doc.entries] == ["https://a.example/1", "http://a.example/2"]
    assert doc.dropped == 2


def test_entries_over_the_count_limit_are_dropped_and_counted():
    doc = read(urlset(*(url_entry(f"https://a.example/{i}") for i in range(10))), max_urls=3)
    assert [e.loc for e in doc.entries] == [f"https://a.example/{i}" for i in range(3)]
    assert doc.dropped == 7 and doc.error is None


@pytest.mark.parametrize(("body", "content_type", "reason"), [
    (b"", "application/xml", Reason.SITEMAP_MALFORMED),                         # empty
    (b"<urlset><url><loc>https://a.example/1</loc></url><url><loc>", "text/xml", Reason.SITEMAP_MALFORMED),
    (b"<<<>>>not xml", "text/xml", Reason.SITEMAP_MALFORMED),
    (b"just some words\nand more", "text/plain", Reason.SITEMAP_MALFORMED),      # no line is a URL
    (b"\x1f\x8b\x08garbage-after-gzip-magic", "application/gzip", Reason.SITEMAP_MALFORMED),
    (b"<html><body><a href='/x'>x</a></body></html>", "text/html", Reason.SITEMAP_WRONG_TYPE),
    (b"<html><body>hello</body></html>", "application/xml", Reason.SITEMAP_WRONG_TYPE),
    (b'<!DOCTYPE html><html><head><meta charset="utf-8"><title>x</title></head><body><br></body></html>',
     "text/html", Reason.SITEMAP_WRONG_TYPE),
    (b"https://a.example/1\n", "text/html", Reason.SITEMAP_WRONG_TYPE),               # text, served as HTML
    (b'<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><a href="https://a.example/"/></svg>',
     "image/svg+xml", Reason.SITEMAP_WRONG_TYPE),
    (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]>'
     b"<urlset><url><loc>&b;</loc></url></urlset>", "text/xml", Reason.SITEMAP_MALFORMED),  # billion laughs
    (b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
     b"<urlset><url><loc>&x;</loc></url></urlset>", "text/xml", Reason.SITEMAP_MALFORMED),  # XXE
    (bytes(range(256)) * 4, None, Reason.SITEMAP_MALFORMED),                    # binary garbage
])
def test_a_broken_sitemap_has_a_reason_and_never_raises(body, content_type, reason):
    assert read(body, content_type=content_type).error is reason


def test_a_body_cut_at_the_content_limit_is_too_big_but_keeps_its_first_urls():
    doc = read(urlset(url_entry("https://a.example/1"), url_entry("https://a.example/2"))[:-30], truncated=True)
    assert doc.error is Reason.SITEMAP_TOO_BIG and [e.loc for e in doc.entries] == ["https://a.example/1"]


def test_an_entry_without_loc_is_dropped_and_bad_fields_are_absent():
    doc = read(urlset("<url><lastmod>2024-01-01</lastmod></url>",
                      url_entry("https://a.example/x", lastmod="yesterday", changefreq="sometimes", priority="7")))
    assert doc.entries == (SitemapEntry("https://a.example/x"),) and doc.dropped == 1


@pytest.mark.parametrize(("text", "expected"), [
    ("2024", datetime(2024, 1, 1, tzinfo=timezone.utc)),
    ("2024-05", datetime(2024, 5, 1, tzinfo=timezone.utc)),
    ("2024-05-01", datetime(2024, 5, 1, tzinfo=timezone.utc)),
    ("2024-05-01T12:00Z", datetime(2024, 5, 1, 12, tzinfo=timezone.utc)),
    ("2024-05-01T14:00:00+02:00", datetime(2024, 5, 1, 12, tzinfo=timezone.utc)),
    ("2024-05-01T12:00:00.25Z", datetime(2024, 5, 1, 12, 0, 0, 250000, tzinfo=timezone.utc)),
    ("", None), ("yesterday", None), ("2024-13-01", None),
])
def test_w3c_datetimes(text, expected):
    assert parse_w3c_datetime(text) == (None if expected is None else expected.timestamp())


# ---------------------------------------------------------------- where sitemaps come from

def test_robots_sitemap_lines_are_absolute_and_deduplicated():
    text = ("User-agent: *\nDisallow: /private/\nSitemap: https://a.example/s.xml\nsitemap: /rel.xml\n"
            "Sitemap: https://a.example/s.xml\nSitemap: mailto:x@y\n")
    assert robots_sitemaps(text, "https://a.example/robots.txt") == ["https://a.example/s.xml",
                                                                      "https://a.example/rel.xml"]


@pytest.mark.parametrize(("robots", "seeded", "discovery", "default", "expected"), [
    ("Sitemap: https://a.example/s.xml\n", True, True, "/sitemap.xml", ["https://a.example/s.xml"]),
    ("Sitemap: https://a.example/s.xml\n", False, True, "/sitemap.xml", ["https://a.example/s.xml"]),
    ("User-agent: *\nDisallow:\n", True, True, "/sitemap.xml", ["https://a.example/sitemap.xml"]),
    (None, True, True, "/sitemap.xml", ["https://a.example/sitemap.xml"]),        # robots.txt 404
    (None, False, True, "/sitemap.xml", []),                                       # not a seeded host
    (None, True, True, "", []),                                                    # default path off
    ("Sitemap: https://a.example/s.xml\n", True, False, "/sitemap.xml", ["https://a.example/sitemap.xml"]),
    ("Sitemap: https://a.example/s.xml\n", False, False, "", []),
])
def test_which_sitemaps_a_host_offers(robots, seeded, discovery, default, expected):
    config = SitemapConfig(discovery=discovery, default_path=default, max_urls=10, max_nesting=1,
                           content_limit=-1, max_age_s=None)
    assert discovery_urls(robots, origin="https://a.example", host_seeded=seeded, config=config) == expected


def test_discovered_sitemaps_are_marked_level_zero_and_go_first():
    (msg,) = discovery_statuses(["HTTPS://A.example:443/s.xml", "javascript:alert(1)"], NORMALIZER)
    assert msg.url == "https://a.example/s.xml" and msg.status is Status.DISCOVERED and msg.depth == 0
    assert msg.metadata == {SITEMAP_KEY: ["true"], LEVEL_KEY: ["0"]} and msg.priority == SITEMAP_PRIORITY
    assert is_marked(msg.metadata) and not is_marked({}) and not is_marked({SITEMAP_KEY: ["false"]})


# ---------------------------------------------------------------- what enters the frontier

def listed(doc: SitemapDocument, level: int = 0, config: SitemapConfig = CONFIG, depth: int = 0):
    return listed_statuses(doc, sitemap_url="https://a.example/s.xml", depth=depth,
                           metadata={SITEMAP_KEY: ["true"], LEVEL_KEY: [str(level)]}, inherited={"src": ["x"]},
                           now_s=NOW, config=config, normalizer=NORMALIZER)


def test_listed_urls_enter_one_hop_deeper_with_their_sitemap_fields():
    doc = SitemapDocument(kind="urlset", entries=(
        SitemapEntry("https://a.example/1", lastmod_s=NOW - DAY, changefreq="weekly", priority=1.0),
        SitemapEntry("/2"), SitemapEntry("https://a.example/1"), SitemapEntry("http://[bad"),
        SitemapEntry("https://a.example/s.xml")))
    recorded, out = listed(doc, depth=3)
    assert [(m.url, m.depth, m.priority) for m in out] == [("https://a.example/1", 4, 5), ("https://a.example/2", 4, 0)]
    assert out[0].metadata == {"src": ["x"], "sitemap.lastmod": ["2024-04-30T12:00:00Z"],
                               "sitemap.changefreq": ["weekly"], "sitemap.priority": ["1"]}
    assert out[1].metadata == {"src": ["x"]}
    assert recorded == {"parse.sitemap.kind": ["urlset"], "parse.sitemap.urls": ["2"], "parse.sitemap.dropped": ["1"]}


def test_index_children_are_marked_sitemaps_one_level_down_until_the_nesting_limit():
    doc = SitemapDocument(kind="index", entries=(SitemapEntry("https://a.example/c1.xml"),
                                                 SitemapEntry("https://a.example/c2.xml")))
    _, out = listed(doc, level=1)
    assert [(m.url, m.metadata[LEVEL_KEY], m.priority, is_marked(m.metadata)) for m in out] == [
        ("https://a.example/c1.xml", ["2"], SITEMAP_PRIORITY, True),
        ("https://a.example/c2.xml", ["2"], SITEMAP_PRIORITY, True)]
    recorded, out = listed(doc, level=2)
    assert out == [] and recorded["parse.sitemap.dropped"] == ["2"]


def test_old_entries_are_dropped_by_the_age_filter_and_future_lastmods_ignored():
    config = SitemapConfig(discovery=True, default_path="", max_urls=10, max_nesting=1, content_limit=-1,
                           max_age_s=48 * 3600.0)
    doc = SitemapDocument(kind="urlset", entries=(
        SitemapEntry("https://a.example/old", lastmod_s=NOW - 3 * DAY),
        SitemapEntry("https://a.example/new", lastmod_s=NOW - DAY),
        SitemapEntry("https://a.example/future", lastmod_s=NOW + 30 * DAY),
        SitemapEntry("https://a.example/undated")))
    recorded, out = listed(doc, config=config)
    assert [m.url for m in out] == ["https://a.example/new", "https://a.example/future", "https://a.example/undated"]
    assert "sitemap.lastmod" not in out[1].metadata and recorded["parse.sitemap.dropped"] == ["1"]


@pytest.mark.parametrize(("priority", "expected"), [(None, 0), (0.5, 0), (1.0, 5), (0.0, -5), (0.8, 3), (0.25, -2)])
def test_record_priority_of_a_sitemap_priority(priority, expected):
    assert record_priority(priority) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (["daily"], (True, DAY)), (["HOURLY"], (True, 3600.0)), (["never"], (True, None)),
    (["weekly"], (True, 7 * DAY)), ([], (False, None)), (["often"], (False, None)),
])
def test_changefreq_intervals(value, expected):
    assert changefreq_interval_s({"sitemap.changefreq": value} if value else {}) == expected


def test_a_broken_sitemap_is_settled_as_error_with_its_reason_and_a_good_one_unchanged():
    doc = SitemapDocument(kind="urlset", entries=(SitemapEntry("https://a.example/1"),), error=Reason.SITEMAP_MALFORMED)
    recorded, out = listed(doc)
    assert len(out) == 1 and recorded["parse.sitemap.error"] == ["sitemap.malformed"]
    fetched = StatusMessage(url="https://a.example/s.xml", status=Status.FETCHED, fetched_at_s=NOW, metadata=recorded)
    settled = settle_status(fetched)
    assert settled.status is Status.ERROR and settled.reason is Reason.SITEMAP_MALFORMED
    ok = StatusMessage(url="https://a.example/s.xml", status=Status.FETCHED, fetched_at_s=NOW)
    assert settle_status(ok) is ok
    for foreign in ("no.such.reason", "robots.denied"):  # metadata from outside names no sitemap reason
        odd = replace(ok, metadata={"parse.sitemap.error": [foreign]})
        assert settle_status(odd) is odd


@pytest.mark.parametrize(("key", "value"), [
    ("sitemap.default.path", "sitemap.xml"), ("sitemap.max.urls", 0), ("sitemap.max.nesting", -1),
    ("sitemap.filter.hours.since.modified", -2),
])
def test_bad_sitemap_settings_name_their_key(key, value):
    with pytest.raises(ConfigError, match=key):
        SitemapConfig.from_settings(load_settings(overrides={key: value}))


def test_sitemap_config_from_the_defaults():
    config = SitemapConfig.from_settings(load_settings(overrides={"sitemap.filter.hours.since.modified": 24}))
    assert config.max_urls == 50000 and config.default_path == "" and config.max_age_s == 86400.0
