"""``install`` is a transaction: interrupts, kills, a full disk and a damaged torch never cost the torch the user had.

Real pip and real uv install STAND-IN torch wheels (tests/indexserver.py's synthetic torch, NOT PyTorch, padded to
a couple of thousand small files in folders, with a console script in ``bin/``) from a local folder
(``--no-index --find-links``) into a real venv holding stand-in torch 2.11.0+cpu. The install runs under a real
pseudo-terminal (``os.openpty``, the driver leads its session with the terminal as its controlling tty), and
Ctrl-C is the byte ``\\x03`` written to the terminal, so the kernel delivers SIGINT to the foreground process group
as a user's terminal does. The instants are events, never sleeps: stackdoctor's test hook
(``STACKDOCTOR_TEST_HOOK_DIR``: a file per phase, waiting for ``<phase>.go``) and what appears in site-packages
(pip's stash ``~orch``, the first file of the new build).

After each run: the family is exactly the old build (every file's sha256 as before, nothing extra) or exactly the
new one (every RECORD hash, nothing extra), torch imports, no journal, backup or pip stash is left, and the
message and the exit code say which.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import copy_venv, venv_bin  # noqa: E402
from indexserver import WheelSpec, _torch_files, build_wheel  # noqa: E402
from test_install import isolated_env  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OLD, NEW = "2.11.0+cpu", "2.12.0+cpu"
N_FILES = 2000  # per build, in 40 folders: small files, so a run stays quick, and enough that pip's uninstall and unpacking last while a watcher looks
N_FILES_HOOKED = 200  # a trial that acts only at stackdoctor's own hook points needs no window in pip's phases (13 trials: 37 -> 20 s of CPU)
pytestmark = [pytest.mark.posix, pytest.mark.skipif(sys.platform == "win32", reason="POSIX terminals and signals")]


def stand_in(version: str, n_files: int = N_FILES) -> WheelSpec:
    files = _torch_files(version)
    tag = version.replace(".", "_").replace("+", "_")
    files[f"torch/_build_{tag}.py"] = f"BUILD = {version!r}\n"  # the first file extracted: only this build has it
    files = {f"torch/_build_{tag}.py": files.pop(f"torch/_build_{tag}.py"), **files}
    for i in range(n_files):
        files[f"torch/part{i % 40}/m{i}.py"] = f"# stand-in torch {version}, file {i}\nVALUE = {i}\n"
    files[f"torch-{version}.dist-info/entry_points.txt"] = "[console_scripts]\ntorchrun = torch.cuda:device_count\n"
    return WheelSpec("torch", version, "py3-none-any", [], files, ["cpu"])


@pytest.fixture(scope="session")
def wheels(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("standin-wheels")
    for v in (OLD, NEW):
        spec = stand_in(v)
        (d / spec.filename).write_bytes(build_wheel(spec))
    return d


@pytest.fixture(scope="session")
def hooked_wheels(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("standin-wheels-hooked")
    for v in (OLD, NEW):
        spec = stand_in(v, N_FILES_HOOKED)
        (d / spec.filename).write_bytes(build_wheel(spec))
    return d


@pytest.fixture(scope="session")
def seeded_old(wheels, tmp_path_factory) -> Path:
    return _seed(wheels, tmp_path_factory.mktemp("seed-old"))


@pytest.fixture(scope="session")
def hooked_seed(hooked_wheels, tmp_path_factory) -> Path:
    return _seed(hooked_wheels, tmp_path_factory.mktemp("seed-old-hooked"))


@pytest.fixture
def hooked(hooked_seed, hooked_wheels, tmp_path) -> tuple[Path, Path]:
    """A private venv holding the small stand-in torch, and the small wheels: for a trial that acts only at
    stackdoctor's own hook points (the backup, the journal's install, verify, import, commit), never in pip's phases."""
    dst = tmp_path / "venv"
    copy_venv(hooked_seed, dst)
    return dst, hooked_wheels


@pytest.fixture
def watched(venv, wheels) -> tuple[Path, Path]:
    """The venv and wheels of the 2000-file stand-in: a trial that acts while pip uninstalls or unpacks."""
    return venv, wheels


