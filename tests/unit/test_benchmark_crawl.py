"""The pure parts of benchmarks/crawl.py and its modules: the farm, the measures, the summary over runs, the ratios, records per page, the history row and the report."""

from __future__ import annotations

import csv
import json
import math

import pytest

from benchmarks.crawl import HISTORY_FILE, REPO, parse_args, squall_variants, warc_variants
from benchmarks.crawl_farm import farm, host_ips
from benchmarks.crawl_history import HISTORY_FIELDS, Meta, append_history, history_rows
from benchmarks.crawl_measures import (
    Row,
    cpu_until,
    measure,
    pace_losses,
    percentile,
    records_written,
    sample_at,
    topic_label,
)
from benchmarks.crawl_report import (
    COLUMNS,
    SUMMARY_COLUMNS,
    cells,
    finite,
    from_report_data,
    render_table,
    report_data,
    report_lines,
)
from benchmarks.crawl_squall import DOCUMENTS_SWITCH, WARC_SWITCH, squall_label, squall_overrides
from benchmarks.crawl_summary import FIGURES, by_crawler, compare, ratio_of_medians, spread, summarize, topic_spreads


def req(ip: str, path: str, t: float) -> dict[str, object]:
    return {"ip": ip, "path": path, "t": t}


def test_host_addresses_are_distinct_loopback_addresses_per_block():
    a, b = host_ips(600, 1), host_ips(600, 2)
    assert len(set(a)) == 600 and not set(a) & set(b)
    assert all(ip.startswith("127.1.") for ip in a) and a[0] == "127.1.0.2" and a[250] == "127.1.1.2"


def test_every_page_of_the_farm_is_reachable_and_the_offsite_links_are_out_of_it():
    ips = host_ips(3, 1)
    spec = farm(ips, pages=5, links=2, offsite=1)
    port = 8000
    expected, disallowed = spec.replay(port)
    assert expected == {f"http://{ip}:{port}{p}" for ip in ips for p in ["/", "/p/0", "/p/1", "/p/2", "/p/3"]}
    assert not disallowed
    page = spec.hosts[ips[0]].pages["/p/0"]
    assert sum(1 for link in page.links if ".invalid/" in link) == 1


def test_the_measures_of_a_polite_crawl():
    delay = 1.0
    requests = [
        req("a", "/robots.txt", 0.0),
        req("a", "/", 1.0),
        req("a", "/p/0", 2.5),
        req("b", "/robots.txt", 0.2),
        req("b", "/", 1.2),
        req("b", "/p/0", 2.2),
        req("other", "/", 1.1),
    ]
    m = measure(requests, {"a", "b"}, delay, pages_per_host=2, links_per_page={("a", "/"): 3, ("b", "/p/0"): 2})
    assert m["pages"] == 4
    assert m["elapsed_s"] == pytest.approx(2.5)
    assert m["bound_pps"] == pytest.approx(2 / delay)  # N / D: 4 pages over 2 delays
    assert m["min_gap_s"] == pytest.approx(1.0)
    assert m["violations"] == 0 and m["duplicates"] == 0
    assert m["links"] == 5


def test_gaps_below_the_delay_minus_ten_ms_are_violations_and_repeats_are_duplicates():
    requests = [req("a", "/robots.txt", 0.0), req("a", "/", 0.995), req("a", "/", 1.5), req("a", "/p/0", 2.5)]
    m = measure(requests, {"a"}, 1.0, pages_per_host=2)
    assert m["violations"] == 1  # 0.995 is within the 10 ms slack, 0.505 is not
    assert m["duplicates"] == 1
    assert m["min_gap_s"] == pytest.approx(0.505)


def test_the_seconds_beyond_the_delays_add_up_to_the_elapsed_time():
    # a: starts with the crawl, one gap 0.5 s over the delay, ends 0.3 s early; b: starts 0.2 s late, on time after
    by_host = {"a": [0.0, 1.0, 2.5], "b": [0.2, 1.2, 2.2, 3.2], "c": []}
    losses = pace_losses(by_host, 1.0)
    assert losses["start_lag_s"] == pytest.approx((0.0 + 0.2) / 2)
    assert losses["gap_excess_s"] == pytest.approx((0.5 + 0.0) / 2)
    assert losses["end_lag_s"] == pytest.approx((0.7 + 0.0) / 2)
    assert losses["median_gap_s"] == pytest.approx(1.0)
    mean_gaps = (2 + 3) / 2
    assert losses["start_lag_s"] + mean_gaps * 1.0 + losses["gap_excess_s"] + losses["end_lag_s"] == pytest.approx(3.2)
    assert pace_losses({"a": [0.0, 0.5]}, 1.0)["gap_excess_s"] == pytest.approx(-0.5)  # a gap under the delay
    assert all(math.isnan(v) for v in pace_losses({}, 1.0).values())


