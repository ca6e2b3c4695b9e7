"""How one fetch signal changes its host's pace (the queue regulator's policy).

Pure. Combines :mod:`squall.backoff` (Retry-After, seed 002 back-off) and
:mod:`squall.crawl_delay_policy` (seed 000 robots delay, max-observed-wins)
into the :class:`squall.frontier.HostRecord` the spout reads:

* the URL's hand-out slot is freed (only the hand-out the signal is about);
* ``next_fetch_at_s`` ≥ signal time + the delay in force: the fetcher's
  delay for the queue (``fetcher.server.delay`` or the robots Crawl-delay it
  applied), raised to the forwarded robots delay when a request was made;
* ``blocked_until_s`` follows the back-off state (Retry-After capped by
  ``frontier.backoff.max.secs``; exponential back-off with jitter for a
  headerless 429/503; reset after a success);
* a host still backing off after ``frontier.backoff.ttl.secs`` is
  deprioritised: its hand-outs are spaced by at least
  ``frontier.backoff.max.secs`` until a success (seed 002);
* a signal already applied (same ``fetch_id``) changes nothing: Kafka
  delivers at least once (ARCHITECTURE.md invariant 3).
"""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

from squall.backoff import BackoffConfig, HostBackoff, deprioritised, on_rate_limited, on_retry_after, on_success
from squall.crawl_delay_policy import CrawlDelayConfig, CrawlDelayState
from squall.crawl_delay_policy import apply_signal as apply_crawl_delay
from squall.frontier import HostRecord
from squall.records import SignalKind, SignalMessage

SEEN_FETCH_IDS = 64  # signals remembered per host for idempotent re-delivery


def apply_signal(host: HostRecord, signal: SignalMessage, backoff_config: BackoffConfig,
                 crawl_config: CrawlDelayConfig) -> HostRecord:
    """Return ``host`` after ``signal``; ``host`` itself when it was already applied."""
    if signal.fetch_id in host.seen_fetch_ids:
        return host
    backoff = HostBackoff.from_dict(host.backoff) if host.backoff else None
    if signal.kind is SignalKind.SUCCESS:
        backoff = on_success(backoff)
    elif signal.kind is SignalKind.RETRY_AFTER and signal.retry_until_s is not None:
        backoff = on_retry_after(backoff, signal.retry_until_s, signal.at_s, backoff_config)
    elif signal.kind is SignalKind.RATE_LIMITED:
        # jitter seeded by the fetch id: a replay computes the same wait
        rng = random.Random(zlib.crc32(signal.fetch_id.encode()))
        backoff = on_rate_limited(backoff, signal.at_s, backoff_config, rng)
    crawl = CrawlDelayState.from_dict(host.crawl_delay) if host.crawl_delay else None
    if signal.robots_crawl_delay_s is not None:
        crawl = apply_crawl_delay(crawl, signal.robots_crawl_delay_s, signal.at_s, crawl_config, signal.fetch_id)
    delay_s = signal.delay_s
    if delay_s > 0 and crawl is not None and crawl.delay_s:
        delay_s = max(delay_s, float(crawl.delay_s))  # frontier pacing at the requested whole seconds
    if deprioritised(backoff, signal.at_s, backoff_config):
        # backing off for longer than frontier.backoff.ttl.secs: one hand-out per maximum back-off at most
        delay_s = max(delay_s, backoff_config.max_s)
    in_flight = dict(host.in_flight)
    if signal.handed_out_at_s is None or in_flight.get(signal.url) == signal.handed_out_at_s:
        in_flight.pop(signal.url, None)  # a signal of an older hand-out never frees a newer one
    return replace(
        host,
        in_flight=in_flight,
        next_fetch_at_s=max(host.next_fetch_at_s, signal.at_s + delay_s),
        blocked_until_s=backoff.blocked_until_s if backoff is not None else host.blocked_until_s,
        backoff=backoff.to_dict() if backoff is not None else None,
        crawl_delay=crawl.to_dict() if crawl is not None else None,
        seen_fetch_ids=(host.seen_fetch_ids + [signal.fetch_id])[-SEEN_FETCH_IDS:],
    )
