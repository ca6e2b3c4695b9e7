"""Tests of squall.errors: the exceptions that carry a reason carry a Reason member, never free text."""

from __future__ import annotations

import ast
import pathlib

import pytest

from squall.errors import BlockedAddress, FetchError, InvalidURL
from squall.policy.reasons import Reason

ROOT = pathlib.Path(__file__).resolve().parents[2]
CARRIERS = ("InvalidURL", "FetchError", "BlockedAddress")
# arguments that are not a literal member: a reason passed on as it came, or a function typed "-> Reason"
PASSED_ON = ("reason", "exc.reason", "_answer_reason(result.status)")


def _reason_arguments(source: str) -> list[tuple[int, str]]:
    """(line, source) of the first argument of every InvalidURL/FetchError/BlockedAddress call in ``source``."""
    return [(node.lineno, ast.unparse(node.args[0] if node.args else node.keywords[0].value))
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CARRIERS]


def _free_text(arguments: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [(line, arg) for line, arg in arguments
            if not (arg.startswith("Reason.") and arg[len("Reason."):] in Reason.__members__) and arg not in PASSED_ON]


def test_every_raise_site_names_a_reason_member():
    files = [*(ROOT / "squall").rglob("*.py"), *(ROOT / "agents").glob("*.py")]
    found = {str(f.relative_to(ROOT)): _reason_arguments(f.read_text()) for f in files}
    assert sum(map(len, found.values())) > 20, "the scan finds the raise sites"
    assert {name: _free_text(args) for name, args in found.items() if _free_text(args)} == {}


def test_the_scan_refuses_free_text_and_unknown_members():
    source = 'raise FetchError("http.404", "x")\nraise InvalidURL(Reason.URL_NOPE, u)\nraise InvalidURL(Reason.URL_HOST)'
    assert _free_text(_reason_arguments(source)) == [(1, "'http.404'"), (2, "Reason.URL_NOPE")]


@pytest.mark.parametrize(("exc", "text"), [
    (InvalidURL(Reason.URL_HOST, "http://a b/"), "url.host: 'http://a b/'"),
    (FetchError(Reason.FETCH_DNS, "a.example: no address"), "fetch.dns: a.example: no address"),
    (BlockedAddress(Reason.FETCH_BLOCKED_ADDRESS), "fetch.blocked_address"),
])
def test_the_message_for_people_shows_the_reason_value(exc, text):
    assert str(exc) == text
    assert isinstance(exc.reason, Reason)