def test_no_request_gives_nan_gaps_and_no_pages():
    m = measure([], {"a"}, 1.0, pages_per_host=2)
    assert m["pages"] == 0 and math.isnan(m["min_gap_s"]) and math.isnan(m["p1_gap_s"])


@pytest.mark.parametrize(
    "values, q, expected",
    [
        ([5.0, 1.0, 3.0], 0.0, 1.0),
        ([5.0, 1.0, 3.0], 0.5, 3.0),
        ([5.0, 1.0, 3.0], 1.0, 5.0),
        (list(map(float, range(200))), 0.01, 2.0),
    ],
)
def test_percentiles_are_nearest_rank(values, q, expected):
    assert percentile(values, q) == expected


def test_cpu_is_counted_from_the_first_sample_to_the_first_one_after_the_end():
    samples = [(10.0, 1.0), (10.5, 1.4), (11.0, 2.0), (11.5, 2.1)]
    assert cpu_until(samples, 10.8) == pytest.approx(1.0)
    assert cpu_until(samples, 99.0) == pytest.approx(1.1)  # after the last sample: the last
    assert math.isnan(cpu_until([], 1.0))


def test_a_row_derives_rates_and_prints_every_column():
    row = Row(
        "squall",
        pages=100,
        available=100,
        elapsed_s=10.0,
        bound_pps=20.0,
        min_gap_s=1.0,
        p1_gap_s=1.0,
        violations=0,
        duplicates=0,
        cpu_s=2.0,
        rss_mb=80.0,
        wall_s=12.0,
        links=1000,
    )
    assert row.pps == 10.0 and row.ratio == 0.5 and row.cpu_per_1k == 20.0 and row.links_per_cpu_s == 500.0
    assert len(cells(row)) == len(COLUMNS)
    unknown = Row("scrapy", 0, 100, 0.0, 20.0, math.nan, math.nan, 0, 0, None, None, 1.0)
    assert cells(unknown)[COLUMNS.index("cpu/1k")] == "-"


def row(crawler="squall (1 worker, WARC on)", pages=100, elapsed_s=10.0, cpu_s=2.0, records=None, run=1, **kw):
    fields = dict(available=100, bound_pps=20.0, min_gap_s=1.0, p1_gap_s=1.0, violations=0, duplicates=0)
    fields.update(kw)
    return Row(
        crawler,
        pages=pages,
        elapsed_s=elapsed_s,
        cpu_s=cpu_s,
        rss_mb=90.0,
        wall_s=12.0,
        links=500,
        run=run,
        records=records,
        **fields,
    )


# ---------------------------------------------------------------------- min / median / max over runs


@pytest.mark.parametrize(
    "values, expected",
    [
        ([3.0, 1.0, 2.0], (1.0, 2.0, 3.0, 3)),
        ([4.0, 1.0], (1.0, 2.5, 4.0, 2)),  # an even count: the mean of the middle two
        ([5.0, None, math.nan], (5.0, 5.0, 5.0, 1)),  # unknown values are left out
    ],
)
def test_a_spread_is_the_smallest_the_median_and_the_largest_of_the_known_values(values, expected):
    s = spread(values)
    assert (s.low, s.median, s.high, s.n) == expected


def test_a_spread_of_nothing_known_is_none():
    assert spread([]) is None and spread([None, math.nan]) is None


def test_a_spread_cell_shows_min_median_max_and_one_run_alone():
    assert spread([3.0, 1.0, 2.0]).cell(".1f") == "1.0 / 2.0 / 3.0"
    assert spread([2.345]).cell(".2f") == "2.35"


