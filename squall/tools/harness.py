"""Running real squall workers as subprocesses: for the demo and the integration tests.

A :class:`Crawl` owns one topology (its own ``topology.id``, so its own
topics, tables and consumer group on the broker), writes its configuration
file, starts and stops ``faust -A topology worker`` processes, seeds and
waits until the crawl is idle. Nothing here is a fake: the workers are the
same command an operator runs.

No worker outlives the process that started it (:func:`spawn`): each runs
in its own process group (session), every group still running is ended
when the starter exits normally or on SIGTERM / SIGINT (atexit and signal
handlers), and on Linux each worker is also told to die with its parent
(``prctl(PR_SET_PDEATHSIG, SIGKILL)``) for the one exit no handler sees, a
SIGKILL of the starter.
"""

from __future__ import annotations

import asyncio
import atexit
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

import yaml

from squall.cli.seed import SeedLine, produce_seeds
from squall.cli.status import collect, wait_idle
from squall.cli.status_report import Report
from squall.settings import ROOT, Settings, load_settings

# prctl(2) option: the signal a process gets when the thread that created it ends (Linux).
_PR_SET_PDEATHSIG = 1
# How long a group ended at exit gets between SIGTERM and SIGKILL (s): a clean worker shutdown is
# not needed then (the run is over), a stuck one must not hold up the exit.
_EXIT_GRACE_S = 2.0


def _death_signal_setter() -> Callable[[], None] | None:
    """A ``preexec_fn`` that makes the child die by SIGKILL when its parent dies; None off Linux.

    Everything is looked up here, before the fork: the child only calls
    prctl and compares its parent's pid (the parent may have died before
    the call took effect).
    """
    if not sys.platform.startswith("linux"):
        return None
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    prctl = ctypes.CDLL(libc_name, use_errno=True).prctl
    parent = os.getpid()

    def die_with_parent() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return die_with_parent


