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
appends one CSV row per squall variant of the run set (:data:`crawl_history.HISTORY_FIELDS`:
the medians); ``--markdown`` prints the report as Markdown.

The parts, one module each beside this one (this one is the command line
and the run set): :mod:`crawl_farm` (the farm), :mod:`crawl_squall` and
:mod:`crawl_scrapy` (one crawl by each crawler), :mod:`crawl_sampling` (CPU
time and end offsets sampled during a squall crawl), :mod:`crawl_measures`
(the figures of one crawl, its row), :mod:`crawl_summary` (min / median /
max over the runs, the ratios, records per page), :mod:`crawl_history` (what
a run set ran on, the history rows) and :mod:`crawl_report` (the report in
text, Markdown and JSON). They are imported as ``benchmarks.crawl_*`` with
the repository's root on ``sys.path``, as this file puts it.

A benchmark, not a test: it asserts nothing (STYLE.md). Each crawl is bounded
by ``--timeout`` (default: 3 × the shortest possible crawl + 120 s); a crawl
that fails is reported and the others go on (exit status 1). Run::

    .venv/bin/python benchmarks/crawl.py --hosts 50 --pages 10 --delay 1 --workers 1 [--peer scrapy] [--runs 3]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.crawl_farm import farm, host_ips
from benchmarks.crawl_history import Meta, append_history, history_rows
from benchmarks.crawl_measures import Row
from benchmarks.crawl_report import from_report_data, header_lines, report_data, report_lines
from benchmarks.crawl_scrapy import SCRAPY_VENV, run_scrapy, scrapy_python, scrapy_version
from benchmarks.crawl_squall import DOCUMENTS_SWITCH, WARC_SWITCH, run_squall, squall_label
from squall.settings import FIELD_OF
from squall.tools.site_spec import SiteSpec
from tests.integration.conftest import ServedSite  # the integration tests' threaded server

REPO = Path(__file__).resolve().parent.parent
HISTORY_FILE = "benchmarks/history.csv"  # its own rows do not make the tree dirty (git_revision)


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
        help="crawl nothing: print the report of an earlier run from its --json FILE (with --markdown: for the docs; "
        "with --history: append its rows)",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        default=None,
        help="py-spy record the first squall worker into FILE (collapsed stacks; py-spy comes with make venv)",
    )
    p.add_argument(
        "--profile-gil",
        action="store_true",
        help="with --profile: sample only the thread holding the GIL (py-spy --gil), so waits for the lock are not counted",
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
        kept = from_report_data(json.loads(Path(args.report).read_text()))
        print("\n".join(report_lines(*kept, args.markdown)))
        if args.history:  # a run kept as JSON, appended to the history afterwards
            append_history(Path(args.history), history_rows(*kept))
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
