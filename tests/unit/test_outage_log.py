"""squall.worker.outage_log: a broker outage is logged as down, still down every N s, and back."""

from __future__ import annotations

import logging

import pytest

from squall.worker.log_filters import BrokerOutageFilter
from squall.worker.outage_log import OutageLog, is_outage_message

MESSAGES = [
    ("aiokafka", 'Unable connect to node with id 1: [Errno 111] Connect call failed', True),
    ("aiokafka", "Unable to update metadata from [1]", True),
    ("aiokafka.consumer.fetcher", "Failed fetch messages from 1: NodeNotReadyError: Attempt to send", True),
    ("aiokafka.consumer.group_coordinator", "Group Coordinator Request failed: NodeNotReadyError", True),
    ("aiokafka.consumer.group_coordinator", "Heartbeat failed for group x because it is rebalancing", False),
    ("squall.fetcher", "Unable connect to node with id 1", False),
    ("aiokafka.consumer.fetcher", "Failed fetch offsets from 1: [Error 6] NotLeaderForPartitionError: "
     "TopicPartition(topic='squall-x-signals', partition=2)", True),  # a restarted broker without leaders yet
    ("aiokafka.consumer.group_coordinator", "OffsetCommit failed for group x due to group error "
     "([Error 25] UnknownMemberIdError: x), will rejoin", False),  # a membership event, not an outage
]


@pytest.mark.parametrize(("logger", "message", "outage"), MESSAGES)
def test_only_aiokafka_connection_failures_count_as_an_outage(logger, message, outage):
    assert is_outage_message(logger, message) is outage


def _outage_lines(errors_per_s: int, outage_s: float, after_s: float) -> list[str]:
    log = OutageLog(interval_s=10.0, quiet_s=3.0)
    lines: list[str] = []
    for i in range(int(errors_per_s * outage_s)):
        t = i / errors_per_s
        line = log.on_outage_record(t, "Unable connect to node with id 1")
        if line:
            lines.append(line)
        if i % errors_per_s == 0:
            tick = log.on_tick(t)
            if tick:
                lines.append(tick)
    for s in range(int(outage_s), int(outage_s + after_s) + 1):
        tick = log.on_tick(float(s))
        if tick:
            lines.append(tick)
    return lines


def test_a_19_second_outage_at_100_errors_per_second_is_four_lines():
    lines = _outage_lines(100, 19.0, 6.0)
    assert len(lines) == 4, lines
    assert lines[0].startswith("broker unreachable: Unable connect")
    assert lines[1].startswith("broker still unreachable after 10 s")
    assert lines[2].startswith("broker still unreachable after 20 s")  # the errors stopped at 19 s, quiet from 22 s
    assert lines[3].startswith("broker reachable again after 19.0 s (1899 client errors suppressed)")


def test_a_second_outage_after_recovery_is_reported_again():
    log = OutageLog(interval_s=10.0, quiet_s=3.0)
    assert log.on_outage_record(0.0, "Unable connect")
    assert log.on_tick(5.0).startswith("broker reachable again")
    assert log.on_outage_record(50.0, "Unable connect").startswith("broker unreachable")


def test_no_line_while_the_broker_is_up():
    log = OutageLog(interval_s=10.0, quiet_s=3.0)
    assert [log.on_tick(float(t)) for t in range(30)] == [None] * 30


def test_the_filter_drops_repeats_and_rewrites_the_first_record():
    now = [0.0]
    flt = BrokerOutageFilter(OutageLog(interval_s=10.0, quiet_s=3.0), clock=lambda: now[0])

    def record(name: str, msg: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, ("1",), None)

    first = record("aiokafka", "Unable connect to node with id %s")
    assert flt.filter(first) and first.getMessage().startswith("squall: broker unreachable: Unable connect to node with id 1")
    assert not flt.filter(record("aiokafka", "Unable to update metadata from [%s]"))
    assert flt.filter(record("aiokafka", "Sending request %s"))
    assert flt.outage.suppressed == 1
