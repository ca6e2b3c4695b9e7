"""The :class:`Report` of ``squall status`` and how it prints: text for people, JSON for tools.

Built from the table records by :func:`squall.cli.status_counts.build_report`;
times are Unix seconds, printed as local ``HH:MM:SS`` (:func:`clock`) and
durations as ``1h02m`` / ``3m05s`` / ``12s`` (:func:`duration`).
"""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.policy.reasons import Status


@dataclass
class Report:
    """What ``squall status`` prints (``--json`` prints :meth:`to_json`). Times: Unix seconds.

    ``waiting`` counts DISCOVERED URLs that are not due yet because of a
    Retry-After, a robots.txt retry or a back-off (their own next fetch time
    or their host's block is in the future); ``waiting_next_s`` and
    ``waiting_until_s`` are the earliest and the latest of those times
    (None: nothing waits); ``held`` counts the URLs of hosts whose operator
    page limit is reached (they wait for the limit to be raised). ``hosts`` has one row per
    host (see :func:`squall.cli.status_counts.host_rows`); ``pages_per_s`` is the average over the
    time the crawl was active (:func:`~squall.cli.status_counts.active_rate`), ``pages_per_s_recent``
    over the last minute (:func:`~squall.cli.status_counts.recent_rate`), ``eta_s`` the
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