def test_the_summary_gives_every_figure_over_the_runs_of_one_crawler():
    rows = [row(elapsed_s=10.0, run=1), row(elapsed_s=5.0, run=2), row(elapsed_s=20.0, run=3)]
    summary = summarize(rows)
    assert set(summary) == set(FIGURES)
    assert (summary["pages/s"].low, summary["pages/s"].median, summary["pages/s"].high) == (5.0, 10.0, 20.0)
    assert summary["ratio"].median == pytest.approx(0.5)
    assert summary["cpu/1k"].median == pytest.approx(20.0)
    assert summary["rec/page"] is None  # no Kafka records known


def test_rows_are_grouped_by_crawler_in_first_seen_order():
    rows = [row("squall a"), row("scrapy"), row("squall a", run=2), row("squall b")]
    groups = by_crawler(rows)
    assert list(groups) == ["squall a", "scrapy", "squall b"] and len(groups["squall a"]) == 2


# ---------------------------------------------------------------------- squall / Scrapy ratios


def test_the_ratios_are_ratios_of_the_medians():
    rows = [
        row(elapsed_s=10.0, cpu_s=3.0),  # 10 pages/s, 30 CPU-s / 1k pages
        row(elapsed_s=5.0, cpu_s=2.0, run=2),  # 20 pages/s, 20
        row(elapsed_s=4.0, cpu_s=1.0, run=3),  # 25 pages/s, 10
        row("scrapy", elapsed_s=8.0, cpu_s=0.5),  # 12.5 pages/s, 5
        row("scrapy", elapsed_s=10.0, cpu_s=1.0, run=2),  # 10 pages/s, 10
        row("scrapy", elapsed_s=20.0, cpu_s=0.1, run=3),  # 5 pages/s, 1
    ]
    summaries = {k: summarize(v) for k, v in by_crawler(rows).items()}
    [c] = compare(summaries)
    assert c.squall == "squall (1 worker, WARC on)"
    assert c.pages_per_s == pytest.approx(20.0 / 10.0)  # median 20 / median 10, not a median of per-run ratios
    assert c.cpu_per_page == pytest.approx(20.0 / 5.0)


def test_without_a_peer_or_a_known_figure_there_is_no_ratio():
    assert compare({"squall": summarize([row()])}) == []
    assert ratio_of_medians(spread([1.0]), None) is None
    assert ratio_of_medians(spread([1.0]), spread([0.0])) is None


# ---------------------------------------------------------------------- Kafka records per page


def test_records_written_are_the_growth_of_the_end_offsets_summed_per_topic():
    before = {("t-status", 0): 10, ("t-status", 1): 5, ("t-fetch", 0): 0}
    after = {("t-status", 0): 30, ("t-status", 1): 5, ("t-fetch", 0): 7, ("t-urls-changelog", 0): 4}
    assert records_written(before, after) == {"t-status": 20, "t-fetch": 7, "t-urls-changelog": 4}


def test_an_end_offset_that_went_down_counts_no_records():
    assert records_written({("t-a", 0): 9}, {("t-a", 0): 2}) == {"t-a": 0}


@pytest.mark.parametrize(
    "topic, label",
    [
        ("squall-ab12-status", "status"),
        ("squall-ab12-hosts-changelog", "hosts changelog"),
        ("squall-ab12-__assignor-__leader", "__assignor-__leader"),
        ("other-topic", "other-topic"),
    ],
)
def test_topics_are_labelled_without_the_topology_id(topic, label):
    assert topic_label(topic, "squall-ab12") == label


def test_records_per_page_are_the_records_over_the_pages():
    r = row(pages=50, records={"status": 150, "fetch": 50, "urls changelog": 100})
    assert r.records_by_topic_per_page == {"status": 3.0, "fetch": 1.0, "urls changelog": 2.0}
    assert r.records_per_page == pytest.approx(6.0)
    assert row(records=None).records_per_page is None and row(pages=0, records={"status": 1}).records_per_page is None


def test_the_breakdown_gives_medians_per_topic_in_a_fixed_order_and_the_total():
    rows = [
        row(pages=10, records={"urls changelog": 20, "status": 30, "__assignor-__leader": 0}),
        row(pages=10, records={"status": 10, "audit changelog": 10}, run=2),
        row(pages=10, records={"status": 20}, run=3),
    ]
    topics = topic_spreads(rows)
    assert list(topics) == ["status", "urls changelog", "audit changelog", "total"]  # an idle Faust topic left out
    assert topics["status"].median == pytest.approx(2.0)
    assert (topics["urls changelog"].low, topics["urls changelog"].median) == (0.0, 0.0)  # absent from runs 2, 3
    assert topics["total"].median == pytest.approx(2.0) and topics["total"].high == pytest.approx(5.0)


