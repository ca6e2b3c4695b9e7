"""``squall status``: counts of URLs by status and per host, read from the table changelogs.

The worker's tables are compacted Kafka changelogs, so any machine that
reaches the broker can report without asking a worker: the latest record of
every key in ``<id>-urls-changelog`` and ``<id>-hosts-changelog`` is read.
Consumer lag of the worker group on the status, fetch and signals topics
tells whether work is still queued. ``--wait-idle`` polls until nothing is
due, in flight or unconsumed (twice in a row), then prints the report.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.records import Status


@dataclass
class Report:
    """What ``squall status`` prints (``--json`` prints :meth:`to_json`)."""

    by_status: Counter = field(default_factory=Counter)
    by_host: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    reasons: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    due_now: int = 0
    in_flight: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    deadletters: int = 0
    robots_truncated: list[str] = field(default_factory=list)   # origins whose robots.txt was cut at the limit
    rendered: int = 0
    render_failures: Counter = field(default_factory=Counter)
    render_refused: Counter = field(default_factory=Counter)

    @property
    def idle(self) -> bool:
        """Nothing due now, nothing handed out and unanswered, nothing left to consume."""
        return self.due_now == 0 and self.in_flight == 0 and not any(self.lag.values())

    def to_json(self) -> dict[str, Any]:
        return {"total": sum(self.by_status.values()), "by_status": dict(self.by_status),
                "by_host": {h: dict(c) for h, c in sorted(self.by_host.items())}, "reasons": dict(self.reasons),
                "rejected": dict(self.rejected), "due_now": self.due_now, "in_flight": self.in_flight,
                "lag": self.lag, "deadletters": self.deadletters, "idle": self.idle,
                "robots_truncated": len(self.robots_truncated), "robots_truncated_origins": self.robots_truncated,
                "render": {"rendered": self.rendered, "failures": dict(self.render_failures),
                           "refused": dict(self.render_refused)}}

    def to_text(self) -> str:
        lines = [f"URLs: {sum(self.by_status.values())}   due now: {self.due_now}   in flight: {self.in_flight}   "
                 f"unconsumed: {sum(self.lag.values())}   dead letters: {self.deadletters}"]
        lines.append("  " + "  ".join(f"{s.value}={self.by_status.get(s.value, 0)}" for s in Status))
        if self.reasons:
            lines.append("reasons: " + ", ".join(f"{r}={n}" for r, n in self.reasons.most_common()))
        if self.rendered or self.render_failures:
            failures = ", ".join(f"{r}={n}" for r, n in self.render_failures.most_common()) or "none"
            lines.append(f"rendered: {self.rendered}   render failures: {failures}")
            if self.render_refused:
                lines.append("browser requests refused: "
                             + ", ".join(f"{r}={n}" for r, n in self.render_refused.most_common()))
        if self.rejected:
            lines.append("rejected (not admitted): " + ", ".join(f"{r}={n}" for r, n in self.rejected.most_common()))
        if self.robots_truncated:
            shown = ", ".join(self.robots_truncated[:5]) + (", ..." if len(self.robots_truncated) > 5 else "")
            lines.append(f"robots.txt cut at http.robots.content.limit: {len(self.robots_truncated)} origin(s) "
                         f"({shown})")
        lines.append(f"{'host':40} " + " ".join(f"{s.value:>12}" for s in Status))
        for host, counts in sorted(self.by_host.items()):
            lines.append(f"{host:40} " + " ".join(f"{counts.get(s.value, 0):>12}" for s in Status))
        return "\n".join(lines)


def build_report(urls: Mapping[str, Mapping[str, Any]], hosts: Mapping[str, Mapping[str, Any]], now_s: float,
                 lag: Mapping[str, int] | None = None, deadletters: int = 0,
                 robots: Mapping[str, Mapping[str, Any]] | None = None) -> Report:
    """Aggregate the latest url, host and robots records (as dicts, robots keyed by origin) into a :class:`Report`."""
    report = Report(lag=dict(lag or {}), deadletters=deadletters,
                    robots_truncated=sorted(o for o, entry in (robots or {}).items() if entry.get("truncated")))
    for rec in urls.values():
        status = rec.get("status", "?")
        report.by_status[status] += 1
        report.by_host[rec.get("key", "?")][status] += 1
        if rec.get("reason"):
            report.reasons[rec["reason"]] += 1
        nxt = rec.get("next_fetch_at_s")
        if status in (Status.DISCOVERED.value, Status.FETCH_ERROR.value) and nxt is not None and nxt <= now_s:
            report.due_now += 1
        _count_render(report, rec.get("metadata") or {})
    for host in hosts.values():
        report.in_flight += len(host.get("in_flight") or {})
        for reason, n in (host.get("rejected") or {}).items():
            report.rejected[reason] += n
    return report


def _count_render(report: Report, metadata: Mapping[str, Any]) -> None:
    """Add one page's ``parse.render*`` metadata (squall.render_policy) to the render counts."""
    from squall.render_policy import REFUSED_KEY, RENDER_KEY

    render = metadata.get(RENDER_KEY) or []
    if not render:
        return
    if render[0] == "rendered":
        report.rendered += 1
    else:
        report.render_failures[render[1] if len(render) > 1 else "render.error"] += 1
    for item in metadata.get(REFUSED_KEY) or []:
        reason, _, n = str(item).rpartition("=")
        if reason and n.isdigit():
            report.render_refused[reason] += int(n)


