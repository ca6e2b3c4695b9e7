"""End-to-end benchmark of a whole crawl through the real broker, optionally against Scrapy.

The farm: N simulated hosts (one loopback address each, ``127.b.x.y``, all on
one port) served by :class:`squall.tools.testsite.RecordingServer`, which records
every request with its arrival time. Each host has P pages: ``/`` links to
every other page of its host, each page links to ``--links`` pages of its
host and one page of another host (every page is reachable in one hop from
its index), and ``--offsite`` links to hosts that are not seeded (out of
scope: squall must reject them, Scrapy's spider does not follow them).
robots.txt allows everything. squall runs with ``fetcher.server.delay`` = D
and W ``faust -A topology worker`` processes (:class:`squall.tools.harness.Crawl`,
the same command an operator runs) on the broker at ``--bootstrap``; without
it the benchmark starts the local broker (:mod:`squall.tools.kafka_local`) on
``--broker-port`` and stops it at the end.

Runs: ``--runs R`` crawls the farm R times with each crawler (squall with the
WARC archive on and/or off, ``--warc``; Scrapy with ``--peer scrapy``). The
crawlers take turns within a run (the order rotates from run to run, so a
slow spell of a shared machine does not always fall on the same one), and
every crawl gets its own block of host addresses (``127.b.*``), so nothing is
cached from an earlier crawl. The table gives each figure over the R runs as
min / median / max; the squall / Scrapy ratios are ratios of medians.

What each figure says (all from the recording server, except CPU, RSS and
Kafka records):

* ``pages``: distinct pages requested (robots.txt not counted), of the
  ``N × P`` available; ``s``: first request → last request at the server;
  ``pages/s`` = pages / s.
* ``bound``: the politeness bound, the N × P pages over the shortest possible
  crawl (robots.txt then P pages, D apart: P × D seconds), i.e. N / D pages/s;
  ``ratio`` = pages/s ÷ bound (read it with ``pages``: a crawler that misses
  pages can still show a high rate).
* ``min gap`` and ``p1 gap``: smallest and 1st-percentile start-to-start gap
  between two requests to one host (robots.txt included), in seconds, to be
  read against D; ``viol``: gaps shorter than D − 10 ms; ``dup``: requests of
  a URL (robots.txt included) beyond its first.
* ``cpu/1k``: CPU-seconds (user + system) of the crawler's processes per
  1 000 pages, counted from the moment the crawler is ready (squall: every
  worker logged Ready; Scrapy: spider opened) to the end of the crawl (squall:
  1 s after the last request, from samples every 0.25 s, so the idle
  detection that follows is not counted; Scrapy: spider closed);
  ``links/cpu-s``: links found in the pages fetched (discovered URLs, before
  dedup and scope) per CPU-second of the same window; ``rss MB``: peak resident set size of the
  largest worker process (VmHWM; Scrapy: ru_maxrss).
* ``rec/page``: records written to the broker per page by the squall crawl,
  over the same window as its CPU: the growth of the end offsets of every
  partition of every topic of the crawl's ``topology.id`` (``<id>-status``,
  ``-fetch``, ``-signals``, ``-ticks``, ..., and Faust's table changelogs
  ``<id>-<table>-changelog``), sampled every 0.5 s from before the seeds are
  sent (so the seeds count) to the first sample 1 s or more after the last
  request. Consumer offset commits (``__consumer_offsets``) are not counted.
  The report breaks it down per topic.

``--peer scrapy`` also crawls the SAME farm (same server, same run, a fresh
host set) with a generated Scrapy spider, installed once in its own
virtualenv (``~/.cache/squall/bench-scrapy``, ``pip install scrapy``), with
DOWNLOAD_DELAY = D, RANDOMIZE_DOWNLOAD_DELAY off, ROBOTSTXT_OBEY, one request
per domain at a time, AutoThrottle off and CONCURRENT_REQUESTS = max(16, N).

``--warc off`` runs squall with ``warc.enabled: false`` (``--warc both``: a
row each); a squall whose configuration has no such key cannot switch its
archive off, and the benchmark says so (``both`` then runs the WARC-on row
only). ``--documents`` (or ``--documents on``) runs squall with
``documents.enabled: true``, ``--documents both`` a row with and a row
without (with documents the rows are labelled ``+ documents``; the per-page cost of the step alone:
benchmarks/documents.py). The report's header names the commit (short hash, ``-dirty`` with
uncommitted changes to tracked files other than the history file), the date,
the machine (CPU model, cores, load average at the start) and the Pythons.
``--json FILE`` writes everything machine-readably; ``--history FILE``
appends one CSV row per squall variant of the run set (:data:`HISTORY_FIELDS`:
the medians); ``--markdown`` prints the report as Markdown.

A benchmark, not a test: it asserts nothing (STYLE.md). Each crawl is bounded
by ``--timeout`` (default: 3 × the shortest possible crawl + 120 s); a crawl
that fails is reported and the others go on (exit status 1). Run::

    .venv/bin/python benchmarks/crawl.py --hosts 50 --pages 10 --delay 1 --workers 1 [--peer scrapy] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import datetime
import itertools
import json
import math
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.structs import TopicPartition

from squall.net.kafka_security import Broker, KafkaConnection, as_connection
from squall.policy.topics import TABLES, TOPIC_SUFFIXES, all_topics
from squall.settings import FIELD_OF
from squall.tools.harness import Crawl
from squall.tools.kafka_admin import ensure_topics
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec
from tests.integration.conftest import ServedSite  # the integration tests' threaded server

REPO = Path(__file__).resolve().parent.parent
VIOLATION_SLACK_S = 0.010  # a gap shorter than delay - 10 ms is a violation (clock and scheduling noise below)
SCRAPY_VENV = Path(os.environ.get("SQUALL_CACHE", Path.home() / ".cache" / "squall")) / "bench-scrapy"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU_SAMPLE_S = 0.25  # how often the workers' CPU time is sampled
CPU_TAIL_S = 1.0  # squall's CPU is counted until this long after the last request (its results are applied)
OFFSET_SAMPLE_S = 0.5  # how often the end offsets of the crawl's topics are sampled
TOPIC_LIST_S = 10.0  # how often the list of the crawl's topics is read again (all exist before the seeds)
WARC_SWITCH = "warc.enabled"  # the configuration key that turns squall's WARC archive off (false)
DOCUMENTS_SWITCH = "documents.enabled"  # the configuration key that turns squall's documents topic on (true)
HISTORY_FILE = "benchmarks/history.csv"  # its own rows do not make the tree dirty (git_revision)


# ---------------------------------------------------------------------- the farm


def host_ips(n: int, block: int) -> list[str]:
    """``n`` loopback addresses ``127.<block>.x.y`` (y in 2..251), one per simulated host."""
    return [f"127.{block}.{i // 250}.{i % 250 + 2}" for i in range(n)]


def farm(ips: list[str], pages: int, links: int, offsite: int, seed: int = 0) -> SiteSpec:
    """A site of ``len(ips)`` hosts × ``pages`` pages (``/`` included); see the module docstring."""
    rng = random.Random(seed)
    spec = SiteSpec()
    n_sub = max(0, pages - 1)
    for i, ip in enumerate(ips):
        others = [h for h in ips if h != ip]
        site: dict[str, Any] = {"/": Page(title=f"host {i}", links=tuple(f"/p/{k}" for k in range(n_sub)))}
        for k in range(n_sub):
            local = [f"/p/{j}" for j in rng.sample(range(n_sub), min(links, n_sub)) if j != k]
            if others:
                local.append(f"http://{rng.choice(others)}:{{port}}/p/{rng.randrange(max(1, n_sub))}")
            local += [f"http://offsite-{rng.randrange(10**6)}.invalid/x/{m}" for m in range(offsite)]
            site[f"/p/{k}"] = Page(title=f"host {i} page {k}", links=tuple(local))
        spec.hosts[ip] = HostSpec(pages=site, robots=RobotsSpec(text="User-agent: *\nAllow: /\n"))
    return spec


def links_of(spec: SiteSpec) -> dict[tuple[str, str], int]:
    """(host IP, path) → number of links of that page of ``spec``."""
    return {
        (ip, path): len(page.links)
        for ip, host in spec.hosts.items()
        for path, page in host.pages.items()
        if isinstance(page, Page)
    }


# ---------------------------------------------------------------------- measures (pure)


@dataclass
class Row:
    """One crawler's crawl of one host set; see the module docstring for each column.

    ``records``: topic label (:func:`topic_label`) → records written to the
    broker during the crawl; None for a crawler without Kafka (Scrapy).
    """

    crawler: str
    pages: int
    available: int
    elapsed_s: float
    bound_pps: float
    min_gap_s: float
    p1_gap_s: float
    violations: int
    duplicates: int
    cpu_s: float | None
    rss_mb: float | None
    wall_s: float
    links: int = 0
    run: int = 1
    records: dict[str, int] | None = None

    @property
    def links_per_cpu_s(self) -> float | None:
        return None if not self.cpu_s or not self.links else self.links / self.cpu_s

    @property
    def pps(self) -> float:
        return self.pages / self.elapsed_s if self.elapsed_s > 0 else float("nan")

    @property
    def ratio(self) -> float:
        return self.pps / self.bound_pps if self.bound_pps > 0 else float("nan")

    @property
    def cpu_per_1k(self) -> float | None:
        return None if self.cpu_s is None or not self.pages else self.cpu_s * 1000 / self.pages

    @property
    def records_by_topic_per_page(self) -> dict[str, float] | None:
        """Topic label → records per page (None without records or pages)."""
        if self.records is None or not self.pages:
            return None
        return {topic: n / self.pages for topic, n in self.records.items()}

    @property
    def records_per_page(self) -> float | None:
        per_topic = self.records_by_topic_per_page
        return None if per_topic is None else sum(per_topic.values())

    def to_json(self) -> dict[str, Any]:
        """The row's fields and derived figures (``pps``, ``ratio``, ...), for ``--json``."""
        derived = ("pps", "ratio", "cpu_per_1k", "links_per_cpu_s", "records_per_page", "records_by_topic_per_page")
        return {**asdict(self), **{name: getattr(self, name) for name in derived}}


