"""A million URLs in one worker: RSS, seeding rate, hand-out cost, restart to first hand-out.

    .venv/bin/python benchmarks/million.py --urls 1000000 --hosts 10000 [--bootstrap 127.0.0.1:19092]

Needs a broker (``squall kafka up``; ``$KAFKA_BOOTSTRAP_SERVERS`` or
``--bootstrap``). Measures, and prints as a Markdown table:

1. **hand-out cost** of the due index alone (:class:`squall.policy.due_index.DueIndex`,
   in process, no Kafka) with 10 k / 100 k / 1 M stored URLs: µs per
   ``pop_due`` of one host's URL (median over batches), bytes per stored URL
   (tracemalloc) and the stale tickets seeding left;
2. **one real worker** (``faust -A topology worker`` via squall.tools.harness):
   seeding through ``squall seed``'s path (:func:`squall.cli.seed.produce_seeds`)
   and through a raw aiokafka producer — URLs/s sent, and URLs/s stored
   (until the worker's committed status offsets pass every message sent) —,
   the worker's RSS before and after (and its peak), and after a restart (SIGTERM, start again) the seconds until the due
   index is rebuilt and until the first hand-out on the fetch topic.

The hosts are loopback addresses 127.1.x.y with nothing listening: robots.txt
fails at once (connection refused), so each host gets one hand-out, then
waits ``http.robots.retry.base.secs`` (5 s here) — the worker stores and
schedules, it does not crawl. No traffic leaves loopback. Measuring only:
never an assertion.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from squall.cli.seed import SeedLine, produce_seeds
from squall.net.kafka_security import KafkaConnection
from squall.policy.due_index import DueIndex
from squall.policy.partition import partition_key
from squall.policy.topics import all_topics, topic_name
from squall.tools.harness import Crawl
from squall.tools.kafka_admin import ensure_topics


def host_ip(i: int) -> str:
    return f"127.1.{i // 250}.{i % 250 + 1}"


def urls_for(n: int, hosts: int, offset: int = 0) -> list[str]:
    return [f"http://{host_ip((offset + k) % hosts)}/p/{offset + k}" for k in range(n)]


def due_index_cost(n: int, hosts: int, batches: int = 50, per_batch: int = 200) -> tuple[float, float, int]:
    """(µs per pop_due of one host's URL, bytes per stored URL, stale tickets after seeding) at ``n`` URLs.

    Each host's URLs are pushed one by one with due times in no order (a new
    earliest due time leaves a stale ticket); the hand-outs then take one URL
    of the next eligible host and push it back (the index stays at ``n``).
    The cost is the median over ``batches`` batches of ``per_batch`` calls:
    one spike of another process on a shared machine does not move it.
    """
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    index = DueIndex()
    for k, u in enumerate(urls_for(n, hosts)):
        index.push(host_ip(k % hosts), u, 1000.0 + k % 977, 0)
    for h in range(hosts):
        index.set_host_ready(host_ip(h), 0.0)
    per_url = (tracemalloc.get_traced_memory()[0] - base) / n
    tracemalloc.stop()
    sizes = index.sizes()
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per_batch):
            for key, taken in index.pop_due(10_000.0, 1, max_hosts=1):
                index.set_host_ready(key, 0.0)  # eligible again at once: the next call works as hard
                for u in taken:
                    index.push(key, u, 1000.0, 0)  # and the URL back: the index stays at n URLs
        times.append((time.perf_counter() - t0) / per_batch * 1e6)
    return statistics.median(times), per_url, sizes.tickets - sizes.live_tickets


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """The resident set (``VmRSS``) or its peak so far (``VmHWM``) of process ``pid``, in MiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(field + r":\s+(\d+)", text).group(1)) / 1024


