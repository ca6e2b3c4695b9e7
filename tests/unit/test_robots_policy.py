"""Tests of squall.policy.robots_rules: RFC 9309 parsing and status rules, RFC 9309 §2.4 caching, Crawl-delay."""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

import pytest

from squall.errors import ConfigError, MessageError
from squall.settings import load_settings
from squall.cli.robots import add_parser
from squall.policy.robots_rules import CrawlDelayDecision, RobotsConfig, RobotsKind, RobotsRules, effective_crawl_delay, parse_robots, product_token
from squall.policy.robots_status import RobotsCache, RobotsEntry, RobotsFetchOutcome, cache_ttl_s, conditional_headers, decide

NOW_S = 1_700_000_000.0  # fake clock: 2023-11-14T22:13:20Z
DAY_S = 86_400.0

SETTINGS = load_settings(overrides={
    "http.agent.name": "FooBot",
    "http.robots.agents": [],
    "http.robots.content.limit": 512_000,
    "http.robots.403.allow": True,
    "http.robots.5xx.allow": False,
    "http.robots.cache.ttl.secs": 86_400,
    "http.robots.refresh.ahead.secs": 600,
    "http.robots.retry.base.secs": 60.0,
    "http.robots.retry.max.secs": 3600.0,
    "http.robots.unreachable.grace.secs": 2_592_000,
    "fetcher.max.crawl.delay": 30.0,
    "fetcher.max.crawl.delay.force": False,
})
CONFIG = RobotsConfig.from_settings(SETTINGS)


def config(**changes) -> RobotsConfig:
    return replace(CONFIG, **changes)


def rules_for(text: str, *agents: str) -> RobotsRules:
    return RobotsRules.from_text(text, agents or CONFIG.agents)


# ---------------------------------------------------------------- product token and config

@pytest.mark.parametrize("agent_name, token", [
    ("FooBot/2.1", "foobot"),
    ("foobot", "foobot"),
    ("Foo_Bot-X (+https://example.com)", "foo_bot-x"),
    ("  squall/0.1", "squall"),
    ("Mozilla/5.0 (compatible; FooBot/1.0)", "mozilla"),
    ("bot2", "bot"),
    ("/1.0", ""),
    ("", ""),
    ("Ünicode", ""),
])
def test_product_token_is_the_leading_run_of_letters_underscores_and_hyphens(agent_name, token):
    assert product_token(agent_name) == token


def test_config_takes_the_agent_names_product_token_when_no_robots_agents_are_set():
    assert CONFIG.agents == ("foobot",)
    assert CONFIG.ttl_s == 86_400.0 and CONFIG.max_crawl_delay_s == 30.0


def test_config_normalizes_configured_robots_agents_to_product_tokens_in_order():
    cfg = RobotsConfig.from_settings(SETTINGS.with_overrides({"http.robots.agents": ["BarBot/1.0", "FooBot", "barbot"]}))
    assert cfg.agents == ("barbot", "foobot")


@pytest.mark.parametrize("changes, key", [
    ({"http.robots.agents": ["/1.0"]}, "http.robots.agents"),
    ({"http.agent.name": "42"}, "http.agent.name"),
    ({"http.robots.cache.ttl.secs": 90_000}, "http.robots.cache.ttl.secs"),
    ({"http.robots.cache.ttl.secs": 0}, "http.robots.cache.ttl.secs"),
    ({"http.robots.retry.max.secs": 10.0}, "http.robots.retry.max.secs"),
    ({"fetcher.max.crawl.delay": -1.0}, "fetcher.max.crawl.delay"),
])
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


# ---------------------------------------------------------------- group selection (RFC 9309 §2.2.1)

GROUPS = """\
User-agent: *
Disallow: /star
Crawl-delay: 1

User-agent: FooBot
Disallow: /foobot-only
Crawl-delay: 5

User-agent: foo
Disallow: /foo-only
Crawl-delay: 7
"""

GROUP_CASES = [
    # (agents, url, allowed, crawl delay)
    (("foobot",), "/foobot-only", False, 5.0),
    (("foobot",), "/foo-only", True, 5.0),          # group `foo` must not apply to `foobot`
    (("foobot",), "/star", True, 5.0),              # a specific group replaces `*` entirely
    (("foo",), "/foo-only", False, 7.0),
    (("foo",), "/foobot-only", True, 7.0),          # group `foobot` must not apply to `foo`
    (("FOOBOT",), "/foobot-only", False, 5.0),      # case-insensitive
    (("fo",), "/star", False, 1.0),                 # no prefix match: falls back to `*`
    (("foobotx",), "/star", False, 1.0),
    (("barbot", "foo"), "/foo-only", False, 7.0),   # first configured agent whose group exists
    (("foo", "foobot"), "/foo-only", False, 7.0),
]


@pytest.mark.parametrize("agents, url, allowed, delay", GROUP_CASES)
def test_the_group_of_the_product_token_applies_else_the_star_group(agents, url, allowed, delay):
    rules = rules_for(GROUPS, *agents)
    assert rules.allowed(url) is allowed
    assert rules.crawl_delay_s == delay


def test_a_group_named_only_by_a_longer_token_does_not_apply_to_a_shorter_agent():
    rules = rules_for("User-agent: foobot\nDisallow: /\n", "foo")
    assert rules.allowed("/x") and rules.matched_agent is None


def test_a_group_named_by_a_shorter_token_does_not_apply_to_a_longer_agent():
    rules = rules_for("User-agent: foo\nDisallow: /\n", "foobot")
    assert rules.allowed("/x") and rules.matched_agent is None


