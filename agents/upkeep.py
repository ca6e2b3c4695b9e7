"""Upkeep after a rebalance and of stuck partitions: the due indexes rebuilt, a silent partition read again.

* After every rebalance (restart included) the due indexes of the owned
  partitions are rebuilt from the urls and hosts tables
  (:meth:`agents.worker_state.WorkerState.rebuild`).
* Every 5 s a stream partition whose messages stopped coming is read again
  (``kafka.stuck.partition.secs``, :mod:`squall.worker.offset_commit`).
"""

from __future__ import annotations

import time

from agents.worker_state import owned_partitions, state
from squall.worker.offset_commit import StuckWatch
from topology import app, settings

STUCK = StuckWatch(settings.kafka_stuck_partition_secs)


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _rebuild_after_recovery(sender, **kwargs) -> None:
    await state.rebuild(owned_partitions())


@app.timer(5.0)
async def _read_stuck_partitions_again() -> None:
    """A stream partition whose messages stopped coming is read again (``kafka.stuck.partition.secs``)."""
    read_again = getattr(app.consumer, "read_stuck_again", None)  # squall's consumer (squall.worker.kafka_consumer)
    if read_again is not None and STUCK.after_s > 0:
        await read_again(STUCK, time.time())
