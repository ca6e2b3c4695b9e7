"""Politeness through the real broker, measured at the recording server (docs/architecture.md invariants 2 and 4).

Two crawls, each one configuration with several simulated hosts (one
behaviour per host, a few pages each), shared by the tests of this module
so the suite stays short on a 2-core CI box:

* ``polite`` (robots pacing off, ``fetcher.max.crawl.delay`` 3, no force):
  Crawl-delay 2 and 0.5, a Crawl-delay over the cap, disallowed paths,
  robots.txt 503 → 200, robots.txt 404 and 403, a redirected robots.txt,
  Retry-After 5 and headerless 429s, per-agent Crawl-delays in one group
  (robots agent ``squallbot``).
* ``forced`` (``fetcher.max.crawl.delay`` 1 with force, robots pacing on):
  local cap in the fetcher, pacing at the requested whole seconds in the
  frontier; then signals are re-delivered through the broker to check that
  the queue regulator is idempotent.

Every gap is measured between request *arrivals* at the server, robots.txt
included (the fetcher waits the queue delay after robots.txt too), and only
lower bounds are asserted: politeness, not speed.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from squall.tools.harness import Crawl
from squall.policy.partition import partition_for_key
from squall.policy.records import SignalKind, SignalMessage
from squall.cli.status_read import latest_records
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec
from squall.policy.topics import changelog_name, topic_name

from .conftest import BASE_OVERRIDES, ServedSite

SERVER_DELAY_S = 0.2
BACKOFF_BASE_S = 0.5
FINISH_TIMEOUT_S = 300.0

# hosts of the `polite` crawl: one behaviour each
DELAY2 = "127.0.0.2"        # Crawl-delay: 2
DELAY_HALF = "127.0.0.3"    # Crawl-delay: 0.5
TOO_LONG = "127.0.0.4"      # Crawl-delay: 10 > fetcher.max.crawl.delay 3, no force
DISALLOW = "127.0.0.5"      # Disallow: /private/
ROBOTS_503 = "127.0.0.6"    # robots.txt 503, 503, then 200
ROBOTS_404 = "127.0.0.7"    # robots.txt 404
ROBOTS_403 = "127.0.0.8"    # robots.txt 403
ROBOTS_MOVED = "127.0.0.9"  # robots.txt 301 → /robots-moved.txt (Disallow: /hidden)
RETRY_AFTER = "127.0.0.10"  # /limited answers 429 Retry-After: 5 once
BUSY = "127.0.0.11"         # /busy answers 429 without Retry-After three times
PER_AGENT = "127.0.0.13"    # Crawl-delay 0.3 / 2 / 0.6 for otherbot / squallbot / fastbot, one RFC 9309 group
ROBOTS_AGENT = "squallbot"
PER_AGENT_ROBOTS = (
    "User-agent: otherbot\nCrawl-delay: 0.3\n\n"
    "User-agent: squallbot\nCrawl-delay: 2\n\n"
    "User-agent: fastbot\nCrawl-delay: 0.6\n\n"
    "User-agent: *\nDisallow: /private/\n"
)
GAP_SLACK_S = 0.01  # the server's clock reads arrivals, the fetcher's clock its turns

# host of the `forced` crawl
CAPPED = "127.0.0.12"       # Crawl-delay: 2.5 > fetcher.max.crawl.delay 1, force
CAPPED_DELAY_S = 2.5
CAP_S = 1.0


def _index(*links: str, title: str = "index") -> Page:
    return Page(title=title, links=links)


def _pages(*paths: str) -> dict[str, Page]:
    return {p: Page(title=p) for p in paths}


def polite_site() -> SiteSpec:
    robots = "User-agent: *\nAllow: /\n"
    return SiteSpec(hosts={
        DELAY2: HostSpec(pages={"/": _index("/a", "/b", "/c"), **_pages("/a", "/b", "/c")},
                         robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 2\n")),
        DELAY_HALF: HostSpec(pages={"/": _index("/a", "/b", "/c", "/d"), **_pages("/a", "/b", "/c", "/d")},
                             robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 0.5\n")),
        TOO_LONG: HostSpec(pages={"/": _index("/a"), **_pages("/a")},
                           robots=RobotsSpec(text="User-agent: *\nCrawl-delay: 10\n")),
        DISALLOW: HostSpec(pages={"/": _index("/open", "/private/a", "/private/b"),
                                  "/open": _index("/private/c"), **_pages("/private/a", "/private/b", "/private/c")},
                           robots=RobotsSpec(text="User-agent: *\nDisallow: /private/\n")),
        ROBOTS_503: HostSpec(pages={"/": _index("/a", "/b"), **_pages("/a", "/b")},
                             robots=RobotsSpec(statuses=(503, 503), text=robots)),
        ROBOTS_404: HostSpec(pages={"/": _index("/a", "/b"), **_pages("/a", "/b")}, robots=None),
        ROBOTS_403: HostSpec(pages={"/": _index("/a", "/b"), **_pages("/a", "/b")}, robots=RobotsSpec(status=403)),
        ROBOTS_MOVED: HostSpec(pages={"/": _index("/shown", "/hidden/a"), **_pages("/shown", "/hidden/a"),
                                      "/robots-moved.txt": Page(body="User-agent: *\nDisallow: /hidden\n",
                                                                content_type="text/plain")},
                               robots=RobotsSpec(location="/robots-moved.txt")),
        RETRY_AFTER: HostSpec(pages={"/": _index("/limited", "/after"), "/after": Page(title="after"),
                                     "/limited": Page(title="limited", statuses=(429,), retry_after="5")},
                              robots=RobotsSpec(text=robots)),
        BUSY: HostSpec(pages={"/": _index("/busy"), "/busy": Page(title="busy", statuses=(429, 429, 429))},
                       robots=RobotsSpec(text=robots)),
        PER_AGENT: HostSpec(pages={"/": _index("/a", "/b", "/c", "/private/x"),
                                   **_pages("/a", "/b", "/c", "/private/x")},
                            robots=RobotsSpec(text=PER_AGENT_ROBOTS)),
    })


def forced_site() -> SiteSpec:
    return SiteSpec(hosts={
        CAPPED: HostSpec(pages={"/": _index("/p1", "/p2", "/p3"), **_pages("/p1", "/p2", "/p3")},
                         robots=RobotsSpec(text=f"User-agent: *\nCrawl-delay: {CAPPED_DELAY_S}\n")),
    })


# ---------------------------------------------------------------------------- shared crawls

@dataclass
class Finished:
    served: ServedSite
    crawl: Crawl
    records: dict[str, dict[str, Any]]

    def url(self, ip: str, path: str = "/") -> str:
        return self.served.url(ip, path)

    def paths(self, ip: str) -> list[str]:
        """Paths requested on host ``ip``, in arrival order (robots.txt included)."""
        return [r["path"] for r in self.served.requests() if r["ip"] == ip]

    def times(self, ip: str, path: str | None = None, *, pages_only: bool = False) -> list[float]:
        return sorted(r["t"] for r in self.served.requests() if r["ip"] == ip
                      and (path is None or r["path"] == path)
                      and not (pages_only and r["path"].startswith("/robots")))

    def describe(self, ip: str) -> list[tuple[str, float, Any]]:
        """(path, arrival, status) of every request to ``ip``, arrival relative to the first: for messages."""
        reqs = [r for r in self.served.requests() if r["ip"] == ip]
        t0 = reqs[0]["t"] if reqs else 0.0
        return [(r["path"], round(r["t"] - t0, 3), r["status"]) for r in reqs]


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in zip(times, times[1:])]


def _run(tmp_path_factory: pytest.TempPathFactory, bootstrap: str, name: str, spec: SiteSpec,
         overrides: dict[str, Any], finished: Callable[[ServedSite, dict[str, dict[str, Any]]], bool],
         extra_seeds: tuple[tuple[str, str], ...] = ()) -> Iterator[Finished]:
    """Serve ``spec`` (seeds: each host's ``/`` and ``extra_seeds`` (ip, path)), run one worker with
    ``overrides``, wait until ``finished`` holds and the crawl is idle."""
    tmp = tmp_path_factory.mktemp(name)
    served = ServedSite(spec, Path(tmp) / "requests.jsonl")
    crawl = Crawl(Path(tmp) / "crawl", bootstrap, {**BASE_OVERRIDES, **overrides})
    try:
        crawl.start_worker()
        crawl.seed([*served.seeds, *(served.url(ip, path) for ip, path in extra_seeds)])
        # Crawl.wait_idle alone is not enough: a URL rescheduled into the future (Retry-After, robots
        # retry) is neither due nor in flight, so the crawl may look idle before that URL's retry.
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        while True:
            crawl.wait_idle(timeout_s=max(1.0, deadline - time.monotonic()))
            records = crawl.records()
            if finished(served, records):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"crawl {name} did not finish: {json.dumps(records, indent=1)[:4000]}")
            time.sleep(1.0)
        yield Finished(served, crawl, crawl.records())
    finally:
        crawl.stop()
        served.close()


def _status_is(expected: dict[str, str]) -> Callable[[ServedSite, dict[str, dict[str, Any]]], bool]:
    def check(_served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        return all(records.get(u, {}).get("status") == s for u, s in expected.items())
    return check


@pytest.fixture(scope="module")
def polite(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Finished]:
    spec = polite_site()
    overrides = {
        "fetcher.server.delay": SERVER_DELAY_S,
        "fetcher.max.crawl.delay": 3.0,
        "fetcher.max.crawl.delay.force": False,
        "frontier.backoff.base.secs": BACKOFF_BASE_S,
        "frontier.backoff.max.secs": 8.0,
        "http.robots.retry.base.secs": 1.0,
        "http.robots.retry.max.secs": 2.0,
        "http.robots.agents": [ROBOTS_AGENT],
    }

    def finished(served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        u = served.url
        return _status_is({u(RETRY_AFTER, "/limited"): "FETCHED", u(BUSY, "/busy"): "FETCHED",
                           u(ROBOTS_503, "/a"): "FETCHED", u(ROBOTS_503, "/b"): "FETCHED",
                           u(DELAY2, "/c"): "FETCHED", u(TOO_LONG): "ERROR", u(TOO_LONG, "/a"): "ERROR",
                           u(PER_AGENT, "/c"): "FETCHED"}
                          )(served, records)

    yield from _run(tmp_path_factory, kafka_bootstrap, "polite", spec, overrides, finished,
                    extra_seeds=((TOO_LONG, "/a"),))


@pytest.fixture(scope="module")
def forced(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Finished]:
    overrides = {
        "fetcher.server.delay": SERVER_DELAY_S,
        "fetcher.max.crawl.delay": CAP_S,
        "fetcher.max.crawl.delay.force": True,
        "frontier.robots.crawl.delay.enabled": True,
        "frontier.max.urls.per.bucket": 1,
        "metadata.persist": ["parse.*", "robots.crawl.delay"],
        "partition.url.mode": "byHost",
    }

    def finished(served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        return _status_is({served.url(CAPPED, p): "FETCHED" for p in ("/", "/p1", "/p2", "/p3")})(served, records)

    yield from _run(tmp_path_factory, kafka_bootstrap, "forced", forced_site(), overrides, finished)


# ---------------------------------------------------------------------------- robots Crawl-delay

def test_crawl_delay_2_spaces_every_request_to_the_host_by_2s(polite: Finished) -> None:
    times = polite.times(DELAY2)
    assert polite.paths(DELAY2)[0] == "/robots.txt"
    assert len(times) == 5, polite.describe(DELAY2)  # robots.txt, /, /a, /b, /c
    assert min(_gaps(times)) >= 2.0, polite.describe(DELAY2)
    assert all(polite.records[polite.url(DELAY2, p)]["status"] == "FETCHED" for p in ("/", "/a", "/b", "/c"))


def test_the_crawl_delay_under_our_own_user_agent_line_paces_the_host_not_a_faster_one_of_its_group(
        polite: Finished) -> None:
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
    assert all(polite.records[polite.url(DELAY_HALF, p)]["status"] == "FETCHED"
               for p in ("/", "/a", "/b", "/c", "/d"))


def test_crawl_delay_over_the_cap_without_force_is_an_error_and_no_page_is_requested(polite: Finished) -> None:
    assert polite.paths(TOO_LONG) == ["/robots.txt"], polite.describe(TOO_LONG)
    for path in ("/", "/a"):  # both seeded
        record = polite.records[polite.url(TOO_LONG, path)]
        assert (record["status"], record["reason"]) == ("ERROR", "crawl_delay.too_long"), record
        assert record["attempts"] == 0  # no request was made for the page


def test_crawl_delay_over_the_cap_with_force_fetches_at_the_cap_and_the_frontier_paces_at_whole_seconds(
        forced: Finished) -> None:
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
    hosts = asyncio.run(latest_records(forced.crawl.settings["kafka.bootstrap.servers"],
                                       changelog_name(forced.crawl.settings, "hosts")))
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


# ---------------------------------------------------------------------------- rate limits

def test_retry_after_5_keeps_the_host_unrequested_for_5s(polite: Finished) -> None:
    reqs = [r for r in polite.served.requests() if r["ip"] == RETRY_AFTER]
    limited = [i for i, r in enumerate(reqs) if r["status"] == 429]
    assert len(limited) == 1, polite.describe(RETRY_AFTER)
    i = limited[0]
    assert i + 1 < len(reqs), polite.describe(RETRY_AFTER)
    assert reqs[i + 1]["t"] - reqs[i]["t"] >= 5.0, polite.describe(RETRY_AFTER)
    record = polite.records[polite.url(RETRY_AFTER, "/limited")]
    assert record["status"] == "FETCHED" and record["attempts"] >= 2, record
    assert polite.records[polite.url(RETRY_AFTER, "/after")]["status"] == "FETCHED"


def test_headerless_429_backs_off_with_growing_gaps_until_fetched(polite: Finished) -> None:
    busy = [r for r in polite.served.requests() if r["ip"] == BUSY and r["path"] == "/busy"]
    assert [r["status"] for r in busy] == [429, 429, 429, 200], polite.describe(BUSY)
    gaps = _gaps([r["t"] for r in busy])
    # back-off base 0.5 s doubling (jitter only adds): ≥ 0.5, ≥ 1, ≥ 2
    for k, gap in enumerate(gaps):
        assert gap >= BACKOFF_BASE_S * 2 ** k, (k, polite.describe(BUSY))
    assert gaps[-1] > gaps[0], polite.describe(BUSY)
    record = polite.records[polite.url(BUSY, "/busy")]
    assert record["status"] == "FETCHED" and record["attempts"] == 4, record


# ---------------------------------------------------------------------------- every host, every URL

def test_every_host_is_paced_and_every_rescheduled_url_ends_fetched(polite: Finished) -> None:
    floors = {DELAY2: 2.0, DELAY_HALF: 0.5, PER_AGENT: 2.0 - GAP_SLACK_S}
    for ip in polite_site().hosts:
        if ip == ROBOTS_MOVED:
            continue  # its two robots requests are one robots fetch (a redirect hop); checked above
        assert polite.served.min_gap(ip) >= floors.get(ip, SERVER_DELAY_S), polite.describe(ip)
    assert all(n == 1 for u, n in polite.served.page_requests().items()
               if u not in (polite.url(RETRY_AFTER, "/limited"), polite.url(BUSY, "/busy"))), \
        polite.served.page_requests()
    finals = {"FETCHED", "ERROR", "REDIRECTION"}
    assert {u: r["status"] for u, r in polite.records.items() if r["status"] not in finals} == {}
    retried = {u for u, r in polite.records.items() if r["attempts"] > 1}
    assert retried == {polite.url(RETRY_AFTER, "/limited"), polite.url(BUSY, "/busy")}
    # rescheduled: after a rate limit (counted attempts) or while robots.txt was unreachable (no attempt)
    rescheduled = retried | {polite.url(ROBOTS_503)}
    assert {u: polite.records[u]["status"] for u in rescheduled} == {u: "FETCHED" for u in rescheduled}
    assert polite.records[polite.url(ROBOTS_503)]["attempts"] == 1


# ---------------------------------------------------------------------------- regulator idempotence

async def _read(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    from squall.tools.kafka_admin import read_topic

    return [kv async for kv in read_topic(bootstrap, topic)]


def _end(bootstrap: str, topic: str) -> int:
    """Records ever written to ``topic`` (sum of end offsets; compaction never lowers it)."""
    from squall.tools.kafka_admin import end_offsets

    return sum(asyncio.run(end_offsets(bootstrap, topic)).values())


async def _produce(bootstrap: str, topic: str, key: bytes, values: list[bytes], partition: int) -> None:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, key=key, value=value, partition=partition)
    finally:
        await producer.stop()


def test_queue_regulator_is_idempotent_under_redelivery(forced: Finished) -> None:
    settings = forced.crawl.settings
    bootstrap = settings["kafka.bootstrap.servers"]
    hosts_log = changelog_name(settings, "hosts")
    # a fetch result carries its signal (the status topic); a signal with no result travels alone
    results = [json.loads(v) for k, v in asyncio.run(_read(bootstrap, topic_name(settings, "status")))
               if k == CAPPED.encode() and v is not None]
    signals = [json.dumps(r["signal"]).encode() for r in results if "signal" in r]
    signals += [v for k, v in asyncio.run(_read(bootstrap, topic_name(settings, "signals")))
                if k == CAPPED.encode() and v is not None]
    assert len(signals) >= 4, signals  # one per fetched URL (more if a fetch was re-delivered)
    before = asyncio.run(latest_records(bootstrap, hosts_log))[CAPPED]
    writes_before = _end(bootstrap, hosts_log)
    assert before["in_flight"] == {} and before["crawl_delay"]["delay_s"] == math.ceil(CAPPED_DELAY_S)

    # Re-deliver every signal of the host (a consumer rewound after a crash), then one with an
    # already-applied fetch id that would block the host if applied, then a new marker signal
    # that changes nothing but the remembered ids: once the marker shows in the hosts changelog,
    # the regulator has consumed everything before it on that partition.
    last = SignalMessage.from_bytes(signals[-1])
    conflicting = replace(last, kind=SignalKind.RATE_LIMITED, at_s=time.time(), delay_s=60.0,
                          robots_crawl_delay_s=30)
    marker = SignalMessage(key=CAPPED, url=forced.url(CAPPED, "/marker"), fetch_id="marker:test",
                           kind=SignalKind.OTHER, at_s=0.0, delay_s=0.0)
    partition = partition_for_key(CAPPED, settings["topology.partitions"])
    asyncio.run(_produce(bootstrap, topic_name(settings, "signals"), CAPPED.encode(),
                         [*signals, conflicting.to_bytes(), marker.to_bytes()], partition))

    deadline = time.monotonic() + 120.0
    while True:
        after = asyncio.run(latest_records(bootstrap, hosts_log))[CAPPED]
        if marker.fetch_id in after["seen_fetch_ids"] or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert marker.fetch_id in after["seen_fetch_ids"], "the regulator did not consume the marker signal"
    assert after == {**before, "seen_fetch_ids": before["seen_fetch_ids"] + [marker.fetch_id]}
    assert _end(bootstrap, hosts_log) == writes_before + 1  # the duplicates wrote nothing; only the marker did


# ---------------------------------------------------------------------------- the crawler's own audit

AUDIT_TOLERANCE_S = 0.01  # audit.tolerance.secs (default)


def assert_audit_agrees_with_the_server(crawl: Crawl, served: ServedSite, floors: dict[str, float],
                                        default_floor_s: float) -> None:
    """The crawler's own audit (``squall audit``) and the recording server: same requests, no violation."""
    audit = crawl.audit()
    by_host = {h["key"]: h for h in audit["by_host"]}
    ips = {r["ip"] for r in served.requests()}
    assert set(by_host) == ips, (sorted(by_host), sorted(ips))
    for ip in sorted(ips):
        host, times, floor = by_host[ip], served.start_times(ip), floors.get(ip, default_floor_s)
        # every request the server received was audited, and only those
        assert host["requests"] == len(times), (host, times)
        # both measure the same requests: the same violations (robots.txt redirect hops included), and none
        server = sum(1 for gap in _gaps(times) if gap < floor - AUDIT_TOLERANCE_S)
        assert host["violations"] == server == 0, (host, times)
        assert host["min_gap_s"] is None or host["min_gap_s"] >= floor - AUDIT_TOLERANCE_S, host
    assert audit["violations"] == 0 and audit["inside_block"] == 0


@pytest.mark.parametrize("crawl_name", ["polite", "forced"])
def test_the_crawlers_audit_agrees_with_the_server_request_for_request(
        request: pytest.FixtureRequest, crawl_name: str) -> None:
    finished: Finished = request.getfixturevalue(crawl_name)
    floors = {DELAY2: 2.0, DELAY_HALF: 0.5, CAPPED: CAP_S, PER_AGENT: 2.0}
    assert_audit_agrees_with_the_server(finished.crawl, finished.served, floors, SERVER_DELAY_S)


def test_the_audit_remembers_the_retry_after_block_and_no_request_fell_inside_it(polite: Finished) -> None:
    host = {h["key"]: h for h in polite.crawl.audit()["by_host"]}[RETRY_AFTER]
    limited = next(r for r in polite.served.requests() if r["ip"] == RETRY_AFTER and r["status"] == 429)
    # the block began at (or after) the 429 request and lasted its Retry-After of 5 s
    assert host["block_from_s"] == pytest.approx(limited["t"], abs=1.0)
    assert host["blocked_until_s"] - limited["t"] >= 5.0 - AUDIT_TOLERANCE_S
    assert host["inside_block"] == 0 and host["violations"] == 0