def records_written(before: Mapping[tuple[str, int], int], after: Mapping[tuple[str, int], int]) -> dict[str, int]:
    """Records appended per topic between two snapshots of end offsets ((topic, partition) → end offset).

    A partition absent from ``before`` (its topic created in between) counts
    from offset 0; an end offset that went down (a topic deleted and
    created again) counts as 0, not as a negative number.
    """
    out: dict[str, int] = {}
    for (topic, partition), end in after.items():
        out[topic] = out.get(topic, 0) + max(0, end - before.get((topic, partition), 0))
    return out


def topic_label(topic: str, topology_id: str) -> str:
    """``<id>-status`` → ``status``; ``<id>-hosts-changelog`` → ``hosts changelog`` (others: the name itself)."""
    name = topic.removeprefix(f"{topology_id}-")
    return name.removesuffix("-changelog") + " changelog" if name.endswith("-changelog") else name


KNOWN_TOPICS = (*TOPIC_SUFFIXES, *(f"{table} changelog" for table in TABLES))


def topic_order(labels: Iterable[str]) -> list[str]:
    """``labels`` in a fixed order: squall's topics, then its table changelogs, then any other by name."""
    known = [t for t in KNOWN_TOPICS if t in set(labels)]
    return known + sorted(set(labels) - set(KNOWN_TOPICS))


def sample_at(samples: Sequence[tuple[float, Any]], t_s: float) -> Any:
    """The value of the first sample at or after ``t_s`` (else the last); ``samples``: (Unix time, value), in order."""
    return next((value for t, value in samples if t >= t_s), samples[-1][1])


