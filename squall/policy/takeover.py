"""Hand-outs stranded by an earlier owner of a partition: when the new owner hands them out again. Pure.

A hand-out is recorded in the durable hosts table (``in_flight``: URL →
hand-out time, Unix s) before its fetch message is sent, and freed by its
fetch's signal. After a take-over (restart or rebalance) the new owner
normally receives the earlier owner's unfinished fetch messages again (its
offsets were not committed) and fetches them. When one never comes — it was
committed without being fetched, or never sent because the owner died
between the record and the send — its URL holds one of the host's hand-out
places until ``frontier.inflight.timeout.secs`` (600 s): with every place so
held, the host stops (docs/faults.md: stranded messages after a take-over).

The rule: ``frontier.takeover.grace.secs`` after the take-over, and never
sooner than one delay of the host after it (the take-over rule of
:func:`squall.policy.pace.on_takeover`: the earlier owner's last request may have
started up to the take-over), each hand-out of an earlier owner that this
worker's fetcher has not received is handed out again. Should its old fetch
message still arrive, it is stale (the hosts table records the newer hand-out)
and skipped; one that the fetcher received is left to report itself.

A hand-out the earlier owner did fetch reports itself through the status
topic, and on a loaded machine its result may still wait in this worker's
status stream when the time comes: it is then neither received nor
stranded. So the release also waits until the status updater here has
applied every status message the partition held when the time came (its
committed offset reached that end offset: :func:`results_applied`); a result
applied by then has freed its URL, and only the URLs still in flight go out
again (the politer reading: one repeat fewer, a release a little later).

A worker that lost its group membership (a broker outage longer than the
session timeout) and got the partition back is an earlier owner too: a
fetch it finished before is not counted as received, since its result,
sent under the lost membership, may never have been applied (seen after
a broker restart: a host's two hand-outs fetched, never reported, and its
hand-out places held).

The same can befall this worker's own hand-outs: fetch messages sent right
after a rebalance (around a broker restart too) were seen never to reach
the fetcher, though its consumer read the partition past them.
:func:`own_handout` watches each of them ``frontier.takeover.grace.secs``
after it was made: still in flight, not received, and the fetcher's
consumer already read the fetch partition up to its end offset — the
message will not come, and the hand-out goes out again (a late copy is
skipped as stale, as above).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from enum import Enum


def release_at_s(in_flight: Mapping[str, float], owned_since_s: float, delay_s: float, grace_s: float) -> float | None:
    """When the hand-outs of an earlier owner in ``in_flight`` may be handed out again (Unix s).

    Args:
        in_flight: the host record's hand-outs, URL → hand-out time (Unix s).
        owned_since_s: since when this worker owns the host's partition (Unix s);
            a hand-out made before it is an earlier owner's.
        delay_s: the host's last delay in force (s).
        grace_s: ``frontier.takeover.grace.secs``; 0 turns the rule off.

    Returns:
        ``owned_since_s + max(grace_s, delay_s)``, or None when no hand-out
        predates the take-over or the rule is off.
    """
    if grace_s <= 0 or not any(t < owned_since_s for t in in_flight.values()):
        return None
    return owned_since_s + max(grace_s, delay_s)


def stranded(
    in_flight: Mapping[str, float],
    owned_since_s: float,
    delay_s: float,
    grace_s: float,
    now_s: float,
    received: Callable[[str, float], bool],
    *,
    results_in: Callable[[], bool],
) -> list[str] | None:
    """The earlier owner's hand-outs to hand out again now (sorted URLs), or None while it is too early.

    ``received(url, handed_out_at_s)`` tells whether this worker's fetcher
    got that hand-out's fetch message under its present ownership (it is
    waiting, fetching, or finished since ``owned_since_s``: it reports
    itself). One this worker fetched before, under an earlier ownership of
    the partition (it lost its group membership while the broker was away,
    and got the partition back), does not count: its result went out then,
    so once ``results_in()`` holds it was applied or it was lost with that
    membership. ``results_in()``, asked only once the release time has
    come, tells whether the partition's status messages up to then are
    applied (:func:`results_applied`); until it does it is too early. Other
    arguments as in :func:`release_at_s`. An empty list means the time has
    come and nothing is stranded.
    """
    at = release_at_s(in_flight, owned_since_s, delay_s, grace_s)
    if at is None:
        return []
    if now_s < at or not results_in():
        return None
    return sorted(u for u, t in in_flight.items() if t < owned_since_s and not received(u, t))


def results_applied(end_offset: int | None, committed_offset: int | None) -> bool:
    """Whether every status message of a partition below ``end_offset`` has been applied, by its committed offset.

    The committed offset, not the last offset applied: the consumer commits
    a partition only up to its first message not processed yet (fix 1 of
    :mod:`squall.worker.kafka_consumer`), so every message below it was
    applied, while messages below the last one applied may not have been
    (a rebalance dropped them from the agents' queue, fix 9; seen as a
    hand-out fetched twice). The release is then up to one commit interval
    (``broker_commit_interval``, 2.8 s) later.

    Args:
        end_offset: the partition's end offset (the next offset Kafka will
            write) when the release time came; None when not known yet.
        committed_offset: the partition's committed offset as this worker's
            consumer knows it (the next one to read: read from the broker at
            the take-over, then its own commits); None: nothing committed.

    Returns:
        True when the committed offset reached ``end_offset`` (an empty
        partition: at once); False while the end offset is unknown.
    """
    if end_offset is None:
        return False
    return (committed_offset or 0) >= end_offset


class Watch(Enum):
    """What becomes of one of this worker's own hand-outs when its watch comes due (:func:`own_handout`)."""

    DONE = "done"  # its result freed it, a newer hand-out replaced it, or the fetcher has it: no more watching
    WAIT = "wait"  # the fetcher has not read that far yet (or cannot now): look again later
    LOST = "lost"  # its fetch message will not reach the fetcher: hand it out again


