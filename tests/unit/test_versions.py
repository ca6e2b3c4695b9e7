"""The worker refuses to start on a faust-streaming or aiokafka outside the range pyproject.toml pins."""

from __future__ import annotations

import tomllib

import pytest

from squall.settings import ROOT
from squall.worker.versions import HOOKED, check_hooked_versions, version_mismatches

REQUIRES = ["faust-streaming>=0.15.3,<0.16", "aiokafka>=0.14.0,<0.15", "aiohttp>=3.9", "pytest>=8; extra == 'test'"]


def installed(versions: dict[str, str]):
    return lambda name: versions.get(name)


def test_the_pinned_versions_start():
    have = installed({"faust-streaming": "0.15.3", "aiokafka": "0.14.0", "aiohttp": "1.0"})
    assert version_mismatches(REQUIRES, have) == []
    check_hooked_versions(lambda: REQUIRES, have)  # no SystemExit


def test_another_aiokafka_stops_the_worker_with_one_line_naming_both_versions():
    have = installed({"faust-streaming": "0.15.3", "aiokafka": "0.15.0"})
    with pytest.raises(SystemExit) as stop:
        check_hooked_versions(lambda: REQUIRES, have)
    message = str(stop.value)
    assert "\n" not in message and message.startswith("squall: aiokafka 0.15.0 is installed, squall needs aiokafka")
    assert "0.14.0" in message and "<0.15" in message


def test_both_outside_their_range_are_named_in_the_one_line():
    have = installed({"faust-streaming": "0.11.0", "aiokafka": "0.10.0"})
    assert version_mismatches(REQUIRES, have) == [
        "faust-streaming 0.11.0 is installed, squall needs faust-streaming<0.16,>=0.15.3",
        "aiokafka 0.10.0 is installed, squall needs aiokafka<0.15,>=0.14.0",
    ]


def test_a_missing_library_is_named_and_other_libraries_are_not_checked():
    assert version_mismatches(REQUIRES, installed({"faust-streaming": "0.15.9"})) == [
        "aiokafka is not installed, squall needs aiokafka<0.15,>=0.14.0"
    ]


def test_run_from_a_source_tree_without_metadata_there_is_nothing_to_compare():
    assert version_mismatches(None, installed({})) == []


def test_pyproject_pins_each_hooked_library_to_a_range_with_an_upper_bound_the_lock_file_satisfies():
    from packaging.requirements import Requirement

    deps = [Requirement(d) for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]
    lock = {
        line.split("==")[0]: line.split("==")[1].split()[0]
        for line in (ROOT / "requirements.lock").read_text().splitlines()
        if "==" in line and not line.startswith((" ", "#"))
    }
    for name in HOOKED:
        (req,) = [d for d in deps if d.name == name]
        assert any(s.operator in ("<", "==") for s in req.specifier), f"{name}: no upper bound in pyproject.toml"
        assert req.specifier.contains(lock[name]), f"{name}: requirements.lock has {lock[name]}, outside {req.specifier}"
