"""Which interpreter is diagnosed when no ``--python`` names one: the user's environment, not stackdoctor's.

A CLI tool is installed once (``pipx install``, ``uv tool install``, ``uvx``) into a private venv and pointed at
the user's environments, so its own interpreter is the wrong default. The rules, first that applies:

1. ``--python PATH``;
2. the active virtualenv (``VIRTUAL_ENV``);
3. the active conda env (``CONDA_PREFIX``);
4. a ``.venv`` in the current folder or one above it (uv's and others' convention);
5. ``python3`` on ``PATH`` (on Windows ``python``, else the ``py`` launcher's Python 3).

stackdoctor's own interpreter is the target only when one of these lands on it (``self`` is kept for a folder with
no Python on PATH at all, and said so). An active venv or conda env, or a ``.venv`` folder, that holds no interpreter
is one sentence and exit 2 (:class:`~stackdoctor.core.errors.UsageError`): a silent switch to another interpreter would
diagnose the wrong environment. The rule that chose is ``facts.python.selected_by``.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path

from stackdoctor.core.errors import UsageError
from stackdoctor.model.probing import Target

__all__ = ["CONDA_PYTHONS", "RULES", "VENV_PYTHONS", "select_target"]

# the values of facts.python.selected_by, in the order they are tried ("self": no other rule found an interpreter)
RULES = ("--python", "VIRTUAL_ENV", "CONDA_PREFIX", ".venv", "PATH", "self")

# Where an environment keeps its interpreter: a venv's bin/python (POSIX) or Scripts\python.exe
# (Windows); a conda env's bin/python (POSIX) or python.exe at its root (Windows). The native
# layout is tried first; both are tried on every OS (an env made by MSYS2 or copied across).
VENV_PYTHONS = {"posix": (("bin", "python"), ("Scripts", "python.exe")), "nt": (("Scripts", "python.exe"), ("bin", "python"))}
CONDA_PYTHONS = {"posix": (("bin", "python"), ("python.exe",)), "nt": (("python.exe",), ("bin", "python"))}


def _inside(prefix: str, layouts: tuple[tuple[str, ...], ...]) -> str | None:
    """The interpreter of the environment at ``prefix``: the first layout that is a file, else one that is a link
    (a dangling ``bin/python`` is the venv's interpreter all the same: its check says it is broken)."""
    cands = [os.path.join(prefix, *parts) for parts in layouts]
    return next((c for c in cands if os.path.isfile(c)), None) or next((c for c in cands if os.path.islink(c)), None)


def _active(var: str, prefix: str, layouts: tuple[tuple[str, ...], ...]) -> Target:
    python = _inside(prefix, layouts)
    if python is None:
        inside = os.path.join(prefix, *layouts[0])
        if var == "VIRTUAL_ENV":
            raise UsageError(f"the active virtualenv {prefix} (from VIRTUAL_ENV) has no Python interpreter ({inside} is missing); recreate it, deactivate it, or name an interpreter with --python.")
        raise UsageError(f"the active conda env {prefix} (from CONDA_PREFIX) has no Python interpreter ({inside} is missing); install python in it, deactivate it, or name an interpreter with --python.")
    return Target(python, var)


def _dot_venv(cwd: Path, kind: str) -> Target | None:
    """A ``.venv`` in ``cwd`` or a folder above it. A ``.venv`` with a ``pyvenv.cfg`` but no interpreter is broken:
    one sentence. A ``.venv`` that is neither (not a venv) is passed over."""
    for folder in (cwd, *cwd.parents):
        venv = folder / ".venv"
        if not venv.is_dir():
            continue
        python = _inside(str(venv), VENV_PYTHONS[kind])
        if python is not None:
            return Target(python, ".venv")
        if (venv / "pyvenv.cfg").is_file():
            inside = os.path.join(str(venv), *VENV_PYTHONS[kind][0])
            raise UsageError(f"the virtualenv {venv} (a .venv in this folder or above it) has no Python interpreter ({inside} is missing); recreate it, or name an interpreter with --python.")
    return None


def _on_path(env: Mapping[str, str], kind: str) -> Target | None:
    """``python3`` on PATH. On Windows: ``python`` on PATH (not the Store's ``WindowsApps`` alias, which opens the
    Store), else the ``py`` launcher's Python 3, resolved to its interpreter (``py`` itself is not an environment)."""
    path = env.get("PATH", env.get("Path", ""))
    if kind != "nt":
        found = shutil.which("python3", path=path)
        return Target(found, "PATH") if found else None
    found = shutil.which("python", path=path)
    if found and "windowsapps" not in found.lower():
        return Target(found, "PATH")
    launcher = shutil.which("py", path=path)
    real = _launcher_python(launcher, env) if launcher else None
    return Target(real, "PATH") if real else None


def _launcher_python(launcher: str, env: Mapping[str, str]) -> str | None:
    """The interpreter Windows' ``py -3`` starts (``py`` itself is a launcher, not the environment)."""
    from stackdoctor.system import System

    res = System(env=dict(env)).run([launcher, "-3", "-c", "import sys; print(sys.executable)"], timeout=10.0, parse_env=False, record=False)
    line = res.stdout.strip().splitlines()[-1:] if res.status == "ok" else []
    return line[0].strip() if line and os.path.isfile(line[0].strip()) else None


def select_target(python: str | None, env: Mapping[str, str], os_name: str | None = None, cwd: str | os.PathLike[str] | None = None) -> Target:
    """The interpreter to diagnose, and the rule that chose it (module docstring).

    ``os_name`` (default ``os.name``) orders the layouts: ``"nt"`` tries ``Scripts\\python.exe`` first.
    ``cwd`` (default the current folder) is where the ``.venv`` search starts.

    :raises UsageError: an active environment, or a ``.venv`` that is a venv, holds no interpreter.
    """
    if python:
        return Target(python, "--python")
    kind = "nt" if (os_name or os.name) == "nt" else "posix"
    venv = env.get("VIRTUAL_ENV")
    if venv:
        return _active("VIRTUAL_ENV", venv, VENV_PYTHONS[kind])
    conda = env.get("CONDA_PREFIX")
    if conda:
        return _active("CONDA_PREFIX", conda, CONDA_PYTHONS[kind])
    try:
        here = Path(cwd) if cwd is not None else Path.cwd()
    except OSError:  # the current folder was removed
        here = None
    found = (_dot_venv(here.absolute(), kind) if here is not None else None) or _on_path(env, kind)
    return found or Target(sys.executable, "self")
