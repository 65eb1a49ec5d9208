"""The install transaction's boundary (issue 29): the installer child, the output pipe and a live install are inside it.

Real pip installs STAND-IN torch wheels (tests/indexserver.py's synthetic torch, NOT PyTorch: 10 000+ small files in
folders, a console script in ``bin/``) from a local folder into a real venv holding stand-in torch 2.11.0+cpu.

- SIGKILL of stackdoctor's whole process group (pip leads a session of its own, so only the parent-death signal
  reaches it) at the uninstall / unpack boundary, then at once the same command again: the new torch complete (every
  RECORD hash), one dist-info, the message true, nothing left in the venv or in ``$TMPDIR``.
- Ctrl-C on a real pseudo-terminal while stackdoctor's output goes into ``| tee`` or ``| grep`` (the reader dies with
  the same Ctrl-C): the rollback finishes, exit 130, and the next run says what could not be printed.
- ``check`` and ``install --recover`` while an install runs: a warning naming its process and phase, exit 2.
- A ``stackdoctor-pkg-*`` folder whose owner is gone is removed by the next run; a live owner's is kept.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import venv_bin  # noqa: E402
from indexserver import build_wheel  # noqa: E402
from test_install import isolated_env  # noqa: E402
from test_install_transaction import (  # noqa: E402
    DRIVER,
    NEW,
    OLD,
    REPO,
    Controller,
    Terminal,
    assert_exactly,
    imports,
    look,
    seeded_old,  # noqa: F401 - a fixture
    site_of,
    stand_in,
    venv,  # noqa: F401 - a fixture
    wheels,  # noqa: F401 - a fixture
)

BIG_EXTRA = 8200  # on top of stand_in's ~2 000: more than 10 000 files per build
pytestmark = [pytest.mark.posix, pytest.mark.linux, pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc, PR_SET_PDEATHSIG, ptys")]


def big_stand_in(version: str):
    spec = stand_in(version)
    for i in range(BIG_EXTRA):
        spec.files[f"torch/big{i % 80}/b{i}.py"] = f"# stand-in torch {version}, extra file {i}\n"
    return spec


@pytest.fixture(scope="module")
def big_wheels(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("big-standin-wheels")
    for v in (OLD, NEW):
        spec = big_stand_in(v)
        assert len(spec.files) >= 10_000
        (d / spec.filename).write_bytes(build_wheel(spec))
    return d


@pytest.fixture(scope="module")
def big_seeded(big_wheels, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("big-seed")
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    import pip

    shutil.copytree(Path(pip.__file__).parent, next(venv.glob("lib/python*/site-packages")) / "pip")
    subprocess.run([str(venv_bin(venv)), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(big_wheels), f"torch=={OLD}"],
                   check=True, env=isolated_env(d))
    return venv


@pytest.fixture
def big_venv(big_seeded, tmp_path) -> Path:
    dst = tmp_path / "venv"
    # hard links: seconds, not tens of seconds, for 10 000 files; pip and the put-back replace files (rename, unlink),
    # never write into one, so the seed stays as it was (each test checks every hash of what it ends with)
    shutil.copytree(big_seeded, dst, symlinks=True, copy_function=os.link)
    return dst


def env_for(tmp_path: Path, hooks: Path | None = None) -> dict[str, str]:
    env = isolated_env(tmp_path)
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    env["TMPDIR"] = str(tmp)  # pip's pip-uninstall-* stash and stackdoctor's lent folders land here
    if hooks is not None:
        env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hooks)
    return env


def leftovers_in(venv: Path, tmp_path: Path) -> list[str]:
    site = site_of(venv)
    return sorted([p.name for p in venv.iterdir() if p.name.startswith(".stackdoctor")] + [p.name for p in site.iterdir() if p.name.startswith("~")]
                  + [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(("pip-uninstall-", "stackdoctor-pkg-"))])


def driver(venv: Path, wheels: Path, env: dict[str, str], timeout: float = 240) -> tuple[int, dict, str]:
    """The same command again, in a session of its own: a hang is a failure that names what still runs, never a
    suite that waits on a pipe a grandchild holds."""
    p = subprocess.Popen([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=REPO, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        ps = subprocess.run(["ps", "-eo", "pid,ppid,sid,stat,wchan:32,etime,args"], capture_output=True, text=True).stdout
        stacks = _kernel_stacks(p.pid)
        os.killpg(p.pid, signal.SIGKILL)
        try:  # a grandchild in a session of its own may still hold the pipes: never wait on it unbounded
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = "", "(the pipes stayed open 30 s after the retry's session was killed)"
        raise AssertionError(f"the retry did not end in {timeout:g} s; journal {journal_of(venv)}; processes:\n{ps[-4000:]}\n{stacks[-4000:]}\n{err[-3000:]}") from None
    line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
    assert line, (out[-2000:], err[-3000:])
    return p.returncode, json.loads(line[-1][7:]), err


def _kernel_stacks(sid: int) -> str:
    """Where each process of session ``sid`` waits in the kernel (``/proc/<pid>/wchan``, and ``stack`` where readable)."""
    lines = []
    for d in Path("/proc").iterdir():
        try:
            if not d.name.isdigit() or os.getsid(int(d.name)) != sid:
                continue
            wchan = (d / "wchan").read_text()
            try:
                stack = (d / "stack").read_text()
            except OSError:
                stack = "(stack not readable)"
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ")[:200].decode(errors="replace")
            lines.append(f"{d.name} {cmd}: wchan {wchan}\n{stack}")
        except OSError:
            continue
    return "\n".join(lines)


def journal_of(venv: Path) -> dict:
    try:
        return json.loads((venv / ".stackdoctor-install" / "journal.json").read_text())
    except (OSError, ValueError):
        return {}


def gone_within(pid: int, seconds: float) -> bool:
    from stackdoctor.system import process_alive

    end = time.monotonic() + seconds
    while process_alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return not process_alive(pid)


# ---------------------------------------------------------------------------- SIGKILL of the process group, then the same command


def uninstalling(venv: Path):  # pip has moved the old torch to its stash (~orch): "Uninstalling torch-2.11.0+cpu"
    site = site_of(venv)
    return lambda: any(e.startswith("~") for e in os.listdir(site))


def uninstalled(venv: Path):  # "Successfully uninstalled torch-2.11.0+cpu": the old dist-info is gone from its place
    site = site_of(venv)
    return lambda: not (site / f"torch-{OLD}.dist-info").exists()


def unpacking(venv: Path):  # the first file of the new build is there
    target = site_of(venv) / "torch" / f"_build_{NEW.replace('.', '_').replace('+', '_')}.py"
    return lambda: target.exists()


BOUNDARY = {"uninstalling": uninstalling, "uninstalled": uninstalled, "unpacking": unpacking}
# The suite runs one trial per boundary; benchmarks/install_boundary_sweep.py sets STACKDOCTOR_BOUNDARY_SWEEP=N for N trials
# per boundary (and every reader at every phase below): a repeated trial finds a race, it proves nothing a single one does not.
SWEEP = int(os.environ.get("STACKDOCTOR_BOUNDARY_SWEEP", "0") or 0)
TRIALS = [(where, n) for where in BOUNDARY for n in range(1, max(SWEEP, 1) + 1)]


@pytest.mark.headline("install")
@pytest.mark.parametrize("where, trial", TRIALS, ids=[f"{w}-{n}" for w, n in TRIALS])
def test_sigkill_of_the_process_group_then_the_same_command_at_once(where, trial, big_venv, big_wheels, tmp_path):
    del trial
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    env = env_for(tmp_path, hooks)
    term = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(big_venv)), str(big_wheels), "pip", "uv"], env)
    seen: dict = {}

    def kill_group() -> None:
        seen["journal"] = journal_of(big_venv)
        os.killpg(term.proc.pid, signal.SIGKILL)  # the terminal's foreground group: stackdoctor; pip has its own session

    ctl = Controller(hooks, {}, (BOUNDARY[where](big_venv), kill_group))
    ctl.start()
    assert term.proc.wait(120) == -signal.SIGKILL, term.out[-2000:]
    ctl.stop.set()
    ctl.join(2)
    pip_pid = seen["journal"].get("installer_pid")
    assert isinstance(pip_pid, int) and pip_pid > 0 and seen["journal"].get("installer_start"), seen["journal"]  # recorded as it started
    assert gone_within(pip_pid, 10), f"pip {pip_pid} outlived stackdoctor's SIGKILL"  # PR_SET_PDEATHSIG
    term._reader.join(10)  # every holder of the terminal is gone, so its reader has ended: only now is its fd closed, so that
    os.close(term.master)  # the reader can never read a reused fd number (the retry's own pipes)
    code, res, err = driver(big_venv, big_wheels, env_for(tmp_path))  # the user's retry, at once
    assert code == 0 and res["state"] == "new", (res, err[-3000:])
    assert res["message"] == "torch 2.12.0+cpu imports in the target."
    assert res["notes"] and res["notes"][0].startswith("an earlier install was stopped"), res["notes"]
    assert "2.11.0+cpu" in res["notes"][0] and "Traceback" not in err
    assert_exactly(big_venv, NEW)  # every RECORD hash, exactly one torch dist-info, nothing extra, imports
    assert leftovers_in(big_venv, tmp_path) == []


def test_a_stray_installer_is_stopped_before_the_recovery_and_it_says_so(venv, wheels, tmp_path):
    """Where the parent-death signal is not there (not Linux; a grandchild): the recovery finds the stopped install's
    installer alive from the journal's pid and start time, says so, and stops it before it changes anything."""
    from stackdoctor.install.journal import Journal
    from stackdoctor.install.transaction import InstallSettings, execute_recovery
    from stackdoctor.system import System, process_start

    stray = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        j = Journal(prefix=str(venv), python=str(venv_bin(venv)), phase="backup", pid=stray.pid + 10**6, before={"torch": OLD})
        j.create()
        j.installer_pid, j.installer_start = stray.pid, process_start(stray.pid)
        j.write()
        said: list[str] = []
        r = execute_recovery(System(env=env_for(tmp_path)), str(venv_bin(venv)), InstallSettings(say=said.append))
        assert stray.wait(30) is not None  # stopped (SIGINT first: the installer's own clean-up)
    finally:
        if stray.poll() is None:
            stray.kill()
    assert said[0] == (f"stackdoctor: the stopped install's pip (process {stray.pid}) is still running; "
                       "stopping it before that install is finished (at most 20 s).")
    assert r.ok and r.message == "an earlier install was stopped before it changed anything; its journal was removed.", r.message
    assert not (venv / ".stackdoctor-install").exists() and imports(venv) == OLD


