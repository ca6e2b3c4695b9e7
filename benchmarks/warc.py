"""Micro-benchmark of the archive step: CPU microseconds per fetch written to a gzip WARC file.

Times :meth:`squall.net.warc.WarcWriter.write_fetch` (a ``response`` and a
``request`` record, each its own gzip member, flushed to the operating
system after every fetch, as the fetcher writes them) on English HTML pages
of a few sizes, and, for scale, warcio's ``WARCWriter`` writing the same two
records into a gzip file with the same flush (warcio is what squall reads
WARC files with; it wrote them before FastWARC did). CPU time of this
process (``time.process_time``), the median of ``--rounds`` rounds of
``--fetches`` fetches; the files go to a temporary directory and are removed.
A benchmark: nothing asserted. Run::

    .venv/bin/python benchmarks/warc.py [--fetches 2000] [--rounds 5] [--sizes 2000,12000,60000]
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.documents import cpu_ms_per_page, page_html

URL = "http://127.0.0.2:8080/lighthouse"
REQUEST_HEADERS = [("User-Agent", "squall/0.1"), ("Accept", "*/*"), ("Accept-Encoding", "gzip, deflate, br")]


def response_headers(body: bytes) -> list[tuple[str, str]]:
    return [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Content-Length", str(len(body))),
        ("Date", "Sat, 05 Dec 2026 17:00:00 GMT"),
        ("Server", "bench"),
    ]


def squall_writer(directory: Path, body: bytes) -> Callable[[], object]:
    """One fetch written by squall's writer (its payload digest given, as the fetcher gives it)."""
    from squall.net.warc import WarcWriter, payload_digest

    writer = WarcWriter(directory, "squall", 0)
    digest, headers = payload_digest(body), response_headers(body)

    def step() -> object:
        return writer.write_fetch(
            URL,
            request_headers=REQUEST_HEADERS,
            status=200,
            reason="OK",
            response_headers=headers,
            body=body,
            ip="127.0.0.2",
            fetched_at_s=1_765_000_000.25,
            truncated=False,
            payload_digest=digest,
        )

    return step


def warcio_writer(directory: Path, body: bytes) -> Callable[[], object]:
    """The same two records written by warcio's ``WARCWriter(gzip=True)``, flushed after each fetch."""
    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    out = open(directory / "warcio.warc.gz", "wb")  # noqa: SIM115  # open for the benchmark's length
    writer = WARCWriter(out, gzip=True, warc_version="1.1")
    headers = response_headers(body)

    def step() -> object:
        req_id, resp_id = writer._make_warc_id(), writer._make_warc_id()
        date = "2025-12-06T05:46:40.250000Z"
        http = StatusAndHeaders("200 OK", headers, protocol="HTTP/1.1")
        response = writer.create_warc_record(
            URL,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            warc_headers_dict={"WARC-Record-ID": resp_id, "WARC-Date": date, "WARC-Concurrent-To": req_id},
            http_headers=http,
        )
        request = writer.create_warc_record(
            URL,
            "request",
            payload=io.BytesIO(b""),
            length=0,
            warc_headers_dict={"WARC-Record-ID": req_id, "WARC-Date": date, "WARC-Concurrent-To": resp_id},
            http_headers=StatusAndHeaders("/lighthouse HTTP/1.1", REQUEST_HEADERS, protocol="GET"),
        )
        writer.write_record(response)
        writer.write_record(request)
        out.flush()
        return out

    return step


def commit(root: Path | None = None) -> str:
    """The short commit of checkout ``root`` (default: this one; ``-dirty`` with uncommitted changes), or ``?`` outside git."""
    root = root or Path(__file__).resolve().parent.parent
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True)
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "squall"], cwd=root, capture_output=True, text=True
        )
    except OSError:
        return "?"
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "") if rev.returncode == 0 else "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--fetches", type=int, default=2000, help="fetches per round")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sizes", default="2000,12000,60000", help="page sizes in bytes, comma-separated")
    args = p.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]

    print(
        f"WARC micro-benchmark: commit {commit()}; {args.rounds} rounds x {args.fetches} fetches; "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    print("page B  squall us/fetch  warcio us/fetch  squall / warcio")
    print("------  ---------------  ---------------  ---------------")
    for size in sizes:
        body = page_html(size)
        with tempfile.TemporaryDirectory(prefix="squall-warc-bench-") as tmp:
            ours = cpu_ms_per_page(squall_writer(Path(tmp), body), args.fetches, args.rounds) * 1000.0
            theirs = cpu_ms_per_page(warcio_writer(Path(tmp), body), args.fetches, args.rounds) * 1000.0
        print(f"{len(body):>6}  {ours:15.1f}  {theirs:15.1f}  {ours / theirs:15.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
