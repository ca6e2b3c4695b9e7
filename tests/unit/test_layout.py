"""The layout is the design: pure policy in ``squall.policy``, checked by reading its imports and calls.

A policy module may import the standard library's pure parts, the parsing
libraries it is built on, ``squall.errors`` and other ``squall.policy``
modules (and, under ``if TYPE_CHECKING:`` only, :class:`squall.settings.Settings`
for its annotations: such an import never runs) — never Faust, aiohttp, aiokafka, argparse, files, sockets,
processes or the clock ("no pure-policy module imports I/O, Faust,
argparse or reads the clock"). The clock and randomness come in as
arguments.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
POLICY = sorted((ROOT / "squall" / "policy").glob("*.py"))

# Top-level modules no policy module may import.
FORBIDDEN_IMPORTS = {
    "faust", "mode", "aiohttp", "aiokafka", "yarl", "multidict", "playwright", "rocksdict", "yaml", "warcio",
    "prometheus_client", "rich", "argparse", "asyncio", "socket", "ssl", "subprocess", "os", "pathlib", "shutil",
    "signal", "time", "logging", "sys", "tempfile", "glob", "select", "selectors", "http", "urllib.request",
    "requests", "concurrent",
}
# Calls that read the clock, files or the process's randomness.
FORBIDDEN_CALLS = {
    ("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"),
    ("random", "random"), ("random", "randint"), ("random", "uniform"), ("random", "choice"), ("random", "shuffle"),
    ("random", "seed"),
}
FORBIDDEN_NAMES = {"open", "input", "print", "breakpoint"}


def _type_only(tree: ast.Module) -> set[int]:
    """Ids of the import nodes under ``if TYPE_CHECKING:`` (never run: annotations only)."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            found.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return found


def _imports(tree: ast.Module) -> list[str]:
    names: list[str] = []
    type_only = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _violations(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for name in _imports(tree):
        top = name.split(".")[0]
        if top in FORBIDDEN_IMPORTS or name in FORBIDDEN_IMPORTS:
            found.append(f"imports {name}")
        elif top == "squall" and not (name == "squall.errors" or name.startswith("squall.policy")):
            found.append(f"imports {name} (outside squall.policy)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FORBIDDEN_NAMES:
                found.append(f"calls {func.id}() at line {node.lineno}")
            elif isinstance(func, ast.Attribute):
                owner = func.value
                owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
                if (owner_name, func.attr) in FORBIDDEN_CALLS:
                    found.append(f"calls {owner_name}.{func.attr}() at line {node.lineno}")
    return found


def test_the_policy_package_has_its_modules() -> None:
    assert len(POLICY) > 20, POLICY


@pytest.mark.parametrize("path", POLICY, ids=lambda p: p.stem)
def test_a_policy_module_does_no_io_and_reads_no_clock(path: pathlib.Path) -> None:
    assert _violations(path) == []


def test_the_checker_catches_io_and_clock_reads(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import time\nimport aiohttp\nfrom squall.net.http import HttpFetcher\n"
                   "import datetime\n\ndef f():\n    open('x')\n    return datetime.datetime.now()\n")
    assert _violations(bad) == [
        "imports time", "imports aiohttp", "imports squall.net.http (outside squall.policy)",
        "calls open() at line 7", "calls datetime.now() at line 8",
    ]


def test_agents_import_no_tooling_or_command_line() -> None:
    for path in sorted((ROOT / "agents").glob("*.py")) + sorted((ROOT / "topology").glob("*.py")):
        tree = ast.parse(path.read_text())
        bad = [n for n in _imports(tree) if n.startswith(("squall.tools", "squall.cli")) or n == "argparse"]
        assert bad == [], f"{path.name}: {bad}"


def test_the_architecture_page_names_every_module_and_no_gone_one() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    rooms = ("policy", "net", "worker", "tools", "cli", "settings")
    modules = {p.stem for room in rooms for p in (ROOT / "squall" / room).glob("*.py") if p.stem != "__init__"}
    agents = {p.stem for p in (ROOT / "agents").glob("*.py") if p.stem != "__init__"}
    missing = sorted(m for m in modules | agents if f"`{m}`" not in page and f"/{m}`" not in page)
    assert missing == [], f"docs/architecture.md does not name: {missing}"
    import re

    named = set(re.findall(r"`(?:policy|net|worker|tools|cli|settings|agents)/(\w+)`", page))
    assert named <= modules | agents, f"docs/architecture.md names gone modules: {sorted(named - modules - agents)}"


def test_an_import_for_annotations_only_is_not_an_import(tmp_path: pathlib.Path) -> None:
    module = tmp_path / "typed.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from squall.settings import Settings\n"
                      "import os\n")
    assert _violations(module) == ["imports os"]


def test_every_cited_invariant_exists_on_the_architecture_page() -> None:
    import re

    page = (ROOT / "docs" / "architecture.md").read_text()
    listed = {int(n) for n in re.findall(r"^(\d+)\. \*\*", page.split("## Invariants", 1)[1].split("\n## ", 1)[0], re.M)}
    assert listed == set(range(1, 8))
    cited: set[int] = set()
    for path in [*ROOT.glob("squall/**/*.py"), *ROOT.glob("agents/*.py"), *ROOT.glob("topology/*.py"),
                 *ROOT.glob("tests/**/*.py"), ROOT / "README.md", *ROOT.glob("docs/*.md")]:
        text = path.read_text()
        assert "ARCHITECTURE" + ".md" not in text, f"{path}: cites a file not in the repository"
        for group in re.findall(r"docs/architecture\.md invariants? ([\d, and]+)", text):
            cited |= {int(n) for n in re.findall(r"\d+", group)}
    assert cited and cited <= listed, sorted(cited - listed)
