"""Tests of squall.cli.status_counts.build_report (``squall status``): counts from table records, fake clock."""

from __future__ import annotations

import json

import pytest

from squall.policy.frontier import HostRecord
from squall.policy.reasons import Reason, Status
from squall.policy.robots_rules import RobotsKind
from squall.policy.robots_status import RobotsEntry
from squall.policy.schedule import UrlRecord
from squall.cli.status_counts import build_report
from squall.cli.status_report import Report

NOW = 1_714_564_800.0  # the fake clock


def rec(url: str, key: str, status: Status, next_fetch_at_s: float | None, reason: str | None = None) -> dict:
    return UrlRecord(url=url, key=key, status=status, next_fetch_at_s=next_fetch_at_s,
                     reason=None if reason is None else Reason(reason)).to_dict()


URLS = {
    "a1": rec("https://a.example/1", "a.example", Status.DISCOVERED, NOW - 5),            # due
    "a2": rec("https://a.example/2", "a.example", Status.DISCOVERED, NOW),                # due (<= now)
    "a3": rec("https://a.example/3", "a.example", Status.DISCOVERED, NOW + 5),            # not yet
    "a4": rec("https://a.example/4", "a.example", Status.FETCHED, NOW - 100),             # revisit: not counted
    "b1": rec("https://b.example/1", "b.example", Status.FETCH_ERROR, NOW - 1, "fetch.timeout"),  # due
    "b2": rec("https://b.example/2", "b.example", Status.ERROR, None, "http.not_found"),
    "b3": rec("https://b.example/3", "b.example", Status.ERROR, NOW - 1, "fetch.too_many_errors"),  # final
    "b4": rec("https://b.example/4", "b.example", Status.REDIRECTION, NOW + 10),
    "b5": rec("https://b.example/5", "b.example", Status.FETCH_ERROR, None, "fetch.dns"),  # never retried
}
HOSTS = {
    "a.example": HostRecord(key="a.example", in_flight={"https://a.example/9": NOW - 1},
                            rejected={"scope.host": 2, "trap.depth": 1}).to_dict(),
    "b.example": HostRecord(key="b.example", in_flight={"https://b.example/8": NOW, "https://b.example/9": NOW},
                            rejected={"scope.host": 3}).to_dict(),
    "c.example": HostRecord(key="c.example").to_dict(),
}


def test_urls_are_counted_by_status_by_host_and_by_reason():
    report = build_report(URLS, HOSTS, NOW)
    assert report.by_status == {"DISCOVERED": 3, "FETCHED": 1, "FETCH_ERROR": 2, "ERROR": 2, "REDIRECTION": 1}
    assert report.by_host == {"a.example": {"DISCOVERED": 3, "FETCHED": 1},
                              "b.example": {"FETCH_ERROR": 2, "ERROR": 2, "REDIRECTION": 1}}
    assert report.reasons == {"fetch.timeout": 1, "http.not_found": 1, "fetch.too_many_errors": 1, "fetch.dns": 1}


def test_rejections_are_totalled_over_the_host_records():
    assert build_report(URLS, HOSTS, NOW).rejected == {"scope.host": 5, "trap.depth": 1}


def test_only_discovered_and_fetch_error_urls_whose_time_has_come_are_due_now():
    assert build_report(URLS, HOSTS, NOW).due_now == 3
    assert build_report(URLS, HOSTS, NOW + 5).due_now == 4
    assert build_report(URLS, HOSTS, NOW - 1000).due_now == 0


def test_in_flight_counts_the_hand_outs_of_every_host():
    assert build_report(URLS, HOSTS, NOW).in_flight == 3


def test_a_report_is_idle_only_with_nothing_due_in_flight_or_unconsumed():
    hosts_idle = {"c.example": HOSTS["c.example"]}
    settled = {k: v for k, v in URLS.items() if k in ("a4", "b2", "b4")}
    assert build_report(settled, hosts_idle, NOW, lag={"status": 0, "fetch": 0}).idle
    assert not build_report(settled, hosts_idle, NOW, lag={"status": 0, "fetch": 2}).idle
    assert not build_report(URLS, hosts_idle, NOW).idle            # due URLs
    assert not build_report(settled, HOSTS, NOW).idle              # in flight
    assert Report().idle


