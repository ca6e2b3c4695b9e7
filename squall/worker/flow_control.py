"""Faust's flow control, whose clear on resume has what it drops read again (fix 9 of :mod:`squall.worker.kafka_consumer`).

mode's ``FlowControlEvent.resume()`` clears every stream queue
(``clear_on_resume``), and faust-streaming 0.15.3 resumes the flow twice
when a worker is given partitions whose tables need recovery
(``faust/tables/recovery.py``): once when it starts reading the changelogs
and once in ``Recovery._resume_streams``, *after* its seek of the stream
partitions to their committed offsets. Between that seek and the second
resume the flow is already running, so the consumer hands the agents'
queues messages read from the committed offsets, and the resume then drops
them. A dropped message was never given to a stream, so it is neither
tracked nor acknowledged: the committed offset stops before it, but nothing
reads it again until the stuck watch (``kafka.stuck.secs``). The messages
after it are processed meanwhile, so a status partition looked applied up
to its end while the results it dropped were not, and the take-over
handed those URLs out again (a second request for a page already fetched).

:class:`FlowControl` notes, before a clear made while the flow runs, the
messages of acknowledged topics still waiting in the queues, and hands them
to ``dropped`` after it (the consumer seeks their partitions back to them).
A clear while the flow is suspended (a revoke) needs nothing: the
rebalance's own seek to the committed offsets follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any

from faust.types import Message
from mode.utils.queues import FlowControlEvent


def unread_messages(queues: Iterable[asyncio.Queue[Any]], acks_enabled_for: Callable[[str], bool]) -> list[Message]:
    """The Kafka messages waiting in ``queues`` that no stream has taken yet, of topics with acknowledgements.

    A queue holds events (an ``.message`` attribute) or plain values (a
    channel's, skipped). A message a stream took is tracked; one acknowledged
    is done.
    """
    found = []
    for queue in queues:
        for item in list(queue._queue):  # type: ignore[attr-defined]  # asyncio.Queue's deque of waiting items
            message = getattr(item, "message", None)
            if (
                isinstance(message, Message)
                and not message.tracked
                and not message.acked
                and acks_enabled_for(message.topic)
            ):
                found.append(message)
    return found


class FlowControl(FlowControlEvent):
    """mode's flow control of the stream queues; a clear while the flow runs reports what it dropped."""

    def __init__(
        self,
        *,
        dropped: Callable[[list[Message]], None],
        acks_enabled_for: Callable[[str], bool],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._dropped = dropped
        self._acks_enabled_for = acks_enabled_for

    def clear(self) -> None:
        """Clear every managed queue (as mode does); while the flow runs, hand the dropped messages to ``dropped``."""
        unread = unread_messages(self._queues, self._acks_enabled_for) if self.is_active() else []
        super().clear()
        if unread:
            self._dropped(unread)
