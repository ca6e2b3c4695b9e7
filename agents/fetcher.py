"""Fetcher (StormCrawler's FetcherBolt): fetch topic → robots, fetch queues, HTTP, parse, WARC.

The agent loop only decodes and starts one task per handed-out URL. The
event's ack is held (one extra reference on the Kafka message) until the
task has sent the URL's results and signal, so its offset is committed only
then and a crash re-delivers it — at-least-once. (Faust's ``stream.noack()``
is not used: it disables offset tracking for the whole topic.) Each task waits
for its turn in the fetch queues (:mod:`squall.fetch_queues`: per-queue
delay between the end of one fetch and the start of the next,
``fetcher.threads.number`` slots overall), then runs :func:`fetch_one`.

Tasks are created inside the agent's iteration, so they carry the event's
context: the robots table write of :class:`agents.robots.RobotsService`
goes to the partition of the URL's host, as Faust requires.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from agents import parser
from agents.common import deadletter, load_host
from agents.observe import audit_request, observe_fetch, observe_result
from agents.robots import RobotsService
from squall.backoff import TokenBucket, try_take
from squall.errors import BlockedAddress, FetchError, MessageError
from squall.fetch_queues import FetchQueues
from squall.http import FetchResult, HttpConfig, HttpFetcher
from squall.outcome import Outcome, classify_failure, classify_http
from squall.partition import partition_key
from squall.records import FetchMessage, Reason, SignalKind, SignalMessage, Status, StatusMessage
from squall.robots_policy import RobotsConfig, effective_crawl_delay
from squall.urls import NormalizerConfig, origin_of
from squall.warc import WarcWriter
from topology import app, fetch_topic, settings, signals_topic, status_topic

log = logging.getLogger("squall.fetcher")
ROBOTS = RobotsConfig.from_settings(settings)
NORMALIZER = NormalizerConfig.from_settings(settings)
MODE = settings["partition.url.mode"]
THREADS: int = settings["fetcher.threads.number"]
BACKOFF_BASE_S: float = settings["frontier.backoff.base.secs"]
MAX_PENDING = THREADS * 20  # handed-out URLs held in memory before the consumer waits (back-pressure)
ROBOTS_DELAY_KEY = "robots.crawl.delay"
# the queue delay without a robots Crawl-delay (StormCrawler: server delay with one thread per queue)
DEFAULT_DELAY_S: float = (settings["fetcher.server.delay"] if settings["fetcher.threads.per.queue"] == 1
                          else settings["fetcher.server.min.delay"])


@dataclass
class FetcherRuntime:
    """Per-worker fetch machinery, created in the worker's event loop on first use."""

    queues: FetchQueues = field(default_factory=lambda: FetchQueues.from_settings(settings))
    robots: RobotsService = field(default_factory=lambda: RobotsService(ROBOTS, settings["http.robots.cache.lru.size"],
                                                                       pace=lambda o: _pace_of_origin(o)))
    http: HttpFetcher | None = None
    # fetcher-local pacing state next to the fetch queues (optional token bucket per queue)
    buckets: dict[str, TokenBucket] = field(default_factory=dict)
    refreshing: set[str] = field(default_factory=set)
    warc: WarcWriter | None = None
    free_slots: int = THREADS
    wakeup: asyncio.Event = field(default_factory=asyncio.Event)
    pending: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_PENDING))

    async def start(self) -> None:
        if self.http is None:
            self.http = await HttpFetcher(HttpConfig.from_settings(settings)).__aenter__()
            prefix = f"{settings['topology.id']}-{socket.gethostname()}-{os.getpid()}"
            self.warc = WarcWriter(Path(settings["warc.dir"]), prefix, settings["warc.max.size"])
            asyncio.get_running_loop().create_task(self._dispatch())

    async def turn(self, key: str) -> None:
        """Wait until queue ``key`` may start a fetch and a slot is free."""
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        while not self.queues.add(key, granted, time.time()):
            await asyncio.sleep(0.05)  # queue at fetcher.max.queue.size: hold the item, never drop it
        self.wakeup.set()
        await granted

    def done(self, key: str, signal: SignalMessage | None = None) -> None:
        """A fetch of queue ``key`` ended: its delay starts now (longer after a rate limit)."""
        if signal is not None and signal.kind is SignalKind.RETRY_AFTER and signal.retry_until_s:
            self.queues.block_until(key, signal.retry_until_s)  # Retry-After, also for items already here
        rate_limited = signal is not None and signal.kind is SignalKind.RATE_LIMITED
        self.queues.finish(key, time.time(), BACKOFF_BASE_S if rate_limited else None)
        self.free_slots += 1
        self.wakeup.set()

    async def _dispatch(self) -> None:
        while True:
            now = time.time()
            while self.free_slots > 0:
                taken = self.queues.take(now)
                if taken is None:
                    break
                key, granted = taken
                self.free_slots -= 1
                if granted.done():  # its task was cancelled: release the turn at once
                    self.done(key)
                else:
                    granted.set_result(None)
            ready = self.queues.next_ready_at_s()
            timeout = None if ready is None or self.free_slots == 0 else max(0.0, ready - now)
            self.wakeup.clear()
            try:
                await asyncio.wait_for(self.wakeup.wait(), timeout)
            except TimeoutError:
                pass