class _ChildGroups:
    """The process groups :func:`spawn` started in this process, ended when this process ends.

    One per process, like the signal dispositions and the atexit list it
    uses. SIGTERM and SIGINT end the groups, then act as before (the
    previous handler, or the default action). Handlers can only be set from
    the main thread; from another thread only atexit and the death signal
    guard the children.
    """

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []
        self._lock = threading.RLock()  # a signal handler may run while the main thread holds it
        self._installed = False
        self._previous: dict[int, Any] = {}

    def add(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._procs = [p for p in self._procs if p.poll() is None]
            self._procs.append(proc)
            if not self._installed:
                self._install()

    def _install(self) -> None:
        atexit.register(self.end_all)
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                self._previous[signum] = signal.signal(signum, self._on_signal)
        self._installed = True

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.end_all()
        previous = self._previous.get(signum)
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:  # the default action (or one set outside Python): do it
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def end_all(self) -> None:
        """SIGTERM every group still running, SIGKILL those still there after a short grace, reap them."""
        with self._lock:
            procs, self._procs = [p for p in self._procs if p.poll() is None], []
        for proc in procs:
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + _EXIT_GRACE_S
        for proc in procs:
            try:
                proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()


_CHILDREN = _ChildGroups()


def _signal_group(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Send ``signum`` to the process group of ``proc`` (its own session); no error if it is gone."""
    try:
        os.killpg(proc.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def spawn(
    cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], stdout: IO[bytes] | int | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` in its own session (process group) that ends when this process ends.

    stderr goes where stdout goes. The group is ended at exit, on SIGTERM
    and SIGINT, and on Linux the process dies with this one (see the module
    docstring). Start it from a thread that lives as long as the process
    should (the main thread): the death signal follows the thread that
    forked.
    """
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=dict(env),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_death_signal_setter(),  # only prctl and getppid run in the child, nothing that locks
    )
    _CHILDREN.add(proc)
    return proc


def stop(
    proc: subprocess.Popen[bytes], *, kill: bool = False, timeout_s: float = 60.0, sig: signal.Signals | None = None
) -> None:
    """Stop a :func:`spawn` process and its group: SIGTERM (or ``sig``) and wait (SIGKILL after ``timeout_s``),
    or SIGKILL."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGKILL if kill else (sig or signal.SIGTERM))
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(10)


class Crawl:
    """One crawl: a config file under ``workdir`` and the worker processes running it.

    ``overrides`` are configuration keys (crawler-default.yaml) applied on
    top of the defaults and a per-crawl ``topology.id``, data and WARC dirs.
    """

    def __init__(
        self, workdir: Path, bootstrap: str, overrides: Mapping[str, Any] | None = None, topology_id: str | None = None
    ) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.topology_id = topology_id or f"squall-{uuid.uuid4().hex[:10]}"
        values: dict[str, Any] = {
            "kafka.bootstrap.servers": bootstrap,
            "topology.id": self.topology_id,
            "topology.data.dir": str(self.workdir / "data"),
            "warc.dir": str(self.workdir / "warc"),
        }
        values.update(overrides or {})
        self.conf_path = self.workdir / "crawler-conf.yaml"
        self.conf_path.write_text(yaml.safe_dump(values, sort_keys=True), encoding="utf-8")
        env = dict(os.environ)
        env.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # the config file names the broker
        self._env = env
        self.settings: Settings = self._load()
        self.workers: dict[str, subprocess.Popen[bytes]] = {}

    def _load(self) -> Settings:
        saved = os.environ.pop("KAFKA_BOOTSTRAP_SERVERS", None)
        try:
            return load_settings(self.conf_path)
        finally:
            if saved is not None:
                os.environ["KAFKA_BOOTSTRAP_SERVERS"] = saved

    def datadir(self, name: str) -> Path:
        """The table directory of worker ``name`` (one per worker: partitions move through changelogs)."""
        return self.workdir / "data" / name

    def start_worker(
        self,
        name: str = "w1",
        web_port: int | None = None,
        *,
        wipe: bool = False,
        cwd: Path | None = None,
        datadir: Path | None = None,
        datadir_option: bool = True,
        env: Mapping[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``faust -A topology --datadir DIR worker`` (its own data dir and log file) and return the process.

        ``web_port``: serve the worker's web pages (``/metrics``) on 127.0.0.1
        at that port; None = no web server. ``wipe`` deletes the worker's
        table directory first (its tables are then rebuilt from the
        changelogs); ``cwd`` runs it from another directory than the
        repository root; ``datadir`` overrides :meth:`datadir` (e.g. to share
        one on purpose); ``datadir_option=False`` leaves ``--datadir`` out
        (``topology.data.dir`` applies); ``env`` adds environment variables
        (e.g. a test hook such as ``SQUALL_TEST_LATE_TOPICS``).
        """
        datadir = datadir or self.datadir(name)
        if wipe:
            shutil.rmtree(datadir, ignore_errors=True)
        env = dict(self._env, SQUALL_CONF=str(self.conf_path), **(env or {}))
        log = open(self.workdir / f"worker-{name}.log", "ab")  # noqa: SIM115 (closed once the worker has it)
        cmd = [
            sys.executable,
            "-m",
            "faust",
            "-A",
            "topology",
            *(["--datadir", str(datadir)] if datadir_option else []),
            "worker",
            "-l",
            "info",
            *(["--web-port", str(web_port)] if web_port else ["--without-web"]),
        ]
        try:
            proc = spawn(cmd, cwd=cwd or ROOT, env=env, stdout=log)
        finally:
            log.close()  # the worker has its own copy
        self.workers[name] = proc
        return proc

    def log_text(self, name: str) -> str:
        """What worker ``name`` wrote to its log file so far (every run of that name)."""
        path = self.workdir / f"worker-{name}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""

    def stop_worker(
        self, name: str, *, kill: bool = False, timeout_s: float = 60.0, sig: signal.Signals | None = None
    ) -> None:
        """Stop one worker: SIGTERM (or ``sig``, e.g. SIGINT) and wait — a clean shutdown commits
        offsets —, or SIGKILL at once."""
        stop(self.workers.pop(name), kill=kill, timeout_s=timeout_s, sig=sig)

    def stop(self) -> None:
        """Stop every worker still running."""
        for name in list(self.workers):
            self.stop_worker(name)

    def seed(self, urls: Iterable[str]) -> int:
        """Send seed URLs (already canonical or not) through the same path as ``squall seed``."""
        from squall.cli.seed import parse_seed_lines
        from squall.policy.urls import NormalizerConfig

        lines: list[SeedLine] = list(parse_seed_lines(urls, NormalizerConfig.from_settings(self.settings)))
        bad = [s for s in lines if s.error]
        if bad:
            raise ValueError(f"bad seeds: {bad}")
        return asyncio.run(produce_seeds(self.settings, lines))

    def wait_idle(
        self, timeout_s: float = 300.0, on_report: Callable[[Report], None] | None = None, max_wait_s: float = 60.0
    ) -> Report:
        """Wait until nothing is due, in flight or unconsumed, and no URL waits for a Retry-After,
        robots.txt retry or back-off ending within ``max_wait_s`` seconds; raise if a worker died.

        ``on_report`` is called with each intermediate report (every few seconds): progress display.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            for name, proc in self.workers.items():
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"worker {name} exited with {proc.returncode}; see {self.workdir}/worker-{name}.log"
                    )
            remaining = deadline - time.monotonic()
            report = asyncio.run(
                wait_idle(
                    self.settings, min(10.0 if on_report is None else 3.0, max(1.0, remaining)), max_wait_s=max_wait_s
                )
            )
            if on_report is not None:
                on_report(report)
            if report.settled(max_wait_s) and report.by_status:
                return report
            if remaining <= 0:
                raise TimeoutError(f"crawl not idle after {timeout_s} s: {report.to_json()}")

    def report(self) -> Report:
        return asyncio.run(collect(self.settings))

    def records(self) -> dict[str, dict[str, Any]]:
        """The latest URL records (canonical URL → record dict) from the urls changelog."""
        from squall.cli.status_read import latest_records
        from squall.net.kafka_security import KafkaConnection
        from squall.policy.topics import changelog_name

        conn = KafkaConnection.from_settings(self.settings)
        return asyncio.run(latest_records(conn, changelog_name(self.settings, "urls")))

    def audit(self) -> dict[str, Any]:
        """``squall audit --json`` of this crawl: totals and one entry per host (``by_host``), worst first."""
        from squall.cli.audit import collect_audits
        from squall.policy.audit import summary

        return summary(asyncio.run(collect_audits(self.settings)))

    def warc_files(self) -> list[Path]:
        return sorted((self.workdir / "warc").glob("*.warc.gz"))

    def __enter__(self) -> Crawl:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
