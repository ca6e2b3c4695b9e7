"""The agents layer reads like a house a newcomer can move into: modules that import alone, no agent
reaching into another, no module-level state, and short modules and functions.

Definitions (checked on the source with :mod:`ast`, no import needed):

* an **agent module** is a module of ``agents/`` that registers something on the Faust app: a
  decorator ``@app.agent``, ``@app.timer``, ``@app.page``, ``@app.task`` or ``@app.crontab``, or a
  signal receiver ``@app.on_<signal>.connect``. Every other module of ``agents/`` is a **helper**;
* **module-level state** is a name bound at the top level of a module (also inside a top-level
  ``if``/``try``) to a dict, list or set display or comprehension, or to a call (an instance),
  except a logger (``logging.getLogger``). Such an object lives on the app instead, created on first use
  (``app.squall_fetch_runtime``, ``app.squall_worker_state``, … behind an accessor).
"""

from __future__ import annotations

import ast
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
AGENTS = sorted(p for p in (ROOT / "agents").glob("*.py") if p.stem != "__init__")
REGISTERS = {"agent", "timer", "page", "task", "crontab"}

MAX_FETCHER_LINES = 300
MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 40


def _module_name(path: pathlib.Path) -> str:
    return f"agents.{path.stem}"


def _is_agent_module(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for deco in node.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            if not isinstance(target, ast.Attribute):
                continue
            if isinstance(target.value, ast.Name) and target.value.id == "app" and target.attr in REGISTERS:
                return True
            inner = target.value
            if (
                target.attr == "connect"
                and isinstance(inner, ast.Attribute)
                and isinstance(inner.value, ast.Name)
                and inner.value.id == "app"
                and inner.attr.startswith("on_")
            ):
                return True
    return False


def _agent_imports(tree: ast.Module) -> set[str]:
    """The ``agents.*`` modules a module imports anywhere in its body (function-level imports included)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("agents.")}
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            if node.module == "agents":
                found |= {f"agents.{a.name}" for a in node.names}
            elif node.module.startswith("agents."):
                found.add(node.module)
    return found


def _trees() -> dict[str, ast.Module]:
    return {_module_name(p): ast.parse(p.read_text(encoding="utf-8")) for p in AGENTS}


def _top_level_bindings(tree: ast.Module) -> list[tuple[str, ast.expr]]:
    out: list[tuple[str, ast.expr]] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Assign):
                out.extend((t.id, node.value) for t in node.targets if isinstance(t, ast.Name))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                out.append((node.target.id, node.value))
            elif isinstance(node, ast.If):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)

    visit(tree.body)
    return out


def _is_state(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)):
        return True
    if isinstance(value, ast.Call):
        func = value.func
        return not (isinstance(func, ast.Attribute) and func.attr == "getLogger")
    return False


def agent_modules() -> set[str]:
    return {name for name, tree in _trees().items() if _is_agent_module(tree)}


@pytest.mark.parametrize("path", AGENTS, ids=lambda p: p.stem)
def test_every_agents_module_imports_alone_in_a_fresh_interpreter(path: pathlib.Path) -> None:
    env = dict(os.environ)
    env.pop("KAFKA_BOOTSTRAP_SERVERS", None)
    done = subprocess.run(
        [sys.executable, "-c", f"import {_module_name(path)}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_layout_knows_the_agent_modules_from_the_helpers() -> None:
    found = agent_modules()
    assert {"agents.fetcher", "agents.spout", "agents.regulator", "agents.status_updater"} <= found
    assert "agents.common" not in found and "agents.queues" not in found


def test_no_agent_module_imports_another_agent_module_and_no_helper_imports_one() -> None:
    agents = agent_modules()
    wrong = {
        name: sorted((_agent_imports(tree) & agents) - {name})
        for name, tree in _trees().items()
        if (_agent_imports(tree) & agents) - {name}
    }
    assert wrong == {}, f"modules importing an agent module: {wrong}"


def test_the_checker_sees_an_agent_module_and_its_imports() -> None:
    tree = ast.parse(
        "from agents import fetcher\nimport agents.spout\n"
        "@app.agent(topic)\nasync def a(stream): ...\n"
        "@app.on_rebalance_complete.connect\nasync def b(sender, **kw): ...\n"
    )
    assert _is_agent_module(tree)
    assert _agent_imports(tree) == {"agents.fetcher", "agents.spout"}
    assert not _is_agent_module(ast.parse("def helper(): ...\n"))


def test_no_module_level_state_in_agents() -> None:
    held = {
        (name.removeprefix("agents."), bound)
        for name, tree in _trees().items()
        for bound, value in _top_level_bindings(tree)
        if _is_state(value)
    }
    assert held == set(), f"module-level state (put it on an object the app holds, made on first use): {held}"


def test_the_state_checker_tells_state_from_constants() -> None:
    tree = ast.parse(
        "import logging\nlog = logging.getLogger('x')\nN = 3\nNAMES = ('a', 'b')\n"
        "seen = {}\nif N:\n    cache = Cache()\n"
    )
    assert [n for n, v in _top_level_bindings(tree) if _is_state(v)] == ["seen", "cache"]


def test_the_fetcher_agent_is_at_most_300_lines() -> None:
    lines = len((ROOT / "agents" / "fetcher.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_FETCHER_LINES, f"agents/fetcher.py has {lines} lines"


GENERATED = {ROOT / "squall" / "settings" / "fields.py"}  # written by scripts/gen_settings_fields.py
MODULES = sorted(
    p
    for p in [
        *AGENTS,
        *(ROOT / "topology").glob("*.py"),
        *(ROOT / "squall").rglob("*.py"),
        *(ROOT / "benchmarks").glob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        *(ROOT / "scripts").glob("*.py"),
    ]
    if p not in GENERATED
)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_over_450_lines_and_no_agent_function_over_40(path: pathlib.Path) -> None:
    source = path.read_text(encoding="utf-8")
    assert len(source.splitlines()) <= MAX_MODULE_LINES, f"{path.relative_to(ROOT)}: split it by concept"
    if path.parent != ROOT / "agents":  # the agent function limit is for agents/, not tests/agents/
        return
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []
