"""Canonical URL identity (squall.policy.urls): every rule as a row of a data table."""

from __future__ import annotations

from dataclasses import replace

import argparse
import random

import pytest

from squall.cli import url as url_cli
from squall.policy import urls
from squall.errors import InvalidURL
from squall.policy.reasons import Reason
from squall.settings import load_settings
from squall.policy.urls import CanonicalCache, NormalizerConfig, canonicalize, host_of, origin_of, robots_url
from tests.unit.settings_helper import from_settings

# The defaults file's normalizer with no query parameter removed (each test names what it removes).
NO_REMOVALS = replace(NormalizerConfig.from_settings(load_settings()), query_remove=())

SEED_002_REMOVE = ("utm_*", "fbclid", "gclid", "sid", "session_id", "PHPSESSID", "ref", "_ga", "mc_eid")
CONFIG = replace(NO_REMOVALS, query_remove=SEED_002_REMOVE)

CANONICAL = [
    # (rule, input, canonical)
    ("scheme is lower-cased", "HTTP://example.com/", "http://example.com/"),
    ("host is lower-cased", "http://WWW.Example.COM/", "http://www.example.com/"),
    ("path case is kept", "http://example.com/About/Us", "http://example.com/About/Us"),
    ("www is not stripped", "http://www.example.com/", "http://www.example.com/"),
    ("IDN host becomes punycode", "http://Bücher.example/", "http://xn--bcher-kva.example/"),
    ("IDNA 2008 keeps sharp s", "http://faß.de/", "http://xn--fa-hia.de/"),
    ("UTS 46 lower-cases before IDNA", "http://FAß.DE/", "http://xn--fa-hia.de/"),
    ("IDNA 2008 keeps final sigma", "http://βόλος.gr/", "http://xn--nxasmm1c.gr/"),
    ("UTS 46 maps full-width letters and dots", "http://ＥＸＡＭＰＬＥ。com/", "http://example.com/"),
    ("an escaped dot in the host is decoded", "http://example%2Ecom/", "http://example.com/"),
    ("escaped letters in the host are decoded", "http://%41.example/", "http://a.example/"),
    ("UTF-8 escapes in the host are decoded", "http://%E4%BE%8B.jp/", "http://xn--fsq.jp/"),
    ("userinfo is dropped from a link", "http://user:pw@example.com/a", "http://example.com/a"),
    ("userinfo without password is dropped", "http://user@example.com/", "http://example.com/"),
    ("empty userinfo is dropped", "http://@example.com/", "http://example.com/"),
    ("the last @ ends the userinfo", "http://a@b@example.com:8080/", "http://example.com:8080/"),
    ("an @ in the path is not userinfo", "http://example.com/@me?to=a@b", "http://example.com/@me?to=a@b"),
    ("punycode host is kept", "http://xn--bcher-kva.example/", "http://xn--bcher-kva.example/"),
    ("default http port is dropped", "http://example.com:80/a", "http://example.com/a"),
    ("default https port is dropped", "https://example.com:443/a", "https://example.com/a"),
    ("port 443 on http is kept", "http://example.com:443/a", "http://example.com:443/a"),
    ("other ports are kept", "http://example.com:8080/a", "http://example.com:8080/a"),
    ("trailing dot of the host is dropped", "http://example.com./a", "http://example.com/a"),
    ("IPv4 host is kept", "http://192.0.2.1:8080/", "http://192.0.2.1:8080/"),
    ("IPv6 host is kept in brackets", "http://[2001:db8::1]/x", "http://[2001:db8::1]/x"),
    ("IPv6 host is written in RFC 5952 form", "http://[2001:DB8:0:0::1]:80/", "http://[2001:db8::1]/"),
    ("single dot segments are removed", "http://example.com/a/./b", "http://example.com/a/b"),
    ("double dot segments are resolved", "http://example.com/a/b/../c", "http://example.com/a/c"),
    ("double dots above the root stop at the root", "http://example.com/../../a", "http://example.com/a"),
    ("a trailing double dot leaves a slash", "http://example.com/a/b/..", "http://example.com/a/"),
    ("encoded dot segments are resolved", "http://example.com/a/%2e%2E/b", "http://example.com/b"),
    ("escaped tilde is decoded", "http://example.com/%7euser", "http://example.com/~user"),
    ("escaped letters and digits are decoded", "http://example.com/%41%62%31", "http://example.com/Ab1"),
    ("escaped slash is kept upper-cased", "http://example.com/a%2fb", "http://example.com/a%2Fb"),
    ("lower-case hex is upper-cased", "http://example.com/%c3%a9", "http://example.com/%C3%A9"),
    ("escaped reserved characters stay escaped", "http://example.com/a%3Db%21", "http://example.com/a%3Db%21"),
    ("escapes in the query are normalized", "http://example.com/?q=%7e%2b%2f", "http://example.com/?q=~%2B%2F"),
    ("a stray percent becomes %25", "http://example.com/100%", "http://example.com/100%25"),
    ("a percent before one hex digit becomes %25", "http://example.com/a%2", "http://example.com/a%252"),
    ("a percent before non-hex becomes %25", "http://example.com/a%zz?q=%&r=5%", "http://example.com/a%25zz?q=%25&r=5%25"),
    ("an escaped percent stays escaped", "http://example.com/a%25b", "http://example.com/a%25b"),
    ("non-ASCII path is UTF-8 percent-encoded", "http://example.com/résumé", "http://example.com/r%C3%A9sum%C3%A9"),
    ("spaces in the path are encoded", "http://example.com/a b", "http://example.com/a%20b"),
    ("spaces in the query are encoded", "http://example.com/?q=a b", "http://example.com/?q=a%20b"),
    ("plus in the query is kept", "http://example.com/?q=a+b", "http://example.com/?q=a+b"),
    ("fragment is dropped", "http://example.com/a#section", "http://example.com/a"),
    ("empty fragment is dropped", "http://example.com/a#", "http://example.com/a"),
    ("empty path becomes slash", "http://example.com", "http://example.com/"),
    ("empty path before a query becomes slash", "http://example.com?a=1", "http://example.com/?a=1"),
    ("trailing slash is kept", "http://example.com/dir/", "http://example.com/dir/"),
    ("no trailing slash is added", "http://example.com/dir", "http://example.com/dir"),
    ("path parameters are kept", "http://example.com/a;jsessionid=1", "http://example.com/a;jsessionid=1"),
    ("utm_ wildcard parameters are removed", "http://example.com/?utm_source=x&utm_medium=y&utm_new=z&a=1",
     "http://example.com/?a=1"),
    ("session parameters are removed", "http://example.com/p?sid=1&PHPSESSID=2&session_id=3&id=7",
     "http://example.com/p?id=7"),
    ("click ids are removed", "http://example.com/?fbclid=a&gclid=b&_ga=c&mc_eid=d&ref=e", "http://example.com/"),
    ("removal needs the exact name", "http://example.com/?refresh=1&sidebar=2&utm=3",
     "http://example.com/?refresh=1&sidebar=2&utm=3"),
    ("removal matches an escaped name", "http://example.com/?utm%5Fsource=x&b=1", "http://example.com/?b=1"),
    ("removal is case-sensitive", "http://example.com/?SID=1", "http://example.com/?SID=1"),
    ("query order is kept", "http://example.com/?b=2&a=1&c=3", "http://example.com/?b=2&a=1&c=3"),
    ("repeated parameters are kept", "http://example.com/?a=1&a=2", "http://example.com/?a=1&a=2"),
    ("a name without value is kept as written", "http://example.com/?a&b=", "http://example.com/?a&b="),
    ("empty pairs are dropped", "http://example.com/?a=1&&b=2&", "http://example.com/?a=1&b=2"),
    ("an empty query loses its question mark", "http://example.com/a?", "http://example.com/a"),
    ("query case is kept", "http://example.com/?Q=Abc", "http://example.com/?Q=Abc"),
    ("surrounding whitespace is stripped", "  \thttp://example.com/a \n", "http://example.com/a"),
    ("embedded newlines and tabs vanish", "http://exa\nmple.com/a\tb", "http://example.com/ab"),
    ("backslashes are slashes in http URLs", "http://example.com\\a\\b", "http://example.com/a/b"),
    ("a backslash ends the host as in browsers", "http://evil.example\\@good.example/",
     "http://evil.example/@good.example/"),
]


