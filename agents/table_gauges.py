"""The gauges ``GET /metrics`` reads from this worker's tables at scrape time (a helper, no agent).

URLs by status, due, in flight, blocked / backing-off hosts, consumer lag,
pages per second, and per-host series for the ``metrics.hosts.top`` hosts
with the most requests; registered on the worker's metrics registry by
:class:`agents.observe.Observed`.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from squall.policy.audit import audits_of
from squall.policy.frontier import HostRecord
from squall.policy.handout import due_at_s
from squall.policy.reasons import Status
from squall.policy.url_view import url_view
from squall.worker.metrics import RateWindow, top_keys
from topology import (
    app,
    audit_table,
    fetch_topic,
    hosts_table,
    settings,
    signals_topic,
    status_topic,
    ticks_topic,
    urls_table,
)


class TableGauges(Collector):
    """Gauges computed from this worker's tables at scrape time (scans cached ``metrics.scan.cache.secs``).

    ``pages``: the worker's FETCHED pages of the last minute (its rate is a gauge).
    """

    def __init__(self, pages: RateWindow) -> None:
        self._pages = pages
        self._cached_at = 0.0
        self._families: list[GaugeMetricFamily] = []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = time.time()
        if now - self._cached_at > settings.metrics_scan_cache_secs:
            self._families = list(self._scan(now))
            self._cached_at = now
        yield from self._families

    def _scan(self, now: float) -> Iterator[GaugeMetricFamily]:
        hosts = [HostRecord.from_dict(value) for value in hosts_table.values()]
        blocked_until = {h.key: h.blocked_until_s for h in hosts}
        by_status: Counter[str] = Counter({s.value: 0 for s in Status})
        due = 0
        for url in map(url_view, urls_table.values()):  # a view: a UrlRecord per URL would cost a scrape seconds
            by_status[url.status] += 1
            at_s = due_at_s(url.status, url.next_fetch_at_s, blocked_until.get(url.key or ""))
            due += at_s is not None and at_s <= now
        g = GaugeMetricFamily("squall_urls", "URLs of the owned partitions by status", labels=["status"])
        for status, n in sorted(by_status.items()):
            g.add_metric([status], n)
        yield g
        yield GaugeMetricFamily(
            "squall_due_urls",
            "URLs due now (DISCOVERED or FETCH_ERROR, next fetch time and host block passed)",
            value=due,
        )
        in_flight = sum(len(h.in_flight) for h in hosts)
        blocked = sum((h.blocked_until_s or 0.0) > now for h in hosts)
        backing_off = sum(h.backoff_attempts > 0 for h in hosts)
        yield GaugeMetricFamily("squall_in_flight_urls", "URLs handed out and not answered yet", value=in_flight)
        yield GaugeMetricFamily("squall_hosts_blocked", "Hosts blocked now (Retry-After or back-off)", value=blocked)
        yield GaugeMetricFamily(
            "squall_hosts_backing_off", "Hosts in a back-off after 429/503 without Retry-After", value=backing_off
        )
        yield GaugeMetricFamily(
            "squall_pages_per_second", "Pages FETCHED per second over the last minute", value=self._pages.rate(now)
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
    out = {t.get_topic_name(): 0 for t in (status_topic, fetch_topic, signals_topic, ticks_topic)}
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
    audits = audits_of(audit_table.values())
    top = top_keys(((k, a.requests) for k, a in audits.items()), settings.metrics_hosts_top)
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
            value = getattr(audits[key], field)
            if value is not None:
                fam.add_metric([key], float(value))
    yield from fams.values()
