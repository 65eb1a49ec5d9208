"""The package's shape (issue 31): no function over cyclomatic complexity 25 or 100 lines, no file over 800 lines,
and vendor branches only inside ``accelerators/`` and ``probes/``.

Read from the source (radon for complexity, ``ast`` for the rest). What the package still holds beyond a limit is
listed in ``tests/structure/baseline.json`` with today's figure: a listed item may only shrink, an unlisted one may
not pass the limit, and an entry that is back under its limit (or gone) must be removed from the list, so the list
is the work left and never grows. A vendor branch is an ``if``/``elif``/conditional expression/comprehension
filter/``case``, or a condition assigned to a name (``is_cuda = v.startswith("cu")``, read by an ``if`` later), whose
test compares with, or calls ``startswith``/``endswith`` on, a literal naming an accelerator
kind, vendor, variant or collective backend (``"nvidia"``, ``"rocm"``, ``"cu"``, ``"cu126"``, ``"mps"``,
``"nccl"`` ...): the kind's own module should answer instead (``stackdoctor.accelerators``). A branch that has
to stay outside says why on its line with a ``# vendor branch:`` comment and still counts. A comparison with
``accelerators.CPU`` (the build no accelerator kind needs, and its index variant's name) is not one: the CPU is no
kind whose module could answer, and the seam names it once."""

from __future__ import annotations

import ast
import functools
import json
import re
from pathlib import Path

import pytest
from radon.complexity import cc_visit

PKG = Path(__file__).resolve().parent.parent / "stackdoctor"
BASELINE = Path(__file__).resolve().parent / "structure" / "baseline.json"
MAX_COMPLEXITY = 25
MAX_FUNCTION_LINES = 100
MAX_FILE_LINES = 800
MAX_VENDOR_BRANCHES = 10  # the goal, outside accelerators/ and probes/ (issue 31)

KIND_WORDS = frozenset({
    "nvidia", "amd", "intel", "apple", "jetson", "rocm", "cuda", "cu", "xpu", "mps", "npu", "ascend", "hip", "cpu",
    "metal", "nccl", "hccl", "rccl", "xccl", "gloo",
})
_VARIANT = re.compile(r"(cu|rocm)\d[\d.]*")


def _files() -> list[Path]:
    return sorted(PKG.rglob("*.py"))


def _rel(p: Path) -> str:
    return p.relative_to(PKG).as_posix()


def functions() -> dict[str, tuple[int, int]]:
    """``file:qualname`` -> (cyclomatic complexity, lines) for every function, method and nested function."""
    out: dict[str, tuple[int, int]] = {}

    def add(rel: str, block: object, prefix: str) -> None:
        name = prefix + block.name  # type: ignore[attr-defined]
        out[f"{rel}:{name}"] = (block.complexity, block.endline - block.lineno + 1)  # type: ignore[attr-defined]
        for c in getattr(block, "closures", []):
            add(rel, c, name + ".")

    for p in _files():
        rel = _rel(p)
        for b in cc_visit(p.read_text(encoding="utf-8")):
            if hasattr(b, "methods"):
                for m in b.methods:
                    add(rel, m, b.name + ".")
            else:
                add(rel, b, "")
    return out


def _kind_literal(node: ast.AST) -> bool:
    return any(
        isinstance(m, ast.Constant) and isinstance(m.value, str) and (m.value.lower() in KIND_WORDS or _VARIANT.fullmatch(m.value.lower()) is not None)
        for m in ast.walk(node)
    )


def _vendor_test(test: ast.AST) -> bool:
    for n in ast.walk(test):
        if isinstance(n, ast.Compare) and any(_kind_literal(c) for c in (n.left, *n.comparators)):
            return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("startswith", "endswith") and any(_kind_literal(a) for a in n.args):
            return True
        if isinstance(n, ast.MatchValue) and _kind_literal(n.value):
            return True
    return False