@pytest.mark.parametrize(("rule", "url", "expected"), CANONICAL, ids=[row[0] for row in CANONICAL])
def test_canonicalize_applies_the_rule(rule: str, url: str, expected: str) -> None:
    assert canonicalize(url, CONFIG) == expected


@pytest.mark.parametrize(("rule", "url", "expected"), CANONICAL, ids=[row[0] for row in CANONICAL])
def test_canonicalizing_a_canonical_url_changes_nothing(rule: str, url: str, expected: str) -> None:
    assert canonicalize(expected, CONFIG) == expected


def test_query_sort_option_sorts_by_name_then_value_and_keeps_duplicates() -> None:
    config = replace(NO_REMOVALS, query_remove=SEED_002_REMOVE, query_sort=True)
    url = "http://example.com/?b=2&a=2&utm_source=x&a=1&c"
    assert canonicalize(url, config) == "http://example.com/?a=1&a=2&b=2&c"


def test_without_a_remove_list_every_parameter_is_kept() -> None:
    url = "http://example.com/?utm_source=x&sid=1"
    assert canonicalize(url, NO_REMOVALS) == url


def test_a_bare_star_removes_every_parameter() -> None:
    assert canonicalize("http://example.com/?a=1&b=2", replace(NO_REMOVALS, query_remove=("*",))) == "http://example.com/"


