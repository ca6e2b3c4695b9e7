"""Hostile input through the pure policy: robots.txt, URLs, HTML, HTTP headers, every topic's messages.

Property: no input crashes a parser; every bad input ends as a clear,
typed answer — an :class:`InvalidURL` with a reason, a :class:`MessageError`,
``None`` for an unusable header — never another exception.
"""

from __future__ import annotations

from dataclasses import replace

import json
import math

from hypothesis import example, given
from hypothesis import strategies as st

from squall.policy.backoff import parse_retry_after
from squall.errors import InvalidURL, MessageError
from squall.policy.parse import parse_html
from squall.policy.records import FetchMessage, SignalMessage, StatusMessage
from squall.policy.reasons import Reason
from squall.settings import load_settings
from squall.policy.robots_rules import RobotsConfig, RobotsRules, parse_robots
from squall.policy.robots_status import cache_ttl_s
from squall.policy.urls import NormalizerConfig, canonicalize

# The defaults file's normalizer with no query parameter removed (each test names what it removes).
NO_REMOVALS = replace(NormalizerConfig.from_settings(load_settings()), query_remove=())

NOW = 1_700_000_000.0
NORMALIZER = replace(NO_REMOVALS, query_remove=("utm_*", "sid"))
ROBOTS = RobotsConfig.from_settings(load_settings(overrides={"http.agent.name": "squall"}))
REASONS = {r.value for r in Reason}

robots_lines = st.lists(st.one_of(
    st.sampled_from(["User-agent: *", "User-agent: squall", "User-agent: squallbot", "Disallow: /",
                     "Allow: /", "Crawl-delay: 5", "Crawl-delay: -1", "Crawl-delay: 1e999", "Crawl-delay: nan",
                     "Sitemap: http://x/s.xml", "Disallow: /*$", "Allow: /a*b$", "#", "", "\x00", "\ufeff"]),
    st.builds(lambda k, v: f"{k}:{v}", st.sampled_from(["Disallow", "Allow", "User-agent", "Crawl-delay", "X"]),
              st.text(max_size=40))), max_size=30)
urlish = st.one_of(
    st.text(max_size=120),
    st.builds(lambda s, h, p, q: f"{s}://{h}{p}{q}", st.sampled_from(["http", "https", "HTTP", "ftp", "javascript", ""]),
              st.text(max_size=30), st.text(max_size=40), st.text(max_size=30)),
    st.builds(lambda h, port, path: f"http://{h}:{port}/{path}", st.from_regex(r"[a-z0-9.\-\[\]:]{0,30}", fullmatch=True),
              st.integers(min_value=-5, max_value=10 ** 6), st.text(max_size=30)),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=20)


@given(robots_lines, st.binary(max_size=200))
@example(["User-agent: squall", "Crawl-delay: 1e999"], b"")
def test_robots_txt_never_crashes_and_answers_every_url(lines, junk):
    body = "\n".join(lines).encode("utf-8", "surrogatepass") + junk
    rules = parse_robots(body, ROBOTS)
    assert isinstance(rules, RobotsRules)
    delay = rules.crawl_delay_s
    assert delay is None or (isinstance(delay, float) and not math.isnan(delay) and delay >= 0)
    for path in ("/", "/a", "/%ZZ", "/\x00", "/" + "a" * 3000):
        assert rules.allowed("http://example.org" + path) in (True, False)


@given(urlish, st.one_of(st.none(), urlish))
@example("http://[::1", None)
@example("http://example.org:99999/", None)
@example("http://xn--a.example/", None)
@example("http://" + "a" * 64 + ".example/", None)
def test_a_url_is_canonical_and_idempotent_or_invalid_with_a_reason(url, base):
    try:
        out = canonicalize(url, NORMALIZER, base)
    except InvalidURL as exc:
        assert exc.reason in REASONS
        return
    assert canonicalize(out, NORMALIZER) == out


@given(st.binary(max_size=2000), st.sampled_from([None, "text/html", "text/html; charset=utf-16",
                                                  "text/html; charset=bogus", "text/html; charset=\x00"]),
       st.lists(st.tuples(st.sampled_from(["X-Robots-Tag", "Content-Type", "Link"]), st.text(max_size=40)), max_size=4))
@example(b"<base href='http://[::1'><a href='//a:99999/'>x</a>", None, [])
@example(b"<meta name=robots content='noindex,nofollow'>" + b"<a href=x>" * 50, "text/html", [])
def test_html_never_crashes_and_gives_canonical_outlinks(body, content_type, headers):
    result = parse_html(body, url="http://example.org/dir/page", headers=headers, content_type=content_type,
                        agent_token="squall")
    assert len(set(result.outlinks)) == len(result.outlinks)
    assert all(link.startswith(("http://", "https://")) for link in result.outlinks)
    assert not (result.nofollow and result.outlinks)
    assert result.text_length >= 0


@given(st.one_of(st.none(), st.text(max_size=40), st.from_regex(r"\s*[0-9]{1,500}\s*", fullmatch=True),
                 st.sampled_from(["Wed, 21 Oct 2015 07:28:00 GMT", "Sunday, 06-Nov-94 08:49:37 GMT",
                                  "Sun Nov  6 08:49:37 1994", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 0001 00:00:00 GMT"])))
@example("9" * 5000)
@example("1" + "0" * 400)
def test_retry_after_is_a_finite_time_not_before_now_or_none(value):
    until = parse_retry_after(value, NOW)
    assert until is None or (math.isfinite(until) and until >= NOW)


@given(st.dictionaries(st.sampled_from(["Cache-Control", "Expires", "Date", "cache-control"]),
                       st.one_of(st.text(max_size=40), st.from_regex(r"max-age=[0-9]{1,400}", fullmatch=True)),
                       max_size=3))
@example({"Cache-Control": "max-age=" + "9" * 400})
@example({"Expires": "Fri, 31 Dec 9999 23:59:59 GMT", "Date": "Mon, 01 Jan 0001 00:00:00 GMT"})
def test_robots_cache_ttl_is_bounded_for_any_headers(headers):
    ttl = cache_ttl_s(headers, NOW, ROBOTS)
    assert 0.0 <= ttl <= ROBOTS.ttl_s


def _decoders():
    return (StatusMessage.from_bytes, FetchMessage.from_bytes, SignalMessage.from_bytes)


@given(st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode()),
                 st.dictionaries(st.sampled_from(["url", "key", "status", "depth", "metadata", "attempt", "chain",
                                                  "handed_out_at_s", "fetch_id", "kind", "at_s", "delay_s",
                                                  "retry_until_s", "robots_crawl_delay_s", "seed", "priority"]),
                                 json_values, max_size=8).map(lambda d: json.dumps(d).encode())))
@example(b"[" * 100_000)
@example(b'{"url":"u","key":"k","depth":1e999}')
@example(b'{"key":"k","url":"u","fetch_id":"f","kind":"success","at_s":1,"robots_crawl_delay_s":1e999}')
@example(b'{"url":"http://a/","key":"a","chain":"abc"}')
def test_every_topic_message_decodes_or_fails_with_a_message_error(raw):
    for decode in _decoders():
        try:
            decode(raw)
        except MessageError as exc:
            assert str(exc)
