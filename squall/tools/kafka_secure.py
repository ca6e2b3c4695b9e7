"""The secured local broker (``squall kafka up --secure``): TLS, SCRAM users and ACLs.

What :func:`squall.tools.kafka_local.up` adds with ``secure=True``, all under
``<state dir>/secure/`` (files readable by their owner only):

* **TLS**: a CA (``ca.pem``, ``ca.key``) and a broker certificate signed by
  it for ``localhost``, ``127.0.0.1`` and ``::1`` (``broker.pem``,
  ``broker-keystore.pem``), made with ``openssl``. Clients trust ``ca.pem``
  (``kafka.ssl.cafile``).
* **The client listener** at the bootstrap port speaks SASL_SSL with
  SCRAM-SHA-512 (and SCRAM-SHA-256); it is also the inter-broker listener,
  the broker logging in as ``admin``. The controller listener (port + 1)
  speaks TLS with client certificates required: only the broker's own
  certificate gets in, so nothing on loopback reaches the cluster
  unauthenticated.
* **Users** (SCRAM, created when the storage is formatted, ``kafka-storage
  format --add-scram``): ``admin`` (super user: the broker itself and the
  ACLs), ``worker``, ``operator`` and ``viewer``, each with a generated
  password in ``<user>.credentials`` (``username=`` / ``password=`` lines,
  squall's ``kafka.sasl.credentials.file``) and a client configuration
  ``<user>.yaml`` naming the broker, the protocol, the CA and that file.
  Passwords are never printed; paths are.
* **ACLs** (``StandardAuthorizer``, nothing allowed without an ACL), created
  once after the first start by ``kafka/SquallAcls.java`` through Kafka's
  Admin API, for topology id ``<id>`` (:func:`acl_specs`): ``worker`` and
  ``operator`` may do everything on the topics and consumer groups whose
  names begin with ``<id>``, except that ``worker`` may not write the
  operator's control topic ``<id>-control``; ``viewer`` may read and
  describe those topics and describe the groups (``squall status`` works;
  it cannot write — ``squall seed`` is refused — nor join the workers' group).

Every failure raises :class:`squall.errors.KafkaSetupError`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from squall.errors import KafkaSetupError
from squall.net.kafka_security import KafkaConnection, read_credentials_file

ROOT = Path(__file__).resolve().parents[2]
ACLS_SOURCE = ROOT / "kafka" / "SquallAcls.java"
MECHANISM = "SCRAM-SHA-512"
ADMIN = "admin"
USERS = ("worker", "operator", "viewer")
BROKER_CN = "squall-broker"
_DAYS = "825"  # certificate lifetime: the longest that TLS clients accept for a server certificate


@dataclass(frozen=True)
class SecureFiles:
    """The files of a secured local broker under ``<state dir>/secure``."""

    root: Path

    @property
    def ca(self) -> Path:
        return self.root / "ca.pem"

    @property
    def keystore(self) -> Path:
        return self.root / "broker-keystore.pem"

    @property
    def acls_done(self) -> Path:
        return self.root / ".acls"

    @property
    def admin_properties(self) -> Path:
        return self.root / "admin.properties"

    def credentials(self, user: str) -> Path:
        return self.root / f"{user}.credentials"

    def client_conf(self, user: str) -> Path:
        return self.root / f"{user}.yaml"

    def complete(self) -> bool:
        """True once the certificates and every user's credentials exist."""
        names = (ADMIN, *USERS)
        return self.ca.is_file() and self.keystore.is_file() and all(self.credentials(u).is_file() for u in names)

    def connection(self, bootstrap: str, user: str = ADMIN) -> KafkaConnection:
        """How ``user`` connects to the broker at ``bootstrap`` (SASL_SSL, SCRAM, the local CA)."""
        return KafkaConnection(
            bootstrap=bootstrap,
            protocol="SASL_SSL",
            mechanism=MECHANISM,
            credentials=read_credentials_file(self.credentials(user)),
            cafile=str(self.ca),
        )


def _private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by its owner only."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)


