"""Children and their trees: how a tool is captured, started in its own session, interrupted and killed
(:class:`ProcessControl`), which children still run (:func:`stop_children`), and a process's identity
(:func:`process_start`, :func:`process_alive`, :func:`session_processes`)."""

from __future__ import annotations

import codecs
import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from stackdoctor.system.files import decode
from stackdoctor.system.results import CommandResult, signame


class Capture:
    """Drains a pipe in a thread, keeping at most ``cap`` bytes (the rest is read and dropped).

    With a ``sink``, each decoded piece is also passed on as it arrives (streamed installs).
    """

    def __init__(self, pipe, cap: int, sink: Callable[[str], None] | None = None) -> None:
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
        return decode(b"".join(self.chunks))


WAIT_SLICE_S = 0.05  # the longest a Ctrl-C waits for the main thread in wait_exited (proc.wait's own longest sleep)


def wait_exited(proc: subprocess.Popen, timeout: float | None) -> int:
    """``proc.wait(timeout)``, told of the exit by the kernel where it can: ``subprocess``'s own wait with a timeout
    polls with sleeps that double up to 50 ms, so a child that ends after 35 ms is seen only at 64 ms (the target
    worker of every ``check``). On Linux a pidfd (``os.pidfd_open``, kernel 5.3+) becomes readable at the exit;
    where there is none (another OS, an older kernel, a seccomp filter refusing it) it is ``proc.wait`` as before.
    The wait is cut in slices of :data:`WAIT_SLICE_S`, as ``proc.wait``'s own: a Ctrl-C that the kernel gave another
    thread, or ``_thread.interrupt_main``, reaches the main thread's bytecode between two of them.
    Raises :class:`subprocess.TimeoutExpired` as ``proc.wait`` does; Ctrl-C goes through to the caller."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None or timeout is None or proc.returncode is not None:
        return proc.wait(timeout=timeout)
    end = time.monotonic() + timeout
    try:
        fd = pidfd_open(proc.pid)
    except OSError:
        return proc.wait(timeout=timeout)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while not poller.poll(min(WAIT_SLICE_S, max(0.0, end - time.monotonic())) * 1000):
            if time.monotonic() >= end:
                raise subprocess.TimeoutExpired(proc.args, timeout)
    finally:
        os.close(fd)
    return proc.wait(timeout=max(0.0, end - time.monotonic()) + 1.0)  # exited: the zombie is reaped at once


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
LIVE_CHILDREN: dict[int, tuple[subprocess.Popen, ProcessControl]] = {}
_LIVE_LOCK = threading.Lock()


def track(proc: subprocess.Popen, control: ProcessControl) -> None:
    with _LIVE_LOCK:
        LIVE_CHILDREN[proc.pid] = (proc, control)


def untrack(proc: subprocess.Popen) -> None:
    with _LIVE_LOCK:
        if proc.poll() is not None:  # a child still running stays for stop_children
            LIVE_CHILDREN.pop(proc.pid, None)


# ---------------------------------------------------------------------------- a process's identity

PR_SET_PDEATHSIG = 1


def die_with_parent_preexec() -> Callable[[], None] | None:
    """Linux: a ``preexec_fn`` giving the child ``PR_SET_PDEATHSIG(SIGKILL)`` (libc ``prctl`` through ctypes), and
    killing it at once when its parent already died before that (the race between fork and prctl); None elsewhere.
    It runs after ``start_new_session``'s ``setsid``: the child keeps its own session (a terminal's Ctrl-C reaches
    only this process, which stops the child itself)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
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


def stop_children() -> int:
    """Kill every child this process started through :class:`System` that still runs, each with
    everything it started (its process group, or its tree on Windows). The CLI calls this on
    Ctrl-C: a child in its own session does not get the terminal's SIGINT, and an allreduce rank
    or an ``import torch`` would otherwise run on after stackdoctor has exited. Returns how many
    children were killed; never raises."""
    with _LIVE_LOCK:
        live = list(LIVE_CHILDREN.values())
        LIVE_CHILDREN.clear()
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


def result_of(
    argv: tuple[str, ...], proc: subprocess.Popen, out: Capture, err: Capture, start: float, status: str | None, timeout: float
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
