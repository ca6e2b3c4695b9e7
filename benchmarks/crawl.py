"""End-to-end benchmark of a whole crawl through the real broker (issue 7 §6), optionally against Scrapy.

The farm: N simulated hosts (one loopback address each, ``127.1.x.y``, all on
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

What each row says (all from the recording server, except CPU and RSS):

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

``--peer scrapy`` also crawls the SAME farm (same server, same run, a fresh
host set so nothing is cached) with a generated Scrapy spider, installed
once in its own virtualenv (``~/.cache/squall/bench-scrapy``, ``pip install
scrapy``), with DOWNLOAD_DELAY = D, RANDOMIZE_DOWNLOAD_DELAY off,
ROBOTSTXT_OBEY, one request per domain at a time, AutoThrottle off and
CONCURRENT_REQUESTS = max(16, N); it then prints the ratio squall / Scrapy.

A benchmark, not a test: it asserts nothing (STYLE.md). Each run is bounded
by ``--timeout`` (default: 3 × the shortest possible crawl + 120 s). Run::

    .venv/bin/python benchmarks/crawl.py --hosts 50 --pages 10 --delay 1 --workers 1 [--peer scrapy] [--runs 1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from squall.tools.harness import Crawl  # noqa: E402
from squall.net.kafka_security import KafkaConnection  # noqa: E402
from squall.tools.kafka_admin import ensure_topics  # noqa: E402
from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec  # noqa: E402
from squall.policy.topics import all_topics  # noqa: E402
from tests.integration.conftest import ServedSite  # noqa: E402 (the integration tests' threaded server)

VIOLATION_SLACK_S = 0.010  # a gap shorter than delay - 10 ms is a violation (clock and scheduling noise below)
SCRAPY_VENV = Path(os.environ.get("SQUALL_CACHE", Path.home() / ".cache" / "squall")) / "bench-scrapy"
CLK_TCK = os.sysconf("SC_CLK_TCK")
CPU_SAMPLE_S = 0.25  # how often the workers' CPU time is sampled
CPU_TAIL_S = 1.0     # squall's CPU is counted until this long after the last request (its results are applied)


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
    return {(ip, path): len(page.links) for ip, host in spec.hosts.items()
            for path, page in host.pages.items() if isinstance(page, Page)}


# ---------------------------------------------------------------------- measures (pure)

@dataclass
class Row:
    """One crawler's run over one host set; see the module docstring for each column."""

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


def percentile(values: list[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank of ``values``; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(q * len(ordered))))]


def measure(requests: list[dict[str, Any]], ips: set[str], delay_s: float, pages_per_host: int,
            links_per_page: dict[tuple[str, str], int] | None = None) -> dict[str, Any]:
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
    gaps = [b - a for times in by_host.values() for a, b in zip(sorted(times), sorted(times)[1:])]
    counts = Counter((r["ip"], r["path"]) for r in mine)
    pages = sum(1 for (_, path) in counts if path != "/robots.txt")
    times = [r["t"] for r in mine]
    elapsed = max(times) - min(times) if times else 0.0
    shortest = pages_per_host * delay_s  # robots.txt, then the pages: pages_per_host gaps of delay_s
    return {
        "pages": pages, "elapsed_s": elapsed, "bound_pps": len(ips) * pages_per_host / shortest,
        "gaps": gaps, "min_gap_s": min(gaps, default=float("nan")), "p1_gap_s": percentile(gaps, 0.01),
        "violations": sum(1 for g in gaps if g < delay_s - VIOLATION_SLACK_S),
        "duplicates": sum(n - 1 for n in counts.values()),
        "links": sum((links_per_page or {}).get(k, 0) for k in counts),
    }


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (all threads) from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state is field 3 of the man page
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime: fields 14 and 15


def cpu_until(samples: list[tuple[float, float]], t_s: float) -> float:
    """CPU seconds used from the first sample to the first one at or after ``t_s`` (else the last).

    ``samples``: (Unix time, cumulated CPU seconds) in time order, the first
    taken when the crawler was ready.
    """
    if not samples:
        return float("nan")
    end = next((cpu for t, cpu in samples if t >= t_s), samples[-1][1])
    return end - samples[0][1]


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
            self._sample()

    def stop(self) -> list[tuple[float, float]]:
        self._done.set()
        self._thread.join(5)
        self._sample()
        return self._samples