def vendor_branches(source: str) -> list[int]:
    """The line of every vendor branch in one module's source (one per line): a test written in an ``if``, a
    conditional expression, a comprehension filter or a ``case``, and a condition assigned to a name
    (``is_cuda = variant.startswith("cu")``), which an ``if`` then reads."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        tests: list[ast.AST] = []
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            tests = [node.test]
        elif isinstance(node, ast.comprehension):
            tests = list(node.ifs)
        elif isinstance(node, ast.match_case):
            tests = [node.pattern]
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            tests = [node.value]
        lines.update(node.lineno if hasattr(node, "lineno") else t.lineno for t in tests if _vendor_test(t))  # type: ignore[attr-defined]
    return sorted(lines)


def outside_the_seam() -> dict[str, list[int]]:
    out = {}
    for p in _files():
        if _rel(p).split("/")[0] in ("accelerators", "kinds", "probes"):
            continue
        found = vendor_branches(p.read_text(encoding="utf-8"))
        if found:
            out[_rel(p)] = found
    return out


@functools.cache  # one read of the source for the four tests that ask (radon's pass is the cost)
def measure() -> dict[str, dict[str, int]]:
    fns = functions()
    return {
        "complexity": {k: c for k, (c, _) in fns.items() if c > MAX_COMPLEXITY},
        "function_lines": {k: n for k, (_, n) in fns.items() if n > MAX_FUNCTION_LINES},
        "file_lines": {_rel(p): n for p in _files() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES},
        "vendor_branches": {k: len(v) for k, v in outside_the_seam().items()},
    }


def _baseline() -> dict[str, dict[str, int]]:
    return json.loads(BASELINE.read_text(encoding="utf-8"))


def _compare(kind: str, now: dict[str, int], listed: dict[str, int]) -> list[str]:
    problems = [f"{k}: {v} (limit; not in the baseline, which may not grow)" for k, v in now.items() if k not in listed]
    problems += [f"{k}: {now[k]}, more than the baseline's {listed[k]}" for k in now if k in listed and now[k] > listed[k]]
    problems += [f"{k}: back under the limit (or gone): remove it from tests/structure/baseline.json" for k in listed if k not in now]
    return [f"{kind} {p}" for p in problems]


@pytest.mark.parametrize("kind", ["complexity", "function_lines", "file_lines"])
def test_no_function_or_file_passes_its_limit_beyond_the_baseline(kind):
    problems = _compare(kind, measure()[kind], _baseline()[kind])
    assert not problems, "\n".join(problems)


def test_vendor_branches_stay_in_the_seam():
    counts = measure()["vendor_branches"]
    listed = _baseline()["vendor_branches"]
    problems = [f"vendor branches in {k}: {v}, more than the baseline's {listed.get(k, 0)}" for k, v in counts.items() if v > listed.get(k, 0)]
    problems += [f"vendor branches in {k}: {counts.get(k, 0)} now, the baseline says {v}: lower it" for k, v in listed.items() if counts.get(k, 0) < v]
    assert not problems, "\n".join(problems)


def test_at_most_ten_vendor_branches_outside_the_seam_each_saying_why():
    """Issue 31's goal: at most 10 vendor branches outside ``accelerators/`` and ``probes/``, each with a ``# vendor
    branch:`` comment on its line saying why the kind's own module cannot answer there."""
    found = outside_the_seam()
    total = sum(len(v) for v in found.values())
    assert total <= MAX_VENDOR_BRANCHES, f"{total} vendor branches outside the seam (at most {MAX_VENDOR_BRANCHES}): {found}"
    silent = [f"{f}:{n}" for f, lines in found.items() for n in lines
              if "# vendor branch:" not in (PKG / f).read_text(encoding="utf-8").splitlines()[n - 1]]
    assert not silent, "vendor branches without a '# vendor branch:' comment saying why: " + ", ".join(silent)


def test_the_counters_see_what_they_count():
    src = 'def f(x, v):\n    if x == "nvidia":\n        return 1\n    y = [a for a in v if a.startswith("cu")]\n    return 2 if v in ("rocm", "x") else 3\n'
    assert vendor_branches(src) == [2, 4, 5]
    assigned = 'def f(v, t):\n    is_cuda = v.startswith("cu")\n    gpu: bool = t == "rocm"\n    if (mps := t == "mps") and is_cuda:\n        return gpu\n    n = {"cuda": 1}\n'
    assert vendor_branches(assigned) == [2, 3, 4]  # a table naming a kind is no branch
    assert vendor_branches('def f(x):\n    if x == "linux":\n        return 1\n') == []
    assert vendor_branches('def f(v):\n    match v:\n        case "cu126":\n            return 1\n') == [3]


if __name__ == "__main__":  # python tests/test_structure.py: write today's figures as the baseline
    BASELINE.parent.mkdir(exist_ok=True)
    BASELINE.write_text(json.dumps(measure(), indent=1, sort_keys=True) + "\n", encoding="utf-8")


def test_every_package_of_the_source_is_in_the_wheel():
    """pyproject.toml lists the packages one by one: a new sub-package (``stackdoctor/resolve/`` once) left out of it
    imports from a checkout but not from the installed wheel."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]

    listed = set(tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(PKG.parent).parts) for p in PKG.rglob("__init__.py")}
    assert found - listed == set(), f"packages missing from pyproject.toml's [tool.setuptools] packages: {sorted(found - listed)}"
