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
import posixpath
import re
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, BinaryIO

from stackdoctor.core.errors import UsageError
from stackdoctor.system.files import NotRegularFile, TooLarge, decode, open_regular, read_bounded
from stackdoctor.system.host import HOST_FILE, Host
from stackdoctor.system.lent import LENT_PREFIX, OWNER_FILE, UNOWNED_STALE_S, sweep_dead_lent
from stackdoctor.system.processes import (
    LIVE_CHILDREN,
    PR_SET_PDEATHSIG,
    Capture,
    PosixGroups,
    ProcessControl,
    Started,
    WindowsTree,
    default_control,
    die_with_parent_preexec,
    process_alive,
    process_start,
    result_of,
    session_processes,
    stop_children,
    track,
    untrack,
    wait_exited,
)
from stackdoctor.system.results import (
    DEFAULT_TIMEOUT_S,
    MAX_CAPTURE_BYTES,
    MAX_FILE_BYTES,
    PARSE_ENV,
    CommandResult,
    ReadResult,
    signame,
)

__all__ = [
    "DEFAULT_TIMEOUT_S", "HOST_FILE", "LIVE_CHILDREN", "MAX_CAPTURE_BYTES", "MAX_FILE_BYTES", "OWNER_FILE", "PARSE_ENV", "PR_SET_PDEATHSIG",
    "UNOWNED_STALE_S", "CommandResult", "Host", "NotRegularFile", "PosixGroups", "ProcessControl", "ReadResult", "Started",
    "LENT_PREFIX", "System", "TooLarge", "WindowsTree", "default_control", "die_with_parent_preexec", "open_regular",
    "process_alive", "process_start", "read_bounded", "session_processes", "signame", "stop_children",
    "sweep_dead_lent",
]

_DRIVE = re.compile(r"^([A-Za-z]):(?=[\\/]|$)")


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
    # Linux: every child of this System gets PR_SET_PDEATHSIG(SIGKILL) (an install transaction's: dying_with_parent)
    die_with_parent: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _host: Host | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, timeout_s: float | None = None) -> System:
        """The System for this process's environment.

        Raises :class:`~stackdoctor.core.errors.UsageError` when ``STACKDOCTOR_SYSROOT`` names
        no directory (bad input, exit 2), so that no command probes an empty tree.
        """
        env = dict(os.environ if env is None else env)
        root = env.get("STACKDOCTOR_SYSROOT") or "/"
        if not os.path.isdir(root):
            # a mistyped root would otherwise read as an empty machine and look healthy
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
        return System(sysroot="/", env=self.env, timeout_s=self.timeout_s, record=self.record, host_override=self.host_override, control=self.control,
                      die_with_parent=self.die_with_parent)

    def dying_with_parent(self) -> System:
        """This System (the same root, environment, record and process control) with every child it starts dying
        with this process on Linux (``PR_SET_PDEATHSIG(SIGKILL)``, :func:`die_with_parent_preexec`): what an install
        transaction runs through, so that no worker or installer of it outlives a SIGKILL of stackdoctor alone."""
        if self.die_with_parent:
            return self
        return replace(self, die_with_parent=True)

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
        return ReadResult(path, "ok", decode(data))

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
        """A new private temporary directory of this process (worker files)."""
        return tempfile.mkdtemp(prefix=prefix)

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
        on_stdout: Callable[[str], None] | None = None,
    ) -> CommandResult:
        """Run ``argv`` without a shell; never raises, never waits past ``timeout``.

        ``on_start`` gets a :class:`Started` handle as soon as the child runs (to stop it early);
        ``on_stderr`` gets the child's stderr as it arrives (progress), captured all the same;
        ``die_with_parent`` as for :meth:`run_streaming` (always on for a System made by :meth:`dying_with_parent`)."""
        timeout = self.timeout_s if timeout is None else timeout
        preexec = self._preexec(die_with_parent)
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
            out = Capture(proc.stdout, max_bytes, on_stdout)  # on_stdout: a worker's results as they come (kernels)
            err = Capture(proc.stderr, max_bytes, on_stderr)
            if stdin is not None:
                try:
                    proc.stdin.write(stdin)  # type: ignore[union-attr]
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            timed_out = False
            try:
                wait_exited(proc, timeout)
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
            return self._keep(result_of(argv, proc, out, err, start, status, timeout), record)
        finally:
            untrack(proc)

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
        ``PR_SET_PDEATHSIG(SIGKILL)``, so a SIGKILL of this process alone stops it too (always on for a System made
        by :meth:`dying_with_parent`, as an install transaction's is; call from the main thread:
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
        preexec = self._preexec(die_with_parent)
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
            untrack(proc)

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
        out = Capture(proc.stdout, max_bytes, on_stdout)
        err = Capture(proc.stderr, max_bytes, on_stderr)
        interrupted = timed_out = False
        deadline = start + timeout
        while True:
            try:
                wait_exited(proc, max(0.0, deadline - time.monotonic()))
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
        return self._keep(result_of(argv, proc, out, err, start, status, timeout), record)

    def _preexec(self, die_with_parent: bool) -> Callable[[], None] | None:
        """The child's ``preexec_fn``: the parent-death signal when asked for this run or for every run of this System."""
        if (die_with_parent or self.die_with_parent) and isinstance(self.control, PosixGroups):
            return die_with_parent_preexec()
        return None

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
            child_env.update(PARSE_ENV)
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
        track(proc, self.control)
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
