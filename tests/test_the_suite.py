"""The suite's own machinery: a module of tests defines each name once, and a test marked for a system this one is
not (posix, linux, netns) is skipped with the reason rather than run."""

from __future__ import annotations

import ast
from pathlib import Path

import conftest

TESTS = Path(__file__).resolve().parent


def test_no_module_of_the_suite_defines_a_function_or_class_twice():
    """A second definition hides the first: a second test of the same name never runs, and conftest.py's second
    ``pytest_collection_modifyitems`` once hid the one that skips a posix/linux/netns test where it cannot run
    (ruff's F811 is off for tests/, where a fixture argument shadows its import)."""
    twice = {}
    for p in sorted(TESTS.rglob("*.py")):
        body = ast.parse(p.read_text(encoding="utf-8")).body
        names = [n.name for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            twice[p.relative_to(TESTS).as_posix()] = dup
    assert not twice, twice


class _Item:
    def __init__(self, marks: set[str]) -> None:
        self.marks, self.added = marks, []

    def get_closest_marker(self, name: str) -> object | None:
        return object() if name in self.marks else None

    def add_marker(self, mark) -> None:
        self.added.append(mark)

    def iter_markers(self, name: str) -> list:
        return []


def test_a_test_marked_for_another_system_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setitem(conftest._NEEDS, "netns", (lambda: False, "needs Linux, root and network namespaces"))
    monkeypatch.setitem(conftest._NEEDS, "posix", (lambda: True, "needs POSIX"))
    netns, posix, plain = _Item({"netns"}), _Item({"posix"}), _Item(set())
    conftest.pytest_collection_modifyitems(None, [netns, posix, plain])
    assert [m.mark.name for m in netns.added] == ["skip"]
    assert netns.added[0].mark.kwargs["reason"] == "needs Linux, root and network namespaces"
    assert posix.added == [] and plain.added == []
