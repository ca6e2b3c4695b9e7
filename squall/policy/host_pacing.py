"""How one fetch signal changes its host's durable record (the queue regulator's policy).

Pure. The pace itself is :mod:`squall.policy.pace`'s — the same
:func:`squall.policy.pace.after_fetch` the fetcher's gate applied to the same fetch —
so the hosts table and the fetcher never disagree. This module adds what only
the durable record has:

* the URL's hand-out place is freed (only the hand-out the signal is about:
  a signal of an older hand-out never frees a newer one);
* a signal already applied (same ``fetch_id``) changes nothing: Kafka
  delivers at least once (docs/architecture.md invariant 3). The last
  ``frontier.signals.remembered`` fetch ids are kept per host;
* a signal of a request that frees its hand-out counts one page fetched
  (``pages_fetched``, what an operator's page limit is checked against,
  :mod:`squall.policy.control`).
"""

from __future__ import annotations

from squall.policy.codec import evolve
from squall.policy.frontier import HostRecord
from squall.policy.pace import FetchEnded, PaceConfig, after_fetch
from squall.policy.records import SignalMessage


def ended_of(signal: SignalMessage) -> FetchEnded:
    """The pace event a signal reports (the fetcher built the signal from this same event)."""
    return FetchEnded(
        fetch_id=signal.fetch_id,
        kind=signal.kind,
        at_s=signal.at_s,
        requested=signal.requested,
        crawl_delay_s=signal.crawl_delay_s,
        retry_until_s=signal.retry_until_s,
        forwarded_crawl_delay_s=signal.robots_crawl_delay_s,
    )


def apply_signal(host: HostRecord, signal: SignalMessage, config: PaceConfig, remembered: int) -> HostRecord:
    """Return ``host`` after ``signal``; ``host`` itself when it was already applied.

    Args:
        host: the durable record of the signal's queue.
        signal: one fetch's report (see :class:`squall.policy.records.SignalMessage`).
        config: the pace settings (:class:`squall.policy.pace.PaceConfig`).
        remembered: ``frontier.signals.remembered``, fetch ids kept for idempotence;
            0 keeps none of this one (a signal that nothing can deliver again:
            a result applied in the process that fetched it).

    Raises:
        ValueError: the stored pace state has the wrong shape (a record of an older layout).
    """
    if signal.fetch_id in host.seen_fetch_ids:
        return host
    pace = after_fetch(host.pace(), ended_of(signal), config)
    in_flight = dict(host.in_flight)
    freed = False
    if signal.handed_out_at_s is None or in_flight.get(signal.url) == signal.handed_out_at_s:
        freed = in_flight.pop(signal.url, None) is not None  # a signal of an older hand-out never frees a newer one
    return evolve(
        host.with_pace(pace),
        in_flight=in_flight,
        pages_fetched=host.pages_fetched + (1 if freed and signal.requested else 0),  # against a page limit
        seen_fetch_ids=([*host.seen_fetch_ids, signal.fetch_id])[-remembered:]
        if remembered > 0
        else host.seen_fetch_ids,
    )
