"""Two checkouts of squall crawled at the same time, run by run: CPU per page of each pair and their ratio.

One crawl after another, the same commit's CPU per 1 000 pages moves by
±25 % on a shared machine within minutes (docs/benchmarks.md), more than a
lever of 5–10 % changes it. Crawled at the same time, two checkouts meet
the same slow and fast spells: ``benchmarks/crawl.py`` runs in each checkout
at once (each with its own broker, ``--broker-port`` and that port + 10, and
its own farm; the second starts 2 s after the first), with the same farm
arguments, and the report pairs their runs in order. The two crawls share
the machine's cores, so their pages/s is below a lone crawl's; CPU per page
is what the pairs compare. Which checkout starts first matters a little
(the second's start meets the first's steady state): run it both ways
(``--swap`` starts the ``--after`` checkout first; the report's labels and
ratios stay after / before).

Each checkout needs only its tree: the crawl runs with this interpreter and
``PYTHONPATH`` set to the checkout, so a ``git worktree add DIR REV`` of an
earlier commit is enough. Run::

    .venv/bin/python benchmarks/pair.py --before DIR --after . [--swap] [--json-prefix P] -- --hosts 200 --pages 20 --delay 1 --runs 3

or report two earlier ``--json`` files of ``benchmarks/crawl.py``::

    .venv/bin/python benchmarks/pair.py --report BEFORE.json AFTER.json

A benchmark: nothing asserted; exit status 1 if a crawl failed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

Run = dict[str, Any]  # one row of crawl.py's --json "rows"


def cpu_per_1k(row: Run) -> float:
    """CPU-s per 1 000 pages of one crawl (``cpu_s`` over ``pages``)."""
    return row["cpu_s"] / row["pages"] * 1000.0 if row.get("pages") else float("nan")


def pair_lines(before: list[Run], after: list[Run], names: tuple[str, str] = ("before", "after")) -> list[str]:
    """The report: one line per pair of runs (same crawler label, same run), then the mean and median of after / before.

    Raises ``ValueError`` when the two lists do not hold the same crawlers and runs.
    """
    lines = [
        f"run  {names[0]} cpu/1k  pages/s  {names[1]} cpu/1k  pages/s  {names[1]} / {names[0]}",
        "---  "
        + "-" * (len(names[0]) + 7)
        + "  -------  "
        + "-" * (len(names[1]) + 7)
        + "  -------  "
        + "-" * (len(names[0]) + len(names[1]) + 3),
    ]
    ratios = []
    for b, a in zip(before, after, strict=True):
        if (b["crawler"], b["run"]) != (a["crawler"], a["run"]):
            raise ValueError(f"run {b['run']} of {b['crawler']!r} paired with run {a['run']} of {a['crawler']!r}")
        ratio = cpu_per_1k(a) / cpu_per_1k(b)
        ratios.append(ratio)
        lines.append(
            f"{b['run']:>3}  {cpu_per_1k(b):>{len(names[0]) + 7}.3f}  {b['pps']:>7.1f}  "
            f"{cpu_per_1k(a):>{len(names[1]) + 7}.3f}  {a['pps']:>7.1f}  {ratio:>{len(names[0]) + len(names[1]) + 3}.3f}"
        )
    if ratios:
        lines.append(
            f"{names[1]} / {names[0]}, CPU per page, {len(ratios)} pair(s): mean {statistics.fmean(ratios):.3f}, "
            f"median {statistics.median(ratios):.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"
        )
    return lines


def _rows(path: Path) -> list[Run]:
    """The squall crawls of a ``--json`` file, by crawler (label) and run."""
    rows = [row for row in json.loads(path.read_text())["rows"] if row["crawler"] != "scrapy"]
    return sorted(rows, key=lambda row: (row["crawler"], row["run"]))


def _commit(path: Path) -> str:
    """The commit a ``--json`` file's crawls ran (its header's), or ``?``."""
    return str(json.loads(path.read_text()).get("meta", {}).get("commit", "?"))


def _crawl(checkout: Path, port: int, crawl_args: list[str], out: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    cmd = [sys.executable, str(checkout / "benchmarks" / "crawl.py"), *crawl_args, "--broker-port", str(port)]
    with open(out.with_suffix(".log"), "wb") as log:
        return subprocess.Popen([*cmd, "--json", str(out)], cwd=checkout, env=env, stdout=log, stderr=subprocess.STDOUT)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--before", type=Path, help="the checkout crawled first (e.g. a git worktree of an earlier commit)")
    p.add_argument("--after", type=Path, help="the checkout crawled 2 s later (with --swap: 2 s earlier)")
    p.add_argument("--swap", action="store_true", help="start the --after checkout first (the labels stay)")
    p.add_argument(
        "--broker-port",
        type=int,
        default=19982,
        help="the first crawl's broker port (default 19982); the second's is this + 10",
    )
    p.add_argument(
        "--json-prefix",
        help="the two crawls' --json files (and logs): PREFIX-before.json, PREFIX-after.json (default: a new temporary directory; printed either way)",
    )
    p.add_argument(
        "--report",
        nargs=2,
        type=Path,
        metavar=("BEFORE.json", "AFTER.json"),
        help="crawl nothing: report two earlier --json files of crawl.py (or of pair.py's --json-prefix)",
    )
    p.add_argument("crawl_args", nargs="*", help="after --: benchmarks/crawl.py's farm arguments (no --json, --peer)")
    args = p.parse_args(argv)
    if args.report:
        before, after = args.report
        print(f"pair: before = {before} ({_commit(before)}), after = {after} ({_commit(after)})")
        print("\n".join(pair_lines(_rows(before), _rows(after))))
        return 0
    if not (args.before and args.after):
        p.error("need --before and --after (or --report)")
    prefix = (
        Path(args.json_prefix).resolve() if args.json_prefix else Path(tempfile.mkdtemp(prefix="squall-pair-")) / "pair"
    )
    print(f"pair: the crawls' reports and logs: {prefix}-before.json, {prefix}-after.json (.log)", flush=True)
    outs = {name: Path(f"{prefix}-{name}.json") for name in ("before", "after")}
    order = ["after", "before"] if args.swap else ["before", "after"]
    procs = {}
    for k, name in enumerate(order):
        if k:
            time.sleep(2)
        procs[name] = _crawl(getattr(args, name).resolve(), args.broker_port + 10 * k, args.crawl_args, outs[name])
    failed = [name for name in order if procs[name].wait() != 0]
    for name in failed:
        print(f"pair: the {name} crawl failed; its log: {outs[name].with_suffix('.log')}", file=sys.stderr)
    if failed:
        return 1
    print(
        f"pair: before = {args.before} ({_commit(outs['before'])}), after = {args.after} ({_commit(outs['after'])}), "
        f"{order[0]} started first; crawl.py {' '.join(args.crawl_args)}"
    )
    print("\n".join(pair_lines(_rows(outs["before"]), _rows(outs["after"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