def _seed(wheels: Path, d: Path) -> Path:
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    env = isolated_env(d)
    # pip from the test interpreter installs into the venv (the venv needs no pip of its own: the driver runs
    # the installer as `<venv python> -m pip`, so give it one by linking this interpreter's pip in)
    site = next(venv.glob("lib/python*/site-packages"))
    import pip

    shutil.copytree(Path(pip.__file__).parent, site / "pip")
    subprocess.run([str(venv_bin(venv)), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), f"torch=={OLD}"], check=True, env=env)
    return venv


@pytest.fixture
def venv(seeded_old, tmp_path) -> Path:
    dst = tmp_path / "venv"
    copy_venv(seeded_old, dst)
    return dst


CHECK = r"""
import base64, csv, hashlib, json, os, sys, importlib.metadata as m
site = [p for p in sys.path if p.endswith("site-packages")][0]
out = {"versions": {}, "files": {}, "bad": [], "extra": [], "stash": sorted(e for e in os.listdir(site) if e.startswith("~"))}
listed = set()
for d in m.distributions():
    n = (d.metadata["Name"] or "").lower()
    if n != "torch":
        continue
    out["versions"].setdefault(n, []).append(d.version)
    for row in csv.reader((d.read_text("RECORD") or "").splitlines()):
        p = os.path.normpath(os.path.join(site, row[0]))
        listed.add(p)
        h = None
        if os.path.isfile(p):
            h = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(open(p, "rb").read()).digest()).rstrip(b"=").decode()
        out["files"][row[0]] = h
        if len(row) > 1 and row[1] and row[1] != h:
            out["bad"].append(row[0])
for top in ("torch",):
    for dp, dn, fn in os.walk(os.path.join(site, top)):
        dn[:] = [x for x in dn if x != "__pycache__"]
        out["extra"] += [os.path.join(dp, f) for f in fn if os.path.join(dp, f) not in listed]
out["dist_infos"] = sorted(e for e in os.listdir(site) if e.startswith("torch-"))
print(json.dumps(out))
"""


