"""Every child of an install transaction dies with stackdoctor (issue 29): not only pip and the backup's save /
restore, but the snapshot, state and verify workers too (:meth:`stackdoctor.system.System.dying_with_parent`).

Real pip installs stand-in torch wheels (tests/indexserver.py's synthetic torch, NOT PyTorch) from a local folder into
a real venv holding stand-in torch 2.11.0+cpu, through the same driver as tests/test_install_boundary.py. A ``.pth``
file in the venv makes one named worker of stackdoctor (``sys.argv[0]`` ends with its name) stop at its start once the
test asks for it at a hook point of the transaction; then only the stackdoctor process gets SIGKILL, and no process
that carries this test's environment (stackdoctor's children and theirs) may be left, read from ``/proc``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import venv_bin  # noqa: E402
from test_install_boundary import env_for  # noqa: E402
from test_install_transaction import (  # noqa: E402
    DRIVER,
    REPO,
    Controller,
    hooked,  # noqa: F401 - a fixture
    hooked_seed,  # noqa: F401 - a fixture
    hooked_wheels,  # noqa: F401 - a fixture
    site_of,
)

pytestmark = [pytest.mark.posix, pytest.mark.linux, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc, PR_SET_PDEATHSIG")]

MARK = "SD_TEST_CHILDREN_DIR"
# one line of a .pth: the interpreter runs it at start-up, before the worker; -I does not skip the venv's site-packages
PTH = (
    "import os, sys, time; d = os.environ.get('" + MARK + "'); f = d and os.path.join(d, 'slow'); "
    "w = f and os.path.exists(f) and open(f).read().strip(); "
    "(w and sys.argv and sys.argv[0].endswith(w)) and (open(os.path.join(d, 'pid-%d' % os.getpid()), 'w').close(), time.sleep(120))\n"
)


def marked_processes(token: str) -> list[int]:
    """The live processes whose environment holds ``MARK=token`` (stackdoctor's descendants; zombies do not count)."""
    needle = f"{MARK}={token}".encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle not in (d / "environ").read_bytes().split(b"\0"):
                continue
            state = (d / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(d.name))
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


# (the hook point at which the worker is made to stop, the worker): the state after pip, the import check, and the
# snapshot of the leftovers' search after the commit (the journal is still there, set aside)
CASES = [("verify", "sd_backup.py"), ("verify", "sd_verify.py"), ("commit", "sd_snapshot.py")]
# the import check starts beside the RECORD check, right after "verify" (issue 44: off the user's wait); the snapshot
# after the commit runs only when the plan predicts a previous variant's runtime packages, so this driver's plan does
OLD_PLAN = 'plan = Plan("2.12.0", "cpu", None, [PlannedPackage("torch", "2.12.0", "cpu", None)])\n'
assert OLD_PLAN in DRIVER
DRIVER_LEFTOVERS = DRIVER.replace(OLD_PLAN, OLD_PLAN + 'plan.leftovers = ["nvidia-cublas-cu12"]\n')


@pytest.mark.parametrize("point, worker", CASES, ids=[w for _, w in CASES])
def test_a_sigkill_of_stackdoctor_alone_leaves_no_worker_of_the_install(point, worker, hooked, tmp_path):  # noqa: F811
    venv, wheels = hooked  # the small stand-in: the worker is held at a hook point, never in pip's phases
    (site_of(venv) / "zz_sd_test_slow_worker.pth").write_text(PTH)
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    mark = tmp_path / "mark"
    mark.mkdir()
    env = env_for(tmp_path, hooks)
    env[MARK] = str(mark)
    ctl = Controller(hooks, {point: lambda: (mark / "slow").write_text(worker)})
    ctl.start()
    p = subprocess.Popen([sys.executable, "-c", DRIVER_LEFTOVERS, str(venv_bin(venv)), str(wheels), "pip", "uv"], env=env, cwd=REPO,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        end = time.monotonic() + 60
        pids: list[Path] = []
        while not pids and time.monotonic() < end and p.poll() is None:
            pids = list(mark.glob("pid-*"))
            time.sleep(0.01)
        assert pids, f"{worker} never started after the hook {point!r} (seen {ctl.seen}, exit {p.poll()})"
        child = int(pids[0].name[4:])
        assert worker in cmdline(child)
        assert p.pid in marked_processes(str(mark)) and child in marked_processes(str(mark))
        os.kill(p.pid, signal.SIGKILL)  # stackdoctor alone: each child is in a session of its own
        assert p.wait(10) == -signal.SIGKILL
        end = time.monotonic() + 10
        left = marked_processes(str(mark))
        while left and time.monotonic() < end:
            time.sleep(0.02)
            left = marked_processes(str(mark))
        assert left == [], f"outlived stackdoctor's SIGKILL: {[cmdline(x) for x in left]}"
    finally:
        ctl.stop.set()
        ctl.join(2)
        if p.poll() is None:
            p.kill()
            p.wait(10)
        for pid in marked_processes(str(mark)):  # a failed run leaves nothing behind
            os.kill(pid, signal.SIGKILL)
