"""Status updater (StormCrawler's StatusUpdaterBolt): status topic → urls and hosts tables.

The agent loop, and the fetcher's own results applied where they were
fetched (:func:`apply_here`, ``frontier.result.inprocess``); what one
message does to the tables is :mod:`agents.status_apply`. The loop sends on
what that leaves: reroutes, dead letters, hand-outs and signals
(:func:`_follow_up`).
"""

from __future__ import annotations

import asyncio
import logging
import time

from agents.common import addresses, config, deadletter, fetch_runtime, group_lease
from agents.status_apply import handle, handle_decoded
from agents.status_writes import Handled
from squall.policy.address_key import status_key
from squall.policy.partition import partition_for_key
from squall.policy.records import StatusMessage
from topology import app, fetch_topic, signals_topic, status_topic

log = logging.getLogger("squall.status")


@app.agent(status_topic)
async def status_updater(stream):
    fetch_runtime().apply_here = apply_here  # the fetcher's own results, applied here (frontier.result.inprocess)
    async for event in stream.events():
        await _follow_up(handle(event.value, event.message.partition, time.time()), event)


async def apply_here(result: StatusMessage, event) -> bool:
    """Apply a fetch's own ``result`` in this worker, in ``event``'s context; False: send it to the status topic.

    ``event``: the hand-out's own (a fetch message, or the status message
    whose result started it here), held by the fetch's task: its partition
    is the host's, whose tables this worker owns until a rebalance, and the
    rebalance waits for its acknowledgement. False while the worker stops or
    rebalances or its group membership is not confirmed: the next owner reads
    the status topic, and no chain of hand-outs goes on while Faust waits for
    acknowledgements. False under byIP and with ``frontier.result.inprocess`` off.
    A result applied here is in no topic, so nothing delivers it again: its
    signal's fetch id is not added to the host record's ``seen_fetch_ids``.
    """
    if not fetch_runtime().settings.frontier_result_inprocess or config().by_ip:
        return False
    lease = group_lease()
    if app.should_stop or app.rebalancing or (lease is not None and not lease.holds()):
        return False
    done = handle_decoded(result, None, event.message.partition, time.time(), redeliverable=False)
    try:
        await _follow_up(done, event)
    except Exception:  # applied: never reported again; a hand-out not started comes back by the take-over watch
        log.exception("squall: sending what the result of %s left to send failed", result.url)
    return True


async def _follow_up(done: Handled, event) -> None:
    """Send what applying ``event``'s message left to send: reroutes, dead letters, hand-outs, signals."""
    for key, partition, value in done.reroutes:
        await status_topic.send(key=key, value=value, partition=partition)
    for value, exc in done.dead:
        await deadletter(value, exc)
    for msg in done.handouts:  # the next URLs of hosts whose result freed a place (agents.queues)
        if not await fetch_runtime().start_here(msg, event):  # frontier.handout.inprocess
            await fetch_topic.send(key=msg.key.encode(), value=msg.to_bytes())
    for signal in done.signals:  # signals this event could not apply with their result
        await signals_topic.send(key=signal.key.encode(), value=signal.to_bytes())
    for host, port, value in done.pending:  # byIP: routed once the host is resolved
        event.message.incref()  # acked by _route_when_resolved once the message is on its way
        asyncio.get_running_loop().create_task(_route_when_resolved(host, port, value, event))


async def _route_when_resolved(host: str, port: int, value: bytes, event) -> None:
    """byIP: resolve ``host:port`` (off the loop), then send ``value`` to its key's partition and ack."""
    try:
        key = status_key(host, await addresses().resolve(host, port))
        await status_topic.send(key=key.encode(), value=value, partition=partition_for_key(key, config().partitions))
        event.ack()
    except Exception:  # un-acked: re-delivered to the partition's next owner
        log.exception("squall: could not route a status message of %s after resolving it", host)
