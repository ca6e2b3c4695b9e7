"""Frontier hygiene through a real broker: traps cut off, redirects bounded, bombs capped, SSRF refused.

Three crawls, each one configuration, each one worker; every scenario is its
own simulated host (one behaviour per 127.0.0.x address) so one crawl covers
many scenarios and a request recorded on a host belongs to that scenario only:

* ``hygiene``  (loopback allowed, revisits far away): infinite calendars cut
  by depth and by the per-host cap, redirect loop / chain / too many, 503 and
  500 retried then FETCHED, 404 once, and a gzip bomb with the worker's peak
  memory measured;
* ``blocked``  (``http.private.networks.allow`` empty): 127.0.0.1 and a name
  pinned to it by ``http.resolve`` are refused, nothing reaches the server;
* ``revisit``  (``fetchInterval.default`` 0.1 min): an unchanged page is
  revisited with its validators and answered 304.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.tools.harness import Crawl
from squall.tools.site_spec import HostSpec, Page, SiteSpec

from .conftest import BASE_OVERRIDES, ServedSite

SQUALL = str(Path(sys.executable).parent / "squall")
DELAY_S = 0.15  # fetcher.server.delay: small, every scenario is on its own host anyway

# ---------------------------------------------------------------- hosts of the hygiene crawl
CAL_DEPTH = "127.0.0.10"    # /cal: infinite calendar seeded at depth 0, cut by urlfilters.max.depth
CAL_SEED = "/cal?d=2020-01-01"
CAL_CAP = "127.0.0.11"      # / links three calendar days: cut by frontier.max.urls.per.host
LOOP = "127.0.0.12"         # /loop-a -> /loop-b -> /loop-a, and /self -> /self
CHAIN = "127.0.0.13"        # /start -> /end (200)
TOO_MANY = "127.0.0.14"     # /hop0 -> /hop1 -> ... -> /hop5 (200), longer than http.redirect.max
BOMB = "127.0.0.15"         # /bomb: 50 MiB of zeros gzip-encoded (about 50 KB on the wire)
RETRY = "127.0.0.16"        # /busy: 503 then 200; /broken: 500 then 200
MISSING = "127.0.0.17"      # /missing: 404

MAX_DEPTH = 3
HOST_CAP = 8
REDIRECT_MAX = 3
CONTENT_LIMIT = 256 * 1024  # http.content.limit of the hygiene crawl; the bomb decodes to 200 times that
BOMB_MIB = 50
# Peak RSS growth allowed while the bomb is fetched, on an otherwise idle worker. A reader that decoded
# the whole body would need >= 50 MiB for the body alone (plus its copies). With the limit the worker holds
# a few copies of at most 256 KiB (chunks, joined body, WARC record), aiohttp's bounded decompression steps
# (64 KiB) and the parsed page: lexbor keeps about 17 times the text of a NUL-filled page (each NUL becomes
# U+FFFD, one node char and one parse error each), about 4.5 MiB here. Measured: about 6 MiB in all. 20 MiB
# leaves room for allocator slack and Kafka/RocksDB buffers on a loaded box and is still under half of
# the 50 MiB an unbounded reader needs.
BOMB_RSS_GROWTH_MAX_KB = 20 * 1024

HYGIENE_OVERRIDES: dict[str, Any] = {
    "fetcher.server.delay": DELAY_S,
    "urlfilters.max.depth": MAX_DEPTH,
    "frontier.max.urls.per.host": HOST_CAP,
    "http.redirect.max": REDIRECT_MAX,
    "http.content.limit": CONTENT_LIMIT,
    "fetchInterval.fetch.error": 0.02,   # a 500 is retried after 1.2 s
    "frontier.backoff.base.secs": 0.5,   # a headerless 503 backs the host off this long
}


def _hygiene_site() -> SiteSpec:
    days = ("/cal?d=2020-01-01", "/cal?d=2021-06-15", "/cal?d=2022-11-30")
    hops = {f"/hop{i}": Page.redirect(f"/hop{i + 1}") for i in range(5)}
    return SiteSpec(hosts={
        CAL_DEPTH: HostSpec(pages={"/cal": Page(calendar=True)}),
        CAL_CAP: HostSpec(pages={"/": Page(title="calendars", links=days), "/cal": Page(calendar=True)}),
        LOOP: HostSpec(pages={"/loop-a": Page.redirect("/loop-b"), "/loop-b": Page.redirect("/loop-a"),
                              "/self": Page.redirect("/self")}),
        CHAIN: HostSpec(pages={"/start": Page.redirect("/end", status=302), "/end": Page(title="the end")}),
        TOO_MANY: HostSpec(pages={**hops, "/hop5": Page(title="too far")}),
        BOMB: HostSpec(pages={"/bomb": Page(gzip_bomb_mb=BOMB_MIB)}),
        RETRY: HostSpec(pages={"/busy": Page(title="busy", statuses=(503,)),
                               "/broken": Page(title="broken", statuses=(500,))}),
        MISSING: HostSpec(pages={}),
    })


# ---------------------------------------------------------------- helpers

def _wait_for(what: str, check: Callable[[], Any], timeout_s: float, crawl: Crawl, poll_s: float = 0.5) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what`` after ``timeout_s``
    or as soon as a worker of ``crawl`` died."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        dead = {name: p.returncode for name, p in crawl.workers.items() if p.poll() is not None}
        if dead:
            pytest.fail(f"worker(s) {dead} exited while waiting for {what}; see {crawl.workdir}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)


def _proc_kb(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status (VmRSS, VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def _host_records(c: Crawl) -> dict[str, dict[str, Any]]:
    """Latest hosts-table records (partition key → HostRecord dict) from the changelog."""
    from squall.cli.status_read import latest_records
    from squall.policy.topics import changelog_name

    return asyncio.run(latest_records(c.settings["kafka.bootstrap.servers"], changelog_name(c.settings, "hosts")))


def _url_versions(c: Crawl, url: str) -> list[dict[str, Any]]:
    """Every version of ``url``'s record in the urls changelog, oldest first."""
    from squall.tools.kafka_admin import read_topic
    from squall.policy.topics import changelog_name

    async def read() -> list[dict[str, Any]]:
        out = []
        async for key, value in read_topic(c.settings["kafka.bootstrap.servers"], changelog_name(c.settings, "urls"),
                                           missing_ok=True):
            if key == url.encode() and value is not None:
                out.append(json.loads(value))
        return out

    return asyncio.run(read())


