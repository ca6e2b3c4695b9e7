"""Tests of squall.net.browser.find_chromium: where the system browser is looked for, and the error without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from squall.net.browser import CHROMIUM_ARGS, find_chromium
from squall.errors import BrowserMissing


def executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_an_explicit_path_is_used_when_it_is_an_executable(tmp_path):
    assert find_chromium(executable(tmp_path / "my-chrome")) == tmp_path / "my-chrome"


def test_an_explicit_path_that_does_not_exist_is_an_error_naming_the_key(tmp_path):
    with pytest.raises(BrowserMissing, match="render.browser.path"):
        find_chromium(tmp_path / "nope")


def test_a_file_that_is_not_executable_is_not_a_browser(tmp_path):
    (tmp_path / "chromium").write_text("")
    with pytest.raises(BrowserMissing, match="install-browser.sh"):
        find_chromium("", path=str(tmp_path))


@pytest.mark.parametrize("name", ["chromium", "chromium-browser", "google-chrome"])
def test_the_known_names_are_found_on_the_path(tmp_path, name):
    found = executable(tmp_path / name)
    assert find_chromium("", path=str(tmp_path)) == found


def test_chromium_is_preferred_over_chrome(tmp_path):
    executable(tmp_path / "google-chrome")
    chromium = executable(tmp_path / "chromium")
    assert find_chromium("", path=str(tmp_path)) == chromium


def test_every_launch_keeps_the_browser_off_the_network_on_its_own():
    flags = " ".join(CHROMIUM_ARGS)
    for flag in ("--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
                 "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>", "--headless"):
        assert flag in flags
    assert "--user-data-dir" not in flags  # Playwright gives every launch a fresh one
