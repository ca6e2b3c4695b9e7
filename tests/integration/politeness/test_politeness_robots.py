"""Politeness towards robots.txt through the real broker: Crawl-delay (own agent, fractional, capped, forced), rules, availability."""

from __future__ import annotations

import asyncio
import math

import pytest

from squall.cli.status_read import latest_records
from squall.policy.topics import changelog_name

from ..measured_crawl import Finished, _gaps
from .conftest import (
    CAP_S,
    CAPPED,
    CAPPED_DELAY_S,
    DELAY2,
    DELAY_HALF,
    DISALLOW,
    GAP_SLACK_S,
    PER_AGENT,
    ROBOTS_403,
    ROBOTS_404,
    ROBOTS_503,
    ROBOTS_MOVED,
    SERVER_DELAY_S,
    TOO_LONG,
)

# ---------------------------------------------------------------------------- robots Crawl-delay


def test_crawl_delay_2_spaces_every_request_to_the_host_by_2s(polite: Finished) -> None:
    times = polite.times(DELAY2)
    assert polite.paths(DELAY2)[0] == "/robots.txt"
    assert len(times) == 5, polite.describe(DELAY2)  # robots.txt, /, /a, /b, /c
    assert min(_gaps(times)) >= 2.0, polite.describe(DELAY2)
    assert all(polite.records[polite.url(DELAY2, p)]["status"] == "FETCHED" for p in ("/", "/a", "/b", "/c"))


def test_the_crawl_delay_under_our_own_user_agent_line_paces_the_host_not_a_faster_one_of_its_group(
    polite: Finished,
) -> None:
    times = polite.times(PER_AGENT)
    assert polite.paths(PER_AGENT)[0] == "/robots.txt"
    assert len(times) == 5, polite.describe(PER_AGENT)  # robots.txt, /, /a, /b, /c — /private/x is disallowed
    assert SERVER_DELAY_S < 0.3 < 2.0  # the server delay and the other agents' Crawl-delays are all shorter
    assert min(_gaps(times)) >= 2.0 - GAP_SLACK_S, polite.describe(PER_AGENT)
    assert polite.records[polite.url(PER_AGENT, "/private/x")]["status"] == "ERROR"


def test_fractional_crawl_delay_is_honoured(polite: Finished) -> None:
    times = polite.times(DELAY_HALF)
    assert len(times) == 6, polite.describe(DELAY_HALF)  # robots.txt, /, /a .. /d
    assert min(_gaps(times)) >= 0.5, polite.describe(DELAY_HALF)
    assert all(polite.records[polite.url(DELAY_HALF, p)]["status"] == "FETCHED" for p in ("/", "/a", "/b", "/c", "/d"))


def test_crawl_delay_over_the_cap_without_force_is_an_error_and_no_page_is_requested(polite: Finished) -> None:
    assert polite.paths(TOO_LONG) == ["/robots.txt"], polite.describe(TOO_LONG)
    for path in ("/", "/a"):  # both seeded
        record = polite.records[polite.url(TOO_LONG, path)]
        assert (record["status"], record["reason"]) == ("ERROR", "crawl_delay.too_long"), record
        assert record["attempts"] == 0  # no request was made for the page


def test_crawl_delay_over_the_cap_with_force_fetches_at_the_cap_and_the_frontier_paces_at_whole_seconds(
    forced: Finished,
) -> None:
    paths = forced.paths(CAPPED)
    assert paths[0] == "/robots.txt" and sorted(paths[1:]) == ["/", "/p1", "/p2", "/p3"], forced.describe(CAPPED)
    times = forced.times(CAPPED)
    # robots.txt → first page: the fetcher's local delay, capped at fetcher.max.crawl.delay
    assert times[1] - times[0] >= CAP_S, forced.describe(CAPPED)
    # after the first page's signal the frontier hands out at ceil(2.5) = 3 s (hosts table, via the regulator)
    forwarded = math.ceil(CAPPED_DELAY_S)
    assert min(_gaps(times[1:])) >= forwarded, forced.describe(CAPPED)
    for p in ("/", "/p1", "/p2", "/p3"):
        record = forced.records[forced.url(CAPPED, p)]
        assert record["status"] == "FETCHED", record
        assert record["metadata"].get("robots.crawl.delay") == [str(forwarded)], record
    hosts = asyncio.run(
        latest_records(forced.crawl.settings["kafka.bootstrap.servers"], changelog_name(forced.crawl.settings, "hosts"))
    )
    assert hosts[CAPPED]["crawl_delay"]["delay_s"] == forwarded, hosts[CAPPED]


# ---------------------------------------------------------------------------- robots rules and availability


def test_disallowed_paths_are_never_requested(polite: Finished) -> None:
    paths = polite.paths(DISALLOW)
    assert not [p for p in paths if p.startswith("/private/")], polite.describe(DISALLOW)
    assert sorted(paths) == ["/", "/open", "/robots.txt"]
    for p in ("/private/a", "/private/b", "/private/c"):
        record = polite.records[polite.url(DISALLOW, p)]
        assert (record["status"], record["reason"]) == ("ERROR", "robots.denied"), record


def test_robots_txt_503_blocks_every_page_until_robots_txt_answers(polite: Finished) -> None:
    reqs = [r for r in polite.served.requests() if r["ip"] == ROBOTS_503]
    robots = [r for r in reqs if r["path"] == "/robots.txt"]
    assert [r["status"] for r in robots] == [503, 503, 200], polite.describe(ROBOTS_503)
    first_allowed = robots[2]["t"]
    assert all(r["t"] > first_allowed for r in reqs if r["path"] != "/robots.txt"), polite.describe(ROBOTS_503)
    # the retries of robots.txt back off (http.robots.retry.base.secs 1, doubling, max 2)
    gaps = _gaps([r["t"] for r in robots])
    assert gaps[0] >= 1.0 and gaps[1] >= 2.0, polite.describe(ROBOTS_503)
    assert sorted(r["path"] for r in reqs if r["path"] != "/robots.txt") == ["/", "/a", "/b"]
    for p in ("/", "/a", "/b"):
        assert polite.records[polite.url(ROBOTS_503, p)]["status"] == "FETCHED"


@pytest.mark.parametrize("ip", [ROBOTS_404, ROBOTS_403], ids=["404", "403"])
def test_robots_txt_404_and_403_allow_everything(polite: Finished, ip: str) -> None:
    assert sorted(polite.paths(ip)) == ["/", "/a", "/b", "/robots.txt"], polite.describe(ip)
    for p in ("/", "/a", "/b"):
        assert polite.records[polite.url(ip, p)]["status"] == "FETCHED"


def test_a_redirected_robots_txt_is_followed(polite: Finished) -> None:
    paths = polite.paths(ROBOTS_MOVED)
    assert paths[:2] == ["/robots.txt", "/robots-moved.txt"], polite.describe(ROBOTS_MOVED)
    assert "/hidden/a" not in paths  # disallowed by the redirect target only
    assert sorted(paths[2:]) == ["/", "/shown"]
    record = polite.records[polite.url(ROBOTS_MOVED, "/hidden/a")]
    assert (record["status"], record["reason"]) == ("ERROR", "robots.denied"), record
    assert polite.records[polite.url(ROBOTS_MOVED, "/shown")]["status"] == "FETCHED"
    # the page waits the queue delay after the last robots request
    pages = polite.times(ROBOTS_MOVED, pages_only=True)
    assert pages[0] - polite.times(ROBOTS_MOVED, "/robots-moved.txt")[0] >= SERVER_DELAY_S
    assert min(_gaps(pages)) >= SERVER_DELAY_S
