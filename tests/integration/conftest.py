"""Fixtures of the integration suite: a recording loopback site and real squall workers.

``site(spec)`` serves a :class:`squall.testsite.SiteSpec` from a background
thread (its own event loop) and records every request at arrival;
``crawl(**overrides)`` makes a :class:`squall.harness.Crawl` with its own
topology id on the test broker and stops its workers afterwards.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.harness import Crawl
from squall.testsite import RecordingServer, SiteSpec

# Keys every integration crawl needs: loopback sites must be allowed (SSRF guard) and
# the tick a bit slower than the default to spare the two CPUs of CI.
BASE_OVERRIDES: dict[str, Any] = {
    "http.private.networks.allow": ["127.0.0.0/8"],
    "topology.partitions": 4,
    "http.timeout.total": 20.0,
}


class ServedSite:
    """A RecordingServer running in a thread; ``server`` exposes requests and expectations."""

    def __init__(self, spec: SiteSpec, log_path: Path) -> None:
        self.server = RecordingServer(spec, log_path=log_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    @property
    def seeds(self) -> list[str]:
        return self.server.seeds

    def url(self, ip: str, path: str = "/") -> str:
        return f"{self.server.base_url(ip)}{path}"

    def requests(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self.server.requests]

    def page_requests(self) -> collections.Counter[str]:
        """How many times each URL (robots.txt excluded) was requested."""
        port = self.server.port
        return collections.Counter(f"http://{r['ip']}:{port}{r['path']}" for r in self.requests()
                                   if r["path"] != "/robots.txt")

    def start_times(self, ip: str) -> list[float]:
        """Arrival times of every request to host ``ip`` (robots.txt included), sorted."""
        return sorted(r["t"] for r in self.server.requests_for(ip))

    def min_gap(self, ip: str) -> float:
        times = self.start_times(ip)
        return min((b - a for a, b in zip(times, times[1:])), default=float("inf"))


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Any]:
    served: list[ServedSite] = []

    def make(spec: SiteSpec) -> ServedSite:
        s = ServedSite(spec, tmp_path / f"requests-{len(served)}.jsonl")
        served.append(s)
        return s

    yield make
    for s in served:
        s.close()


@pytest.fixture
def crawl(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Any]:
    made: list[Crawl] = []

    def make(**overrides: Any) -> Crawl:
        values = dict(BASE_OVERRIDES)
        values.update(overrides)
        c = Crawl(tmp_path / f"crawl-{len(made)}", kafka_bootstrap, values)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop()