def _requests_to(served: ServedSite, ip: str) -> list[dict[str, Any]]:
    return [r for r in served.requests() if r["ip"] == ip]


class Env:
    """A served site and its crawl, made once per module for one configuration."""

    def __init__(self, served: ServedSite, crawl: Crawl) -> None:
        self.served = served
        self.crawl = crawl
        self.extra: dict[str, Any] = {}

    def url(self, ip: str, path: str) -> str:
        return self.served.url(ip, path)


def _start(tmp: Path, bootstrap: str, spec: SiteSpec, overrides: dict[str, Any]) -> Env:
    served = ServedSite(spec, tmp / "requests.jsonl")
    c = Crawl(tmp / "crawl", bootstrap, {**BASE_OVERRIDES, **overrides})
    c.start_worker()
    return Env(served, c)


def _stop(env: Env) -> None:
    env.crawl.stop()
    env.served.close()


# ---------------------------------------------------------------- the hygiene crawl

@pytest.fixture(scope="module")
def hygiene(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Env]:
    env = _start(tmp_path_factory.mktemp("hygiene"), kafka_bootstrap, _hygiene_site(), HYGIENE_OVERRIDES)
    try:
        u = env.url
        env.crawl.seed([u(CAL_DEPTH, CAL_SEED), u(CAL_CAP, "/"), u(LOOP, "/loop-a"), u(LOOP, "/self"),
                        u(CHAIN, "/start"), u(TOO_MANY, "/hop0"), u(RETRY, "/busy"), u(RETRY, "/broken"),
                        u(MISSING, "/missing")])
        busy, broken = u(RETRY, "/busy"), u(RETRY, "/broken")
        # the retries are scheduled in the future: idle alone could be reported between two attempts
        _wait_for("the retried pages to be FETCHED",
                  lambda: all(env.crawl.records().get(x, {}).get("status") == "FETCHED" for x in (busy, broken)),
                  timeout_s=180, crawl=env.crawl)
        env.crawl.wait_idle(timeout_s=180)

        # the bomb alone, on a warm and idle worker: its memory growth is the bomb's
        pid = env.crawl.workers["w1"].pid
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS (Linux >= 4.0)
        env.extra["rss_before_kb"] = _proc_kb(pid, "VmRSS")
        env.crawl.seed([u(BOMB, "/bomb")])
        bomb = u(BOMB, "/bomb")
        _wait_for("the bomb to be FETCHED", lambda: env.crawl.records().get(bomb, {}).get("status") == "FETCHED",
                  timeout_s=120, crawl=env.crawl)
        env.extra["hwm_after_kb"] = _proc_kb(pid, "VmHWM")
        env.crawl.wait_idle(timeout_s=120)
        env.extra["records"] = env.crawl.records()
        env.extra["report"] = env.crawl.report()
        env.extra["hosts"] = _host_records(env.crawl)
        yield env
    finally:
        _stop(env)


