"""The fence over group membership: squall.policy.lease (pure) and squall.worker.group_lease (the holder)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from squall.policy import lease as pl
from squall.policy.lease import Fence, Verdict, confirms, ends, heartbeat_interval_s, judge
from squall.worker.group_lease import GroupLease


@pytest.mark.parametrize(
    ("api", "code", "confirmed"),
    [
        (pl.HEARTBEAT, pl.NONE, True),
        (pl.HEARTBEAT, pl.REBALANCE_IN_PROGRESS, True),  # still a member until the rebalance ends
        (pl.SYNC_GROUP, pl.NONE, True),
        (pl.JOIN_GROUP, pl.NONE, True),
        (pl.SYNC_GROUP, pl.REBALANCE_IN_PROGRESS, False),
        (pl.HEARTBEAT, pl.UNKNOWN_MEMBER_ID, False),
        (pl.HEARTBEAT, 15, False),  # COORDINATOR_NOT_AVAILABLE says nothing of the membership
        (8, pl.NONE, False),  # OffsetCommit is not a membership request here
    ],
)
def test_which_answers_confirm_membership(api: int, code: int, confirmed: bool) -> None:
    assert confirms(api, code) is confirmed


@pytest.mark.parametrize("code", [pl.UNKNOWN_MEMBER_ID, pl.ILLEGAL_GENERATION, pl.FENCED_INSTANCE_ID])
@pytest.mark.parametrize("api", [pl.HEARTBEAT, pl.JOIN_GROUP, pl.SYNC_GROUP])
def test_answers_that_end_membership(api: int, code: int) -> None:
    assert ends(api, code) and not confirms(api, code)


def test_coordinator_errors_neither_confirm_nor_end() -> None:
    assert not ends(pl.HEARTBEAT, 15) and not ends(pl.HEARTBEAT, pl.REBALANCE_IN_PROGRESS) and not ends(8, 25)


def test_fence_closes_margin_before_the_session_could_expire() -> None:
    fence = Fence(session_timeout_s=10.0, margin_s=2.0)
    assert fence.open_until_s(100.0) == 108.0
    assert fence.holds(100.0, 107.99) and not fence.holds(100.0, 108.0)
    assert not fence.holds(None, 0.0) and fence.open_until_s(None) is None


def test_heartbeat_interval_is_a_third_of_the_session_at_most_three_seconds() -> None:
    assert heartbeat_interval_s(6.0) == 2.0 and heartbeat_interval_s(30.0) == 3.0


@dataclass
class Answer:
    error_code: int


class Request:
    def __init__(self, api_key: int) -> None:
        self.API_KEY = api_key


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Coordinator:
    """The part of aiokafka's GroupCoordinator the lease wraps: ``_send_req`` (answering after ``latency_s``),
    ``reset_generation`` and ``request_rejoin``."""

    def __init__(self, clock: Clock, code: int, latency_s: float = 0.5) -> None:
        self.clock, self.code, self.latency_s = clock, code, latency_s
        self.resets = self.rejoins = 0

    async def _send_req(self, request: Request) -> Answer:
        self.clock.now += self.latency_s
        return Answer(self.code)

    def reset_generation(self) -> None:
        self.resets += 1
        self.request_rejoin()

    def request_rejoin(self) -> None:
        self.rejoins += 1


def test_unwatched_lease_is_open_and_watched_one_closed_until_confirmed() -> None:
    clock = Clock()
    lease = GroupLease(Fence(6.0, 2.0), clock)
    assert lease.holds() and lease.open_for_s() == float("inf")
    lease.watch(Coordinator(clock, pl.NONE))
    assert not lease.holds() and lease.open_for_s() == 0.0


def test_lease_runs_from_the_send_time_of_the_confirmed_request() -> None:
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE, latency_s=0.5)
    lease = GroupLease(Fence(6.0, 2.0), clock)
    lease.watch(coordinator)
    assert asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP))) == Answer(pl.NONE)
    assert lease.confirmed_at_s == 1000.0  # sent at 1000, answered at 1000.5
    assert lease.open_for_s() == pytest.approx(3.5)
    clock.now = 1003.99
    assert lease.holds()
    clock.now = 1004.0
    assert not lease.holds()


def test_an_older_confirmation_answered_late_does_not_move_the_lease_back() -> None:
    clock = Clock()
    lease = GroupLease(Fence(6.0, 2.0), clock)
    lease.answered(pl.SYNC_GROUP, pl.NONE, sent_at_s=1005.0)
    lease.answered(pl.HEARTBEAT, pl.NONE, sent_at_s=1001.0)
    assert lease.confirmed_at_s == 1005.0


def test_unknown_member_ends_the_lease_at_once_and_a_sync_gives_it_back() -> None:
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE)
    lease = GroupLease(Fence(6.0, 2.0), clock)
    lease.watch(coordinator)
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))
    assert lease.holds()
    coordinator.code = pl.UNKNOWN_MEMBER_ID
    asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))
    assert not lease.holds() and lease.confirmed_at_s is None
    coordinator.code = pl.NONE
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    assert lease.holds()


def test_failed_heartbeats_let_the_lease_run_out() -> None:
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE, latency_s=0.0)
    lease = GroupLease(Fence(6.0, 2.0), clock)
    lease.watch(coordinator)
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    assert lease.holds()
    coordinator.code = 15  # COORDINATOR_NOT_AVAILABLE, as after a broker restart
    for _ in range(10):
        clock.now += 0.5
        asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))
    assert clock.now == 1005.0 and not lease.holds()


def test_answers_without_an_error_code_are_ignored() -> None:
    clock = Clock()
    lease = GroupLease(Fence(6.0, 2.0), clock)

    class Bare(Coordinator):
        async def _send_req(self, request: object) -> object:  # type: ignore[override]
            return object()

    bare = Bare(clock, pl.NONE)
    lease.watch(bare)
    asyncio.run(bare._send_req(Request(pl.HEARTBEAT)))
    assert lease.confirmed_at_s is None


FENCE = Fence(session_timeout_s=6.0, margin_s=2.0)


@pytest.mark.parametrize(
    ("api", "code", "sent_at_s", "confirmed_at_s", "verdict"),
    [
        (pl.HEARTBEAT, pl.NONE, 103.9, 100.0, Verdict.CONFIRM),  # sent while the lease held
        (pl.HEARTBEAT, pl.NONE, 104.0, 100.0, Verdict.REJOIN),  # sent after it lapsed: not trusted
        (pl.HEARTBEAT, pl.REBALANCE_IN_PROGRESS, 120.0, 100.0, Verdict.REJOIN),
        (pl.HEARTBEAT, pl.NONE, 120.0, None, Verdict.REJOIN),
        (pl.SYNC_GROUP, pl.NONE, 120.0, 100.0, Verdict.CONFIRM),  # a new generation: written to the group's log
        (pl.JOIN_GROUP, pl.NONE, 120.0, None, Verdict.CONFIRM),
        (pl.HEARTBEAT, pl.UNKNOWN_MEMBER_ID, 101.0, 100.0, Verdict.END),
        (pl.HEARTBEAT, 15, 120.0, 100.0, Verdict.NOTHING),
    ],
)
def test_a_heartbeat_after_a_lapse_is_not_trusted(
    api: int, code: int, sent_at_s: float, confirmed_at_s: float | None, verdict: Verdict
) -> None:
    assert judge(FENCE, api, code, sent_at_s, confirmed_at_s) is verdict


def test_a_heartbeat_answered_after_an_outage_ends_the_membership_and_asks_for_a_rejoin() -> None:
    """The broker kill -9 fault trial: Kafka 4.1 confirmed a member after a broker restart, then reloaded the group without it."""
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE, latency_s=0.0)
    lease = GroupLease(FENCE, clock)
    lease.watch(coordinator)
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    coordinator.code = 15  # the broker is down
    clock.now += 17.0
    assert not lease.holds() and lease.ended == 0
    coordinator.code = pl.NONE  # back: the heartbeat is answered NONE
    asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))
    assert not lease.holds() and lease.ended == 1 and coordinator.rejoins == 1
    asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))  # still not trusted
    assert not lease.holds()
    asyncio.run(coordinator._send_req(Request(pl.JOIN_GROUP)))
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    assert lease.holds()
    asyncio.run(coordinator._send_req(Request(pl.HEARTBEAT)))  # within the new lease: renews it
    assert lease.holds() and lease.confirmed_at_s == clock.now


def test_a_generation_reset_for_any_request_ends_the_membership() -> None:
    """aiokafka resets its generation when an OffsetCommit is refused as from an unknown member (the broker kill -9 fault trial)."""
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE)
    lease = GroupLease(FENCE, clock)
    lease.watch(coordinator)
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))
    assert lease.holds()
    coordinator.reset_generation()  # what aiokafka's commit path calls on UNKNOWN_MEMBER_ID
    assert coordinator.resets == 1 and coordinator.rejoins == 1  # the original still runs
    assert not lease.holds() and lease.ended == 1


def test_leaving_the_group_at_shutdown_ends_the_lease_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    coordinator = Coordinator(clock, pl.NONE)
    lease = GroupLease(FENCE, clock)
    lease.watch(coordinator)
    asyncio.run(coordinator._send_req(Request(pl.SYNC_GROUP)))

    class Done:
        def done(self) -> bool:
            return True

    coordinator._closing = Done()  # type: ignore[attr-defined]  # aiokafka's future, set by close()
    coordinator.reset_generation()
    assert not lease.holds() and lease.ended == 1 and lease.leaving and not caplog.records