def _openssl(args: list[str], cwd: Path) -> None:
    openssl = shutil.which("openssl")
    if not openssl:
        raise KafkaSetupError("openssl is not on PATH; the secured broker needs it for its certificates")
    try:
        proc = subprocess.run(
            [openssl, *args], cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise KafkaSetupError(f"could not run openssl: {exc}") from exc
    if proc.returncode != 0:
        raise KafkaSetupError(f"openssl {args[0]} failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")


def _make_certificates(root: Path) -> None:
    """A CA and the broker's certificate (SAN localhost, 127.0.0.1, ::1), PEM, unencrypted PKCS#8 keys."""
    rsa = ["-newkey", "rsa:2048", "-noenc"]
    _openssl(
        ["req", "-x509", *rsa, "-keyout", "ca.key", "-out", "ca.pem", "-days", _DAYS, "-subj", "/CN=squall local CA",
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
        root,
    )  # fmt: skip
    _openssl(["req", *rsa, "-keyout", "broker.key", "-out", "broker.csr", "-subj", f"/CN={BROKER_CN}"], root)
    (root / "broker.ext").write_text(
        "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\n"
    )
    _openssl(
        ["x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "broker.pem", "-days", _DAYS, "-extfile", "broker.ext"],
        root,
    )  # fmt: skip
    # Kafka's PEM key store: the private key (PKCS#8) followed by the certificate chain
    key = (root / "broker.key").read_text()
    chain = (root / "broker.pem").read_text() + (root / "ca.pem").read_text()
    _private(root / "broker-keystore.pem", key + chain)
    for name in ("ca.key", "broker.key"):
        (root / name).chmod(0o600)
    for name in ("broker.csr", "broker.ext"):
        (root / name).unlink(missing_ok=True)


def prepare(state: Path, bootstrap: str, fresh: bool) -> SecureFiles:
    """The certificates, users' passwords and client files of the broker in ``state`` (made if missing or ``fresh``).

    Returns the :class:`SecureFiles`; :func:`needs_format` says whether the
    storage must be formatted again (new users).
    """
    files = SecureFiles(Path(state) / "secure")
    if fresh or not files.complete():
        shutil.rmtree(files.root, ignore_errors=True)
        files.root.mkdir(parents=True)
        files.root.chmod(0o700)
        _make_certificates(files.root)
        for user in (ADMIN, *USERS):
            # token_urlsafe: letters, digits, '-' and '_' only (nothing that needs quoting in SCRAM or JAAS)
            _private(files.credentials(user), f"username={user}\npassword={secrets.token_urlsafe(24)}\n")
    for user in USERS:
        conf = {
            "kafka.bootstrap.servers": bootstrap,
            "kafka.security.protocol": "SASL_SSL",
            "kafka.sasl.mechanism": MECHANISM,
            "kafka.sasl.credentials.file": str(files.credentials(user)),
            "kafka.ssl.cafile": str(files.ca),
        }
        _private(files.client_conf(user), yaml.safe_dump(conf, sort_keys=False))
    admin = files.connection(bootstrap)
    assert admin.credentials is not None
    _private(
        files.admin_properties,
        f"bootstrap.servers={bootstrap}\nsecurity.protocol=SASL_SSL\nsasl.mechanism={MECHANISM}\n"
        f"sasl.jaas.config={_jaas(ADMIN, admin.credentials.password)}\n"
        f"ssl.truststore.type=PEM\nssl.truststore.location={files.ca}\n",
    )
    return files


def _jaas(user: str, password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def server_properties(files: SecureFiles, client_listener: str, advertised: str, controller: str) -> dict[str, str]:
    """The ``server.properties`` entries of the secured broker.

    ``client_listener`` and ``advertised`` are ``host:port`` of the SASL_SSL
    listener, ``controller`` that of the controller listener (TLS, client
    certificate required).
    """
    admin = read_credentials_file(files.credentials(ADMIN))
    return {
        "listeners": f"SASL_SSL://{client_listener},CONTROLLER://{controller}",
        "advertised.listeners": f"SASL_SSL://{advertised}",
        "inter.broker.listener.name": "SASL_SSL",
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256",
        "sasl.mechanism.inter.broker.protocol": MECHANISM,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": _jaas(ADMIN, admin.password),
        # every enabled mechanism needs its JAAS entry on the listener (the login is the same)
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": _jaas(ADMIN, admin.password),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(files.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(files.ca),
        "listener.name.controller.ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN};User:CN={BROKER_CN}",
        "allow.everyone.if.no.acl.found": "false",
    }


def scram_format_args(files: SecureFiles) -> list[str]:
    """``kafka-storage format`` arguments that create every user's SCRAM credential."""
    args: list[str] = []
    for user in (ADMIN, *USERS):
        password = read_credentials_file(files.credentials(user)).password
        args += ["--add-scram", f"{MECHANISM}=[name={user},password={password}]"]
    return args


def acl_specs(topology_id: str) -> list[str]:
    """The ACLs of :mod:`squall.tools.kafka_secure`'s users for topology ``topology_id``, in SquallAcls' form.

    ``PRINCIPAL PERMISSION OPERATION RESOURCE PATTERN NAME``; PREFIXED
    ``<id>`` covers ``<id>-status``, the changelogs and Faust's own topics;
    a DENY wins over any ALLOW (Kafka's rule).
    """
    specs = []
    for user in ("worker", "operator"):
        specs += [f"User:{user} ALLOW ALL {kind} PREFIXED {topology_id}" for kind in ("TOPIC", "GROUP")]
    specs.append(f"User:worker DENY WRITE TOPIC LITERAL {topology_id}-control")
    specs += [f"User:viewer ALLOW {op} TOPIC PREFIXED {topology_id}" for op in ("READ", "DESCRIBE")]
    specs.append(f"User:viewer ALLOW DESCRIBE GROUP PREFIXED {topology_id}")
    return specs


def apply_acls(files: SecureFiles, java: str, libs: Path, jvm_args: list[str], topology_id: str, cwd: Path) -> None:
    """Create :func:`acl_specs` on the running broker as ``admin`` (once per id: a marker file remembers the last).

    Raises:
        KafkaSetupError: Java could not run the program, or the broker refused.
    """
    marker = f"{topology_id}\n"
    if files.acls_done.is_file() and files.acls_done.read_text() == marker:
        return
    cmd = [java, *jvm_args, "-cp", str(libs / "*"), str(ACLS_SOURCE), str(files.admin_properties)]
    try:
        proc = subprocess.run(
            [*cmd, *acl_specs(topology_id)],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise KafkaSetupError(f"could not run {ACLS_SOURCE.name}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-10:])
        raise KafkaSetupError(f"creating the ACLs failed (exit {proc.returncode}):\n{tail}")
    files.acls_done.write_text(marker)
