"""squall.worker.drain: a message handed over by a plain call unless the conductor waits; Faust's drain it replaces.

The pins at the end fail when faust-streaming changes what the overrides of
squall.worker.kafka_consumer (fixes 6 and 7) rely on: then they may go.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect

import faust.transport.consumer as faust_consumer
import faust.transport.drivers.aiokafka as aiokafka_driver
import pytest
from mode import Service

from squall.worker import kafka_consumer
from squall.worker.drain import deliver, resumed


def _never_interrupted(rest):
    raise AssertionError("a coroutine that did not suspend needs no second step")


async def test_a_callback_that_never_waits_is_done_by_the_call_itself():
    seen = []

    async def callback(value):
        seen.append(value)

    assert deliver(callback(1), _never_interrupted) is None
    assert seen == [1]  # no turn of the loop in between


async def test_a_callback_that_waits_is_finished_by_the_awaitable_deliver_returns():
    gate = asyncio.get_running_loop().create_future()
    steps = []

    async def callback():
        steps.append("before")
        got = await gate
        steps.append(got)
        return "done"

    rest = deliver(callback(), lambda rest: rest)
    assert rest is not None and steps == ["before"]
    asyncio.get_running_loop().call_soon(gate.set_result, "after")
    assert await rest == "done"
    assert steps == ["before", "after"]


async def test_a_callback_suspended_more_than_once_is_carried_to_its_end():
    async def callback():
        total = 0
        for n in range(5):
            await asyncio.sleep(0)
            total += n
        return total

    rest = deliver(callback(), lambda rest: rest)
    assert rest is not None
    assert await rest == 10


async def test_an_error_before_the_first_wait_is_raised_by_deliver():
    async def callback():
        raise ValueError("bad message")

    with pytest.raises(ValueError, match="bad message"):
        deliver(callback(), _never_interrupted)


async def test_an_error_after_a_wait_is_raised_by_the_awaitable():
    async def callback():
        await asyncio.sleep(0)
        raise ValueError("late")

    rest = deliver(callback(), lambda rest: rest)
    assert rest is not None
    with pytest.raises(ValueError, match="late"):
        await rest


async def test_a_flow_suspended_while_the_callback_waits_interrupts_it_as_faust_does():
    """Faust's wait_first against suspend_flow: the waiting callback is cancelled, its cleanup runs."""
    service = Service()
    suspend_flow = asyncio.Event()
    queue_has_room = asyncio.Event()
    cleaned = []

    async def callback():
        try:
            await queue_has_room.wait()  # a full stream queue
        finally:
            cleaned.append(True)

    rest = deliver(callback(), lambda rest: service.wait_first(rest, suspend_flow.wait()))
    assert rest is not None
    asyncio.get_running_loop().call_soon(suspend_flow.set)
    results = await rest
    assert results.results == [True]  # suspend_flow.wait() won
    await asyncio.sleep(0)  # the cancelled rest runs its finally
    assert cleaned == [True]


async def test_a_cancellation_caught_by_the_coroutine_ends_it_with_its_own_result():
    started = asyncio.Event()

    async def callback():
        await asyncio.sleep(0)
        started.set()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "handled"

    rest = deliver(callback(), lambda rest: rest)
    assert rest is not None
    task = asyncio.ensure_future(rest)
    await started.wait()
    task.cancel()
    assert await task == "handled"


async def test_closing_the_resumed_generator_closes_the_coroutine():
    finished = []

    async def callback():
        try:
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        finally:
            finished.append(True)

    coro = callback()
    first = coro.send(None)
    carried = resumed(coro, first)
    next(carried)  # hands the first suspension on, as a task would
    carried.close()
    assert finished == [True]


def test_faust_hands_each_message_over_in_wait_first():
    source = inspect.getsource(faust_consumer.Consumer._drain_messages)
    assert "self.wait_first(" in source and "callback(message)" in source


def test_squall_overrides_the_drain_and_faust_still_fixes_the_fetch_wait():
    assert kafka_consumer.Consumer._drain_messages is not faust_consumer.Consumer._drain_messages
    assert "fetch_max_wait_ms=1500" in inspect.getsource(aiokafka_driver.AIOKafkaConsumerThread._create_worker_consumer)


async def test_the_worker_consumer_waits_at_most_the_configured_fetch_wait(monkeypatch):
    import topology

    thread = kafka_consumer.ConsumerThread(topology.app.consumer, loop=asyncio.get_running_loop(), beacon=None)
    settings = dataclasses.replace(topology.app.squall_settings, kafka_consumer_fetch_max_wait_secs=0.25)
    monkeypatch.setattr(topology.app, "squall_settings", settings)
    consumer = thread._create_worker_consumer(topology.app.consumer.transport)
    assert consumer._fetch_max_wait_ms == 250


def test_a_batch_read_before_a_seek_of_its_partition_is_not_current_for_that_partition_only():
    from squall.worker.drain import SeekEpochs

    seeks = SeekEpochs()
    seeks.sought(["status-1"])  # an earlier seek: before the batch, it is current
    at_read = seeks.snapshot()
    assert seeks.current("status-1", at_read)
    seeks.sought(["status-1"])
    assert not seeks.current("status-1", at_read)
    assert seeks.current("status-0", at_read)  # another partition's messages move its read offset
    assert seeks.current("status-1", seeks.snapshot())  # the next batch, read from the new position


def test_the_first_message_read_after_a_seek_notes_no_gap():
    from squall.worker.drain import SeekEpochs

    seeks = SeekEpochs()
    assert seeks.gap_known("status-1")
    seeks.sought(["status-1"])
    assert not seeks.gap_known("status-1") and seeks.gap_known("status-0")
    seeks.read("status-1")  # a message read under the seek moved the read offset
    assert seeks.gap_known("status-1")
