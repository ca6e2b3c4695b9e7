"""The loopback farm of benchmarks/crawl.py: its host addresses and its pages, as a :class:`SiteSpec`.

N simulated hosts, one loopback address each (``127.b.x.y``, all served on one
port by :class:`squall.tools.testsite.RecordingServer`). Each host has P pages:
``/`` links to every other page of its host, each page links to ``links``
pages of its host and one page of another host (every page is reachable in
one hop from its index), and ``offsite`` links to hosts that are not seeded
(out of scope: squall must reject them, Scrapy's spider does not follow
them). robots.txt allows everything. Nothing here does I/O.
"""

from __future__ import annotations

import random
from typing import Any

from squall.tools.site_spec import HostSpec, Page, RobotsSpec, SiteSpec


def host_ips(n: int, block: int) -> list[str]:
    """``n`` loopback addresses ``127.<block>.x.y`` (y in 2..251), one per simulated host."""
    return [f"127.{block}.{i // 250}.{i % 250 + 2}" for i in range(n)]


def farm(ips: list[str], pages: int, links: int, offsite: int, seed: int = 0) -> SiteSpec:
    """A site of ``len(ips)`` hosts × ``pages`` pages (``/`` included), as the module docstring says."""
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
