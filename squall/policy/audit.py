"""The politeness audit: what the crawler itself measured about the requests it sent to each queue.

Pure (no I/O, no clock: every time is passed in). One :class:`HostAudit`
per queue key (host, or domain per ``partition.url.mode``) is the value of
the ``audit`` table (key: partition key), so it survives restarts and
rebalances: a host has one owner at a time (docs/architecture.md invariant 1)
and the owner continues the record it recovered. Every request to the host
counts — pages, robots.txt and each of its redirect hops, sitemaps,
renders (invariant 2) — and is fed to :func:`record_request` with its start
time and the delay in force at that moment.

Rules (all times Unix seconds, all durations seconds):

* squall's delay runs from the *end* of one fetch to the *start* of the next
  (StormCrawler's ``fetcher.server.delay``), so when the crawl is polite the
  gap between two *starts* is always ≥ the delay in force; a start-to-start
  gap below ``required_delay_s - tolerance_s`` is a violation.
* A request that starts before the end of the last Retry-After / back-off
  block seen for the host (``blocked_until_s``, less the tolerance) is a
  violation too, and is also counted in ``inside_block``.
* A request is one violation at most, whatever it broke.

The tolerance (``audit.tolerance.secs``, default 10 ms) absorbs clock
resolution between the moment the fetcher records a start and the moment
the request leaves; it is never added to the delay itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from squall.policy.codec import evolve, field_values

WORST_KEPT = 5  # violations remembered per host (the latest), for the report


@dataclass(frozen=True)
class Violation:
    """One request that started too early: ``gap_s`` after the previous start (None: first request)."""

    start_s: float
    gap_s: float | None
    required_delay_s: float
    blocked_until_s: float


@dataclass(frozen=True)
class HostAudit:
    """The audit of one queue (the ``audit`` table value). Times: Unix seconds; durations: seconds.

    ``min_gap_s`` is the smallest start-to-start gap seen (None until two
    requests); ``required_at_min_gap_s`` the delay in force for that request;
    ``min_margin_s`` the smallest ``gap - required`` (negative = too early);
    ``required_delay_s`` the delay in force at the last request;
    ``block_from_s`` / ``blocked_until_s`` the last Retry-After / back-off
    block seen (0.0 = none); ``inside_block`` the requests that started
    inside a block; ``recent`` the last :data:`WORST_KEPT` violations.
    """

    key: str
    requests: int = 0
    first_start_s: float | None = None
    last_start_s: float | None = None
    min_gap_s: float | None = None
    required_at_min_gap_s: float | None = None
    min_margin_s: float | None = None
    required_delay_s: float = 0.0
    violations: int = 0
    block_from_s: float = 0.0
    blocked_until_s: float = 0.0
    inside_block: int = 0
    recent: tuple[Violation, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        d = field_values(self)
        d["recent"] = [field_values(v) for v in self.recent]
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HostAudit:
        """Rebuild from :meth:`to_dict`; unknown fields are ignored (records of a newer version).

        Raises:
            TypeError, ValueError: not a mapping of the expected shape.
        """
        known = cls.__dataclass_fields__
        values = {k: v for k, v in d.items() if k in known}
        values["recent"] = tuple(Violation(**v) for v in values.get("recent") or ())
        return cls(**values)


def audits_of(values: Iterable[Any]) -> dict[str, HostAudit]:
    """Partition key → :class:`HostAudit` of stored ``audit`` values (table or changelog: :meth:`HostAudit.to_dict`
    dicts), merged by key (:func:`merge`); a value of another shape is skipped (reports never fail on one)."""
    out = []
    for value in values:
        if isinstance(value, Mapping):
            try:
                out.append(HostAudit.from_dict(value))
            except (TypeError, ValueError):
                continue
    return merge(out)


def record_request(
    audit: HostAudit | None,
    key: str,
    start_s: float,
    required_delay_s: float,
    blocked_until_s: float,
    tolerance_s: float,
) -> HostAudit:
    """Return the audit of ``key`` after a request that started at ``start_s``.

    ``audit`` is the record so far (None: the first request ever seen for
    ``key``); ``required_delay_s`` the delay in force (s) for this request,
    end of the previous fetch to start of this one; ``blocked_until_s`` the
    end of the Retry-After / back-off block the fetcher knows (0.0 = none);
    ``tolerance_s`` the allowed measurement slack (s, ≥ 0).

    Raises:
        ValueError: a negative delay or tolerance.
    """
    if required_delay_s < 0 or tolerance_s < 0:
        raise ValueError(f"negative delay {required_delay_s} or tolerance {tolerance_s}")
    a = audit if audit is not None else HostAudit(key=key)
    # a block known before this request, or one the fetcher says is in force now
    block_from, block_until = a.block_from_s, a.blocked_until_s
    if blocked_until_s > block_until:
        # the block began after the previous request (its answer set it), or now if it is news at this start
        block_from = a.last_start_s if a.last_start_s is not None and a.last_start_s < start_s else start_s
        block_until = blocked_until_s
    inside = start_s < block_until - tolerance_s
    gap = None if a.last_start_s is None else start_s - a.last_start_s
    too_soon = gap is not None and gap < required_delay_s - tolerance_s
    changes: dict[str, Any] = {}
    if gap is not None:
        margin = gap - required_delay_s
        if a.min_gap_s is None or gap < a.min_gap_s:
            changes.update(min_gap_s=gap, required_at_min_gap_s=required_delay_s)
        if a.min_margin_s is None or margin < a.min_margin_s:
            changes["min_margin_s"] = margin
    if too_soon or inside:
        v = Violation(start_s=start_s, gap_s=gap, required_delay_s=required_delay_s, blocked_until_s=block_until)
        changes.update(violations=a.violations + 1, recent=((*a.recent, v))[-WORST_KEPT:])
    return evolve(
        a,
        requests=a.requests + 1,
        last_start_s=start_s,
        required_delay_s=required_delay_s,
        first_start_s=a.first_start_s if a.first_start_s is not None else start_s,
        block_from_s=block_from,
        blocked_until_s=block_until,
        inside_block=a.inside_block + (1 if inside else 0),
        **changes,
    )


def merge(records: Iterable[HostAudit]) -> dict[str, HostAudit]:
    """One audit per key from records of several workers or changelog reads.

    A host has one owner at a time and the owner carries the record on (it
    recovers it from the table), so for one key the record with the most
    requests (then the latest start) is the whole history; the others are
    older copies of it.
    """
    out: dict[str, HostAudit] = {}
    for r in records:
        best = out.get(r.key)
        if best is None or (r.requests, r.last_start_s or 0.0) > (best.requests, best.last_start_s or 0.0):
            out[r.key] = r
    return out


def worst_first(audits: Iterable[HostAudit]) -> list[HostAudit]:
    """Hosts ordered worst first: most violations, then the smallest margin, then the key."""
    return sorted(
        audits, key=lambda a: (-a.violations, a.min_margin_s if a.min_margin_s is not None else float("inf"), a.key)
    )


def summary(audits: Iterable[HostAudit]) -> dict[str, Any]:
    """The JSON of ``squall audit --json``: totals and one entry per host, worst first."""
    hosts = worst_first(audits)
    return {
        "hosts": len(hosts),
        "requests": sum(a.requests for a in hosts),
        "violations": sum(a.violations for a in hosts),
        "inside_block": sum(a.inside_block for a in hosts),
        "by_host": [a.to_dict() for a in hosts],
    }
