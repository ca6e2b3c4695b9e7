"""``squall url normalize URL...``: canonical forms (and, with ``--traps``, the URL-shape trap verdicts).

``squall url show URL...``: the URL record of each (status, reason, times,
attempts, the adaptive revisit interval and why, the archived payload
digest) as the urls table's changelog holds it now.
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
    show = commands.add_parser(
        "show", help="print the URL record of each URL (from the urls changelog); exit 1 if any is unknown"
    )
    show.add_argument("urls", nargs="+", metavar="URL")
    show.add_argument("--json", action="store_true", help="one JSON object per URL: the record as the table holds it")
    show.set_defaults(func=_show_command)


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


# the record fields `squall url show` prints, in order, with their labels
_SHOWN = (
    ("status", "status"),
    ("reason", "reason"),
    ("http_status", "HTTP status"),
    ("attempts", "attempts"),
    ("last_fetch_at_s", "last fetch"),
    ("next_fetch_at_s", "next fetch"),
    ("fetch_interval_s", "revisit interval (s)"),
    ("interval_reason", "interval reason"),
    ("payload_digest", "payload digest"),
    ("archived_at_s", "archived (WARC-Date)"),
    ("depth", "depth"),
    ("key", "partition key"),
)


def _show_command(args: argparse.Namespace) -> int:
    import asyncio
    import json
    import time

    from squall.cli.status_read import latest_records
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import changelog_name

    settings = squall.settings.load_settings(args.conf)
    config = NormalizerConfig.from_settings(settings)
    records = asyncio.run(latest_records(KafkaConnection.from_settings(settings), changelog_name(settings, "urls")))
    status = 0
    for url in args.urls:
        try:
            canonical = canonicalize(url, config)
        except InvalidURL as exc:
            print(f"invalid: {exc.reason}")
            status = 1
            continue
        record = records.get(canonical)
        if record is None:
            print(f"{canonical}: not in the frontier")
            status = 1
            continue
        if args.json:
            print(json.dumps(record, ensure_ascii=False))
            continue
        print(canonical)
        for name, label in _SHOWN:
            value = record.get(name)
            if value is None:
                continue
            if name.endswith("_at_s"):
                value = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(value)))
            print(f"  {label}: {value}")
    return status
