"""The faust-streaming and aiokafka versions squall's hooks into their internals were written for.

squall reaches past the public API of two libraries for real fixes: the Faust
consumer's commit path and revoke order (:mod:`squall.worker.kafka_consumer`),
aiokafka's coordinator requests and generation reset
(:mod:`squall.worker.group_lease`). Those internals change between minor
releases without notice, so ``pyproject.toml`` pins a range of each, and a
worker started with another version installed stops at start with one line
naming both, instead of failing later in the middle of a rebalance.

The ranges are read from squall's own installed metadata (the
``Requires-Dist`` lines pyproject.toml produced): they are stated once, in
pyproject.toml.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Iterable

from packaging.requirements import InvalidRequirement, Requirement

HOOKED = ("faust-streaming", "aiokafka")  # distributions whose internals squall uses


def _squall_requires() -> list[str] | None:
    try:
        return importlib.metadata.requires("squall")
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def version_mismatches(
    requires: Iterable[str] | None, installed: Callable[[str], str | None], hooked: Iterable[str] = HOOKED
) -> list[str]:
    """``"NAME VERSION is installed, squall needs NAME SPEC"`` for each hooked distribution outside its pin.

    Args:
        requires: squall's ``Requires-Dist`` strings (``"aiokafka>=0.14.0,<0.15"``); None = squall is
            not installed as a distribution (run from a source tree): nothing to compare, no mismatch.
        installed: the installed version of a distribution, None when it is not installed.
        hooked: the distributions to check (names compared case-insensitively, ``_`` as ``-``).
    """
    if requires is None:
        return []
    wanted = {_norm(name) for name in hooked}
    out = []
    for line in requires:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if _norm(req.name) not in wanted or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        have = installed(req.name)
        if have is None:
            out.append(f"{req.name} is not installed, squall needs {req.name}{req.specifier}")
        elif not req.specifier.contains(have, prereleases=True):
            out.append(f"{req.name} {have} is installed, squall needs {req.name}{req.specifier}")
    return out


def check_hooked_versions(
    requires: Callable[[], Iterable[str] | None] = _squall_requires,
    installed: Callable[[str], str | None] = _installed,
) -> None:
    """Stop the worker with one line when faust-streaming or aiokafka is outside the range pyproject.toml pins.

    Raises:
        SystemExit: ``squall: aiokafka 0.15.0 is installed, squall needs aiokafka<0.15,>=0.14.0 (its hooks
            into the library's internals were written for that range; `make venv` installs it)``.
    """
    wrong = version_mismatches(requires(), installed)
    if wrong:
        raise SystemExit(
            f"squall: {'; '.join(wrong)} (its hooks into the libraries' internals were written for that range; "
            "`make venv` installs the versions of requirements.lock)"
        )


def _norm(name: str) -> str:
    return name.lower().replace("_", "-")
