"""Tests of squall.policy.robots_rules' groups (RFC 9309 §2.2.1, reference parsers), Crawl-delay per agent, and `squall robots check`."""

from __future__ import annotations

import argparse

import pytest

from squall.cli.robots import add_parser
from tests.unit.robots_helper import rules_for

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
    (("foobot",), "/foo-only", True, 5.0),  # group `foo` must not apply to `foobot`
    (("foobot",), "/star", True, 5.0),  # a specific group replaces `*` entirely
    (("foo",), "/foo-only", False, 7.0),
    (("foo",), "/foobot-only", True, 7.0),  # group `foobot` must not apply to `foo`
    (("FOOBOT",), "/foobot-only", False, 5.0),  # case-insensitive
    (("fo",), "/star", False, 1.0),  # no prefix match: falls back to `*`
    (("foobotx",), "/star", False, 1.0),
    (("barbot", "foo"), "/foo-only", False, 7.0),  # first configured agent whose group exists
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
    (
        "request-rate between agents",
        "User-agent: a\nRequest-rate: 1/5\nUser-agent: b\nDisallow: /x\n",
        "a",
        "/x",
        False,
    ),
    ("a rule ends the run", A_RULE_B, "a", "/x", True),
    ("a rule ends the run", A_RULE_B, "b", "/y", True),
    ("an empty disallow is a rule", "User-agent: a\nDisallow:\nUser-agent: b\nDisallow: /x\n", "a", "/x", True),
    ("crawl-delay after rules stays in its group", A_RULE_DELAY_B, "a", "/x", True),
]


@pytest.mark.parametrize(
    "source, text, agent, url, allowed", EXTENT_CASES, ids=[f"{c[0]}|{c[2]}|{c[3]}" for c in EXTENT_CASES]
)
def test_group_extent_follows_rfc_9309_and_the_reference_parsers(source, text, agent, url, allowed):
    assert rules_for(text, agent).allowed(url) is allowed


@pytest.mark.parametrize(
    "text, agent, delay",
    [
        (A_DELAY_B, "b", 1.0),  # Crawl-delay between two User-agent lines
        (A_DELAY_B, "a", 1.0),
        (A_RULE_DELAY_B, "b", None),
        (A_RULE_DELAY_B, "a", 3.0),
    ],
)
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
SEPARATE_GROUPS = "User-agent: otherbot\nDisallow: /other/\nCrawl-delay: 5\n\nUser-agent: squallbot\nDisallow: /mine/\n"


def html_page(robots: str, br: str = "<br>") -> str:
    """robots.txt as a misconfigured server sends it: an HTML page, a ``<br>`` at each line end."""
    body = "\n".join(f"{line}{br}" for line in robots.splitlines())
    return f"<!DOCTYPE html>\n<html><head><title>robots</title></head>\n<body>\n{body}\n</body></html>\n"


# a table, one case a line or two as written: the formatter leaves it alone
# fmt: off
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
# fmt: on


@pytest.mark.parametrize(
    "name, text, agent, delay, source, url, allowed",
    CRAWL_DELAY_AGENT_CASES,
    ids=[f"{c[0]}|{c[2]}" for c in CRAWL_DELAY_AGENT_CASES],
)
def test_a_crawl_delay_belongs_to_the_agents_above_it_and_the_largest_meant_for_us_wins(
    name, text, agent, delay, source, url, allowed
):
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


# ---------------------------------------------------------------- squall robots check


def _run_check(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="squall")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_robots_check_prints_a_verdict_and_crawl_delay_per_url(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(GROUPS.encode())
    code = _run_check(
        [
            "robots",
            "check",
            "--robots",
            str(robots),
            "--agent",
            "FooBot/2.1",
            "https://example.com/foobot-only/a",
            "https://example.com/star",
        ]
    )
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
    assert capsys.readouterr().out.splitlines() == [
        "group: *",
        "crawl-delay: none",
        "disallowed /x crawl-delay=none",
        "allowed /y crawl-delay=none",
    ]


def test_robots_check_shows_the_group_extent_rule(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_bytes(b"User-agent: a\nCrawl-delay: 1\nUser-agent: b\nDisallow: /x\n")
    assert _run_check(["robots", "check", "--robots", str(robots), "--agent", "b", "/x", "/y"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "group: b",
        "crawl-delay: 1 (none under User-agent: b; the largest of its group)",
        "disallowed /x crawl-delay=1",
        "allowed /y crawl-delay=1",
    ]


def test_robots_check_prints_the_crawl_delay_meant_for_the_agent_among_per_agent_lists(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    robots.write_text(PER_AGENT)
    assert (
        _run_check(["robots", "check", "--robots", str(robots), "--agent", "squallbot", "/private/a", "/public"]) == 0
    )
    assert capsys.readouterr().out.splitlines() == [
        "group: squallbot",
        "crawl-delay: 2 (under User-agent: squallbot)",
        "disallowed /private/a crawl-delay=2",
        "allowed /public crawl-delay=2",
    ]


def test_robots_check_says_when_the_file_is_cut_at_the_content_limit(tmp_path, capsys):
    robots = tmp_path / "robots.txt"
    body = b"User-agent: *\nDisallow: /early\n" + b"# padding\n" * 10 + b"Disallow: /late\n"
    robots.write_bytes(body)
    assert (
        _run_check(
            ["robots", "check", "--robots", str(robots), "--agent", "b", "--content-limit", "40", "/early", "/late"]
        )
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"truncated: {len(body)} bytes, only the first 40 parsed (--content-limit)"
    assert out[3:] == ["disallowed /early crawl-delay=none", "allowed /late crawl-delay=none"]


def test_robots_check_reports_an_unreadable_file(tmp_path, capsys):
    assert _run_check(["robots", "check", "--robots", str(tmp_path / "missing.txt"), "--agent", "foo", "/"]) == 2
    assert "cannot read" in capsys.readouterr().err
