"""What a new user trips over, fourth pass (issue 46): each item through the real console script; the terminal
items on a real pseudo-terminal (Python's ``pty``), the pipe items through a real shell pipe."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import console_script, machine_env, run_sd


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


def sd(*args: str) -> str:
    return shlex.join([*console_script(), *args])


# ---------------------------------------------------------------- item 5: a closed pipe keeps the exit code


def piped_codes(command: str, tmp_path: Path, runs: int) -> list[str]:
    """``command | head -1`` and ``command | head -n 0`` (a reader gone before the first line: the race the first
    one loses now and then, every time) under ``set -o pipefail``, ``runs`` times each: the pipeline's exit codes."""
    script = (f"set -o pipefail; for i in $(seq {runs}); do for n in 1 0; do {command} 2>/dev/null | head -n $n >/dev/null; echo $?; done; done")
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env(tmp_path), timeout=300)
    return r.stdout.split()


@pytest.mark.posix
def test_list_checks_into_head_exits_as_if_read_whole(tmp_path):
    """The reader leaves after one line; stackdoctor's exit code stays the one a full read gets (0), every run."""
    assert piped_codes(sd("check", "--list-checks"), tmp_path, 3) == ["0"] * 6


@pytest.mark.posix
def test_a_dry_run_plan_into_head_exits_with_the_plans_own_code(tmp_path):
    venv = tmp_path / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    cmd = sd("install", "--dry-run", "--offline", "--python", str(venv / "bin" / "python"))
    whole = run_sd(shlex.split(cmd), env=env(tmp_path))
    assert len(whole.stdout.splitlines()) > 4, whole.stdout
    assert piped_codes(cmd, tmp_path, 2) == [str(whole.rc)] * 4
