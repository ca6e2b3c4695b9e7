"""What a worker tells about itself: the politeness audit and Prometheus ``/metrics``.

* :func:`audit_request` is called right before every HTTP request the
  fetcher sends (pages in :mod:`agents.fetcher`, robots.txt and each redirect
  hop in :mod:`agents.robots`). It updates the host's
  :class:`squall.policy.audit.HostAudit`, written to the ``audit`` table per
  batch (:class:`AuditBuffer`, ``audit.flush.secs``). Like the robots
  table write, it must run inside the fetch event of the host's partition
  (the fetch tasks carry that event), so the changelog record lands on the
  partition that owns the host and survives restarts and rebalances.
* ``GET /metrics`` on the worker's Faust web server (127.0.0.1,
  ``topology.web.port``) serves :class:`squall.worker.metrics.Metrics` plus gauges
  read from the tables of the partitions this worker owns at scrape time
  (URLs by status, due, in flight, blocked / backing-off hosts, consumer lag,
  pages per second, and per-host series for the ``metrics.hosts.top`` hosts
  with the most requests).
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from agents.runtime import state
from squall.net.http import FetchResult
from squall.policy.audit import HostAudit, record_request
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.policy.records import Status, StatusMessage
from squall.worker.metrics import Metrics, RateWindow, robots_outcome, top_keys
from topology import app, audit_table, hosts_table, settings, urls_table

log = logging.getLogger("squall.observe")
TOLERANCE_S: float = settings.audit_tolerance_secs
FLUSH_S: float = settings.audit_flush_secs
PARTITIONS: int = settings.topology_partitions
TOP_HOSTS: int = settings.metrics_hosts_top
SCAN_CACHE_S: float = settings.metrics_scan_cache_secs  # table scans for the gauges are reused this long (s)
LAG_TOPICS = tuple(f"{settings.topology_id}-{s}" for s in ("status", "fetch", "signals", "ticks"))
# Prometheus' text exposition format 0.0.4 (aiohttp refuses a charset inside content_type)
EXPOSITION_CONTENT_TYPE = "text/plain; version=0.0.4"

metrics = Metrics()
pages = RateWindow(60.0)


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

    def __init__(self, flush_s: float) -> None:
        self.flush_s = flush_s
        self._queues: dict[str, _Audited] = {}

    def record(self, key: str, start_s: float, required_delay_s: float, blocked_until_s: float) -> None:
        """Record a request of queue ``key`` starting at ``start_s`` (see :func:`audit_request`)."""
        since_s = state.assigned_at.get(partition_for_key(key, PARTITIONS))
        held = self._queues.get(key)
        if held is None or held.owned_since_s != since_s:  # new here, or owned again after a rebalance
            raw = audit_table.get(key.encode())
            try:
                before = HostAudit.from_dict(raw) if raw else None
            except (TypeError, ValueError):  # a record of another shape: start this host's audit again
                before = None
        else:
            before = held.audit
        after = record_request(before, key, start_s, required_delay_s, blocked_until_s, TOLERANCE_S)
        violated = after.violations > (before.violations if before else 0)
        held = self._queues[key] = _Audited(since_s, after, True, held.written_at_s if held else 0.0)
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
        for key in [k for k in self._queues if partition_for_key(k, PARTITIONS) not in owned]:
            del self._queues[key]

    def _write(self, key: str, held: _Audited, now_s: float) -> None:
        audit_table[key.encode()] = held.audit.to_dict()
        held.dirty, held.written_at_s = False, now_s


audits = AuditBuffer(FLUSH_S)


def audit_request(key: str, start_s: float, required_delay_s: float, blocked_until_s: float) -> None:
    """Record a request to queue ``key`` starting at ``start_s`` (Unix s) in the politeness audit.

    ``required_delay_s``: the delay in force (s, end of the previous fetch to
    the start of this one); ``blocked_until_s``: end of the Retry-After /
    back-off block the fetcher knows (Unix s, 0.0 = none). Must run inside
    the event of ``key``'s partition (:class:`AuditBuffer`). Never raises:
    the audit must not stop a fetch (a failure is logged).
    """
    try:
        audits.record(key, start_s, required_delay_s, blocked_until_s)
    except Exception:
        log.exception("squall: politeness audit of %s failed", key)


def observe_fetch(result: FetchResult) -> None:
    """Count one page response: bytes received and fetch time."""
    metrics.fetched_bytes.inc(len(result.body))
    metrics.fetch_latency.observe(max(0.0, result.ended_at_s - result.started_at_s))


def observe_result(status: StatusMessage) -> None:
    """Count the status a page fetch ended with (status, reason) and its completion time."""
    metrics.fetch_results.labels(status=status.status.value, reason=status.reason.value if status.reason else "").inc()
    if status.status is Status.FETCHED:
        pages.add(time.time())


def observe_robots(status: int | None) -> None:
    """Count one robots.txt fetch by outcome (None: unreachable)."""
    metrics.robots_fetches.labels(outcome=robots_outcome(status)).inc()


class TableGauges(Collector):
    """Gauges computed from this worker's tables at scrape time (scans cached :data:`SCAN_CACHE_S`)."""

    def __init__(self) -> None:
        self._cached_at = 0.0
        self._families: list[GaugeMetricFamily] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.time()
        if now - self._cached_at > SCAN_CACHE_S:
            self._families = list(self._scan(now))
            self._cached_at = now
        yield from self._families

    def _scan(self, now: float) -> Iterator[GaugeMetricFamily]:
        by_status: Counter[str] = Counter({s.value: 0 for s in Status})
        due = 0
        for value in urls_table.values():
            status = value.get("status", "?")
            by_status[status] += 1
            nxt = value.get("next_fetch_at_s")
            if status in (Status.DISCOVERED.value, Status.FETCH_ERROR.value) and nxt is not None and nxt <= now:
                due += 1
        g = GaugeMetricFamily("squall_urls", "URLs of the owned partitions by status", labels=["status"])
        for status, n in sorted(by_status.items()):
            g.add_metric([status], n)
        yield g
        yield GaugeMetricFamily(
            "squall_due_urls", "URLs due now (DISCOVERED or FETCH_ERROR, next fetch time passed)", value=due
        )
        in_flight = blocked = backing_off = 0
        for value in hosts_table.values():
            in_flight += len(value.get("in_flight") or {})
            blocked += (value.get("blocked_until_s") or 0.0) > now
            backing_off += bool((value.get("backoff") or {}).get("attempts"))
        yield GaugeMetricFamily("squall_in_flight_urls", "URLs handed out and not answered yet", value=in_flight)
        yield GaugeMetricFamily("squall_hosts_blocked", "Hosts blocked now (Retry-After or back-off)", value=blocked)
        yield GaugeMetricFamily(
            "squall_hosts_backing_off", "Hosts in a back-off after 429/503 without Retry-After", value=backing_off
        )
        yield GaugeMetricFamily(
            "squall_pages_per_second", "Pages FETCHED per second over the last minute", value=pages.rate(now)
        )
        lag = GaugeMetricFamily(
            "squall_consumer_lag",
            "Messages of the worker's assigned partitions not yet committed (unconsumed), per topic",
            labels=["topic"],
        )
        for topic, n in sorted(_consumer_lag().items()):
            lag.add_metric([topic], n)
        yield lag
        yield from _host_families()


