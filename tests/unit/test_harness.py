"""Tests of squall.tools.harness: a worker it starts never outlives the process that started it.

A small Python process plays the test run (pytest of the fault suite): it
starts a worker through :func:`squall.tools.harness.spawn`, the same call
``Crawl.start_worker`` makes, and the worker starts a child of its own.
The test run is then ended from outside the way an outer ``timeout``, an
operator or the OOM killer ends it; the worker (and, where a handler can
run, its whole process group) must be gone within a few seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from squall.settings import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc, uses PR_SET_PDEATHSIG")

GONE_WITHIN_S = 5.0

# The worker: starts a child in its own process group, says both pids, sleeps.
WORKER = (
    "import subprocess, sys, time\n"
    "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
    "print('child', child.pid, flush=True)\n"
    "time.sleep(120)\n"
)

# The test run: starts the worker through the harness, says its pid, sleeps until it is ended.
RUN = (
    "import os, sys, time\n"
    "from squall.tools.harness import spawn\n"
    "worker = spawn([sys.executable, '-c', sys.argv[1]], cwd=os.getcwd(), env=os.environ)\n"
    "print('worker', worker.pid, flush=True)\n"
    "time.sleep(120)\n"
)


def alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped has ended)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pids: list[int], within_s: float) -> list[int]:
    """Wait until none of ``pids`` runs or ``within_s`` passed; the pids still running."""
    deadline = time.monotonic() + within_s
    while (running := [p for p in pids if alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    return running


def start_run() -> tuple[subprocess.Popen[str], dict[str, int]]:
    """Start the test run; return it and the pids it and its worker said (``worker``, ``child``)."""
    run = subprocess.Popen([sys.executable, "-c", RUN, WORKER], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    pids: dict[str, int] = {}
    deadline = time.monotonic() + 30
    while len(pids) < 2 and time.monotonic() < deadline:
        line = run.stdout.readline()
        if not line:
            break
        name, pid = line.split()
        pids[name] = int(pid)
    assert set(pids) == {"worker", "child"}, pids
    return run, pids


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_test_run_ended_by_a_signal_ends_its_workers_process_groups(signum):
    run, pids = start_run()
    try:
        run.send_signal(signum)
        assert wait_gone([pids["worker"], pids["child"]], GONE_WITHIN_S) == []
        run.wait(GONE_WITHIN_S)
        if signum == signal.SIGTERM:
            assert run.returncode == -signal.SIGTERM  # then the default action: the run still ends by SIGTERM
    finally:
        _clean_up(run, pids)


def test_a_worker_dies_with_a_test_run_killed_by_sigkill():
    run, pids = start_run()
    try:
        run.kill()
        run.wait(GONE_WITHIN_S)
        assert wait_gone([pids["worker"]], GONE_WITHIN_S) == []
    finally:
        _clean_up(run, pids)


def _clean_up(run: subprocess.Popen[str], pids: dict[str, int]) -> None:
    """Whatever the outcome, nothing this test started keeps running (the worker's group included)."""
    for pid in (pids.get("worker"),):
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    if run.poll() is None:
        run.kill()
    run.wait(10)
    assert run.stdout is not None
    run.stdout.close()
