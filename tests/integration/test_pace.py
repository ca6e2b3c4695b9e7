"""The one pace model through the real broker, measured at the recording server (docs/politeness.md: the delay rule).

* ``paced`` (``fetcher.server.delay`` 0.5 s, force on — the default): a
  Crawl-delay of 0 and one below the delay never speed a host up; a
  Retry-After longer than ``frontier.backoff.max.secs`` is honoured in full;
  a Retry-After of 0 answered again and again makes the gaps grow; the hops
  of a redirected robots.txt are spaced by the delay and a redirect loop
  ends at the repeated URL.
* ``opted_out`` (``fetcher.server.delay.force`` false): a site's lower
  Crawl-delay speeds up its own host, never below ``fetcher.server.min.delay``.
* a worker killed while URLs of a host wait ahead at its fetcher: the new
  owner starts the host no sooner than its pace allows.

Gaps are measured between request arrivals at the server, robots.txt included.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec

from .measured_crawl import Finished, _gaps, _index, _pages, _run, _status_is, assert_audit_agrees_with_the_server

DELAY_S = 0.5
BACKOFF_MAX_S = 2.0
RETRY_AFTER_S = 6

CD_ZERO = "127.0.0.2"     # Crawl-delay: 0
CD_LOW = "127.0.0.3"      # Crawl-delay: 0.2 < fetcher.server.delay
RA_LONG = "127.0.0.4"     # /limited: 429 Retry-After 6 (> frontier.backoff.max.secs 2) once
RA_ZERO = "127.0.0.5"     # /zero: 429 Retry-After 0, four times
HOPS = "127.0.0.6"        # robots.txt → /r1 → /r2 → /robots-final.txt
LOOP = "127.0.0.7"        # robots.txt → /l1 → /l2 → /robots.txt → ...
OPT_OUT = "127.0.0.8"     # Crawl-delay: 0.2 with force off

PACED = {"fetcher.server.delay": DELAY_S, "frontier.backoff.base.secs": 0.4,
         "frontier.backoff.max.secs": BACKOFF_MAX_S, "http.robots.retry.base.secs": 600.0}


def paced_site() -> SiteSpec:
    allow = RobotsSpec(text="User-agent: *\nAllow: /\n")
    four = ("/a", "/b", "/c", "/d")
    return SiteSpec(hosts={
        CD_ZERO: HostSpec(pages={"/": _index(*four), **_pages(*four)},
                          robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 0\n")),
        CD_LOW: HostSpec(pages={"/": _index(*four), **_pages(*four)},
                         robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 0.2\n")),
        RA_LONG: HostSpec(pages={"/": _index("/limited", "/after"), "/after": Page(title="after"),
                                 "/limited": Page(title="limited", statuses=(429,), retry_after=str(RETRY_AFTER_S))},
                          robots=allow),
        RA_ZERO: HostSpec(pages={"/": _index("/zero"), "/zero": Page(title="zero", statuses=(429,) * 4, retry_after="0")},
                          robots=allow),
        HOPS: HostSpec(pages={"/": _index("/a"), **_pages("/a"), "/r1": Page.redirect("/r2"),
                              "/r2": Page.redirect("/robots-final.txt"),
                              "/robots-final.txt": Page(body="User-agent: *\nAllow: /\n", content_type="text/plain")},
                       robots=RobotsSpec(location="/r1")),
        LOOP: HostSpec(pages={"/": _index("/a"), **_pages("/a"), "/l1": Page.redirect("/l2"),
                              "/l2": Page.redirect("/robots.txt")},
                       robots=RobotsSpec(location="/l1")),
    })


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Finished]:
    def url(ip: str, path: str) -> str:
        return f"http://{ip}:{{port}}{path}"

    def finished(served, records) -> bool:  # noqa: ANN001
        port = served.server.port
        want = {f"http://{ip}:{port}{p}": "FETCHED" for ip in (CD_ZERO, CD_LOW) for p in ("/", "/a", "/b", "/c", "/d")}
        want.update({f"http://{RA_LONG}:{port}{p}": "FETCHED" for p in ("/", "/limited", "/after")})
        want.update({f"http://{RA_ZERO}:{port}{p}": "FETCHED" for p in ("/", "/zero")})
        want.update({f"http://{HOPS}:{port}{p}": "FETCHED" for p in ("/", "/a")})
        return _status_is(want)(served, records) and f"http://{LOOP}:{port}/" in records

    yield from _run(tmp_path_factory, kafka_bootstrap, "paced", paced_site(), PACED, finished)


@pytest.mark.parametrize("ip", [CD_ZERO, CD_LOW], ids=["crawl-delay-0", "crawl-delay-below-the-delay"])
def test_a_crawl_delay_below_the_operator_delay_never_speeds_the_host_up(paced: Finished, ip: str) -> None:
    times = paced.times(ip)
    assert len(times) == 6, paced.describe(ip)  # robots.txt and five pages, each once
    assert min(_gaps(times)) >= DELAY_S, paced.describe(ip)


def test_a_retry_after_longer_than_the_backoff_cap_is_honoured_in_full(paced: Finished) -> None:
    limited = paced.times(RA_LONG, "/limited")
    assert len(limited) == 2, paced.describe(RA_LONG)
    first_429 = limited[0]
    later = [t for t in paced.times(RA_LONG) if t > first_429]
    assert later and min(later) - first_429 >= RETRY_AFTER_S, paced.describe(RA_LONG)


def test_a_retry_after_of_zero_answered_again_and_again_makes_the_gaps_grow(paced: Finished) -> None:
    times = paced.times(RA_ZERO, "/zero")
    assert len(times) == 5, paced.describe(RA_ZERO)  # four 429s, then the page
    gaps = _gaps(times)
    assert all(g >= DELAY_S for g in gaps), paced.describe(RA_ZERO)
    assert gaps[-1] > gaps[0] * 1.5, paced.describe(RA_ZERO)  # exponential back-off, not the plain delay
    assert gaps[-1] >= BACKOFF_MAX_S * 0.9 or gaps[-1] >= 0.4 * 2 ** 3, paced.describe(RA_ZERO)


def test_robots_txt_redirect_hops_are_spaced_by_the_delay(paced: Finished) -> None:
    assert paced.paths(HOPS)[:4] == ["/robots.txt", "/r1", "/r2", "/robots-final.txt"], paced.describe(HOPS)
    assert min(_gaps(paced.times(HOPS))) >= DELAY_S, paced.describe(HOPS)


def test_a_robots_txt_redirect_loop_stops_at_the_repeated_url_and_blocks_the_host(paced: Finished) -> None:
    assert paced.paths(LOOP) == ["/robots.txt", "/l1", "/l2"], paced.describe(LOOP)
    assert min(_gaps(paced.times(LOOP))) >= DELAY_S, paced.describe(LOOP)
    record = paced.records[paced.url(LOOP)]
    assert (record["status"], record["reason"]) == ("DISCOVERED", "robots.unavailable"), record


def test_the_crawlers_audit_agrees_with_the_server_on_every_paced_host(paced: Finished) -> None:
    assert_audit_agrees_with_the_server(paced.crawl, paced.served, {}, DELAY_S)


def test_opting_out_of_the_floor_lets_a_lower_crawl_delay_speed_up_its_own_host(site, crawl) -> None:  # noqa: ANN001
    five = ("/a", "/b", "/c", "/d", "/e")
    served = site(SiteSpec(hosts={OPT_OUT: HostSpec(pages={"/": _index(*five), **_pages(*five)},
                                                    robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 0.2\n"))}))
    c = crawl(**{"fetcher.server.delay": 1.5, "fetcher.server.delay.force": False, "fetcher.server.min.delay": 0.1})
    c.start_worker()
    c.seed(served.seeds)
    c.wait_idle(timeout_s=120)
    gaps = _gaps(served.start_times(OPT_OUT))
    assert len(gaps) == 6, gaps
    assert min(gaps) >= 0.2, gaps
    assert sorted(gaps)[len(gaps) // 2] < 1.0, gaps  # the site's 0.2 s, not the operator's 1.5 s
    assert_audit_agrees_with_the_server(c, served, {}, 0.2)


def test_a_new_owner_starts_a_host_no_sooner_than_its_pace_allows_after_a_kill(site, crawl) -> None:  # noqa: ANN001
    delay_s = 8.0  # longer than the session timeout, so only the take-over rule can keep the gap
    pages = ("/a", "/b", "/c")
    slow = {p: Page(title=p, delay_s=1.0) for p in pages}
    served = site(SiteSpec(hosts={"127.0.0.9": HostSpec(pages={"/": _index(*pages), **slow},
                                                        robots=RobotsSpec(text="User-agent: *\nAllow: /\n"))}))
    c = crawl(**{"fetcher.server.delay": delay_s, "kafka.session.timeout.secs": 6.0})
    c.start_worker("w1")
    c.seed(served.seeds)
    deadline = time.monotonic() + 120
    while not any(r["path"] in pages for r in served.requests()) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # the page is being fetched (it answers after 1 s), the next URL waits ahead at w1
    c.stop_worker("w1", kill=True)
    killed_at = time.time()
    c.start_worker("w2")
    c.wait_idle(timeout_s=240)
    times = served.start_times("127.0.0.9")
    assert sorted(served.page_requests()) == sorted(served.server.expected_pages()) or \
        set(served.page_requests()) == served.server.expected_pages()
    assert min(_gaps(times)) >= delay_s, [round(t - killed_at, 2) for t in times]
    # the audit too (a SIGKILL may lose records not yet on the changelog, never invent requests)
    host = {h["key"]: h for h in c.audit()["by_host"]}["127.0.0.9"]
    assert host["violations"] == 0 and 0 < host["requests"] <= len(times), host
