"""What ``squall status`` reads from the broker: the live records of the table changelogs, the worker
group's committed offsets, lag and assignment, and the signals it has not applied yet.

The worker's tables are compacted Kafka changelogs, so any machine that
reaches the broker can read them without asking a worker. The changelog and
topic readers raise what :mod:`squall.tools.kafka_admin` raises
(:class:`squall.errors.KafkaSetupError`: no broker answers;
:class:`squall.errors.KafkaAccessError`: it refuses); :func:`committed_offsets`
and :func:`group_members` return None instead when the broker cannot tell.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from squall.net.kafka_security import Broker, KafkaConnection
from squall.policy.frontier import HostRecord
from squall.policy.records import SignalMessage, StatusMessage

if TYPE_CHECKING:
    from squall.policy.pace import PaceConfig
    from squall.settings import Settings


async def latest_records(bootstrap: Broker, topic: str) -> dict[str, dict[str, Any]]:
    """The live value of each key of a table changelog (JSON objects), tombstones applied.

    A tombstone deletes a key only in its own partition: a record that moved
    to another partition (byIP, its host's address changed) is deleted from
    the old one after it was written in the new one, and partitions are read
    interleaved.
    """
    from squall.tools.kafka_admin import read_partitioned

    live: dict[str, dict[int, dict[str, Any]]] = {}  # key → partition → latest value there
    async for partition, key, value in read_partitioned(bootstrap, topic, missing_ok=True):
        if key is None:
            continue
        k = key.decode("utf-8", errors="replace")
        if value is None:
            live.get(k, {}).pop(partition, None)
            continue
        try:
            live.setdefault(k, {})[partition] = json.loads(value)
        except ValueError:
            continue
    return {k: next(iter(by_partition.values())) for k, by_partition in live.items() if by_partition}


async def committed_offsets(
    settings: Settings, conn: KafkaConnection | None = None
) -> dict[tuple[str, int], int] | None:
    """The worker group's committed offsets ((topic, partition) → offset); None when the broker cannot tell.

    ``conn``: how to reach the broker (default: ``settings``' :class:`KafkaConnection`).
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(**(conn or KafkaConnection.from_settings(settings)).client_kwargs())
    try:
        await admin.start()
        committed = await admin.list_consumer_group_offsets(settings.topology_id)
    except KafkaError:  # e.g. the group coordinator is not ready yet
        return None
    finally:
        await admin.close()
    return {(tp.topic, tp.partition): m.offset for tp, m in committed.items() if m.offset >= 0}


async def _lag(
    settings: Settings, committed: Mapping[tuple[str, int], int] | None, conn: KafkaConnection | None = None
) -> dict[str, int]:
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import end_offsets

    if committed is None:  # unknown counts as busy
        return {"unknown": 1}
    conn = conn or KafkaConnection.from_settings(settings)
    lag: dict[str, int] = {}
    for suffix in ("status", "fetch", "signals"):
        topic = topic_name(settings, suffix)
        ends = await end_offsets(conn, topic, missing_ok=True)
        lag[suffix] = sum(end - committed.get((topic, partition), 0) for partition, end in ends.items())
    return lag


async def unapplied_signals(
    settings: Settings, committed: Mapping[tuple[str, int], int], conn: KafkaConnection | None = None
) -> list[SignalMessage]:
    """The signals the worker group has not consumed yet (after its committed offsets), oldest first per partition.

    A fetch result carries its signal (the status topic); a signal with no
    result travels alone (the signals topic). A worker that stops cleanly
    hands the URLs waiting at its fetcher back, each with its signal, and
    leaves the group before they are applied: until a worker owns those
    partitions again, the hosts changelog still lists the hand-outs in
    flight (:func:`apply_unapplied`).
    """
    from squall.errors import MessageError
    from squall.policy.topics import topic_name
    from squall.tools.kafka_admin import read_partitioned

    conn = conn or KafkaConnection.from_settings(settings)
    out: list[SignalMessage] = []
    for suffix in ("status", "signals"):
        topic = topic_name(settings, suffix)
        starts = {partition: offset for (t, partition), offset in committed.items() if t == topic}
        async for _partition, _key, value in read_partitioned(conn, topic, missing_ok=True, starts=starts):
            if value is None or (suffix == "status" and b'"signal"' not in value):
                continue
            try:
                signal = (
                    SignalMessage.from_bytes(value) if suffix == "signals" else StatusMessage.from_bytes(value).signal
                )
            except MessageError:  # the agent dead-letters it; nothing to apply
                continue
            if signal is not None:
                out.append(signal)
    return out


def apply_unapplied(
    hosts: Mapping[str, Mapping[str, Any]], signals: list[SignalMessage], config: PaceConfig, remembered: int
) -> dict[str, dict[str, Any]]:
    """``hosts`` (key → HostRecord dict) as the regulator will make them once it applies ``signals``.

    The same :func:`squall.policy.host_pacing.apply_signal` the regulator
    calls: a hand-out answered on the signals topic is no longer in flight,
    even when no worker has applied the answer yet. A record that does not
    decode is left as it is.
    """
    from squall.policy.host_pacing import apply_signal

    out = {k: dict(v) for k, v in hosts.items()}
    for signal in signals:
        raw = out.get(signal.key)
        try:
            host = HostRecord(key=signal.key) if raw is None else HostRecord.from_dict(raw)
            out[signal.key] = apply_signal(host, signal, config, remembered).to_dict()
        except (ValueError, TypeError, KeyError):
            continue
    return out


async def group_members(
    settings: Settings, conn: KafkaConnection | None = None
) -> tuple[str, dict[str, dict[str, list[int]]]] | None:
    """The worker group's state and each member's assignment (member id → topic → partitions).

    Read from the group coordinator (DescribeGroups) through ``conn`` (default:
    ``settings``' :class:`KafkaConnection`); None when the broker cannot tell
    (no coordinator yet, an outage).
    """
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.coordinator.protocol import ConsumerProtocol
    from aiokafka.errors import KafkaError

    admin = AIOKafkaAdminClient(**(conn or KafkaConnection.from_settings(settings)).client_kwargs())
    try:
        await admin.start()
        responses = await admin.describe_consumer_groups([settings.topology_id])
    except KafkaError:
        return None
    finally:
        await admin.close()
    for response in responses:
        for group in response.to_object()["groups"]:
            if group.get("group", group.get("group_id")) != settings.topology_id or group["error_code"]:
                continue
            members: dict[str, dict[str, list[int]]] = {}
            for member in group["members"]:
                raw = member["member_assignment"]
                assignment = ConsumerProtocol.ASSIGNMENT.decode(raw).assignment if raw else []
                members[member["member_id"]] = {topic: list(partitions) for topic, partitions in assignment}
            return str(group.get("state", group.get("group_state", ""))), members
    return None


async def collect_records(settings: Settings) -> dict[str, Any]:
    """The latest table records (``urls``, ``hosts``, ``audit``, ``robots``: key → dict), ``lag`` and
    ``deadletters`` of ``settings``' topology, read from the broker."""
    from squall.policy.topics import changelog_name, topic_name
    from squall.tools.kafka_admin import end_offsets

    bootstrap = KafkaConnection.from_settings(settings)
    out: dict[str, Any] = {
        t: await latest_records(bootstrap, changelog_name(settings, t))
        for t in ("urls", "hosts", "audit", "robots", "control")
    }
    out["deadletters"] = sum(
        (await end_offsets(bootstrap, topic_name(settings, "deadletter"), missing_ok=True)).values()
    )
    committed = await committed_offsets(settings, bootstrap)
    out["lag"] = await _lag(settings, committed, bootstrap)
    if committed is not None and (out["lag"].get("signals") or out["lag"].get("status")):
        from squall.policy.pace import PaceConfig

        out["hosts"] = apply_unapplied(
            out["hosts"],
            await unapplied_signals(settings, committed, bootstrap),
            PaceConfig.from_settings(settings),
            settings.frontier_signals_remembered,
        )
    out["group"] = await group_members(settings, bootstrap)
    return out
