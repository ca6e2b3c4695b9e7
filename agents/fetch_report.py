"""What a fetch reports, and how (a helper of :mod:`agents.fetcher`, no agent).

:func:`send_report` sends a hand-out's statuses and signal in the order a
crash cannot break, or applies its own result in this worker
(``frontier.result.inprocess``); :func:`fail_transiently` ends a fetch that
failed unexpectedly; :func:`superseded` tells a copy of a hand-out whose
result is applied already.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agents.observe import observe_result
from agents.queues import settle_reported
from squall.policy import fetch_decision as fd
from squall.policy.codec import evolve
from squall.policy.pace import FetchEnded, PaceState, after_fetch
from squall.policy.partition import partition_key
from squall.policy.records import FetchMessage, StatusMessage
from squall.worker.fetch_runtime import FetcherRuntime
from topology import signals_topic, status_topic

log = logging.getLogger("squall.fetcher")


def superseded(rt: FetcherRuntime, msg: FetchMessage) -> bool:
    """Whether ``msg`` is a copy of a hand-out whose result was applied (:meth:`FetcherRuntime.stale`) or is stored.

    The second case (:func:`agents.queues.settle_reported`) is a hand-out
    of an earlier run of this worker whose result its local store holds
    while the host record, recovered from the changelog, lists it in flight
    again: it is settled there and not fetched again.
    """
    stale = rt.stale(msg)
    return settle_reported(msg.key, msg.url, msg.handed_out_at_s, time.time()) or stale


async def send_report(
    rt: FetcherRuntime, msg: FetchMessage, statuses: list[StatusMessage], ended: FetchEnded, pace: PaceState, event
) -> None:
    """Send the URL's other statuses, wait until the broker has them, then apply or send its own result and signal.

    The handed-out URL's own result carries the signal that frees the
    hand-out and the page's outlinks of its own partition (one message: the
    status updater applies them in one event, with one write of each host
    record). The order matters across a crash: a signal applied frees the
    hand-out in the hosts table, and a re-delivered copy of it is then
    skipped as stale (:meth:`FetcherRuntime.stale`); were it on the broker before the
    outlinks of other partitions and a redirect's target (a SIGKILL between
    their produce batches), those would be lost. A delivery error raises:
    the task reports a transient failure through the topic. The result is
    applied here when it can be (``rt.apply_here``; not with ``event`` None).
    """
    observe_result(statuses[0])
    own = next((i for i, s in enumerate(statuses) if s.url == msg.url and s.fetched_at_s is not None), None)
    batch = None if own is None or rt.by_ip else fd.same_partition_batch(statuses, own, msg.key, rt.mode, rt.partitions)
    pending = []
    for i, status in enumerate(statuses):
        if i != own and i != batch:
            key = msg.key if status.url == msg.url else partition_key(status.url, rt.mode)  # its own: the queue's key
            pending.append(await status_topic.send(key=key.encode(), value=status.to_bytes()))
    if pending:  # most pages: every status is this partition's, in the one message below
        await asyncio.gather(*pending)
    signal = fd.signal(msg, ended, pace)
    if own is None:  # no result of the URL itself to carry it: the signal alone, to the queue regulator
        await signals_topic.send(key=msg.key.encode(), value=signal.to_bytes())
        return
    result = evolve(statuses[own], signal=signal, discovered=None if batch is None else statuses[batch])
    if event is None or rt.apply_here is None or not await rt.apply_here(result, event):
        await status_topic.send(key=msg.key.encode(), value=result.to_bytes())


async def fail_transiently(rt: FetcherRuntime, msg: FetchMessage, event, fid: str) -> None:
    """FETCH_ERROR (retried later) and a signal that frees the host, then ack; never raises."""
    try:
        status, event_ended = fd.failed_unexpectedly(msg, time.time())
        pace = after_fetch(rt.pace(msg.key, event_ended.at_s), event_ended, rt.operator.pace_config(msg.key))
        await send_report(rt, msg, [status], event_ended, pace, None)  # through the topic: never applied twice here
        event.ack()
        rt.copies.finished(fid, time.time())
    except Exception:  # un-acked: re-delivered to the partition's next owner
        log.exception("squall: could not report the failure of %s", msg.url)
