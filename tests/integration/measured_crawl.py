"""Crawls run to the end on a recording site and measured there: request gaps, final records, the crawler's own audit.

Shared by the politeness, pace, operator-command and queued-scope tests: ``_run`` serves a
:class:`squall.tools.site_spec.SiteSpec`, runs one worker until a condition on the
records holds and the crawl is idle, and yields a :class:`Finished` crawl to measure.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from squall.tools.harness import Crawl
from squall.tools.site_spec import Page, SiteSpec

from .conftest import BASE_OVERRIDES, ServedSite

FINISH_TIMEOUT_S = 300.0


def _index(*links: str, title: str = "index") -> Page:
    return Page(title=title, links=links)


def _pages(*paths: str) -> dict[str, Page]:
    return {p: Page(title=p) for p in paths}


@dataclass
class Finished:
    served: ServedSite
    crawl: Crawl
    records: dict[str, dict[str, Any]]

    def url(self, ip: str, path: str = "/") -> str:
        return self.served.url(ip, path)

    def paths(self, ip: str) -> list[str]:
        """Paths requested on host ``ip``, in arrival order (robots.txt included)."""
        return [r["path"] for r in self.served.requests() if r["ip"] == ip]

    def times(self, ip: str, path: str | None = None, *, pages_only: bool = False) -> list[float]:
        return sorted(
            r["t"]
            for r in self.served.requests()
            if r["ip"] == ip
            and (path is None or r["path"] == path)
            and not (pages_only and r["path"].startswith("/robots"))
        )

    def describe(self, ip: str) -> list[tuple[str, float, Any]]:
        """(path, arrival, status) of every request to ``ip``, arrival relative to the first: for messages."""
        reqs = [r for r in self.served.requests() if r["ip"] == ip]
        t0 = reqs[0]["t"] if reqs else 0.0
        return [(r["path"], round(r["t"] - t0, 3), r["status"]) for r in reqs]


def _gaps(times: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(times)]


def _run(
    tmp_path_factory: pytest.TempPathFactory,
    bootstrap: str,
    name: str,
    spec: SiteSpec,
    overrides: dict[str, Any],
    finished: Callable[[ServedSite, dict[str, dict[str, Any]]], bool],
    extra_seeds: tuple[tuple[str, str], ...] = (),
) -> Iterator[Finished]:
    """Serve ``spec`` (seeds: each host's ``/`` and ``extra_seeds`` (ip, path)), run one worker with
    ``overrides``, wait until ``finished`` holds and the crawl is idle."""
    tmp = tmp_path_factory.mktemp(name)
    served = ServedSite(spec, Path(tmp) / "requests.jsonl")
    crawl = Crawl(Path(tmp) / "crawl", bootstrap, {**BASE_OVERRIDES, **overrides})
    try:
        crawl.start_worker()
        crawl.seed([*served.seeds, *(served.url(ip, path) for ip, path in extra_seeds)])
        # Crawl.wait_idle alone is not enough: a URL rescheduled into the future (Retry-After, robots
        # retry) is neither due nor in flight, so the crawl may look idle before that URL's retry.
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        while True:
            crawl.wait_idle(timeout_s=max(1.0, deadline - time.monotonic()))
            records = crawl.records()
            if finished(served, records):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"crawl {name} did not finish: {json.dumps(records, indent=1)[:4000]}")
            time.sleep(1.0)
        yield Finished(served, crawl, crawl.records())
    finally:
        crawl.stop()
        served.close()


def _status_is(expected: dict[str, str]) -> Callable[[ServedSite, dict[str, dict[str, Any]]], bool]:
    def check(_served: ServedSite, records: dict[str, dict[str, Any]]) -> bool:
        return all(records.get(u, {}).get("status") == s for u, s in expected.items())

    return check


AUDIT_TOLERANCE_S = 0.01  # audit.tolerance.secs (default)


def assert_audit_agrees_with_the_server(
    crawl: Crawl, served: ServedSite, floors: dict[str, float], default_floor_s: float
) -> None:
    """The crawler's own audit (``squall audit``) and the recording server: same requests, no violation."""
    audit = crawl.audit()
    by_host = {h["key"]: h for h in audit["by_host"]}
    ips = {r["ip"] for r in served.requests()}
    assert set(by_host) == ips, (sorted(by_host), sorted(ips))
    for ip in sorted(ips):
        host, times, floor = by_host[ip], served.start_times(ip), floors.get(ip, default_floor_s)
        # every request the server received was audited, and only those
        assert host["requests"] == len(times), (host, times)
        # both measure the same requests: the same violations (robots.txt redirect hops included), and none
        server = sum(1 for gap in _gaps(times) if gap < floor - AUDIT_TOLERANCE_S)
        assert host["violations"] == server == 0, (host, times)
        assert host["min_gap_s"] is None or host["min_gap_s"] >= floor - AUDIT_TOLERANCE_S, host
    assert audit["violations"] == 0 and audit["inside_block"] == 0