def test_a_user_agent_value_with_a_version_matches_by_its_product_token():
    rules = rules_for("User-agent: FooBot/1.0\nDisallow: /\n", "foobot")
    assert not rules.allowed("/x") and rules.matched_agent == "foobot"


def test_groups_naming_the_same_agent_are_merged():
    text = "User-agent: foobot\nDisallow: /a\n\nUser-agent: *\nDisallow: /\n\nUser-agent: FOOBOT\nDisallow: /b\n"
    rules = rules_for(text, "foobot")
    assert not rules.allowed("/a") and not rules.allowed("/b") and rules.allowed("/c")


def test_consecutive_user_agent_lines_share_one_group():
    rules = rules_for("User-agent: barbot\nUser-agent: foobot\nDisallow: /shared\n", "foobot")
    assert not rules.allowed("/shared")


def test_no_matching_group_and_no_star_group_allows_everything():
    rules = rules_for("User-agent: barbot\nDisallow: /\n", "foobot")
    assert rules.allowed("/anything") and rules.crawl_delay_s is None


def test_sitemap_lines_do_not_split_a_group():
    rules = rules_for("User-agent: foobot\nSitemap: https://example.com/s.xml\nDisallow: /x\n", "foobot")
    assert not rules.allowed("/x")


def test_rules_before_any_user_agent_line_are_ignored():
    assert rules_for("Disallow: /\nUser-agent: foobot\nDisallow: /x\n").allowed("/y")


# ---------------------------------------------------------------- group extent (RFC 9309 §2.2, reference parsers)
# Facts from RFC 9309 §2.2.1 and §5.1, Google's robotstxt tests (robots_test.cc: ID_LineSyntax_Groups,
# ID_GlobalGroups_Secondary) and crawler-commons' SimpleRobotRulesParserTest (the robots.txt RFP cases),
# written as this module's own data: only a User-agent line after a rule line starts a new group.

RFC_9309_2_2_1 = (
    "user-agent: ExampleBot\ndisallow: /foo\ndisallow: /bar\n\n"
    "user-agent: ExampleBot\ndisallow: /baz\n\n"
    "user-agent: *\ndisallow: /qux\n\n"
    "user-agent: BazBot\ndisallow: /baz\n"
)

RFC_9309_5_1 = (
    "User-Agent: *\nDisallow: *.gif$\nDisallow: /example/\nAllow: /publications/\n\n"
    "User-Agent: foobot\nDisallow:/\nAllow:/example/page.html\nAllow:/example/allowed.gif\n\n"
    "User-Agent: barbot\nUser-Agent: bazbot\nDisallow: /example/page.html\n\n"
    "User-Agent: quxbot\n\nEOF\n"
)

GOOGLE_GROUPS = (
    "allow: /foo/bar/\n\n"
    "user-agent: FooBot\ndisallow: /\nallow: /x/\n"
    "user-agent: BarBot\ndisallow: /\nallow: /y/\n\n\nallow: /w/\n"
    "user-agent: BazBot\n\n"
    "user-agent: FooBot\nallow: /z/\ndisallow: /\n"
)

RFP_EXAMPLE = (
    "# /robots.txt for http://www.fict.org/\n# comments to webmaster@fict.org\n\n"
    "User-agent: unhipbot\nDisallow: /\n\n"
    "User-agent: webcrawler\nUser-agent: excite\nDisallow:\n\n"
    "User-agent: *\nDisallow: /org/plans.html\nAllow: /org/\nAllow: /serv\nAllow: /~mak\nDisallow: /\n"
)

GLOBAL = "user-agent: *\nallow: /\nuser-agent: FooBot\ndisallow: /\n"
A_DELAY_B = "User-agent: a\nCrawl-delay: 1\nUser-agent: b\nDisallow: /x\n"
A_RULE_B = "User-agent: a\nDisallow: /y\nUser-agent: b\nDisallow: /x\n"
A_RULE_DELAY_B = "User-agent: a\nDisallow: /y\nCrawl-delay: 3\nUser-agent: b\nDisallow: /x\n"

