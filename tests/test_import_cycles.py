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
    assert "stackdoctor.core.texts" in imports("stackdoctor.rules.core", MODULES["stackdoctor.rules.core"])


# Circles allowed in the package: none (issue 31 closed the last two: install/flow's upward import of render/plan's
# format_command, now in shell.py, and leftovers' TYPE_CHECKING import of backup.Snapshot, now a Protocol). Adding
# one here needs a reason written beside it.
KNOWN_CIRCLES: frozenset[frozenset[str]] = frozenset()


def test_the_walker_counts_type_checking_imports():
    assert "stackdoctor.install.flow" in imports("stackdoctor.render.plans", MODULES["stackdoctor.render.plans"])


def test_no_import_cycle_in_the_package():
    graph = {name: imports(name, path) for name, path in MODULES.items()}
    assert len(graph) > 50 and sum(map(len, graph.values())) > 100  # it did read the package
    found = {frozenset(c) for c in cycles(graph)}
    new = [sorted(c) for c in found - KNOWN_CIRCLES]
    gone = [sorted(c) for c in KNOWN_CIRCLES - found]
    assert not new, f"new import circle(s): {new}"
    assert not gone, f"circle(s) no longer there: remove them from KNOWN_CIRCLES: {gone}"


def private_imports(name: str, path: Path) -> set[tuple[str, str]]:
    """(module, name) for every private name ``name`` takes from another module of the package: ``from m import _x``
    and ``m._x`` on a module it imported (a private module, ``_schema``, is a module and not a name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    modules: dict[str, str] = {}  # local name -> the package's module it is bound to
    out: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update({a.asname or a.name: a.name for a in node.names if a.name in MODULES})
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            if base not in MODULES:
                continue
            for a in node.names:
                if f"{base}.{a.name}" in MODULES:
                    modules[a.asname or a.name] = f"{base}.{a.name}"
                elif _private(a.name) and base != name:
                    out.add((base, a.name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            bound = modules.get(ast.unparse(node.value))
            if bound is not None and bound != name:
                out.add((bound, node.attr))
    return out


def _private(n: str) -> bool:
    return n.startswith("_") and not n.startswith("__")


def _short(module: str) -> str:
    return module.rsplit(".", 1)[-1]


# Private names taken across modules on 2 December (issue 31, main as merged then), none from a file of the
# probes/OS-boundary floor: (importer,
# module, name), each module by its last dotted part so that moving a file into a package does not make its entry
# stale. Fixing one (make the name public, or move the code to where it is used) means removing it here.
KNOWN_PRIVATE_IMPORTS: frozenset[tuple[str, str, str]] = frozenset()  # none left (issue 31: every name used across modules is public)


def test_the_private_name_walker_sees_both_forms(tmp_path):
    src = tmp_path / "fake.py"
    src.write_text(
        "from stackdoctor.core.texts import _x, t\nfrom stackdoctor import system, _schema\nfrom . import _z\n"
        "import stackdoctor.core.units as u\nsystem._y(u._w, t._not_a_module, _schema.SCHEMA)\n"
    )
    assert private_imports("stackdoctor.fake", src) == {
        ("stackdoctor.core.texts", "_x"), ("stackdoctor.system", "_y"), ("stackdoctor", "_z"), ("stackdoctor.core.units", "_w"),
    }
    # the form the last real cases had (resolve/availability took install/index's _wheel_parts until issue 31)
    old = tmp_path / "availability.py"
    old.write_text("from stackdoctor.wheels.index import _wheel_parts, wheel_parts\n")
    assert private_imports("stackdoctor.resolve.availability", old) == {("stackdoctor.wheels.index", "_wheel_parts")}


def test_no_module_takes_another_modules_private_name():
    found = {(_short(name), _short(m), n) for name, path in MODULES.items() for m, n in private_imports(name, path)}
    new = sorted(found - KNOWN_PRIVATE_IMPORTS)
    gone = sorted(KNOWN_PRIVATE_IMPORTS - found)
    assert not new, f"private name(s) taken from another module (make them public): {new}"
    assert not gone, f"no longer taken: remove them from KNOWN_PRIVATE_IMPORTS: {gone}"
