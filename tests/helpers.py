"""Helpers for end-to-end tests: run the installed console script against a fake machine."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What a child process needs from the environment on Windows (Python will not start without SYSTEMROOT).
WINDOWS_ENV = ("SYSTEMROOT", "SystemRoot", "WINDIR", "TEMP", "TMP", "USERPROFILE", "LOCALAPPDATA", "APPDATA", "PATHEXT", "COMSPEC")


def venv_bin(venv: Path, name: str = "python") -> Path:
    """An executable of a venv: ``bin/<name>`` on POSIX, ``Scripts\\<name>.exe`` on Windows."""
    return venv / "Scripts" / f"{name}.exe" if os.name == "nt" else venv / "bin" / name


@functools.lru_cache(maxsize=1)
def report_schema() -> dict:
    from importlib import resources

    return json.loads(resources.files("stackdoctor").joinpath("schemas/report.schema.json").read_text())


def validate_report(data: dict) -> None:
    """Every report a test produces must validate against the shipped schema."""
    import jsonschema

    jsonschema.validate(data, report_schema())


SEEN_REPORTS = {"count": 0}


def check_report_invariants(data: dict) -> None:
    """What must hold for EVERY report the suite produces (run_sd calls this on each one):
    it validates against the shipped schema; no warn/fail finding lacks a fix; every code is
    documented by ``explain`` in both languages."""
    from stackdoctor import catalog

    validate_report(data)
    for f in data["findings"]:
        if f["severity"] in ("warn", "fail"):
            assert f["fix"], f"{f['code']} ({f['severity']}) has no fix"
        for lang in catalog.LANGS:
            assert catalog.explain(f["code"], lang), f"{f['code']} has no {lang} explanation"
    SEEN_REPORTS["count"] += 1


def console_script() -> list[str]:
    """The installed ``stackdoctor`` console script (falls back to ``python -m stackdoctor``)."""
    exe = shutil.which("stackdoctor", path=os.path.dirname(sys.executable)) or shutil.which("stackdoctor")
    return [exe] if exe else [sys.executable, "-m", "stackdoctor"]


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    elapsed: float

    def json(self) -> dict:
        return json.loads(self.stdout)


def run_sd(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120, cwd: str | os.PathLike | None = None, stdin: str | None = None) -> Run:
    """Run stackdoctor; asserts no traceback ever reaches the user."""
    start = time.monotonic()
    proc = subprocess.run(
        [*console_script(), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
        input=stdin,
    )
    run = Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
    return run  # every report it printed was checked by conftest's _every_report_keeps_the_contract


def machine_env(bindir: Path, sysroot: Path | None = None, **extra: str) -> dict[str, str]:
    """A clean environment: fake tools first on PATH, then only the system's basic dirs."""
    env = {
        "PATH": f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "STACKDOCTOR_CACHE_DIR": str(bindir.parent / "cache"),
        "STACKDOCTOR_STRICT_RULES": "1",  # a rule that raises fails the test (tests/conftest.py)
    }
    if sysroot is not None:
        env["STACKDOCTOR_SYSROOT"] = str(sysroot)
    if os.name == "nt":
        env.update({k: os.environ[k] for k in WINDOWS_ENV if k in os.environ})
    env.update(extra)
    return env


def kernel_findings(kf, min_busbw_gbs: float | None = None, facts=None) -> list:
    """What the kernel rules say of KernelFacts ``kf`` (reconciled first, for peaks), as ``stackdoctor kernels`` judges it."""
    from stackdoctor import rules
    from stackdoctor.facts import Facts
    from stackdoctor.matrix import load_matrix
    from stackdoctor.reconcile import reconcile

    matrix = load_matrix([])
    f = facts or Facts()
    f.kernels = kf
    return rules.judge(reconcile(f, matrix), matrix, groups=["kernels"], gates=rules.Gates(min_busbw_gbs=min_busbw_gbs))
