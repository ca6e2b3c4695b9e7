"""``partition.url.mode: byIP`` through the real broker, measured at the recording server (docs/politeness.md: shared servers).

Three names are pinned (``http.resolve``) to one loopback address that
serves the same small site for each of them; ``fetcher.server.delay`` is 1 s.

* ``by_ip``: the three names are one queue keyed by the address — no two
  requests reach the address less than 1 s apart, robots.txt stays per
  origin (one per name, each with its own Host header), and every record is
  keyed by the address.
* ``by_ip_two_workers``: the same with two workers sharing the partitions.
* ``by_host``: the same site crawled byHost is three queues with three
  independent paces — each name is paced, the address is not (the trade-off
  docs/politeness.md documents).
* ``moved``: a name crawled at one address is pinned to another after a
  restart; its URLs move to the new address's queue and are fetched there.

Gaps are measured between request arrivals at the server, robots.txt included.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from squall.tools.harness import Crawl
from squall.tools.kafka_admin import ensure_topics
from squall.policy.partition import partition_for_key
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec
from squall.policy.topics import all_topics

from .conftest import BASE_OVERRIDES, ServedSite

DELAY_S = 1.0
NAMES = ("a.byip.test", "b.byip.test", "c.byip.test")
PATHS = ("/", "/a", "/b", "/c")
SHARED = "127.0.0.40"       # byIP: the address of the three names
SHARED_BY_HOST = "127.0.0.41"
MOVE_FROM, MOVE_TO = "127.0.0.42", "127.0.0.43"
SHARED_TWO = "127.0.0.44"   # byIP with two workers
JOIN_S = 15.0
FINISH_TIMEOUT_S = 240.0
PARTITIONS: int = BASE_OVERRIDES["topology.partitions"]


def site(*ips: str) -> SiteSpec:
    pages: dict[str, Page] = {"/": Page(title="index", links=PATHS[1:]), **{p: Page(title=p) for p in PATHS[1:]}}
    return SiteSpec(hosts={ip: HostSpec(pages=dict(pages), robots=RobotsSpec(text="User-agent: *\nAllow: /\n"))
                           for ip in ips})


def urls(port: int, names: tuple[str, ...] = NAMES) -> list[str]:
    return [f"http://{name}:{port}{path}" for name in names for path in PATHS]


def wait_for(crawl: Crawl, done: Callable[[dict[str, dict[str, Any]]], bool], timeout_s: float = FINISH_TIMEOUT_S
             ) -> dict[str, dict[str, Any]]:
    """Poll the urls table until ``done(records)``; raise with the records on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        for name, proc in crawl.workers.items():
            assert proc.poll() is None, f"worker {name} died; see {crawl.workdir}/worker-{name}.log"
        records = crawl.records()
        if done(records):
            return records
        if time.monotonic() > deadline:
            raise TimeoutError(json.dumps(records, indent=1)[:4000])
        time.sleep(1.0)


def fetched(expected: list[str]) -> Callable[[dict[str, dict[str, Any]]], bool]:
    return lambda records: all(records.get(u, {}).get("status") == "FETCHED" for u in expected)


def crawl_site(tmp: Path, bootstrap: str, ip: str, mode: str, workers: int = 1
               ) -> Iterator[tuple[ServedSite, dict[str, dict[str, Any]]]]:
    served = ServedSite(site(ip), tmp / "requests.jsonl")
    port = served.server.port
    crawl = Crawl(tmp / "crawl", bootstrap, {**BASE_OVERRIDES, "partition.url.mode": mode,
                                               "fetcher.server.delay": DELAY_S,
                                               "http.resolve": [f"{n}:{port}:{ip}" for n in NAMES]})
    try:
        if workers > 1:
            # topics first: workers started together race to create them and may leave one unassigned
            asyncio.run(ensure_topics(bootstrap, all_topics(crawl.settings), 1))
        for n in range(workers):
            crawl.start_worker(f"w{n + 1}")
        if workers > 1:
            time.sleep(JOIN_S)  # let the group settle: the names' partitions are spread over the workers
        crawl.seed([f"http://{n}:{port}/" for n in NAMES])
        records = wait_for(crawl, fetched(urls(port)))
        crawl.wait_idle(timeout_s=60)
        yield served, crawl.records() or records
    finally:
        crawl.stop()
        served.close()


@pytest.fixture(scope="module")
def by_ip(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str):
    yield from crawl_site(tmp_path_factory.mktemp("by_ip"), kafka_bootstrap, SHARED, "byIP")


@pytest.fixture(scope="module")
def by_ip_two_workers(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str):
    yield from crawl_site(tmp_path_factory.mktemp("by_ip2"), kafka_bootstrap, SHARED_TWO, "byIP", workers=2)


@pytest.fixture(scope="module")
def by_host(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str):
    yield from crawl_site(tmp_path_factory.mktemp("by_host"), kafka_bootstrap, SHARED_BY_HOST, "byHost")


def gaps(times: list[float]) -> list[float]:
    times = sorted(times)
    return [b - a for a, b in zip(times, times[1:])]


def by_name(served: ServedSite, ip: str) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in served.server.requests_for(ip):
        out.setdefault(r["host"].split(":")[0], []).append(r["t"])
    return out


