"""A copy of stackdoctor that uid 65534 (``nobody``) can run, for the tests that drop privileges.

The tests run as root from a checkout that may sit anywhere: a ``mktemp -d`` directory (mode 0700),
``$HOME`` under ``/root``, with Python installed under ``/root/.pyenv``. uid 65534 can read none of
that, so forking this process and calling ``setuid`` leaves a child that cannot import the rest of
stackdoctor (or even the standard library's lazily imported modules). Instead, once per session:

1. the checkout is built into a wheel (``pip wheel --no-deps``: what ``pip install .`` does first);
2. an interpreter uid 65534 can run is chosen (:func:`base_interpreter`): the one running the tests
   when nobody can run it, else the first of ``/usr/bin/python3``, ``/usr/local/bin/python3`` and
   ``python3`` on ``/usr/local/bin:/usr/bin:/bin`` that nobody can run (>= 3.10). Only when there is
   none is the running interpreter's installation copied (binary, ``libpython``, standard library;
   no ``site-packages``, no ``test``) into a world-readable folder, with ``LD_LIBRARY_PATH`` set
   for it, because a pyenv-style build finds ``libpython`` through an absolute RUNPATH under the
   root-only home;
3. a venv of that interpreter in a world-readable temporary folder gets the wheel and its
   dependencies (``pip --python``, the user's pip configuration);
4. the unprivileged tests run that venv's ``stackdoctor`` (or ``python``) as a plain subprocess with
   ``user=65534, group=65534, extra_groups=[]``.

Nothing depends on where the checkout lives or who can read it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

NOBODY = 65534
PROBE = "import sys, venv, encodings, json, importlib.readers, importlib.resources, ssl, sqlite3; print('%d.%d' % sys.version_info[:2])"


def as_nobody(argv: list[str], *, env: dict[str, str] | None = None, cwd: str | os.PathLike[str] | None = "/", timeout: float = 120,
              input: str | None = None) -> subprocess.CompletedProcess[str]:
    """``argv`` run as uid/gid 65534 with no supplementary groups (needs root)."""
    return subprocess.run(argv, check=False, user=NOBODY, group=NOBODY, extra_groups=[], env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, input=input)


def nobody_can_run(python: str, env: dict[str, str] | None = None) -> str | None:
    """The ``X.Y`` version of ``python`` when uid 65534 can start it and import the standard library, else None."""
    try:
        r = as_nobody([python, "-I", "-c", PROBE], env={"PATH": "/usr/bin:/bin", **(env or {})}, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if r.returncode != 0:
        return None
    version = r.stdout.strip()
    try:
        major, minor = (int(x) for x in version.split("."))
    except ValueError:
        return None
    return version if (major, minor) >= (3, 10) else None


def _candidates() -> list[str]:
    seen: list[str] = []
    found = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
    for c in (getattr(sys, "_base_executable", None), sys.executable, "/usr/bin/python3", "/usr/local/bin/python3", found):
        if c and os.path.exists(c):
            real = os.path.realpath(c)
            if real not in seen:
                seen.append(real)
    return seen


def _copy_interpreter(dest: Path) -> tuple[str, dict[str, str]]:
    """A world-readable copy of the running interpreter's installation (for a root-only prefix)."""
    prefix = Path(sys.base_prefix)
    ver = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    (dest / "bin").mkdir(parents=True)
    exe = dest / "bin" / ver
    shutil.copy2(os.path.realpath(getattr(sys, "_base_executable", sys.executable)), exe)
    libdir = Path(sysconfig.get_config_var("LIBDIR") or prefix / "lib")
    (dest / "lib").mkdir(exist_ok=True)
    for lib in libdir.glob("libpython*.so*"):
        shutil.copy2(lib, dest / "lib" / lib.name)
    shutil.copytree(prefix / "lib" / ver, dest / "lib" / ver, symlinks=True,
                    ignore=shutil.ignore_patterns("site-packages", "test", "tests", "idlelib", "tkinter", "turtledemo", "__pycache__"))
    (dest / "lib" / ver / "site-packages").mkdir(exist_ok=True)
    (dest / "bin" / "python3").symlink_to(ver)
    return str(dest / "bin" / "python3"), {"LD_LIBRARY_PATH": str(dest / "lib")}


