"""Running real squall workers as subprocesses: for the demo and the integration tests.

A :class:`Crawl` owns one topology (its own ``topology.id``, so its own
topics, tables and consumer group on the broker), writes its configuration
file, starts and stops ``faust -A topology worker`` processes, seeds and
waits until the crawl is idle. Nothing here is a fake: the workers are the
same command an operator runs.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from squall.cli.seed import SeedLine, produce_seeds
from squall.cli.status import Report, collect, wait_idle
from squall.settings import ROOT, Settings, load_settings


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
        log = open(self.workdir / f"worker-{name}.log", "ab")  # noqa: SIM115 (owned by the process)
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
        proc = subprocess.Popen(
            cmd, cwd=cwd or ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
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
        proc = self.workers.pop(name)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL if kill else (sig or signal.SIGTERM))
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

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
        from squall.cli.status import latest_records
        from squall.policy.topics import changelog_name

        return asyncio.run(latest_records(self.settings.kafka_bootstrap_servers, changelog_name(self.settings, "urls")))

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