async def _status_progress(crawl: Crawl) -> tuple[dict[int, int], dict[int, int]]:
    """(end offset, committed offset of the worker's group) per partition of the status topic."""
    from aiokafka.admin import AIOKafkaAdminClient

    from squall.tools.kafka_admin import end_offsets

    bootstrap = KafkaConnection.from_settings(crawl.settings)
    topic = topic_name(crawl.settings, "status")
    admin = AIOKafkaAdminClient(**bootstrap.client_kwargs())
    await admin.start()
    try:
        committed = await admin.list_consumer_group_offsets(crawl.settings["topology.id"])
    finally:
        await admin.close()
    done = {tp.partition: m.offset for tp, m in committed.items() if tp.topic == topic}
    return await end_offsets(bootstrap, topic), done


def wait_stored(crawl: Crawl, timeout_s: float) -> float:
    """Seconds until the worker's status consumer has passed every message sent so far (all stored).

    The end offsets are taken when called (the seeds are all sent by then);
    the worker keeps adding statuses of its own (robots.txt retries), so the
    lag itself never stays at 0.
    """
    t0 = time.monotonic()
    target, _ = asyncio.run(_status_progress(crawl))
    while time.monotonic() - t0 < timeout_s:
        _, done = asyncio.run(_status_progress(crawl))
        if all(done.get(p, 0) >= end for p, end in target.items()):
            return time.monotonic() - t0
        time.sleep(2.0)
    raise TimeoutError(f"status topic not consumed up to {target} after {timeout_s} s: {done}")


async def raw_produce(crawl: Crawl, urls: list[str]) -> float:
    from aiokafka import AIOKafkaProducer

    producer = AIOKafkaProducer(**KafkaConnection.from_settings(crawl.settings).client_kwargs(), linger_ms=20)
    await producer.start()
    t0 = time.monotonic()
    try:
        topic = topic_name(crawl.settings, "status")
        for u in urls:
            value = json.dumps({"url": u, "seed": True}).encode()
            await producer.send(topic, key=partition_key(u, "byHost").encode(), value=value)
        await producer.flush()
    finally:
        await producer.stop()
    return time.monotonic() - t0


async def fetch_end_offset(crawl: Crawl) -> int:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic = topic_name(crawl.settings, "fetch")
    consumer = AIOKafkaConsumer(**KafkaConnection.from_settings(crawl.settings).client_kwargs())
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(crawl.settings["topology.partitions"])]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()


def _rebuilt_all(crawl: Crawl, offset: int) -> bool:
    """Whether worker w1's log, from byte ``offset`` on, says its due index of every partition is rebuilt."""
    every = "due index rebuilt for partitions [" + ", ".join(map(str, range(crawl.settings["topology.partitions"])))
    log = crawl.workdir / "worker-w1.log"
    if not log.exists():
        return False
    with log.open("rb") as f:
        f.seek(offset)
        return every.encode() in f.read()


