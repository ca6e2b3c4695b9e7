"""What a worker tells about itself (a helper, no agent): the politeness audit and the metrics it counts.

* :func:`audit_request` is called right before every HTTP request the
  fetcher sends (pages in :mod:`agents.fetcher`, robots.txt and each redirect
  hop in :mod:`agents.robots`). It updates the host's
  :class:`squall.policy.audit.HostAudit`, written to the ``audit`` table per
  batch (:class:`AuditBuffer`, ``audit.flush.secs``). Like the robots
  table write, it must run inside the fetch event of the host's partition
  (the fetch tasks carry that event), so the changelog record lands on the
  partition that owns the host and survives restarts and rebalances.
* :func:`observed` holds the worker's counts (:class:`Observed`: the metrics,
  the pages of the last minute, the audit buffer), created on first use and
  held by the app (``app.squall_observed``); ``GET /metrics`` serves them
  (:mod:`agents.metrics_page`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from agents.table_gauges import TableGauges
from agents.worker_state import state
from squall.net.http import FetchResult
from squall.policy.audit import HostAudit, record_request
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.reasons import Status
from squall.policy.records import StatusMessage
from squall.worker.metrics import Metrics, RateWindow, robots_outcome
from topology import app, audit_table, settings

log = logging.getLogger("squall.observe")


@dataclass
class _Audited:
    """One queue's audit as this worker holds it: the record, whether the table lags it, when it was written."""

    owned_since_s: float | None
    audit: HostAudit
    dirty: bool
    written_at_s: float


class AuditBuffer:
    """The politeness audit of the queues this worker fetches, written to the ``audit`` table per batch.

    Each queue's :class:`squall.policy.audit.HostAudit` is kept here and
    written at most every ``audit.flush.secs`` while the queue is fetched,
    at once when a request breaks the delay in force, and when the queue
    goes idle (:meth:`flush_if_idle`, called by the status updater with the
    host's record). Every write runs inside an event of the queue's
    partition, as Faust requires. A queue taken over by this worker starts
    from the table's record. What a crash loses: at most ``audit.flush.secs``
    of a busy queue's audit (its requests, never the crawl's statuses); the
    recording server, not the audit, is the proof of politeness.
    """

    def __init__(self, flush_s: float, table: MutableMapping[bytes, Any]) -> None:
        """``flush_s``: ``audit.flush.secs``; ``table``: key bytes → HostAudit dict (the ``audit`` table)."""
        self.flush_s = flush_s
        self.table = table
        self._queues: dict[str, _Audited] = {}

    def record(self, key: str, start_s: float, required_delay_s: float, blocked_until_s: float) -> None:
        """Record a request of queue ``key`` starting at ``start_s`` (see :func:`audit_request`)."""
        since_s = state().assigned_at.get(partition_for_key(key, settings.topology_partitions))
        held = self._queues.get(key)
        if held is None or held.owned_since_s != since_s:  # new here, or owned again after a rebalance
            raw = self.table.get(key.encode())
            try:
                before = HostAudit.from_dict(raw) if raw else None
            except (TypeError, ValueError):  # a record of another shape: start this host's audit again
                before = None
        else:
            before = held.audit
        after = record_request(before, key, start_s, required_delay_s, blocked_until_s, settings.audit_tolerance_secs)
        violated = after.violations > (before.violations if before else 0)
        held = self._queues[key] = _Audited(since_s, after, True, held.written_at_s if held else 0.0)
        metrics = observed().metrics
        metrics.audit_requests.inc()
        if violated:
            metrics.audit_violations.inc()
            log.error("squall: politeness audit: request to %s too early: %s", key, after.recent[-1])
        if violated or start_s - held.written_at_s >= self.flush_s:
            self._write(key, held, start_s)

    def flush_if_idle(self, key: str, host: HostRecord, now_s: float) -> None:
        """Write queue ``key``'s audit if the table lags it and the host has nothing in flight (its last result)."""
        held = self._queues.get(key)
        if held is not None and held.dirty and not host.in_flight:
            self._write(key, held, now_s)

    def forget_unowned(self, owned: set[int]) -> None:
        """Drop the audits of queues whose partition this worker no longer owns (bounded memory)."""
        for key in [k for k in self._queues if partition_for_key(k, settings.topology_partitions) not in owned]:
            del self._queues[key]

    def _write(self, key: str, held: _Audited, now_s: float) -> None:
        self.table[key.encode()] = held.audit.to_dict()
        held.dirty, held.written_at_s = False, now_s


@dataclass(frozen=True)
class Observed:
    """What the worker counts: ``metrics`` (served by ``GET /metrics`` with the table gauges), ``pages`` (FETCHED
    pages of the last 60 s) and ``audits`` (the politeness audit buffer); a test hands in its own by setting
    ``app.squall_observed``."""

    metrics: Metrics
    pages: RateWindow
    audits: AuditBuffer

    @classmethod
    def new(cls) -> Observed:
        """A fresh set: counters at zero, the table gauges registered, the audit buffer over the ``audit`` table."""
        metrics, pages = Metrics(), RateWindow(60.0)
        metrics.registry.register(TableGauges(pages))
        return cls(metrics=metrics, pages=pages, audits=AuditBuffer(settings.audit_flush_secs, audit_table))


def observed() -> Observed:
    """The worker's :class:`Observed`, created on first use and held by the app (``app.squall_observed``)."""
    held = app.squall_observed
    if held is None:
        held = app.squall_observed = Observed.new()
    return held


def audit_request(key: str, start_s: float, required_delay_s: float, blocked_until_s: float) -> None:
    """Record a request to queue ``key`` starting at ``start_s`` (Unix s) in the politeness audit.

    ``required_delay_s``: the delay in force (s, end of the previous fetch to
    the start of this one); ``blocked_until_s``: end of the Retry-After /
    back-off block the fetcher knows (Unix s, 0.0 = none). Must run inside
    the event of ``key``'s partition (:class:`AuditBuffer`). Never raises:
    the audit must not stop a fetch (a failure is logged).
    """
    try:
        observed().audits.record(key, start_s, required_delay_s, blocked_until_s)
    except Exception:
        log.exception("squall: politeness audit of %s failed", key)


def observe_fetch(result: FetchResult) -> None:
    """Count one page response: bytes received and fetch time."""
    metrics = observed().metrics
    metrics.fetched_bytes.inc(len(result.body))
    metrics.fetch_latency.observe(max(0.0, result.ended_at_s - result.started_at_s))


def observe_result(status: StatusMessage) -> None:
    """Count the status a page fetch ended with (status, reason) and its completion time."""
    held = observed()
    held.metrics.fetch_results.labels(
        status=status.status.value, reason=status.reason.value if status.reason else ""
    ).inc()
    if status.status is Status.FETCHED:
        held.pages.add(time.time())


def observe_robots(status: int | None) -> None:
    """Count one robots.txt fetch by outcome (None: unreachable)."""
    observed().metrics.robots_fetches.labels(outcome=robots_outcome(status)).inc()


def count_refused(counts: Mapping[str, int]) -> None:
    """Count refused outlinks of hosts with no record (reason value → n) in ``squall_links_refused``.

    Such a host (never seeded, holding no URL) gets no record just to count
    its refusals: at web scale one record per host ever linked to would grow
    the hosts table without bound; the counts are the worker's metrics.
    """
    for reason, n in counts.items():
        observed().metrics.links_refused.labels(reason=reason).inc(n)