EXTENT_CASES = [
    # (source, robots.txt, agent, url, allowed)
    ("rfc9309-2.2.1 merged groups", RFC_9309_2_2_1, "examplebot", "/foo", False),
    ("rfc9309-2.2.1 merged groups", RFC_9309_2_2_1, "examplebot", "/baz", False),
    ("rfc9309-2.2.1 merged groups", RFC_9309_2_2_1, "examplebot", "/qux", True),
    ("rfc9309-2.2.1 star group", RFC_9309_2_2_1, "otherbot", "/qux", False),
    ("rfc9309-2.2.1 star group", RFC_9309_2_2_1, "otherbot", "/foo", True),
    ("rfc9309-2.2.1 own group", RFC_9309_2_2_1, "bazbot", "/baz", False),
    ("rfc9309-2.2.1 own group", RFC_9309_2_2_1, "bazbot", "/qux", True),
    ("rfc9309-5.1 foobot", RFC_9309_5_1, "foobot", "/example/page.html", True),
    ("rfc9309-5.1 foobot", RFC_9309_5_1, "foobot", "/example/allowed.gif", True),
    ("rfc9309-5.1 foobot", RFC_9309_5_1, "foobot", "/example/other.html", False),
    ("rfc9309-5.1 foobot", RFC_9309_5_1, "foobot", "/publications/", False),
    ("rfc9309-5.1 two agents, one group", RFC_9309_5_1, "barbot", "/example/page.html", False),
    ("rfc9309-5.1 two agents, one group", RFC_9309_5_1, "bazbot", "/example/page.html", False),
    ("rfc9309-5.1 two agents, one group", RFC_9309_5_1, "bazbot", "/example/other.gif", True),
    ("rfc9309-5.1 an empty group allows all", RFC_9309_5_1, "quxbot", "/example/page.gif", True),
    ("rfc9309-5.1 star group", RFC_9309_5_1, "otherbot", "/example/page.html", False),
    ("rfc9309-5.1 star group", RFC_9309_5_1, "otherbot", "/a/image.gif", False),
    ("rfc9309-5.1 star group", RFC_9309_5_1, "otherbot", "/publications/a", True),
    ("google groups: merged FooBot", GOOGLE_GROUPS, "foobot", "/x/b", True),
    ("google groups: merged FooBot", GOOGLE_GROUPS, "foobot", "/z/d", True),
    ("google groups: merged FooBot", GOOGLE_GROUPS, "foobot", "/y/c", False),
    ("google groups: blank lines inside a group", GOOGLE_GROUPS, "barbot", "/w/a", True),
    ("google groups: blank lines inside a group", GOOGLE_GROUPS, "barbot", "/y/c", True),
    ("google groups: blank lines inside a group", GOOGLE_GROUPS, "barbot", "/z/d", False),
    ("google groups: blank line between agents", GOOGLE_GROUPS, "bazbot", "/z/d", True),
    ("google groups: rules before any agent", GOOGLE_GROUPS, "foobot", "/foo/bar/", False),
    ("google groups: rules before any agent", GOOGLE_GROUPS, "bazbot", "/foo/bar/", False),
    ("google global group", GLOBAL, "foobot", "/x", False),
    ("google global group", GLOBAL, "barbot", "/x", True),
    ("rfp unhipbot", RFP_EXAMPLE, "unhipbot", "/index.html", False),
    ("rfp webcrawler", RFP_EXAMPLE, "webcrawler", "/org/plans.html", True),
    ("rfp excite shares the group", RFP_EXAMPLE, "excite", "/org/plans.html", True),
    ("rfp unknown", RFP_EXAMPLE, "unknown", "/org/about.html", True),
    ("rfp unknown", RFP_EXAMPLE, "unknown", "/org/plans.html", False),
    ("rfp unknown", RFP_EXAMPLE, "unknown", "/~mak/mak.html", True),
    ("rfp unknown", RFP_EXAMPLE, "unknown", "/orgo.gif", False),
    # RFC 9309 §2.2.1 and crawler-commons: lines that are not rules do not end a run of User-agent lines
    ("crawl-delay between agents", A_DELAY_B, "a", "/x", False),
    ("crawl-delay between agents", A_DELAY_B, "b", "/x", False),
    ("unknown line between agents", "User-agent: a\nFoo: bar\nUser-agent: b\nDisallow: /x\n", "a", "/x", False),
    ("comment between agents", "User-agent: a\n# b follows\nUser-agent: b\nDisallow: /x\n", "a", "/x", False),
    ("blank line between agents", "User-agent: a\n\nUser-agent: b\nDisallow: /x\n", "a", "/x", False),
    ("request-rate between agents", "User-agent: a\nRequest-rate: 1/5\nUser-agent: b\nDisallow: /x\n", "a", "/x",
     False),
    ("a rule ends the run", A_RULE_B, "a", "/x", True),
    ("a rule ends the run", A_RULE_B, "b", "/y", True),
    ("an empty disallow is a rule", "User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /x\n", "a", "/x", True),
    ("crawl-delay after rules stays in its group", A_RULE_DELAY_B, "a", "/x", True),
]


@pytest.mark.parametrize("source, text, agent, url, allowed", EXTENT_CASES,
                         ids=[f"{c[0]}|{c[2]}|{c[3]}" for c in EXTENT_CASES])
def test_group_extent_follows_rfc_9309_and_the_reference_parsers(source, text, agent, url, allowed):
    assert rules_for(text, agent).allowed(url) is allowed


@pytest.mark.parametrize("text, agent, delay", [
    (A_DELAY_B, "b", 1.0),   # Crawl-delay between two User-agent lines
    (A_DELAY_B, "a", 1.0),
    (A_RULE_DELAY_B, "b", None),
    (A_RULE_DELAY_B, "a", 3.0),
])
def test_a_crawl_delay_belongs_to_every_agent_of_its_group(text, agent, delay):
    assert rules_for(text, agent).crawl_delay_s == delay


# ---------------------------------------------------------------- Crawl-delay per agent
# A Crawl-delay belongs to the User-agent lines directly above it (crawler-commons SimpleRobotRulesParser);
# the group extent of the rules stays RFC 9309's (a Crawl-delay does not end a run of User-agent lines).
# When the agent's token is in several such lists, or only in the merged group, the largest value wins.

PER_AGENT = (
    "User-agent: otherbot\nCrawl-delay: 0.3\n\n"
    "User-agent: squallbot\nCrawl-delay: 2\n\n"
    "User-agent: fastbot\nCrawl-delay: 0.6\n\n"
    "User-agent: *\nDisallow: /private/\n"
)
SEPARATE_GROUPS = (
    "User-agent: otherbot\nDisallow: /other/\nCrawl-delay: 5\n\n"
    "User-agent: squallbot\nDisallow: /mine/\n"
)


def html_page(robots: str, br: str = "<br>") -> str:
    """robots.txt as a misconfigured server sends it: an HTML page, a ``<br>`` at each line end."""
    body = "\n".join(f"{line}{br}" for line in robots.splitlines())
    return f"<!DOCTYPE html>\n<html><head><title>robots</title></head>\n<body>\n{body}\n</body></html>\n"


