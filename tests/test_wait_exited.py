"""``wait_exited`` (stackdoctor.system.processes): ``proc.wait(timeout)`` told of the exit by a pidfd where Linux has
one, ``proc.wait`` itself elsewhere: the same answers either way (the speed is benchmarks/bench_check.py's)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from stackdoctor.system.processes import wait_exited


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


@pytest.fixture(params=["pidfd", "no pidfd", "pidfd refused"])
def way(request, monkeypatch):
    if request.param == "pidfd" and not hasattr(os, "pidfd_open"):
        pytest.skip("this Python or OS has no os.pidfd_open")  # the fallbacks below still run
    if request.param == "no pidfd":
        monkeypatch.delattr(os, "pidfd_open", raising=False)
    if request.param == "pidfd refused":  # an old kernel, a seccomp filter: ENOSYS / EPERM

        def refused(pid: int, flags: int = 0) -> int:
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "pidfd_open", refused, raising=False)
    return request.param


def test_the_exit_status_is_the_childs(way) -> None:
    proc = _child("import sys, time; time.sleep(0.05); sys.exit(7)")
    assert wait_exited(proc, 30) == 7 and proc.returncode == 7


def test_a_child_past_its_timeout_raises_and_keeps_running(way) -> None:
    proc = _child("import time; time.sleep(30)")
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exited(proc, 0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_child_already_reaped_or_without_a_timeout(way) -> None:
    proc = _child("pass")
    proc.wait()
    assert wait_exited(proc, 5) == 0  # reaped before: its status, no pidfd needed
    assert wait_exited(_child("raise SystemExit(3)"), None) == 3
