"""`squall seed` through the broker: bad lines are named and skipped, the rest are seeded."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

from squall.tools.kafka_admin import read_topic
from squall.settings import ROOT


def test_squall_seed_names_bad_lines_and_seeds_the_rest(tmp_path: Path, kafka_bootstrap: str):
    topology_id = f"seedtest-{uuid.uuid4().hex[:10]}"  # fresh topics even on a long-lived broker
    conf = tmp_path / "conf.yaml"
    conf.write_text(f'kafka.bootstrap.servers: "{kafka_bootstrap}"\ntopology.id: "{topology_id}"\n'
                    "topology.partitions: 4\n", encoding="utf-8")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("# a comment\n"
                     "https://Example.COM:443/a#frag\n"
                     "\n"
                     "mailto:someone@example.com\n"
                     "http://exa mple.com/\n"
                     "https://example.org/b\tsource=list-1\n"
                     "https://example.org/c\tnot-a-pair\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "squall.cli.main", "--conf", str(conf), "seed", str(seeds)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/bin:/bin", "HOME": str(Path.home())})
    assert run.returncode == 1, run.stderr
    assert "line 4: invalid URL 'mailto:someone@example.com': url.scheme" in run.stderr
    assert "line 5: invalid URL 'http://exa mple.com/'" in run.stderr
    assert "line 7: metadata 'not-a-pair' is not key=value" in run.stderr
    assert "2 URL(s) sent" in run.stdout and "3 line(s) rejected" in run.stdout

    async def messages() -> list[tuple[bytes, dict]]:
        topic = f"{topology_id}-status"
        return [(k, json.loads(v)) async for k, v in read_topic(kafka_bootstrap, topic)]

    got = sorted(asyncio.run(messages()), key=lambda kv: kv[1]["url"])
    assert [(k, m["url"], m["seed"], m["metadata"]) for k, m in got] == [
        (b"example.com", "https://example.com/a", True, {}),
        (b"example.org", "https://example.org/b", True, {"source": ["list-1"]}),
    ]


def test_seeding_reports_progress_in_steps_and_at_the_end(tmp_path: Path, kafka_bootstrap: str, monkeypatch):
    import squall.cli.seed as seeding
    from squall.settings import load_settings

    conf = tmp_path / "conf.yaml"
    conf.write_text(f'kafka.bootstrap.servers: "{kafka_bootstrap}"\ntopology.id: "seedprog-{uuid.uuid4().hex[:10]}"\n'
                    "topology.partitions: 2\n", encoding="utf-8")
    monkeypatch.delenv("KAFKA_BOOTSTRAP_SERVERS", raising=False)
    monkeypatch.setattr(seeding, "PROGRESS_EVERY", 10)
    seeds = [seeding.SeedLine(i, url=f"https://h{i % 3}.example/{i}", metadata={}) for i in range(25)]
    seen: list[int] = []
    assert asyncio.run(seeding.produce_seeds(load_settings(conf), seeds, progress=seen.append)) == 25
    assert seen == [10, 20, 25]