# ---------------------------------------------------------------------------- Ctrl-C with the output in a pipe


def piped(venv: Path, wheels: Path, tmp_path: Path, reader: str, when, env: dict[str, str]) -> tuple[int, str]:
    """``stackdoctor install ... 2>&1 | <reader>`` on a real terminal; Ctrl-C (the byte, so the kernel signals the
    whole foreground group: stackdoctor and the reader) when ``when()`` holds. Returns stackdoctor's exit code."""
    sd = (f"{sys.executable} -m stackdoctor install --python {venv_bin(venv)} --torch 2.12.0 --variant cpu --offline "
          f"--find-links {wheels} --yes")
    rc = tmp_path / "rc"
    term = Terminal(["bash", "-c", f'{sd} 2>&1 | {reader.format(tmp=tmp_path)}; echo "${{PIPESTATUS[0]}}" > {rc}'], env)
    end = time.monotonic() + 120
    # ``seen``: the phase as the loop saw it (a second look could find it already over)
    while not (seen := when()) and time.monotonic() < end and term.proc.poll() is None:
        time.sleep(0.002)
    assert seen, term.out.decode(errors="replace")[-3000:]
    term.ctrl_c()
    term.proc.wait(120)
    term._reader.join(5)
    os.close(term.master)
    return int(rc.read_text().strip()), term.out.decode(errors="replace")


