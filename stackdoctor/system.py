"""The only code that touches the operating system.

Every external tool runs through :meth:`System.run`: an argv list (never a shell),
always a timeout, output captured as bytes up to a cap and decoded UTF-8 with
``errors="replace"``. A missing tool, a tool that is not executable, one that hangs
(killed with everything it started at the timeout, partial output kept) or dies
by a signal is described by the returned :class:`CommandResult`; nothing raises.

How a child and its children are started, interrupted and killed is a
:class:`ProcessControl` strategy, chosen by :func:`default_control` from ``os.name``
and injectable (``System(control=WindowsTree())``):

- :class:`PosixGroups` (POSIX): the child leads a new session (``start_new_session``);
  Ctrl-C is ``SIGINT`` to its process group, the kill is ``SIGKILL`` to the group, which
  also reaches grandchildren that outlived their parent.
- :class:`WindowsTree` (``os.name == "nt"``): the child gets its own process group
  (``CREATE_NEW_PROCESS_GROUP``, so a console Ctrl-C is not delivered to it twice);
  interrupt is ``CTRL_BREAK_EVENT`` to that group; the kill walks the child's process
  tree with psutil (suspend every process found, look again for new ones, then kill them
  all), because Windows has no process-group kill. psutil was chosen over a job object
  because the same tree walk runs on Linux, so its tests run in this suite, and over
  ``taskkill /T /F`` because it needs no second process and reports nothing on stdout.
  Its limit: a grandchild whose parent has already exited is no longer in the tree, so
  it is not killed; the run still returns on time (the pipe readers are abandoned).

Every file read goes through :meth:`System.read_text`, relative to one root that
``STACKDOCTOR_SYSROOT`` can move (default ``/``), so a captured ``/proc``, ``/sys``,
``/etc`` and ``/opt`` tree replays a machine. A Windows path keeps its drive as the first
folder under the root: ``C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe`` is
``<root>/C/Program Files/NVIDIA Corporation/NVSMI/nvidia-smi.exe`` (:meth:`System.path`); a
tool found there is run from there, so a recorded Windows machine replays with fake tools
placed where Windows keeps them.

What the operating system says of itself (``platform.uname()``, the host name, the C
library) is a :class:`Host`. Live, it is read from this process; a test injects one
(``System(host_override=Host(system="Darwin", ...))``); a captured tree carries it in
``<root>/.stackdoctor/host.json`` (``{"system": "Darwin", "machine": "arm64", ...}``), so a
recorded Mac or Windows machine replays through the same probes as a live one. Probes ask
``System`` and nothing else: no ``platform``, ``socket``, ``os.readlink``, ``os.access`` or
``tempfile`` in ``stackdoctor/probes/``.
"""

from __future__ import annotations

import errno
import json
import ntpath
import os
import platform as _platform
import posixpath
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

DEFAULT_TIMEOUT_S = 5.0
MAX_CAPTURE_BYTES = 4 * 1024 * 1024
MAX_FILE_BYTES = 1024 * 1024

# Set for tools whose output is parsed: stable, untranslated messages.
_PARSE_ENV = {"LC_ALL": "C", "LANG": "C"}


@dataclass(frozen=True)
class CommandResult:
    """What one tool run did. ``status`` is one of ok / absent / denied / timeout / error."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    status: str = "ok"
    signal: int | None = None
    truncated: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.returncode == 0

    @property
    def tool(self) -> str:
        return os.path.basename(self.argv[0]) if self.argv else ""

    def describe_failure(self) -> str:
        """One sentence saying how the run failed (empty when it succeeded)."""
        name = self.tool
        if self.status == "absent":
            return f"{name} is not installed"
        if self.status == "denied":
            return f"{name} could not be run: {self.detail or 'permission denied'}"
        if self.status == "timeout":
            return f"{name} did not answer in {self.detail or '?'} s"
        if self.signal is not None:
            return f"{name} was killed by {signame(self.signal)}"
        if self.status == "error":
            return f"{name} could not be run: {self.detail}"
        if self.returncode:
            tail = (self.stderr.strip() or self.stdout.strip()).splitlines()[-1:] or [""]
            return f"{name} exited with code {self.returncode}" + (f": {tail[0][:200]}" if tail[0] else "")
        return ""

    def to_dict(self) -> dict:
        return {
            "argv": list(self.argv),
            "returncode": self.returncode,
            "status": self.status,
            "signal": self.signal,
            "duration_s": round(self.duration_s, 4),
            "truncated": self.truncated,
            "detail": self.detail,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


@dataclass(frozen=True)
class ReadResult:
    """A file read under the sysroot. ``status``: ok / absent / denied / error."""

    path: str
    status: str
    text: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


HOST_FILE = "/.stackdoctor/host.json"
_DRIVE = re.compile(r"^([A-Za-z]):(?=[\\/]|$)")
_HOST_KEYS = ("system", "machine", "release", "version", "node", "libc")


@dataclass(frozen=True)
class Host:
    """What the operating system says of itself: ``platform.uname()`` plus the C library.

    ``system`` is ``platform.system()``'s word ("Linux", "Darwin", "Windows"); ``libc`` is
    ``os.confstr("CS_GNU_LIBC_VERSION")`` ("glibc 2.39"). ``source`` says where it came from.
    """

    system: str | None = None
    machine: str | None = None
    release: str | None = None
    version: str | None = None
    node: str | None = None
    libc: str | None = None
    cpu_count: int | None = None
    source: str = "platform.uname()"

    @classmethod
    def live(cls) -> Host:
        u = _platform.uname()
        try:
            libc = os.confstr("CS_GNU_LIBC_VERSION")
        except (ValueError, OSError, AttributeError):
            libc = None
        return cls(u.system or None, u.machine or None, u.release or None, u.version or None, u.node or None, libc, os.cpu_count(), "platform.uname()")

    def label(self, field: str) -> str:
        """Where this host's ``field`` came from, for a facts ``sources`` map: ``platform.system()``
        live, ``file:/.stackdoctor/host.json (system)`` for a captured tree."""
        if self.source == "platform.uname()":
            return {"libc": 'os.confstr("CS_GNU_LIBC_VERSION")', "cpu_count": "os.cpu_count()", "node": "socket.gethostname()"}.get(
                field, f"platform.{field}()"
            )
        return f"{self.source} ({field})"

    @classmethod
    def from_data(cls, data: object, source: str) -> Host | None:
        """A host from ``host.json``'s object; None when it is not one (unknown keys are ignored)."""
        if not isinstance(data, dict):
            return None
        vals: dict[str, Any] = {k: data[k] for k in _HOST_KEYS if isinstance(data.get(k), str) and data[k]}
        n = data.get("cpu_count")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            vals["cpu_count"] = n
        return cls(**vals, source=source)


