"""``squall audit``: the crawler's own politeness audit, read from the ``audit`` table's changelog.

Like ``squall status`` it needs only the broker: the latest record of every
key in ``<id>-audit-changelog`` is one host's :class:`squall.policy.audit.HostAudit`
(the owner of a host carries it across restarts and rebalances), merged by
key with :func:`squall.policy.audit.merge`. Hosts are printed worst first.
Exit code 1 when any violation was recorded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from squall.policy.audit import HostAudit, audits_of, summary, worst_first

if TYPE_CHECKING:
    from squall.settings import Settings


def parse_records(latest: Mapping[str, Mapping[str, Any]]) -> list[HostAudit]:
    """The audits among changelog values (key → record dict); a record of another shape is skipped."""
    return list(audits_of(latest.values()).values())


async def collect_audits(settings: Settings) -> list[HostAudit]:
    """Every host's audit of ``settings``' topology (``kafka.bootstrap.servers``, ``topology.id``)."""
    from squall.cli.status_read import latest_records
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import changelog_name

    latest = await latest_records(KafkaConnection.from_settings(settings), changelog_name(settings, "audit"))
    return parse_records(latest)


def _fmt(value: float | None, unit: str = "s") -> str:
    return "-" if value is None else f"{value:.3f}{unit}"


def to_text(audits: list[HostAudit], now_s: float) -> str:
    """The table ``squall audit`` prints: one line per host, worst first, then the totals."""
    s = summary(audits)
    lines = [
        f"politeness audit: {s['hosts']} hosts, {s['requests']} requests, {s['violations']} violations "
        f"({s['inside_block']} inside a Retry-After/back-off block)",
        f"{'host':32} {'requests':>8} {'violations':>10} {'min gap':>9} {'required':>9} {'margin':>9} "
        f"{'delay now':>9}  last block",
    ]
    for a in worst_first(audits):
        block = "-"
        if a.blocked_until_s:
            ago = now_s - a.blocked_until_s
            block = (
                f"until {time.strftime('%H:%M:%S', time.localtime(a.blocked_until_s))} "
                f"({'ended' if ago >= 0 else 'in force'}), {a.inside_block} inside"
            )
        lines.append(
            f"{a.key:32} {a.requests:>8} {a.violations:>10} {_fmt(a.min_gap_s):>9} "
            f"{_fmt(a.required_at_min_gap_s):>9} {_fmt(a.min_margin_s):>9} {_fmt(a.required_delay_s):>9}  {block}"
        )
        for v in a.recent:
            gap = "first request" if v.gap_s is None else f"gap {v.gap_s:.3f}s < {v.required_delay_s:.3f}s"
            lines.append(f"    violation at {v.start_s:.3f}: {gap}; blocked until {v.blocked_until_s:.3f}")
    return "\n".join(lines)


def _audit_command(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    audits = asyncio.run(collect_audits(settings))
    if args.json:
        print(json.dumps(summary(audits), indent=2))
    else:
        print(to_text(audits, time.time()))
        if not audits:
            print(f"(no audit records for topology.id {settings.topology_id!r}: nothing fetched yet?)")
    return 1 if any(a.violations for a in audits) else 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("audit", help="the politeness audit per host, worst first (exit 1 on a violation)")
    p.add_argument("--json", action="store_true", help="print JSON (violations per host and in total)")
    p.set_defaults(func=_audit_command)