def test_an_empty_crawl_reports_zeros():
    report = build_report({}, {}, NOW)
    assert (sum(report.by_status.values()), report.due_now, report.in_flight) == (0, 0, 0)
    assert report.to_json()["total"] == 0


def test_to_json_is_json_and_carries_every_number():
    report = build_report(URLS, HOSTS, NOW, lag={"status": 4, "fetch": 0, "signals": 1}, deadletters=7)
    data = json.loads(json.dumps(report.to_json()))
    assert data["total"] == 9
    assert data["by_status"]["DISCOVERED"] == 3
    assert data["by_host"]["b.example"] == {"FETCH_ERROR": 2, "ERROR": 2, "REDIRECTION": 1}
    assert data["reasons"]["fetch.timeout"] == 1
    assert data["rejected"] == {"scope.host": 5, "trap.depth": 1}
    assert (data["due_now"], data["in_flight"], data["deadletters"], data["idle"]) == (3, 3, 7, False)
    assert data["lag"] == {"status": 4, "fetch": 0, "signals": 1}


def test_to_text_shows_the_totals_statuses_reasons_rejections_and_hosts():
    text = build_report(URLS, HOSTS, NOW, lag={"status": 4, "signals": 1}, deadletters=7).to_text()
    first = text.splitlines()[0]
    for part in ("URLs: 9", "due now: 3", "in flight: 3", "unconsumed: 5", "dead letters: 7"):
        assert part in first
    for part in ("DISCOVERED=3", "FETCHED=1", "REDIRECTION=1", "FETCH_ERROR=2", "ERROR=2",
                 "fetch.timeout=1", "scope.host=5", "trap.depth=1"):
        assert part in text
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.startswith(("a.", "b."))}
    assert rows == {"a.example": ["3", "1", "0", "0", "0"], "b.example": ["0", "0", "1", "2", "2"]}


# ---------------------------------------------------------------------------- waits, rates, hosts, live view

def test_urls_held_by_a_future_time_or_a_host_block_are_waiting_not_due_and_keep_the_crawl_busy():
    urls = {"w1": rec("https://w.example/1", "w.example", Status.DISCOVERED, NOW + 30),   # Retry-After / robots retry
            "w2": rec("https://v.example/1", "v.example", Status.DISCOVERED, NOW - 1),    # due, but host backing off
            "w3": rec("https://w.example/3", "w.example", Status.FETCH_ERROR, NOW + 7200)}  # a later retry: not a wait
    hosts = {"v.example": HostRecord(key="v.example", backoff={"attempts": 0, "blocked_until_s": NOW + 90}).to_dict()}
    report = build_report(urls, hosts, NOW)
    assert (report.due_now, report.waiting, report.waiting_until_s) == (0, 2, NOW + 90)
    assert not report.idle
    assert report.settled(max_wait_s=20) and not report.settled(max_wait_s=60)  # the next wait ends in 30 s
    assert "waiting: 2 URLs" in report.to_text()
    assert build_report(urls, hosts, NOW + 100).due_now == 2


def test_a_crawl_with_work_is_never_settled_whatever_the_max_wait():
    assert not build_report(URLS, HOSTS, NOW).settled(max_wait_s=0)


def test_pages_per_second_and_eta_come_from_the_fetch_times():
    urls = {f"f{i}": UrlRecord(url=f"https://a.example/{i}", key="a.example", status=Status.FETCHED,
                               last_fetch_at_s=NOW - 20 + i).to_dict() for i in range(20)}
    urls |= {f"d{i}": rec(f"https://a.example/d{i}", "a.example", Status.DISCOVERED, NOW - 1) for i in range(10)}
    report = build_report(urls, {}, NOW)
    assert report.pages_per_s == 20 / 19
    assert report.pages_per_s_recent == 1.0  # 20 pages in the 20 s since the first
    assert report.eta_s == 10.0


