"""Spout (StormCrawler's URLFrontier spout): hands out due URLs of eligible hosts.

A worker timer looks at the due index of each partition it owns and, when a
host is due, sends one tick to that partition of the ticks topic; the spout
agent then hands out inside that partition's event (Faust writes a table's
changelog to the partition of the current event). A host gets at most
``frontier.max.urls.per.bucket`` URLs per tick, only while fewer than
``frontier.handout.ahead`` of its URLs are out and its earliest start is
within ``frontier.handout.lead.secs`` (:meth:`squall.policy.frontier.HostRecord.eligible_at_s`):
the URLs travel ahead of the delay and the fetcher's queue starts each on
time (docs/architecture.md invariants 2 and 6). The hand-out is recorded in the
durable hosts table before the URLs are sent.
"""

from __future__ import annotations

import logging
import time

from agents import queues
from agents.common import fetch_runtime, load_host, save_host
from agents.worker_state import state
from squall.policy.pace import on_takeover
from squall.policy.records import FetchMessage, TickMessage
from squall.policy.takeover import Watch, own_handout, stranded
from topology import app, fetch_topic, settings, ticks_topic

log = logging.getLogger("squall.spout")


@app.agent(ticks_topic)
async def spout(stream):
    async for event in stream.events():
        partition = event.message.partition
        state().tick_sent_at.pop(partition, None)
        now = time.time()
        release_stranded(partition, now)
        release_lost(partition, now)
        for msg in hand_out(partition, time.time()):
            await fetch_topic.send(key=msg.key.encode(), value=msg.to_bytes())


def hand_out(partition: int, now_s: float) -> list[FetchMessage]:
    """Take the due URLs of eligible hosts of ``partition`` and record them as in flight."""
    index = state().indexes.get(partition)
    if index is None or partition in fetch_runtime().operator.paused_partitions:  # crawl.pause: none
        return []
    out: list[FetchMessage] = []
    for key, urls in index.pop_due(now_s, settings.frontier_max_urls_per_bucket):
        host = load_host(key)
        updated, messages = queues.hand_out(index, key, host, urls, now_s)
        if updated is not host:
            save_host(updated)
        out.extend(messages)
    return out


def release_stranded(partition: int, now_s: float) -> None:
    """Hand out again the earlier owner's hand-outs that never reached this worker (:mod:`squall.policy.takeover`).

    Their URLs leave the host's in-flight list and go back to the due index;
    the durable pace keeps the take-over rule (one delay after the take-over).
    """
    held = state()
    pending, index = held.stranded.get(partition), held.indexes.get(partition)
    since = held.assigned_at.get(partition)
    if not pending or index is None or since is None:
        return
    grace, rt = settings.frontier_takeover_grace_secs, fetch_runtime()

    def received(url: str, handed_out_at_s: float) -> bool:  # fetched before the take-over: reported then, or lost
        return rt.copies.received(url, handed_out_at_s, since)

    for key in [k for k, at in pending.items() if at <= now_s]:
        host = load_host(key)
        urls = stranded(
            host.in_flight, since, host.delay_s, grace, now_s, received, results_in=lambda: held.results_in(partition)
        )
        if urls is None:  # a longer delay now, or results of the earlier owner still to apply: not yet
            pending[key] = now_s + host.delay_s
            continue
        del pending[key]
        if not urls:
            continue
        log.warning(
            "squall: handing out again %d hand-out(s) of %s made before this worker's take-over whose results "
            "never came and whose fetch messages did not reach its fetcher since: %s",
            len(urls),
            key,
            urls,
        )
        queues.put_back(index, host.with_pace(on_takeover(host.pace(), since, True)), urls, now_s)


def release_lost(partition: int, now_s: float) -> None:
    """Hand out again this worker's own hand-outs whose fetch messages its fetcher read past without getting them.

    :func:`squall.policy.takeover.own_handout` decides, for each watched
    hand-out whose time came (``frontier.takeover.grace.secs`` after it was
    made). One the consumer has not read up to yet is looked at again a tick
    (``frontier.tick.interval.secs``) later, and so is every one while the
    fence is closed (:meth:`agents.worker_state.WorkerState.fetches_read`).
    """
    held = state()
    watched, index = held.watched.get(partition), held.indexes.get(partition)
    rt = fetch_runtime()
    if not watched or index is None:
        return
    lost: dict[str, list[str]] = {}
    waiting: list[tuple[float, str, str, float]] = []
    while watched and watched[0][0] <= now_s:
        _due_s, key, url, handed_out_at_s = watched.popleft()
        verdict = own_handout(
            handed_out_at_s,
            rt.copies.received(url, handed_out_at_s),
            lambda: load_host(key).in_flight.get(url),  # noqa: B023 - called at once
            lambda: held.fetches_read(partition),
        )
        if verdict is Watch.WAIT:
            waiting.append((now_s + settings.frontier_tick_interval_secs, key, url, handed_out_at_s))
        elif verdict is Watch.LOST:
            lost.setdefault(key, []).append(url)
    watched.extendleft(reversed(waiting))  # the oldest, looked at again first
    for key, urls in lost.items():
        log.warning(
            "squall: handing out again %d hand-out(s) of %s whose fetch messages this worker's fetcher read past "
            "without getting them: %s",
            len(urls),
            key,
            urls,
        )
        queues.put_back(index, load_host(key), urls, now_s)


@app.timer(settings.frontier_tick_interval_secs)
async def send_ticks() -> None:
    """Every ``frontier.tick.interval.secs``: :func:`send_due_ticks` now."""
    await send_due_ticks(time.time())


async def send_due_ticks(now: float) -> None:
    """Send a tick to each owned partition with a host due by ``now`` (Unix s) or a hand-out to look at again."""
    held = state()
    for partition, index in list(held.indexes.items()):
        if partition in fetch_runtime().operator.paused_partitions:  # crawl.pause: no hand-out, no tick
            continue
        held.settle_watched(partition, now, fetch_runtime().copies.received)  # a tick only for one not received
        due = min((t for t in (index.next_due_s(), held.next_release_s(partition)) if t is not None), default=None)
        if due is None or due > now:
            continue
        sent = held.tick_sent_at.get(partition)
        if sent is not None and now - sent < settings.frontier_tick_resend_secs:
            continue
        held.tick_sent_at[partition] = now
        # readable JSON like every other topic (Kafka UI, `squall tail ticks`); the spout ignores the value
        await ticks_topic.send(key=b"tick", value=TickMessage(partition, now).to_bytes(), partition=partition)
