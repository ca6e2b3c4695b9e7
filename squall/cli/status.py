"""``squall status``: counts of URLs by status and per host, read from the table changelogs.

The worker's tables are compacted Kafka changelogs, so any machine that
reaches the broker can report without asking a worker: the latest record of
every key in ``<id>-urls-changelog`` and ``<id>-hosts-changelog`` is read.
Consumer lag of the worker group on the status, fetch and signals topics
tells whether work is still queued. ``--wait-idle`` polls until nothing is
due, in flight or unconsumed and no URL waits for a Retry-After, robots.txt
retry or back-off ending within ``--max-wait`` (twice in a row), then prints
the report. ``--watch`` is the live view (:mod:`squall.cli.live_view`).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from squall.net.kafka_security import Broker, KafkaConnection
from squall.policy.frontier import HostRecord
from squall.policy.handout import due_at_s
from squall.policy.reasons import Status
from squall.policy.records import SignalMessage, StatusMessage
from squall.policy.url_view import url_view

if TYPE_CHECKING:
    from squall.policy.pace import PaceConfig
    from squall.settings import Settings


WAITING_STATUSES = (Status.DISCOVERED.value,)  # rescheduled by a Retry-After, robots.txt retry or back-off
RECENT_WINDOW_S = 60.0  # pages/s "now" is measured over this window (s)
# a gap without any fetch longer than this (s) is idle time (e.g. waiting for the next seed), not crawl
# time, for the average pages/s; longer than the delays a polite crawl of a few hosts waits between pages
IDLE_GAP_S = 120.0


@dataclass
class Report:
    """What ``squall status`` prints (``--json`` prints :meth:`to_json`). Times: Unix seconds.

    ``waiting`` counts DISCOVERED URLs that are not due yet because of a
    Retry-After, a robots.txt retry or a back-off (their own next fetch time
    or their host's block is in the future); ``waiting_next_s`` and
    ``waiting_until_s`` are the earliest and the latest of those times
    (None: nothing waits); ``held`` counts the URLs of hosts whose operator
    page limit is reached (they wait for the limit to be raised). ``hosts`` has one row per
    host (see :func:`host_rows`); ``pages_per_s`` is the average over the
    time the crawl was active (:func:`active_rate`), ``pages_per_s_recent``
    over the last minute (:func:`recent_rate`), ``eta_s`` the
    time left for the URLs still to fetch at the recent rate (None when it
    cannot be estimated).
    """

    by_status: Counter = field(default_factory=Counter)
    by_host: dict[str, Counter] = field(default_factory=lambda: defaultdict(Counter))
    reasons: Counter = field(default_factory=Counter)
    rejected: Counter = field(default_factory=Counter)
    due_now: int = 0
    in_flight: int = 0
    lag: dict[str, int] = field(default_factory=dict)
    deadletters: int = 0
    robots_truncated: list[str] = field(default_factory=list)  # origins whose robots.txt was cut at the limit
    rendered: int = 0
    render_failures: Counter = field(default_factory=Counter)
    render_refused: Counter = field(default_factory=Counter)
    waiting: int = 0
    waiting_until_s: float | None = None
    waiting_next_s: float | None = None
    hosts: list[dict[str, Any]] = field(default_factory=list)
    pages_per_s: float = 0.0
    pages_per_s_recent: float = 0.0
    eta_s: float | None = None
    audit_violations: int = 0
    at_s: float = 0.0
    workers: int | None = None  # members of the worker group (None: unknown)
    group_state: str = ""  # the group's state at the broker (Stable, PreparingRebalance, Empty, ...)
    unassigned: dict[str, list[int]] = field(default_factory=dict)  # agent topic → partitions no worker has
    held: int = 0  # DISCOVERED URLs of hosts whose operator page limit is reached (squall host limit)
    paused: dict[int, str] = field(default_factory=dict)  # partition → who paused it, when (squall crawl pause)

    @property
    def idle(self) -> bool:
        """Nothing due now, handed out and unanswered, left to consume, or waiting for a block to end."""
        return not self.busy_without_waits() and self.waiting == 0

    def busy_without_waits(self) -> bool:
        """Something is due, in flight or unconsumed (URLs waiting for a block not counted)."""
        return not (self.due_now == 0 and self.in_flight == 0 and not any(self.lag.values()))

    def settled(self, max_wait_s: float) -> bool:
        """Idle, or only waiting for blocks that all end more than ``max_wait_s`` (s) after the report."""
        if self.busy_without_waits():
            return False
        return self.waiting == 0 or (self.waiting_next_s or 0.0) > self.at_s + max_wait_s

    def to_json(self) -> dict[str, Any]:
        return {
            "total": sum(self.by_status.values()),
            "by_status": dict(self.by_status),
            "by_host": {h: dict(c) for h, c in sorted(self.by_host.items())},
            "reasons": dict(self.reasons),
            "rejected": dict(self.rejected),
            "due_now": self.due_now,
            "in_flight": self.in_flight,
            "lag": self.lag,
            "deadletters": self.deadletters,
            "idle": self.idle,
            "robots_truncated": len(self.robots_truncated),
            "robots_truncated_origins": self.robots_truncated,
            "render": {
                "rendered": self.rendered,
                "failures": dict(self.render_failures),
                "refused": dict(self.render_refused),
            },
            "waiting": self.waiting,
            "waiting_next_s": self.waiting_next_s,
            "waiting_until_s": self.waiting_until_s,
            "hosts": self.hosts,
            "pages_per_s": round(self.pages_per_s, 3),
            "pages_per_s_recent": round(self.pages_per_s_recent, 3),
            "eta_s": None if self.eta_s is None else round(self.eta_s, 1),
            "audit_violations": self.audit_violations,
            "workers": self.workers,
            "group_state": self.group_state,
            "unassigned": self.unassigned,
            "held": self.held,
            "paused": self.paused,
            "at_s": self.at_s,
        }

    def to_text(self, hosts: bool = True) -> str:
        """What ``squall status`` prints; ``hosts=False`` leaves the per-host table out (a snapshot line set)."""
        lines = [
            f"URLs: {sum(self.by_status.values())}   due now: {self.due_now}   in flight: {self.in_flight}   "
            f"unconsumed: {sum(self.lag.values())}   dead letters: {self.deadletters}"
        ]
        lines.append("  " + "  ".join(f"{s.value}={self.by_status.get(s.value, 0)}" for s in Status))
        if self.workers is not None:
            lines.append(f"workers: {self.workers} ({self.group_state or 'no group'})")
        if self.unassigned:
            lines.append(unassigned_line(self.unassigned))
        if self.waiting:
            lines.append(
                f"waiting: {self.waiting} URLs (Retry-After, robots.txt retry or back-off) "
                f"until {clock(self.waiting_until_s)} (next at {clock(self.waiting_next_s)})"
            )
        lines.append(
            f"pages/s: {self.pages_per_s:.2f} (last minute {self.pages_per_s_recent:.2f})   "
            f"ETA: {duration(self.eta_s)}   audit violations: {self.audit_violations}"
        )
        if self.paused:
            lines.append(f"PAUSED: partitions {sorted(self.paused)} ({next(iter(self.paused.values()))})")
        if self.held:
            lines.append(f"held by an operator's page limit: {self.held} URLs (squall hosts shows which)")
        if self.reasons:
            lines.append("reasons: " + ", ".join(f"{r}={n}" for r, n in self.reasons.most_common()))
        if self.rendered or self.render_failures:
            failures = ", ".join(f"{r}={n}" for r, n in self.render_failures.most_common()) or "none"
            lines.append(f"rendered: {self.rendered}   render failures: {failures}")
            if self.render_refused:
                lines.append(
                    "browser requests refused: " + ", ".join(f"{r}={n}" for r, n in self.render_refused.most_common())
                )
        if self.rejected:
            lines.append("rejected (not admitted): " + ", ".join(f"{r}={n}" for r, n in self.rejected.most_common()))
        if self.robots_truncated:
            shown = ", ".join(self.robots_truncated[:5]) + (", ..." if len(self.robots_truncated) > 5 else "")
            lines.append(
                f"robots.txt cut at http.robots.content.limit: {len(self.robots_truncated)} origin(s) ({shown})"
            )
        if not hosts:
            return "\n".join(lines)
        lines.append(f"{'host':40} " + " ".join(f"{s.value:>12}" for s in Status))
        for host, counts in sorted(self.by_host.items()):
            lines.append(f"{host:40} " + " ".join(f"{counts.get(s.value, 0):>12}" for s in Status))
        steered = [row for row in self.hosts if row.get("operator")]
        if steered:
            lines.append("operator commands (the last one of each host):")
            lines.extend(f"  {row['host']}: {row['operator']}" for row in sorted(steered, key=lambda r: r["host"]))
        return "\n".join(lines)


def unassigned_line(unassigned: Mapping[str, list[int]]) -> str:
    """The warning line of topics the agents consume that no worker of the group was assigned."""
    shown = ", ".join(f"{t} {sorted(p)}" for t, p in sorted(unassigned.items()))
    return (
        f"NOT ASSIGNED to any worker: {shown} (the group formed before the topic was in the broker's metadata; "
        "the workers rejoin by themselves, else restart one)"
    )


def unassigned_partitions(
    needed: Mapping[str, int], state: str, members: Mapping[str, Mapping[str, list[int]]]
) -> dict[str, list[int]]:
    """Partitions of ``needed`` (topic → partition count) that no member of a Stable group was assigned.

    ``members``: member id → topic → partitions. Only a Stable group with
    members is judged (during a rebalance nothing is assigned yet).
    """
    if state != "Stable" or not members:
        return {}
    held: dict[str, set[int]] = defaultdict(set)
    for assignment in members.values():
        for topic, partitions in assignment.items():
            held[topic].update(partitions)
    out = {t: sorted(set(range(n)) - held[t]) for t, n in needed.items()}
    return {t: p for t, p in out.items() if p}


def clock(at_s: float | None) -> str:
    """``HH:MM:SS`` local time of a Unix time, ``-`` for None."""
    return "-" if at_s is None else time.strftime("%H:%M:%S", time.localtime(at_s))


def duration(seconds: float | None) -> str:
    """``1h02m``, ``3m05s`` or ``12s``; ``-`` for None."""
    if seconds is None:
        return "-"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def build_report(
    urls: Mapping[str, Mapping[str, Any]],
    hosts: Mapping[str, Mapping[str, Any]],
    now_s: float,
    lag: Mapping[str, int] | None = None,
    deadletters: int = 0,
    robots: Mapping[str, Mapping[str, Any]] | None = None,
    audits: Mapping[str, Mapping[str, Any]] | None = None,
) -> Report:
    """Aggregate the latest url, host, robots and audit records (as dicts) into a :class:`Report`.

    ``robots`` maps a robots.txt origin (``http://host:port``) to its RobotsEntry dict (truncated
    robots.txt are counted; the state is shown on the rows of the hosts of that origin);
    ``audits`` maps a partition key to its HostAudit dict.
    """
    report = Report(
        lag=dict(lag or {}),
        deadletters=deadletters,
        at_s=now_s,
        robots_truncated=sorted(o for o, entry in (robots or {}).items() if entry.get("truncated")),
    )
    fetched_at: list[float] = []
    records = {key: HostRecord.from_dict(value) for key, value in hosts.items()}  # the one reader of a host record
    for rec in map(url_view, urls.values()):  # the one reader of a URL record for reports
        status = rec.status
        report.by_status[status] += 1
        report.by_host["?" if rec.key is None else rec.key][status] += 1
        if rec.reason:
            report.reasons[rec.reason] += 1
        _count_render(report, rec.metadata)
        if status == Status.FETCHED.value and rec.last_fetch_at_s:
            fetched_at.append(rec.last_fetch_at_s)
        host = records.get(rec.key or "")
        # the host's block: a Retry-After or back-off, or an operator's (squall host block)
        blocked = max(host.blocked_until_s, host.operator_blocked_until_s) if host is not None else 0.0
        ready = due_at_s(status, rec.next_fetch_at_s, blocked)  # the one "due"
        if ready is None:
            continue
        if host is not None and held_by_limit(host):  # an operator's page limit holds it: neither due nor waiting
            report.held += 1
            continue
        if ready <= now_s:
            report.due_now += 1
        elif status in WAITING_STATUSES:
            report.waiting += 1
            report.waiting_until_s = max(report.waiting_until_s or 0.0, ready)
            report.waiting_next_s = min(report.waiting_next_s or ready, ready)
    for record in records.values():
        report.in_flight += len(record.in_flight)
        for reason, n in record.rejected.items():
            report.rejected[reason] += n
    _rates(report, fetched_at, now_s)
    report.hosts = host_rows(report.by_host, records, audits or {}, robots or {}, now_s)
    report.audit_violations = sum(int(a.get("violations") or 0) for a in (audits or {}).values())
    return report


def recent_rate(fetched_at: list[float], now_s: float, window_s: float = RECENT_WINDOW_S) -> float:
    """Pages per second over the last ``window_s`` seconds before ``now_s`` (times: Unix s).

    Divided by the time the window really covers — from its first fetch to
    ``now_s``, at least 1 s — not by the whole window: 40 pages in a crawl
    that began 10 s ago are 4 pages/s, not 0.67. A crawl that stopped inside
    the window is diluted as it should be (its first fetch is then early).
    """
    recent = [t for t in fetched_at if now_s - window_s <= t <= now_s]
    if not recent:
        return 0.0
    return len(recent) / max(now_s - min(recent), 1.0)


def active_rate(fetched_at: list[float], idle_gap_s: float = IDLE_GAP_S) -> float:
    """Pages per second over the time the crawl was active: gaps between two fetches longer than
    ``idle_gap_s`` (s; an idle crawl waiting for its next seed) are left out. At least 1 s of activity."""
    times = sorted(fetched_at)
    if not times:
        return 0.0
    active_s = sum(gap for a, b in itertools.pairwise(times) if (gap := b - a) <= idle_gap_s)
    return len(times) / max(active_s, 1.0)


def _rates(report: Report, fetched_at: list[float], now_s: float) -> None:
    if not fetched_at:
        return
    report.pages_per_s = active_rate(fetched_at)
    report.pages_per_s_recent = recent_rate(fetched_at, now_s)
    left = report.by_status.get(Status.DISCOVERED.value, 0)
    if left == 0:
        report.eta_s = 0.0
    elif report.pages_per_s_recent > 0:
        report.eta_s = left / report.pages_per_s_recent


def paused_partitions(control: Mapping[str, Mapping[str, Any]]) -> dict[int, str]:
    """The paused partitions of the control changelog's records (``crawl:<p>`` → CrawlControl dict), each with
    its last crawl-wide command for people (``crawl.pause by alice@box at 10:00:00``)."""
    out: dict[int, str] = {}
    for key, record in control.items():
        if key.startswith("crawl:") and key[6:].isdigit() and record.get("paused") is True:
            out[int(key[6:])] = last_command(record.get("log") or []) or ""
    return out


def held_by_limit(host: HostRecord) -> bool:
    """Whether a host's operator page limit is reached (its URLs are held, not handed out)."""
    return host.page_limit is not None and host.pages_fetched >= host.page_limit


def last_command(log: Sequence[Mapping[str, Any]]) -> str | None:
    """The last entry of an operator log for people (``host.block by alice@box at 10:00:00 (until_s=...)``)."""
    if not log:
        return None
    entry = log[-1]
    args = ", ".join(f"{k}={v}" for k, v in (entry.get("args") or {}).items())
    return f"{entry.get('op')} by {entry.get('by')} at {clock(entry.get('at'))}" + (f" ({args})" if args else "")


def operator_fields(host: HostRecord, now_s: float) -> dict[str, Any]:
    """A host row's operator state: ``operator_blocked_until_s`` (None when past) and ``block_reason``,
    ``page_limit``, ``pages_fetched``, ``operator_delay_s``, and ``operator`` (the last command applied,
    :func:`last_command`; None when none)."""
    blocked = host.operator_blocked_until_s
    return {
        "operator_blocked_until_s": blocked if blocked > now_s else None,
        "block_reason": host.operator_block_reason if blocked > now_s else None,
        "page_limit": host.page_limit,
        "pages_fetched": host.pages_fetched,
        "operator_delay_s": host.operator_delay_s,
        "operator": last_command(host.operator_log),
    }


def host_rows(
    by_host: Mapping[str, Counter],
    hosts: Mapping[str, HostRecord],
    audits: Mapping[str, Mapping[str, Any]],
    robots: Mapping[str, Mapping[str, Any]],
    now_s: float,
) -> list[dict[str, Any]]:
    """One row per host for the live view and the dashboard (busiest first).

    Fields: ``host``, ``urls``, ``fetched``, ``discovered``, ``errors``,
    ``requests`` / ``violations`` / ``min_gap_s`` from the audit, ``delay_s``
    (the delay in force: the hosts table's pace, else the audit's last), ``next_fetch_at_s`` and
    ``blocked_until_s`` (Unix s, None when past), ``backoff_attempts``,
    ``in_flight``, ``robots`` (``rules``, ``allow_all``, ``disallow_all`` or
    ``unknown``, with the last HTTP status) and ``robots_retry_at_s``; the
    operator's state of the host (:func:`operator_fields`).
    """
    robots_of: dict[str, Mapping[str, Any]] = {}
    for origin, robots_entry in robots.items():
        name = urlsplit(origin).hostname or origin
        robots_of[name] = robots_entry
    rows: list[dict[str, Any]] = []
    for key in sorted(set(by_host) | set(hosts) | set(audits)):
        counts = by_host.get(key, Counter())
        host = hosts.get(key) or HostRecord(key=key)
        audit: Mapping[str, Any] = audits.get(key) or {}
        entry = robots_of.get(key)
        nxt, blocked = host.next_fetch_at_s, host.blocked_until_s
        rows.append(
            {
                "host": key,
                "urls": sum(counts.values()),
                "fetched": counts.get(Status.FETCHED.value, 0),
                "discovered": counts.get(Status.DISCOVERED.value, 0),
                "errors": counts.get(Status.ERROR.value, 0) + counts.get(Status.FETCH_ERROR.value, 0),
                "requests": int(audit.get("requests") or 0),
                "violations": int(audit.get("violations") or 0),
                "min_gap_s": audit.get("min_gap_s"),
                "required_at_min_gap_s": audit.get("required_at_min_gap_s"),
                # the delay in force: the durable pace (hosts table), else the audit's last one
                "delay_s": host.delay_s or audit.get("required_delay_s"),
                "next_fetch_at_s": nxt if nxt > now_s else None,
                "blocked_until_s": blocked if blocked > now_s else None,
                "backoff_attempts": int((host.backoff or {}).get("attempts") or 0),
                "in_flight": len(host.in_flight),
                "robots": "unknown"
                if entry is None
                else f"{entry.get('kind')} ({entry.get('http_status') or 'no answer'})",
                "robots_retry_at_s": None if entry is None else entry.get("retry_at_s"),
                **operator_fields(host, now_s),
            }
        )
    rows.sort(key=lambda r: (-r["requests"], -r["urls"], r["host"]))
    return rows


def _count_render(report: Report, metadata: Mapping[str, Any]) -> None:
    """Add one page's ``parse.render*`` metadata (squall.policy.render_policy) to the render counts."""
    from squall.policy.render_policy import REFUSED_KEY, RENDER_KEY

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


async def latest_records(bootstrap: Broker, topic: str) -> dict[str, dict[str, Any]]:
    """The live value of each key of a table changelog (JSON objects), tombstones applied.

    A tombstone deletes a key only in its own partition: a record that moved
    to another partition (byIP, its host's address changed) is deleted from
    the old one after it was written in the new one, and partitions are read
    interleaved.
    """
    from squall.tools.kafka_admin import read_partitioned

    live: dict[str, dict[int, dict[str, Any]]] = {}  # key → partition → latest value there
    async for partition, key, value in read_partitioned(bootstrap, topic, missing_ok=True):
        if key is None:
            continue
        k = key.decode("utf-8", errors="replace")
        if value is None:
            live.get(k, {}).pop(partition, None)
            continue
        try:
            live.setdefault(k, {})[partition] = json.loads(value)
        except ValueError:
            continue
    return {k: next(iter(by_partition.values())) for k, by_partition in live.items() if by_partition}


async def _committed(settings: Settings, conn: KafkaConnection | None = None) -> dict[tuple[str, int], int] | None:
    """The worker group's committed offsets ((topic, partition) → offset); None when the broker cannot tell.

    ``conn``: how to reach the broker (default: ``settings``' :class:`KafkaConnection`).
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(**(conn or KafkaConnection.from_settings(settings)).client_kwargs())
    try:
        await admin.start()
        committed = await admin.list_consumer_group_offsets(settings.topology_id)
    except KafkaError:  # e.g. the group coordinator is not ready yet
        return None
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): m.offset for tp, m in committed.items() if m.offset >= 0}


async def _lag(
    settings: Settings, committed: Mapping[tuple[str, int], int] | None, conn: KafkaConnection | None = None
) -> dict[str, int]:
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import end_offsets

    if committed is None:  # unknown counts as busy
        return {"unknown": 1}
    conn = conn or KafkaConnection.from_settings(settings)
    lag: dict[str, int] = {}
    for suffix in ("status", "fetch", "signals"):
        topic = topic_name(settings, suffix)
        ends = await end_offsets(conn, topic, missing_ok=True)
        lag[suffix] = sum(end - committed.get((topic, partition), 0) for partition, end in ends.items())
    return lag


async def unapplied_signals(
    settings: Settings, committed: Mapping[tuple[str, int], int], conn: KafkaConnection | None = None
) -> list[SignalMessage]:
    """The signals the worker group has not consumed yet (after its committed offsets), oldest first per partition.

    A fetch result carries its signal (the status topic); a signal with no
    result travels alone (the signals topic). A worker that stops cleanly
    hands the URLs waiting at its fetcher back, each with its signal, and
    leaves the group before they are applied: until a worker owns those
    partitions again, the hosts changelog still lists the hand-outs in
    flight (:func:`apply_unapplied`).
    """
    from squall.errors import MessageError
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import read_partitioned

    conn = conn or KafkaConnection.from_settings(settings)
    out: list[SignalMessage] = []
    for suffix in ("status", "signals"):
        topic = topic_name(settings, suffix)
        starts = {partition: offset for (t, partition), offset in committed.items() if t == topic}
        async for _partition, _key, value in read_partitioned(conn, topic, missing_ok=True, starts=starts):
            if value is None or (suffix == "status" and b'"signal"' not in value):
                continue
            try:
                signal = (
                    SignalMessage.from_bytes(value) if suffix == "signals" else StatusMessage.from_bytes(value).signal
                )
            except MessageError:  # the agent dead-letters it; nothing to apply
                continue
            if signal is not None:
                out.append(signal)
    return out


def apply_unapplied(
    hosts: Mapping[str, Mapping[str, Any]], signals: list[SignalMessage], config: PaceConfig, remembered: int
) -> dict[str, dict[str, Any]]:
    """``hosts`` (key → HostRecord dict) as the regulator will make them once it applies ``signals``.

    The same :func:`squall.policy.host_pacing.apply_signal` the regulator
    calls: a hand-out answered on the signals topic is no longer in flight,
    even when no worker has applied the answer yet. A record that does not
    decode is left as it is.
    """
    from squall.policy.host_pacing import apply_signal

    out = {k: dict(v) for k, v in hosts.items()}
    for signal in signals:
        raw = out.get(signal.key)
        try:
            host = HostRecord(key=signal.key) if raw is None else HostRecord.from_dict(raw)
            out[signal.key] = apply_signal(host, signal, config, remembered).to_dict()
        except (ValueError, TypeError, KeyError):
            continue
    return out


async def group_members(
    settings: Settings, conn: KafkaConnection | None = None
) -> tuple[str, dict[str, dict[str, list[int]]]] | None:
    """The worker group's state and each member's assignment (member id → topic → partitions).

    Read from the group coordinator (DescribeGroups) through ``conn`` (default:
    ``settings``' :class:`KafkaConnection`); None when the broker cannot tell
    (no coordinator yet, an outage).
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.coordinator.protocol import ConsumerProtocol
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(**(conn or KafkaConnection.from_settings(settings)).client_kwargs())
    try:
        await admin.start()
        responses = await admin.describe_consumer_groups([settings.topology_id])
    except KafkaError:
        return None
    finally:
        await admin.close()
    for response in responses:
        for group in response.to_object()["groups"]:
            if group.get("group", group.get("group_id")) != settings.topology_id or group["error_code"]:
                continue
            members: dict[str, dict[str, list[int]]] = {}
            for member in group["members"]:
                raw = member["member_assignment"]
                assignment = ConsumerProtocol.ASSIGNMENT.decode(raw).assignment if raw else []
                members[member["member_id"]] = {topic: list(partitions) for topic, partitions in assignment}
            return str(group.get("state", group.get("group_state", ""))), members
    return None


async def collect_records(settings: Settings) -> dict[str, Any]:
    """The latest table records (``urls``, ``hosts``, ``audit``, ``robots``: key → dict), ``lag`` and
    ``deadletters`` of ``settings``' topology, read from the broker."""
    from squall.policy.topics import changelog_name, topic_name
    from squall.tools.kafka_admin import end_offsets

    bootstrap = KafkaConnection.from_settings(settings)
    out: dict[str, Any] = {
        t: await latest_records(bootstrap, changelog_name(settings, t))
        for t in ("urls", "hosts", "audit", "robots", "control")
    }
    out["deadletters"] = sum(
        (await end_offsets(bootstrap, topic_name(settings, "deadletter"), missing_ok=True)).values()
    )
    committed = await _committed(settings, bootstrap)
    out["lag"] = await _lag(settings, committed, bootstrap)
    if committed is not None and (out["lag"].get("signals") or out["lag"].get("status")):
        from squall.policy.pace import PaceConfig

        out["hosts"] = apply_unapplied(
            out["hosts"],
            await unapplied_signals(settings, committed, bootstrap),
            PaceConfig.from_settings(settings),
            settings.frontier_signals_remembered,
        )
    out["group"] = await group_members(settings, bootstrap)
    return out


def report_of(records: Mapping[str, Any], now_s: float, needed: Mapping[str, int] | None = None) -> Report:
    """The :class:`Report` of :func:`collect_records`' result at ``now_s``.

    ``needed``: the topics the agents consume (topic → partitions), judged
    against the group's assignment (``records["group"]``, when known).
    """
    report = build_report(
        records["urls"],
        records["hosts"],
        now_s,
        records["lag"],
        records["deadletters"],
        audits=records["audit"],
        robots=records["robots"],
    )
    report.paused = paused_partitions(records.get("control") or {})
    group = records.get("group")
    if group is not None:
        state, members = group
        report.workers, report.group_state = len(members), state
        report.unassigned = unassigned_partitions(needed or {}, state, members)
    return report


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