class NotRegularFile(OSError):
    """A path that names a FIFO, socket, device or directory where a file was expected (see :func:`read_bounded`)."""


class TooLarge(OSError):
    """A file larger than the reader's cap (see :func:`read_bounded`)."""


def _kind_of(mode: int) -> str:
    import stat

    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on ``path`` if it is a regular file (the caller closes it).

    Opened with ``O_NONBLOCK`` (a FIFO would block ``open`` itself until a writer came) and checked
    with ``fstat``. :raises NotRegularFile: a FIFO, device, socket or directory (its ``strerror``
    names which); any other ``OSError`` as ``open`` raises it."""
    import stat

    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFile(errno.EISDIR, "is a directory") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "is a directory" if stat.S_ISDIR(mode) else f"it is {_kind_of(mode)}, not a regular file")
    return fd


def read_bounded(path: str | os.PathLike[str], max_bytes: int, *, too_large: bool = False) -> bytes:
    """At most ``max_bytes`` of the regular file ``path``: every read stackdoctor makes of a file a user,
    a configuration or a machine hands it goes through here (or :meth:`System.read_text`, which uses it).

    ``too_large``: a file larger than ``max_bytes`` raises :class:`TooLarge` instead of being cut.
    The size ``fstat`` gives is not trusted for the cut (``/proc`` and ``/sys`` files say 0).
    :raises NotRegularFile: a FIFO, device, socket or directory (never blocks, never floods)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if too_large and size > max_bytes:
            raise TooLarge(errno.EFBIG, f"it is {size} bytes, more than the {max_bytes} a file of this kind can be")
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0:
            try:
                part = os.read(fd, min(left, 1 << 20))
            except BlockingIOError:  # pragma: no cover - a regular file never says EAGAIN
                break
            if not part:
                break
            chunks.append(part)
            left -= len(part)
        if too_large and left <= 0 and os.read(fd, 1):
            raise TooLarge(errno.EFBIG, f"it is more than the {max_bytes} bytes a file of this kind can be")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class _Capture:
    """Drains a pipe in a thread, keeping at most ``cap`` bytes (the rest is read and dropped).

    With a ``sink``, each decoded piece is also passed on as it arrives (streamed installs).
    """

    def __init__(self, pipe, cap: int, sink: Callable[[str], None] | None = None) -> None:
        import codecs

        self.chunks: list[bytes] = []
        self.size = 0
        self.cap = cap
        self.truncated = False
        self._pipe = pipe
        self._sink = sink
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace") if sink else None
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        try:
            while True:
                chunk = self._pipe.read1(65536) if hasattr(self._pipe, "read1") else self._pipe.read(65536)
                if not chunk:
                    break
                room = self.cap - self.size
                if room > 0:
                    self.chunks.append(chunk[:room])
                    self.size += min(len(chunk), room)
                if len(chunk) > max(room, 0):
                    self.truncated = True
                if self._sink is not None and self._decoder is not None:
                    try:
                        self._sink(self._decoder.decode(chunk))
                    except Exception:  # a broken sink (closed terminal) must not stop the capture
                        pass
        except (OSError, ValueError):
            pass

    def text(self) -> str:
        return _decode(b"".join(self.chunks))


class ProcessControl:
    """How a child (and everything it starts) is started, asked to stop and killed.

    :meth:`System.run` and :meth:`System.run_streaming` call only these three methods, so a
    platform's behaviour lives in one subclass and tests can inject another one.
    """

    name = "abstract"

    def popen_options(self) -> dict[str, Any]:
        """Extra :class:`subprocess.Popen` keyword arguments (own session / process group)."""
        raise NotImplementedError

    def interrupt(self, proc: subprocess.Popen) -> None:
        """Ask the child and its children to stop the way Ctrl-C would (their clean-up path)."""
        raise NotImplementedError

    def kill_tree(self, proc: subprocess.Popen) -> None:
        """Kill the child and everything it started; never raises."""
        raise NotImplementedError


