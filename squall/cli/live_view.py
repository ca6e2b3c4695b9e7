"""``squall status --watch``: a live view of the crawl (rich), refreshed from the changelogs.

Each refresh is one :func:`squall.cli.status.collect` (any machine that
reaches the broker can watch). The view shows the totals, pages/s, the ETA
when it can be estimated, the URLs waiting for a Retry-After / robots.txt
retry / back-off ("waiting until T"), the busiest hosts and the most
blocked hosts with their delay in force, next fetch time, blocked-until,
back-off and robots.txt state, and the politeness audit's violations.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from squall.cli.status import collect
from squall.cli.status_report import Report, clock, duration, unassigned_line
from squall.policy.reasons import Status

if TYPE_CHECKING:
    from squall.settings import Settings

TOP_ROWS = 10  # hosts per table


def _secs(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}s"


def render(report: Report) -> Group:
    """The rich renderable of one report (pure: everything comes from ``report``)."""
    total = sum(report.by_status.values())
    head = Text()
    head.append(f"squall  {clock(report.at_s)}  ", style="bold")
    head.append(f"URLs {total}  " + "  ".join(f"{s.value} {report.by_status.get(s.value, 0)}" for s in Status))
    head.append(
        f"\npages/s {report.pages_per_s:.2f} (last minute {report.pages_per_s_recent:.2f})   "
        f"ETA {duration(report.eta_s)}   due {report.due_now}   in flight {report.in_flight}   "
        f"unconsumed {sum(report.lag.values())}   dead letters {report.deadletters}   "
    )
    head.append(f"audit violations {report.audit_violations}", style="bold red" if report.audit_violations else "green")
    if report.waiting:
        head.append(
            f"\nwaiting: {report.waiting} URLs (Retry-After, robots.txt retry or back-off) "
            f"until {clock(report.waiting_until_s)} (next at {clock(report.waiting_next_s)})",
            style="yellow",
        )
    if report.unassigned:
        head.append("\n" + unassigned_line(report.unassigned), style="bold red")
    if report.idle and total:
        head.append("\nidle: nothing due, in flight, unconsumed or waiting", style="green")
    busiest = report.hosts[:TOP_ROWS]
    blocked = sorted(
        (h for h in report.hosts if h["blocked_until_s"] or h["backoff_attempts"]),
        key=lambda h: -(h["blocked_until_s"] or 0.0),
    )[:TOP_ROWS]
    parts: list[Any] = [head, _hosts_table("busiest hosts", busiest)]
    if blocked:
        parts.append(_hosts_table("most blocked hosts", blocked))
    if report.rejected:
        parts.append(Text("rejected: " + ", ".join(f"{r}={n}" for r, n in report.rejected.most_common())))
    return Group(*parts)


def _hosts_table(title: str, rows: Sequence[Mapping[str, Any]]) -> Table:
    t = Table(title=title, title_justify="left", expand=False)
    for name in (
        "host",
        "urls",
        "fetched",
        "requests",
        "delay",
        "min gap",
        "next fetch",
        "blocked until",
        "back-off",
        "robots",
        "violations",
    ):
        t.add_column(name, justify="left" if name in ("host", "robots") else "right")
    for h in rows:
        t.add_row(
            h["host"],
            str(h["urls"]),
            str(h["fetched"]),
            str(h["requests"]),
            _secs(h["delay_s"]),
            _secs(h["min_gap_s"]),
            clock(h["next_fetch_at_s"]),
            clock(h["blocked_until_s"]),
            str(h["backoff_attempts"] or "-"),
            h["robots"],
            Text(str(h["violations"]), style="bold red" if h["violations"] else ""),
        )
    return t


def watch(
    settings: Settings,
    interval_s: float = 2.0,
    until_idle: bool = False,
    timeout_s: float = 3600.0,
    max_wait_s: float = 3600.0,
    console: Console | None = None,
) -> int:
    """Refresh the view every ``interval_s`` seconds until Ctrl-C (or, with ``until_idle``, until settled).

    On a terminal the view is redrawn in place (rich); otherwise (piped,
    redirected to a file) each refresh prints a plain snapshot
    (:func:`snapshot_text`).

    Returns the exit code: 0, or 1 when ``until_idle`` and the crawl did not settle within ``timeout_s``.
    """
    console = console or Console()
    if not console.is_terminal:
        return _refresh(settings, lambda r: _print_snapshot(console, r), interval_s, until_idle, timeout_s, max_wait_s)
    with Live(console=console, auto_refresh=False, transient=False) as live:
        return _refresh(
            settings, lambda r: live.update(render(r), refresh=True), interval_s, until_idle, timeout_s, max_wait_s
        )


def snapshot_text(report: Report) -> str:
    """One plain snapshot (no terminal): a ``--- HH:MM:SS`` line, the summary of ``squall status``, whether
    the crawl is idle, and the busiest hosts (at most :data:`TOP_ROWS`) as ``host fetched/urls``."""
    lines = [f"--- {clock(report.at_s)}", report.to_text(hosts=False)]
    if report.idle and report.by_status:
        lines.append("idle: nothing due, in flight, unconsumed or waiting")
    if report.hosts:
        busiest = ", ".join(f"{h['host']} {h['fetched']}/{h['urls']}" for h in report.hosts[:TOP_ROWS])
        lines.append(f"busiest hosts (fetched/URLs): {busiest}")
    return "\n".join(lines)


def _print_snapshot(console: Console, report: Report) -> None:
    print(snapshot_text(report), file=console.file, flush=True)


def _refresh(
    settings: Settings,
    show: Callable[[Report], object],
    interval_s: float,
    until_idle: bool,
    timeout_s: float,
    max_wait_s: float,
) -> int:
    deadline = time.monotonic() + timeout_s
    streak = 0
    while True:
        report = asyncio.run(collect(settings))
        show(report)
        streak = streak + 1 if report.settled(max_wait_s) and report.by_status else 0
        if until_idle and streak >= 2:
            return 0
        if until_idle and time.monotonic() > deadline:
            return 1
        try:
            time.sleep(interval_s)
        except KeyboardInterrupt:
            return 0
