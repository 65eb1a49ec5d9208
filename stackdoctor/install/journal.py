"""The install transaction's own state in the target environment: the journal, the lock, the signals.

``<prefix>/.stackdoctor-install/`` holds ``journal.json`` (written fsync'd and renamed into place before
anything changes, and again at every phase) and ``backup/`` (the torch family's files, hard-linked aside by
``sd_backup.py save``). The folder exists only while an install is under way: its presence afterwards means an
install was killed (SIGKILL, power loss), and the next ``stackdoctor install`` finishes it before it plans
anything; ``check`` reports it (:mod:`stackdoctor.rules.torch`, ``install.unfinished``).

The lock is ``flock`` on the prefix folder itself (no file is left behind): a second install into the same
environment is refused in one sentence while the first holds it.

Signals: inside :func:`signals`, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (a ``KeyboardInterrupt``,
so :meth:`System.run_streaming` stops the installer child and waits for it); inside :func:`Signals.shielded` (the
put-back, the commit) they are only remembered, and a Ctrl-C there prints that the previous torch is being put
back. The installer runs in its own session, so a terminal's Ctrl-C reaches stackdoctor only.

The installer is inside the transaction: its pid and start time are written into the journal as soon as it runs
(:meth:`Journal.started_installer`), on Linux it dies with stackdoctor (``PR_SET_PDEATHSIG``,
:func:`stackdoctor.system.die_with_parent_preexec`), and a recovery first stops whatever of its session is still
alive (:func:`stackdoctor.install.stop_stray_installer`). The journal's owner is a pid with its start time, so a
live install (:meth:`Journal.owner_alive`) is told from a stopped one by ``check`` and by every install.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

JOURNAL_DIR = ".stackdoctor-install"
ASIDE = JOURNAL_DIR + ".done-"  # a committed install's journal folder (its backup too), set aside until `done:` is printed
JOURNAL_SCHEMA = "stackdoctor.install-journal/1"
HOOK_ENV = "STACKDOCTOR_TEST_HOOK_DIR"
EXIT_FOR = {int(signal.SIGINT): 130, int(getattr(signal, "SIGTERM", 15)): 143, int(getattr(signal, "SIGHUP", 1)): 129}
PLEASE_WAIT = "stackdoctor: putting back the previous torch, please wait."
UNPRINTED_KEEP = 40  # lines of what could not be printed, kept in the journal for the next run to say


def _start_of(pid: int) -> str | None:
    from stackdoctor.system import process_start

    return process_start(pid)


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP during an install."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


@dataclass
class Signals:
    """Which signal arrived (first one wins), and whether one may raise now."""

    received: int | None = None
    shield_depth: int = 0
    committed: bool = False  # past the commit point: a signal is noted, never obeyed (the install succeeded)
    say: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    after_commit: int | None = None  # the first signal that arrived after the commit point
    _old: dict[int, Any] = field(default_factory=dict)

    def commit_point(self) -> None:
        """The install is committed: from here until :func:`release_signals`, SIGINT / SIGTERM / SIGHUP are noted and
        ignored, so nothing after the commit (the leftovers, `done:`, the backup's removal) turns success into 130."""
        self.committed = True

    def handler(self, signum: int, _frame: object) -> None:
        if self.committed:
            self.after_commit = self.after_commit or signum
            return
        if self.received is None:
            self.received = signum
        if self.shield_depth:
            if signum == signal.SIGINT:
                with contextlib.suppress(Exception, SystemExit):  # a closed pipe (rich exits on EPIPE) never ends a put-back
                    self.say(PLEASE_WAIT)
            return
        raise Interrupted(signum)

    @contextlib.contextmanager
    def shielded(self) -> Iterator[None]:
        self.shield_depth += 1
        try:
            yield
        finally:
            self.shield_depth -= 1

    @property
    def exit_code(self) -> int | None:
        return EXIT_FOR.get(self.received) if self.received is not None else None


@contextlib.contextmanager
def signals(say: Callable[[str], None] | None = None) -> Iterator[Signals]:
    """SIGINT / SIGTERM / SIGHUP handled for the install's duration (main thread only; elsewhere untouched)."""
    sig = Signals()
    if say is not None:
        sig.say = say
    nums = [signal.SIGINT] + [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    try:
        for n in nums:
            sig._old[int(n)] = signal.signal(n, sig.handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield sig
    finally:
        for n, old in sig._old.items():
            if sig.committed:  # the handler stays (it ignores): the old one comes back with release_signals()
                _HELD.setdefault(n, old)
                continue
            with contextlib.suppress(ValueError, OSError):
                signal.signal(n, old)


_HELD: dict[int, Any] = {}  # the handlers a committed install replaced, given back by release_signals()


def release_signals() -> None:
    """After a committed install has said how it ended: the signal handlers it replaced come back."""
    for n, old in list(_HELD.items()):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(n, old)
        del _HELD[n]


def hook(point: str) -> None:
    """Tests only (``STACKDOCTOR_TEST_HOOK_DIR``): announce ``point`` and wait (at most 60 s) for ``<point>.go``."""
    d = os.environ.get(HOOK_ENV)
    if not d:
        return
    try:
        with open(os.path.join(d, point), "w"):
            pass
    except OSError:
        return
    end = time.monotonic() + 60
    go = os.path.join(d, point + ".go")
    while time.monotonic() < end and not os.path.exists(go):
        time.sleep(0.005)
    # A test that sent a signal at this point says so in the .go file: stay at this instant until the
    # signal lands (the handler raises out of this sleep), since a terminal delivers it asynchronously.
    try:
        with open(go, encoding="utf-8") as f:
            wait_for_signal = f.read().strip() == "after-signal"
    except OSError:
        wait_for_signal = False
    end = time.monotonic() + 10
    while wait_for_signal and time.monotonic() < end:
        time.sleep(0.005)


def journal_dir(prefix: str) -> str:
    return os.path.join(prefix, JOURNAL_DIR)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@dataclass
class Journal:
    """What an install is doing to one environment; one JSON file, replaced whole at each phase."""

    prefix: str
    python: str
    phase: str = "backup"  # backup | install | verify | restore
    pid: int = field(default_factory=os.getpid)
    started: float = field(default_factory=time.time)
    before: dict[str, str] = field(default_factory=dict)  # the torch family before
    planned: dict[str, str] = field(default_factory=dict)  # name -> exact version the install brings
    command: list[str] = field(default_factory=list)  # the installer's argv
    installer: str = "pip"
    pid_start: str | None = field(default_factory=lambda: _start_of(os.getpid()))  # the owner's start time (pid reuse)
    installer_pid: int = 0  # the installer child, recorded as soon as it runs (its own session: its group too)
    installer_start: str | None = None
    unprinted: list[str] = field(default_factory=list)  # lines the transaction could not print (a closed pipe)

    @property
    def dir(self) -> str:
        return journal_dir(self.prefix)

    @property
    def backup(self) -> str:
        return os.path.join(self.dir, "backup")

    @property
    def path(self) -> str:
        return os.path.join(self.dir, "journal.json")

    def to_data(self) -> dict[str, Any]:
        return {
            "schema": JOURNAL_SCHEMA,
            "prefix": self.prefix,
            "python": self.python,
            "phase": self.phase,
            "pid": self.pid,
            "started": self.started,
            "before": dict(self.before),
            "planned": dict(self.planned),
            "command": list(self.command),
            "installer": self.installer,
            "backup": self.backup,
            "pid_start": self.pid_start,
            "installer_pid": self.installer_pid,
            "installer_start": self.installer_start,
            "unprinted": list(self.unprinted[-UNPRINTED_KEEP:]),
        }

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Journal:
        def sdict(v: object) -> dict[str, str]:
            return {str(k): str(x) for k, x in v.items()} if isinstance(v, dict) else {}

        return cls(
            prefix=str(data.get("prefix") or ""),
            python=str(data.get("python") or ""),
            phase=str(data.get("phase") or "backup"),
            pid=int(data["pid"]) if isinstance(data.get("pid"), int) else 0,
            started=float(data["started"]) if isinstance(data.get("started"), (int, float)) else 0.0,
            before=sdict(data.get("before")),
            planned=sdict(data.get("planned")),
            command=[str(a) for a in data.get("command") or [] if isinstance(a, str)],
            installer=str(data.get("installer") or "pip"),
            pid_start=str(data["pid_start"]) if isinstance(data.get("pid_start"), str) else None,
            installer_pid=int(data["installer_pid"]) if isinstance(data.get("installer_pid"), int) else 0,
            installer_start=str(data["installer_start"]) if isinstance(data.get("installer_start"), str) else None,
            unprinted=[str(x) for x in data.get("unprinted") or [] if isinstance(x, str)],
        )

    def started_installer(self, pid: int) -> None:
        """The installer runs: its pid and start time into the journal at once (a retry must not run beside it)."""
        self.installer_pid, self.installer_start = pid, _start_of(pid)
        self.write()

    def owner_alive(self) -> bool:
        """The stackdoctor that wrote this journal still runs (same pid, same start time)."""
        from stackdoctor.system import process_alive

        return bool(self.pid) and self.pid != os.getpid() and process_alive(self.pid, self.pid_start)

    def installer_processes(self) -> list[int]:
        """The processes of this journal's installer still alive: its session (pip leads one), started with or after it."""
        from stackdoctor.system import process_alive, session_processes

        if not self.installer_pid:
            return []
        if self.installer_start is None:  # started but not yet timed: the pid alone
            return [self.installer_pid] if process_alive(self.installer_pid) else []
        return session_processes(self.installer_pid, self.installer_start)

    def create(self) -> None:
        """Make the folder and write the first journal (raises OSError: no space, no inodes, read-only)."""
        os.mkdir(self.dir, 0o700)
        _fsync_dir(self.prefix)
        self._write()

    def write(self, phase: str | None = None) -> str | None:
        """The next phase; an error (a disk the installer just filled) is returned, not raised: the outcome is
        decided from the files, and the journal that is there still names the backup."""
        if phase is not None:
            self.phase = phase
        try:
            self._write()
        except OSError as e:
            return str(e)
        return None

    def _write(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.to_data()))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.dir)

    def set_aside(self) -> tuple[str | None, str | None]:
        """The commit point in one rename: the journal folder, with the backup of the replaced torch, moved aside in
        the prefix, so removing its files (tens of thousands of hard links) comes after `done:` (:func:`remove_aside`;
        a later run removes one whose owner is gone, :func:`sweep_aside`). ``(aside, None)``; when the rename fails,
        the folder is removed here: ``(None, the error or None)``."""
        aside = os.path.join(self.prefix, f"{ASIDE}{os.getpid()}-{time.time_ns()}")
        try:
            os.rename(self.dir, aside)
        except OSError:
            return None, self.remove()
        _fsync_dir(self.prefix)
        return aside, None

    def remove(self) -> str | None:
        """Remove the journal folder (its backup too); the error, if any (never raises)."""
        import shutil

        errors: list[str] = []
        shutil.rmtree(self.dir, onerror=lambda _f, p, e: errors.append(f"{p}: {e[1]}"))
        _fsync_dir(self.prefix)
        return errors[0] if errors and os.path.exists(self.dir) else None


def remove_aside(path: str | None) -> None:
    """Remove a committed install's set-aside journal folder (:meth:`Journal.set_aside`) here and now."""
    import shutil

    if path and os.path.basename(path).startswith(ASIDE):
        shutil.rmtree(os.path.join(path, "backup"), ignore_errors=True)  # the journal last: a half-removed one still names its owner
        shutil.rmtree(path, ignore_errors=True)


ASIDE_INLINE_BYTES = 64 * 1024**2  # a set-aside backup up to this size is removed at once; a larger one by a detached child
_REMOVER = (
    "import os, shutil, sys\n"
    "p = sys.argv[1]\n"
    "try:\n    os.nice(10)\nexcept (AttributeError, OSError):\n    pass\n"
    "shutil.rmtree(os.path.join(p, 'backup'), ignore_errors=True)\n"
    "shutil.rmtree(p, ignore_errors=True)\n"
)


def aside_bytes(path: str, stop_at: int | None = None) -> int:
    """The bytes of the files under a set-aside folder (counting stops past ``stop_at``)."""
    total = 0
    for dp, _dn, fn in os.walk(path):
        for name in fn:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dp, name)).st_size
            if stop_at is not None and total > stop_at:
                return total
    return total


