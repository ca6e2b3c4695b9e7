"""Micro-benchmark of the per-discovered-URL path of a worker: parse step → status messages → status updater.

No broker: the urls and hosts tables are replaced by in-memory tables that
encode and decode every value as JSON, as Faust's ``value_serializer="json"``
tables do on each get and set (the RocksDB store and the changelog send are
not counted). The same code as the worker runs otherwise:
``agents.parser.parse`` on each page (a :class:`squall.net.http.FetchResult`),
``StatusMessage.to_bytes`` of every message the fetcher would send, and the
status updater's handling of each message (``agents.status_apply.handle``:
decode, canonicalize, partition check, scope and trap checks, dedup, host and
URL records, due index).

The pages: ``--hosts`` hosts × ``--pages`` pages; each page links to
``--links`` pages of its host (many already known: rediscoveries), one page
of another host, ``--offsite`` pages of unseeded hosts (rejected: scope.host); a page is at
depth 1, 2 or 3 and the depth limit is 3, so the links of a third of the
pages are refused (trap.depth).

Prints discovered URLs (outlinks found in the pages) per CPU-second of the
whole path, and the messages sent per page. A benchmark: nothing asserted.
Copied into a checkout from before ``handle`` existed (main before the
per-URL cuts), it runs that code's agent loop instead, for "before" numbers.
Run::

    .venv/bin/python benchmarks/status_updater.py [--hosts 20] [--pages 100] [--links 40] [--offsite 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
MAX_DEPTH = 3  # urlfilters.max.depth of the run: links of pages at depth 3 are refused (trap.depth)
_CONF = Path(tempfile.mkdtemp(prefix="squall-subench-")) / "crawler-conf.yaml"
_CONF.write_text(f"urlfilters.max.depth: {MAX_DEPTH}\ntopology.id: bench-status-updater\n")
os.environ["SQUALL_CONF"] = str(_CONF)


def page_html(host: str, k: int, n_pages: int, links: int, offsite: int, hosts: list[str], rng: random.Random) -> bytes:
    hrefs = [
        f"/p/{rng.randrange(n_pages)}?x={rng.randrange(3)}" if i % 5 == 4 else f"/p/{rng.randrange(n_pages)}"
        for i in range(links)
    ]
    hrefs.append(f"http://{rng.choice(hosts)}/p/{rng.randrange(n_pages)}")
    hrefs += [f"http://off{rng.randrange(10**6)}.example.net/a/{i}" for i in range(offsite)]
    anchors = "".join(f'<li><a href="{h}">link {i}</a></li>' for i, h in enumerate(hrefs))
    return (
        f"<!DOCTYPE html><html><head><title>{host} {k}</title></head><body><h1>page {k}</h1>"
        f"<p>Some text of the page.</p><ul>{anchors}</ul></body></html>"
    ).encode()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=20)
    p.add_argument("--pages", type=int, default=100, help="pages per host")
    p.add_argument("--links", type=int, default=40, help="same-host links per page")
    p.add_argument("--offsite", type=int, default=10, help="links per page to unseeded hosts")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)

    # isort: off
    import topology  # declares the app
    from tests.unit.test_status_updater import JsonTable  # a dict that stores JSON, as Faust tables do
    import agents.common as common
    import agents.status_apply as su
    from agents import parser
    from agents.worker_state import state
    from squall.policy.due_index import DueIndex
    from squall.net.http import FetchResult
    from squall.policy.partition import partition_for_key, partition_key
    from squall.policy.records import StatusMessage
    # isort: on

    PARTITIONS = topology.settings.topology_partitions
    urls, hosts = JsonTable(), JsonTable()
    topology.app.squall_tables = common.Tables(urls=urls, hosts=hosts)
    state().indexes = {p: DueIndex() for p in range(topology.settings.topology_partitions)}

    rng = random.Random(args.seed)
    names = [f"host{i}.example.org" for i in range(args.hosts)]
    pages = [
        (f"http://{h}/p/{k}", page_html(h, k, args.pages, args.links, args.offsite, names, rng), 1 + k % 3)
        for k in range(args.pages)
        for h in names
    ]
    seeds = [StatusMessage(url=f"http://{h}/", seed=True).to_bytes() for h in names]

    def deliver(value: bytes, key: str) -> int:
        """The status updater's handling of one message on the partition its key maps to; returns messages."""
        if hasattr(su, "handle"):
            sent = 1
            for _rk, rp, rv in su.handle(value, partition_for_key(key, PARTITIONS), time.time()).reroutes:
                su.handle(rv, rp, time.time())
                sent += 1
            return sent
        # the agent loop of the status updater before `handle` existed (for the "before" numbers)
        from squall.policy.urls import canonicalize

        msg = StatusMessage.from_bytes(value)
        url = canonicalize(msg.url, common.config().normalizer)
        k = partition_key(url, topology.settings.partition_url_mode)
        partition_for_key(k, PARTITIONS)
        su.update(msg, url, k, time.time())
        return 1

    for raw in seeds:
        deliver(raw, partition_key(json.loads(raw)["url"], "byHost"))
    headers = [("Content-Type", "text/html; charset=utf-8")]
    discovered = messages = 0
    t_parse = t_status = 0.0
    for url, body, depth in pages:
        result = FetchResult(
            url=url,
            status=200,
            headers=headers,
            body=body,
            truncated=False,
            ip="127.0.0.1",
            started_at_s=0.0,
            ended_at_s=0.0,
            request_headers=[],
            http_version="HTTP/1.1",
        )
        c0 = time.process_time()
        _recorded, links = parser.parse(result, depth=depth, metadata={})
        out = [(partition_key(m.url, "byHost"), m.to_bytes()) for m in links]
        c1 = time.process_time()
        for key, value in out:
            messages += deliver(value, key)
        c2 = time.process_time()
        t_parse += c1 - c0
        t_status += c2 - c1
        discovered += body.count(b"<a href=")
    total = t_parse + t_status
    print(
        f"# {args.hosts} hosts x {args.pages} pages, {args.links} same-host + 1 cross-host + {args.offsite} "
        f"offsite links per page; {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.2f}"
    )
    rows = [
        ("pages", f"{len(pages)}"),
        ("discovered URLs (links in pages)", f"{discovered}"),
        ("URLs stored", f"{len(urls)}"),
        ("status messages per page", f"{messages / len(pages):.1f}"),
        ("parse step, CPU s", f"{t_parse:.2f}"),
        ("status updater, CPU s", f"{t_status:.2f}"),
        ("discovered URLs per CPU-second", f"{discovered / total:,.0f}"),
        ("CPU ms per page (parse + status)", f"{1000 * total / len(pages):.2f}"),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"| {'metric'.ljust(width)} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for name, value in rows:
        print(f"| {name.ljust(width)} | {value} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
