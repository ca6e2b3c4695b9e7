"""The local development broker: ``squall kafka up|down|status``.

A single-node Apache Kafka 4.1.1 in KRaft mode (broker and controller in one
JVM), run straight from the Maven jars, so tests and demos need neither Docker
nor a Kafka download:

* :func:`squall.tools.kafka_jars.resolve_jars` copies ``kafka/pom.xml``'s
  runtime jars into a cache outside the work tree (``$SQUALL_CACHE/kafka-4.1.1/libs``,
  by default ``~/.cache/squall/kafka-4.1.1/libs``) with Maven (once).
* :func:`up` formats the KRaft storage once and starts ``kafka.Kafka`` as a
  detached process. Its state directory (default
  ``$SQUALL_CACHE/broker/<port>/``, i.e. ``~/.cache/squall/broker/<port>/``)
  holds ``data/`` (the log dirs), ``broker.pid``, ``server.properties``,
  ``logs/server.log`` (the broker's log4j2 log) and ``broker.out`` (the JVM's
  stdout/stderr: warnings and crashes).
* :func:`down` stops the broker that :func:`up` started (via the pid file).
* ``up(..., secure=True)`` (``squall kafka up --secure``) starts it secured:
  SASL_SSL with SCRAM users and ACLs (:mod:`squall.tools.kafka_secure`).

The broker listens on the bootstrap address (loopback only) and its
controller on the next port (``9092`` → ``9093``); its ``server.properties``
is :func:`squall.tools.kafka_config.render_server_properties`. Topics are never
created automatically: squall creates its topics with the configured partition
count (:mod:`squall.tools.kafka_admin`). Whether a broker answers:
:mod:`squall.tools.kafka_probe`.

Every failure raises :class:`squall.errors.KafkaSetupError`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from squall.errors import KafkaSetupError
from squall.net.kafka_security import Broker
from squall.tools import kafka_secure
from squall.tools.kafka_config import (
    bind_host,
    controller_port,
    hostport,
    new_cluster_id,
    parse_bootstrap,
    render_server_properties,
)
from squall.tools.kafka_jars import (
    KAFKA_VERSION,
    ROOT,
    cache_root,
    jars_complete,
    libs_dir,
    locked,
    resolve_jars,
    tail_text,
)
from squall.tools.kafka_probe import is_answering, tcp_open
from squall.tools.kafka_secure import SecureFiles

LOG4J2_FILE = ROOT / "kafka" / "log4j2.yaml"
STOP_TIMEOUT_S = 30.0
# Popen objects of brokers started by this process, kept so that they are not
# garbage-collected (which would warn "subprocess is still running").
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def default_state_dir(bootstrap: str) -> Path:
    """``<cache_root>/broker/<port>``: data, pid file and logs of one local broker."""
    _, port = parse_bootstrap(bootstrap)
    return cache_root() / "broker" / str(port)


class _Paths:
    def __init__(self, bootstrap: str, state_dir: Path | None) -> None:
        self.state = Path(state_dir).expanduser().resolve() if state_dir else default_state_dir(bootstrap)
        self.data = self.state / "data"
        self.pid = self.state / "broker.pid"
        self.props = self.state / "server.properties"
        self.logs = self.state / "logs"
        self.log = self.logs / "server.log"
        self.out = self.state / "broker.out"
        self.lock = self.state / ".lock"
        self.secure = SecureFiles(self.state / "secure")
        # written once the storage is formatted with the secured broker's SCRAM users
        self.secure_marker = self.data / ".squall-secure"


# ---------------------------------------------------------------- processes


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        pass
    try:
        return subprocess.run(
            ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie counts as dead; our own zombies are reaped)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            _CHILDREN.pop(pid, None)
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _our_pid(paths: _Paths) -> int | None:
    """The pid in the pid file if that process is alive and is our broker."""
    try:
        pid = int(paths.pid.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    if pid <= 1 or not _alive(pid):
        return None
    cmd = _cmdline(pid)
    if "kafka.Kafka" not in cmd or str(paths.props) not in cmd:
        return None  # the pid was recycled by another process
    return pid


def _java() -> str:
    env = os.environ.get("SQUALL_JAVA")
    if env:
        return env
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise KafkaSetupError(
            "java is not on PATH; Kafka 4 needs a JDK/JRE 17+ (e.g. apt-get install openjdk-17-jre-headless)"
        )
    return found


def _jvm_args(paths: _Paths) -> list[str]:
    heap = os.environ.get("KAFKA_HEAP_OPTS", "-Xms256m -Xmx512m").split()
    return [
        *heap,
        "-XX:+UseG1GC",
        "-XX:MaxGCPauseMillis=20",
        "-Djava.awt.headless=true",
        f"-Dkafka.logs.dir={paths.logs}",
        f"-Dlog4j2.configurationFile={LOG4J2_FILE}",
    ]


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return tail_text(path.read_text(errors="replace"), lines)
    except OSError:
        return ""


def _format_storage(paths: _Paths, java: str, libs: Path, extra: list[str] | None = None) -> None:
    """Format the KRaft log dir once (skipped when ``data/meta.properties`` exists); ``extra``: more arguments."""
    if (paths.data / "meta.properties").is_file():
        return
    paths.data.mkdir(parents=True, exist_ok=True)
    cmd = [
        java,
        *_jvm_args(paths),
        "-cp",
        str(libs / "*"),
        "kafka.tools.StorageTool",
        "format",
        "-t",
        new_cluster_id(),
        "-c",
        str(paths.props),
        *(extra or []),
    ]
    try:
        proc = subprocess.run(
            cmd, cwd=paths.state, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise KafkaSetupError(f"could not run kafka.tools.StorageTool format: {exc}") from exc
    if proc.returncode != 0:
        tail = tail_text(proc.stdout + proc.stderr, 20)
        raise KafkaSetupError(f"formatting the KRaft storage in {paths.data} failed (exit {proc.returncode}):\n{tail}")


def _wait_answering(bootstrap: Broker, deadline: float, pid: int | None = None) -> bool:
    """Poll until the broker answers (True), ``pid`` dies or the deadline passes (False)."""
    while True:
        if is_answering(bootstrap, timeout_s=2.0):
            return True
        if pid is not None and not _alive(pid):
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)


def up(
    bootstrap: str,
    data_dir: Path | None = None,
    wait_s: float = 60,
    fresh: bool = False,
    progress: Callable[[str], None] | None = None,
    secure: bool = False,
    topology_id: str = "squall",
) -> bool:
    """Start a local broker at ``bootstrap`` unless one already answers there.

    ``data_dir`` is the state directory (default ``<cache_root>/broker/<port>``):
    it holds ``data/`` (formatted once, kept across restarts), the pid file and
    the logs. ``fresh`` deletes ``data/`` first (an empty cluster). ``wait_s``
    (seconds) bounds the wait until the broker answers a metadata request
    (counted from the JVM start, so a first, slow jar resolution does not eat it).
    ``progress`` receives human-readable lines about slow steps. ``secure``
    starts the secured broker of :mod:`squall.tools.kafka_secure` (SASL_SSL,
    SCRAM users, ACLs for ``topology_id``; files under ``<state dir>/secure``):
    a data directory formatted without its users is formatted again, empty.

    Returns:
        True if this call started the broker; False if a Kafka broker already
        answered at ``bootstrap`` (whoever started it).

    Raises:
        KafkaSetupError: bad address, the port or controller port is taken by
            something else, jars/java missing, formatting failed, or the broker
            exited or did not answer within ``wait_s`` (it is then stopped).
    """
    host, port = parse_bootstrap(bootstrap)
    paths = _Paths(bootstrap, data_dir)
    say = progress or (lambda _msg: None)
    deadline = time.monotonic() + wait_s
    probe: Broker = _probe(paths, bootstrap, secure)
    if is_answering(probe, timeout_s=3.0):
        if secure and probe is bootstrap:
            raise KafkaSetupError(f"a broker without TLS and SASL answers at {bootstrap}: stop it first (kafka down)")
        if secure:  # our secured broker: ACLs for this topology id too
            kafka_secure.apply_acls(paths.secure, _java(), resolve_jars(), _jvm_args(paths), topology_id, paths.state)
        return False
    other = _probe(paths, bootstrap, not secure)  # the other kind of our broker, if it runs there
    if other is not probe and is_answering(other, timeout_s=3.0):
        what = "a broker without TLS and SASL" if secure else "the secured broker (kafka up --secure)"
        raise KafkaSetupError(f"{what} answers at {bootstrap}: stop it first (kafka down)")
    paths.state.mkdir(parents=True, exist_ok=True)
    with locked(paths.lock):
        pid = _our_pid(paths)
        if pid is not None:
            # Our broker is running (maybe still starting, maybe started by a
            # concurrent caller): wait for it rather than start a second one.
            if _wait_answering(probe, deadline, pid):
                return False
            raise KafkaSetupError(
                f"local broker (pid {pid}) at {bootstrap} does not answer; see {paths.log}\n{_tail(paths.log)}"
            )
        paths.pid.unlink(missing_ok=True)
        bind = bind_host(host)
        if tcp_open(bind, port):
            raise KafkaSetupError(
                f"{hostport(bind, port)} is in use by something that does not answer as a Kafka broker"
            )
        if tcp_open(bind, controller_port(port)):
            raise KafkaSetupError(
                f"controller port {hostport(bind, controller_port(port))} (broker port + 1) is in use by another process"
            )
        if not jars_complete():
            say(f"kafka: resolving Kafka {KAFKA_VERSION} jars with Maven into {libs_dir()} (once)")
        libs = resolve_jars()
        java = _java()
        if fresh:
            shutil.rmtree(paths.data, ignore_errors=True)
        files = kafka_secure.prepare(paths.state, bootstrap, fresh) if secure else None
        if files is not None and not paths.secure_marker.is_file():
            shutil.rmtree(paths.data, ignore_errors=True)  # formatted without these users: start empty
        paths.logs.mkdir(parents=True, exist_ok=True)
        _write_private(paths.props, render_server_properties(bootstrap, paths.data, files))
        _format_storage(paths, java, libs, kafka_secure.scram_format_args(files) if files is not None else None)
        if files is not None:
            paths.secure_marker.write_text("SCRAM users of secure/*.credentials\n")
            probe = files.connection(bootstrap)
        cmd = [java, *_jvm_args(paths), "-cp", str(libs / "*"), "kafka.Kafka", str(paths.props)]
        with open(paths.out, "ab") as out:
            out.write(f"\n--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting {' '.join(cmd)}\n".encode())
            out.flush()
            try:
                proc = subprocess.Popen(
                    cmd,
                    cwd=paths.state,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                raise KafkaSetupError(f"could not start {java}: {exc}") from exc
        _CHILDREN[proc.pid] = proc
        paths.pid.write_text(f"{proc.pid}\n")
        # wait_s counts from the JVM start (a cold Maven resolution may take long).
        if _wait_answering(probe, time.monotonic() + wait_s, proc.pid):
            if files is None:
                return True
            try:
                kafka_secure.apply_acls(files, java, libs, _jvm_args(paths), topology_id, paths.state)
                return True
            except KafkaSetupError:
                _stop_pid(proc.pid, timeout_s=10.0)
                paths.pid.unlink(missing_ok=True)
                raise
        exited = proc.poll()
        if exited is None:
            _stop_pid(proc.pid, timeout_s=10.0)
        paths.pid.unlink(missing_ok=True)
        why = f"exited with code {exited}" if exited is not None else f"did not answer within {wait_s:g} s"
        detail = _tail(paths.out, 10) + "\n" + _tail(paths.log, 20)
        raise KafkaSetupError(f"local broker at {bootstrap} {why}; see {paths.log} and {paths.out}\n{detail.strip()}")


def _probe(paths: _Paths, bootstrap: str, secure: bool) -> Broker:
    """What to ask "does a broker answer?" with: the secured broker's admin login once it has one, else plain."""
    if secure and paths.secure.complete() and paths.secure_marker.is_file():
        return paths.secure.connection(bootstrap)
    return bootstrap


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (owner-only permissions: a secured broker's file holds its own password)."""
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text(text)


def _stop_pid(pid: int, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM ``pid``, wait up to ``timeout_s`` seconds, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    _CHILDREN.pop(pid, None)


def down(bootstrap: str, data_dir: Path | None = None, wipe: bool = False, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the local broker that :func:`up` started at ``bootstrap``.

    Only the process named by the pid file of the state directory is stopped,
    and only if it still is that broker (a recycled pid is left alone):
    SIGTERM (a clean shutdown), wait up to ``timeout_s`` seconds, then SIGKILL.
    ``wipe`` also deletes the state directory (data and logs).

    Returns:
        True if a broker was stopped; False if none of ours was running.

    Raises:
        KafkaSetupError: ``bootstrap`` is not one loopback ``host:port``.
    """
    paths = _Paths(bootstrap, data_dir)
    if not paths.state.is_dir():
        return False
    with locked(paths.lock):
        pid = _our_pid(paths)
        if pid is not None:
            _stop_pid(pid, timeout_s)
        paths.pid.unlink(missing_ok=True)
    if wipe:
        shutil.rmtree(paths.state, ignore_errors=True)
    return pid is not None


def status(bootstrap: str, data_dir: Path | None = None) -> dict[str, Any]:
    """What is known about the broker at ``bootstrap``.

    Returns a dict: ``bootstrap``, ``answering`` (a Kafka broker answers
    there, ours or not), ``pid`` (of our running broker, else None),
    ``state_dir``, ``log`` (server.log), ``out`` (JVM stdout/stderr),
    ``data_dir``, ``formatted`` and ``jars`` (the libs dir, None if not resolved).
    """
    paths = _Paths(bootstrap, data_dir)
    secured = paths.secure.complete() and paths.secure_marker.is_file()
    return {
        "bootstrap": bootstrap,
        "answering": is_answering(_probe(paths, bootstrap, secured), timeout_s=3.0),
        "secure": str(paths.secure.root) if secured else None,
        "pid": _our_pid(paths),
        "state_dir": str(paths.state),
        "log": str(paths.log),
        "out": str(paths.out),
        "data_dir": str(paths.data),
        "formatted": (paths.data / "meta.properties").is_file(),
        "jars": str(libs_dir()) if jars_complete() else None,
    }
