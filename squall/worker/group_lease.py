"""The worker's group-membership lease, kept from the answers of its group coordinator (squall.policy.lease).

:meth:`GroupLease.watch` wraps two methods of aiokafka's
``GroupCoordinator`` (private API of aiokafka 0.14, pinned by
tests/integration/test_group_lease.py):

* ``_send_req``: every Heartbeat, JoinGroup and SyncGroup goes through it,
  so each answer that confirms membership moves the lease to that request's
  send time, and one that ends membership ends the lease at once; a
  heartbeat confirmed after the lease lapsed ends it too, and asks for a
  rejoin (:func:`squall.policy.lease.judge`);
* ``reset_generation``: aiokafka drops its member id and generation there
  whatever request was refused — an OffsetCommit answered UNKNOWN_MEMBER_ID
  or ILLEGAL_GENERATION included (the broker kill -9 fault trial: a worker learned so that
  its membership had ended, and went on fetching through Faust's revoke,
  which waits for what is in flight). The coordinator runs in Faust's consumer thread; the fetcher reads
the lease from the worker's event loop (one float, replaced whole).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from squall.policy.lease import Fence, Verdict, judge

log = logging.getLogger("squall.lease")


class GroupLease:
    """When the coordinator last confirmed this worker's membership (monotonic s), and the fence over it.

    ``ended`` counts the answers that ended the membership: a fetcher
    that sees it grow hands back what waits in its queues.

    Before :meth:`watch` (no consumer group: an agent unit test) the fence
    is open; after it, closed until the first confirmation (the JoinGroup
    and SyncGroup that give the worker its partitions).
    """

    def __init__(self, fence: Fence, clock: Callable[[], float] = time.monotonic) -> None:
        self.fence = fence
        self.clock = clock
        self.confirmed_at_s: float | None = None
        self.watched = False
        self.ended = 0  # memberships ended (UNKNOWN_MEMBER_ID, a generation reset, a lapse), since start
        self.ever_confirmed = False  # False until the first join: waiting for it is not being fenced
        self.leaving = False  # the consumer left the group to shut down: an end that is no fault
        self._rejoin: Callable[[], object] = lambda: None  # the coordinator's request_rejoin, once watched

    def holds(self) -> bool:
        """Whether the fetcher may start a request now (squall.policy.lease.Fence.holds)."""
        return not self.watched or self.fence.holds(self.confirmed_at_s, self.clock())

    def open_for_s(self) -> float:
        """Seconds the fence stays open from now (0 when closed); ``inf`` before :meth:`watch`."""
        if not self.watched:
            return float("inf")
        until = self.fence.open_until_s(self.confirmed_at_s)
        return 0.0 if until is None else max(0.0, until - self.clock())

    def answered(self, api_key: int, error_code: int, sent_at_s: float) -> None:
        """A membership request sent at ``sent_at_s`` (monotonic s) got ``error_code``: confirm or end the lease."""
        verdict = judge(self.fence, api_key, error_code, sent_at_s, self.confirmed_at_s)
        if verdict is Verdict.CONFIRM:
            if self.confirmed_at_s is None or sent_at_s > self.confirmed_at_s:
                self.confirmed_at_s = sent_at_s
            self.ever_confirmed = True
        elif verdict is Verdict.END:
            self.end(f"the group coordinator no longer knows this worker (error {error_code}): fenced")
        elif verdict is Verdict.REJOIN:
            self.end(
                "a heartbeat was answered after the fence closed: not trusted (the coordinator may "
                "have reloaded the group without this worker); rejoining"
            )
            self._rejoin()

    def end(self, warning: str | None) -> None:
        """The membership ended: the fence closes until the next generation confirms it.

        ``warning`` is logged once per membership (while one was confirmed);
        None logs nothing (the LeaveGroup of a shutdown).
        """
        if warning is not None and self.confirmed_at_s is not None:
            log.warning("squall: %s", warning)
        self.confirmed_at_s = None
        self.ended += 1

    def watch(self, coordinator: Any) -> None:
        """Watch ``coordinator`` (an aiokafka ``GroupCoordinator``): its answers go to :meth:`answered`, its resets to :meth:`end`."""
        send: Callable[[Any], Awaitable[Any]] = coordinator._send_req

        async def send_req(request: Any) -> Any:
            sent_at_s = self.clock()
            response = await send(request)
            api_key = getattr(request, "API_KEY", None)
            error_code = getattr(response, "error_code", None)
            if isinstance(api_key, int) and isinstance(error_code, int):
                self.answered(api_key, error_code, sent_at_s)
            return response

        reset: Callable[[], None] = coordinator.reset_generation

        def reset_generation() -> None:
            reset()
            closing = getattr(coordinator, "_closing", None)
            self.leaving = closing is not None and closing.done()  # the LeaveGroup of a shutdown
            self.end(
                None
                if self.leaving
                else "aiokafka reset its group generation (a request was refused as from an unknown member): fenced"
            )

        coordinator._send_req = send_req
        coordinator.reset_generation = reset_generation
        self._rejoin = coordinator.request_rejoin
        self.watched = True
