"""Run one fault trial against the real broker, real workers and the recording farm, and measure it.

Everything is real: ``faust -A topology worker`` processes (squall.tools.harness.Crawl,
one data directory each), the broker (squall.tools.kafka_local: SIGKILLed and
restarted for broker faults), the recording loopback farm. Measurements come
from the server's request log and the tables' changelogs
(squall.tools.fault_metrics has the definitions).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import shutil
import signal
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from squall.tools import fault_metrics as fm
from squall.errors import KafkaSetupError
from squall.tools import kafka_local
from squall.tools.harness import Crawl
from squall.policy.partition import partition_for_key, partition_key
from squall.cli.status_read import committed_offsets, latest_records
from squall.tools.testsite import ThreadedSite
from squall.policy.topics import all_topics, changelog_name

from .farm import HOSTS, RETRY_AFTER, SERVER_DELAY_S, SLOW, fault_farm
from .schedule import Fault, Trial

PARTITIONS = 4
# where the work directory of a trial that failed is copied, with every record of its topics (pytest keeps only
# its last three base directories: a later run would delete the evidence); SQUALL_FAULTS_KEEP_ALL=1: every trial
KEEP_DIR = Path(os.environ.get("SQUALL_FAULTS_KEEP_DIR", "/tmp/squall-faults-failed"))
SESSION_TIMEOUT_S = 6.0
FINISH_TIMEOUT_S = 300.0
# a member dropped, or made to rejoin, because load starved its heartbeats: the last one is squall's own fence
# (squall.worker.group_lease: a heartbeat answered only after the fence closed is not trusted)
_UNPLANNED = re.compile(
    r"Thread keepalive is not responding|UnknownMemberIdError|IllegalGenerationError|not trusted .*; rejoining"
)
_PARTITIONS_LINE = re.compile(r"due index rebuilt for partitions \[([0-9, ]*)\]")


def overrides(trial: Trial) -> dict[str, Any]:
    return {
        "http.private.networks.allow": ["127.0.0.0/8"],
        "topology.partitions": PARTITIONS,
        "http.timeout.total": 20.0,
        "fetcher.server.delay": SERVER_DELAY_S,
        "kafka.session.timeout.secs": SESSION_TIMEOUT_S,
        "http.robots.retry.base.secs": 2.0,
        "kafka.group.instance.id": trial.membership,
    }


@dataclass
class FaultEvent:
    kind: str
    at_s: float
    worker: str = ""
    partitions: frozenset[int] = frozenset()
    inflight: frozenset[str] = frozenset()
    back_at_s: float | None = None   # broker up again / worker restarted


@dataclass
class TrialResult:
    trial: Trial
    pages: int = 0
    lost: set[str] = field(default_factory=set)
    repeats: Counter[str] = field(default_factory=Counter)
    excess_repeats: int = 0
    inflight_at_kills: int = 0
    violations: list[fm.Violation] = field(default_factory=list)
    recovery_s: list[float] = field(default_factory=list)
    survivor_stall_s: list[float] = field(default_factory=list)
    error_lines: int = 0
    stale_rereads: int = 0   # re-delivered fetch messages whose result was already applied (fetcher log)
    unplanned_rebalances: int = 0  # a worker dropped from the group by load (heartbeats starved), not by a fault
    tracebacks: int = 0
    dead_workers: list[str] = field(default_factory=list)
    events: list[FaultEvent] = field(default_factory=list)
    duration_s: float = 0.0
    finished: bool = False

    @property
    def kills(self) -> int:
        return sum(e.kind == "kill" for e in self.events)

    @property
    def broker_restarts(self) -> int:
        return sum(e.kind == "broker" for e in self.events)

    def row(self) -> dict[str, Any]:
        def worst(xs: list[float]) -> str:
            return f"{max(xs):.1f}" if xs else "-"
        return {"trial": self.trial.name, "seed": self.trial.seed, "membership": self.trial.membership or "dynamic",
                "kills": self.kills, "broker": self.broker_restarts, "pages": self.pages, "lost": len(self.lost),
                "in flight at kills": self.inflight_at_kills, "repeats": sum(self.repeats.values()),
                "excess repeats": self.excess_repeats, "violations": len(self.violations),
                "recovery s (max)": worst(self.recovery_s), "survivor stall s (max)": worst(self.survivor_stall_s),
                "stale re-reads": self.stale_rereads, "unplanned": self.unplanned_rebalances, "ERROR lines": self.error_lines, "tracebacks": self.tracebacks, "finished": self.finished,
                "duration s": round(self.duration_s)}


class TrialRun:
    """State of one running trial: the site, the crawl, the rng and the fault events so far."""

    def __init__(self, trial: Trial, bootstrap: str, workdir: Path) -> None:
        self.trial = trial
        self.bootstrap = bootstrap
        self.rng = random.Random(trial.seed)
        self.farm = fault_farm(trial.seed, trial.pages_per_host)
        self.site = ThreadedSite(self.farm.spec, workdir / "requests.jsonl")
        self.crawl = Crawl(workdir / "crawl", bootstrap, overrides(trial))
        self.events: list[FaultEvent] = []
        self.extra = 0

    # ------------------------------------------------------------ observing

    def page_requests(self) -> list[dict[str, Any]]:
        return [r for r in self.site.requests() if r["path"] != fm.ROBOTS_PATH]

    def wait_requests(self, n: int, timeout_s: float = 180.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.page_requests()) < n and time.monotonic() < deadline:
            time.sleep(0.1)

    def partitions_of(self, name: str) -> frozenset[int]:
        """The partitions worker ``name`` owned after its last rebalance (from its log)."""
        log = self.crawl.workdir / f"worker-{name}.log"
        found = _PARTITIONS_LINE.findall(log.read_text(errors="replace")) if log.exists() else []
        return frozenset(int(p) for p in found[-1].split(",") if p.strip()) if found else frozenset()

    def partition_of(self, ip: str) -> int:
        return partition_for_key(partition_key(self.site.url(ip), "byHost"), PARTITIONS)

    def hosts_of(self, partitions: frozenset[int]) -> set[str]:
        return {ip for ip in HOSTS if self.partition_of(ip) in partitions}

    def inflight(self, partitions: frozenset[int]) -> frozenset[str]:
        records = asyncio.run(latest_records(self.bootstrap, changelog_name(self.crawl.settings, "hosts")))
        keys = [k for k in records if partition_for_key(k, PARTITIONS) in partitions]
        return frozenset(fm.inflight_at(records, keys))

    # ------------------------------------------------------------ faults

    def trigger(self, fault: Fault) -> None:
        self.wait_requests(self.rng.randint(*fault.after_requests))
        time.sleep(self.rng.uniform(*fault.jitter_s))

    def pick(self, fault: Fault) -> str:
        running = sorted(self.crawl.workers)
        if fault.target == "slow-owner":
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:   # a kill during a fetch: the slow host's request is pending
                owner = [n for n in running if self.partition_of(SLOW) in self.partitions_of(n)]
                pending = any(r["status"] is None and r["ip"] == SLOW for r in self.site.requests())
                if owner and pending:
                    return owner[0]
                time.sleep(0.02)
            return owner[0] if owner else self.rng.choice(running)
        return fault.target if fault.target in running else self.rng.choice(running)

    def kill(self, name: str) -> FaultEvent:
        partitions = self.partitions_of(name)
        at = time.time()
        self.crawl.stop_worker(name, kill=True)
        event = FaultEvent("kill", at, name, partitions, self.inflight(partitions))
        self.events.append(event)
        return event

    def apply(self, fault: Fault) -> None:
        self.trigger(fault)
        if fault.kind == "kill":
            name = self.pick(fault)
            event = self.kill(name)
            time.sleep(self.rng.uniform(*fault.down_s))
            self.crawl.start_worker(name, wipe=fault.wipe)
            event.back_at_s = time.time()
            if fault.kill_in_recovery:
                time.sleep(self.rng.uniform(*fault.recovery_kill_s))
                again = self.kill(name)
                self.crawl.start_worker(name)
                again.back_at_s = time.time()
        elif fault.kind == "join":
            self.extra += 1
            self.crawl.start_worker(f"x{self.extra}")
            self.events.append(FaultEvent("join", time.time(), f"x{self.extra}"))
        elif fault.kind == "join-kill":
            self.extra += 1
            self.crawl.start_worker(f"x{self.extra}")
            time.sleep(self.rng.uniform(*fault.down_s))
            victim = self.rng.choice(sorted(n for n in self.crawl.workers if not n.startswith("x")))
            self.kill(victim)
            self.crawl.start_worker(victim)
        elif fault.kind == "churn":
            for _ in range(fault.times):
                self.extra += 1
                name = f"x{self.extra}"
                self.crawl.start_worker(name)
                time.sleep(self.rng.uniform(*fault.down_s))
                if self.rng.random() < 0.5:
                    self.kill(name)
                else:
                    self.crawl.stop_worker(name)
                    self.events.append(FaultEvent("leave", time.time(), name))
        elif fault.kind == "broker":
            self.kill_broker(fault)
        else:
            raise ValueError(f"unknown fault kind {fault.kind!r}")

    def kill_broker(self, fault: Fault) -> None:
        pid = kafka_local.status(self.bootstrap)["pid"]
        if pid is None:
            raise RuntimeError(f"the broker at {self.bootstrap} was not started by squall.tools.kafka_local: cannot kill it")
        at = time.time()
        os.kill(pid, signal.SIGKILL)
        time.sleep(self.rng.uniform(*fault.down_s))
        kafka_local.up(self.bootstrap, wait_s=120)
        self.events.append(FaultEvent("broker", at, back_at_s=time.time()))

    # ------------------------------------------------------------ run and measure

    def finish(self) -> tuple[bool, dict[str, dict[str, Any]]]:
        """Wait until every expected page has a final status (or the timeout); the final records."""
        expected = self.site.server.expected_pages()
        deadline = time.monotonic() + FINISH_TIMEOUT_S
        records: dict[str, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            try:
                self.crawl.wait_idle(timeout_s=max(1.0, min(30.0, deadline - time.monotonic())))
            except TimeoutError:
                pass
            records = self.crawl.records()
            if not fm.lost_urls(expected, records):
                return True, records
        return False, records

    def measure(self, finished: bool, records: dict[str, dict[str, Any]], started: float) -> TrialResult:
        port = self.site.server.port
        requests = self.site.requests()
        expected = self.site.server.expected_pages()
        scripted = {f"http://{RETRY_AFTER}:{port}{p}": n for p, n in self.farm.scripted_answers.items()}
        res = TrialResult(self.trial, pages=len(expected), finished=finished, events=self.events)
        res.lost = fm.lost_urls(expected, records)
        res.repeats = fm.repeat_counts(requests, port, scripted)
        res.violations = fm.politeness_violations(requests, self.farm.delay_s, SERVER_DELAY_S)
        kills_inflight: Counter[str] = Counter()
        end = time.time()
        for e in self.events:
            if e.kind == "kill":
                kills_inflight.update(e.inflight)
                res.inflight_at_kills += len(e.inflight)
                mine = self.hosts_of(e.partitions)
                first = fm.first_request_after(requests, e.at_s, mine)
                if first is not None:
                    res.recovery_s.append(first - e.at_s)
                others = set(HOSTS) - mine
                last = max((r["t"] for r in requests if r["ip"] in others), default=e.at_s)
                window_end = min(e.at_s + 3 * SESSION_TIMEOUT_S, last)  # silence after their last request: no work
                if window_end > e.at_s:
                    res.survivor_stall_s.append(fm.longest_silence(requests, e.at_s, window_end, others))
            elif e.kind == "broker" and e.back_at_s is not None:
                first = fm.first_request_after(requests, e.back_at_s, HOSTS)
                if first is not None:
                    res.recovery_s.append(first - e.back_at_s)
        res.excess_repeats = sum(max(0, n - kills_inflight[u]) for u, n in res.repeats.items())
        for log in self.crawl.workdir.glob("worker-*.log"):
            text = log.read_text(errors="replace")
            res.error_lines += sum(1 for line in text.splitlines() if "[ERROR]" in line)
            res.tracebacks += text.count("Traceback")
            res.stale_rereads += text.count("skipping stale hand-out")
            res.unplanned_rebalances += len(_UNPLANNED.findall(text))
        res.dead_workers = [n for n, p in self.crawl.workers.items() if p.poll() is not None]
        res.duration_s = end - started
        return res

    def run(self) -> TrialResult:
        started = time.time()
        try:
            for i in range(1, self.trial.workers + 1):
                self.crawl.start_worker(f"w{i}")
            self.crawl.seed(self.site.seeds)
            for fault in self.trial.faults:
                self.apply(fault)
            finished, records = self.finish()
            result = self.measure(finished, records, started)
            if result.lost or result.excess_repeats or not result.finished or os.environ.get("SQUALL_FAULTS_KEEP_ALL"):
                self.keep_evidence()
            return result
        finally:
            self.crawl.stop()
            self.site.close()

    def keep_evidence(self) -> None:
        """Write every record of the crawl's topics to ``topics.jsonl`` and copy the work directory to KEEP_DIR."""
        workdir = self.crawl.workdir.parent
        try:
            asyncio.run(_dump_topics(self.crawl, workdir / "crawl" / "topics.jsonl"))
        except Exception as exc:  # the broker may be gone: keep the logs anyway
            print(f"fault trial: topics not dumped: {exc!r}")
        target = KEEP_DIR / f"{self.trial.name.replace(' ', '_')}-{self.trial.seed}-{int(time.time())}"
        shutil.copytree(workdir, target, ignore=shutil.ignore_patterns("*.db", "*-backups"), dirs_exist_ok=True)
        print(f"fault trial: evidence kept in {target}")