READERS = ["tee {tmp}/log", "grep -v nothing-matches-this"]
# each phase once and each reader once in the suite; the sweep crosses them (and repeats them)
PIPED = ([(p, r) for _ in range(SWEEP) for p in ("uninstall", "unpack") for r in READERS] if SWEEP
         else [("uninstall", READERS[0]), ("unpack", READERS[1])])


@pytest.mark.headline("install")
@pytest.mark.parametrize("phase, reader", PIPED)
def test_ctrl_c_with_the_output_piped_into_a_reader_that_dies_too(reader, phase, big_venv, big_wheels, tmp_path):
    before = look(big_venv)
    env = env_for(tmp_path)
    when = uninstalling(big_venv) if phase == "uninstall" else unpacking(big_venv)
    code, screen = piped(big_venv, big_wheels, tmp_path, reader, when, env)
    assert code == 130, screen[-3000:]
    assert not (big_venv / ".stackdoctor-install").exists()  # the rollback finished: no journal left
    kept = big_venv / ".stackdoctor-unprinted.json"
    finals = ("the install was interrupted; the previous torch 2.11.0+cpu was put back from its own files and imports.",
              "the install was interrupted; nothing changed: the previous torch 2.11.0+cpu still imports.")
    lines = json.loads(kept.read_text())["lines"] if kept.exists() else []
    final = next((f for f in finals if f in lines or f in screen), None)
    assert final is not None, (lines, screen[-2000:])  # printed, or kept for the next run
    assert leftovers_in(big_venv, tmp_path) == ([".stackdoctor-unprinted.json"] if kept.exists() else [])
    if kept.exists():  # the next run says what could not be printed, once
        p = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--python", str(venv_bin(big_venv)), "--recover"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, p.stderr[-2000:]
        assert "could not print its last lines (its output was closed); they were:" in p.stderr and final in p.stderr, p.stderr
        assert not kept.exists()
    assert_exactly(big_venv, OLD, before)  # every file of the old torch back, byte for byte; nothing else left


