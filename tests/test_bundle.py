"""One file for a broken machine (issue 47): ``stackdoctor bundle -o x.pyz`` writes a zipapp of this installation that an
interpreter with no site-packages (``python -I -S``) runs: ``check`` on the real torch venv gets the same torch facts
as the installed stackdoctor; ``explain``, ``report`` and ``install --dry-run`` run; nothing compiled is inside; the
worker scripts it copies out of the zip are gone when it exits. From a checkout without the dependencies,
``python -m stackdoctor`` is one sentence and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import REPO, check_report_invariants, run_sd

MAX_BYTES = 8 * 1024 * 1024

# torch facts that differ between two runs of the same torch (how long things took)
_VOLATILE = ("duration", "elapsed", "_ms", "time")


@pytest.fixture(scope="module")
def pyz(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "stackdoctor.pyz"
    r = run_sd(["bundle", "-o", str(out)], timeout=300)
    assert r.rc == 0, r.stderr
    assert f"Wrote {out} (" in r.stderr and "zstandard (compiled" in r.stderr, r.stderr  # what was left out is said
    return out


def _bare(pyz: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The bundle run by an interpreter that sees no site-packages at all (-I -S), with its own TMPDIR."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp), "TMPDIR": str(tmp), "LANG": "C.UTF-8", "NO_COLOR": "1", "COLUMNS": "120"}
    r = subprocess.run([sys.executable, "-I", "-S", str(pyz), *args], capture_output=True, text=True, timeout=300, env=env, cwd=tmp)
    assert "Traceback" not in r.stderr + r.stdout, r.stderr
    return r


def _steady(torch: dict) -> dict:
    return {k: v for k, v in torch.items() if not any(w in k for w in _VOLATILE) and k != "sources"}


def test_the_bundle_is_small_and_holds_no_compiled_code(pyz):
    assert pyz.stat().st_size <= MAX_BYTES, pyz.stat().st_size
    assert pyz.read_bytes().startswith(b"#!/usr/bin/env python3\n") and os.access(pyz, os.X_OK)
    with zipfile.ZipFile(pyz) as z:
        names = set(z.namelist())
    assert {"__main__.py", "stackdoctor/cli.py", "stackdoctor/locale/en.yaml", "stackdoctor/locale/zh.yaml", "stackdoctor/compat_matrix/releases.yaml",
            "stackdoctor/schemas/report.schema.json", "stackdoctor/_worker/sd_target.py", "typer/__init__.py", "yaml/__init__.py", "pynvml.py"} <= names
    assert not [n for n in names if n.endswith((".so", ".pyd", ".dylib")) or ".so." in n]
    assert not [n for n in names if n.startswith(("zstandard/", "psutil/", "pydantic_core/"))]


@pytest.mark.slow
@pytest.mark.posix
def test_a_bare_interpreter_runs_it_and_gets_the_installed_torch_facts(pyz, torch_python, tmp_path):
    installed = run_sd(["check", "--json", "--python", torch_python], timeout=300)
    assert installed.rc in (0, 1), installed.stderr
    r = _bare(pyz, tmp_path, "check", "--json", "--python", torch_python)
    assert r.returncode == installed.rc, r.stderr
    data = json.loads(r.stdout)
    check_report_invariants(data)
    assert data["facts"]["torch"]["version"] == "2.13.0+cpu" and data["facts"]["torch"]["imported"] is True
    assert _steady(data["facts"]["torch"]) == _steady(installed.json()["facts"]["torch"])
    assert [k["kernel"] for k in data["facts"]["kernels"]["results"]] == [k["kernel"] for k in installed.json()["facts"]["kernels"]["results"]]
    assert all(k["ok"] for k in data["facts"]["kernels"]["results"])  # the quick kernels ran from the copied-out workers
    assert sorted(f["code"] for f in data["findings"]) == sorted(f["code"] for f in installed.json()["findings"])
    assert not list(tmp_path.glob("stackdoctor-pkg-*")), "the workers copied out of the zip were left behind"


@pytest.mark.slow
@pytest.mark.posix
def test_explain_report_and_install_dry_run_from_the_bundle(pyz, torch_python, tmp_path):
    r = _bare(pyz, tmp_path, "explain", "driver-too-old", "--lang", "zh")
    assert r.returncode == 0 and "nvidia-smi" in r.stdout, r.stderr
    r = _bare(pyz, tmp_path, "report", "-o", str(tmp_path / "rep"), "--no-kernels", "--python", torch_python)
    assert r.returncode in (0, 1), r.stderr
    assert (tmp_path / "rep" / "report.json").is_file() and (tmp_path / "rep" / "report.md").is_file()
    r = _bare(pyz, tmp_path, "install", "--dry-run", "--torch", "2.13.0", "--variant", "cpu", "--python", torch_python)
    assert r.returncode == 0 and "2.13.0+cpu" in r.stdout + r.stderr and torch_python in r.stdout + r.stderr, (r.stdout, r.stderr)
    r = _bare(pyz, tmp_path, "--version")
    assert r.stdout.startswith("stackdoctor ")
    r = _bare(pyz, tmp_path, "check", "--no-such-flag")
    assert r.returncode == 2 and r.stderr.startswith("stackdoctor: No such option")


@pytest.mark.posix
def test_a_checkout_without_its_dependencies_says_so(tmp_path):
    """``python -S -m stackdoctor`` in a checkout: no site-packages, so none of typer, rich, pyyaml...: one sentence."""
    r = subprocess.run([sys.executable, "-S", "-m", "stackdoctor", "check"], capture_output=True, text=True, timeout=60, cwd=REPO,
                       env={"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "LANG": "C.UTF-8"})
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("stackdoctor: stackdoctor's dependencies typer, rich, pyyaml") and "stackdoctor.pyz" in r.stderr, r.stderr


def test_the_release_workflow_builds_the_bundle_beside_the_wheel_and_sdist():
    wf = REPO / ".github" / "workflows" / "release.yml"
    r = subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(wf)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    text = wf.read_text(encoding="utf-8")
    assert "python -m build -o dist" in text and "stackdoctor bundle -o dist/stackdoctor.pyz" in text and "python -I -S dist/stackdoctor.pyz" in text