CRAWL_DELAY_AGENT_CASES = [
    # (name, robots.txt, agent, crawl delay, source, url, allowed)
    ("per-agent lists", PER_AGENT, "squallbot", 2.0, "agent", "/private/x", False),
    ("per-agent lists", PER_AGENT, "otherbot", 0.3, "agent", "/private/x", False),
    ("per-agent lists", PER_AGENT, "fastbot", 0.6, "agent", "/public", True),
    ("per-agent lists, wildcard last: the merged group's largest", PER_AGENT, "unknownbot", 2.0, "group",
     "/private/x", False),
    ("per-agent lists, one value each", "User-agent: a\nCrawl-delay: 9\nUser-agent: b\nCrawl-delay: 1\n"
     "Disallow: /x\n", "b", 1.0, "agent", "/x", False),
    ("wildcard with its own delay, last", "User-agent: squallbot\nCrawl-delay: 1\nUser-agent: *\nCrawl-delay: 4\n"
     "Disallow: /x\n", "squallbot", 1.0, "agent", "/x", False),
    ("wildcard with its own delay, last", "User-agent: squallbot\nCrawl-delay: 1\nUser-agent: *\nCrawl-delay: 4\n"
     "Disallow: /x\n", "otherbot", 4.0, "agent", "/x", False),
    ("token in two groups: the larger", "User-agent: squallbot\nDisallow: /a\nCrawl-delay: 1\n\n"
     "User-agent: *\nDisallow: /\n\nUser-agent: squallbot\nDisallow: /b\nCrawl-delay: 3\n", "squallbot", 3.0,
     "agent", "/b", False),
    ("token in two lists of one group: the larger", "User-agent: squallbot\nCrawl-delay: 4\nUser-agent: fastbot\n"
     "User-agent: squallbot\nCrawl-delay: 1.5\nDisallow: /x\n", "squallbot", 4.0, "agent", "/y", True),
    ("two values in one list: the larger", "User-agent: squallbot\nCrawl-delay: 5\nCrawl-delay: 2\n",
     "squallbot", 5.0, "agent", "/", True),
    ("an own delay beats a larger one of another list", "User-agent: squallbot\nCrawl-delay: 2\n"
     "User-agent: slowbot\nCrawl-delay: 8\nDisallow: /x\n", "squallbot", 2.0, "agent", "/x", False),
    ("one group's own, another group's shared: the larger", "User-agent: squallbot\nCrawl-delay: 1\n"
     "Disallow: /a\n\nUser-agent: slowbot\nCrawl-delay: 6\nUser-agent: squallbot\nDisallow: /b\n", "squallbot",
     6.0, "group", "/b", False),
    ("only in the merged group: the largest of it", "User-agent: a\nCrawl-delay: 3\nUser-agent: b\n"
     "Crawl-delay: 0.5\nUser-agent: squallbot\nDisallow: /x\n", "squallbot", 3.0, "group", "/x", False),
    ("several agents on the lines above one delay", "User-agent: a\nUser-agent: squallbot\nUser-agent: b\n"
     "Crawl-delay: 7\nDisallow: /x\n", "squallbot", 7.0, "agent", "/x", False),
    ("a delay after the rules is the group's agents'", "User-agent: squallbot\nDisallow: /x\nCrawl-delay: 2.5\n",
     "squallbot", 2.5, "agent", "/x", False),
    ("no delay for us, one for others in their own group", SEPARATE_GROUPS, "squallbot", None, None,
     "/mine/a", False),
    ("no delay for us, one for others in their own group", SEPARATE_GROUPS, "otherbot", 5.0, "agent",
     "/mine/a", True),
    ("no group for us: the wildcard's", SEPARATE_GROUPS + "\nUser-agent: *\nDisallow: /all/\nCrawl-delay: 1\n",
     "squallbot", None, None, "/all/a", True),
    ("no group for us: the wildcard's", SEPARATE_GROUPS + "\nUser-agent: *\nDisallow: /all/\nCrawl-delay: 1\n",
     "nobot", 1.0, "agent", "/all/a", False),
    ("no group for us, no wildcard: none", SEPARATE_GROUPS, "nobot", None, None, "/other/a", True),
    ("a wildcard without delay does not take another group's", SEPARATE_GROUPS + "User-agent: *\nDisallow: /all/\n",
     "nobot", None, None, "/all/a", False),
    ("HTML-wrapped per-agent lists", html_page(PER_AGENT), "squallbot", 2.0, "agent", "/private/x", False),
    ("HTML-wrapped per-agent lists", html_page(PER_AGENT), "otherbot", 0.3, "agent", "/public", True),
    ("HTML-wrapped, <br/>", html_page(PER_AGENT, "<br/>"), "fastbot", 0.6, "agent", "/private/x", False),
    ("HTML-wrapped, <BR />", html_page(PER_AGENT, "<BR />"), "squallbot", 2.0, "agent", "/private/x", False),
    ("HTML-wrapped on one line", html_page(PER_AGENT).replace("\n", ""), "squallbot", 2.0, "agent",
     "/private/x", False),
    ("HTML-wrapped, separate groups", html_page(SEPARATE_GROUPS), "squallbot", None, None, "/mine/a", False),
    ("HTML-wrapped, character references", "<html><body>User-agent: *<br>Disallow: /a?b=1&amp;c=2<br>"
     "Crawl-delay: 1<br></body></html>", "squallbot", 1.0, "agent", "/a?b=1&c=2", False),
    ("garbage values ignored", "User-agent: squallbot\nCrawl-delay: soon\nCrawl-delay: -3\nCrawl-delay: inf\n"
     "Crawl-delay: nan\nCrawl-delay: 1e400\nCrawl-delay: 2 seconds\nCrawl-delay:\nDisallow: /x\n",
     "squallbot", None, None, "/x", False),
    ("garbage lines around a delay", "squallbot says hello\n:::\nUser-agent: squallbot\n}{ <>\nFoo: bar\n"
     "Crawl-delay: 1.5\n\x00\x01\nDisallow: /x\n", "squallbot", 1.5, "agent", "/x", False),
    ("a garbage value ends the list: none of a's own", "User-agent: a\nCrawl-delay: soon\nUser-agent: squallbot\n"
     "Crawl-delay: 2\n", "a", 2.0, "group", "/", True),
    ("a garbage value ends the list: none of a's own", "User-agent: a\nCrawl-delay: soon\nUser-agent: squallbot\n"
     "Crawl-delay: 2\n", "squallbot", 2.0, "agent", "/", True),
    ("a delay before any User-agent line is nobody's", "Crawl-delay: 9\nUser-agent: squallbot\nDisallow: /x\n",
     "squallbot", None, None, "/x", False),
    ("crawl delay spelled with a space", "User-agent: squallbot\nCrawl delay: 3\n", "squallbot", 3.0, "agent",
     "/", True),
]