def base_interpreter(workdir: Path) -> tuple[str, dict[str, str], str]:
    """(interpreter uid 65534 can run, environment it needs, why it was chosen)."""
    forced = os.environ.get("STACKDOCTOR_TEST_NOBODY_BASE", "")
    if forced != "copy":
        for cand in ([forced] if forced else _candidates()):
            version = nobody_can_run(cand)
            if version:
                return cand, {}, f"{cand} (Python {version}) is readable by uid 65534"
    python, env = _copy_interpreter(workdir / "python")
    for p in [workdir, *workdir.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0))
    version = nobody_can_run(python, env)
    if not version:
        raise RuntimeError(f"no Python interpreter that uid 65534 can run, not even a copy of {sys.base_prefix} at {python}")
    return python, env, f"no interpreter readable by uid 65534 was found, so {sys.base_prefix} was copied to {python}"


@dataclass
class UnprivilegedInstall:
    """stackdoctor installed where uid 65534 can run it."""

    root: Path  # world-readable folder holding everything below
    python: str  # the venv's interpreter (stackdoctor and its dependencies importable, no torch)
    stackdoctor: str  # the venv's console script
    base: str  # the interpreter the venv was made from
    why: str  # why that interpreter
    env: dict[str, str] = field(default_factory=dict)  # what it needs in its environment (a copied interpreter's LD_LIBRARY_PATH)


def build_wheel(repo: Path, out: Path) -> Path:
    """``pip wheel --no-deps`` of the checkout (the first step of ``pip install .``)."""
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(repo)], check=False,
                       capture_output=True, text=True, timeout=600, cwd=out)
    if r.returncode != 0:
        raise RuntimeError(f"building the stackdoctor wheel failed:\n{r.stderr[-3000:]}")
    (wheel,) = out.glob("stackdoctor-*.whl")
    return wheel


def install(wheel: Path) -> UnprivilegedInstall:
    """A venv in a new world-readable temporary folder with ``wheel`` and its dependencies installed."""
    root = Path(tempfile.mkdtemp(prefix="sd-unpriv-"))
    root.chmod(0o755)
    base, env, why = base_interpreter(root)
    venv = root / "venv"
    subprocess.run([base, "-m", "venv", "--without-pip", str(venv)], check=True, env={**os.environ, **env}, capture_output=True)
    py = venv / "bin" / "python"
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--disable-pip-version-check", str(wheel)],
                       check=False, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    if r.returncode != 0:
        raise RuntimeError(f"installing the wheel for uid 65534 failed:\n{r.stderr[-3000:]}")
    for p in [root, *root.rglob("*")]:
        if not p.is_symlink():
            p.chmod(p.stat().st_mode | 0o444 | (0o111 if p.is_dir() else 0))
    script = venv / "bin" / "stackdoctor"
    if env:  # a copied interpreter needs its library path; keep the name 'stackdoctor' for the report hook
        wrapper = root / "bin" / "stackdoctor"
        wrapper.parent.mkdir(exist_ok=True)
        exports = " ".join(f"{k}={v}" for k, v in env.items())
        wrapper.write_text(f'#!/bin/sh\nexec env {exports} "{py}" -m stackdoctor "$@"\n')
        wrapper.chmod(0o755)
        script = wrapper
    return UnprivilegedInstall(root=root, python=str(py), stackdoctor=str(script), base=base, why=why, env=env)


def remove(inst: UnprivilegedInstall) -> None:
    shutil.rmtree(inst.root, ignore_errors=True)
