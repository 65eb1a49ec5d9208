"""The package's modules import one another without a circle (issues 25 and 31): read from the source, every
import counted, the lazy ones inside functions too (a lazy import only hides a circle until that function runs)
and the ``TYPE_CHECKING`` ones (a circle the type checker sees is still two modules that each need the other);
``_worker/`` runs in the target interpreter and imports nothing of the package.

The circles that are there today are listed in ``KNOWN_CIRCLES`` with who fixes them: any other circle fails, and
so does a listed one that is gone (remove it from the list), so the list only shrinks."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "stackdoctor"


def _name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_name(p): p for p in PKG.rglob("*.py") if "_worker" not in p.parts}


def imports(name: str, path: Path) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its source (``from pkg import mod`` is ``pkg.mod``)."""
    out: set[str] = set()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    base = ".".join(package[: len(package) - child.level + 1] + ([base] if base else []))
                for a in child.names:
                    out.add(f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base)
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in out if m in MODULES and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_the_walker_sees_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert "stackdoctor.texts" in imports("stackdoctor.rules.core", MODULES["stackdoctor.rules.core"])


# Circles in today's package, each closed only by a ``TYPE_CHECKING`` import (issue 31), none in a file of the
# probes/OS-boundary floor. Each names whoever owns the files that close it; fixing one means removing it here.
KNOWN_CIRCLES = frozenset({
    # install_flow imports render/plan's format_command inside a function (an upward arrow) and render/plan
    # types its input with install_flow's InstallOutcome under TYPE_CHECKING: owner `install` (install_flow.py).
    frozenset({"stackdoctor.install_flow", "stackdoctor.render.plan"}),
    # model imports pure's parsers and types with tables' Table under TYPE_CHECKING, pure types with model's
    # CudaRow/Variant under TYPE_CHECKING, tables imports both: owner the lead (matrix/ has no helper in issue 31).
    frozenset({"stackdoctor.matrix.model", "stackdoctor.matrix.pure", "stackdoctor.matrix.tables"}),
})


def test_the_walker_counts_type_checking_imports():
    assert "stackdoctor.install_flow" in imports("stackdoctor.render.plan", MODULES["stackdoctor.render.plan"])


def test_no_import_cycle_in_the_package():
    graph = {name: imports(name, path) for name, path in MODULES.items()}
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # it did read the package
    found = {frozenset(c) for c in cycles(graph)}
    new = [sorted(c) for c in found - KNOWN_CIRCLES]
    gone = [sorted(c) for c in KNOWN_CIRCLES - found]
    assert not new, f"new import circle(s): {new}"
    assert not gone, f"circle(s) no longer there: remove them from KNOWN_CIRCLES: {gone}"