@pytest.mark.parametrize("name, text, agent, delay, source, url, allowed", CRAWL_DELAY_AGENT_CASES,
                         ids=[f"{c[0]}|{c[2]}" for c in CRAWL_DELAY_AGENT_CASES])
def test_a_crawl_delay_belongs_to_the_agents_above_it_and_the_largest_meant_for_us_wins(name, text, agent, delay,
                                                                                        source, url, allowed):
    rules = rules_for(text, agent)
    assert rules.crawl_delay_s == delay
    assert (rules.crawl_delay_source.value if rules.crawl_delay_source else None) == source
    assert rules.allowed(url) is allowed


def test_per_agent_crawl_delays_leave_the_rules_as_rfc_9309_groups_them():
    # the four User-agent runs are one group: /private/ is disallowed for each of them
    for agent in ("otherbot", "squallbot", "fastbot", "anybot"):
        assert not rules_for(PER_AGENT, agent).allowed("/private/a")


def test_a_plain_robots_txt_is_not_read_as_html():
    rules = rules_for("User-agent: *\nDisallow: /a<b>c\n", "squallbot")
    assert not rules.allowed("/a<b>c") and rules.allowed("/ac")


def test_an_html_page_without_user_agent_lines_allows_everything():
    rules = rules_for("<html><body><h1>Not Found</h1><p>Disallow: /</p></body></html>", "squallbot")
    assert rules.allowed("/x") and rules.matched_agent is None and rules.crawl_delay_s is None


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


@pytest.mark.parametrize("body", [
    bytes(range(256)) * 50,
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\xff" * 1000,
    b"User-agent: *\nDisallow: /caf\xe9\n",
    b"\x00\x00\x00",
    b"",
    b"User-agent: *\nCrawl-delay: soon\nCrawl-delay: -3\nDisallow\n:::\n",
    "User-agent: *\nDisallow: /\u00e9t\u00e9\n".encode("utf-16"),
])
def test_garbage_and_binary_bodies_never_raise(body):
    rules = parse_robots(body, CONFIG)
    assert isinstance(rules.allowed("https://example.com/a"), bool)


def test_a_malformed_crawl_delay_is_ignored():
    assert rules_for("User-agent: *\nCrawl-delay: soon\n").crawl_delay_s is None


def test_allow_all_and_disallow_all_constructors():
    assert RobotsRules.allow_all().allowed("/x") and RobotsRules.allow_all().crawl_delay_s is None
    assert not RobotsRules.disallow_all().allowed("/x")


# ---------------------------------------------------------------- fetch status decisions (RFC 9309 §2.3.1)

ROBOTS_BODY = b"User-agent: *\nDisallow: /private\n"


def outcome(status, body=b"", headers=None, redirects=0):
    return RobotsFetchOutcome(status=status, body=body, headers=headers or {}, redirects=redirects)