def test_the_last_sample_stands_for_a_time_after_the_samples():
    samples = [(1.0, "a"), (2.0, "b")]
    assert sample_at(samples, 1.5) == "b" and sample_at(samples, 0.0) == "a"
    assert sample_at(samples, 9.0) == "b"


# ---------------------------------------------------------------------- WARC on / off


def test_warc_both_runs_each_variant_when_squall_has_the_switch_and_says_so_when_not():
    assert warc_variants("both", True) == (["on", "off"], ())
    variants, notes = warc_variants("both", False)
    assert variants == ["on"] and "warc.enabled" in notes[0]
    assert warc_variants("on", False) == (["on"], ())


def test_warc_off_sets_the_switch_and_warc_on_leaves_the_configuration_alone():
    args = parse_args(["--delay", "0.5", "--set", "fetcher.threads.number=4"])
    assert WARC_SWITCH not in squall_overrides(args, "on")
    off = squall_overrides(args, "off")
    assert off[WARC_SWITCH] is False and off["fetcher.server.delay"] == 0.5 and off["fetcher.threads.number"] == 4


def test_documents_both_gives_each_warc_variant_a_row_with_and_without_documents():
    assert squall_variants(["on", "off"], "both") == [("on", False), ("on", True), ("off", False), ("off", True)]
    assert squall_variants(["on"], "off") == [("on", False)]
    assert parse_args(["--documents"]).documents == "on" and parse_args([]).documents == "off"
    args = parse_args([])
    assert squall_overrides(args, "on", documents=True)[DOCUMENTS_SWITCH] is True
    assert DOCUMENTS_SWITCH not in squall_overrides(args, "on")
    assert squall_label(2, "off", True) == "squall (2 workers, WARC off) + documents"


def test_three_runs_is_the_default():
    assert parse_args([]).runs == 3


# ---------------------------------------------------------------------- report, history, JSON

META = Meta(
    commit="abc1234-dirty",
    date="2026-01-02T03:04:05Z",
    cpu_model="Test CPU",
    cores=2,
    load=(0.5, 0.25, 0.125),
    python="3.11.7",
    profile="short",
    farm="100x10 d=1s w=1 links=3 offsite=0",
    runs=1,
    bound_pps=100.0,
    scrapy="2.19.0",
)


def test_a_history_row_holds_the_medians_of_each_squall_crawler_against_scrapy():
    rows = [
        row(records={"status": 300}),
        row("squall (1 worker, WARC off)", elapsed_s=5.0),
        row("scrapy", elapsed_s=20.0, cpu_s=1.0),
    ]
    on, off = history_rows(META, rows)
    assert tuple(on) == HISTORY_FIELDS
    assert on["commit"] == "abc1234-dirty" and on["machine"] == "2 × Test CPU" and on["profile"] == "short"
    assert on["crawler"] == "squall (1 worker, WARC on)" and on["load_1m"] == "0.50"
    assert (on["squall_pages_per_s"], on["squall_ratio_to_bound"], on["squall_cpu_s_per_1k_pages"]) == (
        "10.00",
        "0.500",
        "20.00",
    )
    assert on["squall_records_per_page"] == "3.00" and off["squall_records_per_page"] == ""
    assert (on["scrapy_pages_per_s"], on["scrapy_cpu_s_per_1k_pages"]) == ("5.00", "10.00")
    assert (on["pages_per_s_ratio"], on["cpu_per_page_ratio"]) == ("2.000", "2.000")
    assert off["pages_per_s_ratio"] == "4.000"


def test_a_history_row_without_scrapy_leaves_its_columns_empty():
    [only] = history_rows(META, [row()])
    assert only["scrapy_pages_per_s"] == only["pages_per_s_ratio"] == only["cpu_per_page_ratio"] == ""


def test_the_history_file_gets_its_header_once_and_refuses_other_columns(tmp_path):
    path = tmp_path / "history.csv"
    append_history(path, history_rows(META, [row()]))
    append_history(path, history_rows(META, [row(elapsed_s=5.0)]))
    with path.open(newline="") as f:
        lines = list(csv.reader(f))
    assert tuple(lines[0]) == HISTORY_FIELDS and len(lines) == 3
    assert lines[2][HISTORY_FIELDS.index("squall_pages_per_s")] == "20.00"
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="header"):
        append_history(other, [])


