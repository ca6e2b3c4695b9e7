"""squall.worker.kafka_consumer: Faust's consumer with commits bounded by the first unacknowledged message.

Pins the private Faust API the fix relies on, and shows the faust-streaming
0.15.3 behaviour it replaces (if Faust fixes it, the first test fails: then
the override may go).
"""

from __future__ import annotations

import faust.transport.consumer as faust_consumer
import pytest
from faust.types import TP, ConsumerMessage, Message

from squall.worker import kafka_consumer

TOPIC = "t-fetch"
TPX = TP(TOPIC, 0)


@pytest.fixture
def consumer():
    import topology

    c = topology.app.consumer
    assert isinstance(c, kafka_consumer.Consumer)
    for state in (c._acked, c._acked_index, c._committed_offset, c._gap, c._reseek_to):
        state.clear()
    c._unacked_messages.clear()
    return c


def _read(consumer, offsets):
    messages = {o: Message(TOPIC, 0, o, 0.0, 0, None, b"k", b"v", None) for o in offsets}
    for m in messages.values():
        consumer._unacked_messages.add(m)
    return messages


def _ack(consumer, message):
    message.acked = True
    consumer._unacked_messages.discard(message)
    consumer._acked[TPX].append(message.offset)
    consumer._acked_index[TPX].add(message.offset)


def test_faust_0_15_commits_over_one_unacknowledged_offset(consumer):
    messages = _read(consumer, range(10, 14))
    consumer._committed_offset[TPX] = 10
    for o in (11, 12, 13):
        _ack(consumer, messages[o])
    assert faust_consumer.Consumer._new_offset(consumer, TPX) == 14  # offset 10 is still in processing


def test_squall_commits_nothing_while_the_head_offset_is_in_processing(consumer):
    messages = _read(consumer, range(10, 14))
    consumer._committed_offset[TPX] = 10
    for o in (11, 12, 13):
        _ack(consumer, messages[o])
    assert consumer._filter_committable_offsets([TPX]) == {}
    _ack(consumer, messages[10])
    assert consumer._filter_committable_offsets([TPX]) == {TPX: 14}
    assert consumer._acked[TPX] == [] and not consumer._acked_index[TPX]


def test_a_partition_without_a_committed_offset_commits_only_below_its_first_unacked(consumer):
    messages = _read(consumer, range(0, 8))
    for o in (3, 4, 5):
        _ack(consumer, messages[o])
    assert faust_consumer.Consumer._new_offset(consumer, TPX) == 6  # Faust: 0..2 would be lost at a crash
    for o in (3, 4, 5):  # Faust's call consumed them; acknowledge again for squall's
        consumer._acked[TPX].append(o)
    assert consumer._filter_committable_offsets([TPX]) == {}
    for o in (0, 1, 2):
        _ack(consumer, messages[o])
    assert consumer._filter_committable_offsets([TPX]) == {TPX: 6}


def test_an_acked_run_is_committed_up_to_the_message_still_in_processing(consumer):
    messages = _read(consumer, range(20, 30))
    consumer._committed_offset[TPX] = 20
    for o in (20, 21, 22, 24, 25):
        _ack(consumer, messages[o])
    assert consumer._new_offset(TPX) == 23
    assert consumer._acked[TPX] == [24, 25]


# ---------------------------------------------------------------- fix 3: a skipped message is not committable


def _topic_with_acks(monkeypatch: pytest.MonkeyPatch, consumer) -> None:
    monkeypatch.setattr(consumer.app.topics, "acks_enabled_for", lambda topic: topic == TOPIC)

def _recorded_seeks(consumer, monkeypatch: pytest.MonkeyPatch) -> list[tuple[TP, int]]:
    """Replace the consumer's seek by one that records (partition, offset); returns the record."""
    seeks: list[tuple[TP, int]] = []

    async def seek(tp, offset):
        seeks.append((tp, offset))

    monkeypatch.setattr(consumer, "seek", seek)
    return seeks


def test_faust_acks_a_message_its_stream_skipped_and_that_offset_becomes_committable(consumer, monkeypatch):
    _topic_with_acks(monkeypatch, consumer)
    consumer._committed_offset[TPX] = 10
    skipped = ConsumerMessage(TOPIC, 0, 10, 0.0, 0, None, b"k", b"v", None)  # read during a rebalance: never tracked
    assert faust_consumer.Consumer.ack(consumer, skipped) is True
    assert faust_consumer.Consumer._new_offset(consumer, TPX) == 11  # committed past a message no agent saw


