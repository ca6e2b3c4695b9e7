"""Operator commands at the fetcher's gate: what a command does to the URLs waiting at one worker's fetcher.

Called by the control agent right after it applied a command to the tables
(:mod:`agents.control`), on the worker's one
:class:`squall.worker.fetch_runtime.FetcherRuntime`: the decisions are
:mod:`squall.policy.control`'s; this module only re-times the fetch queues
and hands waiting URLs back to the frontier (the path a revoke and the fence
use: each is reported "not attempted", ``fetch.deferred``, and acknowledged).
"""

from __future__ import annotations

from squall.policy import control
from squall.policy import fetch_decision as fd
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key
from squall.worker.fetch_runtime import FetcherRuntime, HandBack


def hand_back_host(rt: FetcherRuntime, key: str, until_s: float) -> None:
    """Hand back to the frontier every URL of queue ``key`` waiting at ``rt`` (due at ``until_s``, Unix s)."""
    for waiting in rt.queues.drain(key):
        if not waiting.done():
            waiting.set_result(HandBack(until_s))


def set_crawl(rt: FetcherRuntime, partition: int, crawl: control.CrawlControl, now_s: float) -> None:
    """Take the crawl-wide operator state of ``partition``; a pause hands back every URL waiting for it.

    Fetches in flight finish; nothing new starts (:meth:`FetcherRuntime.turn`
    hands back what arrives while paused).
    """
    rt.operator.set(partition, crawl)
    if crawl.paused:
        for key in [k for k in rt.queues.keys() if partition_for_key(k, rt.partitions) == partition]:  # noqa: SIM118
            hand_back_host(rt, key, now_s)
    rt.wakeup.set()


def steer(rt: FetcherRuntime, key: str, record: HostRecord, now_s: float) -> None:
    """An operator command changed queue ``key``'s record: its pace at ``rt`` follows at once.

    The operator's delay and block enter the queue's pace
    (:func:`squall.policy.control.steer_pace`); a block beyond the hand-out
    lead (:func:`squall.policy.fetch_decision.hand_back_until`), or a page
    limit the URLs waiting here would exceed, hands them back.
    """
    known = rt.paces.get(key)
    if known is not None:
        pace = control.steer_pace(known[1], record)
        rt.paces[key] = (known[0], pace)
        rt.queues.set_ready_at(key, pace.ready_at_s)
        until_s = fd.hand_back_until(pace, now_s, rt.config)
        if until_s is not None:
            hand_back_host(rt, key, until_s)
    if control.limit_reached(record, len(record.live_in_flight(rt.inflight_timeout_s, now_s))):
        hand_back_host(rt, key, now_s)
    rt.wakeup.set()
