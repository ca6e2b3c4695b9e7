"""squall.worker.datadir: which table directory a worker uses, its parents, and the one-worker lock."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from squall.errors import DataDirError
from squall.worker.datadir import (
    CLEAN_NAME,
    FAUST_DEFAULT_DATADIR,
    LOCK_NAME,
    drop_unclean_tables,
    lock_datadir,
    mark_clean,
    open_datadir,
    resolve_datadir,
)

CWD = Path("/srv/crawl")

PRECEDENCE = [
    # (topology.data.dir, environment, expected)
    ("./var/data", {}, "/srv/crawl/var/data"),
    ("/data/squall", {}, "/data/squall"),
    ("./var/data", {"F_DATADIR": "w1"}, "/srv/crawl/w1"),                      # --datadir w1 (Faust's CLI)
    ("./var/data", {"F_DATADIR": "/abs/w2"}, "/abs/w2"),
    ("./var/data", {"FAUST_DATADIR": "/abs/w3"}, "/abs/w3"),
    ("./var/data", {"F_DATADIR": "/a", "FAUST_DATADIR": "/b"}, "/a"),
    ("./var/data", {"F_DATADIR": FAUST_DEFAULT_DATADIR}, "/srv/crawl/var/data"),  # CLI without --datadir
    ("./var/data", {"F_DATADIR": ""}, "/srv/crawl/var/data"),
]


@pytest.mark.parametrize(("configured", "environ", "expected"), PRECEDENCE)
def test_the_command_line_then_the_environment_then_the_config_choose_the_directory(configured, environ, expected):
    assert resolve_datadir(configured, environ, CWD) == Path(expected)


def test_a_relative_directory_is_relative_to_the_working_directory_not_the_config_file(tmp_path):
    assert resolve_datadir("var/data", {}, tmp_path) == tmp_path / "var" / "data"


def test_a_home_relative_directory_is_expanded():
    assert resolve_datadir("~/crawl", {}, CWD) == Path.home() / "crawl"


def test_missing_parents_are_created_and_the_lock_names_the_holder(tmp_path):
    target = tmp_path / "a" / "b" / "w1"
    lock = lock_datadir(target)
    try:
        assert target.is_dir()
        assert (target / LOCK_NAME).read_text().strip() == str(os.getpid())
    finally:
        lock.close()


def test_a_second_holder_of_the_same_directory_is_refused_with_one_line(tmp_path):
    first = lock_datadir(tmp_path)
    try:
        with pytest.raises(DataDirError) as err:
            lock_datadir(tmp_path)
        message = str(err.value)
        assert "\n" not in message
        assert "in use by another worker" in message and str(os.getpid()) in message
        assert "--datadir" in message
    finally:
        first.close()


def test_the_lock_is_free_again_once_its_holder_closed_it(tmp_path):
    lock_datadir(tmp_path).close()
    lock_datadir(tmp_path).close()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    code = ("import sys, os, signal; from pathlib import Path; from squall.worker.datadir import lock_datadir;"
            "lock_datadir(Path(sys.argv[1])); os.kill(os.getpid(), signal.SIGKILL)")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False)
    assert (tmp_path / LOCK_NAME).exists()
    lock_datadir(tmp_path).close()


def test_a_directory_that_cannot_be_created_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(DataDirError) as err:
        open_datadir(str(blocker / "sub"), {}, tmp_path)
    assert str(blocker / "sub") in str(err.value) and "\n" not in str(err.value)


def _tables(path: Path) -> Path:
    tabledir = path / "v1" / "tables"
    (tabledir / "urls-0.db").mkdir(parents=True)
    (tabledir / "urls-0.db" / "CURRENT").write_text("MANIFEST-000001\n")
    return tabledir


def test_tables_left_by_a_worker_that_did_not_stop_cleanly_are_dropped(tmp_path):
    tabledir = _tables(tmp_path)
    assert drop_unclean_tables(tmp_path, tabledir) is True
    assert not tabledir.exists()
    assert drop_unclean_tables(tmp_path, tabledir) is False  # nothing left to drop


def test_tables_of_a_clean_stop_are_kept_and_the_mark_is_consumed(tmp_path):
    tabledir = _tables(tmp_path)
    mark_clean(tmp_path)
    assert (tmp_path / CLEAN_NAME).read_text().strip() == str(os.getpid())
    assert drop_unclean_tables(tmp_path, tabledir) is False
    assert (tabledir / "urls-0.db" / "CURRENT").exists()
    assert not (tmp_path / CLEAN_NAME).exists()  # this run must leave its own mark
    assert drop_unclean_tables(tmp_path, tabledir) is True  # killed before it did: dropped


def test_a_first_start_has_nothing_to_drop(tmp_path):
    assert drop_unclean_tables(tmp_path, tmp_path / "v1" / "tables") is False
    (tmp_path / "v1" / "tables").mkdir(parents=True)
    assert drop_unclean_tables(tmp_path, tmp_path / "v1" / "tables") is False  # empty: kept
