"""Nothing of an install outlives `done:` (issue 44, item 7): the commit point is before `done:`; a signal after it
never turns the success into exit 130, and the backup of the replaced torch is removed (off the user's wait) or, when
the process is killed before it could be, `check` names it with its size and the command that removes it, and the
next install (one that is "already satisfied" too) or `--recover` removes it and says so.

Real pip installs tests/indexserver.py's fake torch (NOT PyTorch) from a server on 127.0.0.1 into a real venv (the
fixtures of tests/test_install.py); the instants are stackdoctor's test hook (``STACKDOCTOR_TEST_HOOK_DIR``), never
sleeps: ``committed`` (just after the commit point, before the leftovers and `done:`) and ``done`` (after `done:` is
printed, before the backup goes).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_install import REPO, cli_env, family, py, seeded, server, venv  # noqa: E402, F401

from stackdoctor.install.journal import ASIDE, dispose_aside  # noqa: E402

pytestmark = [pytest.mark.posix, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


def _args(server, venv) -> list[str]:
    return ["--python", py(venv), "--torch", "2.13.0", "--variant", "cu130", "--index-base", server.base(), "--yes"]


def asides(venv: Path) -> list[str]:
    return sorted(p.name for p in venv.iterdir() if p.name.startswith(ASIDE))


def _gone_within(venv: Path, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while asides(venv) and time.monotonic() < end:
        time.sleep(0.05)
    return not asides(venv)


def _release(hooks: Path, keep: str | None = None) -> None:
    """Every hook point reached (the transaction's, and the backup worker's ``backup-mid``), but ``keep``, goes on at
    once: a point nobody releases waits 60 s in the hook (a minute of nothing per trial)."""
    for p in list(hooks.iterdir()):
        if not p.name.endswith(".go") and p.name != keep and not (hooks / f"{p.name}.go").exists():
            (hooks / f"{p.name}.go").write_text("go")


def install_signalled_at(point: str, sig: int, server, venv, env, tmp_path) -> tuple[int, str]:
    """The install, with ``sig`` sent to it when it reaches the hook ``point``; its exit code and stderr."""
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    env = dict(env, STACKDOCTOR_TEST_HOOK_DIR=str(hooks), COLUMNS="250")
    errf = open(tmp_path / "stderr", "w+")  # noqa: SIM115 - read after the process ends
    proc = subprocess.Popen([sys.executable, "-m", "stackdoctor", "install", *_args(server, venv)], env=env, cwd=REPO,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errf)
    end = time.monotonic() + 180
    while not (hooks / point).exists():
        assert proc.poll() is None and time.monotonic() < end, (tmp_path / "stderr").read_text()
        time.sleep(0.01)
        _release(hooks, keep=point)  # the others go on at once
    proc.send_signal(sig)
    time.sleep(0.2)  # the signal is handled (or kills) before the hook sees its go
    (hooks / f"{point}.go").write_text("go")
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        _release(hooks)
        time.sleep(0.01)
    code = proc.wait(timeout=60)
    errf.seek(0)
    return code, errf.read()


@pytest.mark.parametrize(("point", "sig"), [("committed", signal.SIGINT), ("done", signal.SIGTERM)])
def test_a_signal_after_the_commit_point_keeps_exit_0_and_leaves_no_backup(point, sig, server, venv, cli_env, tmp_path):
    code, err = install_signalled_at(point, sig, server, venv, cli_env, tmp_path)
    assert code == 0, err[-3000:]
    assert "done: " in err and "interrupted" not in err, err[-3000:]
    assert family(venv)["torch"] == "2.13.0+cu130"
    assert _gone_within(venv, 30), asides(venv)
    assert not (venv / ".stackdoctor-install").exists()


def _check(venv: Path, env: dict[str, str]) -> dict:
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", py(venv), "--no-kernels", "--json"],
                       env=env, cwd=REPO, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    return json.loads(p.stdout)


def _sd(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stackdoctor", "install", *args], env=env, cwd=REPO, capture_output=True, text=True,
                          timeout=180, stdin=subprocess.DEVNULL)


def test_sigkill_right_after_done_leaves_a_backup_that_check_names_and_the_next_run_removes(server, venv, cli_env, tmp_path):
    code, err = install_signalled_at("done", signal.SIGKILL, server, venv, cli_env, tmp_path)
    assert code == -signal.SIGKILL and "done: " in err, err[-3000:]
    left = asides(venv)
    assert len(left) == 1, left  # the new build is committed; its backup of the old one is all that is left
    assert family(venv)["torch"] == "2.13.0+cu130"
    found = [f for f in _check(venv, cli_env)["findings"] if f["code"] == "install-backup-left"]
    assert len(found) == 1, found
    assert re.search(re.escape(str(venv / left[0])) + r" holds .*\(\d+(\.\d)? (bytes|kB|MB)\)", found[0]["detail"]), found[0]
    assert found[0]["fix"] == f"stackdoctor install --python {py(venv)} --recover"
    kept = tmp_path / "kept"  # the same leftover again, for --recover after the "already satisfied" install
    shutil.copytree(venv / left[0], kept, symlinks=True)

    p = _sd(_args(server, venv), cli_env)  # the same install again: already satisfied, and the backup goes
    assert p.returncode == 0 and "already" in p.stderr, p.stderr[-3000:]
    assert "removed the backup of the torch an earlier install replaced" in p.stderr and left[0] in p.stderr, p.stderr[-3000:]
    assert _gone_within(venv, 30), asides(venv)
    assert not [f for f in _check(venv, cli_env)["findings"] if f["code"] == "install-backup-left"]

    shutil.move(str(kept), str(venv / left[0]))
    p = _sd(["--python", py(venv), "--recover"], cli_env)  # --recover removes it, and does not say "nothing to do"
    assert p.returncode == 0 and "nothing to do" not in p.stderr, p.stderr[-3000:]
    assert "removed the backup of the torch an earlier install replaced" in p.stderr and left[0] in p.stderr, p.stderr[-3000:]
    assert _gone_within(venv, 30), asides(venv)


def test_a_large_backup_is_removed_by_a_detached_child_that_a_sweep_and_check_leave_alone(tmp_path):
    """Past the inline size the folder goes in a child of its own session, named in the folder as its owner."""
    from stackdoctor.install.journal import Journal, stale_asides

    j = Journal(prefix=str(tmp_path), python=sys.executable)
    j.create()
    files = Path(j.backup) / "files"
    files.mkdir(parents=True)
    for i in range(200):
        (files / f"m{i}").write_bytes(b"x" * 1024)
    aside, err = j.set_aside()
    assert err is None and aside is not None
    assert dispose_aside(aside, inline_bytes=1024) == "later"
    data = json.loads((Path(aside) / "journal.json").read_text()) if (Path(aside) / "journal.json").exists() else None
    if data is not None:  # the child may already have finished
        assert data["pid"] != os.getpid()
        assert stale_asides(str(tmp_path)) in ([], [aside])  # not stale while its remover runs (it may have just ended)
    end = time.monotonic() + 30
    while os.path.exists(aside) and time.monotonic() < end:
        time.sleep(0.02)
    assert not os.path.exists(aside)
    assert dispose_aside(str(tmp_path / "unrelated")) is None
