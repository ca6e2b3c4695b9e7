"""squall.worker.flow_control: what a resume of the flow drops from the agents' queues is read again (fix 9).

Pins mode's behaviour the fix answers (a resume clears every managed queue)
and the app's wiring to the consumer's seek back.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from faust.types import TP, ConsumerMessage, Message
from mode.utils.queues import FlowControlEvent, FlowControlQueue

from squall.worker.flow_control import FlowControl, unread_messages

ACKED, UNACKED = "t-status", "t-changelog"


def _message(topic: str, offset: int) -> Message:
    return ConsumerMessage(topic, 1, offset, 0.0, 0, None, b"k", b"v", None)  # as the consumer reads it


def _event(message: Message) -> SimpleNamespace:
    return SimpleNamespace(message=message)  # a Faust event, as far as the queue is concerned


def _flow(dropped: list[Message]) -> FlowControl:
    return FlowControl(dropped=dropped.extend, acks_enabled_for=lambda topic: topic == ACKED)


async def test_mode_clears_the_stream_queues_when_the_flow_resumes_even_if_it_already_ran():
    flow = FlowControlEvent()
    queue: FlowControlQueue = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    flow.resume()
    queue.put_nowait(_event(_message(ACKED, 58)))  # handed over between the seek and the second resume
    flow.resume()
    assert queue.empty()  # dropped: never tracked, never acknowledged, never read again by Faust


async def test_a_resume_reports_the_messages_no_stream_took_yet():
    dropped: list[Message] = []
    flow = _flow(dropped)
    queue: FlowControlQueue = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    flow.resume()
    waiting, taken, done, other = _message(ACKED, 58), _message(ACKED, 59), _message(ACKED, 60), _message(UNACKED, 7)
    taken.tracked = True
    done.acked = True
    for item in (_event(waiting), _event(taken), _event(done), _event(other), "a channel's plain value"):
        queue.put_nowait(item)
    flow.resume()
    assert queue.empty() and dropped == [waiting]


async def test_a_clear_while_the_flow_is_suspended_reports_nothing():
    dropped: list[Message] = []
    flow = _flow(dropped)
    queue: FlowControlQueue = FlowControlQueue(flow_control=flow, clear_on_resume=True)
    flow.resume()
    queue.put_nowait(_event(_message(ACKED, 58)))
    flow.suspend()  # a revoke: the rebalance's own seek to the committed offsets reads it again
    flow.clear()
    assert queue.empty() and dropped == []


def test_unread_messages_looks_only_at_waiting_events_of_acknowledged_topics():
    queue: asyncio.Queue = asyncio.Queue()
    first, second = _message(ACKED, 3), _message(ACKED, 4)
    for item in (_event(first), 17, _event(_message(UNACKED, 5)), _event(second)):
        queue.put_nowait(item)
    assert unread_messages([queue], lambda topic: topic == ACKED) == [first, second]


async def test_the_app_seeks_a_dropped_message_back_when_the_flow_resumes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
):
    import topology
    from squall.worker import kafka_consumer

    app = topology.app
    assert isinstance(app.flow_control, FlowControl)
    consumer = app.consumer
    assert isinstance(consumer, kafka_consumer.Consumer)
    tp = TP(ACKED, 1)
    seeks: list[tuple[TP, int]] = []

    async def seek(partition: TP, offset: int) -> None:
        seeks.append((partition, offset))

    monkeypatch.setattr(consumer, "seek", seek)
    monkeypatch.setattr(consumer, "assignment", lambda: {tp})
    monkeypatch.setattr(consumer, "loop", asyncio.get_running_loop(), raising=False)
    monkeypatch.setattr(app.topics, "acks_enabled_for", lambda topic: topic == ACKED)
    consumer._committed_offset[tp] = 58
    consumer._reseek_to.clear()
    queue = app.FlowControlQueue(maxsize=0, clear_on_resume=True)
    app.flow_control.resume()
    for offset in (59, 58, 60):
        queue.put_nowait(_event(_message(ACKED, offset)))
    app.flow_control.resume()
    for _ in range(5):
        await asyncio.sleep(0)
    assert queue.empty() and seeks == [(tp, 58)]  # one seek, to the lowest dropped offset
    [line] = [r.getMessage() for r in caplog.records if "again from offset" in r.getMessage()]
    assert line.endswith("the flow's resume dropped it from an agent's queue"), line  # not fix 3's reason
