"""Rewrite the configuration table of docs/configuration.md from config/crawler-default.yaml (scripts/config_table.py).

    .venv/bin/python scripts/update_config_doc.py
"""

from __future__ import annotations

import contextlib
import io
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START = "**Kafka / topology**"


def main() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(ROOT / "scripts" / "config_table.py"), run_name="__main__")
    readme_path = ROOT / "docs" / "configuration.md"
    readme = readme_path.read_text(encoding="utf-8")
    start = readme.index(START)
    end = readme.find("\n## ", start)
    table = out.getvalue().lstrip("\n")
    readme_path.write_text(readme[:start] + table + (readme[end:] if end != -1 else ""), encoding="utf-8")


if __name__ == "__main__":
    main()
