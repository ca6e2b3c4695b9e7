"""Faust's aiokafka consumer with squall's offset-commit and read fixes; the app uses it through :class:`Transport`.

1. **Never commit past an unacknowledged offset** (:mod:`squall.worker.offset_commit`
   has the analysis): the committable offset of a partition is bounded by
   the lowest offset of that partition still read but not acknowledged.
   faust-streaming 0.15.3 can commit over one unacknowledged offset (and over
   any when the partition has no committed offset yet), which strands a URL
   whose worker dies: its fetch message is never re-delivered.
2. **Commit before a revoke forgets the acknowledgements.** Faust's
   ``Consumer.on_partitions_revoked`` drops the revoked partitions'
   acknowledged-but-uncommitted offsets *before* the app waits for the
   in-flight events and commits, so every rebalance re-delivered up to one
   commit interval (``broker_commit_interval``, 2.8 s) of already-processed
   fetch messages to the new owner (the 62–124 re-reads seen when a worker
   joined). Here the bookkeeping is dropped *after* the wait and its
   commit: the new owner starts right after the last processed message.

3. **A message never given to an agent is never committable.** A Faust
   stream that reads a message while flow control is suspended (a
   rebalance has begun) or from an older consumer generation skips it and
   *acknowledges* it (``faust/streams.py``, ``value is skipped_value``),
   counting on the seek to the committed offset after the rebalance. But
   that makes the offset committable: the commit before a revoke (fix 2),
   or the next periodic one, moved the committed offset past messages no
   agent processed, and the seek started after them (docs/faults.md's
   stranded status and fetch messages). Here such an acknowledgement (of a
   message no stream tracked, on a topic with acks) marks it done without
   recording its offset, so the seek delivers it again.

4. **A fence over group membership** (:mod:`squall.worker.group_lease`):
   the consumer thread's group coordinator reports every membership answer
   to :attr:`Consumer.lease`, which the fetcher asks before it starts a
   request (:mod:`squall.policy.lease`).

5. **No assignment without a subscribed topic.** After each rebalance the
   consumer thread compares the assignment with the subscription
   (:func:`squall.worker.topic_setup.missing_from_assignment`); a topic the
   leader left out (not in its metadata yet) makes it refresh the metadata
   and rejoin the group until the topic is in (invariant 7).

6. **No turn of the event loop per message read.** Faust hands each
   message to the conductor through mode's ``wait_first`` (four tasks and at
   least one turn of the loop each); :meth:`Consumer._drain_messages` does it
   through :func:`squall.worker.drain.deliver`, a plain call unless the
   conductor has to wait (analysis in :mod:`squall.worker.drain`).

7. **The broker answers a fetch within ``kafka.consumer.fetch.max.wait.secs``**
   (Kafka's ``fetch.max.wait.ms``) instead of Faust's fixed 1.5 s. aiokafka
   keeps one fetch request open per broker and leaves out of it every
   partition whose previous messages are still buffered, so a message
   produced to such a partition meanwhile waited up to 1.5 s for the open
   request's answer before it was even asked for.

8. **A seek is not undone by the batch the drain is still handing over.**
   The rest of a batch read before a partition's latest seek moved Faust's
   read offset past the seek's position (the messages read again were then
   dropped as "read before") or was taken for a gap in the log (offsets no
   agent processed became committable). Here it is handed over (a copy is
   harmless) but moves nothing and notes no gap, nor does the first message
   read after a seek (:class:`squall.worker.drain.SeekEpochs`). The price: a
   partition whose committed offset retention deleted commits nothing more
   (its messages are read again after a restart).

9. **What the flow's resume drops is read again** (:mod:`squall.worker.flow_control`):
   the resume after the rebalance's seek clears the agents' queues of
   messages already read from the committed offsets.

The hooks are private Faust API (``_filter_committable_offsets``,
``on_partitions_revoked``, ``ack``, ``_drain_messages``, ``_wait_next_records``,
``seek``, ``perform_seek``, mode's ``FlowControlEvent.clear`` and aiokafka's
``AIOKafkaConsumer._fetch_max_wait_ms``), pinned by tests/unit/test_kafka_consumer.py
and tests/unit/test_flow_control.py.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Coroutine, Iterable, Mapping
from typing import Any, ClassVar, cast

from faust.transport.consumer import CONSUMER_FETCHING, CONSUMER_PARTITIONS_REVOKED
from faust.transport.drivers import aiokafka as aiokafka_driver
from faust.types import TP, Message
from mode import Service, ServiceT

from squall.policy.lease import Fence
from squall.worker.changelog_producer import Producer as ChangelogProducer
from squall.worker.drain import SeekEpochs, deliver
from squall.worker.group_lease import GroupLease
from squall.worker.offset_commit import StuckWatch, committable_offset
from squall.worker.topic_setup import LATE_TOPICS_ENV, is_late, late_topics, missing_from_assignment

log = logging.getLogger(__name__)


class Consumer(aiokafka_driver.Consumer):
    """aiokafka-driver Consumer whose commits stop at the first unacknowledged offset."""

    skipped_unread: int = 0  # acknowledgements of messages no stream was given (fix 3), since start

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reseek_to: dict[TP, tuple[int, str]] = {}  # partition -> lowest offset to read again, why (fixes 3, 9)
        self._seeks = SeekEpochs()  # fix 8
        self._batch_seeks = self._seeks.snapshot()  # the counts when the batch being drained was read
        margin_s = self.app.squall_settings.kafka_session_fence_margin_secs  # type: ignore[attr-defined]  # SquallApp
        self.lease = GroupLease(Fence(self.app.conf.broker_session_timeout, margin_s))  # fix 4

    async def _drain_messages(self, fetcher: ServiceT) -> None:  # pragma: no cover - the worker's read loop
        """Faust's read loop (``Consumer._drain_messages``) with each message handed over by :func:`deliver` (fix 6).

        As Faust's: read a batch (``getmany``, 1 s), commit every
        ``broker_commit_every`` acks, note gaps in the offsets of acked topics,
        hand each message to the conductor and record it as read; yield to the
        loop every 100 messages. The hand-over differs, and a seek is not
        undone by the batch read before it, nor taken for a gap (fix 8).
        """
        callback, getmany = self.callback, self.getmany
        consumer_should_stop, fetcher_should_stop = self._stopped.is_set, cast(Service, fetcher)._stopped.is_set
        read_offset = self._read_offset
        acks_enabled_for = self.app.topics.acks_enabled_for
        suspend_flow = self.suspend_flow
        seeks = self._seeks

        def interruptible(rest: Awaitable[Any]) -> Awaitable[Any]:
            return self.wait_first(rest, suspend_flow.wait())

        since_yield = 0
        try:
            while not (consumer_should_stop() or fetcher_should_stop()):
                self.diag.set_flag(CONSUMER_FETCHING)
                batch = getmany(timeout=1.0)
                await self.sleep(0)
                if self.should_stop:
                    continue
                async for tp, message in batch:
                    since_yield += 1
                    if since_yield > 100:
                        await asyncio.sleep(0)
                        since_yield = 0
                    at_read = self._batch_seeks
                    current = seeks.count == at_read[0] or seeks.current(tp, at_read)  # fix 8
                    offset, last = message.offset, read_offset[tp]
                    if current and last is not None and offset < last:
                        continue  # read before (a seek back): Faust drops it too
                    if (
                        current
                        and last
                        and offset - last > 1
                        and seeks.gap_known(tp)
                        and acks_enabled_for(message.topic)
                    ):
                        await self._add_gap(tp, last + 1, offset)  # offsets the log does not have
                    if self._commit_every is not None and self._n_acked >= self._commit_every:
                        self._n_acked = 0
                        await self.commit()
                    rest = deliver(cast(Coroutine[Any, Any, Any], callback(message)), interruptible)
                    if rest is not None:
                        await rest
                    if current and (seeks.count == at_read[0] or seeks.current(tp, at_read)):  # a seek meanwhile
                        read_offset[tp] = offset
                        seeks.read(tp)
                self.diag.unset_flag(CONSUMER_FETCHING)
        except self.consumer_stopped_errors:
            if not self.transport.app.should_stop:
                raise
            log.info("Broker stopped consumer, shutting down...")
        except asyncio.CancelledError:
            if not self.transport.app.should_stop:
                raise
            log.info("Consumer shutting down for user cancel.")
        except Exception as exc:
            log.exception("Drain messages raised: %r", exc)
            raise
        finally:
            self.diag.unset_flag(CONSUMER_FETCHING)

    async def _wait_next_records(self, timeout: float) -> Any:  # noqa: ASYNC109 - Faust's signature
        """Faust's read of the next batch, noting the seek counts it was read under (fix 8)."""
        records = await super()._wait_next_records(timeout)
        self._batch_seeks = self._seeks.snapshot()
        return records

    async def seek(self, partition: TP, offset: int) -> None:
        """Faust's seek of one partition; the batch the drain still holds of it leaves the read offset (fix 8)."""
        self._seeks.sought([partition])  # before: a message handed over meanwhile is read again
        await super().seek(partition, offset)
        self._seeks.sought([partition])  # after: a batch read while the seek was under way is stale too

    async def perform_seek(self) -> None:
        """Faust's seek of every partition to its committed offset; the batch the drain holds leaves them (fix 8)."""
        assigned = self.assignment()
        self._seeks.sought(assigned)
        await super().perform_seek()
        self._seeks.sought(assigned)

    def _new_consumer_thread(self) -> aiokafka_driver.AIOKafkaConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)

    def _first_unacked(self) -> dict[TP, int]:
        """Lowest unacknowledged offset per partition among the messages read (one pass)."""
        first: dict[TP, int] = {}
        for message in list(self._unacked_messages):
            if not message.acked:
                tp, offset = message.tp, message.offset
                if tp not in first or offset < first[tp]:
                    first[tp] = offset
        return first

    def ack(self, message: Message) -> bool:
        """Faust's ack, except that a message no stream tracked (skipped unread) leaves its offset uncommitted.

        Returns True when the offset became committable, as Faust's does.
        """
        if not message.tracked and not message.acked and self.app.topics.acks_enabled_for(message.topic):
            message.acked = True  # done for the stream; its offset stays uncommitted and it is read again
            self.skipped_unread += 1
            self.read_again(message.tp, message.offset)
            return False
        return bool(super().ack(message))

    def read_again(self, tp: TP, offset: int, why: str = "a message was skipped unread") -> None:
        """Have ``tp`` read again from ``offset`` (fixes 3, 9): now if the flow runs, else by the rebalance's seek.

        While flow control is suspended a rebalance is in progress and its
        seek to the committed offset (never past ``offset``, see :meth:`ack`)
        reads the message again. A message skipped while the flow runs (one
        stamped with an older generation) has no seek coming: seek ``tp`` back
        here, once per partition at a time; the messages after it are read
        twice (every step is idempotent under re-delivery). ``why`` is logged.
        """
        committed = self._committed_offset.get(tp)
        if committed is not None and offset < committed:
            return  # already committed by an earlier owner's progress: nothing to read again
        if not self.app.flow_control.is_active():
            return
        pending = self._reseek_to
        if tp in pending:
            pending[tp] = min(pending[tp], (offset, why))
            return
        pending[tp] = (offset, why)
        loop = self.loop  # acks may come from another thread: schedule on the consumer's loop
        try:
            loop.call_soon_threadsafe(lambda: loop.create_task(self._reseek(tp)))
        except RuntimeError:  # the loop is closed: the worker is stopping, the next owner reads it
            pending.pop(tp, None)

    async def _reseek(self, tp: TP) -> None:
        await asyncio.sleep(0)  # let the stream finish the skipped batch first
        held = self._reseek_to.pop(tp, None)
        if held is not None:
            await self._seek_back(tp, *held)

    async def _seek_back(self, tp: TP, offset: int, why: str) -> bool:
        """Seek ``tp`` back to ``offset`` so its messages from there are read again, logged with ``why``.

        Returns False when nothing was done: ``tp`` is no longer assigned
        here, a rebalance is in progress (flow control suspended: its own
        seek to the committed offset follows), or the seek failed (revoked
        meanwhile, or the broker went away: logged; the next check decides).
        """
        if tp not in self.assignment() or not self.app.flow_control.is_active():
            return False
        log.warning("squall: reading %s[%d] again from offset %d: %s", tp.topic, tp.partition, offset, why)
        try:
            await self.seek(tp, offset)
        except Exception as exc:  # revoked meanwhile, or the broker went away: the next check decides
            log.warning("squall: could not seek %s[%d]: %s", tp.topic, tp.partition, exc)
            return False
        return True

    async def read_stuck_again(self, watch: StuckWatch, now_s: float) -> list[TP]:
        """Seek this worker's stuck stream partitions back to their committed offsets; return them.

        ``watch`` decides (:class:`squall.worker.offset_commit.StuckWatch`);
        ``now_s`` is Unix seconds. A partition with nothing committed is read
        again from its beginning (:meth:`_committed_positions`). Nothing is
        checked during a rebalance (flow control suspended: its own seek
        follows). The broker's end offsets are asked once per call (and its
        beginning offsets when a partition has nothing committed).
        """
        if not self.app.flow_control.is_active():
            return []
        tps = [tp for tp in self.assignment() if self.app.topics.acks_enabled_for(tp.topic)]
        watch.forget(tps)
        if not tps:
            return []
        try:
            ends = await self.highwaters(*tps)
            positions = await self._committed_positions(tps, ends)
        except Exception as exc:  # a broker outage (logged by squall.worker.outage_log): check next time
            log.debug("squall: end offsets unavailable (%s): stuck partitions not checked", exc)
            watch.forget(())  # an outage stops commits: its time is not a stuck partition's
            return []
        busy = self._first_unacked().keys()  # partitions with a message in processing
        stuck: list[TP] = []
        for tp in tps:
            committed = positions.get(tp)
            if watch.observe(tp, committed=committed, end=ends.get(tp), busy=tp in busy, now_s=now_s):
                assert committed is not None
                why = f"its committed position, {ends[tp] - committed} message(s) past it never came"
                if await self._seek_back(tp, committed, why):
                    stuck.append(tp)
        return stuck

    async def _committed_positions(self, tps: list[TP], ends: Mapping[TP, int]) -> dict[TP, int]:
        """Where each of ``tps`` is read from: its committed offset, or its beginning when Faust holds none.

        Faust keeps ``None`` in ``_committed_offset`` both when the group
        committed nothing for the partition and when it committed 0
        (``Consumer.perform_seek`` stores ``offset if offset else None``);
        either way the consumer reads from the partition's beginning
        (``consumer_auto_offset_reset="earliest"``, also for a committed 0
        that retention deleted): the broker's log start offset. That is asked,
        in one request, only for such partitions that hold messages
        (``ends``: the broker's end offsets). Raises what
        ``earliest_offsets`` raises (a broker outage).
        """
        positions = {tp: offset for tp in tps if (offset := self._committed_offset.get(tp)) is not None}
        unknown = [tp for tp in tps if tp not in positions and ends.get(tp, 0) > 0]
        if unknown:
            beginnings = await self.earliest_offsets(*unknown)
            positions.update({tp: beginnings[tp] for tp in unknown if beginnings.get(tp) is not None})
        return positions

    def _merge_gaps(self, tp: TP, acked: list[int]) -> None:
        """Faust's gap handling, as in ``_new_offset``: offsets missing from the log count as acked."""
        gap_for_tp = self._gap[tp]
        if acked and gap_for_tp:
            max_offset = max(acked)
            ranges = sorted(gap_for_tp.overlap(0, max_offset), key=lambda iv: iv.begin)
            if ranges:
                missing = [o for iv in ranges for o in range(iv.begin, iv.end)]
                acked.extend(missing)
                gap_for_tp.chop(0, max(missing[-1], max_offset + 1))

    def _filter_committable_offsets(self, tps: Iterable[TP]) -> dict[TP, int]:
        first_unacked = self._first_unacked()
        commit_offsets: dict[TP, int] = {}
        for tp in tps:
            acked = self._acked[tp]
            self._merge_gaps(tp, acked)
            acked[:] = sorted(set(acked))
            offset, covered = committable_offset(acked, self._committed_offset[tp], first_unacked.get(tp))
            if offset is None:
                continue
            self._acked_index[tp].difference_update(acked[:covered])
            del acked[:covered]  # as Faust does: covered entries leave the list even if not newer
            if self._should_commit(tp, offset):
                commit_offsets[tp] = offset
        return commit_offsets

    def _new_offset(self, tp: TP) -> int | None:
        """Faust's name for one partition's committable offset (same bound as the batch)."""
        return self._filter_committable_offsets([tp]).get(tp)

    @Service.transitions_to(CONSUMER_PARTITIONS_REVOKED)
    async def on_partitions_revoked(self, revoked: set[TP]) -> None:
        """Faust's revoke, with the ack bookkeeping dropped after the app's wait-and-commit."""
        if self._active_partitions is not None:
            self._active_partitions.difference_update(revoked)
        self._paused_partitions.difference_update(revoked)
        await self._on_partitions_revoked(revoked)  # waits for in-flight events, commits them
        for tp in revoked:
            for bookkeeping in (self._gap, self._acked, self._acked_index, self._read_offset, self._committed_offset):
                bookkeeping.pop(tp, None)