def proc_peak_rss_mb(pid: int) -> float:
    """Peak resident set size (VmHWM) of process ``pid`` in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


# ---------------------------------------------------------------------- squall

def run_squall(bootstrap: str, served: ServedSite, ips: list[str], args: argparse.Namespace, workdir: Path,
               available: int) -> Row:
    overrides = {
        "http.private.networks.allow": ["127.0.0.0/8"],
        "fetcher.server.delay": args.delay,
        "http.timeout.total": 30.0,
    }
    if args.partitions:
        overrides["topology.partitions"] = args.partitions
    for item in args.set or []:
        key, _, value = item.partition("=")
        overrides[key] = json.loads(value) if value[:1] in "[{0123456789-tfn\"" else value
    crawl = Crawl(workdir, bootstrap, overrides)
    timeout = args.timeout or 3 * args.pages * args.delay + 120
    try:
        # topics first (as `squall seed` would): a worker that starts before them is not assigned them
        conn = KafkaConnection.from_settings(crawl.settings)  # the broker's TLS/SASL, as the workers use it
        asyncio.run(ensure_topics(conn, all_topics(crawl.settings), crawl.settings["topology.replication.factor"]))
        names = [f"w{i + 1}" for i in range(args.workers)]
        for name in names:
            crawl.start_worker(name)
        _wait_ready(crawl, names, workdir, 180)
        pids = [crawl.workers[n].pid for n in names]
        sampler = CpuSampler(pids)
        spy = _start_profile(args.profile, pids[0])
        t0 = time.time()
        crawl.seed([served.server.base_url(ip) + "/" for ip in ips])
        crawl.wait_idle(timeout_s=timeout)
        wall = time.time() - t0
        samples = sampler.stop()
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its file on SIGINT
            spy.wait(60)
        rss = max(proc_peak_rss_mb(pid) for pid in pids)
    finally:
        crawl.stop()
    m = measure(served.server.requests, set(ips), args.delay, args.pages, links_of(served.server.spec))
    last = max((r["t"] for r in served.server.requests if r["ip"] in set(ips)), default=time.time())
    cpu = cpu_until(samples, last + CPU_TAIL_S)
    return Row(f"squall ({args.workers} worker{'s' if args.workers > 1 else ''})", m["pages"], available,
               m["elapsed_s"], m["bound_pps"], m["min_gap_s"], m["p1_gap_s"], m["violations"], m["duplicates"],
               cpu, rss, wall, m["links"])


def _start_profile(path: str | None, pid: int) -> subprocess.Popen[bytes] | None:
    """``py-spy record`` of the first worker into ``path`` (collapsed stacks), or None without --profile."""
    if not path:
        return None
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    return subprocess.Popen([spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "200",
                             "--output", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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
    return subprocess.run([str(py), "-c", "import scrapy; print(scrapy.__version__)"], capture_output=True,
                          text=True, check=True).stdout.strip()


def run_scrapy(py: Path, served: ServedSite, ips: list[str], args: argparse.Namespace, workdir: Path,
               available: int) -> Row:
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = args.timeout or 3 * args.pages * args.delay + 120
    conf = {"seeds": [served.server.base_url(ip) + "/" for ip in ips], "delay": args.delay,
            "concurrent": max(16, len(ips)), "timeout": timeout, "out": str(workdir / "scrapy-stats.json")}
    (workdir / "conf.json").write_text(json.dumps(conf))
    spider = workdir / "farm_spider.py"
    spider.write_text(SPIDER.format(conf=str(workdir / "conf.json")))
    t0 = time.time()
    with open(workdir / "scrapy.log", "wb") as log:
        subprocess.run([str(py), "-m", "scrapy", "runspider", str(spider)], cwd=workdir, stdout=log,
                       stderr=subprocess.STDOUT, timeout=timeout + 60, check=False)
    wall = time.time() - t0
    stats = json.loads((workdir / "scrapy-stats.json").read_text()) if (workdir / "scrapy-stats.json").exists() else {}
    m = measure(served.server.requests, set(ips), args.delay, args.pages, links_of(served.server.spec))
    return Row("scrapy", m["pages"], available, m["elapsed_s"], m["bound_pps"], m["min_gap_s"], m["p1_gap_s"],
               m["violations"], m["duplicates"], stats.get("cpu_s"), stats.get("rss_mb"), wall, m["links"])


# ---------------------------------------------------------------------- table

COLUMNS = ("crawler", "pages", "s", "pages/s", "bound", "ratio", "min gap", "p1 gap", "viol", "dup",
           "cpu/1k", "links/cpu-s", "rss MB", "wall s")


def cells(row: Row) -> list[str]:
    def f(v: float | None, spec: str) -> str:
        return "-" if v is None else format(v, spec)
    return [row.crawler, f"{row.pages}/{row.available}", f(row.elapsed_s, ".1f"), f(row.pps, ".1f"),
            f(row.bound_pps, ".1f"), f(row.ratio, ".2f"), f(row.min_gap_s, ".3f"), f(row.p1_gap_s, ".3f"),
            str(row.violations), str(row.duplicates), f(row.cpu_per_1k, ".2f"), f(row.links_per_cpu_s, ",.0f"),
            f(row.rss_mb, ".0f"),
            f(row.wall_s, ".1f")]


def print_table(rows: list[Row]) -> None:
    table = [list(COLUMNS)] + [cells(r) for r in rows]
    widths = [max(len(r[i]) for r in table) for i in range(len(COLUMNS))]
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    for k, r in enumerate(table):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        if k == 0:
            print(sep)


def machine() -> str:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()
    return (f"{os.cpu_count()} CPUs ({model}), load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
            f"Python {platform.python_version()}")


# ---------------------------------------------------------------------- main

def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=50, help="simulated hosts (N)")
    p.add_argument("--pages", type=int, default=10, help="pages per host, / included (P)")
    p.add_argument("--delay", type=float, default=1.0, help="fetcher.server.delay and DOWNLOAD_DELAY, seconds (D)")
    p.add_argument("--workers", type=int, default=1, help="squall worker processes (W)")
    p.add_argument("--links", type=int, default=3, help="same-host links per page (besides one cross-host link)")
    p.add_argument("--offsite", type=int, default=0, help="links per page to unseeded (out-of-scope) hosts")
    p.add_argument("--peer", choices=["scrapy"], default=None, help="also crawl the same farm with Scrapy")
    p.add_argument("--runs", type=int, default=1, help="runs of each crawler")
    p.add_argument("--partitions", type=int, default=0, help="topology.partitions (0: the default)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="another squall configuration key")
    p.add_argument("--bootstrap", default=None, help="an existing broker (default: start one on --broker-port)")
    p.add_argument("--broker-port", type=int, default=19192, help="port of the broker started by the benchmark")
    p.add_argument("--timeout", type=float, default=0.0, help="seconds per crawl (0: 3 × P × D + 120)")
    p.add_argument("--profile", metavar="FILE", default=None,
                   help="py-spy record the first squall worker into FILE (collapsed stacks; pip install py-spy)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (worker logs, configs)")
    args = p.parse_args(argv)
    if args.hosts < 1 or args.hosts > 250 * 250 or args.pages < 1 or args.delay <= 0 or args.workers < 1:
        p.error("need 1 <= --hosts <= 62500, --pages >= 1, --delay > 0, --workers >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from squall.tools import kafka_local

    bootstrap = args.bootstrap or f"127.0.0.1:{args.broker_port}"
    started = False if args.bootstrap else kafka_local.up(bootstrap, fresh=True)
    work = Path(tempfile.mkdtemp(prefix="squall-bench-"))
    py = scrapy_python() if args.peer == "scrapy" else None
    crawlers = ["squall"] + (["scrapy"] if py else [])
    # one block of 127.x addresses per crawl, so that neither crawler sees the other's requests or caches
    n_blocks = args.runs * len(crawlers)
    ips = {i: host_ips(args.hosts, 1 + i) for i in range(n_blocks)}
    spec = SiteSpec(hosts={})
    for block in ips.values():
        spec.hosts.update(farm(block, args.pages, args.links, args.offsite).hosts)
    served = ServedSite(spec, None)
    available = args.hosts * args.pages
    print(f"# {args.hosts} hosts x {args.pages} pages, delay {args.delay} s, {args.workers} worker(s), "
          f"{args.links} same-host link(s) + {args.offsite} offsite per page; {machine()}", flush=True)
    if py:
        print(f"# peer: Scrapy {scrapy_version(py)}", flush=True)
    rows: list[Row] = []
    try:
        for run in range(args.runs):
            for k, crawler in enumerate(crawlers):
                block = ips[run * len(crawlers) + k]
                wd = work / f"run{run}-{crawler}"
                if crawler == "squall":
                    row = run_squall(bootstrap, served, block, args, wd, available)
                else:
                    assert py is not None
                    row = run_scrapy(py, served, block, args, wd, available)
                rows.append(row)
                print(f"# run {run + 1} {crawler}: {row.pages} pages, {row.pps:.1f} pages/s", flush=True)
    finally:
        served.close()
        if started:
            kafka_local.down(bootstrap, wipe=True)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"# work directory kept: {work}")
    print_table(rows)
    squall_rows = [r for r in rows if r.crawler.startswith("squall")]
    scrapy_rows = [r for r in rows if r.crawler == "scrapy"]
    if squall_rows and scrapy_rows:
        ours = statistics.median(r.pps for r in squall_rows)
        theirs = statistics.median(r.pps for r in scrapy_rows)
        print(f"\nsquall / scrapy pages/s (median of {args.runs} run(s)): {ours / theirs:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
