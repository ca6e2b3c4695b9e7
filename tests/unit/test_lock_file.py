"""requirements.lock pins every dependency pyproject.toml names, at one exact version (reproducible installs)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    """The normalised project name of a PEP 508 requirement (PEP 503: lower case, runs of -_. as -)."""
    name = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert name is not None, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


def _pinned() -> dict[str, list[str]]:
    pins: dict[str, list[str]] = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line and not line.startswith((" ", "#")):
            requirement = line.split(";")[0].strip()
            name, _, version = requirement.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins.setdefault(_name(name), []).append(version)
    return pins


def test_every_dependency_and_extra_of_pyproject_is_pinned_in_the_lock_file() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"]) + [r for extra in ("test", "dev") for r in project["optional-dependencies"][extra]]
    pins = _pinned()
    missing = sorted({_name(r) for r in wanted} - set(pins))
    assert missing == [], f"not in requirements.lock (run `make lock`): {missing}"


def test_the_lock_file_pins_each_project_once_per_marker() -> None:
    pins = _pinned()
    assert len(pins) > 50
    assert all(len(versions) == len(set(versions)) for versions in pins.values())