# ---------------------------------------------------------------------------- a live install is not a stopped one


@pytest.mark.headline("install")
def test_check_and_recover_during_a_live_install_say_it_is_running(venv, wheels, tmp_path):
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    first = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env_for(tmp_path, hooks))
    ctl = Controller(hooks, {})
    ctl.hold = {"install"}  # the install waits in phase "install", the lock held, its journal written
    ctl.start()
    end = time.monotonic() + 60
    while not (hooks / "install").exists() and time.monotonic() < end:
        time.sleep(0.005)
    other = tmp_path / "other"
    other.mkdir()
    env = env_for(other)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", str(venv_bin(venv)), "--no-kernels", "--json"],
                       env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    found = {f["code"]: f for f in json.loads(p.stdout)["findings"]}
    assert "install-unfinished" not in found, found.get("install-unfinished")
    live = found["install-in-progress"]
    assert live["severity"] == "warn" and f"process {first.proc.pid}, phase install" in live["detail"], live
    rec = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--python", str(venv_bin(venv)), "--recover"],
                         env=env, capture_output=True, text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL)
    assert rec.returncode == 2, rec.stderr[-2000:]
    assert f"another stackdoctor install (process {first.proc.pid}, phase install) is changing {venv}" in rec.stderr
    ctl.hold = set()
    code, res, text = first.wait()
    ctl.stop.set()
    assert code == 0 and res["state"] == "new", res
    assert_exactly(venv, NEW)
    # stopped (its journal there, no process): the failing finding and its fix again
    (venv / ".stackdoctor-install").mkdir()
    (venv / ".stackdoctor-install" / "journal.json").write_text(json.dumps({"pid": first.proc.pid, "phase": "install", "before": {}, "planned": {}}))
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", str(venv_bin(venv)), "--no-kernels", "--json"],
                       env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
    found = {f["code"]: f for f in json.loads(p.stdout)["findings"]}
    assert found["install-unfinished"]["severity"] == "fail" and "install-in-progress" not in found


# ---------------------------------------------------------------------------- nothing left behind


def test_a_stale_lent_folder_is_removed_by_the_next_run_and_a_live_ones_kept(venv, tmp_path):
    from stackdoctor.system import OWNER_FILE, process_start

    env = env_for(tmp_path)
    tmp = Path(env["TMPDIR"])
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended_start = process_start(ended.pid)  # may be None already: the owner file then names the pid alone
    ended.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        dead_dir, live_dir, reused_dir = tmp / "stackdoctor-pkg-dead", tmp / "stackdoctor-pkg-live", tmp / "stackdoctor-pkg-reused"
        for d, owner in ((dead_dir, f"{ended.pid} {ended_start or ''}"), (live_dir, f"{alive.pid} {process_start(alive.pid)}"),
                         (reused_dir, f"{alive.pid} 1")):  # the live pid with another start time: a reused pid, its owner gone
            d.mkdir()
            (d / OWNER_FILE).write_text(owner + "\n")
            (d / "packaging").symlink_to(tmp_path)  # a link, as an earlier stackdoctor lent: removed, never followed
        p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", str(venv_bin(venv)), "--no-kernels", "--json"],
                           env=env, capture_output=True, text=True, timeout=120, cwd=REPO)
        assert p.stdout.strip().startswith("{"), p.stderr[-2000:]
        assert not dead_dir.exists() and not reused_dir.exists() and live_dir.is_dir()
        assert sorted(x.name for x in tmp.iterdir() if x.name.startswith("stackdoctor-pkg-")) == ["stackdoctor-pkg-live"]  # its own went at exit
        assert tmp_path.is_dir() and (venv / "bin").is_dir()  # the links were not followed
    finally:
        alive.kill()
        alive.wait()


