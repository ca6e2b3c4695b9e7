"""The local broker's jars: Apache Kafka 4.1.1 and its runtime dependencies, copied from Maven into a cache.

:func:`resolve_jars` copies ``kafka/pom.xml``'s runtime jars into a cache
outside the work tree (``$SQUALL_CACHE/kafka-4.1.1/libs``, by default
``~/.cache/squall/kafka-4.1.1/libs``) with ``mvn dependency:copy-dependencies``
(once; later calls return at once). Every failure raises
:class:`squall.errors.KafkaSetupError`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

from squall.errors import KafkaSetupError

KAFKA_VERSION = "4.1.1"
ROOT = Path(__file__).resolve().parents[2]
POM_FILE = ROOT / "kafka" / "pom.xml"
COMPLETE_MARKER = ".complete"


def cache_root() -> Path:
    """``$SQUALL_CACHE``, else ``~/.cache/squall``."""
    env = os.environ.get("SQUALL_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "squall"


def libs_dir() -> Path:
    """Where the broker jars are cached: ``<cache_root>/kafka-4.1.1/libs``."""
    return cache_root() / f"kafka-{KAFKA_VERSION}" / "libs"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created) for the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _pom_digest() -> str:
    return hashlib.sha256(POM_FILE.read_bytes()).hexdigest()


def jars_complete(libs: Path | None = None) -> bool:
    """True if ``libs`` holds a finished copy of the jars of the current POM."""
    libs = libs or libs_dir()
    marker = libs / COMPLETE_MARKER
    try:
        return marker.read_text().strip() == _pom_digest() and any(libs.glob("kafka_2.13-*.jar"))
    except OSError:
        return False


def resolve_jars(timeout_s: float = 900.0) -> Path:
    """Copy the broker's jars into the cache with Maven; return the libs directory.

    Runs ``mvn -q -B -f kafka/pom.xml dependency:copy-dependencies`` into a
    temporary directory next to the cache and renames it into place, so the
    cache is either complete or absent. Idempotent: returns at once when the
    cache already holds the jars of the current POM (a ``.complete`` marker
    records the POM's sha256). Concurrent callers wait on a lock.
    ``$SQUALL_MAVEN_REPO`` sets ``-Dmaven.repo.local`` (default: Maven's
    ``~/.m2/repository``). ``timeout_s`` is in seconds.

    Raises:
        KafkaSetupError: Maven is missing or the resolution failed.
    """
    libs = libs_dir()
    if jars_complete(libs):
        return libs
    if not POM_FILE.is_file():
        raise KafkaSetupError(f"{POM_FILE} is missing (squall must run from its source tree)")
    mvn = os.environ.get("SQUALL_MVN") or shutil.which("mvn")
    if not mvn:
        raise KafkaSetupError(
            "Apache Maven (mvn) is not on PATH; install it (e.g. apt-get install maven) or set SQUALL_MVN"
        )
    with locked(libs.parent / ".lock"):
        if jars_complete(libs):
            return libs
        tmp = libs.parent / f"libs.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [
            mvn,
            "-q",
            "-B",
            "-f",
            str(POM_FILE),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={tmp}",
            "-DincludeScope=runtime",
        ]
        repo = os.environ.get("SQUALL_MAVEN_REPO")
        if repo:
            cmd.append(f"-Dmaven.repo.local={Path(repo).expanduser()}")
        try:
            proc = subprocess.run(
                cmd, cwd=libs.parent, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout_s
            )
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            raise KafkaSetupError(f"mvn did not finish within {timeout_s:.0f} s") from exc
        except OSError as exc:
            raise KafkaSetupError(f"could not run mvn: {exc}") from exc
        if proc.returncode != 0 or not any(tmp.glob("kafka_2.13-*.jar")):
            shutil.rmtree(tmp, ignore_errors=True)
            tail = tail_text((proc.stdout or "") + (proc.stderr or ""), 30)
            raise KafkaSetupError(f"mvn dependency:copy-dependencies failed (exit {proc.returncode}):\n{tail}")
        (tmp / COMPLETE_MARKER).write_text(_pom_digest() + "\n")
        shutil.rmtree(libs, ignore_errors=True)
        tmp.rename(libs)
    return libs


def tail_text(text: str, lines: int) -> str:
    """The last ``lines`` lines of ``text`` (a process's output quoted in an error)."""
    return "\n".join(text.strip().splitlines()[-lines:])
