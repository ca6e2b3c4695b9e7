"""``squall status``: counts of URLs by status and per host, read from the table changelogs.

The worker's tables are compacted Kafka changelogs, so any machine that
reaches the broker can report without asking a worker: the latest record of
every key in ``<id>-urls-changelog`` and ``<id>-hosts-changelog`` is read.
Consumer lag of the worker group on the status, fetch and signals topics
tells whether work is still queued. ``--wait-idle`` polls until nothing is
due, in flight or unconsumed and no URL waits for a Retry-After, robots.txt
retry or back-off ending within ``--max-wait`` (twice in a row), then prints
the report. ``--watch`` is the live view (:mod:`squall.cli.live_view`).

The parts: :mod:`squall.cli.status_read` reads the records, offsets and
group from the broker, :mod:`squall.cli.status_counts` turns them into a
:class:`~squall.cli.status_report.Report`, which prints itself
(:mod:`squall.cli.status_report`); this module is the command.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import TYPE_CHECKING

from squall.cli.status_counts import report_of
from squall.cli.status_read import collect_records
from squall.cli.status_report import Report, clock

if TYPE_CHECKING:
    from squall.settings import Settings


async def collect(settings: Settings) -> Report:
    """Read the changelogs, group offsets and assignment of ``settings``' topology into a :class:`Report`."""
    from squall.policy.topics import agent_topics

    return report_of(await collect_records(settings), time.time(), agent_topics(settings))


async def wait_idle(settings: Settings, timeout_s: float, poll_s: float = 1.0, max_wait_s: float = 3600.0) -> Report:
    """Poll :func:`collect` until the report is settled twice in a row (or ``timeout_s`` passes).

    Settled: nothing due, in flight or unconsumed, and no URL waiting for a
    Retry-After, robots.txt retry or back-off that ends within ``max_wait_s``
    seconds (:meth:`Report.settled`); a wait that ends later is reported, not waited for.
    """
    deadline = time.monotonic() + timeout_s
    streak = 0
    while True:
        report = await collect(settings)
        streak = streak + 1 if report.settled(max_wait_s) and report.by_status else 0
        if streak >= 2 or time.monotonic() > deadline:
            return report
        await asyncio.sleep(poll_s)


def _status_command(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    if args.watch:
        from squall.cli.live_view import watch

        return watch(
            settings,
            interval_s=args.interval,
            until_idle=args.wait_idle,
            timeout_s=args.timeout,
            max_wait_s=args.max_wait,
        )
    if args.wait_idle:
        report = asyncio.run(wait_idle(settings, args.timeout, max_wait_s=args.max_wait))
    else:
        report = asyncio.run(collect(settings))
    print(json.dumps(report.to_json(), indent=2) if args.json else report.to_text())
    if not report.by_status and not args.json:
        print(
            f"(no URL records for topology.id {settings.topology_id!r} at {settings.kafka_bootstrap_servers}: "
            "nothing seeded yet, or another configuration? see $SQUALL_CONF / squall --conf)"
        )
    if args.wait_idle and not report.settled(args.max_wait):
        print("squall status: not idle before the timeout", file=sys.stderr)
        return 1
    if args.wait_idle and report.waiting:
        print(
            f"squall status: {report.waiting} URLs still waiting until {clock(report.waiting_until_s)} "
            f"(beyond --max-wait {args.max_wait:g} s)",
            file=sys.stderr,
        )
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("status", help="counts of URLs by status and per host")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--wait-idle", action="store_true", help="wait until nothing is due, in flight or unconsumed")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait-idle waits at most (default 3600)")
    p.add_argument(
        "--max-wait",
        type=float,
        default=3600.0,
        help="--wait-idle also waits for URLs held by a Retry-After, robots.txt retry or back-off "
        "ending within this many seconds (default 3600)",
    )
    p.add_argument("--watch", action="store_true", help="live view (rich), refreshed every --interval seconds")
    p.add_argument("--interval", type=float, default=2.0, help="seconds between two refreshes of --watch")
    p.set_defaults(func=_status_command)
