"""How squall's Kafka clients prove who they are, and a broker's refusal as one line.

One place builds the security arguments of every Kafka client squall opens —
the workers' Faust app (:meth:`KafkaConnection.faust_credentials`), every
command and tool (:meth:`KafkaConnection.client_kwargs`, for aiokafka's
``AIOKafkaAdminClient``, ``AIOKafkaConsumer`` and ``AIOKafkaProducer``) and the
benchmarks — from the ``kafka.security.*``, ``kafka.sasl.*`` and
``kafka.ssl.*`` keys:

* ``kafka.security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
  (Kafka's ``security.protocol``).
* TLS (SSL, SASL_SSL): an ``ssl.SSLContext`` from
  :func:`aiokafka.helpers.create_ssl_context` with ``kafka.ssl.cafile`` (else
  the system's CAs), an optional client certificate (``kafka.ssl.certfile``,
  ``kafka.ssl.keyfile``) and ``kafka.ssl.check.hostname``.
* SASL (SASL_PLAINTEXT, SASL_SSL): ``kafka.sasl.mechanism`` (PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512) and the credentials, from
  ``$SQUALL_KAFKA_USERNAME`` and ``$SQUALL_KAFKA_PASSWORD`` (both set: they
  win) else from ``kafka.sasl.credentials.file`` — never from the YAML. A
  password is never logged, printed or part of a ``repr``.

A broker's refusals are translated here, at one boundary, into
:class:`squall.errors.KafkaAccessError` with one line for people
(:func:`translate`, :func:`refusals`): wrong credentials (``SASL
authentication failed``), an untrusted certificate, a mechanism the broker
does not offer, an operation an ACL does not allow. aiokafka folds a refused
authentication into "Unable to bootstrap" after logging it as an error per
attempt, so :func:`check_access` opens one connection itself and says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import ssl
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from squall.errors import ConfigError, KafkaAccessError, KafkaSetupError

if TYPE_CHECKING:
    from faust.types.auth import CredentialsT

    from squall.settings import Settings

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
USERNAME_ENV = "SQUALL_KAFKA_USERNAME"
PASSWORD_ENV = "SQUALL_KAFKA_PASSWORD"
CREDENTIALS_KEY = "kafka.sasl.credentials.file"
SSL_FILE_KEYS = ("kafka.ssl.cafile", "kafka.ssl.certfile", "kafka.ssl.keyfile")


@dataclass(frozen=True)
class Credentials:
    """A SASL user name and its password (left out of ``repr``)."""

    username: str
    password: str = field(repr=False)


def parse_credentials(text: str, origin: str) -> Credentials:
    """Read ``username=NAME`` and ``password=SECRET`` lines (``:`` works too; ``#`` comments, blank lines).

    The value is everything after the first ``=`` (or ``:``), without the
    surrounding blanks; a value in quotes loses them.

    Raises:
        ConfigError: (key ``kafka.sasl.credentials.file``) a line that is no
            ``name=value``, an unknown name, or a missing username or password;
            the message names ``origin``, never a value.
    """
    found: dict[str, str] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i > 0), default=-1)
        if cut < 0:
            raise ConfigError(CREDENTIALS_KEY, f"{origin} line {lineno}: expected username=... or password=...")
        name, value = line[:cut].strip().lower(), line[cut + 1 :].strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if name not in ("username", "password"):
            raise ConfigError(CREDENTIALS_KEY, f"{origin} line {lineno}: unknown name {name!r} (username, password)")
        found[name] = value
    for name in ("username", "password"):
        if not found.get(name):
            raise ConfigError(CREDENTIALS_KEY, f"{origin} has no {name}")
    return Credentials(found["username"], found["password"])


def read_credentials_file(path: str | os.PathLike[str]) -> Credentials:
    """:func:`parse_credentials` of the file at ``path``.

    Raises:
        ConfigError: (key ``kafka.sasl.credentials.file``) the file cannot be
            read, or as :func:`parse_credentials`.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(CREDENTIALS_KEY, f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_credentials(text, str(path))


def credentials_of(settings: Settings, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The SASL credentials of ``settings``: the environment's (both variables set), else the file's, else None.

    Raises:
        ConfigError: only one of the two variables is set (named), or as
            :func:`read_credentials_file`.
    """
    env = os.environ if environ is None else environ
    user, password = env.get(USERNAME_ENV, ""), env.get(PASSWORD_ENV, "")
    if user and password:
        return Credentials(user, password)
    if user or password:
        missing = PASSWORD_ENV if user else USERNAME_ENV
        raise ConfigError(missing, f"is not set but {USERNAME_ENV if user else PASSWORD_ENV} is: set both, or neither")
    if settings.kafka_sasl_credentials_file:
        return read_credentials_file(settings.kafka_sasl_credentials_file)
    return None


def validate(settings: Settings, environ: Mapping[str, str] | None = None) -> None:
    """Every rule of the security keys (called by :func:`squall.settings.rules.validate`).

    A protocol or mechanism out of its list; a TLS file or a credentials file
    set for a protocol that does not use it; a named file that does not
    exist; a key without its certificate; a SASL protocol without
    credentials. Each raises :class:`ConfigError` naming the key.
    """
    protocol = settings.kafka_security_protocol
    if protocol not in PROTOCOLS:
        raise ConfigError("kafka.security.protocol", f"must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    if settings.kafka_sasl_mechanism not in MECHANISMS:
        raise ConfigError(
            "kafka.sasl.mechanism", f"must be one of {', '.join(MECHANISMS)}, got {settings.kafka_sasl_mechanism!r}"
        )
    tls, sasl = protocol.endswith("SSL"), protocol.startswith("SASL_")
    for key in SSL_FILE_KEYS:
        path = settings[key]
        if not path:
            continue
        if not tls:
            raise ConfigError(key, f"is set but kafka.security.protocol is {protocol} (no TLS): use SSL or SASL_SSL")
        if not Path(path).is_file():
            raise ConfigError(key, f"{path} does not exist")
    if settings.kafka_ssl_keyfile and not settings.kafka_ssl_certfile:
        raise ConfigError("kafka.ssl.keyfile", "is set without kafka.ssl.certfile (the certificate it belongs to)")
    if settings.kafka_sasl_credentials_file:
        if not sasl:
            raise ConfigError(
                CREDENTIALS_KEY, f"is set but kafka.security.protocol is {protocol}: use SASL_SSL or SASL_PLAINTEXT"
            )
        if not Path(settings.kafka_sasl_credentials_file).is_file():
            raise ConfigError(CREDENTIALS_KEY, f"{settings.kafka_sasl_credentials_file} does not exist")
    if sasl and credentials_of(settings, environ) is None:
        raise ConfigError(
            CREDENTIALS_KEY,
            f"kafka.security.protocol {protocol} needs credentials: name a credentials file here, "
            f"or set {USERNAME_ENV} and {PASSWORD_ENV}",
        )


@dataclass(frozen=True)
class KafkaConnection:
    """Where the broker is and how to prove who we are: what every squall Kafka client is built from.

    ``bootstrap`` is Kafka's ``host:port,...`` list; a plain string stands
    for a PLAINTEXT connection (:func:`as_connection`). The TLS file paths are
    ``""`` when unset.
    """

    bootstrap: str
    protocol: str = "PLAINTEXT"
    mechanism: str = "SCRAM-SHA-512"
    credentials: Credentials | None = None
    cafile: str = ""
    certfile: str = ""
    keyfile: str = ""
    check_hostname: bool = True

    @classmethod
    def from_settings(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> KafkaConnection:
        """The connection of ``settings`` (credentials read now: the environment, else the file).

        Raises:
            ConfigError: as :func:`credentials_of`.
        """
        sasl = settings.kafka_security_protocol.startswith("SASL_")
        return cls(
            bootstrap=settings.kafka_bootstrap_servers,
            protocol=settings.kafka_security_protocol,
            mechanism=settings.kafka_sasl_mechanism,
            credentials=credentials_of(settings, environ) if sasl else None,
            cafile=settings.kafka_ssl_cafile,
            certfile=settings.kafka_ssl_certfile,
            keyfile=settings.kafka_ssl_keyfile,
            check_hostname=settings.kafka_ssl_check_hostname,
        )

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @property
    def user(self) -> str:
        """Who we are to the broker, for messages: the SASL user, else ``"(anonymous)"``/``"(certificate)"``."""
        if self.uses_sasl and self.credentials is not None:
            return self.credentials.username
        return "(certificate)" if self.certfile else "(anonymous)"

    def ssl_context(self) -> ssl.SSLContext | None:
        """A fresh client SSLContext for TLS protocols (None for the others).

        Raises:
            ConfigError: a TLS file that cannot be loaded (the key named).
        """
        if not self.uses_tls:
            return None
        from aiokafka.helpers import create_ssl_context

        try:
            context = create_ssl_context(cafile=self.cafile or None)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("kafka.ssl.cafile", f"cannot load {self.cafile or 'the system CAs'}: {exc}") from None
        if self.certfile:
            try:  # what create_ssl_context(certfile=, keyfile=) does, with the key named on failure
                context.load_cert_chain(self.certfile, self.keyfile or None)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigError("kafka.ssl.certfile", f"cannot load {self.certfile} (and its key): {exc}") from None
        context.check_hostname = self.check_hostname
        return context

    def auth_kwargs(self) -> dict[str, Any]:
        """aiokafka's security arguments: ``security_protocol``, ``ssl_context``, ``sasl_*`` (never logged)."""
        kwargs: dict[str, Any] = {"security_protocol": self.protocol}
        if self.uses_tls:
            kwargs["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            assert self.credentials is not None, "a SASL connection without credentials (settings validate this)"
            kwargs.update(
                sasl_mechanism=self.mechanism,
                sasl_plain_username=self.credentials.username,
                sasl_plain_password=self.credentials.password,
            )
        return kwargs

    def client_kwargs(self) -> dict[str, Any]:
        """``bootstrap_servers`` and :meth:`auth_kwargs`: the keyword arguments of any aiokafka client."""
        return {"bootstrap_servers": self.bootstrap, **self.auth_kwargs()}

    def faust_credentials(self) -> CredentialsT | None:
        """Faust's ``broker_credentials`` for this connection (None: PLAINTEXT).

        faust-streaming turns them into the same aiokafka arguments for the
        worker's consumer, producer and topic creation
        (``credentials_to_aiokafka_auth``).
        """
        import faust

        if self.uses_sasl:
            assert self.credentials is not None, "a SASL connection without credentials (settings validate this)"
            return faust.SASLCredentials(
                username=self.credentials.username,
                password=self.credentials.password,
                ssl_context=self.ssl_context(),
                mechanism=self.mechanism,
            )
        if self.uses_tls:
            return faust.SSLCredentials(self.ssl_context())
        return None

    def __str__(self) -> str:
        return self.bootstrap


Broker = str | KafkaConnection


def as_connection(broker: Broker) -> KafkaConnection:
    """``broker`` as a :class:`KafkaConnection` (a plain ``host:port,...`` string is PLAINTEXT)."""
    return broker if isinstance(broker, KafkaConnection) else KafkaConnection(bootstrap=broker)


# ---------------------------------------------------------------- refusals


def translate(exc: BaseException, conn: KafkaConnection) -> KafkaAccessError | None:
    """The one-line :class:`KafkaAccessError` of a broker's refusal, or None if ``exc`` is no refusal."""
    from aiokafka import errors as kafka_errors

    user = conn.user
    if isinstance(exc, kafka_errors.SaslAuthenticationFailed | kafka_errors.AuthenticationFailedError):
        return KafkaAccessError(f"Kafka refused the credentials of user {user} (SASL authentication failed)")
    if isinstance(exc, kafka_errors.UnsupportedSaslMechanismError):
        return KafkaAccessError(
            f"Kafka at {conn.bootstrap} does not offer SASL mechanism {conn.mechanism} (kafka.sasl.mechanism)"
        )
    if isinstance(exc, kafka_errors.IllegalSaslStateError):
        return KafkaAccessError(
            f"Kafka at {conn.bootstrap} did not expect SASL (kafka.security.protocol {conn.protocol}?)"
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        why = exc.verify_message or str(exc)
        return KafkaAccessError(
            f"the broker's TLS certificate at {conn.bootstrap} is not trusted ({why}): check kafka.ssl.cafile"
            + (" and kafka.ssl.check.hostname" if "hostname" in why.lower() or "IP address" in why else "")
        )
    if isinstance(exc, ssl.SSLError):
        return KafkaAccessError(
            f"TLS with the broker at {conn.bootstrap} failed ({exc.reason or exc}): "
            f"does it speak {conn.protocol} there (kafka.security.protocol)?"
        )
    for kind, what in (
        (kafka_errors.TopicAuthorizationFailedError, "the topic"),
        (kafka_errors.GroupAuthorizationFailedError, "the consumer group"),
        (kafka_errors.ClusterAuthorizationFailedError, "the cluster"),
        (kafka_errors.TransactionalIdAuthorizationFailed, "the transactional id"),
    ):
        if isinstance(exc, kind):
            detail = _detail(exc)
            return KafkaAccessError(
                f"Kafka refused user {user}: not authorized for {what}{detail} ({kind.__name__.removesuffix('Error')})"
            )
    return None


_CREATE_REFUSED = re.compile(r"Cannot create topic: (\S+) \(\d+\)")


def _detail(exc: BaseException) -> str:
    """`` <names>`` from an aiokafka authorization error's arguments (topic names), if it has any."""
    names: list[str] = []
    for arg in exc.args:
        if isinstance(arg, str) and arg:
            created = _CREATE_REFUSED.match(arg)  # Faust's topic creation: "Cannot create topic: T (29): ..."
            names.append(created.group(1) if created else arg)
        elif isinstance(arg, set | frozenset | list | tuple):
            names.extend(sorted(str(a) for a in arg))
    return f" {', '.join(names)}" if names else ""


@contextlib.asynccontextmanager
async def refusals(conn: KafkaConnection) -> AsyncIterator[None]:
    """Raise a broker's refusal inside the block as :func:`translate`'s :class:`KafkaAccessError` (others pass)."""
    try:
        yield
    except KafkaAccessError:
        raise
    except Exception as exc:
        translated = translate(exc, conn)
        if translated is None:
            raise
        raise translated from None


@contextlib.contextmanager
def quiet_client_log() -> Iterator[None]:
    """aiokafka's per-attempt connection errors left unsaid inside the block (they are translated instead)."""
    logger = logging.getLogger("aiokafka")
    old = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(old)


def _servers(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for item in bootstrap.split(","):
        item = item.strip().split("://")[-1]
        host, _, port = item.rpartition(":")
        host = host.strip("[]")
        if host and port.isdigit():
            out.append((host, int(port)))
    return out


async def check_access(conn: KafkaConnection, timeout_s: float = 10.0) -> None:
    """Open one connection to a bootstrap server as ``conn`` says (TLS handshake, SASL authentication), then close it.

    Tries the servers in order until one lets us in. PLAINTEXT connections
    only check that a server is reachable.

    Raises:
        KafkaAccessError: a server refused the credentials or the TLS handshake (:func:`translate`).
        KafkaSetupError: no server could be reached within ``timeout_s`` seconds.
    """
    from aiokafka.conn import create_conn

    auth = conn.auth_kwargs()
    last: BaseException | None = None
    for host, port in _servers(conn.bootstrap):
        try:
            async with asyncio.timeout(timeout_s):
                kafka_conn = await create_conn(
                    host, port, request_timeout_ms=int(timeout_s * 1000), client_id="squall-check", **auth
                )
        except Exception as exc:
            translated = translate(exc, conn)
            if translated is not None:
                raise translated from None
            last = exc
            continue
        kafka_conn.close()
        return
    text = str(last) if last is not None else ""
    why = f": {text if type(last).__name__ in text else f'{type(last).__name__} {text}'}" if last is not None else ""
    raise KafkaSetupError(f"no Kafka broker answers at {conn.bootstrap}{why}")