@dataclass(frozen=True)
class Spread:
    """One figure over ``n`` runs: its smallest value, median and largest value."""

    low: float
    median: float
    high: float
    n: int

    def cell(self, spec: str) -> str:
        """``low / median / high`` formatted with ``spec``; the value alone for one run."""
        if self.n == 1:
            return format(self.median, spec)
        return " / ".join(format(v, spec) for v in (self.low, self.median, self.high))


def spread(values: Iterable[float | None]) -> Spread | None:
    """The :class:`Spread` of ``values`` without the unknown ones (None, NaN); None if none is left."""
    known = [float(v) for v in values if v is not None and not math.isnan(v)]
    if not known:
        return None
    return Spread(min(known), statistics.median(known), max(known), len(known))


# figure → (what one row says, format): the summary's figures, in its column order
FIGURES: dict[str, tuple[Callable[[Row], float | None], str]] = {
    "pages": (lambda r: r.pages, ".0f"),
    "pages/s": (lambda r: r.pps, ".1f"),
    "ratio": (lambda r: r.ratio, ".2f"),
    "cpu/1k": (lambda r: r.cpu_per_1k, ".2f"),
    "rec/page": (lambda r: r.records_per_page, ".2f"),
    "links/cpu-s": (lambda r: r.links_per_cpu_s, ",.0f"),
    "rss MB": (lambda r: r.rss_mb, ".0f"),
    "min gap": (lambda r: r.min_gap_s, ".3f"),
    "viol": (lambda r: r.violations, ".0f"),
    "dup": (lambda r: r.duplicates, ".0f"),
}


def by_crawler(rows: Iterable[Row]) -> dict[str, list[Row]]:
    """Rows grouped by crawler label, in the order of each label's first row."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.crawler, []).append(row)
    return groups


def summarize(rows: Sequence[Row]) -> dict[str, Spread | None]:
    """Each of :data:`FIGURES` over ``rows`` (one crawler's runs)."""
    return {name: spread(get(r) for r in rows) for name, (get, _spec) in FIGURES.items()}


def topic_spreads(rows: Sequence[Row]) -> dict[str, Spread]:
    """Topic label → records per page over ``rows`` (a topic missing from a run counts 0 there), plus ``total``.

    squall's own topics are always there; another topic (Faust's ``__assignor-__leader``) only if it got records.
    """
    per_run = [r.records_by_topic_per_page for r in rows]
    known = [p for p in per_run if p is not None]
    out: dict[str, Spread] = {}
    for topic in topic_order({t for p in known for t in p}):
        s = spread(p.get(topic, 0.0) for p in known)
        if s is not None and (s.high > 0 or topic in KNOWN_TOPICS):  # Faust's own idle topics left out
            out[topic] = s
    total = spread(r.records_per_page for r in rows)
    if total is not None:
        out["total"] = total
    return out


def ratio_of_medians(ours: Spread | None, theirs: Spread | None) -> float | None:
    """``ours.median / theirs.median``; None if either is unknown or theirs is 0."""
    if ours is None or theirs is None or theirs.median == 0:
        return None
    return ours.median / theirs.median


@dataclass(frozen=True)
class Comparison:
    """squall / Scrapy from the medians: pages/s (above 1: squall is faster) and CPU-s per page (above 1: squall uses more)."""

    squall: str
    pages_per_s: float | None
    cpu_per_page: float | None


def compare(summaries: Mapping[str, Mapping[str, Spread | None]], peer: str = "scrapy") -> list[Comparison]:
    """One :class:`Comparison` per squall crawler of ``summaries`` (label → :func:`summarize`) against ``peer``."""
    theirs = summaries.get(peer)
    if theirs is None:
        return []
    return [
        Comparison(
            label, ratio_of_medians(s["pages/s"], theirs["pages/s"]), ratio_of_medians(s["cpu/1k"], theirs["cpu/1k"])
        )
        for label, s in summaries.items()
        if label.startswith("squall")
    ]


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered))))]


def measure(
    requests: list[dict[str, Any]],
    ips: set[str],
    delay_s: float,
    pages_per_host: int,
    links_per_page: dict[tuple[str, str], int] | None = None,
) -> dict[str, Any]:
    """Politeness and throughput measures of the recorded ``requests`` to the hosts ``ips``.

    ``requests``: RecordingServer entries (``ip``, ``path``, ``t`` in Unix
    seconds). Returns a dict with ``pages`` (distinct non-robots paths),
    ``elapsed_s`` (first → last request), ``bound_pps`` (the pages available,
    ``len(ips) × pages_per_host``, over the shortest possible crawl: robots.txt
    then every page, ``delay_s`` apart, i.e. ``pages_per_host × delay_s``),
    ``gaps`` (every start-to-start gap within a host, seconds), ``min_gap_s``,
    ``p1_gap_s``, ``violations`` (gaps < delay − 10 ms), ``duplicates``
    (requests of an (ip, path) beyond its first) and ``links`` (the links of
    the pages fetched, from ``links_per_page``: (ip, path) → number of links).
    """
    mine = [r for r in requests if r["ip"] in ips]
    by_host: dict[str, list[float]] = defaultdict(list)
    for r in mine:
        by_host[r["ip"]].append(r["t"])
    gaps = [b - a for times in by_host.values() for a, b in itertools.pairwise(sorted(times))]
    counts = Counter((r["ip"], r["path"]) for r in mine)
    pages = sum(1 for (_, path) in counts if path != "/robots.txt")
    times = [r["t"] for r in mine]
    elapsed = max(times) - min(times) if times else 0.0
    shortest = pages_per_host * delay_s  # robots.txt, then the pages: pages_per_host gaps of delay_s
    return {
        "pages": pages,
        "elapsed_s": elapsed,
        "bound_pps": len(ips) * pages_per_host / shortest,
        "gaps": gaps,
        "min_gap_s": min(gaps, default=float("nan")),
        "p1_gap_s": percentile(gaps, 0.01),
        "violations": sum(1 for g in gaps if g < delay_s - VIOLATION_SLACK_S),
        "duplicates": sum(n - 1 for n in counts.values()),
        "links": sum((links_per_page or {}).get(k, 0) for k in counts),
    }


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads) from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is field 3 of the man page
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15


