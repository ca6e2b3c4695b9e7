"""Tests of squall.policy.robots_rules: product token and config, RFC 9309 Allow/Disallow matching, bytes in, the Crawl-delay cap."""

from __future__ import annotations

import pytest

from squall.errors import ConfigError
from squall.policy.robots_rules import (
    CrawlDelayDecision,
    RobotsConfig,
    RobotsRules,
    effective_crawl_delay,
    parse_robots,
    product_token,
)
from tests.unit.robots_helper import CONFIG, SETTINGS, config, rules_for

# ---------------------------------------------------------------- product token and config


@pytest.mark.parametrize(
    "agent_name, token",
    [
        ("FooBot/2.1", "foobot"),
        ("foobot", "foobot"),
        ("Foo_Bot-X (+https://example.com)", "foo_bot-x"),
        ("  squall/0.1", "squall"),
        ("Mozilla/5.0 (compatible; FooBot/1.0)", "mozilla"),
        ("bot2", "bot"),
        ("/1.0", ""),
        ("", ""),
        ("Ünicode", ""),
    ],
)
def test_product_token_is_the_leading_run_of_letters_underscores_and_hyphens(agent_name, token):
    assert product_token(agent_name) == token


def test_config_takes_the_agent_names_product_token_when_no_robots_agents_are_set():
    assert CONFIG.agents == ("foobot",)
    assert CONFIG.ttl_s == 86_400.0 and CONFIG.max_crawl_delay_s == 30.0


def test_config_normalizes_configured_robots_agents_to_product_tokens_in_order():
    cfg = RobotsConfig.from_settings(
        SETTINGS.with_overrides({"http.robots.agents": ["BarBot/1.0", "FooBot", "barbot"]})
    )
    assert cfg.agents == ("barbot", "foobot")


@pytest.mark.parametrize(
    "changes, key",
    [
        ({"http.robots.agents": ["/1.0"]}, "http.robots.agents"),
        ({"http.agent.name": "42"}, "http.agent.name"),
        ({"http.robots.cache.ttl.secs": 90_000}, "http.robots.cache.ttl.secs"),
        ({"http.robots.cache.ttl.secs": 0}, "http.robots.cache.ttl.secs"),
        ({"http.robots.retry.max.secs": 10.0}, "http.robots.retry.max.secs"),
        ({"fetcher.max.crawl.delay": -1.0}, "fetcher.max.crawl.delay"),
    ],
)
def test_config_rejects_bad_values_naming_the_key(changes, key):
    with pytest.raises(ConfigError) as err:  # squall.settings.rules checks them at load
        SETTINGS.with_overrides(changes)
    assert err.value.key == key


# ---------------------------------------------------------------- Allow / Disallow matching (RFC 9309 §2.2.2)

MATCHING_CASES = [
    # (robots.txt rule lines, url, allowed)
    ("Disallow: /private", "https://example.com/private/page", False),
    ("Disallow: /private", "https://example.com/public", True),
    ("Disallow: /", "https://example.com/", False),
    ("Disallow:", "https://example.com/anything", True),
    # longest match wins
    ("Disallow: /shop\nAllow: /shop/public", "/shop/public/item", True),
    ("Allow: /shop\nDisallow: /shop/cart", "/shop/cart/1", False),
    # equally long Allow and Disallow: Allow wins
    ("Disallow: /page\nAllow: /page", "/page", True),
    ("Allow: /page\nDisallow: /page", "/page", True),
    # * matches any sequence, $ anchors the end
    ("Disallow: /*.pdf$", "/docs/report.pdf", False),
    ("Disallow: /*.pdf$", "/docs/report.pdf?download=1", True),
    ("Disallow: /*/secret", "/a/b/secret/x", False),
    ("Disallow: /exact$", "/exact", False),
    ("Disallow: /exact$", "/exact/more", True),
    ("Disallow: /search?q=*", "/search?q=cats", False),
    ("Disallow: /search?q=*", "/search", True),
    # percent-encoding (RFC 9309 §2.2.2 table)
    ("Disallow: /foo/bar?baz=quz", "/foo/bar?baz=quz", False),
    ("Disallow: /foo/bar/\u30c4", "/foo/bar/%E3%83%84", False),
    ("Disallow: /foo/bar/%E3%83%84", "/foo/bar/\u30c4", False),
    ("Disallow: /foo/bar/%62%61%7A", "/foo/bar/%62%61%7A", False),
    # matching is case-sensitive for paths
    ("Disallow: /Admin", "/admin", True),
    # /robots.txt itself is always allowed (RFC 9309 §2.2.2)
    ("Disallow: /", "https://example.com/robots.txt", True),
]


