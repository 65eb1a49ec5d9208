"""``--from-source`` works only in a ``--source-dir`` that is absent, empty, or a PyTorch checkout (issue 44, item 9):
another project's real git repository with a ``v2.13.0`` tag, a link to ``/`` and a folder of other files are refused
in one sentence (exit 2) and left exactly as they were (HEAD, every file); a PyTorch checkout (its remote, or its
version.txt and setup.py) and an empty folder pass. The real CLI, real git."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import run_sd

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="a link to / and POSIX paths")


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env={**os.environ, **GIT_ENV}).stdout.strip()


def state(repo: Path) -> dict[str, str]:
    """Every file's sha256 (the .git folder too), HEAD and the checked-out branch."""
    out = {str(p.relative_to(repo)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(repo.rglob("*")) if p.is_file()}
    out["@HEAD"] = git("rev-parse", "HEAD", cwd=repo)
    out["@branch"] = git("rev-parse", "--abbrev-ref", "HEAD", cwd=repo)
    return out


def from_source(tmp_path: Path, source_dir: str, *more: str):
    env = {"HOME": str(tmp_path), "NO_COLOR": "1", "VIRTUAL_ENV": os.path.dirname(os.path.dirname(sys.executable))}
    return run_sd(["install", "--from-source", "--torch", "2.13.0", "--python", sys.executable, "--source-dir", source_dir, "--yes",
                   "--step", "clone", *more], env=env, cwd=tmp_path, timeout=180)


def test_another_projects_repository_with_the_tag_is_refused_and_untouched(tmp_path):
    repo = tmp_path / "other"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    git("remote", "add", "origin", "https://github.com/someone/another-project.git", cwd=repo)
    (repo / "setup.py").write_text("from setuptools import setup\nsetup(name='another-project')\n")
    (repo / "README").write_text("v1\n")
    git("add", ".", cwd=repo)
    git("commit", "-qm", "one", cwd=repo)
    git("tag", "v2.13.0", cwd=repo)
    (repo / "README").write_text("v2\n")
    git("commit", "-qam", "two", cwd=repo)
    before = state(repo)
    res = from_source(tmp_path, str(repo))
    assert res.rc == 2, res.stderr
    assert "is neither empty nor a PyTorch checkout" in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert state(repo) == before  # HEAD, branch and every file as they were


@pytest.mark.parametrize("what", ["link-to-root", "other-files", "a-file"])
def test_a_link_to_root_or_a_folder_of_other_files_is_refused(what, tmp_path):
    target = tmp_path / "dir"
    if what == "link-to-root":
        target.symlink_to("/")
    elif what == "other-files":
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    else:
        target.write_text("a file\n")
    res = from_source(tmp_path, str(target), "--dry-run")
    assert res.rc == 2 and "Traceback" not in res.stderr, res.stderr
    assert ("is not a folder" if what == "a-file" else "is neither empty nor a PyTorch checkout") in res.stderr, res.stderr
    if what == "other-files":
        assert sorted(os.listdir(target)) == ["notes.txt"]


@pytest.mark.parametrize("what", ["empty", "pytorch-remote", "pytorch-files"])
def test_an_empty_folder_or_a_pytorch_checkout_passes(what, tmp_path):
    target = tmp_path / "pytorch"
    target.mkdir()
    if what == "pytorch-remote":
        git("init", "-q", "-b", "main", cwd=target)
        git("remote", "add", "origin", "https://github.com/pytorch/pytorch.git", cwd=target)
    elif what == "pytorch-files":
        (target / "version.txt").write_text("2.13.0a0\n")
        (target / "setup.py").write_text('# Welcome to the PyTorch setup.py.\npackage_name = os.getenv("TORCH_PACKAGE_NAME", "torch")\n')
    res = from_source(tmp_path, str(target), "--dry-run")
    assert res.rc == 0, res.stderr
