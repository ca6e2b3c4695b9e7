"""The demo's web site, served from a thread of the demo's process, and what it recorded.

A :class:`squall.tools.testsite.RecordingServer` (loopback addresses, one
port) on its own event loop, so the demo's main thread can run the crawl
synchronously while the site answers. Request times are the server's arrival
stamps (Unix seconds).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import threading
from pathlib import Path
from typing import Any

from squall.tools.site_spec import SiteSpec
from squall.tools.testsite import RecordingServer


class ServedSite:
    """A RecordingServer running on its own event loop in a daemon thread (as the integration tests do)."""

    def __init__(self, spec: SiteSpec, log_path: Path) -> None:
        self.server = RecordingServer(spec, log_path=log_path)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="demo-site", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self.server.start(), self._loop).result(30)
        except BaseException:
            self._stop_loop()
            raise

    def close(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self.server.close(), self._loop).result(30)
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def requests(self) -> list[dict[str, Any]]:
        # The list is appended to from the server thread; copying it is safe (list ops hold the GIL).
        return self.server.requests

    def page_requests(self) -> collections.Counter[str]:
        """How many times each URL (robots.txt excluded) was requested."""
        port = self.server.port
        return collections.Counter(
            f"http://{r['ip']}:{port}{r['path']}" for r in self.requests() if r["path"] != "/robots.txt"
        )

    def min_gap(self, ip: str) -> tuple[float, int]:
        """(smallest gap between two request arrivals on host ``ip``, robots.txt included; number of requests)."""
        times = sorted(r["t"] for r in self.requests() if r["ip"] == ip)
        return min((b - a for a, b in itertools.pairwise(times)), default=float("inf")), len(times)
