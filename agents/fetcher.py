"""Fetcher (StormCrawler's FetcherBolt): fetch topic → robots, fetch queues, HTTP, parse, WARC.

The agent loop decodes and starts one task per handed-out URL. The event's
ack is held (one extra reference on the Kafka message) until the task has
sent (or applied) the URL's results and signal: a crash re-delivers it, at-least-once
(Faust's ``stream.noack()`` would disable offset tracking for the whole topic).

Each task waits for its turn in the fetch queues (:mod:`squall.policy.fetch_queues`,
``fetcher.threads.number`` slots overall), whose start times come from the
one pace model (:mod:`squall.policy.pace`); every decision — robots consequences,
statuses, conditional headers, the pace event and the signal — is
:mod:`squall.policy.fetch_decision`'s. URLs are handed out ahead of their host's
delay (``frontier.handout.ahead``), so the next one is already waiting here
when the delay ends and starts within milliseconds of the earliest allowed
time (docs/architecture.md invariant 6).

Turns, paces, fence, copies and hand-backs: the worker's one
:class:`squall.worker.fetch_runtime.FetcherRuntime`, handed to every task. The
stale-hand-out check runs *after* the turn is granted, so a copy that waited
sees the first copy's result (docs/architecture.md invariants 2 and 3).

Tasks are created inside the agent's iteration and carry the event's context:
a robots table write goes to the partition of the URL's host, as Faust requires.

``partition.url.mode: byIP`` (:func:`_address_route`): before it waits for
a turn, a URL's host is resolved (a fresh cached answer, else a lookup,
never while the queue is held) and :func:`squall.policy.address_key.fetch_route` decides: its requests (robots.txt of its origin included) connect to the
address its key names, with the URL's own Host header and SNI; a host that
resolves elsewhere now is handed back to move to its new key
(``fetch.address_changed``); an unresolvable one ends ``fetch.dns``.
"""

from __future__ import annotations

import asyncio
import logging
import time

from agents import documents, parser
from agents.addresses import host_port
from agents.common import addresses, config, deadletter, fetch_runtime
from agents.fetch_report import fail_transiently, send_report, superseded
from agents.observe import observe_fetch
from agents.render import render_step
from agents.sitemaps import emit_robots_sitemaps
from squall.errors import BlockedAddress, Fenced, FetchError, MessageError
from squall.net.http import FetchResult
from squall.policy import fetch_decision as fd
from squall.policy.address_key import Connect, Move, fetch_route
from squall.policy.outcome import Outcome, classify_failure, classify_http
from squall.policy.pace import FetchEnded, PaceState, after_fetch
from squall.policy.partition import is_ip_literal
from squall.policy.reasons import Reason, Status
from squall.policy.records import FetchMessage, SignalKind, StatusMessage
from squall.worker.fetch_runtime import FetcherRuntime, HandBack, Turn
from topology import app, fetch_topic

log = logging.getLogger("squall.fetcher")
Reported = tuple[list[StatusMessage], FetchEnded, PaceState]  # what to report of a hand-out: statuses, end, pace


@app.agent(fetch_topic)
async def fetcher(stream):
    rt = fetch_runtime()  # the worker's one fetch runtime, handed to every task of this agent
    await rt.start(lambda msg, event: _run(rt, msg, event))  # and the status updater's hand-outs here (start_here)
    async for event in stream.events():
        try:
            msg = FetchMessage.from_bytes(event.value)
        except MessageError as exc:
            await deadletter(event.value, exc)
            continue
        await rt.launch(msg, event)  # _run acks the event when the fetch is reported


async def _run(rt: FetcherRuntime, msg: FetchMessage, event) -> None:
    fid = fd.fetch_id(msg)
    try:
        if not rt.copies.first_copy(fid, event):
            return
        reported = await _fetch(rt, msg, event)
        if reported is not None:
            statuses, event_ended, pace = reported
            await send_report(rt, msg, statuses, event_ended, pace, event)
        event.ack()
        rt.copies.finished(fid, time.time())
    except Exception:  # a bug must not kill the worker nor hold the host: fail the URL transiently
        log.exception("squall: fetch of %s failed unexpectedly", msg.url)
        await fail_transiently(rt, msg, event, fid)
    finally:
        rt.pending.release()