def cpu_until(samples: list[tuple[float, float]], t_s: float) -> float:
    """CPU seconds used from the first sample to the first one at or after ``t_s`` (else the last).

    ``samples``: (Unix time, cumulated CPU seconds) in time order, the first
    taken when the crawler was ready.
    """
    if not samples:
        return float("nan")
    return float(sample_at(samples, t_s)) - samples[0][1]


class CpuSampler:
    """Samples the summed CPU seconds of ``pids`` every ``CPU_SAMPLE_S`` in a thread, from now until stop()."""

    def __init__(self, pids: list[int]) -> None:
        self._pids = pids
        self._samples: list[tuple[float, float]] = []
        self._done = threading.Event()
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        self._samples.append((time.time(), sum(proc_cpu_s(p) for p in self._pids)))

    def _loop(self) -> None:
        while not self._done.wait(CPU_SAMPLE_S):
            try:
                self._sample()
            except OSError:  # a worker is gone (the crawl failed or was stopped): no more samples
                return

    def stop(self) -> list[tuple[float, float]]:
        """Stop sampling (after one last sample, if every process is still there) and return the samples."""
        if self._done.is_set():  # stopped already
            return self._samples
        self._done.set()
        self._thread.join(5)
        try:
            self._sample()
        except OSError:
            pass
        return self._samples


def proc_peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class OffsetSampler:
    """Samples the end offsets of every partition of the topics named ``<prefix>…`` in a thread, until stop().

    One admin client (the topic list, read again every ``TOPIC_LIST_S``, so
    a topic created during the crawl is seen) and one group-less consumer
    (the end offsets) for the whole crawl; the first sample is taken before
    the constructor returns.

    Raises:
        RuntimeError: (constructor) no first sample within 60 s (no broker answers).
    """

    def __init__(self, broker: Broker, prefix: str) -> None:
        self._conn = as_connection(broker)  # the broker's TLS/SASL too (squall.net.kafka_security)
        self._prefix = prefix
        self._samples: list[tuple[float, dict[tuple[str, int], int]]] = []
        self._tps: list[TopicPartition] = []
        self._listed_at = -math.inf  # monotonic time of the last topic list
        self._error: BaseException | None = None
        self._done = threading.Event()
        self._first = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        if not self._first.wait(60) or not self._samples:
            self._done.set()
            raise RuntimeError(f"no end offsets from {self._conn.bootstrap} within 60 s: {self._error!r}")

    async def _main(self) -> None:
        admin = AIOKafkaAdminClient(**self._conn.client_kwargs())
        consumer = AIOKafkaConsumer(**self._conn.client_kwargs(), group_id=None, enable_auto_commit=False)
        try:
            await admin.start()
            await consumer.start()
            while True:
                last = self._done.is_set()  # one more sample after stop() was called, then out
                try:
                    await self._sample(admin, consumer)
                except Exception as exc:  # a failed sample is skipped; the next one may succeed
                    self._error = exc
                self._first.set()
                if last:
                    return
                await asyncio.to_thread(self._done.wait, OFFSET_SAMPLE_S)
        except Exception as exc:
            self._error = exc
        finally:
            self._first.set()
            await consumer.stop()
            await admin.close()

    async def _sample(self, admin: AIOKafkaAdminClient, consumer: AIOKafkaConsumer) -> None:
        now = time.monotonic()
        if now - self._listed_at > TOPIC_LIST_S:  # the topic list is read again now and then, not every sample
            self._tps = [
                TopicPartition(t["topic"], p["partition"])
                for t in await admin.describe_topics(None)  # every topic: naming one could auto-create it
                if t["topic"].startswith(self._prefix) and t["error_code"] == 0
                for p in t["partitions"]
            ]
            self._listed_at = now
        ends = await consumer.end_offsets(self._tps) if self._tps else {}
        self._samples.append((time.time(), {(tp.topic, tp.partition): int(end) for tp, end in ends.items()}))

    def stop(self) -> list[tuple[float, dict[tuple[str, int], int]]]:
        """Stop sampling (after one last sample) and return the samples: (Unix time, (topic, partition) → end offset)."""
        self._done.set()
        self._thread.join(30)
        return self._samples


# ---------------------------------------------------------------------- squall


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
        spy = _start_profile(args.profile, pids[0])
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
    return _row(squall_label(args.workers, warc, documents), m, available, cpu, rss, wall, run, records)


