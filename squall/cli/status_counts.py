"""The numbers of a ``squall status`` :class:`~squall.cli.status_report.Report`, from the latest table records.

Pure functions of the records (dicts as the changelogs hold them) and a
clock reading ``now_s`` (Unix seconds); no broker access
(:mod:`squall.cli.status_read` reads the records).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from squall.cli.status_report import Report, clock
from squall.errors import MessageError
from squall.policy.audit import HostAudit, audits_of
from squall.policy.control import CrawlControl
from squall.policy.frontier import HostRecord
from squall.policy.handout import due_at_s
from squall.policy.reasons import Status
from squall.policy.robots_status import RobotsEntry
from squall.policy.url_view import url_view

WAITING_STATUSES = (Status.DISCOVERED.value,)  # rescheduled by a Retry-After, robots.txt retry or back-off
RECENT_WINDOW_S = 60.0  # pages/s "now" is measured over this window (s)
# a gap without any fetch longer than this (s) is idle time (e.g. waiting for the next seed), not crawl
# time, for the average pages/s; longer than the delays a polite crawl of a few hosts waits between pages
IDLE_GAP_S = 120.0


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
    ``audits`` maps a partition key to its HostAudit dict. A robots or audit record of another
    shape is left out.
    """
    entries = robots_entries(robots or {})
    report = Report(
        lag=dict(lag or {}),
        deadletters=deadletters,
        at_s=now_s,
        robots_truncated=sorted(o for o, entry in entries.items() if entry.truncated),
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
    audited = audits_of((audits or {}).values())  # the one reader of an audit record
    report.hosts = host_rows(report.by_host, records, audited, entries, now_s)
    report.audit_violations = sum(a.violations for a in audited.values())
    return report


def robots_entries(robots: Mapping[str, Any]) -> dict[str, RobotsEntry]:
    """Origin → :class:`RobotsEntry` of robots-changelog records (origin → RobotsEntry dict); others left out."""
    out: dict[str, RobotsEntry] = {}
    for origin, value in robots.items():
        try:
            out[origin] = RobotsEntry.from_dict(value)
        except MessageError:
            continue
    return out


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
        if key.startswith("crawl:") and key[6:].isdigit() and (crawl := CrawlControl.from_dict(record)).paused:
            out[int(key[6:])] = last_command(crawl.log) or ""
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
    audits: Mapping[str, HostAudit],
    robots: Mapping[str, RobotsEntry],
    now_s: float,
) -> list[dict[str, Any]]:
    """One row per host for the live view and the dashboard (busiest first).

    Fields: ``host``, ``urls``, ``fetched``, ``discovered``, ``errors``,
    ``requests`` / ``violations`` / ``min_gap_s`` from the audit, ``delay_s``
    (the delay in force: the hosts table's pace, else the audit's last), ``next_fetch_at_s`` and
    ``blocked_until_s`` (Unix s, None when past), ``backoff_attempts``,
    ``in_flight``, ``robots`` (``rules``, ``allow_all``, ``disallow_all`` or
    ``unknown``, with the last HTTP status) and ``robots_retry_at_s``; the
    operator's state of the host (:func:`operator_fields`). ``audits``: partition key → its audit;
    ``robots``: robots.txt origin → its entry.
    """
    robots_of: dict[str, RobotsEntry] = {}
    for origin, robots_entry in robots.items():
        name = urlsplit(origin).hostname or origin
        robots_of[name] = robots_entry
    rows: list[dict[str, Any]] = []
    for key in sorted(set(by_host) | set(hosts) | set(audits)):
        counts = by_host.get(key, Counter())
        host = hosts.get(key) or HostRecord(key=key)
        audit = audits.get(key) or HostAudit(key=key)  # none: no request audited yet
        entry = robots_of.get(key)
        nxt, blocked = host.next_fetch_at_s, host.blocked_until_s
        rows.append(
            {
                "host": key,
                "urls": sum(counts.values()),
                "fetched": counts.get(Status.FETCHED.value, 0),
                "discovered": counts.get(Status.DISCOVERED.value, 0),
                "errors": counts.get(Status.ERROR.value, 0) + counts.get(Status.FETCH_ERROR.value, 0),
                "requests": audit.requests,
                "violations": audit.violations,
                "min_gap_s": audit.min_gap_s,
                "required_at_min_gap_s": audit.required_at_min_gap_s,
                # the delay in force: the durable pace (hosts table), else the audit's last one (None: no audit)
                "delay_s": host.delay_s or (audit.required_delay_s if key in audits else None),
                "next_fetch_at_s": nxt if nxt > now_s else None,
                "blocked_until_s": blocked if blocked > now_s else None,
                "backoff_attempts": host.backoff_attempts,
                "in_flight": len(host.in_flight),
                "robots": "unknown" if entry is None else f"{entry.kind.value} ({entry.http_status or 'no answer'})",
                "robots_retry_at_s": None if entry is None else entry.retry_at_s,
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


def report_of(records: Mapping[str, Any], now_s: float, needed: Mapping[str, int] | None = None) -> Report:
    """The :class:`Report` of :func:`squall.cli.status_read.collect_records`' result at ``now_s``.

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
