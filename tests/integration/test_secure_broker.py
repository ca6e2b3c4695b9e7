"""Through a secured broker (``squall kafka up --secure``): TLS + SCRAM + ACLs let in only who belongs.

One session broker on its own port (``$SQUALL_TEST_SECURE_BOOTSTRAP``, default
127.0.0.1:19892, controller on the next port), started empty and stopped and
wiped at the end. Select these tests with ``-m secure_broker``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from squall.settings import ROOT
from squall.tools import kafka_local
from squall.tools.harness import Crawl
from squall.tools.kafka_secure import SecureFiles
from squall.tools.site_spec import generated_site

from .conftest import BASE_OVERRIDES

pytestmark = pytest.mark.secure_broker

SECURE_BOOTSTRAP = os.environ.get("SQUALL_TEST_SECURE_BOOTSTRAP", "127.0.0.1:19892")
HOSTS = ["127.0.0.2", "127.0.0.3"]
REFUSED = "squall: Kafka refused the credentials of user worker (SASL authentication failed)"


@pytest.fixture(scope="session")
def secure_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureFiles]:
    state = tmp_path_factory.mktemp("secure-broker")
    kafka_local.up(SECURE_BOOTSTRAP, state, wait_s=90, fresh=True, secure=True, topology_id="squall")
    try:
        yield SecureFiles(state / "secure")
    finally:
        kafka_local.down(SECURE_BOOTSTRAP, state, wipe=True)


def _client_conf(files: SecureFiles, user: str, tmp_path: Path, **extra: Any) -> Path:
    """A configuration file for ``user`` (the broker's client configuration, plus ``extra`` keys)."""
    values = yaml.safe_load(files.client_conf(user).read_text())
    values.update(extra)
    path = tmp_path / f"{user}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def _squall(conf: Path, *args: str, env: dict[str, str] | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_KAFKA_", "KAFKA_BOOTSTRAP"))}
    environ.update(env or {}, SQUALL_CONF=str(conf))
    return subprocess.run(
        [sys.executable, "-m", "squall.cli.main", *args],
        cwd=ROOT, env=environ, input=stdin, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def _worker(conf: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """``faust -A topology worker`` with ``conf``, to its end (a refused one ends at start)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("SQUALL_KAFKA_", "KAFKA_BOOTSTRAP"))}
    return subprocess.run(
        [sys.executable, "-m", "faust", "-A", "topology", "worker", "-l", "info", "--without-web"],
        cwd=ROOT, env={**environ, **(env or {}), "SQUALL_CONF": str(conf)}, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip


def test_a_worker_crawls_a_site_through_tls_and_scram(secure_broker: SecureFiles, site, tmp_path: Path) -> None:
    served = site(generated_site(HOSTS, 3, disallow=None, cross_links=False))
    overrides = dict(yaml.safe_load(secure_broker.client_conf("worker").read_text()))
    overrides.pop("kafka.bootstrap.servers")
    with Crawl(tmp_path / "crawl", SECURE_BOOTSTRAP, {**BASE_OVERRIDES, **overrides}) as c:
        c.start_worker()
        assert c.seed(served.seeds) == len(HOSTS)
        report = c.wait_idle(timeout_s=150, max_wait_s=5.0)
        expected = served.server.expected_pages()
        assert set(served.page_requests()) == expected
        assert report.by_status["FETCHED"] == len(expected)
        log = (c.workdir / "worker-w1.log").read_text(errors="replace")
        assert "SaslAuthenticationFailed" not in log and "AuthorizationFailed" not in log


def test_a_wrong_password_is_refused_in_one_line_by_commands_and_workers(
    secure_broker: SecureFiles, tmp_path: Path
) -> None:
    conf = _client_conf(secure_broker, "worker", tmp_path, **{"topology.data.dir": str(tmp_path / "data")})
    wrong = {"SQUALL_KAFKA_USERNAME": "worker", "SQUALL_KAFKA_PASSWORD": "not-the-password"}  # the environment wins
    status = _squall(conf, "status", env=wrong)
    assert (status.returncode, status.stderr.strip()) == (2, REFUSED), status.stderr
    seed = _squall(conf, "seed", "-", env=wrong, stdin="http://127.0.0.2/\n")
    assert (seed.returncode, seed.stderr.strip()) == (2, REFUSED), seed.stderr

    worker = _worker(conf, wrong)
    assert worker.returncode != 0
    assert REFUSED in worker.stderr, worker.stderr[-2000:]
    assert "Traceback" not in worker.stdout + worker.stderr


def test_the_viewer_may_read_the_status_but_its_seed_and_its_worker_are_refused(secure_broker: SecureFiles, tmp_path: Path) -> None:
    topology = {"topology.id": f"squall-view-{uuid.uuid4().hex[:6]}", "topology.partitions": 2}
    operator = _squall(_client_conf(secure_broker, "operator", tmp_path, **topology), "seed", "-",
                       stdin="http://127.0.0.2/\n")  # fmt: skip
    assert operator.returncode == 0, operator.stderr
    assert "1 URL(s) sent" in operator.stdout

    viewer_conf = _client_conf(secure_broker, "viewer", tmp_path, **topology)
    status = _squall(viewer_conf, "status", "--json")
    assert status.returncode == 0, status.stderr
    assert "Traceback" not in status.stderr
    seed = _squall(viewer_conf, "seed", "-", stdin="http://127.0.0.3/\n")
    assert seed.returncode == 2
    assert seed.stderr.strip() == (
        f"squall: Kafka refused user viewer: not authorized for the topic {topology['topology.id']}-status "
        "(TopicAuthorizationFailed)"
    ), seed.stderr

    worker = _worker(_client_conf(secure_broker, "viewer", tmp_path, **topology, **{"topology.data.dir": str(tmp_path)}))
    assert worker.returncode != 0
    assert worker.stderr.strip().splitlines()[-1] == (
        f"squall: Kafka refused user viewer: not authorized for the topic {topology['topology.id']}-__assignor-__leader "
        "(TopicAuthorizationFailed)"
    ), worker.stderr[-2000:]
    assert "Traceback" not in worker.stdout + worker.stderr


async def test_only_the_operator_may_write_the_control_topic(secure_broker: SecureFiles) -> None:
    from aiokafka import AIOKafkaProducer

    from squall.errors import KafkaAccessError
    from squall.net.kafka_security import refusals
    from squall.tools.kafka_admin import ensure_topics

    control = "squall-control"  # <id>-control of the topology id the broker's ACLs were made for
    operator = secure_broker.connection(SECURE_BOOTSTRAP, "operator")
    await ensure_topics(operator, {control: 1})

    async def write_as(user: str) -> None:
        conn = secure_broker.connection(SECURE_BOOTSTRAP, user)
        producer = AIOKafkaProducer(**conn.client_kwargs(), acks="all")
        await producer.start()
        try:
            async with refusals(conn):
                await (await producer.send(control, key=b"example.com", value=b"{}"))
        finally:
            await producer.stop()

    await write_as("operator")
    for user in ("worker", "viewer"):
        with pytest.raises(KafkaAccessError, match=f"Kafka refused user {user}: not authorized for the topic"):
            await write_as(user)


def test_the_operators_host_block_is_sent_and_the_viewers_is_refused_in_one_line(
    secure_broker: SecureFiles, tmp_path: Path
) -> None:
    topology = {"topology.id": f"squall-ctl-{uuid.uuid4().hex[:6]}", "topology.partitions": 2}
    block = ("host", "block", "example.org", "--for", "2h", "--reason", "complaint 4711")
    operator = _squall(_client_conf(secure_broker, "operator", tmp_path, **topology), *block)
    assert operator.returncode == 0, operator.stderr
    assert "host.block example.org" in operator.stdout and f"{topology['topology.id']}-control" in operator.stdout
    viewer = _squall(_client_conf(secure_broker, "viewer", tmp_path, **topology), *block)
    assert viewer.returncode == 2
    assert viewer.stderr.strip() == (
        f"squall: Kafka refused user viewer: not authorized for the topic {topology['topology.id']}-control "
        "(TopicAuthorizationFailed)"
    ), viewer.stderr