def _on_host(records: dict[str, dict[str, Any]], served: ServedSite, ip: str) -> dict[str, dict[str, Any]]:
    prefix = served.server.base_url(ip) + "/"
    return {u: r for u, r in records.items() if u.startswith(prefix)}


def test_an_infinite_calendar_is_cut_off_at_the_depth_limit_with_the_rejections_counted(hygiene: Env) -> None:
    records = _on_host(hygiene.extra["records"], hygiene.served, CAL_DEPTH)
    # depth 0 is /cal, each further depth adds the previous and the next day: 1 + 2 * MAX_DEPTH pages
    assert len(records) == 1 + 2 * MAX_DEPTH, sorted(records)
    assert {r["status"] for r in records.values()} == {"FETCHED"}
    assert max(r["depth"] for r in records.values()) == MAX_DEPTH
    requested = [r["path"] for r in _requests_to(hygiene.served, CAL_DEPTH) if r["path"] != "/robots.txt"]
    assert sorted(requested) == sorted(u.split(hygiene.served.server.base_url(CAL_DEPTH))[1] for u in records)
    host = hygiene.extra["hosts"][CAL_DEPTH]
    # the two days one step beyond the deepest pages were refused (once each; at least once under re-delivery)
    assert host["rejected"].get("trap.depth", 0) >= 2, host["rejected"]


def test_an_infinite_calendar_is_cut_off_at_the_host_cap_with_the_rejections_counted(hygiene: Env) -> None:
    records = _on_host(hygiene.extra["records"], hygiene.served, CAL_CAP)
    assert len(records) == HOST_CAP, sorted(records)
    assert {r["status"] for r in records.values()} == {"FETCHED"}
    pages = hygiene.served.page_requests()
    assert sum(n for u, n in pages.items() if u.startswith(hygiene.served.server.base_url(CAL_CAP))) == HOST_CAP
    host = hygiene.extra["hosts"][CAL_CAP]
    assert host["url_count"] == HOST_CAP
    assert host["rejected"].get("trap.host_cap", 0) >= 2, host["rejected"]


def test_rejection_counts_are_visible_in_squall_status(hygiene: Env) -> None:
    report = hygiene.extra["report"]
    assert report.rejected["trap.depth"] >= 2
    assert report.rejected["trap.host_cap"] >= 2
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    out = subprocess.run([SQUALL, "--conf", str(hygiene.crawl.conf_path), "status", "--json"], env=env,
                         capture_output=True, text=True, check=True, timeout=120).stdout
    shown = json.loads(out)
    assert shown["rejected"]["trap.depth"] >= 2
    assert shown["rejected"]["trap.host_cap"] >= 2
    text = subprocess.run([SQUALL, "--conf", str(hygiene.crawl.conf_path), "status"], env=env,
                          capture_output=True, text=True, check=True, timeout=120).stdout
    assert "rejected (not admitted):" in text and "trap.depth=" in text and "trap.host_cap=" in text


