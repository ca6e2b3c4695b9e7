"""Status updater (StormCrawler's StatusUpdaterBolt): status topic → urls and hosts tables.

For each message: decode, canonicalize, route to the partition of its key,
then either admit a discovered URL (dedup, scope and trap guards) or apply
a fetch result (:func:`squall.schedule.apply`), and keep the due index in
step. Bad input goes to the dead-letter topic; the stream goes on.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from agents.common import deadletter, load_host, save_host
from agents.runtime import PARTITIONS, state
from squall import metadata as md
from squall.errors import InvalidURL, MessageError
from squall.partition import partition_for_key, partition_key
from squall.records import StatusMessage
from squall.schedule import ScheduleConfig, UrlRecord, apply, new_record
from squall.scope import ScopeConfig, check
from squall.urls import NormalizerConfig, canonicalize
from topology import app, settings, status_topic, urls_table

log = logging.getLogger("squall.status")
NORMALIZER = NormalizerConfig.from_settings(settings)
SCOPE = ScopeConfig.from_settings(settings)
SCHEDULE = ScheduleConfig.from_settings(settings)
MODE = settings["partition.url.mode"]
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
        key = partition_key(url, MODE)
        partition = partition_for_key(key, PARTITIONS)
        if partition != event.message.partition:
            # produced with another partitioner (e.g. kcat's default): route it to its owner
            await status_topic.send(key=key.encode(), value=event.value, partition=partition)
            continue
        try:
            update(msg, url, key, time.time())
        except (ValueError, TypeError, KeyError) as exc:  # e.g. a stored record of an older shape
            log.exception("squall: status update of %s failed", url)
            await deadletter(event.value, exc)


def update(msg: StatusMessage, url: str, key: str, now_s: float) -> None:
    """Apply one decoded status message to the tables and the due index."""
    host = load_host(key)
    if msg.seed and not host.seeded:
        host = replace(host, seeded=True)
        save_host(host)
    raw = urls_table.get(url.encode())
    if raw is None:
        if msg.fetched_at_s is None:
            reason = check(url, depth=msg.depth, host_seeded=host.seeded, host_url_count=host.url_count,
                           config=SCOPE)
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
