"""The tables' persisted changelog offsets, written at most once a second per partition instead of once a record.

Faust keeps, in each RocksDB partition of a table, the offset of the last
changelog record it knows the store holds (``Store.set_persisted_offset``);
recovery replays the changelog from there. At-least-once Faust writes it
for every changelog record the broker acknowledges: one more RocksDB write
per table write, the largest single line of a crawl's profile after the
table writes themselves.

An offset written later only makes recovery replay more of the changelog:
each record holds a key's whole value (or its deletion), so replaying
records the store already has, in order, ends in the same state (a key the
store holds ahead of the changelog — a write whose record a SIGKILL never
let out — goes back to the changelog's value, as at the next owner). So
:class:`OffsetPersister` writes a partition's offset at the first
acknowledgement ``every_s`` or more after its last write and keeps the
newest one otherwise; :meth:`OffsetPersister.flush` writes what is kept (at
every rebalance, before Faust closes the stores of revoked partitions). A
crash or a stop loses the kept offsets, those acknowledged since their
partition's last write: recovery replays those records again.

:class:`SquallTable` is Faust's table with it (``faust.App(Table=...)``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import faust
from faust.types import TP

PERSIST_EVERY_S = 1.0  # a changelog partition's persisted offset is written at most this often (s)


class OffsetPersister:
    """Newest acknowledged changelog offset per partition, written through ``write(tp, offset)`` at most every ``every_s``.

    Times are seconds of one monotonic clock, passed in (``now_s``).
    """

    def __init__(self, write: Callable[[TP, int], None], every_s: float = PERSIST_EVERY_S) -> None:
        self._write = write
        self.every_s = every_s
        self._written_at: dict[TP, float] = {}  # tp → when its offset was last written (s)
        self._kept: dict[TP, int] = {}  # tp → newest offset not written yet
        self._newest: dict[TP, int] = {}  # tp → newest offset written or kept

    def sent(self, tp: TP, offset: int, now_s: float) -> None:
        """The broker acknowledged changelog record ``offset`` of ``tp``: write it now, or keep it for later."""
        if offset <= self._newest.get(tp, -1):
            return  # never write an offset back
        self._newest[tp] = offset
        if now_s - self._written_at.get(tp, float("-inf")) >= self.every_s:
            self._write(tp, offset)
            self._written_at[tp] = now_s
            self._kept.pop(tp, None)
        else:
            self._kept[tp] = offset

    def flush(self) -> None:
        """Write every kept offset and forget it."""
        for tp, offset in self._kept.items():
            self._write(tp, offset)
            self._written_at.pop(tp, None)
        self._kept.clear()


class SquallTable(faust.Table):
    """Faust's table, whose persisted changelog offsets go through an :class:`OffsetPersister`."""

    _offsets: OffsetPersister | None = None

    @property
    def offsets(self) -> OffsetPersister:
        if self._offsets is None:
            self._offsets = OffsetPersister(lambda tp, offset: self.data.set_persisted_offset(tp, offset))
        return self._offsets

    def _on_changelog_sent(self, fut: Any) -> None:
        if self.app.in_transaction:  # exactly-once: Faust writes it when the partition commits
            super()._on_changelog_sent(fut)
            return
        res = fut.result()
        self.offsets.sent(res.topic_partition, res.offset, time.monotonic())

    async def on_rebalance(
        self, assigned: set[TP], revoked: set[TP], newly_assigned: set[TP], generation_id: int = 0
    ) -> None:
        """Write the kept offsets while every store is still open, then Faust's rebalance (closes the revoked ones)."""
        self.offsets.flush()
        await super().on_rebalance(assigned, revoked, newly_assigned, generation_id)
