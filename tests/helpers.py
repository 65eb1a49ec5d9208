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

import forkserver

REPO = Path(__file__).resolve().parents[1]

# What a child process needs from the environment on Windows (Python will not start without SYSTEMROOT).
WINDOWS_ENV = ("SYSTEMROOT", "SystemRoot", "WINDIR", "TEMP", "TMP", "USERPROFILE", "LOCALAPPDATA", "APPDATA", "PATHEXT", "COMSPEC")


def venv_bin(venv: Path, name: str = "python") -> Path:
    """An executable of a venv: ``bin/<name>`` on POSIX, ``Scripts\\<name>.exe`` on Windows."""
    return venv / "Scripts" / f"{name}.exe" if os.name == "nt" else venv / "bin" / name


def _link_or_copy(src: str, dst: str) -> str:
    try:
        os.link(src, dst)
    except OSError:  # another file system, or links refused: a copy
        shutil.copy2(src, dst)
    return dst


def _site(venv: Path) -> Path:
    return venv / "Lib" / "site-packages" if os.name == "nt" else next(venv.glob("lib/python*/site-packages"))


@functools.cache
def _ensurepip_files() -> tuple[tuple[str, str], ...] | None:
    """What ``python -m venv`` installs into a venv with ensurepip (pip, and setuptools on Python 3.11), as the
    environment running the suite holds it: (file, path inside site-packages) for every file of those distributions'
    RECORDs but their scripts. None when that environment's versions are not ensurepip's bundled ones."""
    import ensurepip
    from importlib import metadata

    out: list[tuple[str, str]] = []
    for wheel in sorted((Path(ensurepip.__file__).parent / "_bundled").glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return None
        if dist.version != version:
            return None
        for f in dist.files or []:
            rel = f.as_posix()
            if not rel.startswith("..") and Path(str(dist.locate_file(f))).is_file():
                out.append((str(dist.locate_file(f)), rel))
    return tuple(out)


def new_venv(venv: Path) -> Path:
    """A new venv at ``venv``, as ``python -m venv`` makes one: made ``--without-pip``, then what ensurepip would
    install (:func:`_ensurepip_files`: the same pip and setuptools, as the suite's own venv holds them) linked in,
    instead of ensurepip unpacking and compiling its wheels, which took 2.3 s of CPU for each of the suite's 16 such
    venvs. pip never writes into the files of an installed distribution (it replaces them), so the links are safe.
    Without the scripts (``bin/pip``): the suite runs ``python -m pip``. Returns ``venv``."""
    files = _ensurepip_files()
    if files is None:  # this environment's pip is not the bundled one: ensurepip itself
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        return venv
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = _site(venv)
    for src, rel in files:
        dst = site / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        _link_or_copy(src, str(dst))
    return venv


def _ensurepip_tops() -> set[str]:
    return {rel.split("/", 1)[0] for _, rel in (_ensurepip_files() or ())}


def copy_venv(seed: Path, dst: Path) -> Path:
    """A private copy of the venv ``seed`` at ``dst`` (a venv copied whole keeps working through ``python -m``): the files
    of what ensurepip installed (pip, setuptools) hard-linked, as no test and no install writes into them, every other
    file copied, so a test may damage the torch it holds and the seed stays as it was. A full copy took a third of a
    second (1500 files, most of them pip's; 0.04 s so)."""
    site, tops = str(_site(seed)), _ensurepip_tops()

    def copy(src: str, dst_: str) -> str:
        rel = os.path.relpath(src, site)
        if not rel.startswith("..") and rel.split(os.sep, 1)[0] in tops:
            return _link_or_copy(src, dst_)
        return shutil.copy2(src, dst_)

    shutil.copytree(seed, dst, symlinks=True, copy_function=copy)
    return dst


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
    """Run stackdoctor; asserts no traceback ever reaches the user. Forked from an interpreter that has imported it
    where it can be (tests/forkserver.py; ``user`` runs always start a fresh one), else started as the console script.

    ``args`` may start with the path of another ``stackdoctor`` console script (e.g. the copy uid 65534 can
    read, tests/unprivileged.py); ``user`` runs it as that uid/gid with no supplementary groups (needs root).
    """
    argv = list(args) if args and os.path.basename(str(args[0])) == "stackdoctor" else [*console_script(), *args]
    drop = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
    start = time.monotonic()
    if user is None:
        proc = run_stackdoctor(argv, text=True, env=env, timeout=timeout, cwd=cwd, input=stdin)
    else:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=cwd, input=stdin, **drop)  # type: ignore[call-overload]
    run = Run(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stdout, proc.stdout
    return run  # every report it printed was checked by conftest's _every_report_keeps_the_contract


def run_stackdoctor(argv: list, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(argv, capture_output=True, **kwargs)`` for a stackdoctor command line (its console script or
    ``sys.executable -m stackdoctor``), forked from an interpreter that has imported it (tests/forkserver.py) where it
    can be, else exactly that call. ``kwargs``: ``env``, ``cwd``, ``timeout``, ``text``, ``stdin``, ``input``."""
    assert set(kwargs) <= {"env", "cwd", "timeout", "text", "stdin", "input"}, kwargs
    feed = kwargs.get("input") if kwargs.get("input") is not None else kwargs.get("stdin")
    done = forkserver.run([os.fsdecode(a) for a in argv], env=kwargs.get("env"), cwd=kwargs.get("cwd"), stdin=feed, timeout=kwargs.get("timeout"),
                          text=bool(kwargs.get("text")))
    return done if done is not None else subprocess.run(argv, capture_output=True, **kwargs)


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
