"""squall.worker.metrics: label helpers, the pages-per-second window and the exposition of the counters."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from squall.worker.metrics import ROBOTS_OUTCOMES, Metrics, RateWindow, robots_outcome, top_keys


@pytest.mark.parametrize("status,label", [(200, "2xx"), (204, "2xx"), (301, "3xx"), (404, "4xx"), (403, "4xx"),
                                          (429, "429"), (503, "5xx"), (599, "5xx"), (None, "unreachable"),
                                          (100, "2xx"), (999, "5xx")])
def test_robots_outcomes_are_a_fixed_set_of_labels(status: int | None, label: str) -> None:
    assert robots_outcome(status) == label and label in ROBOTS_OUTCOMES


def test_the_rate_window_counts_events_of_the_last_window_only() -> None:
    w = RateWindow(10.0)
    assert w.rate(100.0) == 0.0
    for t in range(100, 120):
        w.add(float(t))
    assert w.rate(120.0) == pytest.approx(10 / 10)  # events at 110..119: the last 10 s
    assert w.rate(200.0) == 0.0


def test_a_young_window_divides_by_its_age() -> None:
    w = RateWindow(60.0)
    for t in (0.0, 1.0, 2.0, 3.0):
        w.add(t)
    assert w.rate(4.0) == 1.0


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError):
        RateWindow(0.0)


def test_top_keys_bound_the_per_host_series() -> None:
    counts = [("a", 5), ("b", 9), ("c", 5), ("d", 1)]
    assert top_keys(counts, 3) == ["b", "a", "c"]
    assert top_keys(counts, 0) == []


def test_every_metric_is_named_squall_and_exported() -> None:
    m = Metrics()
    m.fetch_results.labels(status="FETCHED", reason="").inc(3)
    m.fetch_latency.observe(0.02)
    m.fetched_bytes.inc(100)
    text = generate_latest(m.registry).decode()
    names = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE")}
    assert names and all(n.startswith("squall_") for n in names), names
    assert 'squall_fetch_results_total{reason="",status="FETCHED"} 3.0' in text
    assert 'squall_robots_fetches_total{outcome="unreachable"} 0.0' in text
    assert "squall_audit_violations_total 0.0" in text
    assert 'squall_fetch_duration_seconds_bucket{le="0.025"} 1.0' in text


def test_a_window_after_an_idle_spell_divides_by_the_time_since_its_first_event() -> None:
    w = RateWindow(60.0)
    w.add(0.0)  # an earlier crawl, long ago
    for i in range(40):  # re-seeded: 4 events/s for the last 10 s
        w.add(1000.0 + i * 0.25)
    assert w.rate(1010.0) == pytest.approx(40 / 10)


def test_the_progress_line_carries_pages_rate_due_in_flight_and_violations() -> None:
    from squall.worker.metrics import progress_line

    assert progress_line(pages=120, pages_per_s=3.951, due=57, in_flight=8, violations=0) == (
        "squall: progress: 120 pages fetched (3.95/s over the last minute), 57 due, 8 in flight, "
        "0 politeness violations"
    )


def test_counter_totals_sum_the_matching_series() -> None:
    from squall.worker.metrics import counter_total

    m = Metrics()
    m.fetch_results.labels(status="FETCHED", reason="").inc(3)
    m.fetch_results.labels(status="FETCHED", reason="x").inc(2)
    m.fetch_results.labels(status="ERROR", reason="http.not_found").inc()
    assert counter_total(m.fetch_results, status="FETCHED") == 5
    assert counter_total(m.fetch_results) == 6
    assert counter_total(m.audit_violations) == 0
