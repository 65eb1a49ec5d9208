"""System.run / System.read_text: bounded, shell-free, never raising."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from stackdoctor.system import System


def test_missing_tool_is_absent(tmp_path):
    s = System(env={"PATH": str(tmp_path)})
    r = s.run(["nvidia-smi"])
    assert r.status == "absent" and r.returncode is None
    assert r.describe_failure() == "nvidia-smi is not installed"


def test_not_executable_is_denied(fake_bin):
    tool = fake_bin("nvidia-smi", "x")
    tool.chmod(0o644)
    r = System().run([str(tool)])
    assert r.status == "denied"


def test_hang_is_killed_at_timeout_with_partial_output(fake_bin):
    fake_bin("slowtool", script="echo first-half\nsleep 30\necho never\n")
    start = time.monotonic()
    r = System().run(["slowtool"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.status == "timeout"
    assert r.stdout == "first-half\n"
    assert r.describe_failure() == "slowtool did not answer in 0.5 s"


def test_closed_stdout_but_running_is_bounded(fake_bin):
    fake_bin("closer", script="echo hi\nexec >&- 2>&-\nsleep 30\n")
    start = time.monotonic()
    r = System().run(["closer"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.status == "timeout" and r.stdout == "hi\n"


def test_grandchild_holding_pipe_does_not_hang(fake_bin):
    fake_bin("forker", script="(sleep 30) &\necho done\nexit 0\n")
    start = time.monotonic()
    r = System().run(["forker"], timeout=10)
    assert time.monotonic() - start < 5
    assert r.stdout == "done\n"


def test_segfault_is_reported(fake_bin):
    fake_bin("crasher", script="echo partial\nkill -SEGV $$\n")
    r = System().run(["crasher"])
    assert r.status == "error" and r.signal == 11
    assert "SIGSEGV" in r.describe_failure()
    assert r.stdout == "partial\n"


def test_non_utf8_is_replaced(fake_bin):
    fake_bin("binary", script="printf 'ok\\377\\376end\\n'\n")
    r = System().run(["binary"])
    assert r.stdout.startswith("ok") and "end" in r.stdout and "\ufffd" in r.stdout


def test_huge_output_is_capped(fake_bin):
    fake_bin("flood", script="head -c 3000000 /dev/zero | tr '\\0' 'x'\n")
    r = System().run(["flood"], max_bytes=100_000)
    assert r.truncated and len(r.stdout) == 100_000 and r.returncode == 0


def test_no_shell_interpretation(fake_bin, tmp_path):
    fake_bin("echoargs", script='for a in "$@"; do echo "[$a]"; done\n')
    marker = tmp_path / "pwned"
    r = System().run(["echoargs", f"; touch {marker}", "$(id)"])
    assert r.stdout == f"[; touch {marker}]\n[$(id)]\n"
    assert not marker.exists()


def test_parse_env_sets_c_locale(fake_bin):
    fake_bin("showlocale", script='echo "$LC_ALL"\n')
    assert System().run(["showlocale"]).stdout == "C\n"


def test_read_text_under_sysroot(tmp_path):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text("NVRM version: x\n")
    s = System(sysroot=str(tmp_path))
    assert s.moved
    r = s.read_text("/proc/driver/nvidia/version")
    assert r.ok and r.text == "NVRM version: x\n"
    assert s.read_text("/proc/nothing").status == "absent"
    assert s.read_text("/proc").status == "error"


def test_sysroot_from_env(tmp_path):
    s = System.from_env({"STACKDOCTOR_SYSROOT": str(tmp_path), "PATH": "/usr/bin"})
    assert s.sysroot == str(tmp_path)


@pytest.mark.headline("unprivileged")
def test_read_denied_as_unprivileged_user(unprivileged_install):
    """A root-only file read through System as uid 65534 (stackdoctor's copy that user can read) is 'denied'."""
    import tempfile

    from unprivileged import as_nobody

    root = Path(tempfile.mkdtemp(prefix="sd-denied-", dir="/tmp"))
    try:
        root.chmod(0o755)
        secret = root / "etc" / "secret"
        secret.parent.mkdir(parents=True)
        secret.write_text("x")
        secret.chmod(0o600)
        secret.parent.chmod(0o755)
        code = "import sys; from stackdoctor.system import System; r = System(sysroot=sys.argv[1]).read_text('/etc/secret'); print(r.status)"
        r = as_nobody([unprivileged_install.python, "-c", code, str(root)], env={"PATH": "/usr/bin:/bin", **unprivileged_install.env})
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert r.stdout.strip() == "denied"
        assert System(sysroot=str(root)).read_text("/etc/secret").ok  # root reads it: the answer above came from the uid
    finally:
        shutil.rmtree(root, ignore_errors=True)
