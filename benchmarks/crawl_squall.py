"""One squall crawl of a block of the farm: W ``faust -A topology worker`` processes on the broker, measured.

:func:`run_squall` creates the crawl's topics, starts the workers
(:class:`squall.tools.harness.Crawl`, the command an operator runs), waits
for each to log Ready, then samples their CPU and the topics' end offsets
(:mod:`crawl_sampling`) while it seeds every host's ``/`` and waits for the
crawl to go idle; it returns the crawl's :class:`crawl_measures.Row`. The
CPU-seconds and the records written are counted up to ``CPU_TAIL_S`` (1 s)
after the last request. :func:`squall_overrides` gives the configuration
keys of such a crawl (``--delay`` in seconds, ``--set``, WARC off, documents
on).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.crawl_farm import links_of
from benchmarks.crawl_measures import Row, cpu_until, measure, records_written, row_of, sample_at, topic_label
from benchmarks.crawl_sampling import CpuSampler, OffsetSampler, proc_peak_rss_mb
from squall.net.kafka_security import KafkaConnection
from squall.policy.topics import all_topics
from squall.tools.harness import Crawl
from squall.tools.kafka_admin import ensure_topics
from tests.integration.conftest import ServedSite  # the integration tests' threaded server

CPU_TAIL_S = 1.0  # squall's CPU is counted until this long after the last request (its results are applied)
WARC_SWITCH = "warc.enabled"  # the configuration key that turns squall's WARC archive off (false)
DOCUMENTS_SWITCH = "documents.enabled"  # the configuration key that turns squall's documents topic on (true)


def squall_label(workers: int, warc: str, documents: bool = False) -> str:
    label = f"squall ({workers} worker{'s' if workers > 1 else ''}, WARC {warc})"
    return label + (" + documents" if documents else "")


def squall_overrides(args: argparse.Namespace, warc: str, documents: bool = False) -> dict[str, Any]:
    """The configuration keys of a benchmark crawl: loopback allowed, the delay, ``--set``, WARC off and documents on if asked."""
    overrides: dict[str, Any] = {
        "http.private.networks.allow": ["127.0.0.0/8"],
        "fetcher.server.delay": args.delay,
        "http.timeout.total": 30.0,
    }
    if args.partitions:
        overrides["topology.partitions"] = args.partitions
    for item in args.set or []:
        key, _, value = item.partition("=")
        overrides[key] = json.loads(value) if value[:1] in '[{0123456789-tfn"' else value
    if warc == "off":
        overrides[WARC_SWITCH] = False
    if documents:
        overrides[DOCUMENTS_SWITCH] = True
    return overrides


def run_squall(
    bootstrap: str,
    served: ServedSite,
    ips: list[str],
    args: argparse.Namespace,
    workdir: Path,
    available: int,
    warc: str = "on",
    run: int = 1,
    documents: bool = False,
) -> Row:
    crawl = Crawl(workdir, bootstrap, squall_overrides(args, warc, documents))
    timeout = args.timeout or 3 * args.pages * args.delay + 120
    offsets: OffsetSampler | None = None
    sampler: CpuSampler | None = None
    try:
        # topics first (as `squall seed` would): a worker that starts before them is not assigned them
        conn = KafkaConnection.from_settings(crawl.settings)  # the broker's TLS/SASL, as the workers use it
        asyncio.run(ensure_topics(conn, all_topics(crawl.settings), crawl.settings["topology.replication.factor"]))
        names = [f"w{i + 1}" for i in range(args.workers)]
        for name in names:
            crawl.start_worker(name)
        _wait_ready(crawl, names, workdir, 180)
        pids = [crawl.workers[n].pid for n in names]
        offsets = OffsetSampler(conn, f"{crawl.topology_id}-")
        sampler = CpuSampler(pids)
        spy = _start_profile(args.profile, pids[0], args.profile_gil)
        t0 = time.time()
        crawl.seed([served.server.base_url(ip) + "/" for ip in ips])
        crawl.wait_idle(timeout_s=timeout)
        wall = time.time() - t0
        samples = sampler.stop()
        ends = offsets.stop()
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(60)
        rss = max(proc_peak_rss_mb(pid) for pid in pids)
    finally:
        if sampler is not None:
            sampler.stop()
        if offsets is not None:
            offsets.stop()
        crawl.stop()
    m = measure(served.server.requests, set(ips), args.delay, args.pages, links_of(served.server.spec))
    last = max((r["t"] for r in served.server.requests if r["ip"] in set(ips)), default=time.time())
    cpu = cpu_until(samples, last + CPU_TAIL_S)
    written = records_written(ends[0][1], sample_at(ends, last + CPU_TAIL_S))
    records = {topic_label(t, crawl.topology_id): n for t, n in written.items()}
    return row_of(squall_label(args.workers, warc, documents), m, available, cpu, rss, wall, run, records)


def _start_profile(path: str | None, pid: int, gil: bool = False) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the first worker into ``path`` (collapsed stacks; ``gil``: only the GIL's holder), or None."""
    if not path:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [
            spy,
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "200",
            *(["--gil"] if gil else []),
            "--output",
            path,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _wait_ready(crawl: Crawl, names: list[str], workdir: Path, timeout_s: float) -> None:
    """Wait until each worker's log says Ready (Faust's worker start line), or raise."""
    deadline = time.monotonic() + timeout_s
    for name in names:
        log = workdir / f"worker-{name}.log"
        while "Ready" not in (log.read_text(errors="replace") if log.exists() else ""):
            if crawl.workers[name].poll() is not None:
                raise RuntimeError(f"worker {name} exited; see {log}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker {name} not ready after {timeout_s} s; see {log}")
            time.sleep(0.2)