def test_squall_does_not_commit_past_a_message_its_stream_skipped(consumer, monkeypatch):
    _topic_with_acks(monkeypatch, consumer)
    monkeypatch.setattr(consumer.app.flow_control, "is_active", lambda: False)  # skipped during a rebalance
    consumer._committed_offset[TPX] = 10
    before = consumer.skipped_unread
    skipped = ConsumerMessage(TOPIC, 0, 10, 0.0, 0, None, b"k", b"v", None)
    assert consumer.ack(skipped) is False and skipped.acked
    assert consumer.skipped_unread == before + 1
    later = ConsumerMessage(TOPIC, 0, 11, 0.0, 0, None, b"k", b"v", None)
    later.tracked = True  # given to the agent and processed
    consumer._unacked_messages.add(later)
    assert consumer.ack(later) is True
    assert consumer._filter_committable_offsets([TPX]) == {}  # offset 10 must be read again first
    again = ConsumerMessage(TOPIC, 0, 10, 0.0, 0, None, b"k", b"v", None)  # the seek after the rebalance delivers it
    again.tracked = True
    consumer._unacked_messages.add(again)
    assert consumer.ack(again) is True
    assert consumer._filter_committable_offsets([TPX]) == {TPX: 12}


def test_a_tracked_message_is_acked_as_faust_does(consumer, monkeypatch):
    _topic_with_acks(monkeypatch, consumer)
    consumer._committed_offset[TPX] = 10
    m = ConsumerMessage(TOPIC, 0, 10, 0.0, 0, None, b"k", b"v", None)
    m.tracked = True
    consumer._unacked_messages.add(m)
    assert consumer.ack(m) is True and consumer._filter_committable_offsets([TPX]) == {TPX: 11}


async def test_a_message_skipped_while_the_flow_runs_is_read_again_by_a_seek(consumer, monkeypatch):
    import asyncio

    _topic_with_acks(monkeypatch, consumer)
    consumer._committed_offset[TPX] = 10
    seeks = _recorded_seeks(consumer, monkeypatch)
    monkeypatch.setattr(consumer, "assignment", lambda: {TPX})
    monkeypatch.setattr(consumer.app.flow_control, "is_active", lambda: True)
    monkeypatch.setattr(consumer, "loop", asyncio.get_running_loop(), raising=False)
    for offset in (12, 11):  # two skipped in one batch: one seek, to the lower
        consumer.ack(ConsumerMessage(TOPIC, 0, offset, 0.0, 0, None, b"k", b"v", None))
    for _ in range(5):
        await asyncio.sleep(0)
    assert seeks == [(TPX, 11)]


async def test_a_message_skipped_during_a_rebalance_waits_for_the_rebalances_own_seek(consumer, monkeypatch):
    import asyncio

    _topic_with_acks(monkeypatch, consumer)
    consumer._committed_offset[TPX] = 10
    seeks = _recorded_seeks(consumer, monkeypatch)
    monkeypatch.setattr(consumer.app.flow_control, "is_active", lambda: False)
    consumer.ack(ConsumerMessage(TOPIC, 0, 10, 0.0, 0, None, b"k", b"v", None))
    for _ in range(5):
        await asyncio.sleep(0)
    assert seeks == [] and consumer._filter_committable_offsets([TPX]) == {}


def _stuck_check_against(consumer, monkeypatch, *, end: int, beginning: int) -> list[tuple[TP, int]]:
    """A broker whose partition TPX holds offsets ``beginning`` .. ``end - 1``; returns the seeks made."""
    _topic_with_acks(monkeypatch, consumer)
    seeks = _recorded_seeks(consumer, monkeypatch)

    async def highwaters(*tps):
        return {tp: end for tp in tps}

    async def earliest_offsets(*tps):
        return {tp: beginning for tp in tps}

    monkeypatch.setattr(consumer, "highwaters", highwaters)
    monkeypatch.setattr(consumer, "earliest_offsets", earliest_offsets)
    monkeypatch.setattr(consumer, "assignment", lambda: {TPX})
    monkeypatch.setattr(consumer.app.flow_control, "is_active", lambda: True)
    return seeks


async def test_a_stuck_stream_partition_is_sought_back_to_its_committed_offset(consumer, monkeypatch):
    from squall.worker.offset_commit import StuckWatch

    seeks = _stuck_check_against(consumer, monkeypatch, end=29, beginning=0)
    consumer._committed_offset[TPX] = 18
    watch = StuckWatch(30.0)
    assert await consumer.read_stuck_again(watch, 0.0) == []
    assert await consumer.read_stuck_again(watch, 31.0) == [TPX]
    assert seeks == [(TPX, 18)]
    busy = ConsumerMessage(TOPIC, 0, 18, 0.0, 0, None, b"k", b"v", None)  # read again, now in processing
    consumer._unacked_messages.add(busy)
    assert await consumer.read_stuck_again(watch, 100.0) == [] and seeks == [(TPX, 18)]