RELATIVE = [
    # (base, reference, canonical)
    ("http://example.com/a/b/c", "d", "http://example.com/a/b/d"),
    ("http://example.com/a/b/c", "../d?x=1#f", "http://example.com/a/d?x=1"),
    ("http://example.com/a/b/c", "/root", "http://example.com/root"),
    ("http://example.com/a/b/c", "?q=1", "http://example.com/a/b/c?q=1"),
    ("http://example.com/a/b/c", "//other.example/x", "http://other.example/x"),
    ("https://example.com/a/", "http://Other.example:80/", "http://other.example/"),
    ("http://example.com/a/", " page 2.html ", "http://example.com/a/page%202.html"),
    ("http://example.com/a?utm_source=x", "#top", "http://example.com/a"),
]


@pytest.mark.parametrize(("base", "reference", "expected"), RELATIVE)
def test_relative_references_are_resolved_against_the_base(base: str, reference: str, expected: str) -> None:
    assert canonicalize(reference, CONFIG, base=base) == expected


INVALID = [
    # (rule, input, reason)
    ("javascript links are refused", "javascript:alert(1)", Reason.URL_SCHEME),
    ("mailto links are refused", "mailto:someone@example.com", Reason.URL_SCHEME),
    ("ftp is refused when not configured", "ftp://example.com/file", Reason.URL_SCHEME),
    ("data URLs are refused", "data:text/plain,hi", Reason.URL_SCHEME),
    ("a relative URL without base is malformed", "/a/b", Reason.URL_MALFORMED),
    ("a scheme-relative URL without base is malformed", "//example.com/a", Reason.URL_MALFORMED),
    ("an empty string is malformed", "", Reason.URL_MALFORMED),
    ("whitespace only is malformed", "   ", Reason.URL_MALFORMED),
    ("a URL without host is refused", "http://", Reason.URL_HOST),
    ("a URL with only a path is refused", "http:/a/b", Reason.URL_HOST),
    ("a host with a space is refused", "http://exa mple.com/", Reason.URL_HOST),
    ("an empty label is refused", "http://a..example.com/", Reason.URL_HOST),
    ("an escaped slash in the host is refused", "http://good.example%2Fevil.example/", Reason.URL_HOST),
    ("an escaped @ in the host is refused", "http://evil.example%40good.example/", Reason.URL_HOST),
    ("escapes that are not UTF-8 in the host are refused", "http://%FF.example/", Reason.URL_HOST),
    ("an escaped NUL in the host is refused", "http://a%00.example/", Reason.URL_HOST),
    ("a host IDNA 2008 disallows is refused", "http://\u2603.example/", Reason.URL_HOST),
    ("an overlong label is refused", "http://" + "a" * 64 + ".example/", Reason.URL_HOST),
    ("a bad IPv4 address is refused", "http://192.0.2.256/", Reason.URL_HOST),
    ("a bad IPv6 address is refused", "http://[2001:db8::zz]/", Reason.URL_MALFORMED),
    ("an IPv6 zone id is refused", "http://[fe80::1%25eth0]/", Reason.URL_HOST),
    ("a port out of range is malformed", "http://example.com:70000/", Reason.URL_MALFORMED),
    ("a non-numeric port is malformed", "http://example.com:http/", Reason.URL_MALFORMED),
    ("a URL over max length is refused", "http://example.com/" + "a" * 2030, Reason.URL_TOO_LONG),
]


