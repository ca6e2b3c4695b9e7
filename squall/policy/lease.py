"""Fencing: how long a worker may still start requests for the partitions the group gave it. Pure.

Kafka's group coordinator expires a member ``kafka.session.timeout.secs``
after the last heartbeat, JoinGroup or SyncGroup it *received* from it, and
only then gives its partitions to another member (Kafka's consumer-group
protocol, KIP-62; a static member, KIP-345, the same). So when a request
that this worker sent at ``t`` is answered as coming from a current member
of the group, no other worker can own this worker's partitions before
``t + session timeout``: the *lease*. Its start is the request's send time,
never its answer's, so the lease never outlasts what the coordinator granted.

A worker cut off from the broker (an outage, a network split) keeps the
hand-outs it holds and, without a fence, goes on fetching them while the
coordinator expires it and another worker takes its hosts over — two
workers on one host, faster than its delay (the fault suite's broker kill -9 trial, tests/faults/schedule.py).
With the fence the fetcher starts no request once the lease has less than
``kafka.session.fence.margin.secs`` left: the margin covers the time
between a granted turn and the request reaching the server (connection
set-up, a token-bucket wait). The new owner then starts after the take-over
and one delay (:func:`squall.policy.pace.on_takeover`), so the two owners'
requests are a delay apart (docs/architecture.md invariant 2).

Which answers confirm membership (Kafka's error codes): Heartbeat with
NONE (0) or REBALANCE_IN_PROGRESS (27: the member is still in the group
until the rebalance ends, and must rejoin), JoinGroup and SyncGroup with
NONE. UNKNOWN_MEMBER_ID (25), ILLEGAL_GENERATION (22) and
FENCED_INSTANCE_ID (82) to any of them end the membership at once.

A heartbeat answered after the fence closed is not trusted (:func:`judge`):
once the coordinator has been out of reach for longer than the lease, this
worker cannot tell whether the group it answers for is the one that gave it
its partitions. Kafka 4.1 was seen (the broker kill -9 fault trial, 2026-12-01) answering
a member's heartbeat with NONE after a broker restart, then within 0.1 s
refusing that member's OffsetCommit as from an unknown member, while the
other member rejoined alone and took every partition; the confirmed worker
went on fetching beside the new owner. (The broker's log of such a restart
shows the group loaded with its members, expired, unloaded and loaded
again.) A heartbeat is not written to the group's log; an assignment is
(before SyncGroup is answered). So after a lapse only a new generation
(JoinGroup and SyncGroup with NONE) reopens the fence: such a heartbeat
counts as an end of the membership, and the worker rejoins at once.

Times are monotonic seconds of one process (the consumer thread confirms,
the fetcher reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

JOIN_GROUP = 11  # Kafka API keys
HEARTBEAT = 12
SYNC_GROUP = 14
NONE = 0  # Kafka error codes
ILLEGAL_GENERATION = 22
UNKNOWN_MEMBER_ID = 25
REBALANCE_IN_PROGRESS = 27
FENCED_INSTANCE_ID = 82
_MEMBERSHIP_APIS = frozenset({JOIN_GROUP, HEARTBEAT, SYNC_GROUP})
_GONE = frozenset({ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID})


def heartbeat_interval_s(session_timeout_s: float) -> float:
    """The consumer's heartbeat interval (s): a third of the session timeout (Kafka's advice), at most 3 s (its default)."""
    return min(3.0, session_timeout_s / 3)


def confirms(api_key: int, error_code: int) -> bool:
    """Whether an answer to a request of ``api_key`` says the sender is a current member of its group."""
    if api_key == HEARTBEAT:
        return error_code in (NONE, REBALANCE_IN_PROGRESS)
    return api_key in _MEMBERSHIP_APIS and error_code == NONE


def ends(api_key: int, error_code: int) -> bool:
    """Whether such an answer says the sender is no longer a member (it must rejoin; its partitions may be gone)."""
    return api_key in _MEMBERSHIP_APIS and error_code in _GONE


class Verdict(Enum):
    """What one answer of the group coordinator does to the lease (:func:`judge`)."""

    CONFIRM = "confirm"  # the lease runs from the request's send time
    END = "end"  # the membership ended: hand back what waits, rejoin
    REJOIN = "rejoin"  # a heartbeat after a lapse: not trusted, treated as an end, and a rejoin is asked for
    NOTHING = "nothing"  # says nothing of the membership (a coordinator error, another API)


@dataclass(frozen=True)
class Fence:
    """The fence of one worker.

    Args:
        session_timeout_s: ``kafka.session.timeout.secs`` (s).
        margin_s: ``kafka.session.fence.margin.secs`` (s): no request starts
            later than this before the lease ends.
    """

    session_timeout_s: float
    margin_s: float

    def open_until_s(self, confirmed_at_s: float | None) -> float | None:
        """Until when (monotonic s) requests may start; None = not a member (nothing may start)."""
        if confirmed_at_s is None:
            return None
        return confirmed_at_s + self.session_timeout_s - self.margin_s

    def holds(self, confirmed_at_s: float | None, now_s: float) -> bool:
        """Whether a request may start at ``now_s`` (monotonic s) under the membership confirmed at ``confirmed_at_s``."""
        until = self.open_until_s(confirmed_at_s)
        return until is not None and now_s < until

    def lapsed(self, confirmed_at_s: float | None, at_s: float) -> bool:
        """Whether the lease confirmed at ``confirmed_at_s`` had run out by ``at_s`` (monotonic s; None = no lease)."""
        return not self.holds(confirmed_at_s, at_s)


def judge(fence: Fence, api_key: int, error_code: int, sent_at_s: float, confirmed_at_s: float | None) -> Verdict:
    """What an answer to a request of ``api_key`` sent at ``sent_at_s`` does to the lease confirmed at ``confirmed_at_s``.

    JoinGroup and SyncGroup with NONE confirm (a new generation, written to
    the group's log). A confirming heartbeat confirms only while the lease
    holds at its send time; after a lapse it is :attr:`Verdict.REJOIN` (see
    the module docstring). :func:`ends` codes end the membership.
    """
    if ends(api_key, error_code):
        return Verdict.END
    if not confirms(api_key, error_code):
        return Verdict.NOTHING
    if api_key == HEARTBEAT and fence.lapsed(confirmed_at_s, sent_at_s):
        return Verdict.REJOIN
    return Verdict.CONFIRM