def test_names_on_one_address_are_one_queue_paced_at_the_address(by_ip) -> None:  # noqa: ANN001
    served, records = by_ip
    times = served.start_times(SHARED)
    assert len(times) == len(NAMES) * (len(PATHS) + 1)  # every page once, robots.txt once per name
    assert min(gaps(times)) >= DELAY_S, [round(g, 3) for g in gaps(times)]


def test_with_two_workers_the_names_of_one_address_are_still_one_queue(by_ip_two_workers) -> None:  # noqa: ANN001
    served, records = by_ip_two_workers
    port = served.server.port
    # the premise: the names' own partitions are not all the address's (their first messages are routed)
    assert {partition_for_key(n, PARTITIONS) for n in NAMES} - {partition_for_key(SHARED_TWO, PARTITIONS)}
    assert {records[u]["key"] for u in urls(port)} == {SHARED_TWO}
    times = served.start_times(SHARED_TWO)
    assert len(times) == len(NAMES) * (len(PATHS) + 1)
    assert min(gaps(times)) >= DELAY_S, [round(g, 3) for g in gaps(times)]


def test_by_ip_keys_every_record_by_the_address_and_keeps_robots_per_origin(by_ip) -> None:  # noqa: ANN001
    served, records = by_ip
    port = served.server.port
    assert {u: (records[u]["status"], records[u]["key"]) for u in urls(port)} == \
        {u: ("FETCHED", SHARED) for u in urls(port)}
    robots_hosts = sorted(r["host"] for r in served.server.requests_for(SHARED) if r["path"] == "/robots.txt")
    assert robots_hosts == sorted(f"{n}:{port}" for n in NAMES)
    pages = sorted((r["host"], r["path"]) for r in served.server.requests_for(SHARED) if r["path"] != "/robots.txt")
    assert pages == sorted((f"{n}:{port}", p) for n in NAMES for p in PATHS)  # each with its own Host header


def test_by_host_paces_each_name_but_not_the_address_they_share(by_host) -> None:  # noqa: ANN001
    served, records = by_host
    port = served.server.port
    assert {records[u]["key"] for u in urls(port)} == set(NAMES)
    for name, times in by_name(served, SHARED_BY_HOST).items():
        assert min(gaps(times)) >= DELAY_S, (name, [round(g, 3) for g in gaps(times)])
    # three independent paces: the shared address sees requests closer than one delay
    assert min(gaps(served.start_times(SHARED_BY_HOST))) < DELAY_S / 2


# ---------------------------------------------------------------- a host whose address changes

@pytest.fixture(scope="module")
def moved(tmp_path_factory: pytest.TempPathFactory, kafka_bootstrap: str):
    tmp = tmp_path_factory.mktemp("moved")
    served = ServedSite(site(MOVE_FROM, MOVE_TO), tmp / "requests.jsonl")
    port = served.server.port
    name = NAMES[0]
    overrides = {**BASE_OVERRIDES, "partition.url.mode": "byIP", "fetcher.server.delay": 0.3,
                 "fetchInterval.default": 0.1,  # revisit every 6 s: the URLs are handed out again
                 "partition.ip.cache.secs": 2.0, "http.resolve": [f"{name}:{port}:{MOVE_FROM}"]}
    crawl = Crawl(tmp / "crawl", kafka_bootstrap, overrides)
    mine = urls(port, (name,))
    try:
        crawl.start_worker()
        crawl.seed([mine[0]])
        before = wait_for(crawl, lambda rs: all(rs.get(u, {}).get("key") == MOVE_FROM
                                                and rs[u].get("status") == "FETCHED" for u in mine))
        crawl.stop_worker("w1")
        values = yaml.safe_load(crawl.conf_path.read_text(encoding="utf-8"))
        values["http.resolve"] = [f"{name}:{port}:{MOVE_TO}"]
        crawl.conf_path.write_text(yaml.safe_dump(values, sort_keys=True), encoding="utf-8")
        moved_at = time.time()
        crawl.start_worker()
        after = wait_for(crawl, lambda rs: all(rs.get(u, {}).get("key") == MOVE_TO for u in mine)
                         and set(PATHS) <= {r["path"] for r in served.server.requests_for(MOVE_TO)})
        yield served, before, after, mine, moved_at
    finally:
        crawl.stop()
        served.close()


def test_a_host_whose_address_changes_moves_to_its_new_key_and_is_fetched_there(moved) -> None:  # noqa: ANN001
    served, before, after, mine, moved_at = moved
    # the premise: the record changes partition (the status updater's move across partitions)
    assert partition_for_key(MOVE_FROM, PARTITIONS) != partition_for_key(MOVE_TO, PARTITIONS)
    assert {before[u]["key"] for u in mine} == {MOVE_FROM}
    assert {after[u]["key"] for u in mine} == {MOVE_TO}
    assert set(after) >= set(mine)
    assert all(r["t"] < moved_at for r in served.server.requests_for(MOVE_FROM))  # nothing sent to the old one
    fetched_there = {r["path"] for r in served.server.requests_for(MOVE_TO)}
    assert set(PATHS) <= fetched_there
