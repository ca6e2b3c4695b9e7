"""The plain-URL shortcuts (canonicalizing, a URL's host, resolving a link): each agrees with the long way, on any input."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from urllib.parse import urlsplit

from squall.errors import InvalidURL
from squall.policy import parse, urls
from squall.policy.url_parts import url_parts
from squall.settings import load_settings

DEFAULTS = urls.NormalizerConfig.from_settings(load_settings())
SORTING = replace(DEFAULTS, query_sort=True, max_length=60)

# pieces that are plain, and pieces that are not (upper case, escapes, dots, quotes, spaces, userinfo, IDN)
LABELS = st.sampled_from(["a", "example", "xn--fa-hia", "my_host", "-x", "127", "1", "001", "256", "B", "é", ""])
PORTS = st.sampled_from(["", ":80", ":443", ":8080", ":080", ":0", ":65535", ":65536", ":99999", ":x"])
PATH_TEXT = st.text(alphabet="abcAZ09-._~!$&()*+,;=:@/%'? #é\\", max_size=24)
QUERY_TEXT = st.text(alphabet="abutm_=&+%2F09.?/#'é", max_size=24)


@st.composite
def urls_like(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["http", "https", "HTTP", "ftp", "mailto", "h"]))
    host = ".".join(draw(st.lists(LABELS, min_size=1, max_size=4)))
    url = f"{scheme}://{draw(st.sampled_from(['', 'u:p@']))}{host}{draw(PORTS)}"
    if draw(st.booleans()):
        url += "/" + draw(PATH_TEXT)
    if draw(st.booleans()):
        url += "?" + draw(QUERY_TEXT)
    if draw(st.booleans()):
        url += "#" + draw(PATH_TEXT)
    return url


def _fully(url: str, config: urls.NormalizerConfig) -> str | InvalidURL:
    try:
        return urls._canonicalize_fully(url, config, None, False)
    except InvalidURL as exc:
        return exc
    except (ValueError, UnicodeError):  # canonicalize() turns these into url.malformed
        return InvalidURL(urls.Reason.URL_MALFORMED, url)


@settings(max_examples=3000, deadline=None)
@given(urls_like(), st.sampled_from([DEFAULTS, SORTING]))
@example("http://a.com", DEFAULTS)
@example("http://a.com:80/x?utm_source=1&b=2&&c#f", DEFAULTS)
@example("http://127.0.0.1:8080/p/1", DEFAULTS)
@example("http://1.2.3/", DEFAULTS)
@example("http://a.com/x/./y", DEFAULTS)
def test_a_plain_url_gets_what_every_step_gives_it(url: str, config: urls.NormalizerConfig) -> None:
    plain = urls._plain_canonical(url, config)
    if plain is None:
        return  # every step decides, as before
    assert plain == _fully(url, config)


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("http://example.com", "http://example.com/"),
        ("https://example.com:443/a", "https://example.com/a"),
        ("http://example.com:8080/a?b=1&utm_source=x#top", "http://example.com:8080/a?b=1"),
        ("http://127.0.0.1/p/3", "http://127.0.0.1/p/3"),
    ],
)
def test_plain_urls_take_the_shortcut(url: str, canonical: str) -> None:
    assert urls._plain_canonical(url, DEFAULTS) == canonical == urls.canonicalize(url, DEFAULTS)


@pytest.mark.parametrize(
    "url",
    [
        "HTTP://example.com/",  # upper case
        "http://Example.com/",
        "http://example.com/a%2fb",  # an escape
        "http://example.com/a/../b",  # a dot segment
        "http://user@example.com/",  # userinfo
        "http://1.2.3/",  # a host ending in a number that is no IPv4 address: refused by the full steps
        " http://example.com/",  # whitespace
        "http://example.com:99999/",  # a port out of range: refused by the full steps
    ],
)
def test_other_urls_take_every_step(url: str) -> None:
    assert urls._plain_canonical(url, DEFAULTS) is None


def _host_the_long_way(url: str) -> str | None:
    try:
        return urlsplit(url.strip()).hostname or None
    except ValueError:
        return None


@settings(max_examples=2000, deadline=None)
@given(urls_like())
@example("http://a.com:/x")
@example("http://a.com.:8080")
@example("http://[::1]/")
@example("http://a.com;x/")
def test_the_host_of_a_url_read_off_directly_is_urlsplits(url: str) -> None:
    match = urls._PLAIN_AUTHORITY.match(url)
    if match is None:
        return  # urlsplit answers, as before
    assert match.group(1) == _host_the_long_way(url) == urls.host_of(url)


@settings(max_examples=2000, deadline=None)
@given(st.sampled_from(["http://b.org/dir/page.html", "https://b.org/", "http://b.org:8080/a;p?q"]), urls_like())
@example("http://b.org/", "http://a.com/a;")
@example("http://b.org/", "http://a.com/x?")
@example("http://b.org/", "http://a.com:99999/")
@example("https://b.org/", "http://a.com")
def test_a_plain_absolute_link_resolves_as_urljoin_resolves_it(base: str, href: str) -> None:
    assert parse._resolve(base, href) == parse._resolve_joined(base, href)


@given(url=st.one_of(urls_like(), st.text(max_size=40)))
@example(url="http://a.example:99999/p?q#f")
@example(url="http://[::1/")
def test_url_parts_are_urlsplits(url: str) -> None:
    try:
        parts = urlsplit(url)
        expected = (parts.scheme, parts.hostname, parts.path, parts.query)
    except ValueError:
        with pytest.raises(ValueError):
            url_parts(url)
        return
    assert url_parts(url) == expected
