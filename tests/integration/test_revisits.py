"""Revisits through the real broker: an unchanged page is archived as a revisit and waits longer; a changed one not."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

from warcio.archiveiterator import ArchiveIterator

from squall.settings import ROOT
from squall.tools.site_spec import HostSpec, Page, SiteSpec

HOST = "127.0.0.2"
MINUTE = 60.0
DEFAULT_MIN = 0.05  # fetchInterval.default: 3 s
MIN_MIN = 0.02  # scheduler.adaptive.fetchInterval.min: 1.2 s


def revisit_site() -> SiteSpec:
    versions = itertools.count()

    def changing(_request) -> Page:
        return Page(body=f"<html><head><title>news</title></head><body><p>edition {next(versions)}</p></body></html>")

    pages = {
        "/": Page(title="index", links=("/same", "/changing")),
        "/same": Page(body="<html><head><title>same</title></head><body><p>never changes</p></body></html>"),
        "/changing": changing,
    }
    return SiteSpec(hosts={HOST: HostSpec(pages=pages)})


def warc_records(paths: list[Path]) -> list[tuple[str, str, dict[str, str]]]:
    """(WARC-Type, target URI, WARC headers) of every response and revisit record, in file order."""
    out = []
    for path in sorted(paths):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                if rec.rec_type in ("response", "revisit"):
                    out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI"),
                                dict(rec.rec_headers.headers)))
    return out


def test_an_unchanged_page_is_a_revisit_with_a_longer_interval_and_a_changed_one_a_full_record_with_a_shorter(
    site, crawl
):
    served = site(revisit_site())
    c = crawl(**{
        "fetcher.server.delay": 0.2,
        "fetchInterval.default": DEFAULT_MIN,
        "scheduler.adaptive.enabled": True,
        "scheduler.adaptive.fetchInterval.min": MIN_MIN,
        "scheduler.adaptive.fetchInterval.max": 1.0,
    })
    c.start_worker()
    c.seed(served.seeds)
    base = served.seeds[0].rstrip("/")
    same, changing = f"{base}/same", f"{base}/changing"
    deadline = time.monotonic() + 180
    records = {}
    while time.monotonic() < deadline:
        records = c.records()
        if all(records.get(u, {}).get("attempts", 0) >= 2 for u in (same, changing)):
            break
        time.sleep(2)
    c.stop()
    assert records[same]["attempts"] >= 2 and records[changing]["attempts"] >= 2, records

    default_s = DEFAULT_MIN * MINUTE
    # unchanged: the interval grew past the default; changed: it shrank below it, not below the minimum
    assert records[same]["interval_reason"] == "unchanged"
    assert records[same]["fetch_interval_s"] > default_s
    assert records[changing]["interval_reason"] == "changed"
    assert MIN_MIN * MINUTE <= records[changing]["fetch_interval_s"] < default_s

    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}  # the config file names the broker
    shown = subprocess.run([sys.executable, "-m", "squall.cli.main", "--conf", str(c.conf_path), "url", "show", same],
                           capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)
    assert shown.returncode == 0, shown.stderr
    assert "interval reason: unchanged" in shown.stdout and "revisit interval (s): " in shown.stdout

    recs = warc_records(c.warc_files())
    kinds = {u: [k for k, target, _ in recs if target == u] for u in (same, changing)}
    assert kinds[same][0] == "response" and set(kinds[same][1:]) == {"revisit"}, kinds[same]
    assert set(kinds[changing]) == {"response"} and len(kinds[changing]) >= 2, kinds[changing]
    revisits = 0
    for kind, target, headers in recs:  # the index page is unchanged too: its revisits are checked alike
        if kind == "revisit":
            revisits += 1
            full = next(h for k, t, h in recs if t == target and k == "response")  # its first, full record
            assert headers["WARC-Profile"] == "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
            assert headers["WARC-Refers-To-Target-URI"] == target
            assert headers["WARC-Refers-To-Date"] == full["WARC-Date"]
            assert headers["WARC-Payload-Digest"] == full["WARC-Payload-Digest"]
    assert revisits >= len(kinds[same]) - 1 >= 1
    index = subprocess.run([str(Path(sys.executable).parent / "warcio"), "index", *map(str, c.warc_files())],
                           capture_output=True, text=True, check=True).stdout
    assert index.count('"warc-type": "revisit"') == revisits
