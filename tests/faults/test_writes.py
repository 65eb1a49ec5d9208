"""Write faults: ``--output`` into a folder that does not exist, onto a read-only file (as an unprivileged
user: root ignores file modes), onto ``/dev/full``; ``install`` interrupted with SIGINT halfway.

A write that cannot happen is bad input: exit 2, one line naming the path and why.
"""

from __future__ import annotations

import os

import pytest
from helpers import run_sd

from .conftest import FAST, assert_usage_error, run_cli_as_nobody


def check_to(m, output: str, fmt: str = "json"):
    return run_sd(["check", "--format", fmt, *FAST, "--python", m.python, "--output", output], env=m.env(), timeout=90)


def test_output_into_a_directory_that_does_not_exist(machine, tmp_path):
    target = tmp_path / "no" / "such" / "dir" / "report.json"
    assert_usage_error(check_to(machine, str(target)), str(target), "does not exist")
    assert not (tmp_path / "no").exists()  # nothing half-created


@pytest.mark.headline("unprivileged")
def test_output_onto_a_read_only_file_as_unprivileged_user(nobody_machine, unprivileged_install):
    m = nobody_machine
    out_dir = m.root / "out"
    out_dir.mkdir()
    target = out_dir / "report.json"
    target.write_text("the user's previous report\n")
    target.chmod(0o444)
    out_dir.chmod(0o555)
    run = run_cli_as_nobody(unprivileged_install, ["check", "--json", *FAST, "--python", m.python, "--output", str(target)], env=m.env(), cwd=m.root)
    assert_usage_error(run, str(target), "read-only")
    assert target.read_text() == "the user's previous report\n"  # untouched


def test_output_onto_dev_full(machine):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    assert_usage_error(check_to(machine, "/dev/full"), "/dev/full", "no space left")
    assert_usage_error(check_to(machine, "/dev/full", fmt="markdown"), "/dev/full", "no space left")


# ---------------------------------------------------------------------------- install interrupted

from test_install import BEFORE, backups_left, family, imports_fake_torch, isolated_env, py, seeded, server, venv  # noqa: E402,F401  (fixtures)


@pytest.mark.posix
def test_install_interrupted_with_sigint_halfway(server, venv, tmp_path):
    """Ctrl-C to ``stackdoctor install`` while pip downloads a slow wheel: stops, says so in one line, and the
    environment's previous torch still imports. (tests/test_install.py covers the same through ``install.execute``;
    this is the console command, signalled like a terminal would.)"""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    server.state.slow_started.clear()
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_MATRIX"] = ""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stackdoctor", "install", "--python", py(venv), "--torch", "2.13.0", "--variant", "cu130",
         "--index-base", server.base("slowwheel"), "--yes"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert server.state.slow_started.wait(60), "pip never started downloading"
        time.sleep(0.5)
        start = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert time.monotonic() - start < 60
    assert "Traceback" not in out + err, err
    assert proc.returncode == 130, (proc.returncode, err[-2000:])
    lines = [ln for ln in err.splitlines() if ln.startswith("stackdoctor: ")]
    assert len(lines) == 1 and "interrupted" in lines[0], err[-2000:]
    assert family(venv) == BEFORE
    assert imports_fake_torch(venv) == BEFORE["torch"]
    assert backups_left(venv) == []  # the backup of the old torch's files went with the interrupted command
