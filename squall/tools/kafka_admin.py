"""Topic administration and whole-topic reads over aiokafka.

* :func:`ensure_topics` creates squall's topics with the configured partition
  count (the broker never creates topics by itself) and refuses to run against
  an existing topic with another partition count: partition ownership is the
  politeness invariant, so a silent mismatch is not an option.
* :func:`end_offsets` and :func:`read_topic` read a topic (typically a
  compacted table changelog) from the beginning up to the end offsets captured
  at the start, without a consumer group, for reports.

Every function takes the broker as a :data:`squall.net.kafka_security.Broker`:
a ``host:port,...`` string (PLAINTEXT) or a
:class:`~squall.net.kafka_security.KafkaConnection` (TLS, SASL), whose
refusals arrive as one-line :class:`squall.errors.KafkaAccessError`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    KafkaError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    for_code,
)
from aiokafka.structs import ConsumerRecord, TopicPartition

from squall.errors import ConfigError, KafkaSetupError
from squall.net.kafka_security import (
    Broker,
    KafkaConnection,
    as_connection,
    check_access,
    quiet_client_log,
    refusals,
    translate,
)

# How long (s) to wait for a created topic to show up in metadata with all
# its partitions (KRaft propagates asynchronously but fast).
_METADATA_WAIT_S = 30.0


class _Startable(Protocol):
    async def start(self) -> None: ...


_Client = TypeVar("_Client", bound=_Startable)


@contextlib.asynccontextmanager
async def _running(
    client: _Client, conn: KafkaConnection, stop: Callable[[], Awaitable[object]]
) -> AsyncIterator[_Client]:
    """``client`` started; ``stop`` (its close or stop method) runs on leaving, and when the start fails.

    A refusal by the broker inside the block (an ACL) becomes a :class:`KafkaAccessError`.

    Raises:
        KafkaAccessError: the broker refused the credentials or the TLS handshake
            (:func:`squall.net.kafka_security.check_access` says which), or an operation.
        KafkaSetupError: the start failed (KafkaError or OSError: no broker answers at ``conn``).
    """
    secured = conn.protocol != "PLAINTEXT"
    try:
        # a secured start that fails is diagnosed below, instead of aiokafka's error per attempt
        with quiet_client_log() if secured else contextlib.nullcontext():
            await client.start()
    except (KafkaError, OSError) as exc:
        with contextlib.suppress(Exception):
            await stop()
        if secured:
            await check_access(conn)  # raises the refusal, if that was it
        raise KafkaSetupError(f"no Kafka broker answers at {conn.bootstrap}: {exc}") from exc
    try:
        async with refusals(conn):
            yield client
    finally:
        await stop()


def _admin(
    broker: Broker, request_timeout_s: float = 30.0
) -> contextlib.AbstractAsyncContextManager[AIOKafkaAdminClient]:
    """An admin client of ``broker``, started and closed by ``async with`` (:func:`_running`)."""
    conn = as_connection(broker)
    admin = AIOKafkaAdminClient(**conn.client_kwargs(), request_timeout_ms=int(request_timeout_s * 1000))
    return _running(admin, conn, admin.close)


async def _partition_counts(admin: AIOKafkaAdminClient, names: list[str]) -> dict[str, int]:
    """Partition count of each existing topic among ``names`` (missing ones are absent)."""
    # Describe *all* topics (MetadataRequest with no names): naming a missing
    # topic would let a broker with auto.create.topics.enable=true create it
    # with its default partition count (aiokafka sends allow_auto_topic_creation).
    wanted = set(names)
    counts: dict[str, int] = {}
    for topic in await admin.describe_topics(None):
        if topic["topic"] not in wanted:
            continue
        if topic["error_code"] == 0:
            counts[topic["topic"]] = len(topic["partitions"])
        elif topic["error_code"] != UnknownTopicOrPartitionError.errno:
            raise KafkaSetupError(f"describing topic {topic['topic']!r}: {for_code(topic['error_code']).__name__}")
    return counts


def _check_counts(wanted: Mapping[str, int], counts: Mapping[str, int]) -> None:
    for name, have in counts.items():
        if name in wanted and have != wanted[name]:
            raise ConfigError(
                "topology.partitions",
                f"topic {name!r} exists with {have} partitions but {wanted[name]} are configured; "
                "partition ownership depends on one partition count: use the topic's count, "
                "or another topology.id (new topics)",
            )


async def ensure_topics(
    bootstrap: Broker,
    topics: Mapping[str, int],
    replication: int = 1,
    configs: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, bool]:
    """Create the missing topics of ``topics`` (name → partition count).

    ``replication`` is the replication factor of created topics; ``configs``
    optionally maps a topic name to topic configs used when creating it (e.g.
    ``{"cleanup.policy": "compact"}``); existing topics are not altered.
    Idempotent and safe against concurrent creators (TopicAlreadyExists is
    ignored; the partition count is checked afterwards either way). Returns
    name → True if this call created the topic. Waits (up to 30 s) until every
    topic is visible in metadata with all its partitions.

    Raises:
        ConfigError: (key ``topology.partitions``) an existing topic has
            another partition count.
        KafkaSetupError: no broker answers, or the broker refused a creation.
    """
    wanted = {name: int(n) for name, n in topics.items()}
    for name, n in wanted.items():
        if n < 1:
            raise ConfigError("topology.partitions", f"topic {name!r}: partition count must be >= 1, got {n}")
    created: dict[str, bool] = {name: False for name in wanted}
    if not wanted:
        return created
    names = list(wanted)
    async with _admin(bootstrap) as admin:
        existing = await _partition_counts(admin, names)
        _check_counts(wanted, existing)
        missing = [name for name in names if name not in existing]
        if missing:
            new = [
                NewTopic(
                    name,
                    wanted[name],
                    replication,
                    topic_configs={k: str(v) for k, v in ((configs or {}).get(name) or {}).items()},
                )
                for name in missing
            ]
            response = await admin.create_topics(new)
            for item in response.to_object()["topic_errors"]:
                code = item["error_code"]
                if code == 0:
                    created[item["topic"]] = True
                elif code != TopicAlreadyExistsError.errno:
                    message = item.get("error_message") or ""
                    refused = translate(for_code(code)(item["topic"]), as_connection(bootstrap))
                    if refused is not None:
                        raise refused
                    raise KafkaSetupError(
                        f"creating topic {item['topic']!r} failed: {for_code(code).__name__} {message}".strip()
                    )
        # Wait until every topic is visible with its partitions (and check the
        # count again: a concurrent creator may have used another one).
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _METADATA_WAIT_S
        while True:
            counts = await _partition_counts(admin, names)
            _check_counts(wanted, counts)
            if all(name in counts for name in names):
                return created
            if loop.time() > deadline:
                absent = sorted(set(names) - set(counts))
                raise KafkaSetupError(f"topics {absent} did not appear in metadata within {_METADATA_WAIT_S:g} s")
            await asyncio.sleep(0.1)


def _consumer(broker: Broker) -> contextlib.AbstractAsyncContextManager[AIOKafkaConsumer]:
    """A group-less consumer of ``broker``, started and stopped by ``async with`` (:func:`_running`)."""
    conn = as_connection(broker)
    consumer = AIOKafkaConsumer(
        **conn.client_kwargs(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    return _running(consumer, conn, consumer.stop)


async def topic_partition_counts(bootstrap: Broker) -> dict[str, int]:
    """Every topic at ``bootstrap`` (Kafka's internal ones too) → its partition count, never auto-creating one.

    Raises:
        KafkaAccessError: the broker refused the credentials, the TLS handshake or the request (an ACL).
        KafkaSetupError: no broker answers.
    """
    async with _admin(bootstrap) as admin:
        return {t["topic"]: len(t["partitions"]) for t in await admin.describe_topics(None) if t["error_code"] == 0}


async def _partitions(bootstrap: Broker, topic: str) -> list[TopicPartition] | None:
    """The partitions of ``topic`` (None if it does not exist), never auto-creating it."""
    async with _admin(bootstrap) as admin:
        for item in await admin.describe_topics(None):
            if item["topic"] == topic and item["error_code"] == 0 and item["partitions"]:
                return [
                    TopicPartition(topic, p["partition"])
                    for p in sorted(item["partitions"], key=lambda p: p["partition"])
                ]
    return None


async def end_offsets(bootstrap: Broker, topic: str, missing_ok: bool = False) -> dict[int, int]:
    """partition → end offset (the offset the next record will get) of ``topic``.

    Raises:
        KafkaSetupError: no broker answers, or the topic does not exist (unless
            ``missing_ok``: then ``{}``).
    """
    tps = await _partitions(bootstrap, topic)
    if tps is None:
        if missing_ok:
            return {}
        raise KafkaSetupError(f"topic {topic!r} does not exist at {as_connection(bootstrap).bootstrap}")
    async with _consumer(bootstrap) as consumer:
        ends = await consumer.end_offsets(tps)
        return {tp.partition: int(ends[tp]) for tp in sorted(ends, key=lambda tp: tp.partition)}


async def read_topic(
    bootstrap: Broker,
    topic: str,
    missing_ok: bool = False,
    idle_timeout_s: float = 30.0,
) -> AsyncIterator[tuple[bytes | None, bytes | None]]:
    """Yield ``(key, value)`` of every record of ``topic``: :func:`read_partitioned` without the partition."""
    async for _partition, key, value in read_partitioned(bootstrap, topic, missing_ok, idle_timeout_s):
        yield key, value


async def read_partitioned(
    bootstrap: Broker,
    topic: str,
    missing_ok: bool = False,
    idle_timeout_s: float = 30.0,
    starts: Mapping[int, int] | None = None,
) -> AsyncIterator[tuple[int, bytes | None, bytes | None]]:
    """Yield ``(partition, key, value)`` of every record of ``topic``: :func:`read_records`, the records' fields."""
    async for record in read_records(bootstrap, topic, missing_ok, idle_timeout_s, starts):
        yield record.partition, record.key, record.value


async def read_records(
    bootstrap: Broker,
    topic: str,
    missing_ok: bool = False,
    idle_timeout_s: float = 30.0,
    starts: Mapping[int, int] | None = None,
) -> AsyncIterator[ConsumerRecord[bytes, bytes]]:
    """Yield every record of ``topic`` (aiokafka's ``ConsumerRecord``: offset, timestamp, key, value), oldest first per partition.

    Reads every partition from its beginning (or from ``starts``: partition →
    offset, e.g. a group's committed offsets; a partition not in it, or whose
    offset is gone, from its beginning) up to the end offsets captured
    when the read starts, then stops (records produced later are not read).
    Records of different partitions interleave. No consumer group is used and
    nothing is committed. Compacted topics are fine: offset gaps are skipped;
    tombstones are yielded with ``value`` None.

    Raises:
        KafkaSetupError: no broker answers; the topic does not exist (unless
            ``missing_ok``: then nothing is yielded); or no progress was made
            for ``idle_timeout_s`` seconds.
    """
    tps = await _partitions(bootstrap, topic)
    if tps is None:
        if missing_ok:
            return
        raise KafkaSetupError(f"topic {topic!r} does not exist at {as_connection(bootstrap).bootstrap}")
    async with _consumer(bootstrap) as consumer:
        ends = await consumer.end_offsets(tps)
        beginnings = await consumer.beginning_offsets(tps)
        first = {tp: max(beginnings[tp], (starts or {}).get(tp.partition, 0)) for tp in tps}
        pending = {tp for tp in tps if ends[tp] > first[tp]}
        if not pending:
            return
        consumer.assign(list(pending))
        for tp in pending:
            consumer.seek(tp, first[tp])
        loop = asyncio.get_running_loop()
        last_progress = loop.time()
        while pending:
            batches = await consumer.getmany(*pending, timeout_ms=500)
            for tp, records in batches.items():
                for record in records:
                    if record.offset < ends[tp]:
                        yield record
            done = set()
            for tp in pending:
                if await consumer.position(tp) >= ends[tp]:
                    done.add(tp)
            if batches or done:
                last_progress = loop.time()
            elif loop.time() - last_progress > idle_timeout_s:
                raise KafkaSetupError(
                    f"reading {topic!r}: no progress for {idle_timeout_s:g} s "
                    f"(positions below end offsets on partitions {sorted(tp.partition for tp in pending)})"
                )
            if done:
                pending -= done
                consumer.pause(*done)
