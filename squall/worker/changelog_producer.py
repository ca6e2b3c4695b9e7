"""Faust's aiokafka producer, with table changelog records handed to aiokafka directly, a round of them at a time.

Faust sends every table write to the table's changelog topic through its
own layers (``Collection.send_changelog``): a ``FutureMessage``, put in the
producer's ``ProducerBuffer``, whose task hands it, one await each, to
``Topic.publish_message`` and Faust's ``Producer.send``, then to aiokafka's
``AIOKafkaProducer.send``; each acknowledgement then runs
``Collection._on_changelog_sent``, which writes that record's offset into
the table's store (``Store.set_persisted_offset``). Measured on this
project's machine against a real broker, that is 80–100 CPU-µs a record,
against 6–20 for ``AIOKafkaProducer.send`` itself; a crawled page makes three
or four such writes (its URL, its host, its audit record).

:meth:`Producer.changelog` takes the encoded record instead and queues it
with the others of its changelog partition. A task of the producer
(:meth:`Producer._write_changelogs`) wakes after the loop turn that queued
them and hands every queued record to ``AIOKafkaProducer.send``, in order
(aiokafka appends each to its open batch of that partition). Only the last
record of each partition in a round has a callback: once acknowledged, the
partition's ``on_sent(tp, offset)`` gets its offset, and the table records
that one offset (Faust's recovery replays from the offset after it).

What Faust's way guarantees still holds:

* **A partition's records keep their order.** One round at a time (a lock),
  a partition's records in the order of its writes; aiokafka keeps them in
  that order.
* **No offset is committed before the changelog records of its writes are
  acknowledged.** Faust's consumer calls :meth:`Producer.flush` before each
  commit (``Consumer.commit``), its table recovery before a rebalance, and
  the producer at stop: here it first hands over what is queued, then waits
  for aiokafka as Faust's flush does.
* **Errors as before.** A record the broker refuses in the end (after
  aiokafka's retries) is logged, and its offset not recorded, as Faust's
  callback did; an error from ``send`` itself (aiokafka's buffer stays full
  past ``producer_request_timeout``, the producer is closed) stops the task,
  and with it the producer service, as it stops Faust's buffer task.

A table of :mod:`squall.worker.table_store` uses this path when the app's
producer is this class and the app is not in a transaction
(``processing_guarantee="exactly_once"``); otherwise Faust's own.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import TP
from mode import Service

log = logging.getLogger(__name__)

OnSent = Callable[[TP, int], None]  # (changelog partition, offset of the last record acknowledged)
Record = tuple[bytes | None, bytes | None]  # (key, value); a value of None deletes the key (a tombstone)


class Producer(aiokafka_driver.Producer):
    """Faust's aiokafka ``Producer`` with :meth:`changelog`: table changelog records handed to aiokafka directly."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[TP, list[Record]] = {}
        self._on_sent: dict[TP, OnSent] = {}
        self._ready = asyncio.Event()
        self._round = asyncio.Lock()

    def changelog(self, tp: TP, key: bytes | None, value: bytes | None, on_sent: OnSent) -> None:
        """Queue one changelog record for ``tp`` (not awaited: table writes are synchronous).

        ``on_sent(tp, offset)`` is called when the last record of ``tp`` in
        a round is acknowledged, with its offset.
        """
        records = self._pending.get(tp)
        if records is None:
            records = self._pending[tp] = []
            self._on_sent[tp] = on_sent
        records.append((key, value))
        self._ready.set()

    @property
    def changelog_pending(self) -> int:
        """Changelog records queued and not yet handed to aiokafka."""
        return sum(map(len, self._pending.values()))

    @Service.task
    async def _write_changelogs(self) -> None:
        while not self.should_stop:
            await self._ready.wait()
            await self._send_pending()

    async def _send_pending(self) -> None:
        """Hand every queued record to ``AIOKafkaProducer.send``, in order; a callback on each partition's last.

        Before aiokafka's producer is started (or after it is stopped) the
        records stay queued.
        """
        async with self._round:
            self._ready.clear()
            producer = self._producer
            if producer is None or not self._pending:
                return
            pending, self._pending = self._pending, {}
            for tp, records in pending.items():
                for key, value in records:
                    done = await producer.send(tp.topic, value, key=key, partition=tp.partition)
                done.add_done_callback(partial(_acknowledged, tp, self._on_sent[tp]))

    async def flush(self) -> None:
        """Send the queued changelog records, then wait for everything sent to be acknowledged (Faust's flush)."""
        await self._send_pending()
        await super().flush()

    async def on_stop(self) -> None:
        """Send the queued changelog records before Faust stops aiokafka's producer (which flushes it)."""
        await self._send_pending()
        await super().on_stop()


def _acknowledged(tp: TP, on_sent: OnSent, done: asyncio.Future) -> None:
    """The last record of a round for ``tp`` acknowledged: ``on_sent(tp, its offset)``; refused: logged."""
    if done.cancelled():
        return
    error = done.exception()
    if error is not None:
        log.error("squall: a changelog record of %s was not written: %r", tp, error)
        return
    on_sent(tp, done.result().offset)
