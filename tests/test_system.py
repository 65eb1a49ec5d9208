"""System.run / System.read_text: bounded, shell-free, never raising.

Every test that runs a tool runs twice: with the POSIX process-group control and with the
Windows one (:class:`~stackdoctor.system.WindowsTree`, a psutil tree kill), which is the
code ``os.name == "nt"`` selects; its tree kill runs the same here as on Windows."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import psutil
import pytest

from stackdoctor.system import PosixGroups, ProcessControl, System, WindowsTree, default_control

CONTROLS = [PosixGroups, WindowsTree]


@pytest.fixture(params=CONTROLS, ids=lambda c: c.name)
def control(request) -> ProcessControl:
    return request.param()


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie left for init to reap counts as dead)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_dead(pids: list[int], within: float = 5.0) -> list[int]:
    """The pids still alive after ``within`` seconds."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def read_pids(path: Path, count: int, within: float = 5.0) -> list[int]:
    end = time.monotonic() + within
    while time.monotonic() < end:
        try:
            pids = [int(x) for x in path.read_text().split()]
        except (OSError, ValueError):
            pids = []
        if len(pids) >= count:
            return pids
        time.sleep(0.05)
    raise AssertionError(f"the tool did not write {count} pids to {path}")


def test_missing_tool_is_absent(control, tmp_path):
    s = System(env={"PATH": str(tmp_path)}, control=control)
    r = s.run(["nvidia-smi"])
    assert r.status == "absent" and r.returncode is None
    assert r.describe_failure() == "nvidia-smi is not installed"


def test_not_executable_is_denied(control, fake_bin):
    tool = fake_bin("nvidia-smi", "x")
    tool.chmod(0o644)
    r = System(control=control).run([str(tool)])
    assert r.status == "denied"


