"""The house as a map (issue 45): the package's rooms in the order the data flows through them, read from the source.

A room is a module directly in ``stackdoctor/`` or a folder directly in it. ``LAYERS`` lists them from the ground up;
an import (at the top of a module, inside a function, or under ``TYPE_CHECKING``: each is a module that needs
another) from a room to a room higher on the map runs back up. The ones there today are listed in
``KNOWN_BACK_UP`` with why; any other fails, and a listed one that is gone must be removed, so the list only shrinks.
Issue 45's goal is at most 2. The same holds for the files outside ``accelerators/`` and ``_worker/`` whose code
(names and strings; not comments or docstrings) names a kind: ``KIND_CEILING`` holds today's figures, which may only
fall, beside the goal.

``python tests/test_house.py`` prints the map and every figure: what a reviewer reads before and after a move."""

from __future__ import annotations

import ast
import io
import re
import sys
import tokenize
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_import_cycles import MODULES, PKG, imports  # noqa: E402  (the one import walker)

# From the ground up. A folder's __init__ says its layer in its first line.
LAYERS = (
    "core",  # numbers, words, texts, the console, stackdoctor's own files
    "system",  # every touch of the OS
    "_worker",  # the scripts run in a child interpreter, and the parent's side of their protocol
    "model",  # the typed data every layer passes on
    "binaries",  # files read by their bytes
    "matrix",  # the compatibility matrix
    "kinds",  # the accelerator seam: what a kind is, and the one registry (built-in and plug-in kinds alike)
    "verify",  # real kernels and collectives, run in the target
    "probes",  # the generic probes
    "reconcile",  # every witness joined into the view
    "config",  # a project's requirements
    "wheels",  # where wheels come from and what one says
    "resolve",  # the plan
    "rules",  # the findings
    "accelerators",  # each kind in its own package: its probe, facts' parsing, fit, rules and texts
    "pipeline",  # gather -> reconcile -> judge, for every command
    "install",  # acting on the target: the transaction and the flow above the resolver
    "render",  # every output for people and machines
    "commands",  # one module per command
    "_schema",  # the JSON Schemas, from the types
    "cli",  # options -> command -> exit code
    "__main__",
)

# The imports that run back up today, (importer, imported): none. The kinds register through the seam (kinds/) by
# name as plug-ins do, so the seam sits below them and they above the rules and the resolver they use.
KNOWN_BACK_UP: frozenset[tuple[str, str]] = frozenset()
BACK_UP_GOAL = 2
MAX_TOP_MODULES = 12

# Files outside accelerators/ and _worker/ whose code names a kind (the words below, in a name or a string).
KIND_WORDS = {
    "NVIDIA": r"nvidia|cuda|nvml|jetson|\bcu\d",
    "AMD": r"\bamd(?!64)|rocm|\bhip\b",  # amd64 is a CPU architecture (win_amd64), not the kind
    "Intel": r"intel|\bxpu",
    "Apple": r"apple|\bmps\b|metal",
    "Ascend": r"ascend|\bnpu|\bcann\b|hccl",
}
KIND_GOAL = {"NVIDIA": 15, "AMD": 10, "Intel": 10, "Apple": 8, "Ascend": 0}
KIND_CEILING = {"NVIDIA": 12, "AMD": 8, "Intel": 5, "Apple": 3, "Ascend": 0}  # 2026-12-07; 13, 13, 6, 3, 0 before install's AMD what-if was AMD's declaration (what_if_values, fit_host), install's help texts the kinds' (option_help, variant_examples, build_steps) and the runtime an installed build ran on the driver the driver's kind's answer (initialised_runtime); 62, 48, 27, 16, 0 before the kinds moved into their packages that day (amd64 no longer counted as AMD); 66, 49, 29, 20, 1 at 212a94c


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def back_up() -> set[tuple[str, str]]:
    rank = {r: i for i, r in enumerate(LAYERS)}
    out = set()
    for name, path in MODULES.items():
        for m in imports(name, path):
            a, b = room(name), room(m)
            if a != b and "__init__" not in (a, b) and rank[b] > rank[a]:
                out.add((name, m))
    return out


def top_modules() -> list[str]:
    return sorted(p.name for p in PKG.glob("*.py"))


def code_text(source: str) -> str:
    """A module's names and strings, without its comments and docstrings."""
    docs = {
        n.body[0].lineno
        for n in ast.walk(ast.parse(source))
        if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant) and isinstance(n.body[0].value.value, str)
    }
    toks = tokenize.generate_tokens(io.StringIO(source).readline)
    return " ".join(t.string for t in toks if t.type != tokenize.COMMENT and not (t.type == tokenize.STRING and t.start[0] in docs)).lower()