def test_host_rows_carry_audit_pacing_and_robots_state_busiest_first():
    hosts = {"a.example": HostRecord(key="a.example", next_fetch_at_s=NOW + 2,
                                     backoff={"attempts": 2, "blocked_until_s": NOW + 9,
                                              "backing_off_since_s": NOW - 5}).to_dict()}
    audits = {"b.example": {"key": "b.example", "requests": 9, "violations": 0, "min_gap_s": 1.2,
                            "required_delay_s": 1.0},
              "a.example": {"key": "a.example", "requests": 3, "violations": 1, "min_gap_s": 0.1,
                            "required_delay_s": 0.5}}
    robots = {"https://a.example": RobotsEntry(kind=RobotsKind.DISALLOW_ALL, robots_text=None, fetched_at_s=NOW,
                                               expires_at_s=NOW + 60, http_status=503, retry_at_s=NOW + 60).to_dict()}
    report = build_report(URLS, hosts, NOW, audits=audits, robots=robots)
    rows = {r["host"]: r for r in report.hosts}
    assert [r["host"] for r in report.hosts][:2] == ["b.example", "a.example"]
    a = rows["a.example"]
    assert (a["next_fetch_at_s"], a["blocked_until_s"], a["backoff_attempts"]) == (NOW + 2, NOW + 9, 2)
    assert (a["requests"], a["violations"], a["delay_s"], a["robots"]) == (3, 1, 0.5, "disallow_all (503)")
    assert a["robots_retry_at_s"] == NOW + 60 and rows["b.example"]["robots"] == "unknown"
    assert report.audit_violations == 1
    assert json.loads(json.dumps(report.to_json()))["hosts"][0]["host"] == "b.example"


def test_the_live_view_renders_totals_waits_and_hosts():
    from rich.console import Console

    from squall.cli.live_view import render

    hosts = {"v.example": HostRecord(key="v.example",
                                     backoff={"attempts": 1, "blocked_until_s": NOW + 90}).to_dict()}
    urls = dict(URLS) | {"w": rec("https://v.example/1", "v.example", Status.DISCOVERED, NOW + 30)}
    console = Console(record=True, width=200)
    console.print(render(build_report(urls, hosts, NOW)))
    text = console.export_text()
    for part in ("URLs 10", "DISCOVERED 4", "waiting: 2 URLs", "busiest hosts", "most blocked hosts", "v.example",
                 "audit violations 0"):
        assert part in text, text


def test_a_long_wait_does_not_hide_a_short_one():
    urls = {"soon": rec("https://w.example/1", "w.example", Status.DISCOVERED, NOW + 5),
            "late": rec("https://w.example/2", "w.example", Status.DISCOVERED, NOW + 600)}
    report = build_report(urls, {}, NOW)
    assert (report.waiting_next_s, report.waiting_until_s) == (NOW + 5, NOW + 600)
    assert not report.settled(max_wait_s=60)      # the 5 s wait is waited for
    del urls["soon"]  # fetched: only the 600 s wait is left
    assert build_report(urls, {}, NOW + 10).settled(max_wait_s=60)
ROBOTS = {
    "https://a.example": {"kind": "rules", "robots_text": "", "fetched_at_s": 1.0, "expires_at_s": 2.0,
                          "truncated": True},
    "https://b.example": {"kind": "rules", "robots_text": "", "fetched_at_s": 1.0, "expires_at_s": 2.0},
    "http://c.example": {"kind": "allow_all", "robots_text": None, "fetched_at_s": 1.0, "expires_at_s": 2.0,
                         "truncated": False},
}


def test_robots_txt_cut_at_the_content_limit_is_counted_per_origin():
    report = build_report(URLS, HOSTS, NOW, robots=ROBOTS)
    assert report.robots_truncated == ["https://a.example"]
    data = report.to_json()
    assert (data["robots_truncated"], data["robots_truncated_origins"]) == (1, ["https://a.example"])
    assert "robots.txt cut at http.robots.content.limit: 1 origin(s) (https://a.example)" in report.to_text()


