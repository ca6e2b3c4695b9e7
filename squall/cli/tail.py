"""``squall tail TOPIC``: follow one of squall's topics, messages decoded, for people without Kafka UI.

``TOPIC`` is a topic suffix (``status``, ``fetch``, ``signals``, ``ticks``,
``deadletter``), a table (``urls``, ``hosts``, ``robots``, ``audit``: its
changelog) or a full topic name. Every squall message is a JSON object with
a UTF-8 string key (the URL's partition key, a URL for the urls table, an
origin for the robots table); a value that is not JSON is shown as text
and flagged. No consumer group is used, nothing is committed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from squall.net.kafka_security import Broker, KafkaConnection
from squall.policy.topics import TABLES, TOPIC_SUFFIXES, changelog_name, topic_name

if TYPE_CHECKING:
    from squall.settings import Settings


def resolve_topic(settings: Settings, name: str) -> str:
    """The Kafka topic ``name`` stands for (suffix, table or full name) in ``settings``' topology."""
    if name in TOPIC_SUFFIXES:
        return topic_name(settings, name)
    if name in TABLES:
        return changelog_name(settings, name)
    return name


def unknown_topic_message(topic: str, existing: Iterable[str], topology_id: str) -> str:
    """The one line ``squall tail`` ends with when ``topic`` does not exist: it names the topics that do.

    The topology's own topics (``<topology_id>-...``) are shown as the short
    names ``squall tail`` takes; without any, every non-internal topic.
    """
    prefix = f"{topology_id}-"
    ours = sorted(t[len(prefix) :] for t in existing if t.startswith(prefix) and "__" not in t)
    if ours:
        shown = ", ".join(_short(t) for t in ours)
        return f"topic {topic} not found; topology.id {topology_id!r} has: {shown}"
    others = sorted(t for t in existing if not t.startswith("__"))
    return f"topic {topic} not found; no topic of topology.id {topology_id!r} exists" + (
        f" (the broker has: {', '.join(others)})" if others else " (the broker has none)"
    )


def _short(suffix: str) -> str:
    """``urls-changelog`` → ``urls`` (what ``squall tail`` takes for a table), else the suffix itself."""
    table = suffix.removesuffix("-changelog")
    return table if table in TABLES and suffix != table else suffix


def decode(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    """``{"key": str|None, "value": JSON value|str|None, "json": bool}`` of one record (never raises).

    ``json`` is False when the value is not valid UTF-8 JSON (then ``value`` is its text, bytes
    replaced); a tombstone (compacted delete) has ``value`` None and ``json`` True.
    """
    k = None if key is None else key.decode("utf-8", errors="replace")
    if value is None:
        return {"key": k, "value": None, "json": True}
    try:
        return {"key": k, "value": json.loads(value), "json": True}
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return {"key": k, "value": value.decode("utf-8", errors="replace"), "json": False}


def format_line(topic: str, partition: int, offset: int, timestamp_ms: int | None, record: Mapping[str, Any]) -> str:
    """One printed line: ``HH:MM:SS topic[p]@offset key value`` (value as compact JSON)."""
    at = time.strftime("%H:%M:%S", time.localtime((timestamp_ms or 0) / 1000))
    value = json.dumps(record["value"], ensure_ascii=False, separators=(",", ":"))
    flag = "" if record["json"] else " (not JSON)"
    return f"{at} {topic}[{partition}]@{offset} {record['key']} {value}{flag}"


async def follow(
    bootstrap: Broker,
    topic: str,
    out: TextIO,
    *,
    from_beginning: bool = False,
    max_messages: int = 0,
    timeout_s: float = 0.0,
    as_json: bool = False,
    topology_id: str = "",
) -> int:
    """Print the records of ``topic`` as they arrive; returns how many were printed.

    Stops after ``max_messages`` (0 = never) or ``timeout_s`` seconds without a record (0 = never).

    Raises:
        UnknownTopic: ``topic`` does not exist, or this user may not see it (an ACL): the message names
            those of ``topology_id`` that it sees.
        KafkaAccessError: the broker refused the credentials, the TLS handshake or the read (an ACL).
        KafkaSetupError: no broker answers.
    """
    from aiokafka import AIOKafkaConsumer

    from squall.errors import KafkaSetupError, UnknownTopic
    from squall.net.kafka_security import as_connection, check_access, quiet_client_log, refusals
    from squall.tools.kafka_admin import topic_partition_counts

    conn = as_connection(bootstrap)
    existing = await topic_partition_counts(conn)  # a refused login or TLS handshake: its one line
    if topic not in existing:  # the consumer would wait for it forever, logging an error ~9 times a second
        raise UnknownTopic(unknown_topic_message(topic, existing, topology_id))

    consumer = AIOKafkaConsumer(
        topic,
        **conn.client_kwargs(),
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if from_beginning else "latest",
    )
    try:
        with quiet_client_log() if conn.protocol != "PLAINTEXT" else contextlib.nullcontext():
            await consumer.start()
    except Exception as exc:  # aiokafka raises several kinds; all mean "cannot follow"
        with contextlib.suppress(Exception):
            await consumer.stop()
        if conn.protocol != "PLAINTEXT":
            await check_access(conn)  # a refused login or TLS handshake: that one line
        raise KafkaSetupError(f"cannot follow {topic} at {conn.bootstrap}: {exc}") from exc
    printed = 0
    try:
        while True:
            async with refusals(conn):  # an ACL that does not let this user read the topic
                batch = await consumer.getmany(timeout_ms=int(timeout_s * 1000) if timeout_s else 1000)
            if not batch and timeout_s:
                return printed
            for tp, messages in batch.items():
                for m in messages:
                    record = decode(m.key, m.value)
                    if as_json:
                        line = json.dumps(
                            {
                                "topic": tp.topic,
                                "partition": tp.partition,
                                "offset": m.offset,
                                "timestamp_ms": m.timestamp,
                                **record,
                            },
                            ensure_ascii=False,
                        )
                    else:
                        line = format_line(tp.topic, tp.partition, m.offset, m.timestamp, record)
                    print(line, file=out, flush=True)
                    printed += 1
                    if max_messages and printed >= max_messages:
                        return printed
    finally:
        await consumer.stop()


def _tail_command(args: argparse.Namespace) -> int:
    from squall.settings import load_settings

    settings = load_settings(args.conf)
    topic = resolve_topic(settings, args.topic)
    asyncio.run(
        follow(
            KafkaConnection.from_settings(settings),
            topic,
            sys.stdout,
            from_beginning=args.from_beginning,
            max_messages=args.max,
            timeout_s=args.timeout,
            as_json=args.json,
            topology_id=settings.topology_id,
        )
    )
    return 0


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("tail", help="follow a topic's messages, decoded")
    p.add_argument(
        "topic",
        help="status, fetch, signals, ticks, deadletter, a table (urls, hosts, robots, audit) or a full topic name",
    )
    p.add_argument("--from-beginning", action="store_true", help="start at the oldest message, not the next one")
    p.add_argument("--max", type=int, default=0, help="stop after this many messages (0 = never)")
    p.add_argument(
        "--timeout", type=float, default=0.0, help="stop after this many seconds without a message (0 = never)"
    )
    p.add_argument(
        "--json", action="store_true", help="one JSON object per line (topic, partition, offset, key, value)"
    )
    p.set_defaults(func=_tail_command)
