"""The membership fence against a real broker: confirmed by a real group join, closed by a frozen broker.

Pins the private aiokafka API that :class:`squall.worker.group_lease.GroupLease`
wraps (``GroupCoordinator._send_req``): if the hook stops seeing answers, the
lease of a joined consumer stays unconfirmed and the first test fails.

The second test freezes the session's own local broker (SIGSTOP, then
SIGCONT — every other test waits meanwhile) to cut the consumer off as a
broker outage or a network split would: the fence must close before the
session could expire, and open again once the group answers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid

import pytest
from aiokafka import AIOKafkaConsumer

from squall.policy.lease import Fence
from squall.tools import kafka_local
from squall.tools.kafka_admin import ensure_topics
from squall.worker.group_lease import GroupLease

SESSION_S = 6.0  # the broker's group.min.session.timeout.ms
MARGIN_S = 2.0


async def _joined(bootstrap: str) -> tuple[AIOKafkaConsumer, GroupLease]:
    topic = f"lease-{uuid.uuid4().hex[:8]}"
    await ensure_topics(bootstrap, {topic: 2})
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"{topic}-group",
        session_timeout_ms=int(SESSION_S * 1000),
        heartbeat_interval_ms=int(SESSION_S * 1000 / 3),
    )
    await consumer.start()
    lease = GroupLease(Fence(SESSION_S, MARGIN_S))
    lease.watch(consumer._coordinator)
    consumer.subscribe([topic])
    deadline = time.monotonic() + 60
    while not consumer.assignment() and time.monotonic() < deadline:
        await asyncio.wait_for(consumer.getmany(timeout_ms=200), 5)
    assert consumer.assignment(), "the consumer never got its partitions"
    return consumer, lease


async def _poll_until(consumer: AIOKafkaConsumer, done, timeout_s: float) -> float:
    """Poll the consumer until ``done()``; seconds it took (raises AssertionError on timeout)."""
    started = time.monotonic()
    while not done():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s} s"
        await consumer.getmany(timeout_ms=100)
    return time.monotonic() - started


def test_a_group_join_confirms_the_lease(kafka_bootstrap: str) -> None:
    async def scenario() -> None:
        consumer, lease = await _joined(kafka_bootstrap)
        try:
            assert lease.holds(), "JoinGroup/SyncGroup answers did not reach the lease"
            first = lease.confirmed_at_s
            assert first is not None
            await _poll_until(consumer, lambda: (lease.confirmed_at_s or 0) > first, SESSION_S)  # a heartbeat
            assert lease.holds()
        finally:
            await consumer.stop()

    asyncio.run(scenario())


def test_a_frozen_broker_closes_the_fence_before_the_session_expires(kafka_bootstrap: str) -> None:
    pid_file = kafka_local.default_state_dir(kafka_bootstrap) / "broker.pid"
    pid = int(pid_file.read_text().strip()) if pid_file.exists() else None
    if pid is None or "kafka" not in kafka_local._cmdline(pid).lower():
        pytest.skip(f"needs a local Maven-jar broker at {kafka_bootstrap} (it is frozen for a few seconds)")

    async def scenario() -> None:
        consumer, lease = await _joined(kafka_bootstrap)
        try:
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)
            try:
                frozen_at = time.monotonic()
                confirmed = lease.confirmed_at_s
                assert confirmed is not None
                await _poll_until(consumer, lambda: not lease.holds(), SESSION_S)
                closed_after_s = time.monotonic() - confirmed
                assert closed_after_s <= SESSION_S - MARGIN_S + 0.5  # the poll's granularity
                await asyncio.sleep(max(0.0, SESSION_S + 1 - (time.monotonic() - frozen_at)))
                assert not lease.holds(), "the fence opened while the broker was frozen"
            finally:
                os.kill(pid, signal.SIGCONT)
            await _poll_until(consumer, lease.holds, 60)  # a heartbeat, or a rejoin's SyncGroup
        finally:
            await consumer.stop()

    asyncio.run(scenario())
