"""``squall robots check --robots FILE --agent NAME URL...``: an offline check of a robots.txt file."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from squall.policy.robots_rules import CrawlDelaySource, RobotsRules, decode_robots, is_truncated, product_token


def _agent_token(value: str) -> str:
    token = product_token(value)
    if not token:
        raise argparse.ArgumentTypeError(f"{value!r} has no product token (letters, '_' or '-')")
    return token


def _format_delay(delay_s: float | None) -> str:
    return "none" if delay_s is None else f"{delay_s:g}"


def _delay_line(rules: RobotsRules) -> str:
    """``crawl-delay: X (why)``: the Crawl-delay that applies to the matched agent, before any cap."""
    delay = _format_delay(rules.crawl_delay_s)
    if rules.crawl_delay_source is CrawlDelaySource.AGENT:
        return f"crawl-delay: {delay} (under User-agent: {rules.matched_agent})"
    if rules.crawl_delay_source is CrawlDelaySource.GROUP:
        return f"crawl-delay: {delay} (none under User-agent: {rules.matched_agent}; the largest of its group)"
    return f"crawl-delay: {delay}"


def _check_command(args: argparse.Namespace) -> int:
    """``squall robots check``: print the verdict for each URL; 0, or 2 if the file cannot be read."""
    try:
        with open(args.robots, "rb") as handle:
            body = handle.read()
    except OSError as exc:
        print(f"squall: cannot read {args.robots}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    rules = RobotsRules.from_text(decode_robots(body, args.content_limit), [args.agent])
    if is_truncated(body, args.content_limit):
        print(f"truncated: {len(body)} bytes, only the first {args.content_limit} parsed (--content-limit)")
    print(f"group: {rules.matched_agent or 'none (no group applies: everything allowed)'}")
    print(_delay_line(rules))
    delay = _format_delay(rules.crawl_delay_s)
    for url in args.urls:
        verdict = "allowed" if rules.allowed(url) else "disallowed"
        print(f"{verdict} {url} crawl-delay={delay}")
    return 0


def add_parser(subparsers: Any) -> None:
    """Register ``squall robots check --robots FILE --agent NAME URL...`` (offline check of a file)."""
    robots = subparsers.add_parser("robots", help="robots.txt tools (RFC 9309)")
    commands = robots.add_subparsers(dest="robots_command", required=True)
    check = commands.add_parser(
        "check",
        help="check URLs against a robots.txt file",
        description="Print a 'truncated:' line when the file is over --content-limit, the group that applies "
        "to the agent's product token ('group: <token>|*|none'), the Crawl-delay that applies to it "
        "('crawl-delay: X|none', the largest meant for it, before fetcher.max.crawl.delay), then "
        "'allowed|disallowed URL crawl-delay=X|none' per URL. Reads only the file.",
    )
    check.add_argument("--robots", required=True, metavar="FILE", help="robots.txt file to read")
    check.add_argument(
        "--agent",
        required=True,
        type=_agent_token,
        metavar="NAME",
        help="agent name; its product token selects the group (RFC 9309 §2.2.1)",
    )
    check.add_argument(
        "--content-limit",
        type=int,
        default=-1,
        metavar="BYTES",
        help="parse only this many bytes, like http.robots.content.limit (default: whole file)",
    )
    check.add_argument("urls", nargs="+", metavar="URL")
    check.set_defaults(func=_check_command)
