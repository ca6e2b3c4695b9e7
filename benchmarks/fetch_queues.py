"""Micro-benchmark of squall.policy.fetch_queues.FetchQueues alone (the table of apache/stormcrawler PR #2129).

The set-up of apache/stormcrawler PR #2129: 20 000 hosts x 20 URLs, ``fetcher.server.delay`` 1 s so
that almost every queue is waiting, 50 fetcher threads, 1 producer thread
emulating the executor, instant fetch, 8 s per run, p99 from sampled calls;
and the same with delay 0 (every queue always ready).

How it is emulated here (Python runs one thread; the fetcher is asyncio):

* one asyncio event loop, 51 tasks: 50 *fetch slots* and 1 *producer*;
* a slot loops: read ``time.monotonic()`` (the REAL clock, passed as
  ``now_s``), ``take(now_s)``; on an item, the fetch is instant, so it calls
  ``finish(key, time.monotonic())`` at once and yields to the loop with
  ``await asyncio.sleep(0)`` (the point where a real fetch would await I/O);
  on None it sleeps until ``next_ready_at_s()`` but at most 10 ms (a
  scheduler's polling bound) and at least one loop turn;
* the producer adds the URLs host by host, round by round (URL 0 of every
  host, then URL 1, ...), yielding to the loop every ``--producer-batch``
  adds (default 50); ``add`` never waits, queues are unbounded;
* each run stops after ``--seconds``, or earlier once every URL has been
  added and fetched (then fetched/s is over the shorter run); every ``--sample-every``-th take and
  add is timed with ``time.perf_counter_ns`` around the call alone (task
  switches not included); avg and p99 are over those samples;
* fetched/s = finished fetches / run time. With delay 1 s it is bounded by
  politeness (about one fetch per host per second, plus the start-up pass);
  with delay 0 by the CPU.

Prints a table (hosts, delay, metric, value) and the machine. A benchmark,
not a test: nothing is asserted (STYLE.md). Run::

    .venv/bin/python benchmarks/fetch_queues.py [--seconds 8] [--hosts 20000] [--urls-per-host 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from squall.policy.backoff import BackoffConfig
from squall.policy.crawl_delay import CrawlDelayConfig
from squall.policy.fetch_queues import FetchQueues
from squall.policy.pace import FetchEnded, PaceConfig, PaceState, after_fetch
from squall.policy.records import SignalKind

SLOTS = 50
MAX_IDLE_SLEEP_S = 0.010


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def fmt_ns(ns: float) -> str:
    if ns >= 1_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    return f"{ns / 1_000:.2f} us"


def p99(samples: list[int]) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


async def run(
    hosts: int, urls_per_host: int, delay_s: float, seconds: float, sample_every: int, producer_batch: int
) -> dict[str, str]:
    queues: FetchQueues[tuple[int, int]] = FetchQueues(threads_per_queue=1, max_queue_size=-1)
    # the fetcher's path: the pace model says when, the queues order (squall.policy.pace)
    config = PaceConfig(
        server_delay_s=delay_s,
        min_delay_s=0.0,
        force=True,
        retry_after_max_s=86400.0,
        backoff=BackoffConfig(1.0, 60.0, 3600.0),
        crawl=CrawlDelayConfig(False, 86400, 1800.0),
    )
    paces: dict[str, PaceState] = {}
    keys = [f"host{i}.example.org" for i in range(hosts)]
    take_ns: list[int] = []
    add_ns: list[int] = []
    counters = {"fetched": 0, "added": 0, "takes": 0, "empty_takes": 0}
    producer_done = False
    monotonic, perf_ns = time.monotonic, time.perf_counter_ns
    started_s = monotonic()
    stop_at_s = started_s + seconds

    async def producer() -> None:
        nonlocal producer_done
        n = 0
        for url in range(urls_per_host):
            for host in range(hosts):
                now_s = monotonic()
                if now_s >= stop_at_s:
                    return
                t0 = perf_ns()
                pace = paces.get(keys[host])
                queues.add(keys[host], (host, url), pace.ready_at_s if pace else now_s)
                t1 = perf_ns()
                if n % sample_every == 0:
                    add_ns.append(t1 - t0)
                n += 1
                counters["added"] = n
                if n % producer_batch == 0:
                    await asyncio.sleep(0)
        producer_done = True

    async def slot() -> None:
        n = 0
        while True:
            now_s = monotonic()
            if now_s >= stop_at_s:
                return
            t0 = perf_ns()
            got = queues.take(now_s)
            t1 = perf_ns()
            if n % sample_every == 0:
                take_ns.append(t1 - t0)
            n += 1
            counters["takes"] += 1
            if got is None:
                counters["empty_takes"] += 1
                if producer_done and len(queues) == 0:
                    return  # every URL fetched: the run ends early
                ready_s = queues.next_ready_at_s()
                wait_s = MAX_IDLE_SLEEP_S if ready_s is None else ready_s - now_s
                await asyncio.sleep(min(max(wait_s, 0.0), MAX_IDLE_SLEEP_S))
                continue
            pace = after_fetch(paces.get(got[0]), FetchEnded("f", SignalKind.SUCCESS, monotonic()), config)
            paces[got[0]] = pace
            queues.finish(got[0], pace.ready_at_s)  # instant fetch
            counters["fetched"] += 1
            await asyncio.sleep(0)  # where a real fetch awaits its I/O

    await asyncio.gather(producer(), *(slot() for _ in range(SLOTS)))
    elapsed_s = monotonic() - started_s
    return {
        "take avg": fmt_ns(statistics.fmean(take_ns)) if take_ns else "n/a",
        "take p99": fmt_ns(p99(take_ns)),
        "add avg": fmt_ns(statistics.fmean(add_ns)) if add_ns else "n/a",
        "add p99": fmt_ns(p99(add_ns)),
        "fetched/s": f"{counters['fetched'] / elapsed_s:,.0f}",
        "fetched": f"{counters['fetched']:,}",
        "added": f"{counters['added']:,}",
        "takes (empty)": f"{counters['takes']:,} ({counters['empty_takes']:,})",
        "samples take/add": f"{len(take_ns):,}/{len(add_ns):,}",
        "queues left": f"{len(queues):,}",
        "run": f"{elapsed_s:.2f} s" + (" (all URLs fetched)" if producer_done and len(queues) == 0 else ""),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each run (s)")
    parser.add_argument("--hosts", type=str, default="20000", help="hosts, or a comma-separated list (one run each)")
    parser.add_argument("--urls-per-host", type=int, default=20)
    parser.add_argument("--delays", type=str, default="1,0", help="fetcher.server.delay values (s), comma-separated")
    parser.add_argument("--sample-every", type=int, default=8, help="time one call in this many")
    parser.add_argument("--producer-batch", type=int, default=50, help="adds between two yields of the producer")
    args = parser.parse_args(argv)

    host_counts = [int(h) for h in args.hosts.split(",")]
    delays = [float(d) for d in args.delays.split(",")]
    rows: list[tuple[str, str, str, str]] = []
    for hosts in host_counts:
        for delay_s in delays:
            results = asyncio.run(
                run(hosts, args.urls_per_host, delay_s, args.seconds, args.sample_every, args.producer_batch)
            )
            rows.extend((f"{hosts}", f"{delay_s:g} s", metric, value) for metric, value in results.items())

    print(
        f"machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()} ({platform.python_implementation()})"
    )
    print(
        f"setup: {SLOTS} fetch slots + 1 producer as asyncio tasks, {args.urls_per_host} URLs/host, "
        f"instant fetch, {args.seconds:g} s/run, 1 call in {args.sample_every} timed, time.monotonic clock"
    )
    header = ("hosts", "delay", "metric", "value")
    widths = [max(len(r[i]) for r in [*rows, header]) for i in range(4)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