async def _dump_topics(crawl: Crawl, out: Path) -> None:
    """One JSON line per record of every topic of the crawl (offset, time, key, value), then the committed offsets."""
    from squall.net.kafka_security import KafkaConnection
    from squall.tools.kafka_admin import read_records

    def text(raw: bytes | None) -> str | None:
        return None if raw is None else raw.decode("utf-8", errors="replace")

    settings = crawl.settings
    conn = KafkaConnection.from_settings(settings)
    with out.open("w", encoding="utf-8") as f:
        for topic in all_topics(settings):
            try:
                async for m in read_records(conn, topic, missing_ok=True, idle_timeout_s=15.0):
                    f.write(json.dumps({"topic": topic, "partition": m.partition, "offset": m.offset,
                                        "timestamp_ms": m.timestamp, "key": text(m.key), "value": text(m.value)}) + "\n")
            except KafkaSetupError as exc:  # one topic stalled (the broker is going away): the others still count
                f.write(json.dumps({"topic": topic, "error": str(exc)}) + "\n")
        committed = await committed_offsets(settings) or {}
        f.write(json.dumps({"committed": {f"{t}[{p}]": o for (t, p), o in sorted(committed.items())}}) + "\n")


def run_trial(trial: Trial, bootstrap: str, workdir: Path) -> TrialResult:
    return TrialRun(trial, bootstrap, workdir).run()