def dispose_aside(path: str | None, *, inline_bytes: int = ASIDE_INLINE_BYTES) -> str | None:
    """Remove a set-aside folder off the user's wait: a small one at once, a large one (a real torch: hundreds of MB,
    tens of seconds) by a detached child of its own session, which the journal in it then names as its owner (so no
    later run or `check` takes it for a stopped install's). ``"later"`` when a child removes it, ``"now"`` when done
    here, None when there was nothing to remove."""
    if not path or not os.path.basename(path).startswith(ASIDE) or not os.path.isdir(path):
        return None
    if aside_bytes(path, stop_at=inline_bytes) <= inline_bytes:
        remove_aside(path)
        return "now"
    import subprocess

    try:
        child = subprocess.Popen(  # noqa: S603 - our own interpreter, a fixed script, no shell
            [sys.executable, "-I", "-c", _REMOVER, path], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
        )
    except OSError:
        remove_aside(path)
        return "now"
    _name_owner(path, child.pid)
    return "later"


def _name_owner(path: str, pid: int) -> None:
    """The aside folder's journal names its remover (pid and start time) as its owner."""
    j = os.path.join(path, "journal.json")
    try:
        with open(j, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict):
            return
        data["pid"], data["pid_start"] = pid, _start_of(pid)
        tmp = j + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(json.dumps(data))
        os.replace(tmp, j)
    except (OSError, ValueError):
        pass


