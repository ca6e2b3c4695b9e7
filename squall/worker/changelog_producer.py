"""Faust's aiokafka producer, with table changelog records handed to aiokafka directly, a round of them at a time.

Faust sends every table write to the table's changelog topic through its
own layers (``Collection.send_changelog``): a ``FutureMessage``, put in the
producer's ``ProducerBuffer``, whose task hands it, one await each, to
``Topic.publish_message`` and Faust's ``Producer.send``, then to aiokafka's
``AIOKafkaProducer.send``; each acknowledgement then runs
``Collection._on_changelog_sent``, which writes that record's offset into
the table's store (``Store.set_persisted_offset``). A crawled page makes
three or four such writes (its URL, its host, its audit record); what that
way costs against this one: ``benchmarks/changelog.py`` (docs/benchmarks.md).

:meth:`Producer.changelog` takes the encoded record instead and queues it
with the others of its changelog partition. A task of the producer
(:meth:`Producer._write_changelogs`) wakes after the loop turn that queued
the first and hands every queued record to ``AIOKafkaProducer.send``, in
order (aiokafka appends each to its open batch of that partition). A record
leaves the queue only once aiokafka has it. The last record of each
partition in a round has a callback: once acknowledged, the partition's
``on_sent(tp, offset)`` gets its offset, and the table records that one
offset (Faust's recovery replays from the offset after it).

What Faust's way guarantees still holds:

* **A partition's records keep their order.** One round at a time (a lock),
  a partition's records in the order of its writes; aiokafka keeps them in
  that order.
* **No offset is committed before the changelog records of its writes are
  handed over and acknowledged.** Faust's consumer calls
  :meth:`Producer.flush` before each commit (``Consumer.commit``), the app
  before a revoke and at stop, its table recovery after an assignment: here
  it first hands over what is queued, then waits for aiokafka as Faust's
  flush does. A round cut short (a flush cancelled, an error from ``send``)
  leaves the records it had not handed over queued, in order; a flush that
  cannot hand them over raises, so the commit after it does not happen.
* **Back-pressure.** Faust's conductor awaits the producer buffer's
  ``wait_until_ebb`` before each message it delivers; here it also hands
  over the queue, waiting when aiokafka's buffer is full, once more than
  ``ProducerBuffer.max_messages`` changelog records are queued.
* **Errors are seen.** A record the broker refuses in the end (after
  aiokafka's retries) is logged, and its offset not recorded: a round's
  last by the callback, any other by asyncio's handler of a future's
  exception never retrieved (a callback on every record would cost an
  event-loop callback each, see ``benchmarks/changelog.py``); an error from
  ``send`` in the producer's task stops the task, and with it the producer
  service, as it stops Faust's buffer task.

A table of :mod:`squall.worker.table_store` uses this path when the app's
producer is this class, the app is not in a transaction (Faust's
``processing_guarantee="exactly_once"``) and the table does not leave the
partition to Faust's partitioner (``use_partitioner``); otherwise Faust's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any

from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import TP
from mode import Service

log = logging.getLogger(__name__)

OnSent = Callable[[TP, int], None]  # (changelog partition, offset of the last record acknowledged)
Record = tuple[bytes | None, bytes | None]  # (key, value); a value of None deletes the key (a tombstone)
IDLE_S = 0.1  # how often the task looks again while aiokafka's producer is not there (before start, after stop)


class Producer(aiokafka_driver.Producer):
    """Faust's aiokafka ``Producer`` with :meth:`changelog`: table changelog records handed to aiokafka directly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[TP, tuple[OnSent, deque[Record]]] = {}
        self._queued = 0  # records in _pending
        self._ready = asyncio.Event()
        self._round = asyncio.Lock()
        self._buffer_ebb = self.buffer.wait_until_ebb
        self.buffer.wait_until_ebb = self._wait_until_ebb  # type: ignore[method-assign]  # the conductor's hook

    def changelog(self, tp: TP, key: bytes | None, value: bytes | None, on_sent: OnSent) -> None:
        """Queue one changelog record for ``tp`` (not awaited: table writes are synchronous).

        ``on_sent(tp, offset)`` is called when the last record of ``tp`` in
        a round is acknowledged, with its offset.
        """
        queued = self._pending.get(tp)
        if queued is None:
            queued = self._pending[tp] = (on_sent, deque())
        queued[1].append((key, value))
        self._queued += 1
        self._ready.set()

    @property
    def changelog_pending(self) -> int:
        """Changelog records queued and not yet handed to aiokafka."""
        return self._queued

    def changelog_queued(self, tp: TP) -> list[Record]:
        """The records of ``tp`` queued and not yet handed to aiokafka, oldest first."""
        queued = self._pending.get(tp)
        return list(queued[1]) if queued is not None else []

    @Service.task
    async def _write_changelogs(self) -> None:
        while not self.should_stop:
            await self._ready.wait()
            if self._producer is None:  # not started yet, or stopped: what is queued stays queued
                await self.sleep(IDLE_S)
                continue
            await self._send_pending()

    async def _send_pending(self) -> None:
        """Hand every queued record to ``AIOKafkaProducer.send``, in order; a callback on each partition's last.

        A record leaves the queue once ``send`` returned, so a round
        cancelled or failed mid-way leaves the rest queued, in order (aiokafka
        appends a record without a wait after its last one, so a cancelled
        ``send`` never handed its record over). Before aiokafka's producer is
        started (or after it is stopped) the records stay queued.
        """
        async with self._round:
            producer = self._producer
            if producer is None:
                return
            self._ready.clear()
            while self._pending:
                tp, (on_sent, records) = next(iter(self._pending.items()))
                done = None
                try:
                    while records:
                        key, value = records[0]
                        done = await producer.send(tp.topic, value, key=key, partition=tp.partition)
                        records.popleft()
                        self._queued -= 1
                finally:
                    if done is not None:
                        done.add_done_callback(partial(_acknowledged, tp, on_sent))
                del self._pending[tp]

    async def _wait_until_ebb(self) -> None:
        """Faust's ``ProducerBuffer.wait_until_ebb``, then the changelog queue handed over if it is over that size."""
        await self._buffer_ebb()
        if self._queued > self.buffer.max_messages:
            await self._send_pending()

    async def flush(self) -> None:
        """Hand over the queued changelog records, then wait for everything sent to be acknowledged (Faust's flush).

        Raises what ``AIOKafkaProducer.send`` raised for a record it could
        not take (the record stays queued).
        """
        await self._send_pending()
        await super().flush()

    async def on_stop(self) -> None:
        """Hand over the queued changelog records, then stop as Faust does (aiokafka's producer flushes them)."""
        try:
            await self._send_pending()
        except Exception:
            log.exception("squall: %d changelog record(s) could not be sent at stop", self._queued)
        finally:
            await super().on_stop()


def _acknowledged(tp: TP, on_sent: OnSent, done: asyncio.Future) -> None:
    """The last record of a round for ``tp`` acknowledged: ``on_sent(tp, its offset)``; refused: logged."""
    if done.cancelled():
        return
    if (error := done.exception()) is not None:
        log.error("squall: a changelog record of %s was not written: %r", tp, error)
        return
    on_sent(tp, done.result().offset)