def wait_rebuilt(crawl: Crawl, offset: int, timeout_s: float) -> float:
    """Seconds until worker w1 logs (after byte ``offset`` of its log) that every partition's index is rebuilt."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if _rebuilt_all(crawl, offset):
            return time.monotonic() - t0
        time.sleep(0.5)
    raise TimeoutError(f"worker w1 did not rebuild its due index of every partition in {timeout_s} s")


def restart_times(crawl: Crawl, timeout_s: float) -> tuple[float, float | None]:
    """(s to due index rebuilt, s to the first hand-out) after a clean restart of worker w1."""
    crawl.stop_worker("w1")
    offset = (crawl.workdir / "worker-w1.log").stat().st_size
    before = asyncio.run(fetch_end_offset(crawl))
    t0 = time.monotonic()
    crawl.start_worker("w1")
    rebuilt = first = None
    while time.monotonic() - t0 < timeout_s and first is None:
        if rebuilt is None and _rebuilt_all(crawl, offset):
            rebuilt = time.monotonic() - t0
        if rebuilt is not None and asyncio.run(fetch_end_offset(crawl)) > before:
            first = time.monotonic() - t0
        time.sleep(0.5)
    return rebuilt if rebuilt is not None else float("nan"), first


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--urls", type=int, default=1_000_000, help="URLs seeded into the worker (default 1 000 000)")
    ap.add_argument("--hosts", type=int, default=10_000, help="hosts they are spread over (default 10 000)")
    ap.add_argument("--raw", type=float, default=0.1, help="share of the URLs sent by the raw producer (default 0.1)")
    ap.add_argument("--bootstrap", default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:9092"))
    ap.add_argument("--skip-worker", action="store_true", help="only the in-process due-index part")
    args = ap.parse_args(argv)

    print("| stored URLs | hosts | pop_due µs (one host, median) | bytes per URL in the due index | stale tickets |")
    print("|---|---|---|---|---|")
    for n in sorted({min(args.urls, x) for x in (10_000, 100_000, 1_000_000)}):
        h = max(1, n * args.hosts // args.urls)
        us, per_url, stale = due_index_cost(n, h)
        print(f"| {n:,} | {h:,} | {us:.1f} | {per_url:.0f} | {stale:,} |", flush=True)
    if args.skip_worker:
        return 0

    work = Path(tempfile.mkdtemp(prefix="squall-million-"))
    crawl = Crawl(
        work,
        args.bootstrap,
        {
            "http.private.networks.allow": ["127.0.0.0/8"],
            "topology.partitions": 8,
            "http.robots.retry.base.secs": 5.0,
            "http.timeout.connect": 1.0,
        },
    )
    raw_n = int(args.urls * args.raw)
    seed_n = args.urls - raw_n
    try:
        # topics first: a worker that joins before Faust has created them may be assigned no partition
        # until its next metadata refresh (5 min), which would count as seeding time
        asyncio.run(ensure_topics(KafkaConnection.from_settings(crawl.settings), all_topics(crawl.settings)))
        proc = crawl.start_worker("w1")
        wait_rebuilt(crawl, 0, 300)
        time.sleep(2)
        rss0 = rss_mb(proc.pid)
        seeds = [SeedLine(lineno=k + 1, url=u, metadata={}) for k, u in enumerate(urls_for(seed_n, args.hosts))]
        t0 = time.monotonic()
        asyncio.run(produce_seeds(crawl.settings, seeds))
        sent_s = time.monotonic() - t0
        stored_s = sent_s + wait_stored(crawl, 7200)
        rss1 = rss_mb(proc.pid)
        raw_sent_s = asyncio.run(raw_produce(crawl, urls_for(raw_n, args.hosts, offset=seed_n)))
        raw_stored_s = raw_sent_s + wait_stored(crawl, 7200)
        rss2, peak2 = rss_mb(proc.pid), rss_mb(proc.pid, "VmHWM")
        rebuilt_s, first_s = restart_times(crawl, 900)
        rss3 = rss_mb(crawl.workers["w1"].pid)
    finally:
        crawl.stop()
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| URLs / hosts | {args.urls:,} / {args.hosts:,} |")
    print(
        f"| worker RSS: idle → after {seed_n:,} → after {args.urls:,} URLs | {rss0:.0f} → {rss1:.0f} → {rss2:.0f} MiB |"
    )
    print(f"| worker peak RSS (VmHWM) at {args.urls:,} URLs | {peak2:.0f} MiB |")
    print(f"| RSS per stored URL | {(rss2 - rss0) * 1024 * 1024 / args.urls:.0f} B |")
    print(f"| squall seed path: sent / stored | {seed_n / sent_s:,.0f} / {seed_n / stored_s:,.0f} URLs/s |")
    print(f"| raw producer: sent / stored | {raw_n / raw_sent_s:,.0f} / {raw_n / raw_stored_s:,.0f} URLs/s |")
    print(
        f"| restart: due index rebuilt / first hand-out | {rebuilt_s:.1f} s / "
        f"{'-' if first_s is None else f'{first_s:.1f} s'} |"
    )
    print(f"| RSS after restart | {rss3:.0f} MiB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
