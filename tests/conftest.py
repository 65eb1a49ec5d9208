"""Shared test fixtures.

- ``torch_python``: one real venv with torch 2.13.0 (CPU) shared by the whole suite.
  ``STACKDOCTOR_TEST_TORCH_PYTHON`` names an existing interpreter (CI creates it once);
  otherwise it is built at ``~/.cache/stackdoctor-tests/torch-venv`` the first time.
- ``fake_bin``: puts a fake tool on PATH that replays a recorded output (the tool's real
  contract: argv in, text and an exit code out).
- ``REAL``: ``../shared/fixtures/real`` (real machines from public bug reports) and
  ``tests/fixtures`` (our own captures).
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Under the test suite a rule that raises fails the run (stackdoctor.rules.core.judge), in this process and in
# every stackdoctor the tests start; outside tests it becomes a visible `rule-error` finding.
os.environ.setdefault("STACKDOCTOR_STRICT_RULES", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_REAL = REPO.parent / "shared" / "fixtures" / "real"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
TORCH_VERSION = "2.13.0"


def real_fixture(case: str, name: str) -> str:
    """Text of one recorded tool output: ``tests/fixtures/real/<case>/<name>`` or ``../shared/fixtures/real/...``."""
    for base in (FIXTURES / "real", SHARED_REAL):
        p = base / case / name
        if p.exists():
            return p.read_text(encoding="utf-8", errors="replace")
    pytest.skip(f"fixture {case}/{name} not available")


def _build_torch_venv(path: Path) -> Path:
    from helpers import venv_bin

    py = venv_bin(path)
    if py.exists():
        ok = subprocess.run([str(py), "-c", f"import torch; assert torch.__version__.startswith('{TORCH_VERSION}')"], capture_output=True)
        if ok.returncode == 0:
            return py
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", f"torch=={TORCH_VERSION}"], check=True)
    return py


@pytest.fixture(scope="session")
def torch_python() -> str:
    """Path of an interpreter whose environment has torch 2.13.0 (CPU build)."""
    env = os.environ.get("STACKDOCTOR_TEST_TORCH_PYTHON")
    if env:
        return env
    return str(_build_torch_venv(Path.home() / ".cache" / "stackdoctor-tests" / "torch-venv"))


@pytest.fixture(scope="session")
def plain_python(tmp_path_factory) -> str:
    """An interpreter in a fresh venv with no torch (and no packaging)."""
    d = tmp_path_factory.mktemp("plainvenv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    from helpers import venv_bin

    return str(venv_bin(d))


def write_fake_tool(bindir: Path, name: str, stdout: str = "", rc: int = 0, stderr: str = "", sleep: float = 0.0, script: str | None = None) -> Path:
    """A fake tool: prints ``stdout``/``stderr`` verbatim and exits with ``rc``.

    ``script`` replaces the body with arbitrary POSIX sh (for hangs, signals, partial output).
    A fake tool is a ``/bin/sh`` script: on Windows (no POSIX shell) the test that needs one is skipped.
    """
    if os.name == "nt":
        pytest.skip("this test's fake tool is a /bin/sh script, and Windows has no POSIX shell")
    bindir.mkdir(parents=True, exist_ok=True)
    data = bindir / f".{name}.stdout"
    data.write_text(stdout, encoding="utf-8")
    err = bindir / f".{name}.stderr"
    err.write_text(stderr, encoding="utf-8")
    body = script if script is not None else textwrap.dedent(
        f"""\
        cat {shlex.quote(str(data))}
        cat {shlex.quote(str(err))} >&2
        {"sleep " + str(sleep) if sleep else ""}
        exit {rc}
        """
    )
    tool = bindir / name
    tool.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return tool


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """Returns ``add(name, stdout="", rc=0, stderr="", sleep=0, script=None)``; the dir is first on PATH."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    def add(name: str, stdout: str = "", rc: int = 0, stderr: str = "", sleep: float = 0.0, script: str | None = None) -> Path:
        return write_fake_tool(bindir, name, stdout, rc, stderr, sleep, script)

    add.dir = bindir  # type: ignore[attr-defined]
    return add


# Markers that skip by themselves where the system cannot run the test (the reason is in the report).
_NEEDS = {
    "posix": (lambda: os.name != "nt", "needs POSIX (a /bin/sh fake, POSIX signals or file modes); this is Windows"),
    "linux": (lambda: sys.platform.startswith("linux"), "needs Linux itself (/proc, /dev/full, ip netns)"),
    "netns": (lambda: sys.platform.startswith("linux") and hasattr(os, "geteuid") and os.geteuid() == 0, "needs Linux, root and network namespaces"),
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        for name, (runs_here, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is not None and not runs_here():
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(autouse=True, scope="session")
def _every_report_keeps_the_contract():
    """Every report the suite produces (stdout of any stackdoctor run, or its --output/-o file)
    validates against the schema, has a fix on every warn/fail finding, and only codes that
    ``explain`` documents in both languages (tests/helpers.py: check_report_invariants)."""
    import json as _json

    from helpers import SEEN_REPORTS, check_report_invariants

    real_run = subprocess.run

    def is_stackdoctor(argv) -> bool:
        if not isinstance(argv, (list, tuple)):
            return False
        parts = [str(a) for a in argv[:3]]
        return any(p.endswith("stackdoctor") for p in parts[:1]) or parts[1:3] == ["-m", "stackdoctor"]

    def checked_run(*args, **kwargs):
        result = real_run(*args, **kwargs)
        argv = args[0] if args else kwargs.get("args")
        if is_stackdoctor(argv) and result.returncode in (0, 1):
            texts = []
            out = result.stdout
            if isinstance(out, bytes):
                out = out.decode("utf-8", "replace")
            if isinstance(out, str):
                texts.append(out)
            argv = [str(a) for a in argv]
            for flag in ("--output", "-o"):
                if flag in argv[:-1]:
                    path = Path(argv[argv.index(flag) + 1])
                    if path.is_file():
                        texts.append(path.read_text(encoding="utf-8", errors="replace"))
                    elif path.is_dir() and (path / "report.json").is_file():
                        texts.append((path / "report.json").read_text(encoding="utf-8"))
            for text in texts:
                if '"schema": "stackdoctor.report/' not in text[:300]:
                    continue
                try:
                    data = _json.loads(text)
                except ValueError:
                    continue
                if isinstance(data, dict) and data.get("schema") == "stackdoctor.report/1":
                    check_report_invariants(data)
        return result

    subprocess.run = checked_run
    yield SEEN_REPORTS
    subprocess.run = real_run