def look(venv: Path) -> dict:
    p = subprocess.run([str(venv_bin(venv)), "-I", "-c", CHECK], capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def imports(venv: Path) -> str | None:
    p = subprocess.run([str(venv_bin(venv)), "-I", "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


def left_behind(venv: Path) -> list[str]:
    site = next(venv.glob("lib/python*/site-packages"))
    return sorted([p.name for p in venv.iterdir() if p.name.startswith(".stackdoctor")] + [p.name for p in site.iterdir() if p.name.startswith("~")])


def assert_exactly(venv: Path, version: str, before: dict | None = None) -> None:
    got = look(venv)
    assert got["versions"] == {"torch": [version]}, got["versions"]
    assert got["bad"] == [] and got["extra"] == [] and got["stash"] == [], (got["bad"][:5], got["extra"][:5], got["stash"])
    assert got["dist_infos"] == [f"torch-{version}.dist-info"]
    if before is not None:
        assert got["files"] == before["files"]  # every file of the old build, byte for byte
    assert (venv / "bin" / "torchrun").is_file() and os.access(venv / "bin" / "torchrun", os.X_OK)
    assert imports(venv) == version
    assert left_behind(venv) == []


DRIVER = r"""
import json, sys
from stackdoctor.install.transaction import InstallSettings, execute
from stackdoctor.model.plan import Plan, PlannedPackage
from stackdoctor.system import System
python, wheels, installer, uv = sys.argv[1:5]
plan = Plan("2.12.0", "cpu", None, [PlannedPackage("torch", "2.12.0", "cpu", None)])
r = execute(plan, system=System.from_env(), python=python, settings=InstallSettings(
    installer=installer, uv=uv, grace_s=20, source_args=["--no-index", "--find-links", wheels], offline=True, user_find_links=[wheels]))
print("RESULT " + json.dumps({"message": r.message, "code": int(r.exit_code), "state": r.state, "signal": r.signal, "notes": r.notes}), flush=True)
sys.exit(int(r.exit_code))
"""


class Terminal:
    """The driver on a real pseudo-terminal (its controlling tty); what it writes is collected."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.master, slave = os.openpty()

        def ctty() -> None:  # after setsid (start_new_session): this terminal becomes the session's
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=REPO, start_new_session=True, preexec_fn=ctty)
        os.close(slave)
        self.out = b""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            self.out += chunk

    def ctrl_c(self) -> None:
        os.write(self.master, b"\x03")  # the line discipline sends SIGINT to the foreground process group

    def wait(self, timeout: float = 120) -> tuple[int, dict, str]:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(5)
        os.close(self.master)
        text = self.out.decode(errors="replace").replace("\r\n", "\n")
        line = [ln[ln.index("RESULT ") :] for ln in text.splitlines() if "RESULT " in ln]  # after the terminal's echo "^C"
        assert line, text[-3000:]
        return code, json.loads(line[-1][7:]), text


class Controller(threading.Thread):
    """Releases every hook point at once, except the one(s) a test acts at: there it runs the action first."""

    def __init__(self, hook_dir: Path, actions: dict[str, object], watch: object = None) -> None:
        super().__init__(daemon=True)
        self.dir, self.actions, self.watch = hook_dir, actions, watch
        self.seen: list[str] = []
        self.stop = threading.Event()
        self.hold: set[str] = set()
        self.signals: set[str] = set()

    def run(self) -> None:
        done: set[str] = set()
        watched = False
        while not self.stop.is_set():
            for p in sorted(self.dir.iterdir()):
                name = p.name
                if name.endswith(".go") or name in done or name in self.hold:
                    continue
                done.add(name)
                self.seen.append(name)
                act = self.actions.get(name)
                if callable(act):
                    act()
                # a signal sent here: the install stays at this instant until it lands (transaction.hook)
                (self.dir / (name + ".go")).write_text("after-signal" if name in self.signals else "")
            if self.watch is not None and not watched and self.watch[0]():
                watched = True
                self.seen.append("watch")
                self.watch[1]()
            time.sleep(0.002)


def site_of(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def run_driver(venv: Path, wheels: Path, tmp_path: Path, *, installer: str = "pip", actions=None, watch=None, send=None):
    """Start the install on a terminal; ``send(term)`` is how an interrupt is sent (Ctrl-C by default)."""
    from conftest import find_test_uv

    uv = find_test_uv() or "uv"
    if installer == "uv" and not os.path.exists(uv):
        pytest.skip("uv (a declared test dependency) is not installed beside the test interpreter")
    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir(exist_ok=True)
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hook_dir)
    term = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), installer, uv], env)
    send = send or (lambda: term.ctrl_c())
    acts = {k: (lambda v=v: v(term) if callable(v) else send()) for k, v in (actions or {}).items()}
    w = None
    if watch is not None:
        w = (watch, send)
    ctl = Controller(hook_dir, acts, w)
    ctl.signals = {k for k, v in (actions or {}).items() if not callable(v)}
    ctl.start()
    try:
        code, res, text = term.wait()
    finally:
        ctl.stop.set()
        ctl.join(2)
    return code, res, text, ctl


def first_new_file(venv: Path):
    target = site_of(venv) / "torch" / f"_build_{NEW.replace('.', '_').replace('+', '_')}.py"
    return lambda: target.exists()


def pip_stash(venv: Path):
    site = site_of(venv)
    return lambda: any(e.startswith("~") for e in os.listdir(site))


def old_gone(venv: Path):
    site = site_of(venv)
    return lambda: not (site / f"torch-{OLD}.dist-info").exists()


def assert_outcome(venv: Path, before: dict, code: int, res: dict, expect_code: int) -> str:
    """Exactly old or exactly new, and the message says which; returns which."""
    assert code == expect_code == res["code"], res
    if res["state"] == "new":
        raise AssertionError(f"an interrupted install must not keep the new build: {res}")
    assert_exactly(venv, OLD, before)
    msg = res["message"]
    assert ("nothing changed: the previous torch 2.11.0+cpu still imports." in msg or "before anything was changed; the target has torch 2.11.0+cpu as before." in msg
            or msg.endswith("the previous torch 2.11.0+cpu was put back from its own files and imports.")), msg
    return "put back" if "put back" in msg else "untouched"


# ---------------------------------------------------------------------------- Ctrl-C at >= 10 instants, pip

INSTANTS = {
    "backup": dict(actions={"backup": None}),  # before the first file is linked aside
    "backup-mid": dict(actions={"backup-mid": None}),  # halfway through the backup (in the worker)
    "before-installer": dict(actions={"install": None}),  # the journal says "install", pip not started yet
    "uninstall": dict(watch=pip_stash),  # pip has moved the old torch to its stash ~orch
    "extracting": dict(watch=first_new_file),  # pip writes the new build's files
    "verify": dict(actions={"verify": None}),  # pip finished; the files are being judged
    "import": dict(actions={"import": None}),  # the new build is complete per RECORD; its import is being checked
    "commit": dict(actions={"commit": None}),  # the new build is complete and imports; not yet committed
}


@pytest.mark.headline("install")
@pytest.mark.parametrize("instant", list(INSTANTS))
def test_ctrl_c_on_a_terminal_leaves_exactly_the_old_torch(instant, request, tmp_path):
    spec = INSTANTS[instant]
    venv, wheels = request.getfixturevalue("watched" if "watch" in spec else "hooked")
    before = look(venv)
    watch = spec.get("watch")
    code, res, text, ctl = run_driver(venv, wheels, tmp_path, actions=spec.get("actions"), watch=watch(venv) if watch else None)
    assert ("watch" if watch else next(iter(spec["actions"]))) in ctl.seen, (ctl.seen, text[-2000:])
    how = assert_outcome(venv, before, code, res, 130)
    assert res["signal"] == "SIGINT" and "Traceback" not in text
    if instant in ("backup", "backup-mid", "before-installer"):
        assert how == "untouched" and "before anything was changed" in res["message"] or "nothing changed" in res["message"]
    if instant in ("verify", "import", "commit"):
        assert how == "put back"


@pytest.mark.headline("install")
@pytest.mark.parametrize("where", ["restore", "restore-mid"])
def test_a_second_ctrl_c_during_the_put_back_does_not_abort_it(where, venv, wheels, tmp_path):
    """Ctrl-C while pip writes the new build, then again (twice) while the old files are being put back."""
    before = look(venv)
    holder: dict = {}

    def twice(term: Terminal) -> None:
        term.ctrl_c()
        term.ctrl_c()
        holder["sent"] = True

    code, res, text, ctl = run_driver(venv, wheels, tmp_path, actions={where: twice}, watch=first_new_file(venv))
    assert holder.get("sent") and where in ctl.seen, ctl.seen
    assert assert_outcome(venv, before, code, res, 130) == "put back"
    assert "putting back the previous torch, please wait" in text


# ---------------------------------------------------------------------------- SIGTERM, SIGHUP


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_stop_pip_and_put_the_old_torch_back(sig, code, venv, wheels, tmp_path):
    before = look(venv)
    box: dict = {}

    def send() -> None:
        box["term"].proc.send_signal(sig)

    from conftest import find_test_uv  # noqa: F401

    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir()
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hook_dir)
    term = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env)
    box["term"] = term
    ctl = Controller(hook_dir, {}, (first_new_file(venv) if sig == signal.SIGTERM else pip_stash(venv), send))
    ctl.start()
    got, res, text = term.wait()
    ctl.stop.set()
    assert "watch" in ctl.seen
    assert_outcome(venv, before, got, res, code)
    assert res["signal"] == signal.Signals(sig).name and f"stopped by {signal.Signals(sig).name}" in res["message"]


# ---------------------------------------------------------------------------- uv through the same transaction


@pytest.mark.parametrize("instant", ["before-installer", "extracting", "sigterm"])
def test_uv_goes_through_the_same_transaction(instant, request, tmp_path):
    venv, wheels = request.getfixturevalue("watched" if instant == "extracting" else "hooked")
    before = look(venv)
    if instant == "before-installer":
        code, res, text, ctl = run_driver(venv, wheels, tmp_path, installer="uv", actions={"install": None})
        assert_outcome(venv, before, code, res, 130)
    elif instant == "extracting":
        code, res, text, ctl = run_driver(venv, wheels, tmp_path, installer="uv", watch=old_gone(venv))
        assert "watch" in ctl.seen
        assert_outcome(venv, before, code, res, 130)
    else:
        box: dict = {}
        code, res, text, ctl = run_driver(
            venv, wheels, tmp_path, installer="uv", actions={"verify": lambda term: term.proc.send_signal(signal.SIGTERM)}
        )
        assert assert_outcome(venv, before, code, res, 143) == "put back"
        del box


@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_uv_and_pip_install_the_new_build_exactly(installer, hooked, tmp_path):
    venv, wheels = hooked
    code, res, text, ctl = run_driver(venv, wheels, tmp_path, installer=installer)
    assert code == 0 and res["state"] == "new", res
    assert res["message"] == "torch 2.12.0+cpu imports in the target."
    assert_exactly(venv, NEW)


# ---------------------------------------------------------------------------- SIGKILL, then check and the retry


def children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(d))
    return out


@pytest.mark.headline("install")
def test_sigkill_of_the_whole_tree_is_found_by_check_and_finished_by_the_retry(venv, wheels, tmp_path):
    box: dict = {}

    def kill_all() -> None:
        term = box["term"]
        kids = children(term.proc.pid)
        for k in kids:
            try:
                os.killpg(k, signal.SIGKILL)  # pip leads its own session
            except OSError:
                pass
        term.proc.kill()

    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir()
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hook_dir)
    term = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env)
    box["term"] = term
    ctl = Controller(hook_dir, {}, (first_new_file(venv), kill_all))
    ctl.start()
    assert term.proc.wait(60) == -signal.SIGKILL
    ctl.stop.set()
    ctl.join(2)
    os.close(term.master)
    assert (venv / ".stackdoctor-install" / "journal.json").is_file()  # the killed install left its journal ...
    # ... and `check` says so, failing, with the exact command
    env2 = isolated_env(tmp_path)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "check", "--python", str(venv_bin(venv)), "--no-kernels", "--json"],
                       env=env2, capture_output=True, text=True, timeout=120, cwd=REPO)
    doc = json.loads(p.stdout)
    found = {f["code"]: f for f in doc["findings"]}
    assert p.returncode != 0 and found["install-unfinished"]["severity"] == "fail", p.stdout[-2000:]
    assert found["install-unfinished"]["fix"] == f"stackdoctor install --python {venv_bin(venv)} --recover"
    # the user's retry of the same install first finishes the killed one, then installs
    code, res, text, ctl = run_driver(venv, wheels, tmp_path)
    assert code == 0 and res["state"] == "new", res
    assert res["notes"] and res["notes"][0].startswith("an earlier install was stopped halfway; the previous torch 2.11.0+cpu was put back"), res["notes"]
    assert_exactly(venv, NEW)


def test_install_recover_after_a_kill_puts_the_old_torch_back(venv, wheels, tmp_path):
    """`stackdoctor install --recover` (the finding's fix): the killed install's journal is finished, nothing else."""
    before = look(venv)
    box: dict = {}

    def kill_all() -> None:
        for k in children(box["term"].proc.pid):
            try:
                os.killpg(k, signal.SIGKILL)
            except OSError:
                pass
        box["term"].proc.kill()

    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir()
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hook_dir)
    box["term"] = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env)
    ctl = Controller(hook_dir, {}, (pip_stash(venv), kill_all))
    ctl.start()
    box["term"].proc.wait(60)
    ctl.stop.set()
    os.close(box["term"].master)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--python", str(venv_bin(venv)), "--recover"],
                       env=isolated_env(tmp_path), capture_output=True, text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "torch 2.11.0+cpu" in p.stderr and "Traceback" not in p.stderr
    assert_exactly(venv, OLD, before)


# ---------------------------------------------------------------------------- two installs at once


def test_a_second_install_into_the_same_environment_is_refused_in_one_sentence(hooked, tmp_path):
    venv, wheels = hooked
    hook_dir = tmp_path / "hooks"
    hook_dir.mkdir()
    env = isolated_env(tmp_path)
    env["STACKDOCTOR_TEST_HOOK_DIR"] = str(hook_dir)
    first = Terminal([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env)
    ctl = Controller(hook_dir, {})
    ctl.hold = {"install"}  # the first install waits with the lock held, its journal written
    ctl.start()
    deadline = time.monotonic() + 60
    while not (hook_dir / "install").exists() and time.monotonic() < deadline:
        time.sleep(0.005)
    env2 = isolated_env(tmp_path / "second")
    (tmp_path / "second").mkdir()
    second = subprocess.run([sys.executable, "-c", DRIVER, str(venv_bin(venv)), str(wheels), "pip", "uv"], env=env2, capture_output=True,
                            text=True, timeout=60, cwd=REPO)
    res2 = json.loads([ln for ln in second.stdout.splitlines() if ln.startswith("RESULT ")][0][7:])
    assert second.returncode == 2  # could not run as asked (README's exit codes): bad timing, not a failed install
    assert res2["message"] == (f"another stackdoctor install (process {first.proc.pid}, phase install) is changing {venv}; nothing was changed: "
                               "run this again when it has finished.")
    ctl.hold = set()
    code, res, text = first.wait()
    ctl.stop.set()
    assert code == 0 and res["state"] == "new", res
    assert_exactly(venv, NEW)


# ---------------------------------------------------------------------------- a damaged torch


def test_a_damaged_torch_is_backed_up_as_it_is_and_put_back_so(venv, wheels, tmp_path):
    (site_of(venv) / "torch" / "part3" / "m3.py").unlink()
    before = look(venv)
    assert before["files"]["torch/part3/m3.py"] is None
    code, res, text, ctl = run_driver(venv, wheels, tmp_path, watch=first_new_file(venv))
    assert code == 130 and "put back" in res["message"], res
    got = look(venv)
    assert got["files"] == before["files"] and got["extra"] == [] and got["stash"] == []  # exactly as it was, damage included
    assert res["notes"][0] == "the previous torch (1 files already missing) was backed up as it is."
    assert left_behind(venv) == [] and imports(venv) == OLD


def test_a_damaged_torch_of_the_planned_build_is_not_already_satisfied(hooked, tmp_path):
    venv, wheels = hooked
    from stackdoctor.install import transaction
    from stackdoctor.install import verify as install_verify
    from stackdoctor.model.plan import Plan, PlannedPackage
    from stackdoctor.system import System

    (site_of(venv) / "torch" / "part5" / "m5.py").unlink()
    system = System(env=isolated_env(tmp_path))
    why = install_verify.intact(system, str(venv_bin(venv)), ["torch"])
    assert why == "torch: torch/part5/m5.py is missing"
    plan = Plan("2.11.0", "cpu", None, [PlannedPackage("torch", "2.11.0", "cpu", None)])
    r = transaction.execute(plan, system=system, python=str(venv_bin(venv)), settings=transaction.InstallSettings(source_args=["--no-index", "--find-links", str(wheels)], offline=True, user_find_links=[str(wheels)], reinstall=True, stream=lambda t: None))
    assert r.ok and r.state == "new", r.message
    assert_exactly(venv, OLD)
    assert install_verify.intact(system, str(venv_bin(venv)), ["torch"]) is None


# ---------------------------------------------------------------------------- a full disk, no inodes


@pytest.fixture
def small_fs(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    yield mnt
    subprocess.run(["umount", str(mnt)], capture_output=True)


def mount_tmpfs(mnt: Path, **opts: int) -> None:
    o = ",".join(f"{k}={v}" for k, v in opts.items())
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", o, "tmpfs", str(mnt)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({p.stderr.strip() or p.returncode}): needs root or CAP_SYS_ADMIN")


def tree_size(path: Path) -> tuple[int, int]:
    """(bytes in 4 KiB pages, inodes) a copy of ``path`` takes on a tmpfs (links and folders count as inodes)."""
    blocks = inodes = 0
    for dp, dn, fn in os.walk(path):
        inodes += 1 + len(fn) + sum(1 for d in dn if os.path.islink(os.path.join(dp, d)))
        blocks += sum((os.lstat(os.path.join(dp, f)).st_size + 4095) // 4096 * 4096 for f in fn)
    return blocks, inodes


def test_a_full_disk_puts_the_old_torch_back(seeded_old, wheels, small_fs, tmp_path):
    blocks, inodes = tree_size(seeded_old)
    mount_tmpfs(small_fs, size=blocks + 3 * 1024 * 1024, nr_inodes=inodes + 10_000)  # the new build's ~8 MB do not fit
    venv = small_fs / "venv"
    copy_venv(seeded_old, venv)
    before = look(venv)
    code, res, text, ctl = run_driver(venv, wheels, tmp_path)
    assert code == 1 and res["state"] in ("old", "mixed"), res
    assert "No space left on device" in text
    assert_exactly(venv, OLD, before)
    msg = res["message"]
    assert msg.startswith("the install failed (") and (msg.endswith("was put back from its own files and imports.") or "nothing changed" in msg), msg


def test_no_inodes_for_the_journal_or_the_backup_stops_before_pip(seeded_old, wheels, small_fs, tmp_path):
    blocks, inodes = tree_size(seeded_old)
    mount_tmpfs(small_fs, size=blocks + 32 * 1024 * 1024, nr_inodes=inodes + 3)
    venv = small_fs / "venv"
    copy_venv(seeded_old, venv)
    before = look(venv)
    code, res, text, ctl = run_driver(venv, wheels, tmp_path)
    assert code == 1 and res["state"] == "old", res
    assert res["message"].startswith("nothing was changed: "), res["message"]
    assert "No space left on device" in res["message"] and "install without a way back yourself:" in res["message"]
    assert "Successfully" not in text and "Installing" not in text  # pip never ran
    assert_exactly(venv, OLD, before)


# ---------------------------------------------------------------------------- a venv that had no torch


@pytest.mark.parametrize("watch", ["extracting", "verify"])
def test_interrupted_into_a_fresh_venv_leaves_no_torch_files(watch, request, tmp_path):
    venv, wheels = request.getfixturevalue("watched" if watch == "extracting" else "hooked")
    subprocess.run([str(venv_bin(venv)), "-m", "pip", "uninstall", "-q", "-y", "torch"], check=True, env=isolated_env(tmp_path))
    site = site_of(venv)
    assert not (site / "torch").exists() and not (venv / "bin" / "torchrun").exists()
    if watch == "extracting":
        code, res, text, ctl = run_driver(venv, wheels, tmp_path, watch=first_new_file(venv))
    else:
        code, res, text, ctl = run_driver(venv, wheels, tmp_path, actions={"verify": None})
    assert code == 130, res
    assert res["message"].endswith("the target had no torch before, and its partial files were removed: it has none now.") or res["message"].endswith(
        "the target had no torch before and has none now."), res["message"]
    assert not (site / "torch").exists() and [e for e in os.listdir(site) if e.startswith(("torch", "~"))] == []
    assert not (venv / "bin" / "torchrun").exists() and left_behind(venv) == []
    assert imports(venv) is None


def test_the_fallback_reinstall_is_only_the_exact_previous_build_from_the_users_sources():
    from stackdoctor.install.argv import restore_commands

    prev = {"torch": "2.11.0+cu126", "torchvision": "0.26.0+cu126"}
    online = restore_commands(prev, "/v/bin/python", "pip")
    assert online == [["/v/bin/python", "-m", "pip", "install", "--force-reinstall", "--no-deps", "torch==2.11.0+cu126", "torchvision==0.26.0+cu126"]]
    # offline: never an index, only the user's own folders; none: no command at all (the user is told what to run)
    assert restore_commands(prev, "/v/bin/python", "uv", offline=True, find_links=["/w"])[0][-3:] == ["--no-index", "--find-links", "/w"]
    assert restore_commands(prev, "/v/bin/python", "pip", offline=True) == []