async def _fetch(rt: FetcherRuntime, msg: FetchMessage, event) -> Reported | None:
    """One hand-out, turn by turn: robots.txt first (its own request), then the page → what to report.

    Returns None when there is nothing to report (a stale copy).
    """
    origin, refused = fd.admitted_origin(msg.url, msg.depth, config().judge)
    if refused is not None:  # a bad message, or out of the scope in force now: it ends with its reason
        status, event_ended = fd.skipped(msg, fd.Skip(Status.ERROR, refused), time.time())
        return [status], event_ended, rt.pace(msg.key, event_ended.at_s)
    address = None
    if rt.by_ip:
        if superseded(rt, msg):  # a late copy must not move nor fail a URL whose result was applied
            return None
        routed = await _address_route(rt, msg)
        if not isinstance(routed, Connect):
            return routed
        address = routed.address
    return await _turns(rt, msg, origin, address, event)


async def _turns(rt: FetcherRuntime, msg: FetchMessage, origin: str, address: str | None, event) -> Reported | None:
    """Turn by turn in the host's queue: robots.txt first when not fresh (a turn of its own), then the page."""
    while True:
        turn = await rt.turn(msg.key)
        now = time.time()
        if isinstance(turn, HandBack):
            status, event_ended = fd.deferred(msg, turn.until_s, now)
            pace = after_fetch(rt.pace(msg.key, now), event_ended, rt.operator.pace_config(msg.key))
            return [status], event_ended, pace
        try:
            if superseded(rt, msg):  # checked after the turn: a copy that waited sees the first copy's result
                turn.end(fd.ended(msg, SignalKind.OTHER, now, requested=False))
                return None
            known = rt.robots.cached(origin)
            if known is None or not known[0].is_fresh(now):
                blocked = await _robots_turn(rt, msg, origin, turn, address)
                if blocked is not None:
                    return blocked
                continue  # robots.txt was a request to this host: the page waits its own turn
            if known[0].needs_refresh(now, rt.config.robots) and origin not in rt.refreshing:
                # still fresh: use it now, refresh in the background (created here, so it carries this event)
                rt.refreshing.add(origin)
                asyncio.get_running_loop().create_task(_refresh_robots(rt, origin, msg.key, event))
            return await _fetch_page(rt, msg, turn, *known, now, address)
        finally:
            # an unexpected error never holds the host: the turn ends as a request (the politer reading)
            turn.end(FetchEnded(fetch_id="aborted:" + fd.fetch_id(msg), kind=SignalKind.OTHER, at_s=time.time()))


async def _address_route(rt: FetcherRuntime, msg: FetchMessage) -> Connect | Reported:
    """byIP: Connect to the key's address, or what to report of a URL whose host moved or cannot be used."""
    host, port = host_port(msg.url)
    route = fetch_route(msg.key, host, await addresses().fresh(host, port))
    if isinstance(route, Connect):
        return route
    now = time.time()
    if isinstance(route, Move):  # not attempted: the status updater moves its record to the new key
        log.info("squall: %s now resolves to %s (queued under %s): moving it", host, route.key, msg.key)
        status, event_ended = fd.skipped(msg, fd.Skip(Status.DISCOVERED, Reason.FETCH_ADDRESS_CHANGED, now), now)
        statuses = [status]
    else:  # fetch.dns (FETCH_ERROR, retried) or fetch.blocked_address (ERROR); no request was made
        event_ended = fd.ended(msg, SignalKind.OTHER, now, requested=False)
        statuses = fd.report(msg, classify_failure(route.reason), None, now, rt.pace(msg.key, now), None, None)
    return statuses, event_ended, after_fetch(rt.pace(msg.key, now), event_ended, rt.operator.pace_config(msg.key))


async def _robots_turn(
    rt: FetcherRuntime, msg: FetchMessage, origin: str, turn: Turn, address: str | None
) -> Reported | None:
    """Fetch robots.txt of ``origin`` in ``turn``; what to report if the origin may not be contacted, else None."""
    try:
        assert rt.http is not None  # started before the first hand-out
        entry, rules = await rt.robots.refresh(origin, rt.http, lambda: rt.hop_pause(msg.key), address)
    except BlockedAddress as exc:  # SSRF guard: the origin's address is refused, nothing was requested
        event_ended = fd.ended(msg, SignalKind.OTHER, time.time(), requested=False)
        pace = turn.end(event_ended)
        return fd.report(msg, classify_failure(exc.reason), None, event_ended.at_s, pace, None, None), event_ended, pace
    except Fenced as exc:  # the new owner of the host's partition fetches the URL: back to the frontier
        log.info("squall: %s", exc)
        now = time.time()
        status, event_ended = fd.deferred(msg, now, now)
        return [status], event_ended, turn.end(event_ended)
    turn.end(fd.robots_ended(f"robots:{fd.fetch_id(msg)}", rules, time.time(), rt.config))
    await emit_robots_sitemaps(origin, entry, msg.key)  # its Sitemap: lines enter as DISCOVERED (marked)
    return None


