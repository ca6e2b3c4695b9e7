"""squall.tools.fault_metrics: the definitions the fault suite measures trials with."""

from __future__ import annotations

import pytest

from squall.tools import fault_metrics as fm

PORT = 8000


def req(ip: str, path: str, t: float, status: int | None = 200, retry_after: str | None = None) -> dict:
    r = {"ip": ip, "path": path, "t": t, "status": status}
    if retry_after is not None:
        r["retry_after"] = retry_after
    return r


def test_an_expected_url_without_a_final_status_is_lost():
    records = {"u1": {"status": "FETCHED"}, "u2": {"status": "FETCH_ERROR"}, "u3": {"status": "ERROR"},
               "u4": {"status": "DISCOVERED"}}
    assert fm.lost_urls(["u1", "u2", "u3", "u4", "u5"], records) == {"u2", "u4", "u5"}


def test_repeats_count_requests_beyond_the_scripted_answers_and_ignore_robots():
    reqs = [req("a", "/x", 1), req("a", "/x", 2), req("a", "/y", 3), req("a", "/y", 4), req("a", "/y", 5),
            req("a", "/robots.txt", 0), req("a", "/robots.txt", 9)]
    scripted = {f"http://a:{PORT}/y": 2}
    assert fm.repeat_counts(reqs, PORT, scripted) == {f"http://a:{PORT}/x": 1, f"http://a:{PORT}/y": 1}


VIOLATIONS = [
    # (requests, expected rules)
    ([req("a", "/", 0.0), req("a", "/1", 0.3), req("a", "/2", 0.6)], []),
    ([req("a", "/", 0.0), req("a", "/1", 0.29)], ["delay"]),
    ([req("a", "/robots.txt", 0.0), req("a", "/", 0.1)], ["delay"]),          # robots.txt counts as a request
    ([req("a", "/", 0.0, 503, "2"), req("a", "/1", 1.0)], ["retry-after"]),
    ([req("a", "/", 0.0, 503, "2"), req("a", "/1", 2.0)], []),
    ([req("a", "/", 0.0, 200, "2"), req("a", "/1", 1.0)], []),               # Retry-After only on 429/503
    ([req("a", "/", 0.0, 429, "5"), req("a", "/1", 3.0), req("a", "/2", 5.1)], ["retry-after"]),
    ([req("a", "/", 0.0), req("b", "/", 0.01)], []),                          # two hosts are independent
]


@pytest.mark.parametrize(("requests", "rules"), VIOLATIONS)
def test_politeness_violations_are_gaps_under_the_delay_or_inside_a_retry_after(requests, rules):
    assert [v.rule for v in fm.politeness_violations(requests, {}, 0.3)] == rules


def test_a_host_with_a_crawl_delay_needs_its_own_gap():
    reqs = [req("c", "/", 0.0), req("c", "/1", 0.5)]
    assert [v.required_s for v in fm.politeness_violations(reqs, {"c": 1.0}, 0.3)] == [1.0]


def test_recovery_is_the_first_page_request_to_the_affected_hosts_after_the_fault():
    reqs = [req("a", "/", 1.0), req("b", "/", 5.0), req("a", "/robots.txt", 6.0), req("a", "/1", 7.5)]
    assert fm.first_request_after(reqs, 2.0, ["a"]) == 7.5
    assert fm.first_request_after(reqs, 8.0, ["a"]) is None


def test_the_longest_silence_spans_the_window_edges():
    reqs = [req("a", "/", 2.0), req("a", "/1", 3.0), req("b", "/", 4.0)]
    assert fm.longest_silence(reqs, 0.0, 10.0, ["a"]) == 7.0
    assert fm.longest_silence(reqs, 0.0, 10.0, ["a", "b"]) == 6.0


def test_inflight_urls_come_from_the_hosts_records():
    hosts = {"a": {"in_flight": {"u1": 1.0}}, "b": {"in_flight": {"u2": 2.0}}, "c": {}}
    assert fm.inflight_at(hosts) == {"u1", "u2"}
    assert fm.inflight_at(hosts, ["b", "c"]) == {"u2"}