runtime = FetcherRuntime()
RATE_PER_S: float = settings["fetcher.server.rate"]
BURST: int = settings["fetcher.server.burst"]


@app.agent(fetch_topic)
async def fetcher(stream):
    await runtime.start()
    async for event in stream.events():
        try:
            msg = FetchMessage.from_bytes(event.value)
        except MessageError as exc:
            await deadletter(event.value, exc)
            continue
        await runtime.pending.acquire()
        event.message.incref()  # hold the ack: the stream's own ack leaves it pending until _run acks
        asyncio.get_running_loop().create_task(_run(msg, event))


async def _run(msg: FetchMessage, event) -> None:  # noqa: ANN001 (faust Event)
    try:
        if load_host(msg.key).in_flight.get(msg.url) != msg.handed_out_at_s:
            # a re-delivered hand-out whose result was already applied (the regulator freed it), or one
            # superseded by a newer hand-out: fetching it again would only hit the host twice
            log.info("squall: skipping stale hand-out of %s", msg.url)
            event.ack()
            return
        await runtime.turn(msg.key)
        signal = None
        try:
            statuses, signal = await fetch_one(msg, event)
        finally:
            runtime.done(msg.key, signal)
        observe_result(statuses[0])
        for status in statuses:
            await status_topic.send(key=partition_key(status.url, MODE).encode(), value=status.to_bytes())
        await signals_topic.send(key=msg.key.encode(), value=signal.to_bytes())
        event.ack()
    except Exception:  # a bug must not kill the worker nor hold the host: fail the URL transiently
        log.exception("squall: fetch of %s failed unexpectedly", msg.url)
        await _fail_transiently(msg, event)
    finally:
        runtime.pending.release()


async def _fail_transiently(msg: FetchMessage, event) -> None:  # noqa: ANN001 (faust Event)
    """FETCH_ERROR (retried later) and a signal that frees the host, then ack; never raises."""
    now = time.time()
    try:
        status = StatusMessage(url=msg.url, status=Status.FETCH_ERROR, reason=Reason.FETCH_PROTOCOL.value,
                               depth=msg.depth, metadata=msg.metadata, fetched_at_s=now, chain=msg.chain)
        signal = SignalMessage(key=msg.key, url=msg.url, fetch_id=f"{msg.handed_out_at_s:.6f}:{msg.url}",
                               kind=SignalKind.OTHER, at_s=now, delay_s=DEFAULT_DELAY_S,
                               handed_out_at_s=msg.handed_out_at_s)
        await status_topic.send(key=msg.key.encode(), value=status.to_bytes())
        await signals_topic.send(key=msg.key.encode(), value=signal.to_bytes())
        event.ack()
    except Exception:  # un-acked: re-delivered to the partition's next owner
        log.exception("squall: could not report the failure of %s", msg.url)


