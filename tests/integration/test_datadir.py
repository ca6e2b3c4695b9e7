"""Table directories of real workers: --datadir honoured from any directory, a shared one refused in one line."""

from __future__ import annotations

import time
from pathlib import Path

from squall.policy.topics import TABLES
from squall.tools.site_spec import generated_site
from squall.worker.datadir import CLEAN_NAME, LOCK_NAME

HOSTS = ["127.0.0.2", "127.0.0.3"]


def _table_dirs(datadir: Path) -> set[str]:
    return {p.name.split("-")[0] for p in (datadir / "v1" / "tables").glob("*.db")}


def test_workers_store_their_tables_in_their_own_datadir_and_a_shared_one_is_refused(site, crawl, tmp_path):
    served = site(generated_site(HOSTS, 3))
    c = crawl(**{"fetcher.server.delay": 0.2})
    elsewhere = tmp_path / "operator-dir"           # not the repository root
    elsewhere.mkdir()
    c.start_worker("w1", cwd=elsewhere)
    c.seed(served.seeds)
    c.wait_idle(timeout_s=240)
    assert _table_dirs(c.datadir("w1")) == set(TABLES)
    assert (c.datadir("w1") / LOCK_NAME).read_text().strip() == str(c.workers["w1"].pid)
    assert not (elsewhere / "var").exists() and not (c.workdir / "data" / "v1").exists()

    second = c.start_worker("w2", datadir=c.datadir("w1"))
    assert second.wait(120) != 0
    c.workers.pop("w2")
    log = (c.workdir / "worker-w2.log").read_text()
    refusals = [line for line in log.splitlines() if "in use by another worker" in line]
    assert len(refusals) == 1 and refusals[0].startswith("squall: data directory")
    assert "Traceback" not in log
    assert c.workers["w1"].poll() is None


def test_a_worker_without_datadir_uses_topology_data_dir_relative_to_its_working_directory(crawl, tmp_path):
    c = crawl(**{"topology.data.dir": "var/rel-data"})
    elsewhere = tmp_path / "run-here"
    elsewhere.mkdir()
    proc = c.start_worker("plain", cwd=elsewhere, datadir_option=False)
    deadline = time.monotonic() + 120
    lock = elsewhere / "var" / "rel-data" / LOCK_NAME
    while not lock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.5)
    assert lock.exists(), (c.workdir / "worker-plain.log").read_text()[-2000:]
    assert proc.poll() is None


def test_a_clean_stop_keeps_the_tables_and_a_sigkill_has_them_rebuilt_from_the_changelogs(site, crawl):
    # frontier.result.inprocess (on by default): a result applied in process may sit in the local store only
    served = site(generated_site(HOSTS, 3))
    c = crawl(**{"fetcher.server.delay": 0.2})
    c.start_worker("w1")
    c.seed(served.seeds)
    c.wait_idle(timeout_s=240)
    c.stop_worker("w1")  # SIGTERM: the producer flushed, the tables closed
    assert (c.datadir("w1") / CLEAN_NAME).exists()
    c.start_worker("w1")
    c.wait_idle(timeout_s=240)
    assert not (c.datadir("w1") / CLEAN_NAME).exists()  # consumed at start: a crash from here leaves none
    c.stop_worker("w1", kill=True)
    c.start_worker("w1")
    c.wait_idle(timeout_s=240)
    log = (c.workdir / "worker-w1.log").read_text()
    rebuilt = [line for line in log.splitlines() if "did not stop cleanly" in line]
    assert len(rebuilt) == 1 and "rebuilt from their changelogs" in rebuilt[0], log[-3000:]
    deadline = time.monotonic() + 120
    while _table_dirs(c.datadir("w1")) != set(TABLES) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert _table_dirs(c.datadir("w1")) >= {"urls", "hosts"}  # recovered from the changelogs