def test_robots_and_audit_records_of_another_shape_are_left_out():
    robots = {"https://a.example": {"kind": "nope"}, "https://b.example": ROBOTS["https://a.example"], "x": ["x"]}
    audits = {"a.example": {"requests": 3}, "b.example": ["x"]}
    report = build_report(URLS, HOSTS, NOW, audits=audits, robots=robots)
    rows = {r["host"]: r for r in report.hosts}
    assert (rows["a.example"]["robots"], rows["b.example"]["robots"]) == ("unknown", "rules (no answer)")
    assert (rows["a.example"]["requests"], rows["a.example"]["delay_s"], report.audit_violations) == (0, None, 0)
    assert report.robots_truncated == ["https://b.example"]


def test_without_truncated_robots_txt_the_text_has_no_robots_line():
    assert "robots.txt cut" not in build_report(URLS, HOSTS, NOW).to_text()
    assert build_report(URLS, HOSTS, NOW).to_json()["robots_truncated"] == 0
def test_rendered_pages_render_failures_and_refused_browser_requests_are_counted():
    def page(n: int, render: list[str], refused: list[str]) -> dict:
        return UrlRecord(url=f"https://s.example/{n}", key="s.example", status=Status.FETCHED, next_fetch_at_s=None,
                         metadata={"parse.render": render, "parse.render.refused": refused}).to_dict()

    urls = {"1": page(1, ["rendered"], ["other_site=2", "robots.denied=1"]),
            "2": page(2, ["rendered"], []),
            "3": page(3, ["failed", "render.timeout"], ["budget=1"]),
            "4": page(4, ["failed", "render.budget"], ["other_site=1"]),
            "5": rec("https://s.example/5", "s.example", Status.FETCHED, None)}  # not rendered
    report = build_report(urls, {}, NOW)
    assert report.rendered == 2
    assert report.render_failures == {"render.timeout": 1, "render.budget": 1}
    assert report.render_refused == {"other_site": 3, "robots.denied": 1, "budget": 1}
    assert json.loads(json.dumps(report.to_json()))["render"]["rendered"] == 2
    assert "rendered: 2   render failures: render.timeout=1, render.budget=1" in report.to_text()


async def test_a_tombstone_deletes_a_key_only_in_its_own_partition(monkeypatch) -> None:
    """A record that moved partition (byIP) stays live whatever order the partitions are read in."""
    import squall.tools.kafka_admin
    from squall.cli.status_read import latest_records

    moved = [(0, b"u", b'{"key": "10.0.0.1"}'), (2, b"u", b'{"key": "10.0.0.2"}'), (0, b"u", None),
             (1, b"gone", b'{"key": "k"}'), (1, b"gone", None)]
    # every interleaving that keeps each partition's own order
    for order in (moved, [moved[1], moved[0], moved[2]] + moved[3:], [moved[0], moved[2], moved[1]] + moved[3:]):
        async def read(bootstrap, topic, missing_ok=False, idle_timeout_s=30.0, _records=order):  # noqa: ANN001
            for record in _records:
                yield record

        monkeypatch.setattr(squall.tools.kafka_admin, "read_partitioned", read)
        assert await latest_records("broker", "urls-changelog") == {"u": {"key": "10.0.0.2"}}


def test_partitions_of_agent_topics_that_no_member_of_a_stable_group_holds_are_unassigned():
    from squall.cli.status_counts import unassigned_partitions

    needed = {"x-status": 2, "x-ticks": 2}
    members = {"m1": {"x-status": [0], "x-ticks": []}, "m2": {"x-status": [1], "x-ticks": [1]}}
    assert unassigned_partitions(needed, "Stable", members) == {"x-ticks": [0]}
    assert unassigned_partitions(needed, "Stable", {"m1": {"x-status": [0, 1], "x-ticks": [0, 1]}}) == {}
    assert unassigned_partitions(needed, "CompletingRebalance", {"m1": {}}) == {}  # nothing assigned yet
    assert unassigned_partitions(needed, "Empty", {}) == {}  # no worker running