@pytest.mark.parametrize("rule_lines, url, allowed", MATCHING_CASES)
def test_allow_and_disallow_rules_match_paths_as_rfc_9309_says(rule_lines, url, allowed):
    assert rules_for(f"User-agent: *\n{rule_lines}\n").allowed(url) is allowed


# ---------------------------------------------------------------- bytes in: BOM, size cap, garbage


def test_a_leading_utf8_bom_is_stripped():
    rules = parse_robots(b"\xef\xbb\xbfUser-agent: *\nDisallow: /private\n", CONFIG)
    assert not rules.allowed("/private")


def test_a_disallow_after_the_size_cap_is_ignored():
    head = b"User-agent: *\nDisallow: /early\n"
    body = head + b"# " + b"x" * 100 + b"\nDisallow: /late\n"
    rules = parse_robots(body, config(content_limit=len(head) + 50))
    assert not rules.allowed("/early") and rules.allowed("/late")
    assert "/late" not in (rules.text or "")


def test_a_rule_cut_by_the_size_cap_is_dropped_rather_than_shortened():
    body = b"User-agent: *\nDisallow: /admin\n"
    rules = parse_robots(body, config(content_limit=len(b"User-agent: *\nDisallow: /")))
    assert rules.allowed("/public")


@pytest.mark.parametrize(
    "body",
    [
        bytes(range(256)) * 50,
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\xff" * 1000,
        b"User-agent: *\nDisallow: /caf\xe9\n",
        b"\x00\x00\x00",
        b"",
        b"User-agent: *\nCrawl-delay: soon\nCrawl-delay: -3\nDisallow\n:::\n",
        "User-agent: *\nDisallow: /\u00e9t\u00e9\n".encode("utf-16"),
    ],
)
def test_garbage_and_binary_bodies_never_raise(body):
    rules = parse_robots(body, CONFIG)
    assert isinstance(rules.allowed("https://example.com/a"), bool)


def test_a_malformed_crawl_delay_is_ignored():
    assert rules_for("User-agent: *\nCrawl-delay: soon\n").crawl_delay_s is None


def test_allow_all_and_disallow_all_constructors():
    assert RobotsRules.allow_all().allowed("/x") and RobotsRules.allow_all().crawl_delay_s is None
    assert not RobotsRules.disallow_all().allowed("/x")


# ---------------------------------------------------------------- Crawl-delay at the fetcher (StormCrawler's CrawlDelayPolicy)

CRAWL_DELAY_CASES = [
    # (robots delay, force, decision)
    (None, False, CrawlDelayDecision(delay_s=None)),
    (5.0, False, CrawlDelayDecision(delay_s=5.0)),
    (0.5, False, CrawlDelayDecision(delay_s=0.5)),
    (30.0, False, CrawlDelayDecision(delay_s=30.0)),
    (30.0, True, CrawlDelayDecision(delay_s=30.0)),
    (30.2, False, CrawlDelayDecision(delay_s=None, too_long=True)),
    (30.2, True, CrawlDelayDecision(delay_s=30.0, forward_s=31)),
    (120.0, True, CrawlDelayDecision(delay_s=30.0, forward_s=120)),
    (120.0, False, CrawlDelayDecision(delay_s=None, too_long=True)),
]


@pytest.mark.parametrize("robots_delay_s, force, decision", CRAWL_DELAY_CASES)
def test_crawl_delay_is_honoured_up_to_the_cap_then_refused_or_capped_and_forwarded(robots_delay_s, force, decision):
    assert effective_crawl_delay(robots_delay_s, config(max_crawl_delay_force=force)) == decision
