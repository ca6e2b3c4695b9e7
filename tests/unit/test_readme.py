"""The README documents every configuration key of config/crawler-default.yaml."""

from __future__ import annotations

import yaml

from squall.settings import DEFAULTS_FILE, ROOT


def test_every_default_key_appears_in_the_readme_with_its_default():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    defaults = yaml.safe_load(DEFAULTS_FILE.read_text(encoding="utf-8"))
    missing = [key for key in defaults if f"| `{key}` |" not in readme]
    assert not missing, f"README.md lacks these keys (regenerate its table): {missing}"
