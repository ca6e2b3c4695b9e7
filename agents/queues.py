"""A host queue's two steps, shared by the agents that own its partition: hand-out and signal.

* :func:`hand_out` takes due URLs of one eligible host from the partition's
  due index and records them in flight in the host record (not saved: the
  caller writes the record once per event). The spout calls it for the hosts
  its tick finds due; the status updater calls it for the host whose fetch
  result it just applied (:func:`hand_out_next`), so a backlogged host's
  next URL leaves in the same event and the same hosts-table write that
  freed its place — no tick, no second write.
* :func:`regulate` applies one fetch's pace signal (StormCrawler 3.7's
  QueueRegulatorBolt: the same pace model as the fetcher's gate, through
  :func:`squall.policy.host_pacing.apply_signal`) and tells the fetcher when
  the durable record is stricter than its own pace
  (:meth:`squall.worker.fetch_runtime.FetcherRuntime.learn`).

Both must run inside an event of the host's partition (Faust writes a
table's changelog to the partition of the current event).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from agents.common import config, fetch_runtime, load_host, save_host, save_url, stored_url
from agents.worker_state import state
from squall.policy.codec import evolve
from squall.policy.due_index import DueIndex
from squall.policy.frontier import HostRecord
from squall.policy.handout import choose, eligible_at_s, next_soon
from squall.policy.host_pacing import apply_signal
from squall.policy.partition import partition_for_key
from squall.policy.records import FetchMessage, SignalMessage
from squall.policy.schedule import UrlRecord
from topology import app, settings

log = logging.getLogger("squall.spout")


def regulate(host: HostRecord, signal: SignalMessage, redeliverable: bool = True) -> HostRecord:
    """``host`` after ``signal`` (``host`` itself when it was already applied); the fetcher learns a stricter pace.

    ``redeliverable``: the signal came in a message a topic can deliver
    again, so its fetch id is remembered (``frontier.signals.remembered``);
    False for a result applied in the process that fetched it, which no
    topic holds: the host record then does not grow by its fetch id.

    Raises:
        ValueError, TypeError, KeyError: the stored record has another shape
        (a record of an older layout): the caller dead-letters the message.
    """
    remembered = settings.frontier_signals_remembered if redeliverable else 0
    updated = apply_signal(host, signal, fetch_runtime().operator.pace_config(host.key), remembered)
    if updated is not host:
        fetch_runtime().learn(signal, updated)
    return updated


def hand_out(
    index: DueIndex, key: str, host: HostRecord, urls: list[str], now_s: float, eligible_by_s: float | None = None
) -> tuple[HostRecord, list[FetchMessage]]:
    """Hand out those of ``urls`` (taken from ``index``) that are due, as far as ``host`` has places.

    ``eligible_by_s`` (Unix s; default ``now_s``): the host gets URLs only if
    it is eligible by then (:meth:`squall.policy.frontier.HostRecord.eligible_at_s`).
    The others go back into the index; the host's next eligible time is set
    in it. Returns the host record (with the new hand-outs in flight at
    ``now_s``; the caller saves it when it changed) and the fetch messages to send.
    """
    records = [(r, r.next_fetch_at_s) for r in map(stored_url, urls) if r is not None and r.next_fetch_at_s is not None]
    handout = config().handout
    due = choose(host, records, now_s, now_s if eligible_by_s is None else eligible_by_s, handout)
    for r, at_s in records:
        if r not in due:  # not yet due, no free place, or the durable record says not yet: put it back
            index.push(key, r.url, at_s, r.priority)
    if due:
        host = host.with_handout([r.url for r in due], now_s)  # watched until their messages reach the fetcher:
        state().watch(partition_for_key(key, settings.topology_partitions), key, [r.url for r in due], now_s, now_s)
    index.set_host_ready(key, eligible_at_s(host, now_s, handout))
    for r in due:
        if r.attempts:
            log.info("squall: handing out %s again (status %s, attempt %d)", r.url, r.status.value, r.attempts + 1)
    return host, [
        FetchMessage(
            url=r.url,
            key=key,
            depth=r.depth,
            metadata=r.metadata,
            attempt=r.attempts,
            handed_out_at_s=now_s,
            etag=r.etag,
            last_modified=r.last_modified,
            chain=r.chain,
            payload_digest=r.payload_digest,
            archived_at_s=r.archived_at_s,
        )
        for r in due
    ]


def hand_out_next(key: str, host: HostRecord, now_s: float) -> tuple[HostRecord, list[FetchMessage]]:
    """After a fetch result freed one of ``host``'s places: its next due URLs now, if it may have them soon.

    The host qualifies when it has a free place and its earliest start
    (delay, Retry-After, back-off) is within one delay plus
    ``frontier.handout.lead.secs`` — the steady state of a backlogged host,
    whose next URL is then already waiting at the fetcher when the delay
    ends (docs/architecture.md invariant 6); the fetcher's gate still starts
    it no earlier than the pace allows. Any other host waits for the
    spout's tick, and so does every host of a worker that is stopping. Either way the host's next eligible time is set in the
    due index. Returns the host record and the fetch messages (none: the
    record unchanged).
    """
    index = state().index_for_key(key)
    if index is None:
        return host, []
    handout = config().handout
    soon = next_soon(host, now_s, handout)
    # a stopping worker hands nothing out: its fetcher hands back what waits there (the spout's timer stops too)
    go = soon and not app.should_stop and not fetch_runtime().operator.paused(key)  # crawl.pause: nothing new starts
    urls = index.take(key, now_s, handout.per_bucket) if go else []
    if not urls:
        index.set_host_ready(key, eligible_at_s(host, now_s, handout))
        return host, []
    return hand_out(index, key, host, urls, now_s, eligible_by_s=now_s + host.delay_s)


def settle_reported(key: str, url: str, handed_out_at_s: float, now_s: float) -> bool:
    """Whether ``url``'s hand-out at ``handed_out_at_s`` (Unix s), made before this worker took its partition, has its result stored.

    A SIGKILL can leave this worker's local store with a result applied here
    (``frontier.result.inprocess``) and, after Faust recovered the store by
    replaying the changelog from the last offset it had noted, an older host
    record that lists the URL in flight again; or with writes that never
    reached the changelog. Such a hand-out is settled: its URL record is
    stored again (only a write reaches the changelog), the host record stops
    listing it in flight (:func:`put_back`), and the URL is not fetched again.
    A hand-out this worker made since it took the partition is never looked
    at (no read). ``now_s`` (Unix s): the time the host's next eligible time is set for.
    """
    since = state().assigned_at.get(partition_for_key(key, settings.topology_partitions))
    if since is None or handed_out_at_s >= since:
        return False
    record = stored_url(url)
    if record is None or not record.reported_since(handed_out_at_s):
        return False
    host = load_host(key)
    if host.in_flight.get(url) == handed_out_at_s:
        put_back(state().index_for_key(key), host, [url], now_s, {url: record})
    else:
        store_again(record, handed_out_at_s)
    return True


def put_back(
    index: DueIndex | None,
    host: HostRecord,
    urls: list[str],
    now_s: float,
    known: Mapping[str, UrlRecord] | None = None,
) -> None:
    """Take ``urls`` out of ``host``'s in-flight list (saved) and put them back into the due ``index``.

    A URL whose record holds a result of that hand-out already
    (:meth:`squall.policy.schedule.UrlRecord.reported_since`: applied in this
    worker's local store before a SIGKILL, while the host record recovered from
    the changelog lists it in flight; or a URL record that reached the
    changelog in one produce request while the host record's write, due in the
    next, did not) is stored again, so the result reaches the changelog, and
    indexed at the time that result set. Its request counts in the host's
    ``pages_fetched`` (what a page limit is checked against): the host record
    lacks the signal that would have counted it, and counting a result that
    made no request only makes the limit stricter, never looser.
    ``index`` None: the partition's due index is not built yet (its rebuild
    indexes them). ``known``: records the caller read already (not read again).
    """
    records = {u: known[u] if known is not None and u in known else stored_url(u) for u in urls}
    reported = _answered(host, records)
    host = host.without_handouts(urls)
    if reported:
        host = evolve(host, pages_fetched=host.pages_fetched + len(reported))
    save_host(host)
    for url in urls:
        r = records[url]
        if r is None:
            continue
        if url in reported:
            store_again(r, reported[url])
        if index is not None and r.next_fetch_at_s is not None:
            index.push(host.key, r.url, r.next_fetch_at_s, r.priority)
    if index is not None:
        index.set_host_ready(host.key, eligible_at_s(host, now_s, config().handout))


def _answered(host: HostRecord, records: Mapping[str, UrlRecord | None]) -> dict[str, float]:
    """Those of ``records`` whose stored result answers their hand-out in ``host``: URL → hand-out time (Unix s)."""
    return {
        url: at_s
        for url, r in records.items()
        if r is not None and (at_s := host.in_flight.get(url)) is not None and r.reported_since(at_s)
    }


def store_again(record: UrlRecord, handed_out_at_s: float) -> None:
    """Write ``record``, which holds a result of its hand-out at ``handed_out_at_s`` (Unix s), again as it is.

    After a SIGKILL the local store can hold a write whose changelog record
    was never produced; only a write reaches the changelog (Faust sends one
    per table write). Inside an event of the URL's partition.
    """
    save_url(record)
    log.info("squall: %s has a result of its hand-out at %.3f already: stored again", record.url, handed_out_at_s)
