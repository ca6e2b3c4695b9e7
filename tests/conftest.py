"""Session-wide test fixtures: the Kafka broker of the integration tests.

``kafka_bootstrap`` resolves, in order:

1. ``$KAFKA_BOOTSTRAP_SERVERS`` (e.g. exported by ``scripts/test.sh``);
2. a testcontainers Kafka container when ``SQUALL_TEST_DOCKER=1``;
3. the local Maven-jar broker (:mod:`squall.tools.kafka_local`) on
   ``$SQUALL_TEST_BOOTSTRAP`` (default ``127.0.0.1:19092``, a test port, so a
   broker on 9092 is never touched), stopped at the end only if this session
   started it.

Tests under ``tests/integration`` get the ``integration`` marker
automatically (``pytest -m 'not integration'`` runs the unit tests only).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

TEST_BOOTSTRAP = os.environ.get("SQUALL_TEST_BOOTSTRAP", "127.0.0.1:19092")
_INTEGRATION_DIR = Path(__file__).resolve().parent / "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _INTEGRATION_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a Kafka broker for integration tests (see module doc)."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if env:
        yield env
        return
    if os.environ.get("SQUALL_TEST_DOCKER") == "1":
        from testcontainers.community.kafka import KafkaContainer

        image = os.environ.get("SQUALL_TEST_KAFKA_IMAGE", "confluentinc/cp-kafka:7.6.0")
        container = KafkaContainer(image).with_kraft().with_env("KAFKA_AUTO_CREATE_TOPICS_ENABLE", "false")
        with container:
            yield container.get_bootstrap_server()
        return
    from squall.tools import kafka_local

    started = kafka_local.up(TEST_BOOTSTRAP, fresh=True)
    try:
        yield TEST_BOOTSTRAP
    finally:
        if started:
            kafka_local.down(TEST_BOOTSTRAP, wipe=True)


@pytest.fixture(scope="session")
def chromium() -> Path:
    """The system Chromium (squall.net.browser.find_chromium); a test needing it FAILS with one line without it."""
    from squall.net.browser import find_chromium
    from squall.errors import BrowserMissing

    try:
        return find_chromium(os.environ.get("SQUALL_TEST_CHROMIUM", ""))
    except BrowserMissing as exc:
        pytest.fail(f"render tests need Chromium: {exc}", pytrace=False)