def test_a_redirect_loop_ends_as_error_redirect_loop_after_at_most_the_chain_length_requests(hygiene: Env) -> None:
    records, u = hygiene.extra["records"], hygiene.url
    a, b, self_ = u(LOOP, "/loop-a"), u(LOOP, "/loop-b"), u(LOOP, "/self")
    assert records[a]["status"] == "REDIRECTION" and records[a]["redirect_to"] == b
    assert records[b]["status"] == "ERROR" and records[b]["reason"] == "redirect.loop"
    assert records[b]["chain"] == [a]
    assert records[self_]["status"] == "ERROR" and records[self_]["reason"] == "redirect.loop"
    pages = hygiene.served.page_requests()
    assert (pages[a], pages[b]) == (1, 1)   # the chain a -> b -> (a) is two hops: two requests, then it stops
    assert pages[self_] == 1


def test_a_redirect_ends_the_source_as_redirection_and_the_target_fetched_with_its_chain(hygiene: Env) -> None:
    records, u = hygiene.extra["records"], hygiene.url
    start, end = u(CHAIN, "/start"), u(CHAIN, "/end")
    assert records[start]["status"] == "REDIRECTION"
    assert records[start]["http_status"] == 302 and records[start]["redirect_to"] == end
    assert records[end]["status"] == "FETCHED"
    assert records[end]["chain"] == [start]
    pages = hygiene.served.page_requests()
    assert pages[start] == 1 and pages[end] == 1


def test_a_chain_longer_than_http_redirect_max_ends_as_error_redirect_too_many(hygiene: Env) -> None:
    records, u = hygiene.extra["records"], hygiene.url
    hops = [u(TOO_MANY, f"/hop{i}") for i in range(6)]
    # hops 0..REDIRECT_MAX-1 are followed; the hop that would exceed http.redirect.max is refused
    for i in range(REDIRECT_MAX):
        assert records[hops[i]]["status"] == "REDIRECTION", (i, records[hops[i]])
        assert records[hops[i]]["chain"] == hops[:i]
    last = records[hops[REDIRECT_MAX]]
    assert last["status"] == "ERROR" and last["reason"] == "redirect.too_many"
    assert last["chain"] == hops[:REDIRECT_MAX]
    assert not set(hops[REDIRECT_MAX + 1:]) & set(records)
    pages = hygiene.served.page_requests()
    assert [pages[h] for h in hops] == [1] * (REDIRECT_MAX + 1) + [0] * (5 - REDIRECT_MAX)


def test_a_gzip_bomb_is_fetched_with_bounded_memory_and_marked_truncated(hygiene: Env) -> None:
    record = hygiene.extra["records"][hygiene.url(BOMB, "/bomb")]
    assert record["status"] == "FETCHED" and record["truncated"] is True
    assert hygiene.served.page_requests()[hygiene.url(BOMB, "/bomb")] == 1
    growth_kb = hygiene.extra["hwm_after_kb"] - hygiene.extra["rss_before_kb"]
    print(f"gzip bomb: worker RSS before {hygiene.extra['rss_before_kb']} kB, peak {hygiene.extra['hwm_after_kb']} kB")
    assert growth_kb < BOMB_RSS_GROWTH_MAX_KB, (
        f"worker peak RSS grew by {growth_kb} kB fetching a {BOMB_MIB} MiB bomb "
        f"(before {hygiene.extra['rss_before_kb']} kB, peak {hygiene.extra['hwm_after_kb']} kB)")


def test_a_503_is_retried_and_later_fetched(hygiene: Env) -> None:
    busy = hygiene.url(RETRY, "/busy")
    answers = [r["status"] for r in _requests_to(hygiene.served, RETRY) if r["path"] == "/busy"]
    assert answers == [503, 200]
    record = hygiene.extra["records"][busy]
    assert record["status"] == "FETCHED" and record["attempts"] == 2


def test_a_500_is_retried_after_the_fetch_error_interval_and_later_fetched(hygiene: Env) -> None:
    broken = hygiene.url(RETRY, "/broken")
    hits = [r for r in _requests_to(hygiene.served, RETRY) if r["path"] == "/broken"]
    assert [r["status"] for r in hits] == [500, 200]
    assert hits[1]["t"] - hits[0]["t"] >= 0.02 * 60 - 0.1  # fetchInterval.fetch.error (minutes)
    record = hygiene.extra["records"][broken]
    assert record["status"] == "FETCHED" and record["attempts"] == 2 and record["fetch_errors"] == 0


