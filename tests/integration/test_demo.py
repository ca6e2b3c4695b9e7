"""`make demo` end to end: `python -m squall.tools.demo` on a small generated site, against the test broker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from squall.settings import ROOT


def test_the_demo_crawls_its_site_checks_it_and_exits_0(kafka_bootstrap: str, tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    env = dict(os.environ)
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)  # --bootstrap names the broker
    proc = subprocess.run(
        [sys.executable, "-m", "squall.tools.demo", "--hosts", "2", "--pages", "5", "--bootstrap", kafka_bootstrap,
         "--workdir", str(workdir), "--timeout", "240"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr

    assert f"broker: using the Kafka broker answering at {kafka_bootstrap}" in out  # not started, so not stopped
    assert "stopped: local broker" not in out
    assert "http.private.networks.allow = [127.0.0.0/8]" in out
    assert "fetcher.server.delay = 0.2 s" in out
    # 2 hosts × (/ + 5 pages + /meta-nofollow) FETCHED; 2 × 2 /private/ pages denied by robots.txt
    assert re.search(r"\bFETCHED=14\b", out), out
    assert "robots.denied=4" in out
    for name in ("every expected URL requested", "each URL requested exactly once", "every expected page FETCHED",
                 "disallowed pages never requested", "robots.txt fetched once per host",
                 "min gap per host >= fetcher.server.delay 0.2 s", "WARC readable by warcio index",
                 "politeness audit (squall audit)", "one document per FETCHED HTML page",
                 "search finds a page by its title"):
        assert f"[PASS] {name}:" in out, (name, out)
    assert "[FAIL]" not in out
    assert re.search(r"^progress: .* FETCHED \d+ ", out, re.M), out  # progress shown while it ran
    assert "demo: all checks passed" in out
    assert "stopped: worker" in out and "stopped: site" in out

    warcs = re.findall(r"^WARC: (\S+)$", out, re.M)
    assert warcs and all(Path(w).is_file() and Path(w).parent == workdir / "warc" for w in warcs)
    log = [json.loads(line) for line in (workdir / "requests.jsonl").read_text().splitlines()]
    assert {r["ip"] for r in log} == {"127.0.0.2", "127.0.0.3"}
    assert not [r for r in log if r["path"].startswith("/private/")]
