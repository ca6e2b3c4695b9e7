"""A worker configured to render without a browser stops at start with one line naming the key."""

from __future__ import annotations

import os
import subprocess
import sys

from squall.settings import ROOT


def test_render_enabled_without_chromium_stops_the_worker_with_one_line(tmp_path):
    conf = tmp_path / "crawler-conf.yaml"
    conf.write_text('render.enabled: true\nrender.browser.path: "/nonexistent/chromium"\n', encoding="utf-8")
    env = dict(os.environ, SQUALL_CONF=str(conf))
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    # what `faust -A topology worker` does at start: import the app, then its agents (SquallApp.worker_init)
    start = "import topology; topology.app.worker_init()"
    done = subprocess.run([sys.executable, "-c", start], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("squall: configuration error: render.browser.path:")