async def _refresh_robots(origin: str, key: str, event) -> None:  # noqa: ANN001 (faust Event, kept alive)
    """Refresh a known robots.txt ahead of its expiry, in its own turn of the host's queue (seed 002)."""
    try:
        await runtime.turn(key)
        try:
            await runtime.robots.refresh(origin, runtime.http)
        finally:
            runtime.done(key)
    except Exception:
        log.exception("squall: background refresh of robots.txt for %s failed", origin)
    finally:
        runtime.refreshing.discard(origin)
        del event


async def _token(key: str) -> None:
    """Wait for a token of the queue's bucket (``fetcher.server.rate``; 0 = off)."""
    while True:
        allowed, bucket, wait_s = try_take(runtime.buckets.get(key), time.time(), RATE_PER_S, BURST)
        if bucket is not None:
            runtime.buckets[key] = bucket
        if allowed:
            return
        await asyncio.sleep(wait_s)


async def fetch_one(msg: FetchMessage, event) -> tuple[list[StatusMessage], SignalMessage]:  # noqa: ANN001
    """Robots check, fetch and parse of one URL → (status messages, signal for the regulator)."""
    assert runtime.http is not None
    origin = origin_of(msg.url)
    fetch_id = f"{msg.handed_out_at_s:.6f}:{msg.url}"
    known = runtime.robots.cached(origin)
    requested = False
    if known is None or not known[0].is_fresh(time.time()):
        try:
            known = await runtime.robots.refresh(origin, runtime.http)
        except BlockedAddress as exc:  # SSRF guard: the origin's address is refused, nothing was requested
            return _messages(msg, classify_failure(exc.reason), None, fetch_id, time.time(), 0.0, None)
        requested = True  # robots.txt was a request to this host: the page waits the delay too
    elif known[0].needs_refresh(time.time(), ROBOTS) and origin not in runtime.refreshing:
        # still fresh: use it now, refresh in the background (created here, so it carries this event)
        runtime.refreshing.add(origin)
        asyncio.get_running_loop().create_task(_refresh_robots(origin, msg.key, event))
    entry, rules = known
    now = time.time()

    def no_request(status: Status, reason: Reason, **kw) -> tuple[list[StatusMessage], SignalMessage]:
        kind = SignalKind.RETRY_AFTER if kw.get("retry_after_s") else SignalKind.OTHER
        sig = SignalMessage(key=msg.key, url=msg.url, fetch_id=fetch_id, kind=kind, at_s=time.time(),
                            delay_s=DEFAULT_DELAY_S if requested else 0.0,
                            retry_until_s=kw.get("retry_after_s"), handed_out_at_s=msg.handed_out_at_s)
        return [StatusMessage(url=msg.url, status=status, reason=reason.value, depth=msg.depth,
                              metadata=msg.metadata, fetched_at_s=now, **kw)], sig

    if entry.blocks_origin:  # RFC 9309 §2.3.1.4: unreachable robots.txt = complete disallow; the host waits
        return no_request(Status.DISCOVERED, Reason.ROBOTS_DENIED, retry_after_s=entry.retry_at_s or now + 60.0)
    if not rules.allowed(msg.url):
        return no_request(Status.ERROR, Reason.ROBOTS_DENIED)
    decision = effective_crawl_delay(rules.crawl_delay_s, ROBOTS)
    if decision.too_long:
        return no_request(Status.ERROR, Reason.CRAWL_DELAY_TOO_LONG)
    runtime.queues.set_crawl_delay(msg.key, decision.delay_s)
    delay_s = decision.delay_s if decision.delay_s is not None else DEFAULT_DELAY_S
    if requested:
        await asyncio.sleep(delay_s)  # space the page from its robots.txt request like any two fetches
    await _token(msg.key)
    headers = {}
    if msg.etag:
        headers["If-None-Match"] = msg.etag
    if msg.last_modified:
        headers["If-Modified-Since"] = msg.last_modified
    audit_request(msg.key, time.time(), delay_s, load_host(msg.key).blocked_until_s)
    try:
        result = await runtime.http.fetch(msg.url, headers=headers)
    except FetchError as exc:
        outcome = classify_failure(exc.reason)
        made_request = exc.reason not in (Reason.FETCH_BLOCKED_ADDRESS.value,) and not exc.reason.startswith("url.")
        return _messages(msg, outcome, None, fetch_id, time.time(), delay_s if made_request or requested else 0.0,
                         decision.forward_s)
    outcome = classify_http(result.status, url=msg.url, location=result.location,
                            retry_after=result.header("Retry-After"), chain=msg.chain, now_s=result.ended_at_s,
                            max_redirects=settings["http.redirect.max"],
                            backoff_max_s=settings["frontier.backoff.max.secs"], normalizer=NORMALIZER)
    observe_fetch(result)
    assert runtime.warc is not None
    runtime.warc.write_fetch(msg.url, request_headers=result.request_headers, status=result.status, reason="",
                             response_headers=result.headers, body=result.body, ip=result.ip,
                             fetched_at_s=result.started_at_s, truncated=result.truncated,
                             http_version=result.http_version)
    return _messages(msg, outcome, result, fetch_id, result.ended_at_s, delay_s, decision.forward_s)