def test_hang_is_killed_at_timeout_with_partial_output(control, fake_bin):
    fake_bin("slowtool", script="echo first-half\nsleep 30\necho never\n")
    start = time.monotonic()
    r = System(control=control).run(["slowtool"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.status == "timeout"
    assert r.stdout == "first-half\n"
    assert r.describe_failure() == "slowtool did not answer in 0.5 s"


def test_closed_stdout_but_running_is_bounded(control, fake_bin):
    fake_bin("closer", script="echo hi\nexec >&- 2>&-\nsleep 30\n")
    start = time.monotonic()
    r = System(control=control).run(["closer"], timeout=0.5)
    assert time.monotonic() - start < 5
    assert r.status == "timeout" and r.stdout == "hi\n"


def test_grandchild_holding_pipe_does_not_hang(control, fake_bin):
    fake_bin("forker", script="(sleep 30) &\necho done\nexit 0\n")
    start = time.monotonic()
    r = System(control=control).run(["forker"], timeout=10)
    assert time.monotonic() - start < 5
    assert r.stdout == "done\n"


def test_segfault_is_reported(control, fake_bin):
    fake_bin("crasher", script="echo partial\nkill -SEGV $$\n")
    r = System(control=control).run(["crasher"])
    assert r.status == "error" and r.signal == 11
    assert "SIGSEGV" in r.describe_failure()
    assert r.stdout == "partial\n"


def test_non_utf8_is_replaced(control, fake_bin):
    fake_bin("binary", script="printf 'ok\\377\\376end\\n'\n")
    r = System(control=control).run(["binary"])
    assert r.stdout.startswith("ok") and "end" in r.stdout and "\ufffd" in r.stdout


def test_huge_output_is_capped(control, fake_bin):
    fake_bin("flood", script="head -c 3000000 /dev/zero | tr '\\0' 'x'\n")
    r = System(control=control).run(["flood"], max_bytes=100_000)
    assert r.truncated and len(r.stdout) == 100_000 and r.returncode == 0


def test_no_shell_interpretation(control, fake_bin, tmp_path):
    fake_bin("echoargs", script='for a in "$@"; do echo "[$a]"; done\n')
    marker = tmp_path / "pwned"
    r = System(control=control).run(["echoargs", f"; touch {marker}", "$(id)"])
    assert r.stdout == f"[; touch {marker}]\n[$(id)]\n"
    assert not marker.exists()


def test_parse_env_sets_c_locale(control, fake_bin):
    fake_bin("showlocale", script='echo "$LC_ALL"\n')
    assert System(control=control).run(["showlocale"]).stdout == "C\n"


def test_timeout_kills_the_whole_tree_and_keeps_partial_output(control, fake_bin, tmp_path):
    """A hung tool with a child and a grandchild: at the timeout all three are gone, and what the
    tool printed before it hung is in the result (nvidia-smi's promise, on POSIX and on Windows)."""
    pids = tmp_path / "pids"
    fake_bin("spawner", script=(
        f"echo $$ > {pids}\n"
        f"sleep 300 & echo $! >> {pids}\n"                       # a child
        f"sh -c 'sleep 300 & echo $! >> {pids}; wait' &\n"       # a child with its own child
        f"echo $! >> {pids}\n"
        "echo first-half\n"
        "wait\n"
    ))
    start = time.monotonic()
    r = System(control=control).run(["spawner"], timeout=1.0)
    assert time.monotonic() - start < 6
    assert r.status == "timeout" and r.stdout == "first-half\n"
    tree = read_pids(pids, 4)
    assert wait_dead(tree) == [], f"{control.name} left {tree} running"


def test_streaming_timeout_interrupts_then_kills_the_tree(control, fake_bin, tmp_path):
    """run_streaming at its timeout: the tool gets the interrupt (its clean-up runs), then the tree is killed."""
    pids = tmp_path / "pids"
    fake_bin("installer", script=(
        "trap 'echo cleaned-up; exit 130' INT\n"
        f"echo $$ > {pids}\n"
        f"sleep 300 & echo $! >> {pids}\n"
        "echo downloading\n"
        "wait\n"
    ))
    seen: list[str] = []
    r = System(control=control).run_streaming(["installer"], timeout=1.0, grace_s=2.0, on_stdout=seen.append)
    assert r.status == "timeout"
    assert "downloading" in r.stdout and "cleaned-up" in r.stdout  # the tool's own clean-up path ran
    assert "".join(seen) == r.stdout
    assert wait_dead(read_pids(pids, 2)) == []


def test_streaming_ctrl_c_stops_the_tool_and_returns_interrupted(control, fake_bin, tmp_path):
    """Ctrl-C during an install: the tool is interrupted, the run says "interrupted" and does not raise."""
    import _thread

    fake_bin("installer", script="trap 'echo cleaned-up; exit 130' INT\necho started\nsleep 300 & wait\n")
    timer = threading.Timer(0.7, _thread.interrupt_main)
    timer.start()
    start = time.monotonic()
    try:
        r = System(control=control).run_streaming(["installer"], timeout=60, grace_s=5.0)
    finally:
        timer.cancel()
    assert time.monotonic() - start < 10
    assert r.status == "interrupted" and r.detail == "interrupted by the user"
    assert "started" in r.stdout and "cleaned-up" in r.stdout


def test_streaming_tool_that_ignores_the_interrupt_is_killed_after_the_grace(control, fake_bin, tmp_path):
    pids = tmp_path / "pids"
    fake_bin("stubborn", script=f"trap '' INT\necho $$ > {pids}\nsleep 300 & echo $! >> {pids}\necho x\nwait\n")
    start = time.monotonic()
    r = System(control=control).run_streaming(["stubborn"], timeout=0.5, grace_s=0.5)
    assert time.monotonic() - start < 8
    assert r.status == "timeout" and r.stdout.startswith("x")
    assert wait_dead(read_pids(pids, 2)) == []


PY_TREE = """
import os, subprocess, sys, time
pids = open(sys.argv[1], "a")
pids.write(f"{os.getpid()}\\n"); pids.flush()
print("first-half", flush=True)
sleeper = [sys.executable, "-c", "import time; time.sleep(300)"]
child = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; g = subprocess.Popen(sys.argv[1:]); print(g.pid, flush=True); time.sleep(300)", *sleeper],
    stdout=pids)
pids.write(f"{child.pid}\\n"); pids.flush()
time.sleep(300)
"""


def test_timeout_kills_a_python_tree_on_every_os(control, tmp_path):
    """The same promise without a shell, so it also runs on a Windows runner (the default control there
    is WindowsTree with the real CREATE_NEW_PROCESS_GROUP): a Python tool with a child and a
    grandchild, killed at the timeout, its first line kept."""
    import sys

    pids = tmp_path / "pids"
    pids.write_text("")
    r = System(control=control).run([sys.executable, "-c", PY_TREE, str(pids)], timeout=3.0)
    assert r.status == "timeout" and r.stdout.replace("\r\n", "\n") == "first-half\n"
    tree = read_pids(pids, 3)
    assert wait_dead(tree) == [], f"{control.name} left {tree} running"


def test_windows_picks_the_tree_control_with_a_new_process_group():
    """The control chosen on Windows is the one the tests above run; with Windows' constants it asks
    for a new process group and interrupts with CTRL_BREAK_EVENT (values from the Win32 headers)."""
    assert isinstance(default_control("nt"), WindowsTree)
    assert isinstance(default_control("posix"), PosixGroups)
    assert type(default_control()) is (WindowsTree if os.name == "nt" else PosixGroups)
    win = WindowsTree(creationflags=0x00000200, break_signal=1)  # CREATE_NEW_PROCESS_GROUP, CTRL_BREAK_EVENT
    assert win.popen_options() == {"creationflags": 0x00000200}
    assert PosixGroups().popen_options() == {"start_new_session": True}
    assert System().control.name == default_control().name


def test_started_handle_kills_a_running_tool(control, fake_bin, tmp_path):
    """System.run's on_start handle stops a tool early (the allreduce runner stops peers this way)."""
    pids = tmp_path / "pids"
    fake_bin("rank", script=f"echo $$ > {pids}\nsleep 300 & echo $! >> {pids}\necho joined\nwait\n")
    handles = []
    killer = threading.Thread(target=lambda: (read_pids(pids, 2), handles and handles[0].kill()), daemon=True)

    def on_start(h):
        handles.append(h)
        killer.start()

    start = time.monotonic()
    r = System(control=control).run(["rank"], timeout=60, on_start=on_start)
    assert time.monotonic() - start < 10
    assert r.status != "timeout" and r.stdout == "joined\n"
    assert handles[0].pid == read_pids(pids, 2)[0]
    assert wait_dead(read_pids(pids, 2)) == []
    assert handles[0].kill() is False  # already gone


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


@pytest.mark.posix
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