def test_the_committed_history_file_starts_with_the_header():
    with (REPO / HISTORY_FILE).open(newline="") as f:
        assert tuple(next(csv.reader(f))) == HISTORY_FIELDS


def test_a_markdown_table_has_a_rule_under_its_header():
    lines = render_table(["a", "b"], [["1", "2"]], markdown=True)
    assert lines == ["| a | b |", "|---|---|", "| 1 | 2 |"]


def test_a_text_table_aligns_its_columns():
    lines = render_table(["crawler", "x"], [["squall", "10.5"]], markdown=False)
    assert lines == ["crawler  x", "-------  ----", "squall   10.5"]


def test_the_markdown_report_names_the_run_and_gives_the_summary_the_ratios_and_the_breakdown():
    rows = [row(records={"status": 200, "fetch": 100}), row("scrapy", elapsed_s=20.0, cpu_s=1.0)]
    lines = report_lines(META, rows, markdown=True)
    text = "\n".join(lines)
    assert lines[0].startswith("- benchmarks/crawl.py, profile short (100x10")
    assert "- commit abc1234-dirty, 2026-01-02T03:04:05Z" in lines
    assert "load average 0.50 0.25 0.12 at the start; Python 3.11.7; Scrapy 2.19.0" in text
    assert "| " + " | ".join(SUMMARY_COLUMNS) + " |" in lines
    assert "| squall (1 worker, WARC on) | 1 | 100 | 10.0 | 0.50 | 20.00 | 3.00 |" in text
    assert "- squall (1 worker, WARC on) / scrapy, medians of 1 run(s): pages/s 2.00, CPU-s per page 2.00" in lines
    assert "records/page, squall (1 worker, WARC on), medians: status 2.00, fetch 1.00" in text
    assert "| run |" not in text  # one run each: no per-run table
    assert "seconds beyond the delays" not in text  # rows without the pace figures: no such note


def test_the_report_says_where_the_seconds_beyond_the_delays_went():
    losses = dict(start_lag_s=1.25, gap_excess_s=3.5, end_lag_s=0.5, median_gap_s=1.012)
    rows = [row(**losses), row(run=2, **{**losses, "gap_excess_s": 5.5}), row(run=3, **losses)]
    text = "\n".join(report_lines(META, rows, markdown=False))
    assert (
        "seconds beyond the delays, squall (1 worker, WARC on), medians, s a host: start lag 1.25, "
        "gaps over the delay 3.50, end lag 0.50 (of 10.0 s; median gap 1.012 s)"
    ) in text


def test_the_report_lists_every_run_when_there_are_several():
    lines = report_lines(META, [row(), row(run=2)], markdown=False)
    assert any(line.startswith("run ") for line in lines)
    assert sum(1 for line in lines if line.startswith("1 ") or line.startswith("2 ")) == 2


def test_json_gets_none_for_nan_and_infinity():
    assert finite({"a": [math.nan, 1.0, (math.inf,)], "b": "x"}) == {"a": [None, 1.0, [None]], "b": "x"}


def test_the_json_report_reads_back_into_the_same_report():
    rows = [
        row(records={"status": 200}),
        row(run=2, records={"status": 100}, start_lag_s=0.5, gap_excess_s=2.0, end_lag_s=0.1, median_gap_s=1.0),
        row("scrapy", pages=0, min_gap_s=math.nan, p1_gap_s=math.nan, cpu_s=None),
    ]
    data = json.loads(json.dumps(report_data(META, rows, {"runs": 2}), allow_nan=False))
    assert data["ratios"][0]["pages_per_s"] is None  # Scrapy fetched nothing: no ratio
    assert data["summary"]["scrapy"]["cpu/1k"] is None and data["rows"][2]["min_gap_s"] is None  # NaN: null
    assert data["records_per_page"]["squall (1 worker, WARC on)"]["status"]["median"] == pytest.approx(1.5)
    meta, back = from_report_data(data)
    assert meta == META
    for markdown in (False, True):
        assert report_lines(meta, back, markdown) == report_lines(META, rows, markdown)
