"""Faust's message drain without a round of the event loop per message (fix 6 of :mod:`squall.worker.kafka_consumer`).

faust-streaming 0.11–0.15 (``faust/transport/consumer.py``,
``Consumer._drain_messages``) hands each message read to the conductor as
``await self.wait_first(callback(message), self.suspend_flow.wait())``:
mode's ``Service.wait_first`` wraps every argument, and the service's
stopped and crashed events, in a task of its own and awaits
``asyncio.wait`` over the four, then cancels three. That costs four tasks and
at least one full turn of the event loop per message even when the
conductor's callback never has to wait, which is nearly always: it waits only
while flow control is suspended (a rebalance), while the producer's buffer is
over its high-water mark, or while a stream's queue is full. On a busy worker
one turn of the loop is milliseconds, so a batch of a few hundred messages
took most of a second to reach its agents, and the next batch waited in the
consumer thread meanwhile (measured: a median 1.5 s from a fetch message's
Kafka CreateTime to the fetcher agent on a 200-host crawl, with the loop's
own lag under 1 ms).

:func:`deliver` runs the callback in the draining task up to its first
suspension. A callback that finishes without one (the common case) costs a
plain call; one that suspends is carried on exactly as Faust does it, in
``wait_first`` against ``suspend_flow``, so a rebalance still interrupts a
callback blocked on a full queue. :func:`resumed` is the piece that carries a
suspended coroutine on in another task: it passes on what the coroutine
yields and what the task sends or throws, as ``yield from`` would (PEP 380).
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Hashable, Iterable
from typing import Any

Interrupted = Callable[[Awaitable[Any]], Awaitable[Any]]  # awaits its argument, or stops early (wait_first)


@types.coroutine
def resumed(coro: Coroutine[Any, Any, Any], first: Any) -> Generator[Any, Any, Any]:
    """Carry on ``coro``, which has already run to a suspension on ``first`` (the value it yielded).

    Returns what ``coro`` returns; raises what it raises. A value sent to, or
    an exception thrown into, the awaiting task (a cancellation) is passed to
    ``coro``; closing this generator closes ``coro``.
    """
    pending = first
    while True:
        try:
            sent = yield pending
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:  # a cancellation or an error thrown into the awaiting task
            try:
                pending = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
        else:
            try:
                pending = coro.send(sent)
            except StopIteration as stop:
                return stop.value


async def _carry_on(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await resumed(coro, first)


def deliver(coro: Coroutine[Any, Any, Any], interruptible: Interrupted) -> Awaitable[Any] | None:
    """Run ``coro`` up to its first suspension; None when it finished without one.

    When it suspends, returns the awaitable that finishes it:
    ``interruptible(rest)``, e.g. ``lambda rest: service.wait_first(rest, event.wait())``
    so that the event stops it as it stopped Faust's own delivery. An
    exception ``coro`` raises before suspending propagates here.
    """
    try:
        first = coro.send(None)
    except StopIteration:
        return None
    return interruptible(_carry_on(coro, first))


class SeekEpochs:
    """Whether the batch being drained was read under a partition's latest seek (:meth:`current`).

    The drain hands a batch over message by message, with the event loop
    turning in between; a seek of a partition meanwhile — the rebalance's
    seek to the committed offsets, or a read-again seek — makes the consumer
    read that partition again from the new position. The rest of the old
    batch must not move the partition's read offset past that position (the
    messages read again would be dropped as "read before"), nor be taken for
    a gap in the log (the offsets in between would count as acknowledged).
    A seek is noted before and after it runs (:meth:`sought`), so a batch
    read while it was under way is not current either, and the first
    message read after it notes no gap (:meth:`gap_known`). Counters only; no I/O.
    """

    def __init__(self) -> None:
        self.count = 0  # seeks noted so far, of any partition
        self._of: dict[Hashable, int] = {}  # partition → seeks of it noted so far
        self.unread: set[Hashable] = set()  # partitions sought and not read under that seek yet

    def sought(self, partitions: Iterable[Hashable]) -> None:
        """Note a seek of ``partitions`` (once before it runs and once after)."""
        for tp in partitions:
            self._of[tp] = self._of.get(tp, 0) + 1
            self.unread.add(tp)
        self.count += 1

    def gap_known(self, tp: Hashable) -> bool:
        """Whether a jump of ``tp``'s read offset means offsets missing from the log.

        Not for the first message read after a seek: the read offset is then
        the seek's position, and a batch read while the seek was under way may
        have been handed over already without moving it (:meth:`current`).
        """
        return tp not in self.unread

    def read(self, tp: Hashable) -> None:
        """A message of ``tp`` read under its latest seek moved its read offset."""
        self.unread.discard(tp)

    def snapshot(self) -> tuple[int, dict[Hashable, int]]:
        """The counts when a batch is read (:meth:`current` compares with them)."""
        return self.count, dict(self._of)

    def current(self, tp: Hashable, at_read: tuple[int, dict[Hashable, int]]) -> bool:
        """Whether ``tp`` was not sought since ``at_read`` (a :meth:`snapshot`): its messages may move its read offset.

        The drain asks only when some seek came since (``count != at_read[0]``,
        its per-message fast path); the answer holds either way.
        """
        return self._of.get(tp, 0) == at_read[1].get(tp, 0)