def test_the_text_report_names_the_workers_and_warns_about_an_unassigned_topic():
    report = build_report({}, {}, NOW)
    assert "workers:" not in report.to_text()  # group unknown
    report.workers, report.group_state, report.unassigned = 2, "Stable", {"x-ticks": [0, 1, 2, 3]}
    text = report.to_text()
    assert "workers: 2 (Stable)" in text
    assert "NOT ASSIGNED to any worker: x-ticks [0, 1, 2, 3]" in text
    assert report.to_json()["unassigned"] == {"x-ticks": [0, 1, 2, 3]}


RECENT_CASES = [
    # (fetch times relative to NOW, expected pages/s over the last minute)
    ([-10 + i * 0.25 for i in range(40)], 40 / 10),  # a crawl that began 10 s ago at 4 pages/s: 4, not 40/60
    ([-120 + i * 0.25 for i in range(480)], 240 / 60),  # a long crawl at 4 pages/s: the last 60 s
    ([-60 + i * 0.25 for i in range(40)], 40 / 60),  # 10 s of crawl that ended 50 s ago: diluted over the minute
    ([-0.5], 1.0),  # one page half a second ago: at least 1 s
    ([-61, -200], 0.0),  # nothing in the window
    ([], 0.0),
]


@pytest.mark.parametrize(("offsets", "expected"), RECENT_CASES)
def test_the_recent_rate_divides_by_the_time_the_window_really_covers(offsets, expected):
    from squall.cli.status_counts import recent_rate

    assert recent_rate([NOW + o for o in offsets], NOW) == pytest.approx(expected)


def test_the_average_rate_leaves_idle_gaps_between_re_seeds_out():
    from squall.cli.status_counts import active_rate

    burst = [i * 0.25 for i in range(40)]  # 10 s at 4 pages/s (9.75 s between the first and the last)
    assert active_rate([NOW + t for t in burst]) == pytest.approx(40 / 9.75)
    two_bursts = [NOW + t for t in burst] + [NOW + 3600 + t for t in burst]  # re-seeded an hour later
    assert active_rate(two_bursts) == pytest.approx(80 / 19.5)
    assert active_rate([NOW + t * 100 for t in range(5)], idle_gap_s=120) == pytest.approx(5 / 400)  # slow: active
    assert active_rate([NOW]) == 1.0 and active_rate([]) == 0.0


def test_the_eta_follows_the_recent_rate_of_a_young_crawl():
    urls = {f"f{i}": UrlRecord(url=f"https://a.example/{i}", key="a.example", status=Status.FETCHED,
                               last_fetch_at_s=NOW - 10 + i * 0.25).to_dict() for i in range(40)}
    urls |= {f"d{i}": rec(f"https://a.example/d{i}", "a.example", Status.DISCOVERED, NOW - 1) for i in range(40)}
    report = build_report(urls, {}, NOW)
    assert report.pages_per_s_recent == pytest.approx(4.0)
    assert report.eta_s == pytest.approx(10.0)


def test_watch_without_a_terminal_prints_plain_snapshots(monkeypatch):
    import io

    from rich.console import Console

    from squall.cli import live_view

    reports = iter([build_report(URLS, HOSTS, NOW), build_report({}, {}, NOW + 2)])

    async def fake_collect(settings):
        return next(reports)

    monkeypatch.setattr(live_view, "collect", fake_collect)
    monkeypatch.setattr(live_view.time, "sleep", lambda s: None)
    out = io.StringIO()  # a pipe: not a terminal
    code = live_view.watch(None, interval_s=0, until_idle=True, timeout_s=0, console=Console(file=out))  # type: ignore[arg-type]
    text = out.getvalue()
    assert code == 1  # not settled before the (zero) timeout
    assert text.startswith("--- ") and "URLs: 9   due now: 3   in flight: 3" in text
    assert "\x1b[" not in text and "host " not in text  # no terminal codes, no per-host table
