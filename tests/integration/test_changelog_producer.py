"""Table changelog records handed to aiokafka directly (squall.worker.changelog_producer), against a real broker.

The producer is the worker's own class on Faust's aiokafka transport; what is
checked is what a reader of the changelog topic gets: every record, in the
order of its writes per partition, tombstones included, across aiokafka
batches; and the offset each round reports to its table (its last record's).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import faust
from aiokafka import AIOKafkaConsumer, TopicPartition
from faust.types import TP

from squall.tools.kafka_admin import ensure_topics
from squall.worker.changelog_producer import Producer

BATCH_BYTES = 1024  # producer_max_batch_size: small, so that a partition's records take several aiokafka batches


def _producer(bootstrap: str) -> Producer:
    app = faust.App(
        f"changelog-{uuid.uuid4().hex[:8]}", broker=f"kafka://{bootstrap}", producer_max_batch_size=BATCH_BYTES
    )
    return Producer(app.transport)


async def _read(bootstrap: str, topic: str, partitions: int, expected: int) -> dict[int, list[tuple[Any, Any, int]]]:
    """Every record of ``topic`` as (key, value, offset) per partition, once ``expected`` records are in."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: dict[int, list[tuple[Any, Any, int]]] = {p: [] for p in range(partitions)}
        async with asyncio.timeout(30):
            while sum(map(len, got.values())) < expected:
                for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                    got[tp.partition] += [(r.key, r.value, r.offset) for r in records]
        return got
    finally:
        await consumer.stop()


def test_a_flush_sends_every_queued_record_in_order_and_reports_each_round_s_last_offset(kafka_bootstrap: str) -> None:
    topic = f"changelog-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, {topic: 2})
        producer = _producer(kafka_bootstrap)
        acknowledged: dict[TP, list[int]] = {}
        written: dict[int, list[tuple[bytes, bytes | None]]] = {0: [], 1: []}

        def write(i: int) -> None:
            partition = i % 2
            record = (f"key-{i % 7}".encode(), None if i % 11 == 0 else f'{{"n":{i},"pad":"{"x" * 20}"}}'.encode())
            written[partition].append(record)
            producer.changelog(
                TP(topic, partition), *record, lambda tp, offset: acknowledged.setdefault(tp, []).append(offset)
            )

        await producer.start()
        try:
            for i in range(80):  # ~50 bytes a record: several aiokafka batches of BATCH_BYTES per partition
                write(i)
            assert producer.changelog_pending == 80
            await producer.flush()  # round 1
            assert producer.changelog_pending == 0
            for i in range(80, 120):
                write(i)
            await producer.flush()  # round 2
        finally:
            await producer.stop()
        got = await _read(kafka_bootstrap, topic, 2, 120)
        for partition in (0, 1):
            assert [(k, v) for k, v, _ in got[partition]] == written[partition], "records lost, altered or reordered"
            assert acknowledged[TP(topic, partition)] == [39, 59], "each round reports its last record's offset"

    asyncio.run(scenario())


def test_records_queued_without_a_flush_are_sent_by_the_producer_s_task_and_at_stop(kafka_bootstrap: str) -> None:
    topic = f"changelog-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, {topic: 1})
        producer = _producer(kafka_bootstrap)
        acknowledged: list[int] = []
        tp = TP(topic, 0)
        await producer.start()
        try:
            first = asyncio.Event()

            def on_sent(_tp: TP, offset: int) -> None:
                acknowledged.append(offset)
                first.set()

            producer.changelog(tp, b"a", b"1", on_sent)
            async with asyncio.timeout(30):
                await first.wait()  # no flush: the producer's own task sent it
            assert acknowledged == [0]
            producer.changelog(tp, b"b", b"2", on_sent)
        finally:
            await producer.stop()  # queued a moment ago: sent before aiokafka's producer closes
        got = await _read(kafka_bootstrap, topic, 1, 2)
        assert [(k, v) for k, v, _ in got[0]] == [(b"a", b"1"), (b"b", b"2")]

    asyncio.run(scenario())


def test_a_round_cut_short_leaves_the_rest_queued_in_order_and_the_next_flush_sends_it(kafka_bootstrap: str) -> None:
    topic = f"changelog-{uuid.uuid4().hex[:8]}"

    async def scenario() -> None:
        await ensure_topics(kafka_bootstrap, {topic: 1})
        producer = _producer(kafka_bootstrap)
        tp = TP(topic, 0)
        written = [(f"k{i}".encode(), f'{{"n":{i},"pad":"{"x" * 40}"}}'.encode()) for i in range(300)]
        acknowledged: list[int] = []
        await producer.start()
        try:
            for record in written:  # ~60 bytes each: aiokafka's batch of BATCH_BYTES fills, and send() waits
                producer.changelog(tp, *record, lambda _tp, offset: acknowledged.append(offset))
            cut = asyncio.ensure_future(producer.flush())
            for _turn in range(10_000):  # until the round has handed over its first records
                if producer.changelog_pending < len(written):
                    break
                await asyncio.sleep(0)
            cut.cancel()  # mid-round: some records handed over, the rest not
            with contextlib.suppress(asyncio.CancelledError):
                await cut
            assert 0 < producer.changelog_pending < len(written), (
                "the round was not cut mid-way, or dropped what it had not handed over"
            )
            await producer.flush()
            assert producer.changelog_pending == 0
        finally:
            await producer.stop()
        got = await _read(kafka_bootstrap, topic, 1, len(written))
        assert [(k, v) for k, v, _ in got[0]] == written, "records lost, repeated or reordered"
        assert acknowledged[-1] == len(written) - 1

    asyncio.run(scenario())
