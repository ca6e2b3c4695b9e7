"""Upkeep around rebalances, shutdown and stuck partitions (signal receivers and a timer, no stream).

* After every rebalance (restart included) the due indexes of the owned
  partitions are rebuilt from the urls and hosts tables
  (:meth:`agents.worker_state.WorkerState.rebuild`).
* The fetcher's runtime lets go of revoked partitions' waiting URLs, forgets
  the paces of partitions no longer owned, and closes what it opened at
  shutdown (:class:`squall.worker.fetch_runtime.FetcherRuntime`).
* Every 5 s a stream partition whose messages stopped coming is read again
  (``kafka.stuck.partition.secs``, :mod:`squall.worker.offset_commit`).
"""

from __future__ import annotations

import time

from agents.common import fetch_runtime, forget_cached_records
from agents.observe import observed
from agents.render import close_pool
from agents.worker_state import owned_partitions, state
from squall.worker.offset_commit import StuckWatch
from topology import app, fetch_topic, settings


def stuck_watch() -> StuckWatch:
    """The worker's :class:`StuckWatch` (``kafka.stuck.partition.secs``), created on first use, held by the app."""
    held = app.squall_stuck_watch
    if held is None:
        held = app.squall_stuck_watch = StuckWatch(settings.kafka_stuck_partition_secs)
    return held


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _rebuild_after_recovery(sender, **kwargs) -> None:
    forget_cached_records()  # the recovery wrote the stores of newly assigned partitions beneath the cache
    await state().rebuild(owned_partitions())


@app.timer(5.0)
async def _read_stuck_partitions_again() -> None:
    """A stream partition whose messages stopped coming is read again (``kafka.stuck.partition.secs``)."""
    read_again = getattr(app.consumer, "read_stuck_again", None)  # squall's consumer (squall.worker.kafka_consumer)
    watch = stuck_watch()
    if read_again is not None and watch.after_s > 0:
        await read_again(watch, time.time())


@app.on_before_shutdown.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _close_on_shutdown(sender, **kwargs) -> None:
    """Close what the fetcher opened, once the consumer has stopped: the WARC file, HTTP sessions, the browser."""
    await fetch_runtime().close()
    await close_pool()


@app.on_partitions_revoked.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _drop_revoked(sender, revoked, **kwargs) -> None:
    forget_cached_records()  # bounded memory; a partition that comes back is read anew after its recovery
    fetch_runtime().revoke({tp.partition for tp in revoked if tp.topic == fetch_topic.get_topic_name()})


@app.on_rebalance_complete.connect  # type: ignore[arg-type]  # Faust's stubs want a keyword `signal` parameter
async def _forget_unowned(sender, **kwargs) -> None:
    owned = owned_partitions()
    fetch_runtime().forget_unowned(owned)
    observed().audits.forget_unowned(owned)