class ConsumerThread(aiokafka_driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose group coordinator reports to the consumer's lease (fix 4)
    and which rejoins when the assignment misses a subscribed topic (fix 5)."""

    REJOIN_RETRY_S: ClassVar[float] = 1.0  # between two metadata refreshes while a topic is still missing (s)

    async def on_start(self) -> None:
        await super().on_start()
        coordinator = getattr(self._consumer, "_coordinator", None)  # None without a group (client-only)
        lease = getattr(self.consumer, "lease", None)  # squall's Consumer
        if lease is not None and coordinator is not None and hasattr(coordinator, "_send_req"):  # a group
            lease.watch(coordinator)

    def _create_worker_consumer(self, transport: Any) -> Any:
        """Faust's worker consumer, with ``kafka.consumer.fetch.max.wait.secs`` instead of its fixed 1.5 s (fix 7)."""
        consumer = super()._create_worker_consumer(transport)
        wait_s = self.consumer.app.squall_settings.kafka_consumer_fetch_max_wait_secs  # type: ignore[attr-defined]
        consumer._fetch_max_wait_ms = round(wait_s * 1000)  # read by AIOKafkaConsumer.start() for its Fetcher
        return consumer

    _rejoining: asyncio.Task | None = None

    async def on_partitions_assigned(self, assigned: set[TP], generation_id: int = 0) -> None:
        consumer = self._consumer
        app = self.consumer.app
        plain = getattr(app, "squall_topics", {})  # SquallApp's
        copartitioned = [*plain, *(t.changelog_topic.get_topic_name() for t in app.tables.values())]
        missing = missing_from_assignment(copartitioned, consumer.subscription(), assigned) if consumer else set()
        if missing and (self._rejoining is None or self._rejoining.done()):
            # not awaited: the rebalance callback must return for the rejoin to happen
            self._rejoining = asyncio.get_running_loop().create_task(self._rejoin_for(missing, generation_id))
        await super().on_partitions_assigned(assigned, generation_id)

    async def _rejoin_for(self, missing: set[str], generation_id: int) -> None:
        """Refresh the metadata until ``missing`` are all in it, then ask the coordinator for a rejoin."""
        consumer = self._consumer
        if consumer is None:
            return
        log.warning(
            "squall: the group's assignment (generation %d) left out %s (not in the leader's metadata yet): "
            "refreshing the metadata and rejoining",
            generation_id,
            ", ".join(sorted(missing)),
        )
        client, coordinator = consumer._client, consumer._coordinator
        while not self.should_stop and coordinator.generation == generation_id:
            try:
                await client.force_metadata_update()
            except Exception as exc:  # a broker outage: try again
                log.debug("squall: metadata refresh failed: %s", exc)
            if all(client.cluster.partitions_for_topic(t) for t in missing):
                coordinator.request_rejoin()
                return
            await asyncio.sleep(self.REJOIN_RETRY_S)


class Transport(aiokafka_driver.Transport):
    """Faust's aiokafka transport with :class:`Consumer` and :class:`squall.worker.changelog_producer.Producer`.

    The ``SQUALL_TEST_LATE_TOPICS`` test hook (:func:`squall.worker.topic_setup.late_topics`)
    defers Faust's creation of the named topics.
    """

    Consumer: ClassVar[Any] = Consumer
    Producer: ClassVar[Any] = ChangelogProducer
    _late: ClassVar[set[asyncio.Task]] = set()  # the hook's deferred creations (kept referenced)

    async def _create_topic(self, owner: Any, client: Any, topic: str, *args: Any, **kwargs: Any) -> None:
        suffixes, delay_s = late_topics(os.environ.get(LATE_TOPICS_ENV))
        if suffixes and is_late(topic, self.app.squall_settings, suffixes):  # type: ignore[attr-defined]  # SquallApp

            async def later() -> None:
                await asyncio.sleep(delay_s)
                await super(Transport, self)._create_topic(owner, client, topic, *args, **kwargs)

            log.warning("squall: %s: creating %s %g s late", LATE_TOPICS_ENV, topic, delay_s)
            self._late.add(task := asyncio.get_running_loop().create_task(later()))
            task.add_done_callback(self._late.discard)
            return
        await super()._create_topic(owner, client, topic, *args, **kwargs)
