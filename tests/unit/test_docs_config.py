"""docs/configuration.md documents every configuration key of config/crawler-default.yaml with its default value."""

from __future__ import annotations

import importlib.util

import yaml

from squall.settings import DEFAULTS_FILE, ROOT

_spec = importlib.util.spec_from_file_location("config_table", ROOT / "scripts" / "config_table.py")
assert _spec is not None and _spec.loader is not None
config_table = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(config_table)


def test_every_default_key_appears_in_the_configuration_page_with_its_default_value():
    readme = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    text = DEFAULTS_FILE.read_text(encoding="utf-8")
    rows = config_table.rows(text)
    assert {key for _section, key, _default, _comment in rows} == set(yaml.safe_load(text))
    wrong = [f"{key} = {default}" for _section, key, default, _comment in rows
             if f"| `{key}` | `{default}` |" not in readme]
    assert not wrong, ("docs/configuration.md lacks these keys or states another default "
                       f"(regenerate its table with scripts/update_config_doc.py): {wrong}")
