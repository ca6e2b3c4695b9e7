"""Garbage on every topic of a running worker: it stays up, nothing gets stuck, the garbage is dead-lettered.

Seeded random bytes and hand-made hostile JSON go to every partition of the
status, fetch, signals and ticks topics while a worker crawls a small site.
Afterwards: the worker still runs, the crawl finishes (every expected page
FETCHED: no partition is stuck), and every message the decoders reject
(:mod:`squall.policy.records`) is in the dead-letter topic with a reason. Tick
messages carry no content (a tick only wakes the partition's spout), so
garbage there is a harmless tick and is not dead-lettered.
"""

from __future__ import annotations

import asyncio
import json
import random
import time

from aiokafka import AIOKafkaProducer

from squall.errors import MessageError
from squall.tools.kafka_admin import read_topic
from squall.policy.records import FetchMessage, SignalMessage, StatusMessage
from squall.tools.site_spec import generated_site

HOSTS = ["127.0.0.50", "127.0.0.51"]
SEED = 20261201
HOSTILE = [
    b"", b"\x00", b"\xff\xfe", b"null", b"[]", b"{}", b"[" * 50_000, b'{"url": 5}', b'{"url": ""}',
    b'{"url":"http://127.0.0.50/","status":"BOGUS"}', b'{"url":"u","key":"k","depth":1e999}',
    b'{"key":"k","url":"u","fetch_id":"f","kind":"success","at_s":NaN}',
    b'{"key":"k","url":"u","fetch_id":"f","kind":"nope","at_s":1}', b'{"url":"u","key":"k","chain":"abc"}',
    b'{"url":"http://127.0.0.50/x","metadata":{"a":[1,2]}}', "é".encode("latin-1"), b"\"just a string\"",
]
DECODERS = {"status": StatusMessage.from_bytes, "fetch": FetchMessage.from_bytes, "signals": SignalMessage.from_bytes}


def _garbage(rng: random.Random, n: int) -> list[bytes]:
    return HOSTILE + [rng.randbytes(rng.randint(0, 300)) for _ in range(n)]


def _rejected(topic: str, value: bytes) -> bool:
    try:
        DECODERS[topic](value)
    except MessageError:
        return True
    return False


async def _send(bootstrap: str, topology_id: str, partitions: int, garbage: list[bytes]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=2_000_000)
    await producer.start()
    try:
        for suffix in ("status", "fetch", "signals", "ticks"):
            for i, value in enumerate(garbage):
                await producer.send(f"{topology_id}-{suffix}", value=value, key=b"\xff" if i % 3 else b"k",
                                    partition=i % partitions)
        await producer.flush()
    finally:
        await producer.stop()


async def _deadletters(bootstrap: str, topic: str) -> list[dict]:
    return [json.loads(value) async for _, value in read_topic(bootstrap, topic, missing_ok=True) if value]


def test_garbage_on_every_topic_is_dead_lettered_and_the_crawl_still_finishes(site, crawl, kafka_bootstrap):
    served = site(generated_site(HOSTS, 5))
    c = crawl(**{"fetcher.server.delay": 0.2})
    worker = c.start_worker("w1")
    c.seed(served.seeds)
    deadline = time.monotonic() + 120
    while not served.requests() and time.monotonic() < deadline:
        time.sleep(0.2)
    garbage = _garbage(random.Random(SEED), 60)
    asyncio.run(_send(kafka_bootstrap, c.topology_id, c.settings["topology.partitions"], garbage))
    report = c.wait_idle(timeout_s=300)

    assert worker.poll() is None, "the worker died"
    expected = served.server.expected_pages()
    records = c.records()
    assert {u for u, r in records.items() if r["status"] == "FETCHED"} >= expected
    assert report.idle
    dead = asyncio.run(_deadletters(kafka_bootstrap, f"{c.topology_id}-deadletter"))
    assert all(d["reason"] and d["detail"] for d in dead)
    wanted = sum(_rejected(t, v) for t in DECODERS for v in garbage)
    assert wanted > 3 * len(HOSTILE)
    assert len(dead) >= wanted, (len(dead), wanted)
    log = (c.workdir / "worker-w1.log").read_text(errors="replace")
    assert "Traceback" not in log
