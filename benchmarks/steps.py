"""Micro-benchmark of single steps on the path of a page: CPU microseconds each, beside the way it replaced.

A whole crawl's CPU per page moves by ±25 % between runs on a shared machine
(docs/benchmarks.md), so a step that saves a few microseconds a page cannot
be seen there; here each step is timed alone, in this process, over inputs
that never repeat (a new key or URL each call; the URL record reads go
round 20 000 stored records):

* ``table put``: one RocksDB put of a 400-byte value to a table store, with
  the write-ahead log (Faust's ``RocksDBOptions``) and without it
  (``squall.worker.table_store.WalFreeOptions``). A page makes about two per
  changelog record (the value, then Faust's changelog offset).
* ``JSON read``: one URL record of the urls table read back, by
  ``json.loads`` and by ``squall.policy.codec.loads`` (orjson where it reads
  the text).
* ``URL record``: one record of the urls table read for a hand-out or a
  result: from a RocksDB table store (``get``, ``codec.loads``,
  ``UrlRecord.from_dict``: what a read cost before) and from the worker's
  cache of recent URL records (``agents.common.stored_url``: one bounded
  dict lookup when the record was written or read within the last
  ``URL_CACHE_ENTRIES`` records). A page reads two (its hand-out, its
  result).
* ``fetch target``: one plain URL with an IP-literal host made into the
  request target and judged by the SSRF guard, by a full yarl parse and
  ``ipaddress`` (the way before) and by ``squall.net.http._checked_target``.

CPU time of this process (``time.process_time``), the median of ``--rounds``
rounds of ``--ops`` operations (``benchmarks.documents.cpu_ms_per_page``). A benchmark: nothing asserted. Run::

    .venv/bin/python benchmarks/steps.py [--ops 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import ipaddress
import itertools
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.documents import cpu_ms_per_page
from benchmarks.warc import commit

Step = Callable[[], object]  # one operation; each call takes another input


def _puts(directory: Path, walfree: bool) -> Step:
    from faust.stores.rocksdb import RocksDBOptions

    from squall.worker.table_store import WalFreeOptions

    options = WalFreeOptions(use_rocksdict=True) if walfree else RocksDBOptions(use_rocksdict=True)
    db = options.open(directory / ("walfree" if walfree else "wal"))
    value = b"v" * 400
    keys = (b"http://127.0.0.%d:8080/p/%d.html" % (i % 200, i) for i in itertools.count())
    return lambda: db.put(next(keys), value)


def _url_record() -> bytes:
    from squall.policy.schedule import Status, UrlRecord
    from squall.worker.table_codec import TableJson

    record = UrlRecord(
        url="http://127.0.0.12:8080/p/17.html",
        key="127.0.0.12:8080",
        status=Status.FETCHED,
        depth=2,
        attempts=1,
        next_fetch_at_s=1_767_000_000.25,
        last_fetch_at_s=1_765_000_000.125,
        discovered_at_s=1_764_999_990.5,
        http_status=200,
        last_modified="Mon, 07 Dec 2026 12:00:00 GMT",
        payload_digest="sha1:ABCDEFGHIJKLMNOPQRSTUVWXYZ234567",
        archived_at_s=1_765_000_000.125,
    )
    return TableJson().dumps(record.to_dict())


def _url_reads(directory: Path, cached: bool) -> Step:
    from squall.policy.codec import loads
    from squall.policy.memo import BoundedMemo
    from squall.policy.schedule import UrlRecord
    from squall.worker.table_store import WalFreeOptions

    raw, n = _url_record(), 20000
    urls = [f"http://127.0.0.{i % 200}:8080/p/{i}.html" for i in range(n)]
    if cached:  # the hit of agents.common.stored_url: the record kept when it was last written or read
        memo: BoundedMemo[str, UrlRecord] = BoundedMemo(n)
        for url in urls:
            memo.put(url, UrlRecord.from_dict(loads(raw)))
        found = itertools.cycle(urls)
        return lambda: memo.get(next(found))
    db = WalFreeOptions(use_rocksdict=True).open(directory / "urls")
    for url in urls:
        db.put(url.encode(), raw)
    keys = itertools.cycle([url.encode() for url in urls])
    return lambda: UrlRecord.from_dict(loads(db.get(next(keys))))


def _reads(loads: Callable[[bytes], object]) -> Step:
    raw = _url_record()
    return lambda: loads(raw)


def _targets(ours: bool) -> Step:
    from yarl import URL

    from squall.net.http import _checked_target
    from squall.policy.netsafety import NetworkPolicy, check_address

    policy = NetworkPolicy(allow=(ipaddress.ip_network("127.0.0.0/8"),))
    urls = (f"http://127.0.0.{i % 250}:8080/p/{i}.html" for i in itertools.count())  # 250 hosts, as a crawl has

    def before(url: str) -> object:  # the way before: a full parse, then the IP-literal test by ipaddress
        target = URL(url)
        host = target.raw_host or ""
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return target
        return check_address(host, policy) or target

    if ours:
        return lambda: _checked_target(next(urls), policy)
    return lambda: before(next(urls))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--ops", type=int, default=20000, help="operations per round")
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args(argv)
    import json

    from squall.policy.codec import loads

    print(
        f"Step micro-benchmark: commit {commit()}; {args.rounds} rounds x {args.ops} operations; "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )
    print("step          before                  us/op  squall                  us/op  squall / before")
    print("------------  ---------------------  ------  ----------------------  -----  ---------------")
    with tempfile.TemporaryDirectory(prefix="squall-steps-bench-") as tmp:
        rows = [
            ("table put", "RocksDB with WAL", _puts(Path(tmp), False), "RocksDB without WAL", _puts(Path(tmp), True)),
            ("JSON read", "json.loads", _reads(json.loads), "codec.loads (orjson)", _reads(loads)),
            ("URL record", "store, decode, build", _url_reads(Path(tmp), False), "cache hit", _url_reads(Path(tmp), True)),
            ("fetch target", "yarl parse, ipaddress", _targets(False), "_checked_target", _targets(True)),
        ]
        for step, before_name, before, ours_name, ours in rows:
            then = cpu_ms_per_page(before, args.ops, args.rounds) * 1000.0
            now = cpu_ms_per_page(ours, args.ops, args.rounds) * 1000.0
            print(f"{step:<12}  {before_name:<21}  {then:6.2f}  {ours_name:<22}  {now:5.2f}  {now / then:15.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
