"""squall.net.kafka_security without a broker: the keys' rules, credentials, client arguments, refusals in one line."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiokafka import errors as kafka_errors

from squall.errors import ConfigError, KafkaAccessError
from squall.net.kafka_security import (
    Credentials,
    KafkaConnection,
    as_connection,
    credentials_of,
    parse_credentials,
    translate,
)
from squall.settings import load_settings

from .settings_helper import settings_of

NO_ENV: dict[str, str] = {}


@pytest.fixture(autouse=True)
def _no_credentials_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SQUALL_KAFKA_USERNAME", raising=False)
    monkeypatch.delenv("SQUALL_KAFKA_PASSWORD", raising=False)


@pytest.fixture
def creds_file(tmp_path: Path) -> Path:
    path = tmp_path / "worker.credentials"
    path.write_text("# squall\nusername=worker\npassword = s3cr=t\n")
    return path


@pytest.fixture
def ca_file(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("not a certificate\n")
    return path


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("username=worker\npassword=pw\n", Credentials("worker", "pw")),
        ("username: viewer\npassword: 'a b'\n", Credentials("viewer", "a b")),
        ("\n# comment\nUSERNAME = op\npassword=x=y\n", Credentials("op", "x=y")),
    ],
)
def test_a_credentials_file_has_a_username_and_a_password_line(text: str, expected: Credentials) -> None:
    assert parse_credentials(text, "f") == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("username=worker\n", "has no password"),
        ("password=pw\n", "has no username"),
        ("user worker\n", "line 1: expected username"),
        ("username=w\npassword=p\ntoken=t\n", "unknown name 'token'"),
    ],
)
def test_an_incomplete_credentials_file_is_refused_naming_the_key(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why) as info:
        parse_credentials(text, "f")
    assert info.value.key == "kafka.sasl.credentials.file"


def test_a_password_never_shows_in_a_repr() -> None:
    conn = KafkaConnection("h:1", "SASL_SSL", credentials=Credentials("worker", "hunter2"))
    assert "hunter2" not in repr(conn) and "hunter2" not in str(conn)


def test_credentials_from_the_environment_win_over_the_file(creds_file: Path) -> None:
    settings = settings_of({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.credentials.file": str(creds_file)})
    assert credentials_of(settings, NO_ENV) == Credentials("worker", "s3cr=t")
    env = {"SQUALL_KAFKA_USERNAME": "operator", "SQUALL_KAFKA_PASSWORD": "pw"}
    assert credentials_of(settings, env) == Credentials("operator", "pw")
    with pytest.raises(ConfigError) as info:
        credentials_of(settings, {"SQUALL_KAFKA_USERNAME": "operator"})
    assert info.value.key == "SQUALL_KAFKA_PASSWORD"


def test_credentials_in_the_environment_satisfy_a_sasl_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQUALL_KAFKA_USERNAME", "worker")
    monkeypatch.setenv("SQUALL_KAFKA_PASSWORD", "pw")
    settings = load_settings(overrides={"kafka.security.protocol": "SASL_SSL"})
    conn = KafkaConnection.from_settings(settings)
    assert (conn.protocol, conn.mechanism, conn.user) == ("SASL_SSL", "SCRAM-SHA-512", "worker")


@pytest.mark.parametrize(
    ("overrides", "key", "why"),
    [
        ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol", "must be one of"),
        ({"kafka.sasl.mechanism": "GSSAPI"}, "kafka.sasl.mechanism", "must be one of"),
        ({"kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.credentials.file", "needs credentials"),
        ({"kafka.security.protocol": "SASL_PLAINTEXT"}, "kafka.sasl.credentials.file", "needs credentials"),
        ({"kafka.ssl.cafile": "CA"}, "kafka.ssl.cafile", "no TLS"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.cafile": "/no/such/ca.pem"}, "kafka.ssl.cafile", "does not exist"),
        ({"kafka.security.protocol": "SSL", "kafka.ssl.keyfile": "CA"}, "kafka.ssl.keyfile", "without kafka.ssl.certfile"),
        ({"kafka.sasl.credentials.file": "CREDS"}, "kafka.sasl.credentials.file", "is set but kafka.security.protocol"),
        (
            {"kafka.security.protocol": "SASL_SSL", "kafka.sasl.credentials.file": "/no/such/file"},
            "kafka.sasl.credentials.file",
            "does not exist",
        ),
    ],
)
def test_a_contradictory_security_combination_fails_at_start_naming_the_key(
    overrides: dict[str, str], key: str, why: str, ca_file: Path, creds_file: Path
) -> None:
    values = {k: str(ca_file) if v == "CA" else str(creds_file) if v == "CREDS" else v for k, v in overrides.items()}
    with pytest.raises(ConfigError, match=why) as info:
        load_settings(overrides=values)
    assert info.value.key == key


def test_ssl_without_a_ca_file_uses_the_system_cas() -> None:
    conn = KafkaConnection.from_settings(load_settings(overrides={"kafka.security.protocol": "SSL"}))
    kwargs = conn.client_kwargs()
    assert kwargs["security_protocol"] == "SSL"
    context = kwargs["ssl_context"]
    assert isinstance(context, ssl.SSLContext) and context.check_hostname
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert "sasl_mechanism" not in kwargs


def test_a_ca_file_that_is_no_certificate_names_its_key(ca_file: Path) -> None:
    with pytest.raises(ConfigError) as info:
        KafkaConnection("h:1", "SSL", cafile=str(ca_file)).ssl_context()
    assert info.value.key == "kafka.ssl.cafile"


def test_sasl_ssl_gives_aiokafka_and_faust_the_same_credentials(creds_file: Path) -> None:
    import faust

    settings = settings_of(
        {
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.credentials.file": str(creds_file),
            "kafka.ssl.check.hostname": False,
        }
    )
    conn = KafkaConnection.from_settings(settings, NO_ENV)
    kwargs = conn.client_kwargs()
    assert kwargs["bootstrap_servers"] == settings.kafka_bootstrap_servers
    assert (kwargs["sasl_mechanism"], kwargs["sasl_plain_username"], kwargs["sasl_plain_password"]) == (
        "SCRAM-SHA-256",
        "worker",
        "s3cr=t",
    )
    assert not kwargs["ssl_context"].check_hostname
    creds = conn.faust_credentials()
    assert isinstance(creds, faust.SASLCredentials)
    assert (creds.protocol.value, creds.mechanism.value, creds.username) == ("SASL_SSL", "SCRAM-SHA-256", "worker")


def test_plaintext_is_what_a_bare_address_means() -> None:
    conn = as_connection("127.0.0.1:9092")
    assert conn.client_kwargs() == {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}
    assert conn.faust_credentials() is None
    assert as_connection(conn) is conn


SASL = KafkaConnection("127.0.0.1:19892", "SASL_SSL", credentials=Credentials("viewer", "pw"))


@pytest.mark.parametrize(
    ("exc", "line"),
    [
        (
            kafka_errors.SaslAuthenticationFailed("Authentication failed during authentication due to invalid"),
            "Kafka refused the credentials of user viewer (SASL authentication failed)",
        ),
        (
            kafka_errors.TopicAuthorizationFailedError("squall-status"),
            "Kafka refused user viewer: not authorized for the topic squall-status (TopicAuthorizationFailed)",
        ),
        (
            kafka_errors.TopicAuthorizationFailedError({"b", "a"}),
            "Kafka refused user viewer: not authorized for the topic a, b (TopicAuthorizationFailed)",
        ),
        (
            kafka_errors.TopicAuthorizationFailedError("Cannot create topic: s-x (29): Authorization failed."),
            "Kafka refused user viewer: not authorized for the topic s-x (TopicAuthorizationFailed)",
        ),
        (
            kafka_errors.GroupAuthorizationFailedError(),
            "Kafka refused user viewer: not authorized for the consumer group (GroupAuthorizationFailed)",
        ),
        (
            kafka_errors.UnsupportedSaslMechanismError("x"),
            "Kafka at 127.0.0.1:19892 does not offer SASL mechanism SCRAM-SHA-512 (kafka.sasl.mechanism)",
        ),
    ],
)
def test_a_refusal_is_one_line_naming_the_user(exc: BaseException, line: str) -> None:
    translated = translate(exc, SASL)
    assert isinstance(translated, KafkaAccessError)
    assert str(translated) == line
    assert "\n" not in str(translated) and "pw" not in str(translated)


def test_an_untrusted_certificate_points_at_the_ca_file() -> None:
    exc = ssl.SSLCertVerificationError(1, "certificate verify failed")
    exc.verify_message = "self-signed certificate in certificate chain"
    assert str(translate(exc, SASL)) == (
        "the broker's TLS certificate at 127.0.0.1:19892 is not trusted "
        "(self-signed certificate in certificate chain): check kafka.ssl.cafile"
    )


def test_other_errors_are_no_refusal() -> None:
    assert translate(kafka_errors.KafkaConnectionError("down"), SASL) is None
    assert translate(ValueError("x"), SASL) is None