def _start_profile(path: str | None, pid: int) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the first worker into ``path`` (collapsed stacks), or None without --profile."""
    if not path:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen(
        [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200", "--output", path],
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


# ---------------------------------------------------------------------- Scrapy

SPIDER = '''\
"""Benchmark spider (generated by squall's benchmarks/crawl.py): follow every link within the farm."""
import json, resource, time
from urllib.parse import urlsplit

import scrapy
from scrapy import signals

CONF = json.load(open({conf!r}))


class FarmSpider(scrapy.Spider):
    name = "farm"
    start_urls = CONF["seeds"]
    custom_settings = {{
        "DOWNLOAD_DELAY": CONF["delay"],
        "RANDOMIZE_DOWNLOAD_DELAY": False,  # older Scrapy (deprecated in newer ones)
        "DOWNLOAD_DELAY_JITTER": 0,         # the same in newer Scrapy
        "ROBOTSTXT_OBEY": True,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "CONCURRENT_REQUESTS": CONF["concurrent"],
        "AUTOTHROTTLE_ENABLED": False,
        "TELNETCONSOLE_ENABLED": False,
        "LOG_LEVEL": "WARNING",
        "USER_AGENT": "scrapy-bench",
        "CLOSESPIDER_TIMEOUT": CONF["timeout"],
    }}
    netlocs = {{urlsplit(u).netloc for u in CONF["seeds"]}}

    @classmethod
    def from_crawler(cls, crawler, *args, **kwargs):
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider.opened, signal=signals.spider_opened)
        return spider

    def opened(self, spider):
        self.cpu0 = resource.getrusage(resource.RUSAGE_SELF)

    def parse(self, response):
        for href in response.css("a::attr(href)").getall():
            url = response.urljoin(href)
            if urlsplit(url).netloc in self.netlocs:
                yield scrapy.Request(url, callback=self.parse)

    def closed(self, reason):
        ru = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (ru.ru_utime + ru.ru_stime) - (self.cpu0.ru_utime + self.cpu0.ru_stime)
        json.dump({{"cpu_s": cpu, "rss_mb": ru.ru_maxrss / 1024, "reason": reason}}, open(CONF["out"], "w"))
