"""Status updater (StormCrawler's StatusUpdaterBolt): status topic → urls and hosts tables.

For each message: decode, canonicalize, route to the partition of its key,
then either admit a discovered URL (dedup, scope and trap guards) or apply
a fetch result (:func:`squall.schedule.apply`), and keep the due index in
step. Bad input goes to the dead-letter topic; the stream goes on.

``partition.url.mode: byIP``: the key is the address the URL's host resolves
to (:mod:`squall.address_key`). A host not resolved yet on this worker is
looked up in its own task while the loop goes on; its message is then sent
to the partition of its address (its ack held until then, at-least-once). A
message that reaches the partition holding the URL's record under a key its
host no longer resolves to takes the record along to the new key's
partition (``StatusMessage.moved``) and the record is deleted here.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace

from agents.addresses import addresses, host_port
from agents.common import deadletter, load_host, save_host
from agents.runtime import PARTITIONS, state
from squall.address_key import provisional_key, status_key
from squall import metadata as md
from squall.errors import InvalidURL, MessageError
from squall.partition import partition_for_key, partition_key
from squall.records import StatusMessage
from squall.schedule import ScheduleConfig, UrlRecord, apply, new_record
from squall.scope import ScopeConfig, check
from squall.urls import NormalizerConfig, canonicalize, host_of
from topology import app, settings, status_topic, urls_table

log = logging.getLogger("squall.status")
NORMALIZER = NormalizerConfig.from_settings(settings)
SCOPE = ScopeConfig.from_settings(settings)
SCHEDULE = ScheduleConfig.from_settings(settings)
MODE = settings["partition.url.mode"]
BY_IP = MODE == "byIP"
PERSIST = tuple(settings["metadata.persist"])


@app.agent(status_topic)
async def status_updater(stream):
    async for event in stream.events():
        try:
            msg = StatusMessage.from_bytes(event.value)
            url = canonicalize(msg.url, NORMALIZER, seed=msg.seed)   # userinfo: dropped from links, refused in seeds
        except (MessageError, InvalidURL) as exc:
            await deadletter(event.value, exc)
            continue
        try:
            key, by_address = _address_key(msg, url, event) if BY_IP else (partition_key(url, MODE), False)
            if key is None:
                continue  # byIP: routed once its host is resolved, or refused without a lookup
            partition = partition_for_key(key, PARTITIONS)
            if partition != event.message.partition:
                # produced with another partitioner (e.g. kcat's default), or byIP: route it to its owner
                value = _moving(msg, url, key, event.value) if by_address else event.value
                await status_topic.send(key=key.encode(), value=value, partition=partition)
                if value is not event.value:
                    _forget(url)
                continue
            update(msg, url, key, time.time())
        except (ValueError, TypeError, KeyError) as exc:  # e.g. a stored record of an older shape
            log.exception("squall: status update of %s failed", url)
            await deadletter(event.value, exc)


def _address_key(msg: StatusMessage, url: str, event) -> tuple[str | None, bool]:  # noqa: ANN001 (faust Event)
    """byIP: ``(key, by address)`` of ``url`` from this worker's resolutions; key None while it is resolved.

    On None the event's ack is held and the message is sent again, keyed by
    the resolved address, once the lookup ends (:func:`_route_when_resolved`).
    A discovered URL that no queue would admit (refused by scope or a trap
    guard even for a seeded, empty host) is not resolved: its refusal is
    counted under its host name, on that name's partition (key None here).
    """
    host, port = host_port(url)
    refused = None if msg.fetched_at_s is not None or msg.moved is not None else check(
        url, depth=msg.depth, host_seeded=True, host_url_count=0, config=SCOPE)
    if refused is not None:
        name_key = provisional_key(host)
        if partition_for_key(name_key, PARTITIONS) != event.message.partition:
            return name_key, False
        save_host(load_host(name_key).with_rejection(refused.value))
        return None, False
    known = addresses.known(host, port)
    if known is not None:
        return status_key(host, known), True
    event.message.incref()  # acked by _route_when_resolved once the message is on its way
    asyncio.get_running_loop().create_task(_route_when_resolved(host, port, event))
    return None, True


async def _route_when_resolved(host: str, port: int, event) -> None:  # noqa: ANN001 (faust Event)
    try:
        key = status_key(host, await addresses.resolve(host, port))
        await status_topic.send(key=key.encode(), value=event.value, partition=partition_for_key(key, PARTITIONS))
        event.ack()
    except Exception:  # un-acked: re-delivered to the partition's next owner
        log.exception("squall: could not route a status message of %s after resolving it", host)


def _moving(msg: StatusMessage, url: str, key: str, value: bytes) -> bytes:
    """byIP: the message to send to ``key``'s partition (``value`` as received when no record of ``url`` is here).

    The record travels with the message (and is forgotten here by the
    caller) so the URL lives with its queue's partition; a seeded name stays
    seeded under its new key.
    """
    raw = urls_table.get(url.encode())
    if raw is None:
        return value
    old = UrlRecord.from_dict(raw)
    seeded = load_host(old.key).seeded_for(host_of(url), BY_IP)
    log.info("squall: %s moves from %s to %s", url, old.key, key)
    return replace(msg, moved=replace(old, key=key).to_dict(), seed=msg.seed or seeded).to_bytes()


def _forget(url: str) -> None:
    """Delete the record of ``url`` from this partition (it moved with its host) and from the due index."""
    raw = urls_table.get(url.encode())
    if raw is None:
        return
    index = state.index_for_key(UrlRecord.from_dict(raw).key)
    if index is not None:
        index.remove(url)
    del urls_table[url.encode()]


def update(msg: StatusMessage, url: str, key: str, now_s: float) -> None:
    """Apply one decoded status message to the tables and the due index."""
    host = load_host(key)
    name = host_of(url)
    if msg.seed and not host.seeded_for(name, BY_IP):
        host = host.with_seed(name)
        save_host(host)
    raw = urls_table.get(url.encode())
    if raw is None and msg.moved is not None:  # byIP: its host moved here; the record came along
        raw = {**msg.moved, "key": key}
        save_host(replace(host, url_count=host.url_count + 1))
        _store(UrlRecord.from_dict(raw))
    if raw is None:
        if msg.fetched_at_s is None:
            reason = check(url, depth=msg.depth, host_seeded=host.seeded_for(name, BY_IP),
                           host_url_count=host.url_count, config=SCOPE)
            if reason is not None:
                save_host(host.with_rejection(reason.value))
                return
        record = new_record(msg, url=url, key=key, now_s=now_s, metadata=dict(msg.metadata))
        save_host(replace(host, url_count=host.url_count + 1))
        if msg.fetched_at_s is None:
            _store(record)
            return
    else:
        record = UrlRecord.from_dict(raw)
        if record.key != key:  # byIP: its host moved to another address of this same partition
            _forget(url)
            record = replace(record, key=key)
            _store(record)
    updated = apply(record, msg, SCHEDULE, metadata=md.for_record(record.metadata, msg.metadata, PERSIST))
    if updated is not record:
        _store(updated)


def _store(record: UrlRecord) -> None:
    urls_table[record.url.encode()] = record.to_dict()
    index = state.index_for_key(record.key)
    if index is None:
        return
    if record.next_fetch_at_s is None:
        index.remove(record.url)
    else:
        index.push(record.key, record.url, record.next_fetch_at_s, record.priority)
