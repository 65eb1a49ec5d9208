"""The user's environment by default (issue 47): installed as a tool (``uv tool install``, ``pipx``), stackdoctor checks
the active venv, the active conda env, a ``.venv`` here or above, else the ``python3`` on PATH, never its own private
venv by accident; a broken active venv is one sentence and exit 2, never a silent switch.

The end-to-end test is a real ``uv tool install`` of the built wheel (its dependencies from a folder ``pip download``
fills from pip's own configured sources), run with HOME and the XDG folders in a temporary folder and no venv active."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import find_test_uv
from helpers import check_report_invariants

from stackdoctor.core.errors import UsageError
from stackdoctor.pipeline.which_python import select_target


def _venv(root: Path, cfg: bool = True) -> Path:
    """A venv's layout without running anything: bin/python (a link to this interpreter) and pyvenv.cfg."""
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "python").symlink_to(sys.executable)
    if cfg:
        (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


@pytest.mark.posix
def test_the_rules_in_order(tmp_path):
    venv, conda, proj = _venv(tmp_path / "active"), _venv(tmp_path / "conda"), tmp_path / "proj"
    _venv(proj / ".venv")
    (proj / "src" / "deep").mkdir(parents=True)
    onpath = tmp_path / "onpath"
    onpath.mkdir()
    (onpath / "python3").symlink_to(sys.executable)
    env = {"PATH": str(onpath), "VIRTUAL_ENV": str(venv), "CONDA_PREFIX": str(conda)}
    assert select_target("/x/python", env, cwd=proj).selected_by == "--python"
    t = select_target(None, env, cwd=proj)  # the active venv first, though a .venv is here
    assert (t.python, t.selected_by) == (str(venv / "bin" / "python"), "VIRTUAL_ENV")
    del env["VIRTUAL_ENV"]
    assert (select_target(None, env, cwd=proj).python, select_target(None, env, cwd=proj).selected_by) == (str(conda / "bin" / "python"), "CONDA_PREFIX")
    del env["CONDA_PREFIX"]
    t = select_target(None, env, cwd=proj / "src" / "deep")  # a .venv in a folder above
    assert (t.python, t.selected_by) == (str(proj / ".venv" / "bin" / "python"), ".venv")
    t = select_target(None, env, cwd=tmp_path)
    assert (t.python, t.selected_by) == (str(onpath / "python3"), "PATH")
    t = select_target(None, {"PATH": str(tmp_path / "nothing")}, cwd=tmp_path)
    assert (t.python, t.selected_by) == (sys.executable, "self")  # no Python anywhere: its own, and the report says so


@pytest.mark.posix
def test_a_broken_environment_is_a_sentence_never_a_switch(tmp_path):
    with pytest.raises(UsageError, match=r"^the active virtualenv .*gone \(from VIRTUAL_ENV\) has no Python interpreter \(.*gone/bin/python is missing\)"):
        select_target(None, {"VIRTUAL_ENV": str(tmp_path / "gone"), "PATH": "/usr/bin"}, cwd=tmp_path)
    with pytest.raises(UsageError, match=r"^the active conda env .* \(from CONDA_PREFIX\) has no Python interpreter"):
        select_target(None, {"CONDA_PREFIX": str(tmp_path), "PATH": "/usr/bin"}, cwd=tmp_path)
    dangling = tmp_path / "dangling"
    (dangling / "bin").mkdir(parents=True)
    (dangling / "bin" / "python").symlink_to(tmp_path / "removed-python")  # the base Python it was made from is gone
    assert select_target(None, {"VIRTUAL_ENV": str(dangling)}, cwd=tmp_path).python == str(dangling / "bin" / "python")  # its check says why
    proj = tmp_path / "proj"
    (proj / ".venv").mkdir(parents=True)
    (proj / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    with pytest.raises(UsageError, match=r"^the virtualenv .*\.venv \(a \.venv in this folder or above it\) has no Python interpreter"):
        select_target(None, {"PATH": "/usr/bin"}, cwd=proj)
    (proj / ".venv" / "pyvenv.cfg").unlink()  # a folder named .venv that is not a venv is passed over
    assert select_target(None, {"PATH": "/usr/bin"}, cwd=proj).selected_by in ("PATH", "self")


@pytest.fixture(scope="module")
def tool_install(tmp_path_factory, stackdoctor_wheel) -> tuple[Path, dict[str, str]]:
    """``uv tool install`` of the built wheel, with HOME, XDG and uv's folders in a temporary folder."""
    uv = find_test_uv()
    if uv is None:
        pytest.fail(f"uv (a declared test dependency) is not installed beside {sys.executable}: pip install -e '.[test]'")
    root = tmp_path_factory.mktemp("uvtool")
    deps = root / "wheels"
    # the dependencies from wherever pip is configured to take them (the suite's own install came from there too)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--dest", str(deps), str(stackdoctor_wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    home = root / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH", "STACKDOCTOR_SYSROOT") and not k.startswith(("UV_", "XDG_"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"), XDG_DATA_HOME=str(home / ".local/share"),
               XDG_BIN_HOME=str(home / ".local/bin"), UV_TOOL_DIR=str(root / "tools"), UV_TOOL_BIN_DIR=str(root / "bin"), UV_CACHE_DIR=str(root / "uvcache"),
               UV_PYTHON_DOWNLOADS="never", UV_NO_CONFIG="1", STACKDOCTOR_CACHE_DIR=str(root / "sdcache"))
    r = subprocess.run([uv, "tool", "install", "--no-index", "--find-links", str(deps), "--python", sys.executable, str(stackdoctor_wheel)],
                       capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    exe = root / "bin" / "stackdoctor"
    assert exe.is_file(), list((root / "bin").iterdir())
    return exe, env


def _run(exe: Path, env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=180, env=env, cwd=cwd)
    assert "Traceback" not in r.stderr, r.stderr
    return r


@pytest.mark.slow
@pytest.mark.posix
def test_a_uv_tool_install_checks_the_users_python_not_its_own(tool_install, torch_python, tmp_path):
    exe, env = tool_install
    # the user's python3 on PATH is the torch venv's (a venv's bin/ on PATH, no venv active)
    env = {**env, "PATH": f"{Path(torch_python).parent}{os.pathsep}/usr/bin{os.pathsep}/bin"}
    work = tmp_path / "work"
    work.mkdir()
    r = _run(exe, env, work, "check", "--json", "--no-kernels")
    assert r.returncode in (0, 1), r.stderr
    data = json.loads(r.stdout)
    check_report_invariants(data)
    py = data["facts"]["python"]
    assert (py["executable"], py["selected_by"]) == (str(Path(torch_python).parent / "python3"), "PATH"), py
    assert data["facts"]["torch"]["version"] == "2.13.0+cpu"
    screen = _run(exe, {**env, "COLUMNS": "200"}, work, "check", "--no-kernels")
    assert "python3 on PATH" in screen.stdout, screen.stdout
    plan = _run(exe, env, work, "install", "--dry-run", "--offline", "--json")
    assert str(exe.parent) not in plan.stdout and "/tools/stackdoctor/" not in plan.stdout  # never the tool's own venv
    # a .venv in the current folder (from a folder below it too) is the user's project: it wins over PATH
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")], check=True, timeout=120)
    (work / "src").mkdir()
    r = _run(exe, env, work / "src", "check", "--json", "--no-kernels")
    py = json.loads(r.stdout)["facts"]["python"]
    assert (py["executable"], py["selected_by"]) == (str(work / ".venv" / "bin" / "python"), ".venv"), py


@pytest.mark.slow
@pytest.mark.posix
def test_a_broken_active_venv_is_exit_2(tool_install, tmp_path):
    exe, env = tool_install
    gone = tmp_path / "gone-venv"
    for args in (("check", "--no-kernels"), ("install", "--dry-run")):
        r = _run(exe, {**env, "VIRTUAL_ENV": str(gone)}, tmp_path, *args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr == f"stackdoctor: the active virtualenv {gone} (from VIRTUAL_ENV) has no Python interpreter ({gone}/bin/python is missing); recreate it, deactivate it, or name an interpreter with --python.\n"