async def _fetch_page(
    rt: FetcherRuntime, msg: FetchMessage, turn: Turn, entry, rules, now: float, address: str | None
) -> Reported:
    """The page request of a granted turn, and what to report of it."""
    decision = fd.before_fetch(msg, entry, rules, now, rt.config)
    if isinstance(decision, fd.Skip):
        status, event_ended = fd.skipped(msg, decision, now)
        return [status], event_ended, turn.end(event_ended)
    rt.count_takeover_fetch(msg)
    await rt.token(msg.key)
    assert rt.http is not None
    rt.audit(msg.key)
    try:
        result = await rt.http.fetch(msg.url, headers=decision.headers, address=address)
    except FetchError as exc:
        outcome = classify_failure(exc.reason)
        event_ended = fd.ended(msg, outcome.signal, time.time(), requested=fd.made_request(exc.reason), go=decision)
        pace = turn.end(event_ended)
        return fd.report(msg, outcome, None, event_ended.at_s, pace, None, decision), event_ended, pace
    outcome = _classify(rt, msg, result)
    observe_fetch(result)
    archived_at_s = await rt.archive(msg, result)
    if outcome.parse:  # a JavaScript page is rendered inside this turn: it counts as a fetch of its host
        result = await render_step(msg, result, rt)
    event_ended = fd.ended(
        msg, outcome.signal, result.ended_at_s, requested=True, go=decision, retry_until_s=outcome.retry_after_s
    )
    pace = turn.end(event_ended)  # the delay runs from the end of the request (or of its render)
    parsed = await parser.parse_fetched(msg, result, rt.settings.parser_inline_max_bytes) if outcome.parse else None
    await documents.emit(msg, result, parsed)  # documents.enabled: the page's document (documents topic)
    etag, modified = result.header("ETag"), result.header("Last-Modified")
    fetched = fd.Fetched(etag, modified, result.truncated, result.payload_digest, archived_at_s)
    return fd.report(msg, outcome, fetched, result.ended_at_s, pace, parsed, decision), event_ended, pace


def _classify(rt: FetcherRuntime, msg: FetchMessage, result: FetchResult) -> Outcome:
    """What the page's HTTP answer means (status, redirect, Retry-After): :func:`squall.policy.outcome.classify_http`."""
    return classify_http(
        result.status,
        url=msg.url,
        location=result.location,
        retry_after=result.header("Retry-After"),
        chain=msg.chain,
        now_s=result.ended_at_s,
        max_redirects=rt.settings.http_redirect_max,
        normalizer=rt.normalizer,
    )


async def _refresh_robots(rt: FetcherRuntime, origin: str, key: str, event) -> None:
    """Refresh a known robots.txt ahead of its expiry, in its own turn of the host's queue.

    RFC 9309 §2.4 bounds how long a cached robots.txt may be used; refreshing
    before that keeps the host's URLs from waiting for it.
    """
    try:
        turn = await rt.turn(key)
        if isinstance(turn, HandBack):
            return  # the host is blocked: refresh later
        assert rt.http is not None  # started before the first hand-out
        try:
            entry, rules = await rt.robots.refresh(
                origin, rt.http, lambda: rt.hop_pause(key), key if rt.by_ip and is_ip_literal(key) else None
            )
            turn.end(fd.robots_ended(f"robots-refresh:{origin}:{time.time():.6f}", rules, time.time(), rt.config))
        finally:
            turn.end(FetchEnded(fetch_id=f"robots-refresh:{origin}", kind=SignalKind.OTHER, at_s=time.time()))
        await emit_robots_sitemaps(origin, entry, key)  # its Sitemap: lines enter as DISCOVERED (marked)
    except Fenced as exc:  # the host's new owner refreshes it
        log.info("squall: %s", exc)
    except Exception:
        log.exception("squall: background refresh of robots.txt for %s failed", origin)
    finally:
        rt.refreshing.discard(origin)
        del event