def _consumer_lag() -> dict[str, int]:
    """Highwater minus committed offset over the worker's assigned partitions, per topic (0 when unknown)."""
    out = dict.fromkeys(LAG_TOPICS, 0)
    consumer = getattr(app, "_consumer", None)  # None until the worker started its consumer
    if consumer is None:
        return out
    committed = getattr(consumer, "_committed_offset", {})
    for tp in consumer.assignment():
        if tp.topic in out:
            try:
                high = consumer.highwater(tp)
            except Exception:  # not fetched yet
                continue
            done = committed.get(tp)
            out[tp.topic] += max(0, (high or 0) - (done or 0))
    return out


def _host_families() -> Iterator[GaugeMetricFamily]:
    audits: dict[str, dict[str, Any]] = {}
    for value in audit_table.values():
        if isinstance(value, dict) and "key" in value:
            audits[value["key"]] = value
    top = top_keys(((k, int(v.get("requests") or 0)) for k, v in audits.items()), TOP_HOSTS)
    fams = {
        "requests": GaugeMetricFamily(
            "squall_host_requests", "Requests audited, top hosts (metrics.hosts.top)", labels=["host"]
        ),
        "required_delay_s": GaugeMetricFamily(
            "squall_host_delay_seconds", "Delay in force at the last request (s), top hosts", labels=["host"]
        ),
        "min_gap_s": GaugeMetricFamily(
            "squall_host_min_gap_seconds", "Smallest start-to-start gap (s), top hosts", labels=["host"]
        ),
        "violations": GaugeMetricFamily("squall_host_audit_violations", "Audit violations, top hosts", labels=["host"]),
    }
    for key in top:
        for field, fam in fams.items():
            value = audits[key].get(field)
            if value is not None:
                fam.add_metric([key], float(value))
    yield from fams.values()


metrics.registry.register(TableGauges())


@app.page("/metrics")
async def metrics_page(self, request):
    """Prometheus text exposition of this worker's metrics."""
    return self.bytes(generate_latest(metrics.registry), content_type=EXPOSITION_CONTENT_TYPE)
