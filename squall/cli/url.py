"""``squall url normalize URL...``: canonical forms (and, with ``--traps``, the URL-shape trap verdicts).

``squall url show URL``: the URL's record in the running crawl (:mod:`squall.cli.frontier`).
"""

from __future__ import annotations

import argparse
from typing import Any

import squall.settings
from squall.errors import InvalidURL
from squall.policy.traps import TrapConfig, check_url
from squall.policy.urls import NormalizerConfig, canonicalize


def add_parser(subparsers: Any) -> None:
    """Register ``squall url normalize URL...`` on the CLI's subparsers."""
    parser = subparsers.add_parser("url", help="URL tools")
    commands = parser.add_subparsers(dest="url_command", required=True)
    normalize = commands.add_parser(
        "normalize",
        help="print the canonical form of each URL, or 'invalid: <reason>'; exit 1 if any is invalid",
    )
    normalize.add_argument("urls", nargs="+", metavar="URL")
    normalize.add_argument("--base", help="resolve relative URLs against this URL")
    normalize.add_argument(
        "--seed", action="store_true", help="judge the URLs as seeds: userinfo (user:password@) is refused, not dropped"
    )
    normalize.add_argument(
        "--traps",
        action="store_true",
        help="also judge each canonical URL by the URL-shape trap guards (squall.policy.traps): "
        "'<url>\tadmitted' or '<url>\trefused: <reason>'; exit 1 if any is refused",
    )
    normalize.set_defaults(func=_normalize_command)
    show = commands.add_parser("show", help="the URL's record in the running crawl (read from the urls changelog)")
    show.add_argument("url", metavar="URL")
    show.set_defaults(func=_show_command)


def _show_command(args: argparse.Namespace) -> int:
    from squall.cli.frontier import show_url

    return show_url(args)


def _normalize_command(args: argparse.Namespace) -> int:
    settings = squall.settings.load_settings(args.conf)
    config = NormalizerConfig.from_settings(settings)
    traps = TrapConfig.from_settings(settings) if args.traps else None
    status = 0
    for url in args.urls:
        try:
            canonical = canonicalize(url, config, base=args.base, seed=args.seed)
            if traps is None:
                print(canonical)
                continue
            reason = check_url(canonical, traps)
            print(f"{canonical}\t" + ("admitted" if reason is None else f"refused: {reason.value}"))
            status = status or (reason is not None)
        except InvalidURL as exc:
            print(f"invalid: {exc.reason}" + (f" ({exc.detail})" if exc.detail else ""))
            status = 1
    return status