async def test_the_stuck_check_survives_a_broker_outage(consumer, monkeypatch):
    from squall.worker.offset_commit import StuckWatch

    async def highwaters(*tps):
        raise ConnectionError("broker down")

    monkeypatch.setattr(consumer, "highwaters", highwaters)
    monkeypatch.setattr(consumer, "assignment", lambda: {TPX})
    monkeypatch.setattr(consumer.app.flow_control, "is_active", lambda: True)
    _topic_with_acks(monkeypatch, consumer)
    assert await consumer.read_stuck_again(StuckWatch(30.0), 0.0) == []


@pytest.mark.parametrize("beginning", [0, 5])  # 5: retention deleted the partition's first messages
async def test_a_stuck_partition_with_nothing_committed_is_sought_back_to_its_beginning(
    consumer, monkeypatch, beginning
):
    from squall.worker.offset_commit import StuckWatch

    seeks = _stuck_check_against(consumer, monkeypatch, end=29, beginning=beginning)
    assert consumer._committed_offset.get(TPX) is None  # Faust's "nothing committed" (and its committed 0)
    watch = StuckWatch(30.0)
    assert await consumer.read_stuck_again(watch, 0.0) == []
    assert await consumer.read_stuck_again(watch, 31.0) == [TPX]
    assert seeks == [(TPX, beginning)]


async def test_a_partition_with_nothing_committed_whose_messages_retention_deleted_is_not_stuck(consumer, monkeypatch):
    from squall.worker.offset_commit import StuckWatch

    seeks = _stuck_check_against(consumer, monkeypatch, end=29, beginning=29)
    watch = StuckWatch(30.0)
    assert [await consumer.read_stuck_again(watch, float(t)) for t in range(0, 200, 10)] == [[]] * 20
    assert seeks == []


async def test_a_failed_seek_back_is_logged_and_forgotten_on_both_paths(consumer, monkeypatch, caplog):
    from squall.worker.offset_commit import StuckWatch

    seeks = _stuck_check_against(consumer, monkeypatch, end=29, beginning=0)

    async def seek(tp, offset):
        seeks.append((tp, offset))
        raise ConnectionError("broker down")

    monkeypatch.setattr(consumer, "seek", seek)
    consumer._reseek_to[TPX] = (7, "a message was skipped unread")  # a skipped message's re-read (fix 3)
    await consumer._reseek(TPX)
    watch = StuckWatch(30.0)
    assert await consumer.read_stuck_again(watch, 0.0) == []
    assert await consumer.read_stuck_again(watch, 31.0) == []  # stuck, but the seek failed
    assert seeks == [(TPX, 7), (TPX, 0)]
    assert sum("could not seek" in r.getMessage() for r in caplog.records) == 2


async def test_the_stuck_check_survives_a_broker_outage_while_asking_the_beginning_offsets(consumer, monkeypatch):
    from squall.worker.offset_commit import StuckWatch

    seeks = _stuck_check_against(consumer, monkeypatch, end=29, beginning=0)

    async def earliest_offsets(*tps):
        raise ConnectionError("broker down")

    monkeypatch.setattr(consumer, "earliest_offsets", earliest_offsets)
    watch = StuckWatch(30.0)
    assert [await consumer.read_stuck_again(watch, float(t)) for t in range(0, 100, 10)] == [[]] * 10
    assert seeks == []


async def test_a_seek_makes_the_batches_read_before_it_and_while_it_ran_not_current(consumer, monkeypatch):
    before = consumer._seeks.snapshot()
    during: list = []

    async def faust_seek(self, partition, offset):  # a batch read while the seek is under way
        during.append(consumer._seeks.snapshot())

    monkeypatch.setattr(faust_consumer.Consumer, "seek", faust_seek)
    await consumer.seek(TPX, 61)
    assert not consumer._seeks.current(TPX, before) and not consumer._seeks.current(TPX, during[0])
    assert consumer._seeks.current(TP(TOPIC, 1), before)
    assert consumer._seeks.current(TPX, consumer._seeks.snapshot())


async def test_the_rebalances_seek_to_the_committed_offsets_concerns_every_assigned_partition(consumer, monkeypatch):
    other = TP(TOPIC, 1)
    monkeypatch.setattr(consumer, "assignment", lambda: {TPX, other})
    before = consumer._seeks.snapshot()

    async def faust_perform_seek(self):
        pass

    monkeypatch.setattr(faust_consumer.Consumer, "perform_seek", faust_perform_seek)
    await consumer.perform_seek()
    assert not consumer._seeks.current(TPX, before) and not consumer._seeks.current(other, before)


async def test_each_batch_read_notes_the_seek_counts_it_was_read_under(consumer, monkeypatch):
    async def faust_wait_next_records(self, timeout):
        return {}, set()

    monkeypatch.setattr(faust_consumer.Consumer, "_wait_next_records", faust_wait_next_records)
    consumer._seeks.sought([TPX])
    assert await consumer._wait_next_records(1.0) == ({}, set())
    assert consumer._batch_seeks == consumer._seeks.snapshot()
