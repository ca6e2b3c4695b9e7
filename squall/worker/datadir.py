"""The worker's table directory: which one, created with its parents, and locked for one worker.

Precedence (first that is set wins):

1. ``faust -A topology --datadir DIR worker`` — Faust's command line sets
   ``$F_DATADIR`` *after* importing ``topology``, so the directory is resolved
   when the worker starts (:func:`open_datadir` from the app's first start),
   never at import;
2. ``$F_DATADIR`` (or ``$FAUST_DATADIR``) in the environment;
3. ``topology.data.dir`` from the configuration.

A relative path is relative to the worker's **working directory** (as
Faust's ``--datadir`` and a shell path are), not to the configuration file:
the default ``./var/data`` therefore lands where the operator starts the
worker. Missing parents are created.

Two workers on one directory would share RocksDB files, and a partition that
moves between them would never be rebuilt from its changelog; the second one
is refused at start by an exclusive ``fcntl`` lock on ``DIR/squall.lock``,
held for the life of the process (the kernel drops it when the process dies,
SIGKILL included, so a stale lock file never blocks a restart).

A worker that stops cleanly leaves ``DIR/squall.clean`` behind
(:func:`mark_clean`: its producer flushed every changelog record of its
table writes first). One that did not (a SIGKILL, a crash) may have left
table writes in its local RocksDB stores whose changelog records were never
produced; :func:`drop_unclean_tables` removes those stores at the next
start, so Faust rebuilds them from the changelogs, as Kafka Streams does
for a state directory without a checkpoint under exactly-once.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from squall.errors import DataDirError

#: Faust's own default (faust.types._env): its CLI exports it as F_DATADIR when --datadir is not given.
FAUST_DEFAULT_DATADIR = "{conf.name}-data"
LOCK_NAME = "squall.lock"
CLEAN_NAME = "squall.clean"


def resolve_datadir(configured: str, environ: Mapping[str, str], cwd: Path) -> Path:
    """The absolute table directory (see the module doc for the precedence).

    ``configured`` is ``topology.data.dir``; ``environ`` the process
    environment (``F_DATADIR`` / ``FAUST_DATADIR``); ``cwd`` the directory a
    relative path is taken from. Faust's placeholder default
    ``{conf.name}-data`` counts as "not given".
    """
    given = environ.get("F_DATADIR") or environ.get("FAUST_DATADIR") or ""
    chosen = given if given and given != FAUST_DEFAULT_DATADIR else configured
    path = Path(chosen).expanduser()
    return path if path.is_absolute() else (cwd / path)


def lock_datadir(path: Path) -> IO[str]:
    """Create ``path`` (parents included) and take its exclusive lock; return the open lock file.

    Keep the returned file open as long as the worker runs. Raises
    :class:`squall.errors.DataDirError` (one line, naming the directory and
    the holder's pid when known) if another process holds the lock or the
    directory cannot be created.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
        lock = open(path / LOCK_NAME, "a+", encoding="ascii")  # noqa: SIM115 (held for the process's life)
    except OSError as exc:
        raise DataDirError(path, f"cannot be created or written ({exc.strerror or exc})") from None
    try:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
            lock.close()
            raise DataDirError(path, f"cannot be locked ({exc.strerror or exc})") from None
        lock.seek(0)
        holder = lock.read().strip() or "unknown"
        lock.close()
        raise DataDirError(
            path,
            f"is in use by another worker (pid {holder}); "
            "give each worker its own: faust -A topology --datadir DIR worker",
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def open_datadir(
    configured: str, environ: Mapping[str, str] | None = None, cwd: Path | None = None
) -> tuple[Path, IO[str]]:
    """:func:`resolve_datadir` then :func:`lock_datadir`: the directory and its held lock."""
    path = resolve_datadir(configured, os.environ if environ is None else environ, Path.cwd() if cwd is None else cwd)
    return path, lock_datadir(path)


def drop_unclean_tables(path: Path, tabledir: Path) -> bool:
    """At start, with ``path`` locked: remove ``tabledir`` unless the last worker on ``path`` stopped cleanly.

    Returns True when a non-empty ``tabledir`` was removed (the worker then
    rebuilds every table partition it is given from its changelog). The
    clean mark is consumed either way: this worker leaves its own when it
    stops cleanly (:func:`mark_clean`).

    Raises:
        DataDirError: ``tabledir`` cannot be removed.
    """
    clean = path / CLEAN_NAME
    was_clean = clean.exists()
    clean.unlink(missing_ok=True)
    if was_clean or not tabledir.is_dir() or not any(tabledir.iterdir()):
        return False
    try:
        shutil.rmtree(tabledir)
    except OSError as exc:
        raise DataDirError(tabledir, f"cannot be removed after an unclean stop ({exc.strerror or exc})") from None
    return True


def mark_clean(path: Path) -> None:
    """Note in ``path`` that this worker stopped cleanly (its tables' changelog records all produced)."""
    (path / CLEAN_NAME).write_text(f"{os.getpid()}\n", encoding="ascii")
