"""Micro-benchmark of the parse step's link work: CPU microseconds a page, on the pages of the 41-link farm.

The pages are those ``benchmarks/crawl.py --hosts 200 --pages 20 --links 40
--offsite 10`` serves (``--hosts`` changes the 200) (``benchmarks.crawl_farm.farm``: about 1.7 KB, 29
distinct links a page — 18 to pages of its host, one to another seeded host,
ten to unseeded hosts, each of those new), every page but the hosts' ``/``,
in the farm's order, each parsed once a round, as a crawl meets them. Per
page, the three steps of ``agents.parser.parse_fetched`` timed apart:

* ``parse_html``: :func:`squall.policy.parse.parse_html` (as the parse step
  calls it where the checkout has the ``text_length`` switch: without the
  visible-text count);
* ``batch_outlinks``: canonical URLs, partition keys and partitions, the link
  judge (:func:`squall.policy.scope.batch_outlinks` with a fresh
  ``CanonicalCache`` and ``LinkJudge`` a round, the partition memo emptied);
* ``left_to_send``: :func:`squall.policy.admission.left_to_send` with the
  worker's lookups played by sets: the seeded hosts have a record, a URL has
  one once a batch sent it; a link to a host without a record is judged as
  ``agents.worker_state.refused_here`` judges it in that checkout (the link
  judge's ``check`` where it has one, else ``scope.check``). RocksDB is not
  in it: a crawl pays a lookup or two more a link there.

CPU time of this process (``time.process_time``), garbage collection off, the
median of ``--rounds`` rounds. ``--checkout DIR`` imports ``squall`` from
another checkout (an older commit), so one script times both sides. A
benchmark: nothing asserted. Run::

    .venv/bin/python benchmarks/outlinks.py [--rounds 5] [--checkout DIR]
"""

from __future__ import annotations

import argparse
import gc
import inspect
import os
import platform
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from benchmarks.warc import commit  # noqa: E402 (imports no squall: main picks the checkout's)

PARTITIONS = 16
STEPS = ("parse_html", "batch_outlinks", "left_to_send")


def _pages(hosts: int) -> list[tuple[str, bytes]]:
    from benchmarks.crawl_farm import farm, host_ips

    ips = host_ips(hosts, 1)
    spec = farm(ips, 20, 40, 10)
    return [
        (f"http://{ip}:8000{path}", page.render(8000))
        for ip in ips
        for path, page in spec.hosts[ip].pages.items()
        if path != "/"
    ]


def _round(pages: list[tuple[str, bytes]]) -> tuple[list[float], float]:
    """One pass over ``pages`` → (µs a page of each of STEPS, links a page)."""
    from squall.policy.admission import left_to_send
    from squall.policy.parse import parse_html
    from squall.policy.partition import partition_for_key, partition_key
    from squall.policy.scope import LinkJudge, ScopeConfig, batch_outlinks, check
    from squall.policy.urls import CanonicalCache, NormalizerConfig
    from squall.settings import load_settings

    settings = load_settings()
    scope = ScopeConfig.from_settings(settings)
    canonical, judge = CanonicalCache(NormalizerConfig.from_settings(settings)), LinkJudge(scope)
    partition_for_key.cache_clear()
    recorded = {partition_key(url, "byHost") for url, _ in pages}
    stored: set[str] = set()
    parse_kw = {"text_length": False} if "text_length" in inspect.signature(parse_html).parameters else {}

    def refused(url: str, partition: int, depth: int):  # type: ignore[no-untyped-def]
        if partition_key(url, "byHost") in recorded:
            return None
        if hasattr(judge, "check"):
            return judge.check(url, depth=depth, host_seeded=False, host_url_count=0)
        return check(url, depth=depth, host_seeded=False, host_url_count=0, config=scope)

    def partition_of(url: str) -> int:
        return partition_for_key(partition_key(url, "byHost"), PARTITIONS)

    spent, links = [0.0, 0.0, 0.0], 0
    headers = [("Content-Type", "text/html; charset=utf-8")]
    for url, body in pages:
        t0 = time.process_time()
        parsed = parse_html(body, url=url, headers=headers, agent_token="squall", **parse_kw)
        t1 = time.process_time()
        batches = batch_outlinks(
            parsed.outlinks,
            page_url=url,
            depth=1,
            metadata={},
            canonical=canonical,
            mode="byHost",
            partitions=PARTITIONS,
            judge=judge,
        )
        t2 = time.process_time()
        kept, _ = left_to_send(batches, known=lambda u, p: u in stored, refused=refused, partition_of=partition_of)
        t3 = time.process_time()
        for batch in kept:
            stored.update(batch.urls())
        spent = [spent[0] + t1 - t0, spent[1] + t2 - t1, spent[2] + t3 - t2]
        links += len(parsed.outlinks)
    return [s / len(pages) * 1e6 for s in spent], links / len(pages)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--hosts", type=int, default=200, help="hosts of the farm (20 pages each)")
    p.add_argument("--checkout", type=Path, default=HERE, help="the checkout whose squall is timed")
    args = p.parse_args(argv)
    root = args.checkout.resolve()
    sys.path.insert(0, str(root))  # squall from the checkout (the benchmarks package is this one's, imported above)
    import squall

    if Path(squall.__file__).resolve().parent.parent != root:
        p.error(f"squall imported from {squall.__file__}, not from {root}")
    pages = _pages(args.hosts)
    print(
        f"Outlinks micro-benchmark: commit {commit(root)}; {args.rounds} rounds x {len(pages)} pages; "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    gc.disable()
    rounds = [_round(pages) for _ in range(args.rounds)]
    gc.enable()
    print("step            us/page")
    print("--------------  -------")
    for i, step in enumerate(STEPS):
        print(f"{step:<14}  {statistics.median(r[0][i] for r in rounds):7.1f}")
    print(f"{'total':<14}  {statistics.median(sum(r[0]) for r in rounds):7.1f}")
    print(f"links a page (distinct, as found): {rounds[0][1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
