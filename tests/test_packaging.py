"""README's first quick-start command, for real: a fresh venv, `pip install .` (a built wheel, not
an editable checkout), then `stackdoctor check`. This is what catches a dependency that only this
machine happens to have, or data that the wheel does not ship.

`pip install .` is pip building the checkout into a wheel, then installing that wheel with its
dependencies; the build is the session's ``stackdoctor_wheel`` (shared with the unprivileged tests),
the install happens here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import check_report_invariants, venv_bin


@pytest.fixture(scope="module")
def installed(tmp_path_factory, stackdoctor_wheel) -> Path:
    venv = tmp_path_factory.mktemp("quickstart") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    build = tmp_path_factory.mktemp("build")
    r = subprocess.run(
        [str(venv_bin(venv)), "-m", "pip", "install", "-q", str(stackdoctor_wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=build,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return venv


def sd(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "STACKDOCTOR_SYSROOT")}
    env["PATH"] = f"{venv_bin(venv).parent}{os.pathsep}{env.get('PATH', '')}"  # its python3 is the one on PATH (no venv active)
    return subprocess.run([str(venv_bin(venv, "stackdoctor")), *args], capture_output=True, text=True, timeout=120, env=env, cwd=venv)


@pytest.mark.slow
def test_check_runs_from_a_plain_install(installed):
    r = sd(installed, "check", "--json", "--no-kernels")
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    data = json.loads(r.stdout)
    check_report_invariants(data)
    assert data["facts"]["python"]["executable"].startswith(str(installed))  # the python3 on PATH, its own venv's here
    assert data["facts"]["python"]["selected_by"] == "PATH"


@pytest.mark.slow
def test_the_wheel_ships_its_data(installed):
    r = sd(installed, "matrix", "show", "--torch", "2.13.0", "--json")
    assert r.returncode == 0, r.stderr
    assert "2.13.0" in r.stdout
    r = sd(installed, "explain", "driver-too-old", "--lang", "zh")
    assert r.returncode == 0 and "nvidia-smi" in r.stdout
    site = next((installed / "lib").glob("python3*/site-packages")) / "stackdoctor"
    assert (site / "schemas" / "report.schema.json").is_file()
    assert {p.name for p in (site / "compat_matrix").glob("*.yaml")} >= {"cuda.yaml", "gpus.yaml", "releases.yaml", "rocm.yaml", "jetson.yaml", "peaks.yaml"}
    assert (site / "_worker" / "sd_target.py").is_file()


@pytest.mark.slow
def test_bad_flag_is_exit_2_with_the_installed_dependencies(installed):
    r = sd(installed, "check", "--no-such-flag")
    assert r.returncode == 2 and r.stderr.startswith("stackdoctor: No such option"), r.stderr
