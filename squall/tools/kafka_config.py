"""The local broker's address and configuration: ``server.properties`` of a single-node KRaft broker.

One JVM is both broker and controller (``process.roles=broker,controller``).
It listens on the bootstrap address, which must be a loopback one, and its
controller on the next port (``9092`` → ``9093``). Topics are never created
automatically (``auto.create.topics.enable=false``). No I/O here:
:mod:`squall.tools.kafka_local` writes the file and starts the broker.
Every failure raises :class:`squall.errors.KafkaSetupError`.
"""

from __future__ import annotations

import base64
import ipaddress
import uuid
from pathlib import Path

from squall.errors import KafkaSetupError
from squall.tools import kafka_secure
from squall.tools.kafka_secure import SecureFiles

NODE_ID = 1
_LOOPBACK_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


def parse_bootstrap(bootstrap: str) -> tuple[str, int]:
    """Split a single ``host:port`` (or ``[v6]:port``) of a local broker.

    A ``PLAINTEXT://`` prefix is accepted. The host must be a loopback name or
    address (the local broker never listens on other interfaces), and the port
    must leave room for the controller port (port + 1).

    Raises:
        KafkaSetupError: a list of servers, a missing/invalid port, or a
            non-loopback host.
    """
    text = (bootstrap or "").strip()
    if "://" in text:
        scheme, _, text = text.partition("://")
        if scheme.upper() != "PLAINTEXT":
            raise KafkaSetupError(f"local broker: only PLAINTEXT is supported, got {bootstrap!r}")
    if not text or "," in text:
        raise KafkaSetupError(f"local broker: expected one host:port, got {bootstrap!r}")
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise KafkaSetupError(f"local broker: expected [address]:port, got {bootstrap!r}")
        port_text = rest[1:]
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep or ":" in host:
            raise KafkaSetupError(f"local broker: expected host:port, got {bootstrap!r}")
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65534:
        raise KafkaSetupError(f"local broker: port must be 1..65534 (controller uses port + 1), got {bootstrap!r}")
    if not host:
        raise KafkaSetupError(f"local broker: missing host in {bootstrap!r}")
    if not _is_loopback(host):
        raise KafkaSetupError(f"local broker: {host!r} is not a loopback address (use 127.0.0.1 or localhost)")
    return host, int(port_text)


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def controller_port(port: int) -> int:
    """The KRaft controller port of a local broker listening on ``port``: port + 1."""
    return port + 1


def hostport(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:9092``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def bind_host(host: str) -> str:
    """The address to listen on for the bootstrap host ``host``: a loopback name binds ``127.0.0.1``."""
    # "localhost" may resolve to ::1 only; bind the IPv4 loopback explicitly.
    return "127.0.0.1" if host.lower() in _LOOPBACK_NAMES else host


def render_server_properties(bootstrap: str, data_dir: Path, secure: SecureFiles | None = None) -> str:
    """The ``server.properties`` of a single-node KRaft broker+controller.

    ``bootstrap`` is the advertised ``host:port``; the controller listens on
    port + 1; ``data_dir`` becomes ``log.dirs``. With ``secure`` the listeners
    speak SASL_SSL and TLS and an authorizer applies ACLs
    (:func:`squall.tools.kafka_secure.server_properties`).

    Raises:
        KafkaSetupError: ``bootstrap`` is not one loopback ``host:port``.
    """
    host, port = parse_bootstrap(bootstrap)
    bind = bind_host(host)
    cport = controller_port(port)
    props = {
        "process.roles": "broker,controller",
        "node.id": str(NODE_ID),
        "controller.quorum.voters": f"{NODE_ID}@{hostport(bind, cport)}",
        "listeners": f"PLAINTEXT://{hostport(bind, port)},CONTROLLER://{hostport(bind, cport)}",
        "advertised.listeners": f"PLAINTEXT://{hostport(host, port)}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data_dir),
        # squall creates every topic itself, with topology.partitions.
        "auto.create.topics.enable": "false",
        "num.partitions": "1",
        "default.replication.factor": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.hours": "168",
        "log.cleaner.enable": "true",
    }
    if secure is not None:
        props.update(
            kafka_secure.server_properties(secure, hostport(bind, port), hostport(host, port), hostport(bind, cport))
        )
    lines = [f"# Generated by squall.tools.kafka_local for {bootstrap}; rewritten at every start.\n"]
    lines += [f"{key}={value}\n" for key, value in props.items()]
    return "".join(lines)


def new_cluster_id() -> str:
    """A random Kafka cluster id (what ``kafka-storage.sh random-uuid`` prints).

    Kafka's Uuid: 16 random bytes, URL-safe base64 without padding, never
    starting with ``-`` (it would read as a command-line option).
    """
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text
