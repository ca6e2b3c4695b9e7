"""Unit tests of the local broker's parts that need no broker and no JVM: its configuration
(squall.tools.kafka_config), jar cache (kafka_jars), probe (kafka_probe) and kafka_local's refusals."""

from __future__ import annotations

import argparse
import base64
import os
import socket
from pathlib import Path

import pytest

from squall.cli import kafka as kafka_cli
from squall.tools import kafka_config, kafka_jars, kafka_local, kafka_probe
from squall.errors import KafkaSetupError


def _props(text: str) -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


@pytest.mark.parametrize(
    ("bootstrap", "expected"),
    [
        ("127.0.0.1:9092", ("127.0.0.1", 9092)),
        ("localhost:19092", ("localhost", 19092)),
        ("PLAINTEXT://127.0.0.1:9092", ("127.0.0.1", 9092)),
        ("[::1]:9092", ("::1", 9092)),
        (" 127.0.0.2:1 ", ("127.0.0.2", 1)),
    ],
)
def test_parse_bootstrap(bootstrap: str, expected: tuple[str, int]) -> None:
    assert kafka_config.parse_bootstrap(bootstrap) == expected


@pytest.mark.parametrize(
    "bootstrap",
    [
        "",
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:abc",
        "127.0.0.1:0",
        "127.0.0.1:65535",  # no room for the controller port
        "127.0.0.1:9092,127.0.0.1:9094",
        "10.1.2.3:9092",
        "example.com:9092",
        "::1:9092",
        "SSL://127.0.0.1:9092",
    ],
)
def test_bad_bootstrap_raises(bootstrap: str) -> None:
    with pytest.raises(KafkaSetupError):
        kafka_config.parse_bootstrap(bootstrap)


def test_controller_port_is_next_port() -> None:
    assert kafka_config.controller_port(9092) == 9093
    assert kafka_config.controller_port(19092) == 19093


def test_server_properties(tmp_path: Path) -> None:
    props = _props(kafka_config.render_server_properties("127.0.0.1:19092", tmp_path / "data"))
    assert props["process.roles"] == "broker,controller"
    assert props["node.id"] == "1"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["advertised.listeners"] == "PLAINTEXT://127.0.0.1:19092"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["controller.listener.names"] == "CONTROLLER"
    assert props["log.dirs"] == str(tmp_path / "data")
    assert props["auto.create.topics.enable"] == "false"
    assert props["offsets.topic.replication.factor"] == "1"
    assert props["transaction.state.log.replication.factor"] == "1"
    assert props["transaction.state.log.min.isr"] == "1"
    assert props["group.initial.rebalance.delay.ms"] == "0"


def test_server_properties_localhost_binds_ipv4_and_advertises_name(tmp_path: Path) -> None:
    props = _props(kafka_config.render_server_properties("localhost:9092", tmp_path))
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert props["advertised.listeners"] == "PLAINTEXT://localhost:9092"


def test_server_properties_ipv6(tmp_path: Path) -> None:
    props = _props(kafka_config.render_server_properties("[::1]:9092", tmp_path))
    assert props["listeners"] == "PLAINTEXT://[::1]:9092,CONTROLLER://[::1]:9093"
    assert props["controller.quorum.voters"] == "1@[::1]:9093"


def test_server_properties_bad_bootstrap(tmp_path: Path) -> None:
    with pytest.raises(KafkaSetupError):
        kafka_config.render_server_properties("192.0.2.1:9092", tmp_path)


def test_cluster_id_is_kafka_uuid() -> None:
    for _ in range(200):
        cid = kafka_config.new_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert len(base64.urlsafe_b64decode(cid + "==")) == 16


def test_cache_locations(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SQUALL_CACHE", str(tmp_path))
    assert kafka_jars.libs_dir() == tmp_path / "kafka-4.1.1" / "libs"
    assert kafka_local.default_state_dir("127.0.0.1:19092") == tmp_path / "broker" / "19092"
    monkeypatch.delenv("SQUALL_CACHE")
    assert kafka_jars.cache_root() == Path.home() / ".cache" / "squall"


def test_jars_incomplete_without_marker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SQUALL_CACHE", str(tmp_path))
    libs = kafka_jars.libs_dir()
    libs.mkdir(parents=True)
    (libs / "kafka_2.13-4.1.1.jar").write_bytes(b"")
    assert not kafka_jars.jars_complete()
    (libs / ".complete").write_text("stale digest\n")
    assert not kafka_jars.jars_complete()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_is_answering_false_on_closed_port() -> None:
    assert kafka_probe.is_answering(f"127.0.0.1:{_free_port()}", timeout_s=2) is False


def test_is_answering_false_for_non_kafka_listener() -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        assert kafka_probe.is_answering(f"127.0.0.1:{port}", timeout_s=1.5) is False


def test_up_refuses_port_taken_by_something_else(tmp_path: Path) -> None:
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen()
        port = srv.getsockname()[1]
        if port >= 65535:
            pytest.skip("no room for the controller port")
        with pytest.raises(KafkaSetupError, match="in use"):
            kafka_local.up(f"127.0.0.1:{port}", data_dir=tmp_path, wait_s=5)


def test_down_never_kills_a_recycled_pid(tmp_path: Path) -> None:
    # The pid file names a live process that is not our broker (this test
    # process): down() must leave it alone and only forget the pid file.
    (tmp_path / "broker.pid").write_text(f"{os.getpid()}\n")
    assert kafka_local.down("127.0.0.1:19092", data_dir=tmp_path) is False
    assert not (tmp_path / "broker.pid").exists()


def test_down_without_state_is_a_no_op(tmp_path: Path) -> None:
    assert kafka_local.down("127.0.0.1:19092", data_dir=tmp_path / "absent") is False


def test_add_parser_registers_kafka_commands() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--conf")
    kafka_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["kafka", "up", "--bootstrap", "127.0.0.1:19092", "--fresh", "--wait", "5"])
    assert args.bootstrap == "127.0.0.1:19092" and args.fresh and args.wait == 5 and callable(args.func)
    args = parser.parse_args(["kafka", "down", "--wipe"])
    assert args.wipe and args.bootstrap is None
    args = parser.parse_args(["kafka", "status", "--json"])
    assert args.json
