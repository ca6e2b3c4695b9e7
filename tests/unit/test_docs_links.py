"""The README and the docs/ pages hold together: links resolve, every page is linked, commands parse.

* A relative link ``[text](path)``, ``[text](path#anchor)`` or ``[text](#anchor)`` in README.md or
  docs/*.md names a file that exists and, with an anchor, a heading of that Markdown file
  (GitHub's heading slugs: lower case, punctuation dropped, spaces to hyphens, ``-1`` for a repeat).
* Every docs/*.md page is linked from the README; the README stays under 300 lines.
* The README's test command (``make test``) is the one ``.ci/run`` runs.
* Every ``squall ...`` line inside a code block of the README or a page is accepted by squall's own
  argument parser (a renamed command or option fails here, not at a reader's terminal).
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from squall.cli.main import build_parser
from squall.settings import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks, inline code spans blanked."""
    out, fenced = [], False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((n, re.sub(r"`[^`]*`", "``", line)))
    return out


def _shell_lines(text: str) -> list[tuple[int, str]]:
    """(line number, command) of the commands in ```bash / ```sh blocks and the ``$ `` lines of ```console blocks."""
    out, lang = [], None
    for n, line in enumerate(text.splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            lang = None if lang is not None else (line.strip().strip("`~").strip() or "text")
        elif lang in ("bash", "sh", "shell"):
            out.append((n, line))
        elif lang == "console" and line.startswith("$ "):
            out.append((n, line[2:]))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: ``Shared servers (`partition.url.mode: byIP`)`` → ``shared-servers-partitionurlmode-byip``."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file (repeats numbered as GitHub does)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            count = seen.get(base, 0)
            out.add(base if count == 0 else f"{base}-{count}")
            seen[base] = count + 1
    return out


def dangling(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: target`` (file relative to ``root``) for every relative link of ``path`` whose file or anchor is missing."""
    text = path.read_text(encoding="utf-8")
    bad = []
    for n, line in _prose(text):
        for m in _LINK.finditer(line):
            target = m.group(1) or m.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, ...
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{n}: {target}"
            if not dest.exists():
                bad.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                bad.append(f"{where} (no heading with that anchor)")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_and_a_heading(page: Path) -> None:
    assert not dangling(page)


def test_a_dangling_link_or_anchor_is_found(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text(
        "# Title\n\n## Shared servers (`partition.url.mode: byIP`)\n## Again\n## Again\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](there.md) [ok](there.md#shared-servers-partitionurlmode-byip) [ok](there.md#again-1)\n"
        "[gone](missing.md) [bad](there.md#nowhere) [self](#title)\n"
        "```\n[in code](not-checked.md)\n```\n`[inline](not-checked.md)` [web](https://example.org/x)\n"
    )
    assert dangling(page, root=tmp_path) == [
        "page.md:2: missing.md (no such file)",
        "page.md:2: there.md#nowhere (no heading with that anchor)",
        "page.md:2: #title (no heading with that anchor)",
    ]


def test_every_docs_page_is_linked_from_the_readme_and_the_readme_stays_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    linked = {m.group(1).partition("#")[0] for m in re.finditer(r"\]\((docs/[^)\s]+)\)", readme)}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set()
    assert len(readme.splitlines()) <= 300


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Tests\n\n```bash\nmake test\n```" in readme
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert re.search(r"^make test\b", ci, re.M)


def _squall_commands(path: Path) -> list[tuple[int, list[str]]]:
    out = []
    for n, line in _shell_lines(path.read_text(encoding="utf-8")):
        line = re.sub(r"^(\s*\w+=\S+\s+)+", "", line)  # VAR=value prefixes
        line = re.sub(r"^\s*(\.venv/bin/)?", "", line)
        if not line.startswith("squall "):
            continue
        words = shlex.split(line, comments=True)
        for stop in ("|", "&", "&&", ";", ">"):
            if stop in words:
                words = words[: words.index(stop)]
        out.append((n, words[1:]))
    return out


def test_every_squall_command_in_a_code_block_parses() -> None:
    parser = build_parser()
    bad, seen = [], 0
    for page in PAGES:
        for n, argv in _squall_commands(page):
            seen += 1
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    parser.parse_args(argv)
            except SystemExit:
                bad.append(f"{page.relative_to(ROOT)}:{n}: squall {' '.join(argv)}: {err.getvalue().strip()}")
    assert seen > 10
    assert not bad, "\n".join(bad)
