"""What a new user meets at the command line, through the real broker: one clear line and the right exit code.

A typo'd topic for ``squall tail``, a seed file that is not there, and a
second worker on a web port already in use each end in one line naming what
is wrong, never a traceback or a wait that never ends.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from squall.settings import ROOT


def _conf(tmp_path: Path, bootstrap: str, **extra: object) -> Path:
    topology_id = f"contact-{uuid.uuid4().hex[:10]}"
    conf = tmp_path / "conf.yaml"
    lines = [f'kafka.bootstrap.servers: "{bootstrap}"', f'topology.id: "{topology_id}"', "topology.partitions: 2"]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    conf.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return conf


def _squall(conf: Path, *args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "squall.cli.main", "--conf", str(conf), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())},
    )


def test_tail_of_a_typod_topic_ends_at_once_naming_it_and_the_topics_that_exist(tmp_path, kafka_bootstrap):
    conf = _conf(tmp_path, kafka_bootstrap)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("https://example.org/\n", encoding="utf-8")
    assert _squall(conf, "seed", str(seeds)).returncode == 0  # the topology's topics exist
    started = time.monotonic()
    run = _squall(conf, "tail", "statuss", timeout_s=30)  # no --timeout: it used to never end
    assert time.monotonic() - started < 20
    assert run.returncode == 2, run
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("squall: topic statuss not found; topology.id 'contact-")
    assert "status, ticks" in lines[0] and "urls" in lines[0]


def test_seed_of_a_missing_file_is_one_line_and_exit_2(tmp_path, kafka_bootstrap):
    run = _squall(_conf(tmp_path, kafka_bootstrap), "seed", str(tmp_path / "missing.txt"))
    assert run.returncode == 2
    assert run.stderr.strip() == f"squall seed: cannot read {tmp_path / 'missing.txt'}: No such file or directory"


def test_a_worker_on_a_web_port_in_use_stops_with_one_line_naming_the_key_and_the_port(crawl):
    with socket.socket() as taken:  # what a first worker's web server holds
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        c = crawl(**{"topology.web.port": port})
        proc = c.start_worker("w2", web_port=port)
        assert proc.wait(60) != 0
        c.workers.pop("w2")
    log = c.log_text("w2")
    assert "Traceback" not in log, log[-2000:]
    lines = [line for line in log.splitlines() if line.strip()]
    assert len(lines) == 1, log[-2000:]
    assert lines[0].startswith(f"squall: topology.web.port: port {port} on 127.0.0.1 is in use")
