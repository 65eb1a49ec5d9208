"""The fault-injection suite: one named test per fault (issue 7).

Every fault runs the real installed console script against a fake machine (fake tools
first on PATH, a SYSROOT tree) and asserts the same five things:

1. no traceback (``helpers.run_sd`` asserts it on stdout and stderr);
2. its one sentence, verbatim (``finding``: the finding that says it, one-line title; or the one
   ``stackdoctor: ...`` line of bad input);
3. its exact exit code and the exact set of problems (``pin``): a tool that is stuck, broken or cannot
   run is a warning (0; 1 with --strict or a project requirement it leaves unmet), a broken driver or
   target is a failing finding (1), bad input is 2, an internal error is 3;
4. bounded wall time (generous: machines are shared and noisy);
5. for probe faults: every OTHER probe's facts still in the report.

The fake machine is small on purpose (an Ubuntu os-release, a loaded 550.54.14 kernel
module in /proc and /sys, a target venv without torch) so that each fault can show which
facts survived it. Fast settings throughout: ``--timeout 1 --torch-timeout 5 --no-kernels``.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from conftest import write_fake_tool
from helpers import Run, machine_env, run_sd, validate_report
from unprivileged import NOBODY, UnprivilegedInstall

BOUND_S = 30.0  # generous wall-time bound for one stackdoctor run under a fault

OS_RELEASE = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n'
# /proc/driver/nvidia/version as the 550.54.14 proprietary module prints it (same text as tests/test_cli_check.py).
PROC_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"

ALL_PROBES = ("target", "platform", "nvidia", "cuda_toolkit", "rocm", "apple", "intel", "jetson", "thunderbolt")
FAST = ["--no-kernels", "--timeout", "1", "--torch-timeout", "5"]


@dataclass
class Machine:
    """A fake machine: ``bindir`` first on PATH, ``sysroot`` as STACKDOCTOR_SYSROOT."""

    root: Path
    bindir: Path
    sysroot: Path
    python: str  # the target interpreter (a venv without torch)
    extra_env: dict[str, str] = field(default_factory=dict)

    def tool(self, name: str, stdout: str = "", rc: int = 0, stderr: str = "", script: str | None = None) -> Path:
        return write_fake_tool(self.bindir, name, stdout, rc, stderr, 0.0, script)

    def env(self, **extra: str) -> dict[str, str]:
        return machine_env(self.bindir, self.sysroot, **{**self.extra_env, **extra})

    def file(self, path: str, text: str) -> Path:
        p = self.sysroot / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        return p


def make_machine(root: Path, python: str) -> Machine:
    bindir = root / "bin"
    bindir.mkdir(parents=True, exist_ok=True)
    sysroot = root / "sysroot"
    m = Machine(root, bindir, sysroot, python)
    m.file("/etc/os-release", OS_RELEASE)
    m.file("/proc/driver/nvidia/version", PROC_550)
    m.file("/sys/module/nvidia/version", "550.54.14\n")
    return m


@pytest.fixture
def machine(tmp_path, plain_python) -> Machine:
    return make_machine(tmp_path / "machine", plain_python)


# ---------------------------------------------------------------------------- running


def check(m: Machine, *extra: str, python: str | None = None, env: dict[str, str] | None = None, fast: bool = True, timeout: float = 90) -> tuple[Run, dict[str, Any]]:
    """``stackdoctor check --json`` on the fake machine: a fault is a finding (exit 0/1), a valid report, in bounded time."""
    args = ["check", "--json", *(FAST if fast else []), "--python", python or m.python, *extra]
    run = run_sd(args, env=env if env is not None else m.env(), timeout=timeout, cwd=m.root)  # a project config would sit here
    assert run.elapsed < BOUND_S, f"took {run.elapsed:.1f} s"
    assert run.rc in (0, 1), (run.rc, run.stderr)
    data = run.json()
    validate_report(data)
    return run, data


def check_as_nobody(m: Machine, inst: UnprivilegedInstall, *, timeout: float = 90) -> tuple[Run, dict[str, Any]]:
    """``stackdoctor check --json`` (no kernels, fast timeouts) on the fake machine, run as uid/gid 65534 from
    ``inst`` (a copy of stackdoctor that user can read: tests/unprivileged.py); the run and its report."""
    run = run_sd([inst.stackdoctor, "check", "--json", *FAST, "--python", m.python], env=m.env(**inst.env), cwd=m.root,
                 timeout=timeout, user=NOBODY)
    assert run.elapsed < BOUND_S, f"took {run.elapsed:.1f} s"
    assert run.rc in (0, 1), (run.rc, run.stderr)
    data = run.json()
    validate_report(data)
    return run, data


@pytest.fixture
def shared_tmp():
    """A temp dir every user can traverse (pytest's tmp_path is root-only 0700)."""
    d = Path(tempfile.mkdtemp(prefix="sd-faults-"))
    d.chmod(0o755)
    yield d
    for p in d.rglob("*"):  # undo chmods so rmtree works
        try:
            p.chmod(p.stat().st_mode | stat.S_IRWXU)
        except OSError:
            pass
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def nobody_machine(shared_tmp, unprivileged_install) -> Machine:
    """A fake machine readable by uid 65534 (pytest's tmp is root-only); its target is the unprivileged
    install's own venv (torch-less, readable by that user)."""
    m = make_machine(shared_tmp / "machine", unprivileged_install.python)
    for p in [shared_tmp, *shared_tmp.rglob("*")]:
        if p.is_dir():
            p.chmod(0o755)
    m.extra_env["HOME"] = str(shared_tmp)
    return m


# ---------------------------------------------------------------------------- assertions


def probe_status(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in data["probes"]}


def assert_others_intact(data: dict[str, Any], *, faulted: set[str] | frozenset[str] = frozenset()) -> None:
    """Every probe ran and reported; the facts of the probes NOT under fault are all there."""
    st = probe_status(data)
    assert set(st) >= set(ALL_PROBES), sorted(st)
    for name in ALL_PROBES:
        if name not in faulted:
            assert st[name]["status"] in ("ok", "skipped"), (name, st[name])
    f = data["facts"]
    if "target" not in faulted:
        assert (f["python"]["version"] or "").startswith("3."), f["python"]
    if "platform" not in faulted:
        assert f["platform"]["system"] == "Linux"
        assert f["platform"]["os_id"] == "ubuntu" and f["platform"]["os_version"] == "22.04", f["platform"]
    if "nvidia" not in faulted:
        assert f["nvidia"]["kernel_module_version"] == "550.54.14", f["nvidia"]


def messages(data: dict[str, Any]) -> list[str]:
    """Every user-facing sentence in a report: probe errors, findings, tool errors, failure lines."""
    out: list[str] = []
    for p in data["probes"]:
        if p.get("error"):
            out.append(p["error"])
    for x in data["findings"]:
        out.extend(s for s in (x.get("title"), x.get("detail")) if s)
    f = data["facts"]
    for subject in ("rocm", "thunderbolt"):
        out.extend((f[subject].get("tool_errors") or {}).values())
    for key in ("smi_message", "nvml_error"):
        if f["nvidia"].get(key):
            out.append(f["nvidia"][key])
    for key in ("error",):
        if f["python"].get(key):
            out.append(f["python"][key])
    for key in ("import_error", "cuda_error"):
        if f["torch"].get(key):
            out.append(f["torch"][key])
    return out


def one_clear_message(data: dict[str, Any], *needles: str) -> str:
    """The report holds a message naming every needle, and it is one short line."""
    hits = [m for m in messages(data) if all(n.lower() in m.lower() for n in needles)]
    assert hits, (needles, messages(data))
    best = min(hits, key=len)
    assert "\n" not in best.strip() and len(best) < 600, best
    return best


def problems(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The report's non-ok findings as sorted (severity, code) pairs, duplicates kept."""
    return sorted((f["severity"], f["code"]) for f in data["findings"] if f["severity"] != "ok")


# The fake machine's target venv has no torch: that warning is in every report that reaches the target.
NO_TORCH = ("warn", "torch-missing")


def pin(run: Run, data: dict[str, Any], rc: int, *expected: tuple[str, str]) -> None:
    """The fault's outcome, pinned: this exit code and exactly these (severity, code) problems."""
    assert (run.rc, problems(data)) == (rc, sorted(expected)), (run.rc, [(f["severity"], f["code"], f["detail"][:200]) for f in data["findings"]])


def finding(data: dict[str, Any], code: str, says: str, *, title: str | None = None) -> dict[str, Any]:
    """The one finding with ``code`` whose title or detail carries the sentence ``says`` (verbatim); its title is
    one line (``title``, when given, exactly). The detail may go on to quote a tool's stderr."""
    hits = [f for f in data["findings"] if f["code"] == code and (says in f["detail"] or says in f["title"])]
    assert len(hits) == 1, (code, says, [(f["code"], f["title"], f["detail"]) for f in data["findings"]])
    f = hits[0]
    assert "\n" not in f["title"], f
    if title is not None:
        assert f["title"] == title, f["title"]
    return f


def assert_usage_error(run: Run, *needles: str) -> str:
    """Bad input: exit 2, nothing on stdout, exactly one ``stackdoctor: ...`` line on stderr naming the needles."""
    assert run.rc == 2, (run.rc, run.stdout[-500:], run.stderr)
    assert run.elapsed < BOUND_S
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run.stderr
    line = lines[0]
    assert line.startswith("stackdoctor: "), line
    for n in needles:
        assert n.lower() in line.lower(), (n, line)
    return line


def run_cli_as_nobody(inst: UnprivilegedInstall, args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 90) -> Run:
    """``stackdoctor ARGS`` as uid/gid 65534, from the copy that user can read; asserts no traceback (``helpers.run_sd``)."""
    return run_sd([inst.stackdoctor, *args], env={**env, **inst.env}, cwd=cwd, timeout=timeout, user=NOBODY)