class PosixGroups(ProcessControl):
    """POSIX: the child leads its own session; signals go to its whole process group."""

    name = "posix-process-group"

    def popen_options(self) -> dict[str, Any]:
        return {"start_new_session": True}

    def interrupt(self, proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGINT)
        except (ProcessLookupError, PermissionError, OSError):
            pass

    def kill_tree(self, proc: subprocess.Popen) -> None:
        # The group outlives its leader: this also reaches a grandchild still holding our pipe.
        try:
            os.killpg(proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        except (ProcessLookupError, PermissionError, OSError):
            try:
                proc.kill()
            except OSError:
                pass


class WindowsTree(ProcessControl):
    """Windows: a new process group per child, ``CTRL_BREAK_EVENT`` to interrupt, a psutil tree kill.

    The constants default to the Windows ones where they exist. Elsewhere (the suite on
    Linux runs this class too) there is no ``CREATE_NEW_PROCESS_GROUP`` and no
    ``CTRL_BREAK_EVENT``: the child then shares this process group and the interrupt is
    ``SIGINT`` to the child itself; the tree kill is the same code on both.

    Before an interrupt the tree is remembered (psutil ``Process`` objects, which know their
    creation time, so a reused pid is never killed): when the child exits on the interrupt
    but leaves children behind, :meth:`kill_tree` still reaches them.
    """

    name = "windows-process-tree"

    def __init__(self, creationflags: int | None = None, break_signal: int | None = None) -> None:
        self.creationflags = getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0) if creationflags is None else creationflags
        self.break_signal = getattr(signal, "CTRL_BREAK_EVENT", signal.SIGINT) if break_signal is None else break_signal
        self._remembered: dict[int, list[Any]] = {}
        self._lock = threading.Lock()

    def popen_options(self) -> dict[str, Any]:
        return {"creationflags": self.creationflags} if self.creationflags else {}

    def interrupt(self, proc: subprocess.Popen) -> None:
        if proc.poll() is not None:
            return
        tree = self._tree(proc, freeze=False)
        with self._lock:
            self._remembered.setdefault(proc.pid, []).extend(tree)
        try:
            # On Windows, CTRL_BREAK_EVENT to a pid is delivered to the process group it leads.
            os.kill(proc.pid, self.break_signal)
        except (ProcessLookupError, PermissionError, OSError, ValueError):
            pass

    def kill_tree(self, proc: subprocess.Popen) -> None:
        with self._lock:
            remembered = self._remembered.pop(proc.pid, [])
        # reaped: its pid may already name another process, so only the remembered tree is killed
        found = self._tree(proc, freeze=True) if proc.poll() is None else []
        if not found and not remembered and proc.poll() is None:
            try:
                proc.kill()  # no psutil: at least the child itself goes
            except OSError:
                pass
            return
        victims = {p.pid: p for p in remembered}
        victims.update((p.pid, p) for p in found)
        try:
            import psutil  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            return
        for p in victims.values():
            try:
                if p.is_running():  # compares the creation time: never a reused pid
                    p.kill()
            except psutil.Error:
                pass
        _wait_gone([p for p in victims.values() if p.pid != proc.pid], timeout=2.0)

    @staticmethod
    def _tree(proc: subprocess.Popen, *, freeze: bool) -> list[Any]:
        """The child and its descendants (psutil processes); with ``freeze``, each is suspended and the
        tree is looked at again until no new process appears, so nothing escapes while it is killed."""
        try:
            import psutil  # type: ignore[import-untyped, unused-ignore]
        except ImportError:
            return []
        try:
            root = psutil.Process(proc.pid)
        except psutil.Error:
            return []
        found: dict[int, Any] = {root.pid: root}
        for _ in range(8 if freeze else 1):
            if freeze:
                for p in list(found.values()):
                    try:
                        p.suspend()
                    except psutil.Error:
                        pass
            try:
                kids = root.children(recursive=True)
            except psutil.Error:
                kids = []
            fresh = [k for k in kids if k.pid not in found]
            found.update((k.pid, k) for k in fresh)
            if not fresh:
                break
        return list(found.values())


def _wait_gone(procs: list[Any], timeout: float) -> None:
    """Wait (bounded) until every psutil process has exited; a zombie (left for its new parent to
    reap, as in a container whose init does not) counts as gone."""
    import psutil  # type: ignore[import-untyped, unused-ignore]

    end = time.monotonic() + timeout
    left = list(procs)
    while left and time.monotonic() < end:
        still = []
        for p in left:
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    still.append(p)
            except psutil.Error:
                pass
        left = still
        if left:
            time.sleep(0.02)


# Every child System.run / run_streaming started and that has not ended yet, with the control that
# started it: on Ctrl-C the CLI stops them all (stop_children), since each runs in a session (process
# group) of its own and would not see the terminal's SIGINT.
_LIVE: dict[int, tuple[subprocess.Popen, ProcessControl]] = {}
_LIVE_LOCK = threading.Lock()


def _track(proc: subprocess.Popen, control: ProcessControl) -> None:
    with _LIVE_LOCK:
        _LIVE[proc.pid] = (proc, control)


