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


# ---------------------------------------------------------------------------- packaging clean (issue 47)

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib
    return tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))


def test_license_is_an_spdx_expression_and_every_data_folder_is_a_named_package():
    data = _pyproject()
    project = data["project"]
    assert project["license"] == "Apache-2.0"  # PEP 639: a string, not the table setuptools stops reading on 2027-02-18
    assert all((PYPROJECT.parent / f).is_file() for f in project["license-files"]), project["license-files"]
    assert "version" not in project and project["dynamic"] == ["version"]  # one source: stackdoctor.__version__
    assert data["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "stackdoctor.__version__"}
    listed = set(data["tool"]["setuptools"]["packages"])
    pkg = PYPROJECT.parent / "stackdoctor"
    folders = {".".join(("stackdoctor", *d.relative_to(pkg).parts)) for d in pkg.rglob("*") if d.is_dir() and d.name != "__pycache__"}
    assert folders <= listed, f"not named in [tool.setuptools] packages, so discovery would leave them out: {sorted(folders - listed)}"


def test_each_runtime_dependency_says_why_it_is_needed():
    text = PYPROJECT.read_text(encoding="utf-8")
    block = text[text.index("dependencies = [") :]
    block = block[: block.index("\n]")].splitlines()[1:]
    deps = [i for i, ln in enumerate(block) if ln.strip().startswith('"')]
    assert len(deps) == len(_pyproject()["project"]["dependencies"])
    for i in deps:
        assert i > 0 and block[i - 1].strip().startswith("#"), f"{block[i].strip()} has no comment above it saying why"


@pytest.mark.slow
def test_the_build_prints_no_warning_and_the_wheel_ships_its_data(tmp_path):
    """The PEP 517 build setuptools runs for ``python -m build`` / ``pip wheel`` (verbose, so the backend's warnings show)."""
    import zipfile

    import stackdoctor

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # that one's "byte-compiling is disabled" is the caller's
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path), str(PYPROJECT.parent)],
                       capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    said = [ln for ln in (r.stdout + r.stderr).splitlines() if "warning" in ln.lower() or "deprecat" in ln.lower() or "is absent from" in ln]
    assert said == [], "\n".join(said)
    (wheel,) = tmp_path.glob("stackdoctor-*.whl")
    assert wheel.name.startswith(f"stackdoctor-{stackdoctor.__version__}-")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(f"stackdoctor-{stackdoctor.__version__}.dist-info/METADATA").decode()
    assert {"stackdoctor/locale/en.yaml", "stackdoctor/locale/zh.yaml", "stackdoctor/accelerators/ascend/locale/zh.yaml",
            "stackdoctor/schemas/report.schema.json", "stackdoctor/_worker/sd_target.py", "stackdoctor/compat_matrix/releases.yaml"} <= names
    assert f"stackdoctor-{stackdoctor.__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: Apache-2.0" in meta and f"Version: {stackdoctor.__version__}" in meta


def test_the_version_is_one(tmp_path):
    import stackdoctor

    r = subprocess.run([sys.executable, "-m", "stackdoctor", "--version"], capture_output=True, text=True, timeout=60)
    assert r.stdout == f"stackdoctor {stackdoctor.__version__}\n"
    from stackdoctor.model.report import Report

    assert json.loads(Report().to_json())["stackdoctor_version"] == stackdoctor.__version__
