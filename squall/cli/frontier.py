"""Frontier queries from any machine that reaches the broker (read from the tables' changelogs, as ``squall status``).

* ``squall hosts [--json]`` — each host: URL counts by status, pages held by
  its page limit, the delay in force and why, block (and reason), limit,
  owner partition, the last operator command; the crawl-wide pause and delay.
* ``squall urls --host H [--status S] [--json]`` — the URLs of one host.
* ``squall url show URL`` (:mod:`squall.cli.url`) — one URL's record.
* ``squall frontier dump [--status S]`` — every URL in the seed file format
  (URL, then tab-separated ``key=value`` metadata; :mod:`squall.cli.seed`),
  so ``squall seed`` can put it into a new crawl.

The views (:func:`host_rows`, :func:`dump_lines`) are pure functions of the
records; the commands only read and print.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from squall.policy.control import CrawlControl, crawl_key
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.url_view import url_view

if TYPE_CHECKING:
    from squall.settings import Settings


def delay_and_why(host: HostRecord, crawl: CrawlControl | None, server_delay_s: float) -> tuple[float, str]:
    """The delay (s) in force for ``host`` and what sets it.

    ``host.delay`` (the operator's, for this host), ``crawl.delay`` (the
    operator's default), ``Crawl-delay`` (the site's robots.txt, longer than
    the operator's or configured delay), ``back-off`` (a deprioritised host),
    else ``fetcher.server.delay``. The delay is the one recorded after the
    host's last request (``delay_s``), or the configured one before any.
    """
    base_s, why = server_delay_s, "fetcher.server.delay"
    if host.operator_delay_s is not None:
        base_s, why = host.operator_delay_s, "host.delay"
    elif crawl is not None and crawl.delay_s is not None:
        base_s, why = crawl.delay_s, "crawl.delay"
    delay_s = host.delay_s or base_s
    if delay_s > base_s + 1e-9:
        why = "back-off" if host.backoff_attempts else "Crawl-delay"
    return delay_s, why


def host_rows(
    hosts: Mapping[str, Mapping[str, Any]],
    urls: Mapping[str, Mapping[str, Any]],
    crawl: Mapping[str, Mapping[str, Any]],
    partitions: int,
    server_delay_s: float,
    now_s: float,
) -> list[dict[str, Any]]:
    """One row per host (hosts-table key), most URLs first.

    Args:
        hosts: hosts-changelog records (key → HostRecord dict).
        urls: urls-changelog records (URL → UrlRecord dict).
        crawl: control-changelog records (``crawl:<p>`` → CrawlControl dict).
        partitions: ``topology.partitions``.
        server_delay_s: ``fetcher.server.delay`` (s).
        now_s: current time (Unix s), to tell a block in force.
    """
    counts: dict[str, Counter[str]] = {}
    for view in map(url_view, urls.values()):  # the one reader of a URL record for reports
        counts.setdefault(str(view.key), Counter())[view.status] += 1
    rows: list[dict[str, Any]] = []
    for key in sorted(set(hosts) | set(counts)):
        host = HostRecord.from_dict(hosts.get(key) or {"key": key})
        partition = partition_for_key(key, partitions)
        state = CrawlControl.from_dict(crawl.get(crawl_key(partition)))
        delay_s, why = delay_and_why(host, state, server_delay_s)
        by_status: dict[str, int] = dict(counts.get(key, Counter()))
        limited = host.page_limit is not None and host.pages_fetched >= host.page_limit
        blocked = host.operator_blocked_until_s > now_s
        rows.append(
            {
                "host": key,
                "partition": partition,
                "urls": by_status,
                "held_by_limit": by_status.get("DISCOVERED", 0) if limited else 0,
                "delay_s": delay_s,
                "delay_why": why,
                "blocked_until_s": host.operator_blocked_until_s if blocked else None,
                "block_reason": host.operator_block_reason if blocked else None,
                "page_limit": host.page_limit,
                "pages_fetched": host.pages_fetched,
                "paused": state.paused,
                "last_command": host.operator_log[-1] if host.operator_log else None,
            }
        )
    rows.sort(key=lambda r: (-sum(r["urls"].values()), r["host"]))
    return rows


def host_text(row: Mapping[str, Any]) -> str:
    """One line of ``squall hosts``."""
    from squall.cli.status_report import clock

    urls = " ".join(f"{status.lower()} {n}" for status, n in sorted(row["urls"].items())) or "no URLs"
    parts = [
        f"{row['host']} (partition {row['partition']}): {urls}",
        f"delay {row['delay_s']:g} s ({row['delay_why']})",
    ]
    if row["blocked_until_s"] is not None:
        parts.append(
            f"blocked until {clock(row['blocked_until_s'])}"
            + (f": {row['block_reason']}" if row["block_reason"] else "")
        )
    if row["page_limit"] is not None:
        parts.append(f"limit {row['pages_fetched']}/{row['page_limit']} pages")
    if row["held_by_limit"]:
        parts.append(f"{row['held_by_limit']} held by the limit")
    if row["paused"]:
        parts.append("paused")
    if row["last_command"]:
        parts.append(operator_text(row["last_command"]))
    return "; ".join(parts)


def operator_text(entry: Mapping[str, Any]) -> str:
    """An operator-log entry for people: ``last command host.block by alice@box at 10:00:00 (until_s=...)``."""
    from squall.cli.status_counts import last_command

    return "last command " + str(last_command([entry]))


def dump_lines(urls: Mapping[str, Mapping[str, Any]], status: str | None = None) -> Iterator[str]:
    """Seed-file lines of the URL records (of ``status`` only, if given), sorted: URL, then ``\\tkey=value`` pairs.

    A metadata value with a tab or a line break cannot be written in that
    format: those characters become spaces.
    """
    for url in sorted(urls):
        view = url_view(urls[url])
        if status is not None and view.status != status:
            continue
        pairs = [
            f"{_plain(k)}={_plain(v)}"
            for k, values in sorted(view.metadata.items())
            for v in (values if isinstance(values, list) else [values])
        ]
        yield "\t".join([url, *pairs])


def _plain(value: object) -> str:
    return str(value).replace("\t", " ").replace("\r", " ").replace("\n", " ")


async def _read(settings, tables: tuple[str, ...]) -> dict[str, dict[str, dict[str, Any]]]:
    from squall.cli.status_read import latest_records
    from squall.net.kafka_security import KafkaConnection
    from squall.policy.topics import changelog_name

    conn = KafkaConnection.from_settings(settings)
    return {t: await latest_records(conn, changelog_name(settings, t)) for t in tables}


def _settings(args: argparse.Namespace) -> Settings:
    from squall.settings import load_settings

    return load_settings(args.conf)


def _hosts_command(args: argparse.Namespace) -> int:
    import time

    settings = _settings(args)
    records = asyncio.run(_read(settings, ("hosts", "urls", "control")))
    rows = host_rows(
        records["hosts"],
        records["urls"],
        records["control"],
        settings.topology_partitions,
        settings.fetcher_server_delay,
        time.time(),
    )
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            print(host_text(row))
    return 0


def _urls_command(args: argparse.Namespace) -> int:
    from squall.errors import MessageError
    from squall.policy.control import check_host
    from squall.policy.partition import partition_key

    settings = _settings(args)
    try:
        key = partition_key(f"http://{check_host(args.host)}/", settings.partition_url_mode)
    except MessageError as exc:
        print(f"squall urls: {exc}", file=sys.stderr)
        return 2
    urls = asyncio.run(_read(settings, ("urls",)))["urls"]
    views = {u: url_view(r) for u, r in urls.items()}
    chosen = {u: urls[u] for u, v in views.items() if v.key == key and (args.status is None or v.status == args.status)}
    if args.json:
        print(json.dumps(chosen, indent=2, sort_keys=True))
    else:
        for url in sorted(chosen):
            v = views[url]
            print(f"{url}\t{v.status}" + (f"\t{v.reason}" if v.reason else ""))
    return 0


def _dump_command(args: argparse.Namespace) -> int:
    settings = _settings(args)
    urls = asyncio.run(_read(settings, ("urls",)))["urls"]
    for line in dump_lines(urls, args.status):
        print(line)
    return 0


STATUSES = ("DISCOVERED", "FETCHED", "REDIRECTION", "FETCH_ERROR", "ERROR")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("hosts", help="each host: counts, delay in force and why, block, limit, partition")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_hosts_command)
    p = subparsers.add_parser("urls", help="the URLs of one host and their status")
    p.add_argument("--host", required=True)
    p.add_argument("--status", choices=STATUSES)
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=_urls_command)
    p = subparsers.add_parser("frontier", help="the frontier as a whole")
    sub = p.add_subparsers(dest="frontier_command", required=True)
    d = sub.add_parser("dump", help="every URL in the seed file format (re-seedable with squall seed)")
    d.add_argument("--status", choices=STATUSES)
    d.set_defaults(func=_dump_command)
