"""Which offset of a partition may be committed, given the acknowledged and the unacknowledged ones.

Kafka's committed offset is the *next* offset to read: committing ``n``
says "every offset below ``n`` is done". A consumer that acknowledges
out of order (squall's fetcher holds each fetch message's ack until its
results are sent, and a fast host finishes before a slow one) may commit
only up to its first offset still in processing, or a crash loses that
message: it is never re-delivered, and its URL stays "in flight" in the
hosts table until ``frontier.inflight.timeout.secs``.

faust-streaming 0.15.3's ``Consumer._new_offset`` commits the end of the
first run of consecutive acknowledged offsets and checks the head of that
run against the committed offset with ``min(acked) - committed > 1``. That
check lets through exactly the case it is meant to stop — one
unacknowledged offset right at the committed position (``committed`` is the
next offset to read, so ``acked[0] == committed + 1`` means ``committed``
itself is missing) — and it is skipped when nothing was committed yet (a
new consumer group) or the committed offset is 0 (Faust stores 0 as
``None``). Its gap bookkeeping (offsets missing from the log) also marks the
first message *after* a gap as done. :func:`committable_offset` adds the bound
that makes all three safe: the run must start at the committed offset when
that is known (a missing offset there — one never delivered, e.g. dropped
by a seek — is not skipped), and the commit never reaches the first
unacknowledged offset the consumer still tracks. squall's topics are neither
transactional nor compacted (agents never read a changelog), so every offset
of a stream partition is a message that gets acknowledged.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def committable_offset(
    acked: Sequence[int], committed: int | None, first_unacked: int | None
) -> tuple[int | None, int]:
    """The offset to commit and how many leading entries of ``acked`` it covers.

    ``acked``: acknowledged offsets not committed yet, sorted ascending, no
    duplicates. ``committed``: the partition's committed offset (the next
    offset to read), ``None`` when unknown (Faust also stores 0 as ``None``).
    ``first_unacked``: the lowest offset of this partition read but not
    acknowledged yet (in an agent's buffer or in processing), ``None`` if
    none. Returns ``(None, 0)`` when nothing may be committed.
    """
    if not acked:
        return None, 0
    if committed is not None and acked[0] > committed:
        return None, 0  # offset `committed` itself is not acknowledged: nothing may be committed yet
    end = acked[0] + 1
    while end - acked[0] < len(acked) and acked[end - acked[0]] == end:
        end += 1  # the first run of consecutive offsets: acked[0] .. end - 1
    if first_unacked is not None and first_unacked < end:
        end = first_unacked  # never commit over an offset still being processed
    if end <= acked[0]:
        return None, 0
    return end, end - acked[0]


class StuckWatch:
    """Stream partitions whose uncommitted messages stopped coming: read them again (docs/faults.md: stranded messages).

    A partition is *stuck* when the broker holds messages past its committed
    offset (``end > committed``), nothing of it is in processing here, and the
    committed offset has not moved for ``after_s`` seconds: a consumer that
    is fed would have read, processed and committed them by then (commits run
    every few seconds). Seen in the fault suite after a take-over: the new
    owner never received the message at the committed offset (and, once,
    none of the partition's messages), so its URL never reached a status.
    The caller seeks such a partition back to its committed offset; every
    step is idempotent under re-delivery. ``after_s`` <= 0 turns it off
    (``kafka.stuck.partition.secs``). Times are seconds.
    """

    def __init__(self, after_s: float) -> None:
        self.after_s = after_s
        self._since: dict[object, tuple[int, float]] = {}  # partition -> (committed offset, unchanged since)

    def observe(self, tp: object, *, committed: int | None, end: int | None, busy: bool, now_s: float) -> bool:
        """True when ``tp`` is stuck now (then re-armed: True again only after another ``after_s``).

        ``committed``: the offset the group reads ``tp`` from — its committed
        offset, or its beginning offset when nothing is committed (the
        caller's to find: Faust holds ``None`` then); ``None`` = unknown, not
        checked. ``end``: the broker's end offset, ``None`` = unknown.
        """
        if self.after_s <= 0 or committed is None or end is None or committed >= end or busy:
            self._since.pop(tp, None)
            return False
        seen = self._since.get(tp)
        if seen is None or seen[0] != committed:
            self._since[tp] = (committed, now_s)
            return False
        if now_s - seen[1] < self.after_s:
            return False
        self._since[tp] = (committed, now_s)
        return True

    def forget(self, keep: Iterable[object]) -> None:
        """Drop the partitions not in ``keep`` (revoked)."""
        kept = set(keep)
        for tp in [tp for tp in self._since if tp not in kept]:
            del self._since[tp]