def _pace_of_origin(origin: str) -> tuple[str, float, float]:
    """(queue key, delay in force (s), blocked until (Unix s)) of a robots.txt request to ``origin``.

    For the politeness audit of robots.txt requests (:class:`agents.robots.RobotsService`):
    the queue's delay is the robots Crawl-delay already known for the origin, else the default.
    """
    key = partition_key(origin + "/", MODE)
    delay_s = DEFAULT_DELAY_S
    known = runtime.robots.cache.get(origin)
    if known is not None:
        decision = effective_crawl_delay(known[1].crawl_delay_s, ROBOTS)
        if decision.delay_s is not None:
            delay_s = decision.delay_s
    return key, delay_s, load_host(key).blocked_until_s


def _messages(msg: FetchMessage, outcome: Outcome, result: FetchResult | None, fetch_id: str, at_s: float,
              delay_s: float, forward_s: int | None) -> tuple[list[StatusMessage], SignalMessage]:
    # seed 000: robots.crawl.delay is rebuilt from the local rules, never taken from incoming metadata
    metadata = {k: v for k, v in msg.metadata.items() if k != ROBOTS_DELAY_KEY}
    if forward_s is not None:
        metadata[ROBOTS_DELAY_KEY] = [str(forward_s)]
    out = [StatusMessage(
        url=msg.url, status=outcome.status, depth=msg.depth, metadata=metadata,
        reason=outcome.reason.value if outcome.reason else None, http_status=outcome.http_status,
        redirect_to=outcome.redirect_to, fetched_at_s=at_s, retry_after_s=outcome.retry_after_s,
        etag=result.header("ETag") if result else None,
        last_modified=result.header("Last-Modified") if result else None,
        not_modified=outcome.not_modified, truncated=bool(result and result.truncated), chain=msg.chain)]
    if outcome.status is Status.REDIRECTION and outcome.redirect_to:
        out.append(StatusMessage(url=outcome.redirect_to, depth=msg.depth, chain=msg.chain + [msg.url],
                                 metadata={k: v for k, v in metadata.items() if k != ROBOTS_DELAY_KEY}))
    if outcome.parse and result is not None:
        recorded, links = parser.parse(result, depth=msg.depth, metadata=metadata)
        out[0].metadata.update(recorded)
        out.extend(links)
    signal = SignalMessage(key=msg.key, url=msg.url, fetch_id=fetch_id, kind=outcome.signal, at_s=at_s,
                           delay_s=delay_s, retry_until_s=outcome.retry_after_s if outcome.signal is SignalKind.RETRY_AFTER else None,
                           robots_crawl_delay_s=forward_s, handed_out_at_s=msg.handed_out_at_s)
    return out, signal