def test_a_404_is_an_error_without_retries(hygiene: Env) -> None:
    missing = hygiene.url(MISSING, "/missing")
    record = hygiene.extra["records"][missing]
    assert record["status"] == "ERROR" and record["reason"] == "http.not_found" and record["http_status"] == 404
    assert record["attempts"] == 1 and record["next_fetch_at_s"] is None
    assert hygiene.served.page_requests()[missing] == 1


# ---------------------------------------------------------------- private networks refused

PINNED_NAME = "loopback.squall-test.invalid"


@pytest.fixture(scope="module")
def blocked(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("blocked")
    # the server listens on 127.0.0.1 itself, so a request that slipped through would be recorded
    served = ServedSite(SiteSpec(hosts={"127.0.0.1": HostSpec(pages={"/secret": Page(title="secret")})}),
                        tmp / "requests.jsonl")
    port = served.server.port
    overrides = {**BASE_OVERRIDES, "fetcher.server.delay": DELAY_S, "http.private.networks.allow": [],
                 "http.resolve": [f"{PINNED_NAME}:{port}:127.0.0.1"]}
    c = Crawl(tmp / "crawl", kafka_bootstrap, overrides)
    env = Env(served, c)
    try:
        c.start_worker()
        env.extra["urls"] = [f"http://127.0.0.1:{port}/secret", f"http://{PINNED_NAME}:{port}/secret"]
        c.seed(env.extra["urls"])
        c.wait_idle(timeout_s=120)
        env.extra["records"] = c.records()
        yield env
    finally:
        _stop(env)


def test_loopback_addresses_and_names_pinned_to_them_are_refused_without_a_request(blocked: Env) -> None:
    records = blocked.extra["records"]
    for url in blocked.extra["urls"]:
        assert records[url]["status"] == "ERROR", records[url]
        assert records[url]["reason"] == "fetch.blocked_address", records[url]
        assert records[url]["attempts"] == 0 and records[url]["next_fetch_at_s"] is None
    assert blocked.served.requests() == []  # not even robots.txt


# ---------------------------------------------------------------- revisit with validators

REVISIT = "127.0.0.20"
ETAG = '"v1"'
LAST_MODIFIED = "Wed, 01 Jan 2020 00:00:00 GMT"


@pytest.fixture(scope="module")
def revisit(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str) -> Iterator[Env]:
    spec = SiteSpec(hosts={REVISIT: HostSpec(pages={"/same": Page(title="same", etag=ETAG,
                                                                    last_modified=LAST_MODIFIED)})})
    env = _start(tmp_path_factory.mktemp("revisit"), kafka_bootstrap, spec,
                 {"fetcher.server.delay": DELAY_S, "fetchInterval.default": 0.1})  # revisit after 6 s
    try:
        env.crawl.seed([env.url(REVISIT, "/same")])
        yield env
    finally:
        _stop(env)


def test_an_unchanged_page_is_revisited_with_validators_gets_304_and_stays_fetched(revisit: Env) -> None:
    same = revisit.url(REVISIT, "/same")

    def answered_twice() -> list[dict[str, Any]]:
        hits = [r for r in _requests_to(revisit.served, REVISIT) if r["path"] == "/same"]
        return hits if len(hits) >= 2 and hits[1]["status"] is not None else []

    hits = _wait_for("the page to be requested twice", answered_twice, timeout_s=120, crawl=revisit.crawl, poll_s=0.2)
    assert [r["status"] for r in hits[:2]] == [200, 304]
    # the record after the second fetch (later revisits may already have replaced the latest one)
    second = _wait_for("the record of the second fetch",
                       lambda: next((v for v in _url_versions(revisit.crawl, same) if v["attempts"] == 2), None),
                       timeout_s=60, crawl=revisit.crawl)
    assert second["status"] == "FETCHED" and second["http_status"] == 304
    assert second["etag"] == ETAG and second["last_modified"] == LAST_MODIFIED
    assert second["next_fetch_at_s"] is not None


# ---------------------------------------------------------------- the CLI

def test_squall_url_normalize_prints_the_canonical_url() -> None:
    out = subprocess.run([SQUALL, "url", "normalize", "HTTP://Example.COM:80/a/./b/../c?utm_source=x&b=2#frag"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    assert out.strip() == "http://example.com/a/c?b=2"
