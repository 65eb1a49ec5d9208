"""install --from-source, run for real: the plan's first steps against a tiny local git repository standing in for
PyTorch's source (a release tag, a submodule), then `pip install --no-build-isolation -e .` of a trivial package into a
real venv. The real PyTorch build is never run here."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import new_venv, run_sd

pytestmark = pytest.mark.slow

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_ALLOW_PROTOCOL": "file"}


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env={**os.environ, **GIT_ENV})


# an in-tree PEP 517/660 backend (no setuptools, no network): the editable wheel is one .pth naming the source folder
BACKEND = """
import base64, hashlib, os, zipfile

NAME, VERSION = "torch_standin", "2.13.0"
DIST = f"{NAME}-{VERSION}.dist-info"
META = "Metadata-Version: 2.1\\nName: torch-standin\\nVersion: 2.13.0\\n"


def _wheel(directory, files):
    path = os.path.join(directory, f"{NAME}-{VERSION}-py3-none-any.whl")
    files = dict(files, **{f"{DIST}/METADATA": META, f"{DIST}/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"})
    rec = [f"{k},sha256={base64.urlsafe_b64encode(hashlib.sha256(v.encode()).digest()).rstrip(b'=').decode()},{len(v.encode())}" for k, v in files.items()]
    files[f"{DIST}/RECORD"] = "\\n".join(rec + [f"{DIST}/RECORD,,"]) + "\\n"
    with zipfile.ZipFile(path, "w") as z:
        for k, v in files.items():
            z.writestr(k, v)
    return os.path.basename(path)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"torch_standin.pth": os.path.abspath(".") + "\\n"})


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, {"torch_standin.py": open("torch_standin.py").read()})


def build_sdist(sdist_directory, config_settings=None):
    raise NotImplementedError
"""


@pytest.fixture(scope="module")
def standin(tmp_path_factory) -> Path:
    """A repository with a submodule and the tag v2.13.0: pyproject.toml of a trivial package (setuptools, as the venv has)."""
    root = tmp_path_factory.mktemp("src")
    sub = root / "third_party_lib"
    sub.mkdir()
    git("init", "-q", "-b", "main", cwd=sub)
    (sub / "VERSION").write_text("1\n")
    git("add", ".", cwd=sub)
    git("commit", "-qm", "sub", cwd=sub)
    repo = root / "torch-standin"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "standin_backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "torch-standin"\nversion = "2.13.0"\n'
    )
    (repo / "standin_backend.py").write_text(BACKEND)
    (repo / "torch_standin.py").write_text("WHAT = 'a stand-in for the PyTorch source (stackdoctor tests)'\n")
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "third_party/lib", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-qm", "standin", cwd=repo)
    git("tag", "v2.13.0", cwd=repo)
    return repo


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("venv") / "v"
    new_venv(d)
    return d


def test_first_steps_run_clone_submodules_and_an_editable_install(standin, venv, tmp_path):
    py = venv / "bin" / "python"
    env = {**GIT_ENV, "HOME": str(tmp_path), "NO_COLOR": "1", "VIRTUAL_ENV": str(venv), "PATH": f"{venv / 'bin'}:{os.environ['PATH']}",
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.file.allow", "GIT_CONFIG_VALUE_0": "always", "PIP_NO_INDEX": "1"}
    log = tmp_path / "build.log"
    layer = tmp_path / "m.yaml"  # the stand-in needs no CMake 3.27 (the deps step, which would install one, is not run here)
    layer.write_text('schema: stackdoctor.matrix/1\nsource_build:\n  cmake: {source: "test: the stand-in builds without CMake"}\n')
    res = run_sd(["install", "--from-source", "--torch", "2.13.0", "--python", str(py), "--source-url", str(standin), "--source-dir", "src",
                  "--matrix", str(layer),
                  "--step", "clone", "--step", "submodules", "--step", "build", "--yes", "--build-log", str(log), "--json"],
                 env=env, cwd=tmp_path, timeout=300)
    assert res.rc == 0, res.stderr + res.stdout
    doc = res.json()
    assert doc["ran"] == ["clone", "submodules", "build"] and doc["error"] is None
    assert (tmp_path / "src" / "third_party" / "lib" / "VERSION").read_text() == "1\n"  # the submodule was checked out
    tag = subprocess.run(["git", "describe", "--tags"], cwd=tmp_path / "src", capture_output=True, text=True, check=True).stdout.strip()
    assert tag == "v2.13.0"
    out = subprocess.run([str(py), "-c", "import torch_standin, os; print(os.path.dirname(torch_standin.__file__))"], capture_output=True, text=True, cwd="/")
    assert out.returncode == 0 and Path(out.stdout.strip()) == tmp_path / "src"  # editable: imported from the clone
    text = log.read_text()
    assert "$ git clone --branch v2.13.0" in text and "--no-build-isolation -v -e ." in text
    assert "[1/4] clone" in res.stderr


def test_a_missing_prerequisite_stops_before_its_step(standin, venv, tmp_path):
    """A disk minimum no disk meets (a --matrix layer): the clone is not even started."""
    layer = tmp_path / "m.yaml"
    layer.write_text('schema: stackdoctor.matrix/1\nsource_build:\n  disk: {minimum: "999999999", unit: GB, source: "test"}\n')
    env = {"HOME": str(tmp_path), "NO_COLOR": "1", "VIRTUAL_ENV": str(venv)}
    res = run_sd(["install", "--from-source", "--python", str(venv / "bin" / "python"), "--source-url", str(standin), "--source-dir", "src",
                  "--matrix", str(layer), "--step", "clone", "--json"], env=env, cwd=tmp_path, timeout=300)
    assert res.rc == 1
    doc = res.json()
    assert doc["ran"] == [] and "the clone step needs" in doc["error"] and not (tmp_path / "src").exists()


def test_without_yes_and_no_terminal_it_asks_for_yes(standin, venv, tmp_path):
    env = {"HOME": str(tmp_path), "NO_COLOR": "1", "VIRTUAL_ENV": str(venv)}
    res = run_sd(["install", "--from-source", "--python", str(venv / "bin" / "python"), "--source-url", str(standin), "--source-dir", "src",
                  "--step", "clone"], env=env, cwd=tmp_path, timeout=300)
    assert res.rc == 2 and "re-run with --yes" in res.stderr and not (tmp_path / "src").exists()
