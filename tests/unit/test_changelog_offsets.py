"""The tables' persisted changelog offsets, written at most once a second per partition (squall.worker.changelog_offsets)."""

from __future__ import annotations

from faust.types import TP
from hypothesis import given
from hypothesis import strategies as st

from squall.worker.changelog_offsets import OffsetPersister

A, B = TP("crawl-hosts-changelog", 0), TP("crawl-hosts-changelog", 1)


def _persister(every_s: float = 1.0) -> tuple[OffsetPersister, list[tuple[TP, int]]]:
    written: list[tuple[TP, int]] = []
    return OffsetPersister(lambda tp, offset: written.append((tp, offset)), every_s), written


def test_the_first_offset_of_a_partition_is_written_and_the_next_ones_within_the_interval_are_kept() -> None:
    offsets, written = _persister()
    offsets.sent(A, 10, now_s=100.0)
    offsets.sent(A, 11, now_s=100.2)
    offsets.sent(A, 12, now_s=100.9)
    offsets.sent(B, 5, now_s=100.9)  # another partition keeps its own time
    assert written == [(A, 10), (B, 5)]
    offsets.sent(A, 13, now_s=101.0)  # a second after the last write: the newest goes
    assert written == [(A, 10), (B, 5), (A, 13)]


def test_a_flush_writes_the_newest_kept_offset_of_every_partition_once() -> None:
    offsets, written = _persister()
    for i, at in enumerate((0.0, 0.1, 0.2)):
        offsets.sent(A, 20 + i, now_s=at)
        offsets.sent(B, 40 + i, now_s=at)
    offsets.flush()
    offsets.flush()
    assert written == [(A, 20), (B, 40), (A, 22), (B, 42)]
    offsets.sent(A, 23, now_s=0.3)  # after a flush the next offset is written at once
    assert written[-1] == (A, 23)


def test_an_older_acknowledgement_never_moves_the_offset_back() -> None:
    offsets, written = _persister()
    offsets.sent(A, 30, now_s=0.0)
    offsets.sent(A, 32, now_s=0.5)
    offsets.sent(A, 31, now_s=0.6)
    offsets.flush()
    offsets.sent(A, 29, now_s=5.0)  # after a flush too
    assert written == [(A, 30), (A, 32)]


@given(st.lists(st.tuples(st.integers(1, 5), st.floats(0.0, 0.7)), min_size=1, max_size=60))
def test_the_written_offset_is_never_behind_by_more_than_the_interval_and_ends_at_the_newest(steps) -> None:
    """At every acknowledgement the stored offset covers each record acknowledged ``every_s`` or more before it."""
    offsets, written = _persister(every_s=1.0)
    offset, now, acked = 0, 0.0, []
    for step, pause in steps:
        offset, now = offset + step, now + pause
        offsets.sent(A, offset, now_s=now)
        acked.append((now, offset))
        stored = written[-1][1]
        assert all(o <= stored for at, o in acked if at <= now - 1.0)
    assert [o for _, o in written] == sorted(o for _, o in written)
    offsets.flush()
    assert written[-1] == (A, offset)
