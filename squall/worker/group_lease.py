"""The worker's group-membership lease, kept from the answers of its group coordinator (squall.policy.lease).

:meth:`GroupLease.watch` wraps the ``_send_req`` of aiokafka's
``GroupCoordinator`` (private API of aiokafka 0.14, pinned by
tests/unit/test_group_lease.py): every Heartbeat, JoinGroup and SyncGroup
goes through it, so each answer that confirms membership moves the lease
to that request's send time, and one that ends membership ends the lease
at once. The coordinator runs in Faust's consumer thread; the fetcher reads
the lease from the worker's event loop (one float, replaced whole).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from squall.policy.lease import Fence, confirms, ends

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
        self.ended = 0  # memberships ended by the coordinator (UNKNOWN_MEMBER_ID, ...), since start
        self.ever_confirmed = False  # False until the first join: waiting for it is not being fenced

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
        if confirms(api_key, error_code):
            if self.confirmed_at_s is None or sent_at_s > self.confirmed_at_s:
                self.confirmed_at_s = sent_at_s
            self.ever_confirmed = True
        elif ends(api_key, error_code):
            if self.confirmed_at_s is not None:
                log.warning("squall: the group coordinator no longer knows this worker (error %d): fenced", error_code)
            self.confirmed_at_s = None
            self.ended += 1

    def watch(self, coordinator: Any) -> None:
        """Route ``coordinator``'s requests (an aiokafka ``GroupCoordinator``) through :meth:`answered`."""
        send: Callable[[Any], Awaitable[Any]] = coordinator._send_req

        async def send_req(request: Any) -> Any:
            sent_at_s = self.clock()
            response = await send(request)
            api_key = getattr(request, "API_KEY", None)
            error_code = getattr(response, "error_code", None)
            if isinstance(api_key, int) and isinstance(error_code, int):
                self.answered(api_key, error_code, sent_at_s)
            return response

        coordinator._send_req = send_req
        self.watched = True