def naming_kinds() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {k: [] for k in KIND_WORDS}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if rel.parts[0] in ("accelerators", "_worker"):
            continue
        text = code_text(p.read_text(encoding="utf-8"))
        for kind, words in KIND_WORDS.items():
            if re.search(words, text):
                out[kind].append(rel.as_posix())
    return out


def test_every_room_is_on_the_map():
    rooms = {p.stem if p.is_file() else p.name for p in PKG.iterdir() if (p.suffix == ".py" or (p / "__init__.py").is_file())} - {"__init__"}
    assert rooms == set(LAYERS), f"not on the map: {sorted(rooms - set(LAYERS))}; on the map but gone: {sorted(set(LAYERS) - rooms)}"


def test_each_folder_opens_with_one_line_saying_its_layer():
    silent = []
    for p in sorted(PKG.iterdir()):
        init = p / "__init__.py"
        if init.is_file():
            doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
            if not doc.strip() or len(doc.split()) < 6:
                silent.append(p.name)
    assert not silent, f"folders whose __init__ does not open by saying their layer: {silent}"


def test_at_most_twelve_modules_at_the_top():
    assert len(top_modules()) <= MAX_TOP_MODULES, top_modules()


def test_the_walker_sees_an_import_running_back_up():
    ranks = {r: i for i, r in enumerate(LAYERS)}
    assert ranks["core"] < ranks["model"] < ranks["kinds"] < ranks["resolve"] < ranks["accelerators"] < ranks["install"] < ranks["cli"]
    assert ("stackdoctor.accelerators.nvidia.rules", "stackdoctor.rules.core") not in back_up()  # the kinds sit above the rules
    assert ranks["kinds"] < ranks["resolve"] < ranks["rules"] < ranks["accelerators"]


def test_imports_run_back_up_only_where_listed():
    found = back_up()
    new = sorted(found - KNOWN_BACK_UP)
    gone = sorted(KNOWN_BACK_UP - found)
    assert not new, f"import(s) running back up (from a lower room to a higher one on LAYERS): {new}"
    assert not gone, f"no longer there: remove them from KNOWN_BACK_UP: {gone}"


def test_no_two_modules_share_a_name_unless_parallel_kinds_or_commands():
    """A name says what a module is: two modules of one name are the same role in parallel kinds
    (``accelerators/<kind>/probe.py``), or a command's module (``commands/report.py``, named for the command)
    beside what it serves."""
    seen: dict[str, list[str]] = {}
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        if p.name == "__init__.py" or rel.parts[0] in ("_worker", "commands") or (rel.parts[0] == "accelerators" and len(rel.parts) == 3):
            continue
        seen.setdefault(p.name, []).append(rel.as_posix())
    assert not {k: v for k, v in seen.items() if len(v) > 1}


def test_files_naming_a_kind_only_fall():
    found = {k: len(v) for k, v in naming_kinds().items()}
    assert found["NVIDIA"] > 5  # the counter reads the code
    over = {k: (n, KIND_CEILING[k]) for k, n in found.items() if n > KIND_CEILING[k]}
    under = {k: (n, KIND_CEILING[k]) for k, n in found.items() if n < KIND_CEILING[k]}
    assert not over, f"more files outside accelerators/ name a kind than before (now, ceiling): {over}"
    assert not under, f"fewer files name a kind: lower KIND_CEILING to today's figure: {under}"


def test_the_kind_counter_skips_comments_and_docstrings():
    assert code_text('"""NVIDIA docs."""\nx = 1  # cuda\n') .count("cuda") == 0
    assert "rocm" in code_text('x = "rocm6.4"\n')


def test_the_kind_counter_reads_amd64_as_a_cpu_not_the_kind():
    amd = re.compile(KIND_WORDS["AMD"])
    assert not amd.search(code_text('tag = "win_amd64"\narch = "amd64"\n'))
    assert amd.search(code_text('vendor = "amd"\n')) and amd.search(code_text('lib = "amdhip64"\n'))


if __name__ == "__main__":
    print("the map, from the ground up:", " ".join(LAYERS))
    print(f"modules at the top of stackdoctor/: {len(top_modules())} (at most {MAX_TOP_MODULES}): {' '.join(top_modules())}")
    found = sorted(back_up())
    print(f"imports running back up: {len(found)} (goal {BACK_UP_GOAL})")
    for a, b in found:
        print(f"  {a} -> {b}")
    for kind, files in naming_kinds().items():
        print(f"files outside accelerators/ naming {kind}: {len(files)} (goal {KIND_GOAL[kind]})")
