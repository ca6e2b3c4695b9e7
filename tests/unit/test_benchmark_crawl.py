"""The pure parts of benchmarks/crawl.py: the farm, and the measures read from the recorded requests."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "crawl.py"
_SPEC = importlib.util.spec_from_file_location("benchmark_crawl", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
sys.modules[_SPEC.name] = bench  # dataclasses look their module up there
_SPEC.loader.exec_module(bench)


def req(ip: str, path: str, t: float) -> dict[str, object]:
    return {"ip": ip, "path": path, "t": t}


def test_host_addresses_are_distinct_loopback_addresses_per_block():
    a, b = bench.host_ips(600, 1), bench.host_ips(600, 2)
    assert len(set(a)) == 600 and not set(a) & set(b)
    assert all(ip.startswith("127.1.") for ip in a) and a[0] == "127.1.0.2" and a[250] == "127.1.1.2"


def test_every_page_of_the_farm_is_reachable_and_the_offsite_links_are_out_of_it():
    ips = bench.host_ips(3, 1)
    spec = bench.farm(ips, pages=5, links=2, offsite=1)
    port = 8000
    expected, disallowed = spec.replay(port)
    assert expected == {f"http://{ip}:{port}{p}" for ip in ips for p in ["/", "/p/0", "/p/1", "/p/2", "/p/3"]}
    assert not disallowed
    page = spec.hosts[ips[0]].pages["/p/0"]
    assert sum(1 for link in page.links if ".invalid/" in link) == 1


def test_the_measures_of_a_polite_crawl():
    delay = 1.0
    requests = [req("a", "/robots.txt", 0.0), req("a", "/", 1.0), req("a", "/p/0", 2.5),
                req("b", "/robots.txt", 0.2), req("b", "/", 1.2), req("b", "/p/0", 2.2),
                req("other", "/", 1.1)]
    m = bench.measure(requests, {"a", "b"}, delay, pages_per_host=2, links_per_page={("a", "/"): 3, ("b", "/p/0"): 2})
    assert m["pages"] == 4
    assert m["elapsed_s"] == pytest.approx(2.5)
    assert m["bound_pps"] == pytest.approx(2 / delay)  # N / D: 4 pages over 2 delays
    assert m["min_gap_s"] == pytest.approx(1.0)
    assert m["violations"] == 0 and m["duplicates"] == 0
    assert m["links"] == 5


def test_gaps_below_the_delay_minus_ten_ms_are_violations_and_repeats_are_duplicates():
    requests = [req("a", "/robots.txt", 0.0), req("a", "/", 0.995), req("a", "/", 1.5), req("a", "/p/0", 2.5)]
    m = bench.measure(requests, {"a"}, 1.0, pages_per_host=2)
    assert m["violations"] == 1  # 0.995 is within the 10 ms slack, 0.505 is not
    assert m["duplicates"] == 1
    assert m["min_gap_s"] == pytest.approx(0.505)


def test_no_request_gives_nan_gaps_and_no_pages():
    m = bench.measure([], {"a"}, 1.0, pages_per_host=2)
    assert m["pages"] == 0 and math.isnan(m["min_gap_s"]) and math.isnan(m["p1_gap_s"])


@pytest.mark.parametrize("values, q, expected", [
    ([5.0, 1.0, 3.0], 0.0, 1.0), ([5.0, 1.0, 3.0], 0.5, 3.0), ([5.0, 1.0, 3.0], 1.0, 5.0),
    (list(map(float, range(200))), 0.01, 2.0),
])
def test_percentiles_are_nearest_rank(values, q, expected):
    assert bench.percentile(values, q) == expected


def test_cpu_is_counted_from_the_first_sample_to_the_first_one_after_the_end():
    samples = [(10.0, 1.0), (10.5, 1.4), (11.0, 2.0), (11.5, 2.1)]
    assert bench.cpu_until(samples, 10.8) == pytest.approx(1.0)
    assert bench.cpu_until(samples, 99.0) == pytest.approx(1.1)  # after the last sample: the last
    assert math.isnan(bench.cpu_until([], 1.0))


def test_a_row_derives_rates_and_prints_every_column():
    row = bench.Row("squall", pages=100, available=100, elapsed_s=10.0, bound_pps=20.0, min_gap_s=1.0,
                    p1_gap_s=1.0, violations=0, duplicates=0, cpu_s=2.0, rss_mb=80.0, wall_s=12.0, links=1000)
    assert row.pps == 10.0 and row.ratio == 0.5 and row.cpu_per_1k == 20.0 and row.links_per_cpu_s == 500.0
    assert len(bench.cells(row)) == len(bench.COLUMNS)
    unknown = bench.Row("scrapy", 0, 100, 0.0, 20.0, math.nan, math.nan, 0, 0, None, None, 1.0)
    assert bench.cells(unknown)[bench.COLUMNS.index("cpu/1k")] == "-"
