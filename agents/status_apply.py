"""What one status message does to the urls and hosts tables (a helper of :mod:`agents.status_updater`, no agent).

For each message: decode, canonicalize, route to the partition of its key,
then admit discovered URLs (:mod:`squall.policy.admission`, scope and trap
guards; a batch of one page's outlinks shares one read and one write of its
host record) or apply a fetch result (:func:`squall.policy.schedule.apply`),
and keep the due index in step. Bad input is dead-lettered; the stream goes on.

``partition.url.mode: byIP``: the key is the address the URL's host resolves
to (:mod:`squall.policy.address_key`). A host not resolved yet on this worker is
looked up in its own task while the loop goes on; its URL's message is then
sent to the partition of its address (the event's ack held until then,
at-least-once). A message that reaches the partition holding the URL's
record under a key its host no longer resolves to takes the record along to
the new key's partition (``StatusMessage.moved``) and the record is deleted
here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from agents.addresses import host_port
from agents.common import addresses, config, delete_url, load_host, save_host, save_url, stored_url, tables
from agents.observe import observed
from agents.queues import hand_out_next, regulate
from agents.status_writes import Handled, Writes
from agents.worker_state import state
from squall.errors import InvalidURL, MessageError
from squall.policy import metadata as md
from squall.policy.address_key import status_key
from squall.policy.admission import nothing_if_known, seeded, with_refusals
from squall.policy.codec import evolve
from squall.policy.frontier import HostRecord
from squall.policy.partition import partition_for_key, partition_key
from squall.policy.reasons import Reason
from squall.policy.records import StatusMessage
from squall.policy.schedule import UrlRecord, apply, new_record
from squall.policy.urls import canonicalize, host_of

log = logging.getLogger("squall.status")


def handle(value: bytes, partition: int, now_s: float) -> Handled:
    """Decode one status message consumed from ``partition`` and apply it; never raises for bad input.

    Every URL of the message (``url`` and a batch's ``more_urls``) is
    canonicalized; those whose partition key maps to another partition (a
    producer with another partitioner, e.g. kcat's default) are routed to
    their owner, the others applied by :func:`update`, one call per key. A
    result's ``discovered`` batch (the page's outlinks of its own partition)
    is applied first, in the same event: each host record is written once
    (:class:`Writes`), then the URL records.
    """
    try:
        msg = StatusMessage.from_bytes(value)
    except MessageError as exc:
        done = Handled()
        done.dead.append((value, exc))
        return done
    return handle_decoded(msg, value, partition, now_s)


def handle_decoded(
    msg: StatusMessage, value: bytes | None, partition: int, now_s: float, redeliverable: bool = True
) -> Handled:
    """:func:`handle` of a message decoded already (``value``: its bytes, for a dead letter or a reroute).

    ``value`` None: the bytes are made from ``msg`` only if one is sent
    (a result applied in the process that fetched it, which none is, but for
    a failure). ``redeliverable`` False: ``msg`` is such a result, in no
    topic (see :attr:`agents.status_writes.Writes.redeliverable`).
    """
    done = Handled(writes=Writes(redeliverable=redeliverable))
    try:
        canon = _seed_canonical if msg.seed else config().canonical  # seeds are few: not memoized
        url = canon(msg.url)
        key = partition_key(url, config().mode)
    except InvalidURL as exc:
        done.dead.append((_bytes_of(value, msg), exc))
        done.signals.extend([msg.signal] if msg.signal is not None else [])
        if msg.discovered is not None:  # the page's outlinks are good input of their own
            _handle_decoded(msg.discovered, value, partition, now_s, done)
        _hand_out_and_flush(done, now_s)
        return done
    if not config().by_ip and partition_for_key(key, config().partitions) != partition:
        done.reroutes.append((key.encode(), partition_for_key(key, config().partitions), _bytes_of(value, msg)))
        return done
    if msg.discovered is not None:
        _handle_decoded(msg.discovered, value, partition, now_s, done)
        msg = evolve(msg, discovered=None)
    _handle_decoded(msg, value, partition, now_s, done, (url, key, canon))
    _hand_out_and_flush(done, now_s)
    return done


def _handle_decoded(
    msg: StatusMessage,
    value: bytes | None,
    partition: int,
    now_s: float,
    done: Handled,
    first: tuple[str, str, Callable[[str], str]] | None = None,
) -> None:
    """Apply one decoded message (``first``: its canonical URL, key and canonicalizer, when known)."""
    canon: Callable[[str], str]
    if first is None:
        try:
            canon = _seed_canonical if msg.seed else config().canonical
            url = canon(msg.url)
            key = partition_key(url, config().mode)
        except InvalidURL as exc:  # one bad link of a batch: the others go on
            done.dead.append((_single(msg, msg.url), exc))
            if msg.more_urls:
                rest = evolve(msg, url=msg.more_urls[0], more_urls=msg.more_urls[1:])
                _handle_decoded(rest, value, partition, now_s, done)
            return
    else:
        url, key, canon = first
    if config().by_ip:
        if msg.signal is not None:  # keyed by the fetch's address key: the queue regulator applies it
            done.signals.append(msg.signal)
            msg = evolve(msg, signal=None)
        _handle_by_address(msg, canon, [url], value, partition, now_s, done)
        return
    if partition_for_key(key, config().partitions) != partition:
        done.reroutes.append((key.encode(), partition_for_key(key, config().partitions), _single(msg, url)))
        return
    _apply_here(msg, canon, key, url, partition, value, now_s, done)


def _apply_here(
    msg: StatusMessage, canon, key: str, url: str, partition: int, value: bytes | None, now_s: float, done: Handled
) -> None:
    """Apply a message whose first URL (``url``, key ``key``) belongs to this ``partition``; others rerouted."""
    by_key = _group_by_key(msg, canon, key, url, partition, done)
    for other in msg.rejected:
        if partition_for_key(other, config().partitions) == partition:
            by_key.setdefault(other, [])
        else:  # only a foreign producer gets this wrong: the counts are not this partition's to write
            log.warning("squall: ignored rejection counts for %s, not owned by partition %d", other, partition)
    if msg.signal is not None and msg.signal.key not in by_key:
        done.signals.append(msg.signal)  # its queue's key is not the URL's (a foreign producer): on its own
        msg = evolve(msg, signal=None)
    _update_groups(msg, by_key, value, now_s, msg.rejected, done)


def _hand_out_and_flush(done: Handled, now_s: float) -> None:
    """The event's end: hand-outs for hosts whose result freed a place, then every write (:class:`Writes`).

    A host whose due URLs were all discovered in this same event gets them
    only once they are stored (a second write of its record, only then).
    """
    writes = done.writes
    empty = []
    for key in writes.regulated:
        host, handouts = hand_out_next(key, writes.host(key), now_s)
        writes.set_host(host)
        done.handouts.extend(handouts)
        observed().audits.flush_if_idle(key, host, now_s)  # its last result: the audit table catches up
        if not handouts:
            empty.append(key)
    discovered_for = {r.key for r in writes.stores if r.next_fetch_at_s is not None}
    writes.flush(_store)
    for key in empty:
        if key in discovered_for:
            host = load_host(key)
            updated, handouts = hand_out_next(key, host, now_s)
            if updated is not host:
                save_host(updated)
            done.handouts.extend(handouts)


def _group_by_key(msg: StatusMessage, canon, key: str, url: str, partition: int, done: Handled) -> dict[str, list[str]]:
    """The message's URLs of ``partition`` per partition key (``url`` first); others rerouted, bad ones dead."""
    by_key: dict[str, list[str]] = {key: [url]}
    owner: dict[str, int] = {key: partition}  # partition of each key met (murmur2 once per key)
    for more in msg.more_urls:
        try:
            canonical = canon(more)
            other = partition_key(canonical, config().mode)
        except InvalidURL as exc:
            done.dead.append((_single(msg, more), exc))
            continue
        if other not in owner:
            owner[other] = partition_for_key(other, config().partitions)
        if owner[other] == partition:
            by_key.setdefault(other, []).append(canonical)
        else:
            done.reroutes.append((other.encode(), owner[other], _single(msg, more)))
    return by_key


def _update_groups(
    msg: StatusMessage,
    by_key: dict[str, list[str]],
    value: bytes | None,
    now_s: float,
    rejected: Mapping[str, Mapping[Reason, int]],
    done: Handled,
) -> None:
    """Apply ``msg`` to each key's URLs (:func:`update`); a failure dead-letters the message and goes on."""
    for key, urls in by_key.items():
        try:
            update(msg, urls, key, now_s, rejected.get(key), done.writes)
        except (ValueError, TypeError, KeyError) as exc:  # e.g. a stored record of an older shape
            log.exception("squall: status update of %s failed", urls[0] if urls else key)
            done.dead.append((_bytes_of(value, msg), exc))


def _handle_by_address(
    msg: StatusMessage, canon, urls: list[str], value: bytes | None, partition: int, now_s: float, done: Handled
) -> Handled:
    """byIP: :func:`handle` with keys from this worker's resolutions (``urls``: the canonical first URL).

    A URL whose host is not resolved yet is left ``pending``; those of other
    partitions are routed there (grouped per key into one batch; a URL whose
    record is here goes alone, with its record, see :func:`_moving`); the
    parse step's rejection counts (keyed by host name) stay with the
    partition of their name.
    """
    for more in msg.more_urls:
        try:
            urls.append(canon(more))
        except InvalidURL as exc:
            done.dead.append((_single(msg, more), exc))
    by_key, away = _by_address(msg, urls, value, partition, done)
    for key, group in away.items():
        batch = evolve(msg, url=group[0], more_urls=group[1:], rejected={}).to_bytes()
        done.reroutes.append((key.encode(), partition_for_key(key, config().partitions), batch))
    rejected: dict[str, Mapping[Reason, int]] = {}
    for name, counts in msg.rejected.items():
        if partition_for_key(name, config().partitions) == partition:
            rejected[name] = counts
            by_key.setdefault(name, [])
    _update_groups(msg, by_key, value, now_s, rejected, done)
    return done


def _by_address(
    msg: StatusMessage, urls: list[str], value: bytes | None, partition: int, done: Handled
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """byIP: ``urls`` per address key, (this partition's, other partitions'); unresolved left pending, moved sent."""
    by_key: dict[str, list[str]] = {}
    away: dict[str, list[str]] = {}
    for url in urls:
        host, port = host_port(url)
        known = addresses().known(host, port)
        if known is None:
            done.pending.append(
                (host, port, _single(msg, url) if len(urls) > 1 or msg.rejected else _bytes_of(value, msg))
            )
            continue
        key = status_key(host, known)
        if partition_for_key(key, config().partitions) == partition:
            by_key.setdefault(key, []).append(url)
            continue
        try:
            moving = _moving(msg, url, key)
            if moving is not None:
                _forget(url)
        except (ValueError, TypeError, KeyError) as exc:  # a stored record of an older shape
            log.exception("squall: moving %s to %s failed", url, key)
            done.dead.append((_single(msg, url), exc))
            continue
        if moving is None:
            away.setdefault(key, []).append(url)
        else:
            done.reroutes.append((key.encode(), partition_for_key(key, config().partitions), moving))
    return by_key, away


def _moving(msg: StatusMessage, url: str, key: str) -> bytes | None:
    """byIP: ``url``'s message for ``key``'s partition with its record from here, or None (no record here).

    The record travels with the message (the caller forgets it here) so the
    URL lives with its queue's partition; a seeded name stays seeded under
    its new key.
    """
    old = stored_url(url)
    if old is None:
        return None
    seeded = load_host(old.key).seeded_for(host_of(url), config().by_ip)
    log.info("squall: %s moves from %s to %s", url, old.key, key)
    return evolve(
        msg, url=url, more_urls=[], rejected={}, moved=evolve(old, key=key).to_dict(), seed=msg.seed or seeded
    ).to_bytes()


def _forget(url: str) -> None:
    """Delete the record of ``url`` from this partition (it moved with its host) and from the due index."""
    record = stored_url(url)
    if record is None:
        return
    index = state().index_for_key(record.key)
    if index is not None:
        index.remove(url)
    delete_url(url)


def _seed_canonical(url: str) -> str:
    """A seed's canonical URL: userinfo refused (a link's is dropped), see :func:`squall.policy.urls.canonicalize`."""
    return canonicalize(url, config().normalizer, seed=True)


def _bytes_of(value: bytes | None, msg: StatusMessage) -> bytes:
    """The message's bytes as read, or made from ``msg`` (a result applied in process has none)."""
    return value if value is not None else msg.to_bytes()


def _single(batch: StatusMessage, url: str) -> bytes:
    """The message of one URL of a batch, on its own (for another partition, or the dead-letter topic)."""
    return evolve(batch, url=url, more_urls=[], rejected={}).to_bytes()


def update(
    msg: StatusMessage,
    urls: list[str],
    key: str,
    now_s: float,
    rejected: Mapping[Reason, int] | None = None,
    writes: Writes | None = None,
) -> None:
    """Apply one decoded status message to the tables and the due index, for one partition key.

    ``urls``: the message's canonical URLs of partition key ``key`` (one for
    a fetch result, any number for a batch of outlinks); ``rejected``: the
    parse step's refusals of links of ``key``, per reason. A result's signal
    of queue ``key`` is applied too (:func:`agents.queues.regulate`; the
    place it frees is handed out at the event's end). ``writes``: the event's
    write buffer (:class:`Writes`); without one, written at once.
    """
    own = writes is None
    writes = Writes() if writes is None else writes
    host = writes.host(key)
    if msg.seed:
        host = seeded(host, urls, config().by_ip)
    host = with_refusals(host, rejected)
    for url in urls:
        host = _apply(msg, url, key, host, now_s, writes.stores)
    if msg.signal is not None and msg.signal.key == key:
        host = regulate(host, msg.signal, writes.redeliverable)
        writes.regulated.append(key)
    writes.set_host(host)
    if own:
        writes.flush(_store)


def _apply(
    msg: StatusMessage, url: str, key: str, host: HostRecord, now_s: float, stores: list[UrlRecord]
) -> HostRecord:
    """Apply ``msg`` to one URL: the host record after it; URL records to store are appended to ``stores``.

    A result is stored even when it was applied already (a re-delivery): after a SIGKILL the local
    store can hold writes whose changelog records were never produced, and only a write reaches it.
    """
    if nothing_if_known(msg) and _known(url):
        return host  # a plain rediscovery: exact dedup on the canonical URL, nothing to decode
    discovered = msg.fetched_at_s is None
    found = stored_url(url)
    if found is None and msg.moved is not None:  # byIP: its host moved here; the record came along
        found = UrlRecord.from_dict({**msg.moved, "key": key})
        host = evolve(host, url_count=host.url_count + 1)
        stores.append(found)
    if found is None:
        reason = _out_of_scope(msg, url, host) if discovered else None
        if reason is not None:
            return host.with_rejection(reason)
        record = new_record(msg, url=url, key=key, now_s=now_s, metadata=dict(msg.metadata))
        host = evolve(host, url_count=host.url_count + 1)
        if discovered:
            stores.append(record)
            return host
    else:
        record = found
        if record.key != key:  # byIP: its host moved to another address of this same partition
            _forget(url)
            record = evolve(record, key=key)
            stores.append(record)
    updated = apply(
        record, msg, config().schedule, metadata=md.for_record(record.metadata, msg.metadata, config().persist)
    )
    if updated is not record or found is None or not discovered:  # a result applied already too: see the docstring
        stores.append(updated)
    return host


def _out_of_scope(msg: StatusMessage, url: str, host: HostRecord) -> Reason | None:
    """Why a URL new to the frontier is refused (:func:`squall.policy.scope.check`, memoized), None when in scope."""
    seeded_host = host.seeded_for(host_of(url), config().by_ip)
    return config().judge.check(url, depth=msg.depth, host_seeded=seeded_host, host_url_count=host.url_count)


def _known(url: str) -> bool:
    """Whether canonical ``url`` has a record in the urls table (the cache first; a miss is a lookup, nothing decoded)."""
    held = tables()
    return held.url_cache.get(url) is not None or url.encode() in held.urls


def _store(record: UrlRecord, handed_out_at_s: float | None) -> None:
    save_url(record)
    index = state().index_for_key(record.key)
    if index is None:
        return
    if record.next_fetch_at_s is None or record.awaited(handed_out_at_s):  # a later hand-out's result indexes it
        index.remove(record.url)
    else:
        index.push(record.key, record.url, record.next_fetch_at_s, record.priority)
