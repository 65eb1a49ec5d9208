"""The kept code of dataclasses' generated methods (stackdoctor.core.classcode, issue 33): a run that finds it compiles
nothing, makes the same classes as a run without it, and never reads a file another user could have written."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import dataclasses, hashlib, inspect, json, sys
import stackdoctor.cli, stackdoctor.model.facts, stackdoctor.matrix.model, stackdoctor.model.view
from stackdoctor.core import classcode
out = {}
for mod in (stackdoctor.model.facts, stackdoctor.matrix.model, stackdoctor.model.view):
    for name, cls in sorted(vars(mod).items()):
        if not (isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == mod.__name__):
            continue
        methods = {}
        for m in ("__init__", "__repr__", "__eq__", "__setattr__", "__delattr__", "__hash__"):
            fn = cls.__dict__.get(m)
            code = getattr(fn, "__code__", None) or getattr(getattr(fn, "__wrapped__", None), "__code__", None)
            methods[m] = None if code is None else [hashlib.sha256(code.co_code).hexdigest(), code.co_filename, list(code.co_names), code.co_flags]
        ann = {k: repr(v) for k, v in cls.__init__.__annotations__.items()}
        out[f"{mod.__name__}.{name}"] = {"sig": str(inspect.signature(cls)), "ann": ann, "methods": methods, "doc": cls.__doc__}
print(json.dumps({"classes": out, "counts": classcode.counts(), "installed": dataclasses.__dict__.get("exec") is not None}))
"""


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("STACKDOCTOR_NO_CACHE", "PYTHONDONTWRITEBYTECODE")}
    return {**env, "STACKDOCTOR_CACHE_DIR": str(cache), **extra}


def _probe(cache: Path, **extra: str) -> dict:
    res = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=_env(cache, **extra), timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def _version(cache: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "stackdoctor", "--version"], capture_output=True, text=True, env=_env(cache), timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("stackdoctor "), res.stderr


def _file(cache: Path) -> Path:
    (path,) = cache.glob("classcode-*.marshal")
    return path


def test_a_run_keeps_the_code_and_the_next_compiles_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _probe(cache)
    assert cold["installed"] and cold["counts"][1] > 50  # every text compiled: no file yet (the probe does not save)
    _version(cache)  # the CLI saves what it compiled before it exits
    path = _file(cache)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    warm = _probe(cache)
    assert warm["counts"][0] >= 50 and warm["counts"][1] < cold["counts"][1]
    assert warm["classes"] == cold["classes"]  # the same signatures, annotations (objects, not strings), methods


def test_the_classes_are_those_made_without_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _version(cache)
    kept = _probe(cache)
    plain = _probe(cache, STACKDOCTOR_NO_CACHE="1")
    assert not plain["installed"] and plain["counts"] == [0, 0]
    assert kept["installed"] and len(kept["classes"]) > 40
    assert kept["classes"] == plain["classes"]
    frozen = kept["classes"]["stackdoctor.matrix.model.Variant"]["methods"]
    assert frozen["__setattr__"] is not None and frozen["__init__"][1] == "<string>"  # as exec(text) names it


def test_a_foreign_or_broken_file_is_not_read(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _version(cache)
    path = _file(cache)
    os.chmod(path, 0o666)  # others could have written it: what it holds would run
    assert _probe(cache)["counts"][0] == _probe(cache)["counts"][1]  # nothing known but what this run compiled
    assert not path.exists()  # ours but loosened: removed, nothing a later run could use (issue 44)
    _version(cache)
    path.write_bytes(b"\x00not marshal data")
    broken = _probe(cache)
    assert broken["counts"][0] == broken["counts"][1] > 50
    _version(cache)  # written again, whole
    assert _probe(cache)["counts"][1] < broken["counts"][1]


def test_a_program_importing_stackdoctor_keeps_its_own_dataclasses():
    """Issue 45: the keeping ``exec`` is the command's, installed by the CLI; importing the package as a library
    (the model, the pipeline) leaves the importer's ``dataclasses`` as it was."""
    code = ("import dataclasses, stackdoctor, stackdoctor.model.facts, stackdoctor.pipeline\n"
            "print(dataclasses.__dict__.get('exec') is None)\n"
            "import stackdoctor.cli\n"
            "print(dataclasses.__dict__.get('exec') is None)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "STACKDOCTOR_NO_CACHE": ""}).stdout.split()
    assert out == ["True", "False"]
