"""Fixtures of the integration suite: a recording loopback site and real squall workers.

``site(spec)`` serves a :class:`squall.tools.site_spec.SiteSpec` from a background
thread (its own event loop) and records every request at arrival;
``crawl(**overrides)`` makes a :class:`squall.tools.harness.Crawl` with its own
topology id on the test broker and stops its workers afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from squall.tools.harness import Crawl
from squall.tools.site_spec import SiteSpec
from squall.tools.testsite import ThreadedSite as ServedSite

# Keys every integration crawl needs: loopback sites must be allowed (SSRF guard) and
# the tick a bit slower than the default to spare the two CPUs of CI.
BASE_OVERRIDES: dict[str, Any] = {
    "http.private.networks.allow": ["127.0.0.0/8"],
    "topology.partitions": 4,
    "http.timeout.total": 20.0,
}


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
