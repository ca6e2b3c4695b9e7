"""Tests of squall.policy.parse: outlinks, robots directives, canonical, title, charset, robustness."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from squall.policy.parse import ParseResult, is_parseable, parse_html, robots_directives

PAGE = "http://example.com/dir/page.html"


def parse(body: str | bytes, *, url: str = PAGE, headers=(), content_type: str | None = "text/html",
          agent_token: str | None = None) -> ParseResult:
    raw = body.encode("utf-8") if isinstance(body, str) else body
    return parse_html(raw, url=url, headers=headers, content_type=content_type, agent_token=agent_token)


# ---------------------------------------------------------------- outlinks

LINK_CASES = [
    # (href, expected absolute URL or None when skipped)
    ("other.html", "http://example.com/dir/other.html"),
    ("../up.html", "http://example.com/up.html"),
    ("/root", "http://example.com/root"),
    ("//cdn.example.org/x", "http://cdn.example.org/x"),
    ("https://secure.example.com/", "https://secure.example.com/"),
    ("?q=1", "http://example.com/dir/page.html?q=1"),
    ("other.html#frag", "http://example.com/dir/other.html#frag"),
    ("  spaced.html \n", "http://example.com/dir/spaced.html"),
    ("bro\nken.html", "http://example.com/dir/broken.html"),
    ("#top", None),
    ("", None),
    ("   ", None),
    ("javascript:void(0)", None),
    ("JavaScript:alert(1)", None),
    ("mailto:someone@example.com", None),
    ("tel:+123", None),
    ("data:text/html,hi", None),
    ("ftp://example.com/file", None),
    ("http://[::1", None),
    ("http://example.com:99999999/", None),
]


@pytest.mark.parametrize("href,expected", LINK_CASES)
def test_an_href_resolves_against_the_page_url_or_is_skipped(href, expected):
    result = parse(f'<html><body><a href="{href}">x</a></body></html>')
    assert result.outlinks == ((expected,) if expected else ())


def test_outlinks_keep_document_order_and_drop_duplicates():
    html = '<a href="/b">1</a><a href="/a">2</a><a href="/b">3</a><a href="http://example.com/a">4</a>'
    assert parse(html).outlinks == ("http://example.com/b", "http://example.com/a")


def test_area_hrefs_are_outlinks_and_anchors_without_href_are_not():
    html = '<map><area href="/map-target" shape="rect"></map><a name="x">anchor</a><a href>empty</a>'
    assert parse(html).outlinks == ("http://example.com/map-target",)


def test_base_href_is_used_for_resolution_and_is_itself_resolved_against_the_page():
    html = '<head><base href="/other/dir/"></head><body><a href="x.html">x</a></body>'
    assert parse(html).outlinks == ("http://example.com/other/dir/x.html",)


def test_an_absolute_base_href_on_another_host_is_followed():
    html = '<base href="http://mirror.example.net/m/"><a href="x">x</a>'
    assert parse(html).outlinks == ("http://mirror.example.net/m/x",)


def test_only_the_first_base_href_counts():
    html = '<base href="/first/"><base href="/second/"><a href="x">x</a>'
    assert parse(html).outlinks == ("http://example.com/first/x",)


def test_a_javascript_base_href_is_ignored():
    html = '<base href="javascript:alert(1)"><a href="x">x</a>'
    assert parse(html).outlinks == ("http://example.com/dir/x",)


@pytest.mark.parametrize("rel", ["nofollow", "NOFOLLOW", "external nofollow", " noopener  nofollow "])
def test_links_with_rel_nofollow_are_skipped(rel):
    html = f'<a rel="{rel}" href="/hidden">h</a><a href="/shown">s</a>'
    assert parse(html).outlinks == ("http://example.com/shown",)


def test_rel_values_that_merely_contain_nofollow_text_are_kept():
    assert parse('<a rel="nofollowers" href="/x">x</a>').outlinks == ("http://example.com/x",)


# ---------------------------------------------------------------- robots directives

META_CASES = [
    # (meta name, content, nofollow, noindex)
    ("robots", "nofollow", True, False),
    ("robots", "noindex", False, True),
    ("robots", "none", True, True),
    ("ROBOTS", "NoIndex, NoFollow", True, True),
    ("robots", "index, follow", False, False),
    ("robots", "all", False, False),
    ("robots", "noarchive", False, False),
    ("googlebot", "none", False, False),
    ("squall", "nofollow", True, False),
    ("Squall", "noindex", False, True),
]


@pytest.mark.parametrize("name,content,nofollow,noindex", META_CASES)
def test_meta_robots_and_the_agent_meta_set_the_flags(name, content, nofollow, noindex):
    html = f'<head><meta name="{name}" content="{content}"></head><body><a href="/x">x</a></body>'
    result = parse(html, agent_token="squall")
    assert (result.nofollow, result.noindex) == (nofollow, noindex)
    assert result.outlinks == (() if nofollow else ("http://example.com/x",))


def test_the_agent_meta_is_ignored_without_an_agent_token():
    result = parse('<meta name="squall" content="none"><a href="/x">x</a>')
    assert (result.nofollow, result.noindex) == (False, False)


HEADER_CASES = [
    # (X-Robots-Tag value, nofollow, noindex)
    ("nofollow", True, False),
    ("noindex", False, True),
    ("none", True, True),
    ("NOINDEX, NOFOLLOW", True, True),
    ("googlebot: nofollow", False, False),
    ("otherbot: noindex, nofollow", False, False),
    ("squall: nofollow", True, False),
    ("SQUALL: none", True, True),
    ("googlebot: noindex, squall: nofollow", True, False),
    ("unavailable_after: 25 Jun 2010 15:00:00 PST", False, False),
    ("max-snippet: 20, noindex", False, True),
    ("", False, False),
]


@pytest.mark.parametrize("value,nofollow,noindex", HEADER_CASES)
def test_x_robots_tag_applies_when_unprefixed_or_prefixed_with_our_token(value, nofollow, noindex):
    result = parse('<a href="/x">x</a>', headers={"X-Robots-Tag": value}, agent_token="squall")
    assert (result.nofollow, result.noindex) == (nofollow, noindex)


def test_every_x_robots_tag_header_is_read_case_insensitively():
    headers = [("x-robots-tag", "googlebot: none"), ("X-ROBOTS-TAG", "noindex"), ("X-Robots-Tag", "nofollow")]
    result = parse('<a href="/x">x</a>', headers=headers)
    assert (result.nofollow, result.noindex, result.outlinks) == (True, True, ())


def test_a_prefixed_x_robots_tag_is_ignored_without_an_agent_token():
    result = parse("<p>x</p>", headers={"X-Robots-Tag": "squall: none"})
    assert (result.nofollow, result.noindex) == (False, False)


def test_robots_directives_expands_none():
    assert robots_directives("none") >= {"noindex", "nofollow"}


# ---------------------------------------------------------------- canonical and title

CANONICAL_CASES = [
    ('<link rel="canonical" href="/canon">', "http://example.com/canon"),
    ('<link rel="Canonical" href="other.html">', "http://example.com/dir/other.html"),
    ('<base href="/b/"><link rel="canonical" href="c">', "http://example.com/b/c"),
    ('<link rel="canonical" href="https://example.org/x"><link rel="canonical" href="/y">',
     "https://example.org/x"),
    ('<link rel="alternate" href="/alt">', None),
    ('<link rel="canonical" href="">', None),
    ('<link rel="canonical" href="javascript:x">', None),
    ("", None),
]


@pytest.mark.parametrize("head,expected", CANONICAL_CASES)
def test_canonical_link_is_absolute_or_none(head, expected):
    assert parse(f"<html><head>{head}</head><body></body></html>").canonical == expected


@pytest.mark.parametrize("html,title", [
    ("<title>  Hello\n  world </title>", "Hello world"),
    ("<title>A &amp; B</title>", "A & B"),
    ("<title></title>", None),
    ("<p>no title</p>", None),
    ("<title>first</title><title>second</title>", "first"),
])
def test_title_is_whitespace_collapsed_text(html, title):
    assert parse(html).title == title


def test_text_length_counts_visible_text_only():
    html = "<html><head><style>p{}</style></head><body><p>Hello</p>  <script>var x=1;</script><p>world</p></body>"
    assert parse(html).text_length == len("Hello world")


def test_text_length_false_skips_the_count_and_changes_nothing_else():
    html = ('<html><head><title>T</title><meta name="robots" content="noindex"></head><body><p>Hello</p>'
            '<script>var x=1;</script><a href="/a">a</a><link rel="canonical" href="/c"></body>')
    counted = parse_html(html.encode(), url=PAGE, content_type="text/html")
    skipped = parse_html(html.encode(), url=PAGE, content_type="text/html", text_length=False)
    assert counted.text_length == len("Hello a") and skipped.text_length == 0
    assert replace(skipped, text_length=counted.text_length) == counted


# ---------------------------------------------------------------- charsets

def test_utf8_from_the_content_type_header():
    body = "<title>café ünïcode</title>".encode("utf-8")
    result = parse_html(body, url=PAGE, headers={}, content_type="text/html; charset=UTF-8")
    assert (result.charset, result.title) == ("utf-8", "café ünïcode")


def test_latin1_from_a_meta_charset():
    body = '<html><head><meta charset="iso-8859-1"><title>caf\xe9</title></head></html>'.encode("latin-1")
    result = parse_html(body, url=PAGE, headers={}, content_type="text/html")
    # WHATWG maps iso-8859-1 to windows-1252, a superset
    assert (result.charset, result.title) == ("cp1252", "café")


def test_latin1_from_a_meta_http_equiv():
    body = ('<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
            "<title>na\xefve</title>").encode("latin-1")
    assert parse_html(body, url=PAGE, headers={}, content_type=None).title == "naïve"


def test_the_header_charset_wins_over_the_meta_charset():
    body = '<meta charset="iso-8859-1"><title>é</title>'.encode("utf-8")
    result = parse_html(body, url=PAGE, headers={}, content_type="text/html; charset=utf-8")
    assert (result.charset, result.title) == ("utf-8", "é")


def test_a_bom_wins_over_the_header():
    body = "\ufeff<title>Grüße</title>".encode("utf-16-le")
    body = b"\xff\xfe" + body[2:]
    result = parse_html(body, url=PAGE, headers={}, content_type="text/html; charset=iso-8859-1")
    assert result.charset.startswith("utf-16")
    assert result.title == "Grüße"


def test_a_utf8_bom_is_detected_and_stripped():
    result = parse_html(b"\xef\xbb\xbf<title>x</title>", url=PAGE, headers={}, content_type=None)
    assert (result.charset, result.title) == ("utf-8", "x")


def test_the_content_type_in_headers_is_used_when_no_content_type_is_given():
    body = "<title>é</title>".encode("latin-1")
    result = parse_html(body, url=PAGE, headers=[("Content-Type", "text/html; charset=latin-1")],
                        content_type=None)
    assert result.title == "é"


def test_without_any_declaration_utf8_is_assumed():
    assert parse_html(b"<p>x</p>", url=PAGE, headers={}, content_type=None).charset == "utf-8"


def test_an_unknown_charset_falls_back_to_utf8():
    result = parse_html("<title>é</title>".encode(), url=PAGE, headers={},
                        content_type="text/html; charset=no-such-charset")
    assert result.title == "é"


def test_invalid_utf8_bytes_are_replaced_not_raised():
    result = parse_html(b"<title>a\xff\xfeb</title><a href='/x'>x</a>", url=PAGE, headers={},
                        content_type="text/html; charset=utf-8")
    assert result.title is not None and result.title.startswith("a")
    assert result.outlinks == ("http://example.com/x",)


# ---------------------------------------------------------------- robustness

@pytest.mark.parametrize("body", [
    b"", b"\x00", b"\x00" * 100 + b"<a href='/after-nul'>x</a>", b"<", b"<a href=", b"<<<>>>",
    b"<a href='/x'", b"<html><body><a href='/ok'>" + b"<div>" * 5000, b"\xff\xfe\x00\x00",
    b"<!-- unterminated comment <a href='/x'>", b"<svg><title>t</title><a href='/svg-link'>s</a></svg>",
    b"<script>document.write('<a href=\"/js\">')</script>",
])
def test_garbage_html_never_raises(body):
    result = parse_html(body, url=PAGE, headers={}, content_type=None)
    assert isinstance(result, ParseResult)
    assert all(link.startswith("http") for link in result.outlinks)


def test_links_after_nul_bytes_are_still_found():
    body = b"<p>\x00\x00</p><a href='/after-nul'>x</a>"
    assert "http://example.com/after-nul" in parse_html(body, url=PAGE, headers={}, content_type=None).outlinks


def test_fuzz_random_bytes_never_raise():
    rng = random.Random(20240601)
    alphabet = b"<>/=\"' abhrefbasemetalinktitle&#;\x00\xff\xfe\n"
    for i in range(300):
        n = rng.randrange(0, 2000)
        if i % 2:
            body = bytes(rng.randrange(256) for _ in range(n))
        else:
            body = bytes(rng.choice(alphabet) for _ in range(n))
        ctype = rng.choice([None, "text/html", "text/html; charset=utf-16", "text/html; charset=\x00bad"])
        headers = rng.choice([{}, {"X-Robots-Tag": body[:30].decode("latin-1")}, [("X-Robots-Tag", ":::")]])
        result = parse_html(body, url=PAGE, headers=headers, content_type=ctype, agent_token="squall")
        assert isinstance(result, ParseResult)


def test_a_malformed_page_url_does_not_raise():
    result = parse_html(b"<a href='x'>x</a>", url="http://[bad", headers={}, content_type=None)
    assert isinstance(result, ParseResult)


def test_result_is_frozen():
    result = parse("<p>x</p>")
    with pytest.raises(AttributeError):
        result.title = "changed"  # type: ignore[misc]


# ---------------------------------------------------------------- is_parseable

MIMETYPES = ["text/html", "application/xhtml+xml"]


@pytest.mark.parametrize("content_type,mimetypes,expected", [
    ("text/html", MIMETYPES, True),
    ("text/html; charset=utf-8", MIMETYPES, True),
    ("TEXT/HTML ; charset=utf-8", MIMETYPES, True),
    ("application/xhtml+xml", MIMETYPES, True),
    ("application/pdf", MIMETYPES, False),
    ("text/plain", MIMETYPES, False),
    ("text/plain", ["text/*"], True),
    ("image/png", ["*/*"], True),
    ("html", MIMETYPES, False),
    ("", MIMETYPES, False),
    (None, MIMETYPES, False),
    ("text/html", [], False),
])
def test_is_parseable_matches_the_mime_type_against_the_list(content_type, mimetypes, expected):
    assert is_parseable(content_type, mimetypes) is expected


# ---------------------------------------------------------------- root-relative links, memoized per origin

@pytest.mark.parametrize("base", [
    "http://example.com/a/b/c?q=1", "https://Example.com:8443/dir/page;params?x#frag", "http://u@h.example/x/",
])
@pytest.mark.parametrize("href", [
    "/p/1", "/a/./b/../c", "/../x", "/p?q=1#f", "/;p?q", "/\t/other.example/x", "/with space", "/%41",
])
def test_a_root_relative_link_resolves_the_same_through_the_origin_memo(base, href):
    from squall.policy.parse import _origin, _resolve, _resolve_rooted

    origin = _origin(base)
    assert origin is not None
    assert _resolve_rooted(origin, href) == _resolve(base, href)


def test_root_relative_links_of_a_page_resolve_against_its_origin():
    body = b'<a href="/x/../y">1</a><a href="//cdn.example/z">2</a><a href="rel">3</a>'
    result = parse_html(body, url="https://example.com/dir/page")
    assert result.outlinks == ("https://example.com/y", "https://cdn.example/z", "https://example.com/dir/rel")