@pytest.mark.parametrize(("rule", "url", "reason"), INVALID, ids=[row[0] for row in INVALID])
def test_invalid_urls_are_refused_with_a_reason(rule: str, url: str, reason: Reason) -> None:
    with pytest.raises(InvalidURL) as caught:
        canonicalize(url, CONFIG)
    assert caught.value.reason is reason  # the enum member itself, whose value travels on the wire
    assert caught.value.reason.is_url


@pytest.mark.parametrize("url", ["http://user:pw@example.com/", "http://user@example.com/", "http://@example.com/"])
def test_a_seed_with_userinfo_is_refused_with_a_clear_message(url: str) -> None:
    with pytest.raises(InvalidURL) as caught:
        canonicalize(url, CONFIG, seed=True)
    assert caught.value.reason == Reason.URL_USERINFO
    assert "seed" in caught.value.detail and "user:password@" in caught.value.detail


def test_a_seed_without_userinfo_is_canonicalized_as_any_url() -> None:
    assert canonicalize("http://faß.de/a%", CONFIG, seed=True) == "http://xn--fa-hia.de/a%25"


def test_max_length_counts_the_canonical_url_not_the_input() -> None:
    config = replace(NO_REMOVALS, query_remove=("utm_*",), max_length=30)
    assert canonicalize("http://example.com/?utm_source=" + "x" * 100, config) == "http://example.com/"
    assert canonicalize("http://example.com/" + "a" * 11, config) == "http://example.com/" + "a" * 11
    with pytest.raises(InvalidURL):
        canonicalize("http://example.com/" + "a" * 12, config)


def test_ftp_is_accepted_when_configured() -> None:
    config = replace(NO_REMOVALS, schemes=("http", "https", "ftp"))
    assert canonicalize("FTP://Example.com:21/f", config) == "ftp://example.com/f"


def test_a_non_string_url_is_malformed() -> None:
    with pytest.raises(InvalidURL) as caught:
        canonicalize(b"http://example.com/", CONFIG)  # type: ignore[arg-type]
    assert caught.value.reason == Reason.URL_MALFORMED


def test_random_garbage_never_raises_anything_but_invalid_url() -> None:
    rng = random.Random(20240501)
    alphabet = "htps:/[]@%?#&=.\\ \t\nаé€\x00\x7f-_~0123456789abcdefxyzABC:;+!*'()"
    for _ in range(3000):
        if rng.random() < 0.5:
            text = rng.randbytes(rng.randint(0, 60)).decode("utf-8", errors="replace")
        else:
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        prefix = rng.choice(["", "http://", "https://", "http://[", "http://a@", "HTTP:"])
        base = rng.choice([None, "http://example.com/a/", "http://[::1]/", "garbage"])
        try:
            result = canonicalize(prefix + text, CONFIG, base=base)
        except InvalidURL:
            continue
        assert canonicalize(result, CONFIG) == result, (prefix + text, base)


def test_host_of_gives_the_host_without_port() -> None:
    assert host_of("http://example.com:8080/a") == "example.com"
    assert host_of("http://[2001:db8::1]:8080/") == "2001:db8::1"


def test_host_of_a_url_without_host_is_refused() -> None:
    with pytest.raises(InvalidURL):
        host_of("mailto:a@example.com")


ORIGINS = [
    ("http://example.com/a/b?c", "http://example.com", "http://example.com/robots.txt"),
    ("HTTPS://Example.com:443/x", "https://example.com", "https://example.com/robots.txt"),
    ("http://example.com:8080/x", "http://example.com:8080", "http://example.com:8080/robots.txt"),
    ("http://[::1]:8080/x", "http://[::1]:8080", "http://[::1]:8080/robots.txt"),
]


@pytest.mark.parametrize(("url", "origin", "robots"), ORIGINS)
def test_origin_and_robots_url_keep_scheme_host_and_port(url: str, origin: str, robots: str) -> None:
    assert origin_of(url) == origin
    assert robots_url(url) == robots


def test_origin_of_a_url_without_host_is_refused() -> None:
    with pytest.raises(InvalidURL) as caught:
        origin_of("/relative/path")
    assert caught.value.reason == Reason.URL_HOST


def test_config_is_read_from_the_settings_keys() -> None:
    settings = {
        "urlfilters.schemes": ["HTTP", "https"],
        "urlfilters.query.remove": ["utm_*", "sid"],
        "urlnormalizer.query.sort": True,
        "urlfilters.max.length": 100,
    }
    assert from_settings(NormalizerConfig, settings) == replace(NO_REMOVALS,
        schemes=("http", "https"), query_remove=("utm_*", "sid"), query_sort=True, max_length=100)


