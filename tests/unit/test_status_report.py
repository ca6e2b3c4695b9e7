"""Tests of squall.status_report.build_report (``squall status``): counts from table records, fake clock."""

from __future__ import annotations

import json

from squall.frontier import HostRecord
from squall.records import Status
from squall.schedule import UrlRecord
from squall.status_report import Report, build_report

NOW = 1_714_564_800.0  # the fake clock


def rec(url: str, key: str, status: Status, next_fetch_at_s: float | None, reason: str | None = None) -> dict:
    return UrlRecord(url=url, key=key, status=status, next_fetch_at_s=next_fetch_at_s, reason=reason).to_dict()


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
