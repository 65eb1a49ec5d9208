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


# the "schema" value of each public JSON document -> its shipped schema file (stackdoctor/_schema.py generates them)
SCHEMA_FILES = {
    "stackdoctor.report/1": "report.schema.json",
    "stackdoctor.plan/1": "plan.schema.json",
    "stackdoctor.kernels/1": "kernels.schema.json",
    "stackdoctor.diff/2": "diff.schema.json",
    "stackdoctor.build-plan/1": "build-plan.schema.json",
    "stackdoctor.error/1": "error.schema.json",
}


@functools.cache
def shipped_schema(name: str) -> dict:
    """A schema as the installed package ships it (``stackdoctor/schemas/NAME``)."""
    from importlib import resources

    return json.loads(resources.files("stackdoctor").joinpath("schemas", name).read_text(encoding="utf-8"))


def report_schema() -> dict:
    return shipped_schema("report.schema.json")


@functools.cache
def schema_validator(name: str):  # noqa: ANN201  (a jsonschema Validator)
    """One validator per shipped schema, the schema itself checked once.

    ``jsonschema.validate(data, schema)`` re-checks the schema against its metaschema on every call: 0.59 s
    for the report schema here, against 0.009 s for the validation itself, and the suite validates hundreds of
    documents. Same checks, same errors (``validate`` raises the best-matching ``ValidationError``).
    """
    from jsonschema.validators import validator_for

    schema = shipped_schema(name)
    cls = validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate_report(data: dict) -> None:
    """Every report a test produces must validate against the shipped schema."""
    schema_validator("report.schema.json").validate(data)


# how many documents of each kind the suite's stackdoctor runs produced and this module checked
SEEN_DOCUMENTS: dict[str, int] = {kind: 0 for kind in SCHEMA_FILES}
SEEN_REPORTS = SEEN_DOCUMENTS  # older name


def check_report_invariants(data: dict) -> None:
    """What must hold for EVERY report the suite produces (run_sd calls this on each one):
    it validates against the shipped schema; no warn/fail finding lacks a fix; every code is
    documented by ``explain`` in both languages."""
    validate_report(data)
    _findings_are_explained(data["findings"])
    SEEN_DOCUMENTS["stackdoctor.report/1"] += 1


def _findings_are_explained(findings: list[dict]) -> None:
    from stackdoctor.rules import catalog

    for f in findings:
        if f["severity"] in ("warn", "fail"):
            assert f["fix"], f"{f['code']} ({f['severity']}) has no fix"
        for lang in catalog.LANGS:
            assert catalog.explain(f["code"], lang), f"{f['code']} has no {lang} explanation"


def check_document(data: object) -> bool:
    """Check one JSON document a stackdoctor run printed or wrote, by its ``schema`` key: a report gets
    :func:`check_report_invariants`; a plan, kernels or diff document validates against its shipped schema
    (and a kernels document's findings are explained too). Returns whether it was one of ours."""
    kind = data.get("schema") if isinstance(data, dict) else None
    if kind not in SCHEMA_FILES:
        return False
    assert isinstance(data, dict)
    if kind == "stackdoctor.report/1":
        check_report_invariants(data)
        return True
    schema_validator(SCHEMA_FILES[kind]).validate(data)
    if kind == "stackdoctor.kernels/1":
        _findings_are_explained(data["findings"])
    SEEN_DOCUMENTS[kind] += 1
    return True


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


def run_sd(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 120, cwd: str | os.PathLike | None = None, stdin: str | None = None,
           user: int | None = None) -> Run:
    """Run stackdoctor; asserts no traceback ever reaches the user.

    ``args`` may start with the path of another ``stackdoctor`` console script (e.g. the copy uid 65534 can
    read, tests/unprivileged.py); ``user`` runs it as that uid/gid with no supplementary groups (needs root).
    """
    argv = list(args) if args and os.path.basename(str(args[0])) == "stackdoctor" else [*console_script(), *args]
    drop = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    start = time.monotonic()
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=cwd,
        input=stdin,
        **drop,  # type: ignore[arg-type]
    )
    run = Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
    return run  # every report it printed was checked by conftest's _every_report_keeps_the_contract


def machine_env(bindir: Path, sysroot: Path | None = None, **extra: str) -> dict[str, str]:
    """A clean environment: fake tools first on PATH, then only the system's basic dirs; pip's configuration
    files are not read (``PIP_CONFIG_FILE`` = the null device, pip's documented switch), so a plan depends on the
    machine under test, not on the mirror or wheel folder of the machine running the suite."""
    env = {
        "PIP_CONFIG_FILE": os.devnull,
        "PATH": f"{bindir}{os.pathsep}/usr/bin{os.pathsep}/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "NO_COLOR": "1",
        "COLUMNS": "120",
        "STACKDOCTOR_CACHE_DIR": str(bindir.parent / "cache"),
        "STACKDOCTOR_STRICT_RULES": "1",  # a rule that raises fails the test (tests/conftest.py)
        "STACKDOCTOR_LEARNED": str(bindir.parent / "learned.yaml"),  # what an index confirmed is remembered here, not in HOME
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
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.reconcile import reconcile

    matrix = load_matrix([])
    f = facts or Facts()
    f.kernels = kf
    return rules.judge(reconcile(f, matrix), matrix, groups=["kernels"], gates=rules.Gates(min_busbw_gbs=min_busbw_gbs))
