"""squall.tools.kafka_admin without a broker: a start that fails is one KafkaSetupError naming the address."""

from __future__ import annotations

import socket

import pytest

from squall.errors import KafkaSetupError
from squall.tools import kafka_admin


def _dead_address() -> str:
    """A loopback address where nothing listens (a port just freed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("client", [kafka_admin._admin, kafka_admin._consumer])
async def test_a_client_with_no_broker_to_start_against_raises_kafka_setup_error_naming_the_address(client):
    bootstrap = _dead_address()
    with pytest.raises(KafkaSetupError, match=f"no Kafka broker answers at {bootstrap}"):
        async with client(bootstrap):
            pytest.fail("the body runs only after a start")


async def test_end_offsets_with_no_broker_raises_kafka_setup_error():
    with pytest.raises(KafkaSetupError, match="no Kafka broker answers"):
        await kafka_admin.end_offsets(_dead_address(), "t-status")
