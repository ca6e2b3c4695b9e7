"""Print the configuration table of docs/configuration.md from config/crawler-default.yaml (comments included).

    .venv/bin/python scripts/config_table.py > /tmp/keys.md   # scripts/update_config_doc.py writes it in place
"""

from __future__ import annotations

import re
from pathlib import Path

DEFAULTS = Path(__file__).resolve().parent.parent / "config" / "crawler-default.yaml"


def rows(text: str) -> list[tuple[str | None, str, str, str]]:
    """(section, key, default, comment) for every key; a key shares the comment of the keys right above it."""
    out: list[tuple[str | None, str, str, str]] = []
    block: list[str] = []
    section: str | None = None
    last_was_key = False
    for line in text.splitlines():
        if line.startswith("# ----"):
            section, block, last_was_key = line.strip("# -").strip(), [], False
        elif line.startswith("#"):
            if last_was_key:
                block = []
            block.append(line[1:].strip())
            last_was_key = False
        elif (m := re.match(r"^([\w.\-]+):\s*(.*)$", line)):
            out.append((section, m.group(1), m.group(2), " ".join(block)))
            last_was_key = True
    return out


def main() -> None:
    current = None
    for section, key, default, comment in rows(DEFAULTS.read_text(encoding="utf-8")):
        if section is None:
            continue
        if section != current:
            print(f"\n**{section}**\n\n| key | default | meaning |\n|---|---|---|")
            current = section
        print(f"| `{key}` | `{default}` | {comment.replace('|', '/')} |")


if __name__ == "__main__":
    main()