'''


def scrapy_python() -> Path:
    """The Python of the benchmark's Scrapy virtualenv, created and filled with ``pip install scrapy`` once."""
    py = SCRAPY_VENV / "bin" / "python"
    if not (SCRAPY_VENV / ".installed").exists():
        print(f"# installing Scrapy in {SCRAPY_VENV} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(SCRAPY_VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", "scrapy"], check=True)
        (SCRAPY_VENV / ".installed").touch()
    return py


def scrapy_version(py: Path) -> str:
    return subprocess.run(
        [str(py), "-c", "import scrapy; print(scrapy.__version__)"], capture_output=True, text=True, check=True
    ).stdout.strip()


def run_scrapy(
    py: Path, served: ServedSite, ips: list[str], args: argparse.Namespace, workdir: Path, available: int, run: int = 1
) -> Row:
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout or 3 * args.pages * args.delay + 120
    conf = {
        "seeds": [served.server.base_url(ip) + "/" for ip in ips],
        "delay": args.delay,
        "concurrent": max(16, len(ips)),
        "timeout": timeout,
        "out": str(workdir / "scrapy-stats.json"),
    }
    (workdir / "conf.json").write_text(json.dumps(conf))
    spider = workdir / "farm_spider.py"
    spider.write_text(SPIDER.format(conf=str(workdir / "conf.json")))
    t0 = time.time()
    with open(workdir / "scrapy.log", "wb") as log:
        subprocess.run(
            [str(py), "-m", "scrapy", "runspider", str(spider)],
            cwd=workdir,
            stdout=log,
            stderr=subprocess.STDOUT,
            timeout=timeout + 60,
            check=False,
        )
    wall = time.time() - t0
    stats = json.loads((workdir / "scrapy-stats.json").read_text()) if (workdir / "scrapy-stats.json").exists() else {}
    m = measure(served.server.requests, set(ips), args.delay, args.pages, links_of(served.server.spec))
    return _row("scrapy", m, available, stats.get("cpu_s"), stats.get("rss_mb"), wall, run)


def _row(
    crawler: str,
    m: dict[str, Any],
    available: int,
    cpu_s: float | None,
    rss_mb: float | None,
    wall_s: float,
    run: int,
    records: dict[str, int] | None = None,
) -> Row:
    """The :class:`Row` of one crawl from :func:`measure`'s figures ``m`` and the crawler's own."""
    return Row(
        crawler,
        m["pages"],
        available,
        m["elapsed_s"],
        m["bound_pps"],
        m["min_gap_s"],
        m["p1_gap_s"],
        m["violations"],
        m["duplicates"],
        cpu_s,
        rss_mb,
        wall_s,
        m["links"],
        run,
        records,
    )


# ---------------------------------------------------------------------- report (pure)

COLUMNS = (
    "run",
    "crawler",
    "pages",
    "s",
    "pages/s",
    "bound",
    "ratio",
    "min gap",
    "p1 gap",
    "viol",
    "dup",
    "cpu/1k",
    "rec/page",
    "links/cpu-s",
    "rss MB",
    "wall s",
)


def _fmt(v: float | None, spec: str) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, spec)


def _csv(v: float | None, spec: str) -> str:
    return "" if v is None or math.isnan(v) else format(v, spec)


def finite(value: Any) -> Any:
    """``value`` (dicts, lists, tuples, numbers) with NaN and infinities as None: what JSON can hold."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


def cells(row: Row) -> list[str]:
    """One crawl's cells, in :data:`COLUMNS` order ("-": unknown)."""
    return [
        str(row.run),
        row.crawler,
        f"{row.pages}/{row.available}",
        _fmt(row.elapsed_s, ".1f"),
        _fmt(row.pps, ".1f"),
        _fmt(row.bound_pps, ".1f"),
        _fmt(row.ratio, ".2f"),
        _fmt(row.min_gap_s, ".3f"),
        _fmt(row.p1_gap_s, ".3f"),
        str(row.violations),
        str(row.duplicates),
        _fmt(row.cpu_per_1k, ".2f"),
        _fmt(row.records_per_page, ".2f"),
        _fmt(row.links_per_cpu_s, ",.0f"),
        _fmt(row.rss_mb, ".0f"),
        _fmt(row.wall_s, ".1f"),
    ]


SUMMARY_COLUMNS = ("crawler", "runs", *FIGURES)


def summary_cells(label: str, rows: Sequence[Row]) -> list[str]:
    """One crawler's summary cells, in :data:`SUMMARY_COLUMNS` order: min / median / max of each figure."""
    summary = summarize(rows)
    out = [label, str(len(rows))]
    for name, (_get, spec) in FIGURES.items():
        s = summary[name]
        out.append("-" if s is None else s.cell(spec))
    return out


def render_table(header: Sequence[str], body: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    """A table as lines: Markdown (``| a | b |`` and a ``|---|`` rule) or plain text, columns aligned."""
    if markdown:
        return [
            "| " + " | ".join(header) + " |",
            "|" + "|".join("---" for _ in header) + "|",
            *("| " + " | ".join(r) + " |" for r in body),
        ]
    widths = [max(len(r[i]) for r in [header, *body]) for i in range(len(header))]
    line = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()  # noqa: E731
    return [line(header), "  ".join("-" * w for w in widths), *(line(r) for r in body)]


@dataclass(frozen=True)
class Meta:
    """What a run set ran on and with: the report's header and the history row's first columns."""

    commit: str  # short hash, "-dirty" if tracked files (the history file aside) differ from it
    date: str  # UTC, ISO 8601 to the second, at the start
    cpu_model: str
    cores: int
    load: tuple[float, float, float]  # load average (1, 5, 15 min) at the start
    python: str
    profile: str  # --name
    farm: str  # the farm and crawl parameters, e.g. "100x10 d=1 w=1 links=3 offsite=0"
    runs: int
    bound_pps: float
    scrapy: str | None = None  # Scrapy's version, None without --peer scrapy
    notes: tuple[str, ...] = ()

    @property
    def machine(self) -> str:
        return f"{self.cores} × {self.cpu_model}"


def header_lines(meta: Meta) -> list[str]:
    """The report's header: profile and farm, commit and date, machine and Pythons, what a cell holds."""
    load = " ".join(f"{v:.2f}" for v in meta.load)
    peer = f"; Scrapy {meta.scrapy}" if meta.scrapy else ""
    return [
        f"benchmarks/crawl.py, profile {meta.profile}"
        + ("" if meta.profile == meta.farm else f" ({meta.farm})")
        + f"; bound N / D = {meta.bound_pps:g} pages/s",
        f"commit {meta.commit}, {meta.date}",
        f"machine: {meta.cores} cores ({meta.cpu_model}), load average {load} at the start; Python {meta.python}{peer}",
        f"cells: min / median / max of {meta.runs} run(s) (one value for one run); "
        "min gap: the smallest of a run; viol, dup: per run",
        *meta.notes,
    ]


def report_lines(meta: Meta, rows: Sequence[Row], markdown: bool = False) -> list[str]:
    """The whole report: header, the runs (if more than one), the summary, the ratios, records per page by topic."""
    groups = by_crawler(rows)
    summaries = {label: summarize(rs) for label, rs in groups.items()}

    def para(lines: Iterable[str]) -> list[str]:  # comment lines in text, a bullet list in Markdown
        return [f"- {x}" if markdown else f"# {x}" for x in lines]

    out = [*para(header_lines(meta)), ""]
    if any(len(rs) > 1 for rs in groups.values()):
        out += [*render_table(COLUMNS, [cells(r) for r in rows], markdown), ""]
    out += [*render_table(SUMMARY_COLUMNS, [summary_cells(k, rs) for k, rs in groups.items()], markdown), ""]
    notes = []
    for c in compare(summaries):
        notes.append(
            f"{c.squall} / scrapy, medians of {meta.runs} run(s): pages/s {_fmt(c.pages_per_s, '.2f')}, "
            f"CPU-s per page {_fmt(c.cpu_per_page, '.2f')}"
        )
    for label, rs in groups.items():
        topics = topic_spreads(rs)
        if topics:
            parts = [f"{topic} {s.median:.2f}" for topic, s in topics.items() if topic != "total"]
            notes.append(
                f"records/page, {label}, medians: {', '.join(parts)}; total {_fmt(topics['total'].median, '.2f')}"
                if "total" in topics
                else f"records/page, {label}, medians: {', '.join(parts)}"
            )
    return out + (para(notes) if markdown else notes)


HISTORY_FIELDS = (
    "commit",
    "date",
    "machine",
    "load_1m",
    "python",
    "scrapy",
    "profile",
    "farm",
    "runs",
    "crawler",
    "squall_pages_per_s",
    "squall_ratio_to_bound",
    "squall_cpu_s_per_1k_pages",
    "squall_records_per_page",
    "scrapy_pages_per_s",
    "scrapy_cpu_s_per_1k_pages",
    "pages_per_s_ratio",
    "cpu_per_page_ratio",
)


def history_rows(meta: Meta, rows: Sequence[Row]) -> list[dict[str, str]]:
    """One :data:`HISTORY_FIELDS` row per squall crawler of ``rows``: the medians of its runs ("" = unknown)."""
    summaries = {label: summarize(rs) for label, rs in by_crawler(rows).items()}
    theirs = summaries.get("scrapy", {})
    ratios = {c.squall: c for c in compare(summaries)}

    def med(s: Mapping[str, Spread | None], name: str, spec: str) -> str:
        v = s.get(name)
        return _csv(None if v is None else v.median, spec)

    out = []
    for label, s in summaries.items():
        if not label.startswith("squall"):
            continue
        c = ratios.get(label)
        out.append(
            {
                "commit": meta.commit,
                "date": meta.date,
                "machine": meta.machine,
                "load_1m": f"{meta.load[0]:.2f}",
                "python": meta.python,
                "scrapy": meta.scrapy or "",
                "profile": meta.profile,
                "farm": meta.farm,
                "runs": str(meta.runs),
                "crawler": label,
                "squall_pages_per_s": med(s, "pages/s", ".2f"),
                "squall_ratio_to_bound": med(s, "ratio", ".3f"),
                "squall_cpu_s_per_1k_pages": med(s, "cpu/1k", ".2f"),
                "squall_records_per_page": med(s, "rec/page", ".2f"),
                "scrapy_pages_per_s": med(theirs, "pages/s", ".2f"),
                "scrapy_cpu_s_per_1k_pages": med(theirs, "cpu/1k", ".2f"),
                "pages_per_s_ratio": _csv(c.pages_per_s if c else None, ".3f"),
                "cpu_per_page_ratio": _csv(c.cpu_per_page if c else None, ".3f"),
            }
        )
    return out


def append_history(path: Path, rows: Sequence[Mapping[str, str]]) -> None:
    """Append ``rows`` to the CSV file ``path``, writing the header first if the file is new or empty.

    Raises:
        ValueError: the file's header is not :data:`HISTORY_FIELDS` (rows would land in the wrong columns).
    """
    fresh = not path.exists() or path.stat().st_size == 0
    if not fresh:
        with path.open(newline="", encoding="utf-8") as f:
            header = next(csv.reader(f), [])
        if tuple(header) != HISTORY_FIELDS:
            raise ValueError(f"{path}: its header {header} is not {list(HISTORY_FIELDS)}")
    with path.open("a", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=HISTORY_FIELDS)
        if fresh:
            writer.writeheader()
        writer.writerows(rows)


def report_data(meta: Meta, rows: Sequence[Row], args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything the report says, as JSON-ready data (NaN as None): ``--json``'s content, read back by ``--report``."""
    groups = by_crawler(rows)
    summaries = {label: summarize(rs) for label, rs in groups.items()}
    data = {
        "meta": asdict(meta),
        "args": dict(args or {}),
        "rows": [r.to_json() for r in rows],
        "summary": {k: {f: None if s is None else asdict(s) for f, s in v.items()} for k, v in summaries.items()},
        "records_per_page": {k: {t: asdict(s) for t, s in topic_spreads(rs).items()} for k, rs in groups.items()},
        "ratios": [asdict(c) for c in compare(summaries)],
        "history": history_rows(meta, rows),
    }
    return finite(data)


def from_report_data(data: Mapping[str, Any]) -> tuple[Meta, list[Row]]:
    """The :class:`Meta` and rows of :func:`report_data`'s output (derived figures are computed again)."""
    meta = dict(data["meta"])
    meta["load"] = tuple(meta["load"])
    meta["notes"] = tuple(meta.get("notes") or ())
    names = set(Row.__dataclass_fields__)
    nan_if_none = ("min_gap_s", "p1_gap_s")  # NaN became null in JSON
    rows = []
    for r in data["rows"]:
        kw: dict[str, Any] = {k: v for k, v in r.items() if k in names}
        kw.update({k: float("nan") for k in nan_if_none if kw.get(k) is None})
        rows.append(Row(**kw))
    return Meta(**meta), rows


# ---------------------------------------------------------------------- the run set


def git_revision(root: Path = REPO) -> str:
    """Short hash of HEAD, ``-dirty`` if a tracked file other than the history file differs; "unknown" outside git."""
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        if head.returncode != 0:
            return "unknown"
        status = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "status",
                "--porcelain",
                "--untracked-files=no",
                "--",
                ".",
                f":(exclude){HISTORY_FILE}",
            ],
            capture_output=True,
            text=True,
        )
    except OSError:
        return "unknown"
    return head.stdout.strip() + ("-dirty" if status.stdout.strip() else "")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def farm_name(args: argparse.Namespace) -> str:
    return (
        f"{args.hosts}x{args.pages} d={args.delay:g}s w={args.workers} links={args.links} offsite={args.offsite}"
        + (f" partitions={args.partitions}" if args.partitions else "")
        + "".join(f" {item}" for item in args.set or [])
    )


def squall_variants(warc: list[str], documents: str) -> list[tuple[str, bool]]:
    """Each squall crawl of a run as (WARC ``on``/``off``, documents on): every WARC variant with ``--documents`` off, on or both."""
    return [(w, d) for w in warc for d in {"off": [False], "on": [True], "both": [False, True]}[documents]]


def warc_variants(choice: str, switch_known: bool) -> tuple[list[str], tuple[str, ...]]:
    """The squall variants (``on``, ``off``) for ``--warc choice`` and the notes for the report.

    Without the switch (``warc.enabled`` unknown to this squall) ``both`` is ``on`` with a note.
    """
    if choice == "both" and not switch_known:
        return ["on"], (f"WARC off: not run, this squall has no {WARC_SWITCH} key (config/crawler-default.yaml)",)
    return (["on", "off"] if choice == "both" else [choice]), ()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--hosts", type=int, default=50, help="simulated hosts (N)")
    p.add_argument("--pages", type=int, default=10, help="pages per host, / included (P)")
    p.add_argument("--delay", type=float, default=1.0, help="fetcher.server.delay and DOWNLOAD_DELAY, seconds (D)")
    p.add_argument("--workers", type=int, default=1, help="squall worker processes (W)")
    p.add_argument("--links", type=int, default=3, help="same-host links per page (besides one cross-host link)")
    p.add_argument("--offsite", type=int, default=0, help="links per page to unseeded (out-of-scope) hosts")
    p.add_argument("--peer", choices=["scrapy"], default=None, help="also crawl the same farm with Scrapy")
    p.add_argument("--runs", type=int, default=3, help="runs of each crawler (R); the table shows min / median / max")
    p.add_argument(
        "--warc",
        choices=["on", "off", "both"],
        default="on",
        help=f"squall with its WARC archive on (as configured), off ({WARC_SWITCH}: false) or a row of each",
    )
    p.add_argument(
        "--documents",
        nargs="?",
        const="on",
        choices=["on", "off", "both"],
        default="off",
        help=f"squall with its documents topic on ({DOCUMENTS_SWITCH}: true; --documents alone), off or a row of each",
    )
    p.add_argument("--partitions", type=int, default=0, help="topology.partitions (0: the default)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="another squall configuration key")
    p.add_argument("--bootstrap", default=None, help="an existing broker (default: start one on --broker-port)")
    p.add_argument("--broker-port", type=int, default=19192, help="port of the broker started by the benchmark")
    p.add_argument("--timeout", type=float, default=0.0, help="seconds per crawl (0: 3 × P × D + 120)")
    p.add_argument("--name", default=None, help="the profile's name in the report and history (default: the farm)")
    p.add_argument("--json", metavar="FILE", default=None, help="write the report's data to FILE as JSON")
    p.add_argument(
        "--history", metavar="FILE", default=None, help=f"append the medians to the CSV FILE ({HISTORY_FILE})"
    )
    p.add_argument("--markdown", action="store_true", help="print the report as Markdown (tables and bullet lists)")
    p.add_argument(
        "--report",
        metavar="FILE",
        default=None,
        help="crawl nothing: print the report of an earlier run from its --json FILE (with --markdown: for the docs)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        default=None,
        help="py-spy record the first squall worker into FILE (collapsed stacks; pip install py-spy)",
    )
    p.add_argument("--keep", action="store_true", help="keep the work directory (worker logs, configs)")
    args = p.parse_args(argv)
    if args.hosts < 1 or args.hosts > 250 * 250 or args.pages < 1 or args.delay <= 0 or args.workers < 1:
        p.error("need 1 <= --hosts <= 62500, --pages >= 1, --delay > 0, --workers >= 1")
    if args.runs < 1 or args.runs * 3 > 254:
        p.error("need 1 <= --runs <= 84 (one block of 127.b.*.* addresses per crawl)")
    if args.warc == "off" and WARC_SWITCH not in FIELD_OF:
        p.error(f"--warc off: this squall has no {WARC_SWITCH} key in config/crawler-default.yaml")
    return args


def progress(line: str) -> None:
    print(f"# {line}", file=sys.stderr, flush=True)


def _exit_on_sigterm(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)  # the finally blocks stop the workers, the server and our broker


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        print("\n".join(report_lines(*from_report_data(json.loads(Path(args.report).read_text())), args.markdown)))
        return 0
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from squall.tools import kafka_local

    load = os.getloadavg()  # before the broker and the crawls add theirs
    date = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    variants, notes = warc_variants(args.warc, WARC_SWITCH in FIELD_OF)
    py = None
    if args.peer == "scrapy":
        try:
            py = scrapy_python()
        except (OSError, subprocess.CalledProcessError) as exc:  # e.g. no route to PyPI: squall's rows alone
            notes = (*notes, f"Scrapy: not run, its install in {SCRAPY_VENV} failed ({exc})")
            progress(notes[-1])
    meta = Meta(
        commit=git_revision(),
        date=date,
        cpu_model=cpu_model(),
        cores=os.cpu_count() or 0,
        load=(load[0], load[1], load[2]),
        python=platform.python_version(),
        profile=args.name or farm_name(args),
        farm=farm_name(args),
        runs=args.runs,
        bound_pps=args.hosts / args.delay,
        scrapy=scrapy_version(py) if py else None,
        notes=notes,
    )
    progress(header_lines(meta)[0])  # the whole header comes with the report
    for note in meta.notes:
        progress(note)
    crawlers: list[tuple[str, tuple[str, bool]]] = [("squall", v) for v in squall_variants(variants, args.documents)]
    crawlers += [("scrapy", ("", False))] if py else []
    bootstrap = args.bootstrap or f"127.0.0.1:{args.broker_port}"
    started = False if args.bootstrap else kafka_local.up(bootstrap, fresh=True, progress=progress)
    work = Path(tempfile.mkdtemp(prefix="squall-bench-"))
    # one block of 127.b.*.* addresses per crawl, so that no crawler sees another's requests or caches
    ips = {i: host_ips(args.hosts, 1 + i) for i in range(args.runs * len(crawlers))}
    spec = SiteSpec(hosts={})
    for block in ips.values():
        spec.hosts.update(farm(block, args.pages, args.links, args.offsite).hosts)
    served = ServedSite(spec, None)
    available = args.hosts * args.pages
    rows: list[Row] = []
    failed: list[str] = []
    try:
        for run in range(args.runs):
            turn = run % len(crawlers)  # the order rotates from run to run
            for k, (crawler, (warc, documents)) in enumerate(crawlers[turn:] + crawlers[:turn]):
                block = ips[run * len(crawlers) + k]
                name = squall_label(args.workers, warc, documents) if crawler == "squall" else crawler
                wd = (
                    work / f"run{run + 1}-{crawler}{'-warc-' + warc if warc else ''}{'-documents' if documents else ''}"
                )
                try:
                    if crawler == "squall":
                        row = run_squall(bootstrap, served, block, args, wd, available, warc, run + 1, documents)
                    else:
                        assert py is not None
                        row = run_scrapy(py, served, block, args, wd, available, run + 1)
                except Exception as exc:  # one failed crawl is reported; the others go on
                    failed.append(f"run {run + 1} {name}: {type(exc).__name__}: {exc}")
                    progress(f"run {run + 1} {name}: FAILED: {type(exc).__name__}: {exc}")
                    continue
                rows.append(row)
                progress(f"run {run + 1} {name}: {row.pages} pages, {row.pps:.1f} pages/s")
    finally:
        served.close()
        if started:
            kafka_local.down(bootstrap, wipe=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            progress(f"work directory kept: {work}")
    if failed:
        meta = Meta(**{**asdict(meta), "notes": (*meta.notes, *(f"FAILED: {f}" for f in failed))})
    print("\n".join(report_lines(meta, rows, args.markdown)), flush=True)
    if args.json:
        data = report_data(meta, rows, vars(args))
        Path(args.json).write_text(json.dumps(data, indent=2, allow_nan=False, default=str) + "\n")
        progress(f"wrote {args.json}")
    if args.history:
        if failed:
            progress(f"{args.history}: not appended ({len(failed)} crawl(s) failed: the medians would not compare)")
        else:
            append_history(Path(args.history), history_rows(meta, rows))
            progress(f"appended to {args.history}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