def stale_asides(prefix: str) -> list[str]:
    """The set-aside journal folders in ``prefix`` whose owner is gone (an install stopped after its commit, before
    its backup was removed, or a remover that was killed); one whose owner (or remover) still runs is not listed."""
    try:
        names = sorted(n for n in os.listdir(prefix) if n.startswith(ASIDE))
    except OSError:
        return []
    stale = []
    for name in names:
        path = os.path.join(prefix, name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        owner: Journal | None = None
        try:
            with open(os.path.join(path, "journal.json"), encoding="utf-8") as f:
                data = json.load(f)
            owner = Journal.from_data(data) if isinstance(data, dict) else None
        except (OSError, ValueError):
            pass
        if owner is not None and owner.owner_alive():
            continue
        stale.append(path)
    return stale


def swept_words(swept: list[tuple[str, int]]) -> list[str]:
    """One sentence per set-aside backup a run removed."""
    from stackdoctor.core.units import format_bytes

    return [f"removed the backup of the torch an earlier install replaced ({path}, {format_bytes(size)}): that install had finished." for path, size in swept]


def sweep_aside(prefix: str) -> list[tuple[str, int]]:
    """The set-aside folders of committed installs whose owner is gone (:func:`stale_asides`): removed (off the wait,
    :func:`dispose_aside`); each with its size in bytes."""
    removed = []
    for path in stale_asides(prefix):
        size = aside_bytes(path)
        dispose_aside(path)
        removed.append((path, size))
    return removed


def read_journal(prefix: str) -> Journal | None:
    """The journal of an unfinished install in ``prefix`` (a folder with no readable journal: one killed
    while it was being created, read as phase ``backup`` with nothing changed), or None."""
    d = journal_dir(prefix)
    if not os.path.isdir(d):
        return None
    try:
        with open(os.path.join(d, "journal.json"), encoding="utf-8") as f:
            data = json.load(f)
        if isinstance(data, dict):
            j = Journal.from_data(data)
            j.prefix = prefix
            return j
    except (OSError, ValueError):
        pass
    return Journal(prefix=prefix, python="", phase="backup", pid=0)


class Locked(Exception):
    """Another install holds the environment (its pid and phase, from its journal, when known)."""

    def __init__(self, pid: int | None, phase: str | None = None) -> None:
        super().__init__(pid)
        self.pid = pid
        self.phase = phase


@contextlib.contextmanager
def env_lock(prefix: str) -> Iterator[None]:
    """An exclusive lock on the environment (``flock`` on its prefix folder); :class:`Locked` when held."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the journal still records the install
        yield
        return
    fd = os.open(prefix, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            j = read_journal(prefix)
            raise Locked(j.pid if j and j.pid else None, j.phase if j and j.pid else None) from None
        yield
    finally:
        os.close(fd)