def _untrack(proc: subprocess.Popen) -> None:
    with _LIVE_LOCK:
        if proc.poll() is not None:  # a child still running stays for stop_children
            _LIVE.pop(proc.pid, None)


# ---------------------------------------------------------------------------- a process's identity

PR_SET_PDEATHSIG = 1


def die_with_parent_preexec() -> Callable[[], None] | None:
    """Linux: a ``preexec_fn`` giving the child ``PR_SET_PDEATHSIG(SIGKILL)`` (libc ``prctl`` through ctypes), and
    killing it at once when its parent already died before that (the race between fork and prctl); None elsewhere.
    It runs after ``start_new_session``'s ``setsid``: the child keeps its own session (a terminal's Ctrl-C reaches
    only this process, which stops the child itself)."""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()
    kill = int(getattr(signal, "SIGKILL", 9))

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), kill)

    return preexec


def _proc_stat(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat``'s fields after the command name (field 3, the state, is the first), or None."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except (OSError, ValueError):
        return None
    return text.rsplit(")", 1)[-1].split()


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as a token that another process with the same pid cannot share (Linux:
    ``/proc/<pid>/stat`` field 22, clock ticks since boot; elsewhere psutil's create time); None: no such process,
    or unknown."""
    if pid <= 0:
        return None
    fields = _proc_stat(pid)
    if fields is not None:
        return fields[19] if len(fields) > 19 else None
    if os.path.isdir("/proc/self"):
        return None
    try:
        import psutil  # type: ignore[import-untyped, unused-ignore]

        return repr(psutil.Process(pid).create_time())
    except Exception:  # noqa: BLE001 - no psutil, no such process, no permission: unknown
        return None


def process_alive(pid: int, start: str | None = None) -> bool:
    """Whether ``pid`` runs (a zombie does not) and, with ``start``, is the very process that had that start time."""
    if pid <= 0:
        return False
    fields = _proc_stat(pid)
    if fields is not None:
        if fields[0] in ("Z", "X"):
            return False
        return start is None or (len(fields) > 19 and fields[19] == start)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        pass
    return start is None or process_start(pid) in (None, start)


def session_processes(sid: int, start: str | None) -> list[int]:
    """Linux: the live processes of the session ``sid`` leads or led (an installer's children outlive it), started at or
    after ``start`` (so a later session that reuses the number is not counted); elsewhere the leader only."""
    if sid <= 0:
        return []
    if not os.path.isdir("/proc/self"):
        return [sid] if process_alive(sid, start) else []
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return [sid] if process_alive(sid, start) else []
    for name in names:
        if not name.isdigit():
            continue
        fields = _proc_stat(int(name))
        if fields is None or len(fields) <= 19 or fields[0] in ("Z", "X") or fields[3] != str(sid):
            continue
        if start is not None and start.isdigit() and fields[19].isdigit() and int(fields[19]) < int(start):
            continue
        out.append(int(name))
    return sorted(out)


_LENT: list[str] = []  # temporary directories lent to targets (lend_package), removed at exit
_LENT_LOCK = threading.Lock()


def _remember_lent(path: str) -> None:
    with _LENT_LOCK:
        if not _LENT:
            import atexit

            atexit.register(remove_lent)
        _LENT.append(path)


OWNER_FILE = ".stackdoctor-owner"  # in a lent directory: "<pid> <start time>" of the process that made it
UNOWNED_STALE_S = 6 * 3600.0  # a lent directory with no owner file (an older stackdoctor's) is stale after this


def _mark_owner(d: str) -> None:
    try:
        with open(os.path.join(d, OWNER_FILE), "w", encoding="ascii") as f:
            f.write(f"{os.getpid()} {process_start(os.getpid()) or ''}\n")
    except OSError:
        pass


def _owner_gone(d: str) -> bool:
    """Whether the process that made the lent directory ``d`` has ended (its pid gone, or reused by another)."""
    try:
        with open(os.path.join(d, OWNER_FILE), encoding="ascii") as f:
            words = f.read().split()
    except FileNotFoundError:
        try:
            return time.time() - os.lstat(d).st_mtime > UNOWNED_STALE_S
        except OSError:
            return False
    except OSError:
        return False
    if not words or not words[0].isdigit():
        return False
    pid = int(words[0])
    return pid != os.getpid() and not process_alive(pid, words[1] if len(words) > 1 else None)


def sweep_dead_lent(prefix: str) -> list[str]:
    """Remove the lent directories (``$TMPDIR/<prefix>*``) whose owner is gone: a stackdoctor killed by SIGKILL
    never ran its clean-up. A directory another live stackdoctor lent is left alone. Never raises."""
    import glob

    removed = []
    for d in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(prefix) + "*")):
        try:
            if os.path.isdir(d) and not os.path.islink(d) and _owner_gone(d):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
        except OSError:
            pass
    return removed


def lent_dirs() -> list[str]:
    """The temporary directories lent so far and not yet removed."""
    with _LENT_LOCK:
        return list(_LENT)


def remove_lent() -> None:
    """Remove every temporary directory :meth:`System.lend_package` made (the link inside is removed,
    never what it points to). Never raises; safe to call more than once."""
    with _LENT_LOCK:
        dirs = list(_LENT)
        _LENT.clear()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def stop_children() -> int:
    """Kill every child this process started through :class:`System` that still runs, each with
    everything it started (its process group, or its tree on Windows). The CLI calls this on
    Ctrl-C: a child in its own session does not get the terminal's SIGINT, and an allreduce rank
    or an ``import torch`` would otherwise run on after stackdoctor has exited. Returns how many
    children were killed; never raises."""
    with _LIVE_LOCK:
        live = list(_LIVE.values())
        _LIVE.clear()
    killed = 0
    for proc, control in live:
        try:
            if proc.poll() is not None:
                continue
            control.kill_tree(proc)
            killed += 1
        except Exception:
            try:
                proc.kill()
            except OSError:
                pass
    return killed


def default_control(os_name: str | None = None) -> ProcessControl:
    """The process control for an OS (``os.name``: ``"nt"`` -> :class:`WindowsTree`, else :class:`PosixGroups`)."""
    return WindowsTree() if (os_name or os.name) == "nt" else PosixGroups()


@dataclass(frozen=True)
class Started:
    """A child that :meth:`System.run` has started, handed to its ``on_start`` callback, so a caller
    can stop it early (the allreduce runner stops the other ranks once one has failed)."""

    pid: int
    _proc: subprocess.Popen = field(repr=False)
    _control: ProcessControl = field(repr=False)

    def kill(self) -> bool:
        """Kill the child and everything it started; False when it had already ended."""
        if self._proc.poll() is not None:
            return False
        self._control.kill_tree(self._proc)
        return True


@dataclass
class System:
    """The machine as stackdoctor sees it: a file root, a PATH, an environment and a clock.

    Tests and support engineers move it with ``STACKDOCTOR_SYSROOT`` and a PATH of fake tools.
    """

    sysroot: str = "/"
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = DEFAULT_TIMEOUT_S
    record: list[CommandResult] = field(default_factory=list)
    host_override: Host | None = None  # tests inject the OS identity here
    control: ProcessControl = field(default_factory=default_control)  # how children are started and killed
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _host: Host | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, timeout_s: float | None = None) -> System:
        """The System for this process's environment.

        Raises :class:`~stackdoctor.errors.UsageError` when ``STACKDOCTOR_SYSROOT`` names
        no directory (bad input, exit 2), so that no command probes an empty tree.
        """
        env = dict(os.environ if env is None else env)
        root = env.get("STACKDOCTOR_SYSROOT") or "/"
        if not os.path.isdir(root):
            # a mistyped root would otherwise read as an empty machine and look healthy
            from stackdoctor.errors import UsageError

            raise UsageError(f"STACKDOCTOR_SYSROOT={root} does not exist (or is not a directory).")
        return cls(sysroot=root, env=env, timeout_s=timeout_s or DEFAULT_TIMEOUT_S)

    # ---- the host ----------------------------------------------------------------
    def host(self) -> Host:
        """What the OS says of itself: injected, else the captured tree's ``host.json``, else live.

        A moved root without ``host.json`` is a captured Linux tree (the historical layout):
        ``Host(system="Linux")`` with nothing else known, so no live value leaks into a replay.
        """
        if self.host_override is not None:
            return self.host_override
        if self._host is None:
            if not self.moved:
                self._host = Host.live()
            else:
                r = self.read_text(HOST_FILE)
                found = None
                if r.ok:
                    try:
                        found = Host.from_data(json.loads(r.text), f"file:{HOST_FILE}")
                    except ValueError:
                        found = None
                self._host = found or Host(system="Linux", source="sysroot (a captured Linux tree; no /.stackdoctor/host.json)")
        return self._host

    @property
    def live(self) -> bool:
        """True when this System describes the machine stackdoctor runs on (not a replay or an injected host)."""
        return not self.moved and self.host_override is None

    def hostname(self) -> str | None:
        """The host name: ``/proc/sys/kernel/hostname``, else the host's node name."""
        r = self.read_text("/proc/sys/kernel/hostname")
        if r.ok and r.text.strip():
            return r.text.strip().splitlines()[0]
        if self.live:
            try:
                return socket.gethostname() or None
            except OSError:
                return None
        return self.host().node

    # ---- files -----------------------------------------------------------------
    @property
    def local(self) -> System:
        """This System reading this machine's own files (root ``/``): for paths of live processes,
        such as the target interpreter's prefix or a tool found on PATH, which no sysroot moves."""
        if not self.moved:
            return self
        return System(sysroot="/", env=self.env, timeout_s=self.timeout_s, record=self.record, host_override=self.host_override, control=self.control)

    @property
    def moved(self) -> bool:
        """True when reads come from a captured tree rather than this machine."""
        return os.path.realpath(self.sysroot) != "/"

    def path(self, path: str) -> Path:
        """Map an absolute machine path into the sysroot.

        A POSIX path ``/proc/version`` is ``<root>/proc/version``. A Windows path names its drive:
        ``C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe`` is
        ``<root>/C/Program Files/NVIDIA Corporation/NVSMI/nvidia-smi.exe`` (the drive letter upper
        case, ``\\`` or ``/`` as separators, names spelled as Windows spells them). Without a moved
        root a Windows path is used as it is (live Windows).
        """
        m = _DRIVE.match(path)
        if m:
            if not self.moved:
                return Path(path)
            rest = [p for p in re.split(r"[\\/]+", path[m.end():]) if p]
            return Path(self.sysroot, m.group(1).upper(), *rest)
        rel = path.lstrip("/")
        return Path(self.sysroot) / rel

    @property
    def windows(self) -> bool:
        """Whether the machine described is Windows (live, injected, or a captured tree's host.json)."""
        return self.host().system == "Windows"

    @property
    def ospath(self) -> Any:
        """The path module of the machine described: :mod:`ntpath` for Windows, else :mod:`posixpath`
        (so ``C:\\CUDA\\v12.4\\bin\\nvcc.exe`` is taken apart the same on any OS)."""
        return ntpath if self.windows else posixpath

    def getenv(self, name: str) -> str | None:
        """An environment variable of the machine described; on Windows the name is matched without
        regard to case (``os.environ`` there says ``SYSTEMROOT`` for ``SystemRoot``)."""
        value = self.env.get(name)
        if value is None and self.windows:
            low = name.lower()
            value = next((v for k, v in self.env.items() if k.lower() == low), None)
        return value or None

    def read_text(self, path: str, *, max_bytes: int = MAX_FILE_BYTES) -> ReadResult:
        """At most ``max_bytes`` of a file under the sysroot, decoded. A FIFO, socket or device named
        like a file (``torch/version.py`` as a named pipe, ``/dev/zero``) is an ``error``: opened
        non-blocking and checked with ``fstat`` before anything is read, so it never blocks or floods."""
        real = self.path(path)
        try:
            data = read_bounded(real, max_bytes)
        except FileNotFoundError:
            return ReadResult(path, "absent")
        except NotADirectoryError:
            return ReadResult(path, "absent")
        except PermissionError as exc:
            return ReadResult(path, "denied", detail=exc.strerror or "permission denied")
        except NotRegularFile as exc:
            return ReadResult(path, "error", detail=exc.strerror or "not a regular file")
        except IsADirectoryError:
            return ReadResult(path, "error", detail="is a directory")
        except OSError as exc:
            return ReadResult(path, "error", detail=exc.strerror or str(exc))
        return ReadResult(path, "ok", _decode(data))

    def exists(self, path: str) -> bool:
        try:
            return self.path(path).exists()
        except OSError:
            return False

    def is_file(self, path: str) -> bool:
        try:
            return self.path(path).is_file()
        except OSError:
            return False

    def is_executable(self, path: str) -> bool:
        """A regular file this process may execute."""
        try:
            real = self.path(path)
            return real.is_file() and os.access(real, os.X_OK)
        except OSError:
            return False

    def realpath(self, path: str) -> str:
        """The resolved path of ``path`` under the sysroot (for de-duplicating links)."""
        return os.path.realpath(self.path(path))

    def readlink(self, path: str) -> str | None:
        """The target of a symbolic link under the sysroot, as stored (None when not a link)."""
        try:
            return os.readlink(self.path(path))
        except (OSError, ValueError):
            return None

    def process_alive(self, pid: int, start: str | None = None) -> bool:
        """Whether process ``pid`` of this machine runs and, with ``start``, is the one that started then
        (:func:`process_alive`; always the live machine, never a sysroot)."""
        return process_alive(pid, start)

    def session_processes(self, sid: int, start: str | None) -> list[int]:
        """The live processes of session ``sid`` started at or after ``start`` (:func:`session_processes`)."""
        return session_processes(sid, start)

    def mkdtemp(self, prefix: str) -> str:
        """A new private temporary directory of this process (worker files, lent packages)."""
        return tempfile.mkdtemp(prefix=prefix)

    def lend_package(self, package_dir: Path, *, prefix: str) -> str | None:
        """A new temporary directory holding only a link to ``package_dir`` (a copy where links are
        not allowed, as on Windows without developer mode), for a target's ``sys.path``; None on failure.

        The directory is removed when this process ends (:func:`remove_lent`: the CLI calls it on every
        exit path, signals included, and ``atexit`` covers library use)."""
        sweep_dead_lent(prefix)
        try:
            d = tempfile.mkdtemp(prefix=prefix)
            _remember_lent(d)
            _mark_owner(d)
            dest = os.path.join(d, package_dir.name)
            try:
                os.symlink(package_dir, dest, target_is_directory=True)
            except OSError:
                shutil.copytree(package_dir, dest)
            return d
        except OSError:
            return None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries of a directory under the sysroot; empty when absent or unreadable."""
        try:
            return sorted(os.listdir(self.path(path)))
        except OSError:
            return []

    def access(self, path: str, mode: int = os.R_OK | os.W_OK) -> tuple[bool, str]:
        """Whether this process may open ``path`` with ``mode``; (False, reason) otherwise."""
        real = self.path(path)
        if not real.exists():
            return False, "absent"
        try:
            fd = os.open(real, os.O_RDWR if mode & os.W_OK else os.O_RDONLY)
            os.close(fd)
            return True, ""
        except PermissionError as exc:
            return False, exc.strerror or "permission denied"
        except OSError as exc:
            if exc.errno in (errno.ENXIO, errno.ENODEV, errno.EIO):
                return False, exc.strerror or str(exc)
            return False, exc.strerror or str(exc)

    def open_binary(self, path: str) -> BinaryIO | ReadResult:
        """An unbuffered, seekable binary handle on a regular file under the sysroot (the caller closes it).

        A failure is a :class:`ReadResult` (absent / denied / error) instead: never raises, and
        never blocks on a FIFO or device named like a library (opened non-blocking, checked
        to be a regular file before it is handed out).
        """
        import stat

        real = self.path(path)
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        except (FileNotFoundError, NotADirectoryError):
            return ReadResult(path, "absent")
        except PermissionError as exc:
            return ReadResult(path, "denied", detail=exc.strerror or "permission denied")
        except OSError as exc:
            return ReadResult(path, "error", detail=exc.strerror or str(exc))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                os.close(fd)
                return ReadResult(path, "error", detail="not a regular file")
            return os.fdopen(fd, "rb", buffering=0)
        except OSError as exc:
            os.close(fd)
            return ReadResult(path, "error", detail=exc.strerror or str(exc))

    # ---- tools -----------------------------------------------------------------
    def which(self, name: str) -> str | None:
        return shutil.which(name, path=self.env.get("PATH", os.defpath))

    def unrunnable(self, name: str) -> str | None:
        """The first file called ``name`` on PATH that this user may not execute, when no runnable one exists.

        ``which`` skips such a file, so without this a tool that is installed but not executable (a bad
        ``chmod``, a ``noexec`` mount) would read as "not installed".
        """
        if self.which(name) is not None:
            return None
        for folder in self.env.get("PATH", os.defpath).split(os.pathsep):
            candidate = os.path.join(folder or ".", name)
            if os.path.isfile(candidate) and not os.access(candidate, os.X_OK):
                return candidate
        return None

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str | None] | None = None,
        parse_env: bool = True,
        stdin: bytes | None = None,
        max_bytes: int = MAX_CAPTURE_BYTES,
        record: bool = True,
        on_start: Callable[[Started], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        die_with_parent: bool = False,
    ) -> CommandResult:
        """Run ``argv`` without a shell; never raises, never waits past ``timeout``.

        ``on_start`` gets a :class:`Started` handle as soon as the child runs (to stop it early);
        ``on_stderr`` gets the child's stderr as it arrives (progress), captured all the same;
        ``die_with_parent`` as for :meth:`run_streaming` (the install's workers that write files)."""
        timeout = self.timeout_s if timeout is None else timeout
        preexec = die_with_parent_preexec() if die_with_parent and isinstance(self.control, PosixGroups) else None
        spawned = self._spawn(argv, env, parse_env, stdin is not None, preexec=preexec)
        if isinstance(spawned, CommandResult):
            return self._keep(spawned, record)
        proc, argv, start = spawned
        if on_start is not None:
            try:
                on_start(Started(proc.pid, proc, self.control))
            except Exception:  # a caller's bookkeeping must not leave the child unwatched
                pass
        try:
            out = _Capture(proc.stdout, max_bytes)
            err = _Capture(proc.stderr, max_bytes, on_stderr)
            if stdin is not None:
                try:
                    proc.stdin.write(stdin)  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            timed_out = False
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._kill(proc)
            except KeyboardInterrupt:  # Ctrl-C while we wait: the child (in its own session) goes too
                self._kill(proc)
                raise
            # A child that exits but leaves a grandchild holding the pipe must not hang us either.
            deadline = time.monotonic() + 1.0
            for cap in (out, err):
                cap.thread.join(max(0.0, deadline - time.monotonic()))
                if cap.thread.is_alive():
                    self._kill(proc)
                    cap.thread.join(0.5)
            status = "timeout" if timed_out else None
            return self._keep(_result(argv, proc, out, err, start, status, timeout), record)
        finally:
            _untrack(proc)

    def run_streaming(
        self,
        argv: Sequence[str],
        *,
        timeout: float,
        on_stdout: Callable[[str], None] | None = None,
        on_stderr: Callable[[str], None] | None = None,
        env: Mapping[str, str | None] | None = None,
        grace_s: float = 30.0,
        max_bytes: int = MAX_CAPTURE_BYTES,
        record: bool = True,
        cwd: str | None = None,
        on_start: Callable[[int], None] | None = None,
        die_with_parent: bool = False,
    ) -> CommandResult:
        """Like :meth:`run` (no shell, bounded, never raises), for long actions such as installs; ``cwd`` is the
        folder the child runs in (this process's own folder when None). ``on_start`` gets the child's pid as soon
        as it runs (the install journal records it); ``die_with_parent`` (Linux): the child gets
        ``PR_SET_PDEATHSIG(SIGKILL)``, so a SIGKILL of this process alone stops it too (call from the main thread:
        the kernel sends it when the *thread* that started the child ends). On any exception but Ctrl-C the child
        is killed before the exception goes on.

        Output is passed to ``on_stdout`` / ``on_stderr`` as it arrives and captured too. The child
        runs in its own session (process group on Windows); at the timeout, or when this process
        gets ``KeyboardInterrupt`` (Ctrl-C), the child is asked to stop the way Ctrl-C would
        (:meth:`ProcessControl.interrupt`: SIGINT to the group, on which pip and uv clean up;
        ``CTRL_BREAK_EVENT`` on Windows), then it and its children are killed after ``grace_s``. An interrupted run has ``status == "interrupted"``; the caller decides
        what to do next (the ``KeyboardInterrupt`` is not re-raised). Not parse-env'd: the user's
        locale is kept for a tool whose output is shown, not parsed.
        """
        preexec = die_with_parent_preexec() if die_with_parent and isinstance(self.control, PosixGroups) else None
        spawned = self._spawn(argv, env, False, False, cwd, preexec=preexec)
        if isinstance(spawned, CommandResult):
            return self._keep(spawned, record)
        proc, argv, start = spawned
        try:
            if on_start is not None:
                try:
                    on_start(proc.pid)
                except Exception:  # noqa: BLE001 - recording the child must not leave it running unwatched
                    pass
            return self._stream(proc, argv, start, timeout, on_stdout, on_stderr, grace_s, max_bytes, record)
        except BaseException:  # anything but Ctrl-C (which _stream handles): the child never outlives this call
            if proc.poll() is None:
                self._kill(proc)
            raise
        finally:
            _untrack(proc)

    def _stream(
        self,
        proc: subprocess.Popen,
        argv: tuple[str, ...],
        start: float,
        timeout: float,
        on_stdout: Callable[[str], None] | None,
        on_stderr: Callable[[str], None] | None,
        grace_s: float,
        max_bytes: int,
        record: bool,
    ) -> CommandResult:
        out = _Capture(proc.stdout, max_bytes, on_stdout)
        err = _Capture(proc.stderr, max_bytes, on_stderr)
        interrupted = timed_out = False
        deadline = start + timeout
        while True:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                timed_out = True
                self._stop(proc, grace_s)
                break
            except KeyboardInterrupt:
                interrupted = True
                try:
                    self._stop(proc, grace_s)
                except KeyboardInterrupt:  # a second Ctrl-C: stop now
                    self._kill(proc)
                break
        for cap in (out, err):
            cap.thread.join(2.0)
        status = "interrupted" if interrupted else "timeout" if timed_out else None
        return self._keep(_result(argv, proc, out, err, start, status, timeout), record)

    def _spawn(
        self,
        argv: Sequence[str],
        env: Mapping[str, str | None] | None,
        parse_env: bool,
        with_stdin: bool,
        cwd: str | None = None,
        *,
        preexec: Callable[[], None] | None = None,
    ) -> tuple[subprocess.Popen, tuple[str, ...], float] | CommandResult:
        """Start ``argv`` in its own session with the merged environment, or say why it could not start."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0]
        if os.sep not in exe and not (os.altsep and os.altsep in exe):
            found = self.which(exe)
            if found is None:
                blocked = self.unrunnable(exe)
                if blocked is not None:
                    return CommandResult(argv, None, "", "", 0.0, "denied", detail=f"{blocked} is not executable")
                return CommandResult(argv, None, "", "", 0.0, "absent", detail="not found on PATH")
            exe = found
        child_env = dict(self.env)
        if parse_env:
            child_env.update(_PARSE_ENV)
        for key, value in (env or {}).items():
            if value is None:
                child_env.pop(key, None)
            else:
                child_env[key] = value
        options: dict[str, Any] = dict(self.control.popen_options())
        if preexec is not None:
            options["preexec_fn"] = preexec
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                (exe, *argv[1:]),
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                cwd=cwd,
                close_fds=True,
                **options,
            )
        except FileNotFoundError:
            return CommandResult(argv, None, "", "", 0.0, "absent", detail="not found")
        except PermissionError as exc:
            return CommandResult(argv, None, "", "", 0.0, "denied", detail=exc.strerror or "permission denied")
        except OSError as exc:
            return CommandResult(argv, None, "", "", 0.0, "error", detail=exc.strerror or str(exc))
        _track(proc, self.control)
        return proc, argv, start

    def _stop(self, proc: subprocess.Popen, grace_s: float) -> None:
        """Interrupt the child (its own clean-up path); after it exits, or after ``grace_s``, kill
        what is left of its tree (a child it started and did not stop would hold our pipes)."""
        self.control.interrupt(proc)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            pass
        self._kill(proc)

    def _kill(self, proc: subprocess.Popen) -> None:
        """Kill the child and everything it started, then reap it (bounded)."""
        try:
            self.control.kill_tree(proc)
        except Exception:  # never let a kill strategy's bug become a hang or a crash
            try:
                proc.kill()
            except OSError:
                pass
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass

    def _keep(self, result: CommandResult, record: bool) -> CommandResult:
        if record:
            with self._lock:
                self.record.append(result)
        return result


def _result(
    argv: tuple[str, ...], proc: subprocess.Popen, out: _Capture, err: _Capture, start: float, status: str | None, timeout: float
) -> CommandResult:
    """The :class:`CommandResult` of a finished (or stopped) child; ``status`` set when the caller stopped it."""
    rc = proc.returncode
    sig = -rc if rc is not None and rc < 0 else None
    if status == "interrupted":
        detail = "interrupted by the user"
    elif status == "timeout":
        detail, sig = f"{timeout:g}", None
    elif sig is not None:
        status, detail = "error", f"killed by {signame(sig)}"
    else:
        status, detail = "ok", ""
    return CommandResult(
        argv=argv,
        returncode=rc,
        stdout=out.text(),
        stderr=err.text(),
        duration_s=time.monotonic() - start,
        status=status,
        signal=sig,
        truncated=out.truncated or err.truncated,
        detail=detail,
    )


def signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"