def own_handout(
    handed_out_at_s: float,
    received: bool,
    in_flight_at_s: Callable[[], float | None],
    read_past: Callable[[], bool],
) -> Watch:
    """Whether a hand-out this worker made at ``handed_out_at_s`` (Unix s) was lost on its way to the fetcher.

    Args:
        handed_out_at_s: the hand-out's time, as its fetch message carries it.
        received: whether this worker's fetcher got the fetch message
            (waiting, fetching or done recently: it reports itself).
        in_flight_at_s: asked when not received; the URL's hand-out time in
            its host record now (None: not in flight any more).
        read_past: asked last; whether the fetcher's consumer has read the
            fetch partition up to the end offset it has now (a message sent
            ``frontier.takeover.grace.secs`` ago is below it).

    Returns:
        :class:`Watch`. A copy that still arrives after a LOST verdict is
        stale (the host record holds the newer hand-out) and is skipped.
    """
    if received or in_flight_at_s() != handed_out_at_s:
        return Watch.DONE
    return Watch.LOST if read_past() else Watch.WAIT


def read_through(end_offset: int | None, read_offset: int | None) -> bool:
    """Whether a consumer whose last read message is at ``read_offset`` has read every message below ``end_offset``.

    Offsets as Kafka counts them: ``end_offset`` is the next offset the
    broker will write (None: not known yet, False); ``read_offset`` the last
    one read (None: none since the partition was assigned).
    """
    if end_offset is None:
        return False
    return end_offset == 0 or (read_offset is not None and read_offset >= end_offset - 1)


def assigned_since(
    previous: Mapping[int, float],
    partitions: Iterable[int],
    now_s: float,
    previous_generation: int | None,
    generation: int,
) -> dict[int, float]:
    """Since when (Unix s) this worker owns each of ``partitions`` after a rebalance to consumer ``generation``.

    A partition keeps its earlier time only when this worker owned it in the
    group's previous generation (``generation == previous_generation + 1``):
    a worker cut off from the broker may come back to the same partitions
    after generations it took no part in, while another worker fetched its
    hosts, and its in-memory paces are incomplete then (docs/architecture.md
    invariant 2: the durable record with the take-over rule decides, made
    stricter by that memory, :func:`squall.policy.pace.stricter`).
    """
    contiguous = previous_generation is not None and generation == previous_generation + 1
    return {p: previous.get(p, now_s) if contiguous else now_s for p in partitions}
