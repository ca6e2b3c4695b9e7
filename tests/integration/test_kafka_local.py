"""The broker fixture and squall.tools.kafka_admin against a real Kafka broker."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaProducer

from squall.tools import kafka_probe
from squall.errors import ConfigError
from squall.tools.kafka_admin import end_offsets, ensure_topics, read_topic


def _topic(prefix: str) -> str:
    return f"test-{prefix}-{uuid.uuid4().hex[:10]}"


async def test_broker_answers(kafka_bootstrap: str) -> None:
    assert await kafka_probe.is_answering_async(kafka_bootstrap, timeout_s=10)
    assert kafka_probe.is_answering(kafka_bootstrap, timeout_s=10)


async def test_ensure_topics_creates_with_partitions_and_is_idempotent(kafka_bootstrap: str) -> None:
    a, b = _topic("a"), _topic("b")
    assert await ensure_topics(kafka_bootstrap, {a: 3, b: 1}) == {a: True, b: True}
    assert sorted(await end_offsets(kafka_bootstrap, a)) == [0, 1, 2]
    assert await end_offsets(kafka_bootstrap, b) == {0: 0}
    assert await ensure_topics(kafka_bootstrap, {a: 3, b: 1}) == {a: False, b: False}


async def test_mismatched_partition_count_raises_config_error(kafka_bootstrap: str) -> None:
    name = _topic("mismatch")
    await ensure_topics(kafka_bootstrap, {name: 2})
    with pytest.raises(ConfigError) as info:
        await ensure_topics(kafka_bootstrap, {name: 4})
    assert info.value.key == "topology.partitions"
    assert name in str(info.value)


async def test_read_topic_reads_keyed_messages_to_the_captured_end(kafka_bootstrap: str) -> None:
    name = _topic("read")
    await ensure_topics(kafka_bootstrap, {name: 4}, configs={name: {"cleanup.policy": "compact"}})
    sent = {f"key-{i}".encode(): f"value-{i}".encode() for i in range(20)}
    producer = AIOKafkaProducer(bootstrap_servers=kafka_bootstrap)
    await producer.start()
    try:
        for key, value in sent.items():
            await producer.send_and_wait(name, value, key=key)
        await producer.send_and_wait(name, None, key=b"tombstone")
        ends = await end_offsets(kafka_bootstrap, name)
        assert sum(ends.values()) == 21
        got = []
        async for key, value in read_topic(kafka_bootstrap, name):
            got.append((key, value))
            if len(got) == 1:
                # Produced after the read started: beyond the captured end offsets.
                await producer.send_and_wait(name, b"late", key=b"late")
    finally:
        await producer.stop()
    assert len(got) == 21
    assert dict(got) == {**sent, b"tombstone": None}


async def test_read_topic_of_empty_and_missing_topics(kafka_bootstrap: str) -> None:
    name = _topic("empty")
    await ensure_topics(kafka_bootstrap, {name: 2})
    assert [kv async for kv in read_topic(kafka_bootstrap, name)] == []
    assert [kv async for kv in read_topic(kafka_bootstrap, _topic("missing"), missing_ok=True)] == []
    assert await end_offsets(kafka_bootstrap, _topic("missing"), missing_ok=True) == {}