STATUS_CASES = [
    # (status, cfg changes, kind, /private allowed, /public allowed, blocks origin, permissive)
    (200, {}, "rules", False, True, False, False),
    (301, {}, "allow_all", True, True, False, False),        # still 3xx after 5 redirects: unavailable
    (308, {}, "allow_all", True, True, False, False),
    (401, {}, "allow_all", True, True, False, False),
    (403, {}, "allow_all", True, True, False, False),
    (403, {"allow_on_403": False}, "disallow_all", False, False, False, False),
    (401, {"allow_on_403": False}, "disallow_all", False, False, False, False),
    (404, {}, "allow_all", True, True, False, False),
    (410, {}, "allow_all", True, True, False, False),
    (429, {}, "disallow_all", False, False, True, False),
    (500, {}, "disallow_all", False, False, True, False),
    (503, {}, "disallow_all", False, False, True, False),
    (None, {}, "disallow_all", False, False, True, False),   # timeout / DNS / connection
    (503, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
    (None, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
    (429, {"allow_on_5xx": True}, "allow_all", True, True, False, True),
]


@pytest.mark.parametrize("status, changes, kind, private_ok, public_ok, blocks, permissive", STATUS_CASES)
def test_each_robots_status_leads_to_the_rfc_9309_decision(status, changes, kind, private_ok, public_ok,
                                                          blocks, permissive):
    cfg = config(**changes)
    entry = decide(outcome(status, ROBOTS_BODY, redirects=5 if status and 300 <= status < 400 else 0),
                   None, NOW_S, cfg)
    rules = entry.rules(cfg)
    assert entry.kind == kind
    assert rules.allowed("https://example.com/private/x") is private_ok
    assert rules.allowed("https://example.com/public") is public_ok
    assert entry.blocks_origin is blocks
    assert entry.permissive_fallback is permissive
    assert entry.http_status == status


def test_an_answered_fetch_resets_the_failure_state():
    failed = decide(outcome(503), None, NOW_S, CONFIG)
    entry = decide(outcome(200, ROBOTS_BODY), failed, NOW_S + 60, CONFIG)
    assert (entry.failures, entry.unreachable_since_s, entry.retry_at_s) == (0, None, None)
    assert entry.last_good_text == ROBOTS_BODY.decode() and entry.last_good_at_s == NOW_S + 60


def test_retry_back_off_doubles_per_consecutive_failure_and_is_capped():
    entry = None
    delays = []
    now_s = NOW_S
    for _ in range(9):
        entry = decide(outcome(503), entry, now_s, CONFIG)
        delays.append(entry.retry_at_s - now_s)
        now_s = entry.retry_at_s
    assert delays == [60, 120, 240, 480, 960, 1920, 3600, 3600, 3600]
    assert entry.failures == 9 and entry.unreachable_since_s == NOW_S


def test_an_unreachable_entry_is_refreshed_when_its_retry_is_due():
    entry = decide(outcome(None), None, NOW_S, CONFIG)
    assert not entry.needs_refresh(NOW_S + 59, CONFIG)
    assert entry.needs_refresh(NOW_S + 60, CONFIG)
    assert entry.is_fresh(NOW_S + 59) and not entry.is_fresh(NOW_S + 60)


def test_a_still_fresh_cached_copy_is_kept_while_a_refresh_fails():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = decide(outcome(503), good, good.expires_at_s - 300, CONFIG)
    assert entry.kind == "rules" and not entry.blocks_origin
    assert entry.expires_at_s == good.expires_at_s and entry.failures == 1
    assert entry.retry_at_s == good.expires_at_s - 300 + 60


def test_unreachable_after_the_cached_copy_expires_means_complete_disallow():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = decide(outcome(500), good, good.expires_at_s + 1, CONFIG)
    assert entry.kind == "disallow_all" and entry.blocks_origin
    assert entry.last_good_text == ROBOTS_BODY.decode()


def _unreachable_for(duration_s: float, first: RobotsEntry | None) -> RobotsEntry:
    """Fail at NOW_S + 1 day (after ``first`` expired), then again ``duration_s`` later."""
    start_s = NOW_S + DAY_S + 1
    entry = decide(outcome(503), first, start_s, CONFIG)
    return decide(outcome(503), entry, start_s + duration_s, CONFIG)


def test_the_last_good_copy_is_used_after_30_days_unreachable():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = _unreachable_for(30 * DAY_S + 1, good)
    assert entry.kind == "rules" and not entry.blocks_origin and not entry.permissive_fallback
    assert not entry.rules(CONFIG).allowed("/private") and entry.rules(CONFIG).allowed("/public")


def test_within_30_days_unreachable_the_origin_stays_disallowed():
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    entry = _unreachable_for(30 * DAY_S - 1, good)
    assert entry.kind == "disallow_all" and entry.blocks_origin


def test_without_a_good_copy_the_origin_stays_disallowed_after_30_days():
    entry = _unreachable_for(40 * DAY_S, None)
    assert entry.kind == "disallow_all" and entry.blocks_origin


def test_a_404_is_a_good_copy_that_allows_everything_after_30_days():
    gone = decide(outcome(404), None, NOW_S, CONFIG)
    entry = _unreachable_for(31 * DAY_S, gone)
    assert entry.kind == "rules" and entry.rules(CONFIG).allowed("/private")


def test_the_permissive_5xx_opt_in_prefers_the_last_good_copy_over_allow_all():
    cfg = config(allow_on_5xx=True)
    good = decide(outcome(200, ROBOTS_BODY), None, NOW_S, cfg)
    entry = decide(outcome(503), good, NOW_S + DAY_S + 1, cfg)
    assert entry.permissive_fallback and not entry.blocks_origin
    assert not entry.rules(cfg).allowed("/private") and entry.rules(cfg).allowed("/public")


# ---------------------------------------------------------------- cache lifetime (RFC 9309 §2.4)

TTL_CASES = [
    ({}, 86_400),
    ({"Cache-Control": "public, max-age=3600"}, 3600),
    ({"cache-control": "max-age=0"}, 0),
    ({"Cache-Control": "max-age=604800"}, 86_400),                                   # capped at 24 h
    ({"Expires": "Tue, 14 Nov 2023 23:13:20 GMT"}, 3600),                            # from now
    ({"Expires": "Wed, 15 Nov 2023 00:00:00 GMT", "Date": "Tue, 14 Nov 2023 22:00:00 GMT"}, 7200),
    ({"Expires": "Fri, 01 Dec 2023 00:00:00 GMT"}, 86_400),                          # capped at 24 h
    ({"Expires": "Mon, 13 Nov 2023 00:00:00 GMT"}, 0),                               # already past
    ({"Expires": "0"}, 86_400),                                                      # unparseable: default
    ({"Cache-Control": "max-age=60", "Expires": "Fri, 01 Dec 2023 00:00:00 GMT"}, 60),  # max-age wins
    ({"Cache-Control": "no-cache"}, 86_400),
]


@pytest.mark.parametrize("headers, ttl_s", TTL_CASES)
def test_cache_lifetime_comes_from_the_headers_and_never_exceeds_24_hours(headers, ttl_s):
    assert cache_ttl_s(headers, NOW_S, CONFIG) == ttl_s
    entry = decide(outcome(200, ROBOTS_BODY, headers), None, NOW_S, CONFIG)
    assert entry.expires_at_s == NOW_S + ttl_s


def test_a_404_is_cached_with_the_same_lifetime_rules():
    entry = decide(outcome(404, headers={"Cache-Control": "max-age=120"}), None, NOW_S, CONFIG)
    assert entry.expires_at_s == NOW_S + 120


@pytest.mark.parametrize("offset_s, due", [
    (0, False), (DAY_S - 601, False), (DAY_S - 600, True), (DAY_S - 1, True), (DAY_S + 5, True),
])
def test_a_refresh_is_due_from_refresh_ahead_seconds_before_expiry(offset_s, due):
    entry = decide(outcome(200, ROBOTS_BODY), None, NOW_S, CONFIG)
    assert entry.needs_refresh(NOW_S + offset_s, CONFIG) is due
    assert entry.is_fresh(NOW_S + offset_s) is (offset_s < DAY_S)


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
def test_crawl_delay_is_honoured_up_to_the_cap_then_refused_or_capped_and_forwarded(robots_delay_s, force,
                                                                                    decision):
    assert effective_crawl_delay(robots_delay_s, config(max_crawl_delay_force=force)) == decision


# ---------------------------------------------------------------- serialization

@pytest.mark.parametrize("status, previous_status", [(200, None), (404, None), (503, 200), (None, None), (403, None)])
def test_entries_survive_a_json_round_trip(status, previous_status):
    previous = decide(outcome(previous_status, ROBOTS_BODY), None, NOW_S - DAY_S * 2, CONFIG) \
        if previous_status else None
    entry = decide(outcome(status, ROBOTS_BODY), previous, NOW_S, CONFIG)
    stored = entry.to_dict()
    assert type(stored["kind"]) is str and stored["kind"] == entry.kind.value  # the table holds the value
    again = RobotsEntry.from_dict(json.loads(json.dumps(stored)))
    assert again == entry and isinstance(again.kind, RobotsKind)
    assert again.rules(CONFIG).allowed("/private") is entry.rules(CONFIG).allowed("/private")


@pytest.mark.parametrize("obj", [
    [],
    {"kind": "rules"},
    {"kind": "maybe", "robots_text": None, "fetched_at_s": 1, "expires_at_s": 2},
    {"kind": "rules", "robots_text": None, "fetched_at_s": 1, "expires_at_s": 2},
    {"kind": "allow_all", "robots_text": 5, "fetched_at_s": 1, "expires_at_s": 2},
    {"kind": "allow_all", "robots_text": None, "fetched_at_s": "soon", "expires_at_s": 2},
])
def test_a_corrupt_stored_entry_raises_message_error(obj):
    with pytest.raises(MessageError):
        RobotsEntry.from_dict(obj)


# ---------------------------------------------------------------- LRU cache

def _entry(text: str = "User-agent: *\nDisallow: /x\n") -> RobotsEntry:
    return RobotsEntry(kind=RobotsKind.RULES, robots_text=text, fetched_at_s=NOW_S, expires_at_s=NOW_S + DAY_S)


def test_the_lru_cache_evicts_the_least_recently_used_origin():
    cache = RobotsCache(2, CONFIG)
    cache.put("https://a.example", _entry())
    cache.put("https://b.example", _entry())
    assert cache.get("https://a.example") is not None      # a is now the most recent
    cache.put("https://c.example", _entry())
    assert len(cache) == 2
    assert cache.get("https://b.example") is None
    assert cache.get("https://a.example") is not None and cache.get("https://c.example") is not None


def test_the_lru_cache_returns_the_entry_with_its_rules():
    cache = RobotsCache(10, CONFIG)
    entry = _entry()
    rules = cache.put("https://a.example", entry)
    cached_entry, cached_rules = cache.get("https://a.example")
    assert cached_entry is entry and cached_rules is rules and not rules.allowed("/x")
    cache.put("https://a.example", _entry("User-agent: *\nDisallow:\n"))
    assert len(cache) == 1 and cache.get("https://a.example")[1].allowed("/x")


def test_the_lru_cache_needs_room_for_one_entry():
    with pytest.raises(ValueError):
        RobotsCache(0, CONFIG)
    with pytest.raises(ConfigError) as err:  # the key is checked at load
        SETTINGS.with_overrides({"http.robots.cache.lru.size": 0})
    assert err.value.key == "http.robots.cache.lru.size"


# ---------------------------------------------------------------- squall robots check

def _run_check(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="squall")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_robots_check_prints_a_verdict_and_crawl_delay_per_url(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(GROUPS.encode())
    code = _run_check(["robots", "check", "--robots", str(robots), "--agent", "FooBot/2.1",
                       "https://example.com/foobot-only/a", "https://example.com/star"])
    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "group: foobot",
        "crawl-delay: 5 (under User-agent: foobot)",
        "disallowed https://example.com/foobot-only/a crawl-delay=5",
        "allowed https://example.com/star crawl-delay=5",
    ]


def test_robots_check_without_a_crawl_delay_prints_none(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: *\nDisallow: /x\n")
    assert _run_check(["robots", "check", "--robots", str(robots), "--agent", "barbot", "/x", "/y"]) == 0
    assert capsys.readouterr().out.splitlines() == ["group: *", "crawl-delay: none", "disallowed /x crawl-delay=none",
                                                    "allowed /y crawl-delay=none"]

def test_robots_check_shows_the_group_extent_rule(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: a\nCrawl-delay: 1\nUser-agent: b\nDisallow: /x\n")
    assert _run_check(["robots", "check", "--robots", str(robots), "--agent", "b", "/x", "/y"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "group: b", "crawl-delay: 1 (none under User-agent: b; the largest of its group)",
        "disallowed /x crawl-delay=1", "allowed /y crawl-delay=1"]


def test_robots_check_prints_the_crawl_delay_meant_for_the_agent_among_per_agent_lists(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_text(PER_AGENT)
    assert _run_check(["robots", "check", "--robots", str(robots), "--agent", "squallbot",
                       "/private/a", "/public"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "group: squallbot", "crawl-delay: 2 (under User-agent: squallbot)",
        "disallowed /private/a crawl-delay=2", "allowed /public crawl-delay=2"]


def test_robots_check_says_when_the_file_is_cut_at_the_content_limit(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    body = b"User-agent: *\nDisallow: /early\n" + b"# padding\n" * 10 + b"Disallow: /late\n"
    robots.write_bytes(body)
    assert _run_check(["robots", "check", "--robots", str(robots), "--agent", "b", "--content-limit", "40",
                       "/early", "/late"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"truncated: {len(body)} bytes, only the first 40 parsed (--content-limit)"
    assert out[3:] == ["disallowed /early crawl-delay=none", "allowed /late crawl-delay=none"]



def test_robots_check_reports_an_unreadable_file(tmp_path, capsys):
    assert _run_check(["robots", "check", "--robots", str(tmp_path / "missing.txt"), "--agent", "foo", "/"]) == 2
    assert "cannot read" in capsys.readouterr().err


# ---------------------------------------------------------------- truncation and conditional refresh

def test_a_body_over_the_content_limit_is_cut_and_marked_truncated():
    small = config(content_limit=32)
    body = b"User-agent: *\nDisallow: /early\n" + b"Disallow: /late\n"
    entry = decide(outcome(200, body), None, NOW_S, small)
    assert entry.truncated
    assert entry.rules(small).allowed("/late") and not entry.rules(small).allowed("/early")


def test_a_body_within_the_limit_is_not_truncated_unless_the_fetcher_cut_it():
    assert not decide(outcome(200, b"User-agent: *\nDisallow: /x\n"), None, NOW_S, CONFIG).truncated
    cut = RobotsFetchOutcome(status=200, body=b"User-agent: *\nDisallow: /x\n", truncated=True)
    assert decide(cut, None, NOW_S, CONFIG).truncated


def test_truncation_survives_a_json_round_trip_and_a_failed_refresh():
    small = config(content_limit=16)
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n"), None, NOW_S, small)
    assert RobotsEntry.from_dict(entry.to_dict()).truncated
    assert decide(outcome(503), entry, NOW_S + 60, small).truncated


VALIDATED = {"ETag": '"r1"', "Last-Modified": "Tue, 14 Nov 2023 20:00:00 GMT", "Cache-Control": "max-age=3600"}


def test_etag_and_last_modified_of_a_200_are_kept_and_sent_on_the_next_fetch():
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    assert (entry.etag, entry.last_modified) == ('"r1"', "Tue, 14 Nov 2023 20:00:00 GMT")
    assert conditional_headers(entry) == {"If-None-Match": '"r1"',
                                          "If-Modified-Since": "Tue, 14 Nov 2023 20:00:00 GMT"}
    assert RobotsEntry.from_dict(entry.to_dict()) == entry


@pytest.mark.parametrize("headers, expected", [
    ({"ETag": '"r1"'}, {"If-None-Match": '"r1"'}),
    ({"Last-Modified": "Tue, 14 Nov 2023 20:00:00 GMT"}, {"If-Modified-Since": "Tue, 14 Nov 2023 20:00:00 GMT"}),
    ({}, {}),
])
def test_only_the_validators_the_server_gave_are_sent(headers, expected):
    entry = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", headers), None, NOW_S, CONFIG)
    assert conditional_headers(entry) == expected


def test_nothing_is_sent_without_a_cached_copy_or_for_a_redirected_answer():
    assert conditional_headers(None) == {}
    redirected = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED, redirects=1), None, NOW_S, CONFIG)
    assert conditional_headers(redirected) == {}
    assert conditional_headers(decide(outcome(404, headers=VALIDATED), None, NOW_S, CONFIG)) == {}


def test_a_304_keeps_the_cached_copy_and_restarts_its_lifetime():
    first = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    later = NOW_S + 3500
    entry = decide(outcome(304, headers={"Cache-Control": "max-age=3600"}), first, later, CONFIG)
    assert entry.kind == "rules" and entry.robots_text == first.robots_text
    assert not entry.rules(CONFIG).allowed("/x")
    assert (entry.fetched_at_s, entry.expires_at_s, entry.last_good_at_s) == (later, later + 3600, later)
    assert (entry.etag, entry.last_modified) == (first.etag, first.last_modified)
    assert entry.http_status == 304 and entry.failures == 0


def test_a_304_after_failures_ends_the_failure_state_and_takes_new_validators():
    first = decide(outcome(200, b"User-agent: *\nDisallow: /x\n", VALIDATED), None, NOW_S, CONFIG)
    failing = decide(outcome(503), first, NOW_S + 90_000, CONFIG)
    assert failing.blocks_origin and conditional_headers(failing)   # the last good copy can still be validated
    entry = decide(outcome(304, headers={"ETag": '"r2"'}), failing, NOW_S + 90_100, CONFIG)
    assert not entry.blocks_origin and entry.unreachable_since_s is None and entry.retry_at_s is None
    assert entry.etag == '"r2"' and not entry.rules(CONFIG).allowed("/x")


def test_a_304_with_nothing_cached_is_an_unavailable_robots_txt():
    assert decide(outcome(304), None, NOW_S, CONFIG).kind == "allow_all"
