"""System.run / System.read_text: bounded, shell-free, never raising."""

from __future__ import annotations

import os
import time

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


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop privileges")
def test_read_denied_as_unprivileged_user(tmp_path):
    secret = tmp_path / "etc" / "secret"
    secret.parent.mkdir(parents=True)
    secret.write_text("x")
    secret.chmod(0o600)
    tmp_path.chmod(0o755)
    secret.parent.chmod(0o755)
    pid = os.fork()
    if pid == 0:  # child: drop to nobody and read through System
        try:
            os.setgid(65534)
            os.setuid(65534)
            r = System(sysroot=str(tmp_path)).read_text("/etc/secret")
            os._exit(0 if r.status == "denied" else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