def test_pips_uninstall_stash_of_the_saved_files_is_removed_and_anything_else_kept(tmp_path):
    """Decided from the files: a ``pip-uninstall-*`` folder whose every file is one the backup holds (same inode, or same
    size and sha256) goes; one holding anything else (another pip's) stays."""
    from stackdoctor.install.backup import _record_hash, sweep_pip_stash

    backup, tmp = tmp_path / "backup", tmp_path / "tmp"
    (backup / "files").mkdir(parents=True)
    tmp.mkdir()
    saved = backup / "files" / "torch-0"
    saved.write_text("#!/bin/sh\necho torchrun\n")
    ours_linked, ours_copied, theirs = tmp / "pip-uninstall-aaa", tmp / "pip-uninstall-bbb", tmp / "pip-uninstall-ccc"
    for d in (ours_linked, ours_copied, theirs):
        d.mkdir()
    os.link(saved, ours_linked / "torchrun")
    shutil.copy(saved, ours_copied / "torchrun")
    shutil.copy(saved, theirs / "torchrun")
    (theirs / "other-tool").write_text("not ours\n")
    st = saved.stat()
    manifest = {"dists": [{"name": "torch", "files": [{"path": "../../../bin/torchrun", "stored": "torch-0", "hash": _record_hash(str(saved)),
                                                         "size": st.st_size, "ino": [st.st_dev, st.st_ino]}]}]}
    (backup / "manifest.json").write_text(json.dumps(manifest))
    assert sorted(sweep_pip_stash(str(backup), str(tmp))) == [str(ours_linked), str(ours_copied)]
    assert theirs.is_dir() and (theirs / "torchrun").is_file()


# ---------------------------------------------------------------------------- true messages


def test_the_same_versions_with_other_files_are_called_incomplete_never_x_instead_of_x():
    from stackdoctor.install.backup import FamilyState
    from stackdoctor.install.result import left_words as _left_words
    from stackdoctor.install.result import on_disk as _on_disk

    same = _left_words({"torch": OLD}, {"torch": OLD}, FamilyState("mixed", "torch/part3/m3.py differs"))
    assert same == "it left torch 2.11.0+cpu incomplete (torch/part3/m3.py differs)"
    assert _left_words({"torch": NEW}, {"torch": OLD}, FamilyState("mixed", "x")) == "it left torch 2.12.0+cpu (incomplete) instead of torch 2.11.0+cpu"
    assert _left_words({}, {"torch": OLD}, FamilyState("mixed", "")) == "it left no complete torch instead of torch 2.11.0+cpu"
    assert _on_disk({"torch": NEW}, "new") == "torch 2.12.0+cpu"


def test_a_dist_info_in_pips_stash_is_named_not_an_empty_list(venv, tmp_path):
    """pip's stash of the dist-info (``~orch-2.11.0+cpu.dist-info``) is read by importlib as torch: the reason names it."""
    from stackdoctor.install.backup import family_state
    from stackdoctor.system import System

    site = site_of(venv)
    (site / f"torch-{OLD}.dist-info").rename(site / f"~orch-{OLD}.dist-info")
    st = family_state(System(env=env_for(tmp_path)), str(venv_bin(venv)), str(tmp_path / "no-backup"), {"torch": NEW})
    assert st.state == "mixed"
    assert f"a dist-info out of its place: ~orch-{OLD}.dist-info" in st.why, st.why
    assert "a half-written dist-info: ;" not in st.why and not st.why.endswith("a half-written dist-info: ")