async def latest_records(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    from squall.kafka_admin import read_topic

    latest: dict[str, dict[str, Any]] = {}
    async for key, value in read_topic(bootstrap, topic, missing_ok=True):
        if key is None:
            continue
        k = key.decode("utf-8", errors="replace")
        if value is None:
            latest.pop(k, None)
            continue
        try:
            latest[k] = json.loads(value)
        except ValueError:
            continue
    return latest


async def _lag(settings: Mapping[str, Any]) -> dict[str, int]:
    from aiokafka.admin import AIOKafkaAdminClient

    from squall.kafka_admin import end_offsets
    from squall.topics import topic_name

    bootstrap = settings["kafka.bootstrap.servers"]
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        await admin.start()
        committed = await admin.list_consumer_group_offsets(settings["topology.id"])
    except KafkaError:  # e.g. the group coordinator is not ready yet: unknown counts as busy
        return {"unknown": 1}
    finally:
        await admin.close()
    lag: dict[str, int] = {}
    for suffix in ("status", "fetch", "signals"):
        topic = topic_name(settings, suffix)
        ends = await end_offsets(bootstrap, topic, missing_ok=True)
        total = 0
        for partition, end in ends.items():
            done = next((m.offset for tp, m in committed.items() if tp.topic == topic and tp.partition == partition), -1)
            total += end - max(done, 0)
        lag[suffix] = total
    return lag


async def collect(settings: Mapping[str, Any]) -> Report:
    """Read the changelogs and group offsets of ``settings``' topology into a :class:`Report`."""
    from squall.kafka_admin import end_offsets
    from squall.topics import changelog_name, topic_name

    bootstrap = settings["kafka.bootstrap.servers"]
    urls = await latest_records(bootstrap, changelog_name(settings, "urls"))
    hosts = await latest_records(bootstrap, changelog_name(settings, "hosts"))
    robots = await latest_records(bootstrap, changelog_name(settings, "robots"))
    dead = sum((await end_offsets(bootstrap, topic_name(settings, "deadletter"), missing_ok=True)).values())
    return build_report(urls, hosts, time.time(), await _lag(settings), dead, robots)


async def wait_idle(settings: Mapping[str, Any], timeout_s: float, poll_s: float = 1.0) -> Report:
    """Poll :func:`collect` until the report is idle twice in a row (or ``timeout_s`` passes)."""
    deadline = time.monotonic() + timeout_s
    streak = 0
    while True:
        report = await collect(settings)
        streak = streak + 1 if report.idle and report.by_status else 0
        if streak >= 2 or time.monotonic() > deadline:
            return report
        await asyncio.sleep(poll_s)


def _status_command(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    if args.wait_idle:
        report = asyncio.run(wait_idle(settings, args.timeout))
    else:
        report = asyncio.run(collect(settings))
    print(json.dumps(report.to_json(), indent=2) if args.json else report.to_text())
    if not report.by_status and not args.json:
        print(f"(no URL records for topology.id {settings['topology.id']!r} at {settings['kafka.bootstrap.servers']}: "
              "nothing seeded yet, or another configuration? see $SQUALL_CONF / squall --conf)")
    if args.wait_idle and not report.idle:
        print("squall status: not idle before the timeout", file=sys.stderr)
        return 1
    return 0


def add_parser(subparsers) -> None:  # noqa: ANN001 (argparse)
    p = subparsers.add_parser("status", help="counts of URLs by status and per host")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--wait-idle", action="store_true", help="wait until nothing is due, in flight or unconsumed")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds --wait-idle waits at most (default 3600)")
    p.set_defaults(func=_status_command)
