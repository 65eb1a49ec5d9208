"""tests/forkserver.py, the suite's way of starting stackdoctor cheaply, against the way it stands for: a command
forked from the server prints, byte for byte, what the console script started as a fresh interpreter prints, with
the same exit code; it gets its own working directory, environment and standard streams; a timeout stops it as
``subprocess.run``'s does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import forkserver
import pytest
from helpers import console_script, machine_env

MACHINES = Path(__file__).resolve().parent / "fixtures" / "machines"

pytestmark = pytest.mark.skipif(not forkserver.enabled(), reason="tests/forkserver.py forks only on Linux (and STACKDOCTOR_TEST_FORK=0 turns it off)")


def replayable(tmp_path: Path, machine: str) -> Path:
    """A recorded machine's facts as a report ``check --replay`` reads."""
    facts = json.loads((MACHINES / f"{machine}.json").read_text(encoding="utf-8"))["facts"]
    path = tmp_path / f"{machine}.json"
    path.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}), encoding="utf-8")
    return path


def both(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess]:
    """The command forked from a server (asked twice: a server starts the second time its startup variables are
    asked for) and as a fresh interpreter."""
    forked = forkserver.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)
    if forked is None:
        forked = forkserver.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, timeout=120)
    assert forked is not None, "the fork server refused to serve (see the warning it gave)"
    fresh = subprocess.run(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return forked, fresh


COMMANDS = {
    "check": ["check", "--replay", "{r}"],
    "check-json": ["check", "--replay", "{r}", "--json"],
    "check-zh": ["check", "--replay", "{r}", "--lang", "zh"],
    "check-markdown": ["check", "--replay", "{r}", "--format", "markdown"],
    "plan-json": ["install", "--replay", "{r}", "--offline", "--json"],
    "plan-torchvision": ["install", "--replay", "{r}", "--offline", "torch", "torchvision"],
    "explain": ["explain", "driver-too-old"],
    "version": ["--version"],
    "usage-error": ["check", "--no-such-flag"],
    "missing-file": ["check", "--replay", "{tmp}/not-there.json"],
    "help": ["install", "--help"],
}


@pytest.mark.posix
@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("machine", ["rtx3090-driver535", "mixed-rtx5090-gtx1080-driver580"])
def test_a_forked_command_prints_what_a_fresh_interpreter_prints(name, machine, tmp_path):
    r = replayable(tmp_path, machine)
    args = [a.format(r=r, tmp=tmp_path) for a in COMMANDS[name]]
    env = machine_env(tmp_path / "bin", None, COLUMNS="100")
    for argv in ([*console_script(), *args], [sys.executable, "-m", "stackdoctor", *args]):
        forked, fresh = both(argv, env, tmp_path)
        assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.stdout or fresh.stderr


@pytest.mark.posix
def test_a_forked_command_runs_in_its_own_folder_with_its_own_environment(tmp_path):
    """A relative path is read from the command's working directory, the language comes from its LANG, and what
    it printed arrives on the pipes the test reads, the error on the other."""
    r = replayable(tmp_path, "rtx3090-driver535")
    zh = machine_env(tmp_path / "bin", None, LANG="zh_CN.UTF-8")
    en = machine_env(tmp_path / "bin", None)
    for _ in range(2):  # a server per startup environment, from the second time it is asked for
        said_zh = forkserver.run([*console_script(), "check", "--replay", r.name], env=zh, cwd=tmp_path, stdin=None, timeout=120)
        said_en = forkserver.run([*console_script(), "check", "--replay", r.name], env=en, cwd=tmp_path, stdin=None, timeout=120)
    assert said_zh is not None and said_en is not None
    assert said_zh.returncode == said_en.returncode == 0, (said_zh.stderr, said_en.stderr)  # a warning alone
    assert "未安装" in said_zh.stdout and "not installed" in said_en.stdout, (said_zh.stdout, said_en.stdout)
    (tmp_path / "elsewhere").mkdir()
    lost = forkserver.run([*console_script(), "check", "--replay", r.name], env=en, cwd=tmp_path / "elsewhere", stdin=None, timeout=120)
    assert lost is not None and lost.returncode == 2 and not lost.stdout and lost.stderr.startswith("stackdoctor: "), lost
    with pytest.raises(FileNotFoundError):  # as subprocess.run: a working directory that is not there is the caller's error
        forkserver.run([*console_script(), "--version"], env=en, cwd=tmp_path / "not-there", stdin=None, timeout=120)


@pytest.mark.posix
def test_a_timeout_stops_the_forked_command_as_subprocess_run_does(tmp_path, fake_bin):
    """A command that outlives its timeout: ``subprocess.TimeoutExpired``, at the timeout, and the command is gone."""
    pidfile = tmp_path / "pid"
    fake_bin("nvidia-smi", script=f'echo $PPID > {pidfile}\nsleep 60\n')
    env = dict(os.environ)
    for _ in range(2):
        forkserver.run([*console_script(), "--version"], env=env, cwd=tmp_path, stdin=None, timeout=60)
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        forkserver.run([*console_script(), "check", "--no-kernels"], env=env, cwd=tmp_path, stdin=None, timeout=3)
    assert time.monotonic() - start < 20
    pid = int(pidfile.read_text())  # the command's own pid, as the tool it started saw it
    end = time.monotonic() + 10
    while time.monotonic() < end and Path(f"/proc/{pid}").exists():
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), f"the timed-out command {pid} still runs"


@pytest.mark.posix
def test_more_startup_environments_than_servers_are_still_served(tmp_path, monkeypatch):
    """Past the servers a test process keeps, the one asked for longest ago ends and the new set is served (a full
    house once left a test of this file with fresh interpreters only, in CI)."""
    monkeypatch.setattr(forkserver, "MAX_SERVERS", 1)
    for lang in ("C.UTF-8", "zh_CN.UTF-8", "C.UTF-8"):
        env = machine_env(tmp_path / "bin", None, LANG=lang)
        for _ in range(2):
            said = forkserver.run([*console_script(), "--version"], env=env, cwd=tmp_path, stdin=None, timeout=60)
        assert said is not None and said.returncode == 0 and said.stdout.startswith("stackdoctor "), (lang, said)
        assert len(forkserver._SERVERS) == 1
