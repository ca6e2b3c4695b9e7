"""squall.tools.kafka_secure without a broker: certificates, users' files, the broker's properties and its ACLs."""

from __future__ import annotations

import ssl
import stat
from pathlib import Path

import pytest

from squall.net.kafka_security import KafkaConnection
from squall.settings import load_settings
from squall.tools import kafka_config, kafka_secure


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> kafka_secure.SecureFiles:
    return kafka_secure.prepare(tmp_path_factory.mktemp("state"), "127.0.0.1:19892", fresh=True)


def test_every_user_gets_an_owner_only_credentials_file_and_a_client_configuration(
    files: kafka_secure.SecureFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SQUALL_KAFKA_USERNAME", raising=False)
    monkeypatch.delenv("SQUALL_KAFKA_PASSWORD", raising=False)
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    assert files.complete()
    passwords = set()
    for user in ("admin", *kafka_secure.USERS):
        assert stat.S_IMODE(files.credentials(user).stat().st_mode) == 0o600
        passwords.add(files.connection("h:1", user).credentials.password)  # type: ignore[union-attr]
    assert len(passwords) == 4  # one generated password per user
    for user in kafka_secure.USERS:
        conn = KafkaConnection.from_settings(load_settings(files.client_conf(user)))
        assert (conn.bootstrap, conn.protocol, conn.user, conn.cafile) == (
            "127.0.0.1:19892",
            "SASL_SSL",
            user,
            str(files.ca),
        )


def test_the_broker_certificate_is_signed_by_the_ca_for_the_loopback_names(files: kafka_secure.SecureFiles) -> None:
    context = ssl.create_default_context(cafile=str(files.ca))
    cert = ssl._ssl._test_decode_cert(str(files.root / "broker.pem"))  # type: ignore[attr-defined]
    assert ("DNS", "localhost") in cert["subjectAltName"] and ("IP Address", "127.0.0.1") in cert["subjectAltName"]
    assert context.get_ca_certs()[0]["subject"] == ((("commonName", "squall local CA"),),)
    assert files.keystore.read_text().startswith("-----BEGIN PRIVATE KEY-----")  # PKCS#8, as Kafka's PEM store wants


def test_a_second_prepare_keeps_the_passwords_and_fresh_makes_new_ones(files: kafka_secure.SecureFiles) -> None:
    before = files.credentials("worker").read_text()
    state = files.root.parent
    assert kafka_secure.prepare(state, "127.0.0.1:19892", fresh=False).credentials("worker").read_text() == before
    assert kafka_secure.prepare(state, "127.0.0.1:19892", fresh=True).credentials("worker").read_text() != before


def test_the_secured_broker_listens_sasl_ssl_and_its_controller_only_to_its_own_certificate(
    files: kafka_secure.SecureFiles, tmp_path: Path
) -> None:
    text = kafka_config.render_server_properties("127.0.0.1:19892", tmp_path / "data", files)
    props = dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))
    assert props["listeners"] == "SASL_SSL://127.0.0.1:19892,CONTROLLER://127.0.0.1:19893"
    assert props["advertised.listeners"] == "SASL_SSL://127.0.0.1:19892"
    assert props["listener.security.protocol.map"] == "SASL_SSL:SASL_SSL,CONTROLLER:SSL"
    assert props["listener.name.controller.ssl.client.auth"] == "required"
    assert props["allow.everyone.if.no.acl.found"] == "false"
    assert props["super.users"] == "User:admin;User:CN=squall-broker"
    assert "ANONYMOUS" not in text and "PLAINTEXT" not in text


def test_workers_and_operator_own_the_topology_viewer_only_reads_and_only_the_operator_steers() -> None:
    specs = set(kafka_secure.acl_specs("crawl"))
    assert specs == {
        "User:worker ALLOW ALL TOPIC PREFIXED crawl",
        "User:worker ALLOW ALL GROUP PREFIXED crawl",
        "User:operator ALLOW ALL TOPIC PREFIXED crawl",
        "User:operator ALLOW ALL GROUP PREFIXED crawl",
        "User:worker DENY WRITE TOPIC LITERAL crawl-control",
        "User:viewer ALLOW READ TOPIC PREFIXED crawl",
        "User:viewer ALLOW DESCRIBE TOPIC PREFIXED crawl",
        "User:viewer ALLOW DESCRIBE GROUP PREFIXED crawl",  # not READ: a viewer cannot join the workers' group
    }
