"""Micro-benchmark of a table's changelog record on its way to a real broker: Faust's way and squall's, CPU µs a record.

A page makes three or four table writes (its URL, its host, its audit
record), and each sends a record to the table's changelog topic. Timed here,
against a real broker, for the changelog shape of a crawl (5 topics × 8
partitions, 350-byte values, each record to a random partition):

* ``Faust``: ``Topic.send_soon`` with a callback, as ``Collection.send_changelog``
  does it (a ``FutureMessage`` through Faust's ``ProducerBuffer`` to
  ``AIOKafkaProducer.send``), on faust's aiokafka ``Producer``;
* ``squall``: the key's ``Topic.prepare_key`` and
  :meth:`squall.worker.changelog_producer.Producer.changelog` (queued,
  handed to ``AIOKafkaProducer.send`` by the producer's task), as
  ``SquallTable`` does it.

Both with ``producer_linger`` 5 ms (squall's ``kafka.producer.linger.secs``).
The values come encoded (the table's JSON encoding is the same both ways)
and no store is written (Faust's callback writes each record's offset to the
table's store, squall's one offset a partition and round). A table write
happens inside an agent's event, a few at a turn of the event loop: each
row queues ``--per-turn`` records a turn, then yields to the loop; the
timing runs from the first record to the end of the producer's ``flush()``
(every record acknowledged). CPU time of this process (broker excluded),
the median of ``--rounds`` rounds of ``--records`` records. A benchmark:
nothing asserted. Run::

    .venv/bin/python benchmarks/changelog.py [--records 20000] [--rounds 3] [--per-turn 1,4,16,64]

It starts a broker of its own on ``--broker-port`` (``squall.tools.kafka_local``,
stopped and wiped at the end) unless ``--bootstrap`` names one (its five
``bench-changelog-*`` topics are then left there).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.warc import commit

TOPICS, PARTITIONS, VALUE_BYTES = 5, 8, 350

Send = Callable[[str, int, bytes, bytes], None]  # (topic, partition, key, value)


async def _faust_way(bootstrap: str, topics: list[str]) -> tuple[Any, Send]:
    import faust

    app = faust.App(f"bench-faust-{uuid.uuid4().hex[:8]}", broker=f"kafka://{bootstrap}", producer_linger=0.005)
    channels = {name: app.topic(name, key_serializer="raw", value_serializer="raw") for name in topics}
    await app.producer.start()

    def on_sent(_fut: Any) -> None:
        pass

    def send(topic: str, partition: int, key: bytes, value: bytes) -> None:
        channels[topic].send_soon(key=key, value=value, partition=partition, callback=on_sent, eager_partitioning=True)

    return app.producer, send


async def _squall_way(bootstrap: str, topics: list[str]) -> tuple[Any, Send]:
    import faust
    from faust.types import TP

    from squall.worker.changelog_producer import Producer

    app = faust.App(f"bench-squall-{uuid.uuid4().hex[:8]}", broker=f"kafka://{bootstrap}", producer_linger=0.005)
    producer = Producer(app.transport)
    await producer.start()
    tps = {(name, p): TP(name, p) for name in topics for p in range(PARTITIONS)}

    def on_sent(_tp: TP, _offset: int) -> None:
        pass

    channels = {name: app.topic(name, key_serializer="raw", value_serializer="raw") for name in topics}

    def send(topic: str, partition: int, key: bytes, value: bytes) -> None:
        key_bytes, _ = channels[topic].prepare_key(key, "raw")  # as SquallTable._changelog does
        producer.changelog(tps[topic, partition], key_bytes, value, on_sent)

    return producer, send


async def _round(
    producer: Any, send: Send, topics: list[str], records: int, per_turn: int, rng: random.Random
) -> float:
    """CPU µs a record: ``records`` sent ``per_turn`` at a turn of the loop, then flushed."""
    value = b"v" * VALUE_BYTES
    started = time.process_time()
    for i in range(records):
        send(rng.choice(topics), rng.randrange(PARTITIONS), b"http://127.0.0.%d:8080/p/%d" % (i % 200, i), value)
        if i % per_turn == per_turn - 1:
            await asyncio.sleep(0)
    await producer.flush()
    while producer.buffer.size:  # Faust's flush gives up after 0.1 s without a message sent
        await producer.flush()
    return (time.process_time() - started) / records * 1e6


async def _measure(bootstrap: str, records: int, rounds: int, per_turns: list[int]) -> list[tuple[int, float, float]]:
    from squall.tools.kafka_admin import ensure_topics

    topics = [f"bench-changelog-{uuid.uuid4().hex[:8]}-{i}" for i in range(TOPICS)]
    await ensure_topics(bootstrap, dict.fromkeys(topics, PARTITIONS))
    ways = [await _faust_way(bootstrap, topics), await _squall_way(bootstrap, topics)]
    rng = random.Random(7)
    try:
        for producer, send in ways:  # metadata and connections warm
            await _round(producer, send, topics, 100, 4, rng)
        rows = []
        for per_turn in per_turns:
            times: list[list[float]] = [[], []]
            for _ in range(rounds):  # the two ways take turns
                for k, (producer, send) in enumerate(ways):
                    times[k].append(await _round(producer, send, topics, records, per_turn, rng))
            rows.append((per_turn, statistics.median(times[0]), statistics.median(times[1])))
        return rows
    finally:
        for producer, _send in ways:
            await producer.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    p.add_argument("--records", type=int, default=20000, help="records per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of each way (the table gives their median)")
    p.add_argument("--per-turn", default="1,4,16,64", help="records queued per turn of the event loop, one row each")
    p.add_argument("--bootstrap", help="an existing broker instead of starting one on --broker-port")
    p.add_argument("--broker-port", type=int, default=19982, help="port of the broker it starts")
    args = p.parse_args(argv)
    per_turns = [int(n) for n in args.per_turn.split(",")]
    from squall.tools import kafka_local

    bootstrap = args.bootstrap or f"127.0.0.1:{args.broker_port}"
    started = False if args.bootstrap else kafka_local.up(bootstrap, fresh=True)
    try:
        print(
            f"Changelog micro-benchmark: commit {commit()}; {args.rounds} rounds x {args.records} records, "
            f"{TOPICS} topics x {PARTITIONS} partitions, {VALUE_BYTES}-byte values; Python {platform.python_version()} "
            f"on {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start"
        )
        rows = asyncio.run(_measure(bootstrap, args.records, args.rounds, per_turns))
    finally:
        if started:
            kafka_local.down(bootstrap, wipe=True)
    print("records a turn  Faust send_soon us/rec  squall Producer.changelog us/rec  squall / Faust")
    print("--------------  ----------------------  --------------------------------  --------------")
    for per_turn, faust_us, squall_us in rows:
        print(f"{per_turn:>14}  {faust_us:>22.1f}  {squall_us:>32.1f}  {squall_us / faust_us:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
