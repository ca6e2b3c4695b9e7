"""A crawl always starts (docs/architecture.md invariant 7), through the real broker and a recording site.

Workers started at the same moment on a new ``topology.id`` used to form
their group before the ticks and signals topics were in the leader's
metadata: Faust left those topics out of the assignment ("Ignoring missing
topic"), nobody consumed the ticks and no URL was handed out until a later
rebalance. The test hook ``SQUALL_TEST_LATE_TOPICS`` makes Faust's own
creation of those two topics 20 s late in every worker, so without the
workers' own topic preparation (squall.worker.topic_setup) every repetition
fails; with it the first request reaches the site within a few seconds of
the seed, every time.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from squall.cli.status_read import group_members
from squall.tools.site_spec import generated_site

HOSTS = [f"127.0.0.{i}" for i in range(2, 10)]  # 8 hosts over 4 partitions: every worker owns some
LATE = {"SQUALL_TEST_LATE_TOPICS": "ticks,signals:20"}
FIRST_REQUEST_S = 6.0  # from the seed to the first request at the site
MISSING_TOPIC = re.compile(r"Ignoring missing topic|not found in cluster metadata")


def _wait_group(crawl, n: int, timeout_s: float = 60.0) -> None:
    """Until the worker group is Stable with ``n`` members, each assigned something."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        group = asyncio.run(group_members(crawl.settings))
        if group is not None:
            state, members = group
            if state == "Stable" and len(members) == n and all(members.values()):
                return
        for name, proc in crawl.workers.items():
            assert proc.poll() is None, crawl.log_text(name)[-3000:]
        time.sleep(0.3)
    raise AssertionError(f"no Stable group of {n} workers within {timeout_s} s")


@pytest.mark.parametrize(("workers", "repetitions"), [(2, 3), (3, 2)])
def test_workers_started_together_before_the_seed_fetch_within_seconds(site, crawl, workers, repetitions):
    served = site(generated_site(HOSTS, 2))
    for rep in range(repetitions):
        c = crawl(**{"fetcher.server.delay": 0.2})  # a fresh topology.id each time: new topics, new group
        for i in range(workers):  # at the same moment
            c.start_worker(f"w{i}", env=LATE)
        _wait_group(c, workers)
        before = len(served.requests())
        c.seed(served.seeds)
        started = time.monotonic()
        while len(served.requests()) == before and time.monotonic() - started < FIRST_REQUEST_S * 3:
            time.sleep(0.05)
        took = time.monotonic() - started
        logs = {f"w{i}": c.log_text(f"w{i}") for i in range(workers)}
        c.stop()
        assert len(served.requests()) > before, f"repetition {rep}: nothing fetched {took:.1f} s after the seed"
        assert took <= FIRST_REQUEST_S, f"repetition {rep}: first request {took:.1f} s after the seed"
        for name, text in logs.items():
            assert not MISSING_TOPIC.search(text), (rep, name, MISSING_TOPIC.search(text))


PROGRESS = re.compile(r"squall: progress: (\d+) pages fetched \(([\d.]+)/s over the last minute\), (\d+) due, "
                      r"(\d+) in flight, (\d+) politeness violations")


def _progress(text: str) -> list[tuple[int, ...]]:
    return [tuple(int(float(g)) for g in m.groups()) for m in PROGRESS.finditer(text)]


def test_a_worker_joining_a_running_crawl_seeded_before_any_worker_fetches_too(site, crawl):
    served = site(generated_site(HOSTS, 20))
    c = crawl(**{"fetcher.server.delay": 1.5, "metrics.log.interval.secs": 1.0})
    c.seed(served.seeds)  # seed first, then the workers
    c.start_worker("w1")
    deadline = time.monotonic() + 60
    while len(served.requests()) < 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(served.requests()) >= 10
    c.start_worker("w2")  # joins the running crawl: a rebalance gives it some partitions
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and not any(p[0] > 0 for p in _progress(c.log_text("w2"))):
        time.sleep(0.5)
    lines = _progress(c.log_text("w2"))
    assert any(p[0] > 0 for p in lines), c.log_text("w2")[-3000:]
    assert all(p[4] == 0 for p in lines + _progress(c.log_text("w1")))  # no politeness violation either
    assert _progress(c.log_text("w1"))[-1][0] > 0
    for name in ("w1", "w2"):
        assert not MISSING_TOPIC.search(c.log_text(name)), name