def _run_cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    import squall.settings

    settings = {"urlfilters.schemes": ["http", "https"], "urlfilters.query.remove": list(SEED_002_REMOVE),
                "urlnormalizer.query.sort": False, "urlfilters.max.length": 2048,
                "urlfilters.max.repeated.segments": 3, "urlfilters.max.repeated.runs": 2,
                "urlfilters.max.host.segments": 1, "urlfilters.max.query.param.copies": 2}
    loaded = squall.settings.load_settings(overrides=settings)
    monkeypatch.setattr(squall.settings, "load_settings", lambda path=None, overrides=None: loaded)
    parser = argparse.ArgumentParser()
    parser.add_argument("--conf")
    url_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(list(argv))
    return args.func(args)


def test_cli_prints_one_canonical_url_per_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_cli(monkeypatch, "url", "normalize", "HTTP://Example.com:80/a?utm_source=x", "http://example.com")
    assert code == 0
    assert capsys.readouterr().out == "http://example.com/a\nhttp://example.com/\n"


def test_cli_reports_invalid_urls_and_exits_1(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_cli(monkeypatch, "url", "normalize", "http://example.com/", "mailto:a@b.example")
    assert code == 1
    assert capsys.readouterr().out == "http://example.com/\ninvalid: url.scheme\n"


def test_cli_shows_idna_2008_stray_percent_escaped_hosts_and_dropped_userinfo(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_cli(monkeypatch, "url", "normalize", "http://faß.de/100%", "http://example%2Ecom/",
                    "http://user:pw@example.com/a")
    assert code == 0
    assert capsys.readouterr().out == "http://xn--fa-hia.de/100%25\nhttp://example.com/\nhttp://example.com/a\n"


def test_cli_refuses_userinfo_in_a_seed_with_the_reason_and_why(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_cli(monkeypatch, "url", "normalize", "--seed", "http://user:pw@example.com/")
    assert code == 1
    out = capsys.readouterr().out
    assert out.startswith("invalid: url.userinfo (a seed must not carry user:password@")


def test_cli_with_traps_judges_each_canonical_url_by_the_trap_guards(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    code = _run_cli(monkeypatch, "url", "normalize", "--traps", "http://example.com/a/b/a/b",
                    "http://example.com/a/b/c/d/a/b/c/d/a/b/c/d", "http://example.com/x/shop.example/x/shop.example/",
                    "http://example.com/?p=1&p=1&p=1")
    assert code == 1
    assert capsys.readouterr().out.splitlines() == [
        "http://example.com/a/b/a/b\tadmitted",
        "http://example.com/a/b/c/d/a/b/c/d/a/b/c/d\trefused: trap.repeated_run",
        "http://example.com/x/shop.example/x/shop.example/\trefused: trap.host_segment",
        "http://example.com/?p=1&p=1&p=1\trefused: trap.repeated_query_param",
    ]


# ---------------------------------------------------------------- CanonicalCache

def test_the_canonical_cache_gives_what_canonicalize_gives_and_memoizes_the_canonical_form_too():
    config = NO_REMOVALS
    cache = CanonicalCache(config)
    found = "HTTP://Example.COM:80/a/./b/../c#frag"
    assert cache(found) == canonicalize(found, config) == "http://example.com/a/c"
    assert len(cache) == 2  # the URL as found and the canonical URL itself
    assert cache("http://example.com/a/c") == "http://example.com/a/c"
    assert len(cache) == 2


def test_the_canonical_cache_raises_for_invalid_urls_every_time_and_stores_nothing():
    cache = CanonicalCache(NO_REMOVALS)
    for _ in range(2):
        with pytest.raises(InvalidURL) as exc:
            cache("mailto:someone@example.com")
        assert exc.value.reason == "url.scheme"
    assert len(cache) == 0


def test_the_canonical_cache_is_bounded_and_evicts_the_oldest_entries_first():
    cache = CanonicalCache(NO_REMOVALS, max_entries=4)
    for i in range(10):
        assert cache(f"http://example.com/{i}") == f"http://example.com/{i}"
        assert len(cache) <= 4
    assert cache("http://example.com/9") == "http://example.com/9"


def test_a_canonical_cache_needs_room_for_two_entries():
    with pytest.raises(ValueError):
        CanonicalCache(NO_REMOVALS, max_entries=1)

