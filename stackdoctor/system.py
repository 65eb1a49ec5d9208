"""The only code that touches the operating system.

Every external tool runs through :meth:`System.run`: an argv list (never a shell),
always a timeout, output captured as bytes up to a cap and decoded UTF-8 with
``errors="replace"``. A missing tool, a tool that is not executable, one that hangs
(killed with its whole process group at the timeout, partial output kept) or dies
by a signal is described by the returned :class:`CommandResult`; nothing raises.

Every file read goes through :meth:`System.read_text`, relative to one root that
``STACKDOCTOR_SYSROOT`` can move (default ``/``), so a captured ``/proc``, ``/sys``,
``/etc`` and ``/opt`` tree replays a machine.
"""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
            return f"{name} was killed by {_signame(self.signal)}"
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


@dataclass
class System:
    """The machine as stackdoctor sees it: a file root, a PATH, an environment and a clock.

    Tests and support engineers move it with ``STACKDOCTOR_SYSROOT`` and a PATH of fake tools.
    """

    sysroot: str = "/"
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    timeout_s: float = DEFAULT_TIMEOUT_S
    record: list[CommandResult] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

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

    # ---- files -----------------------------------------------------------------
    @property
    def moved(self) -> bool:
        """True when reads come from a captured tree rather than this machine."""
        return os.path.realpath(self.sysroot) != "/"

    def path(self, path: str) -> Path:
        """Map an absolute machine path (``/proc/...``) into the sysroot."""
        rel = path.lstrip("/")
        return Path(self.sysroot) / rel

    def read_text(self, path: str, *, max_bytes: int = MAX_FILE_BYTES) -> ReadResult:
        real = self.path(path)
        try:
            with open(real, "rb") as fh:
                data = fh.read(max_bytes)
        except FileNotFoundError:
            return ReadResult(path, "absent")
        except NotADirectoryError:
            return ReadResult(path, "absent")
        except PermissionError as exc:
            return ReadResult(path, "denied", detail=exc.strerror or "permission denied")
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
    ) -> CommandResult:
        """Run ``argv`` without a shell; never raises, never waits past ``timeout``."""
        timeout = self.timeout_s if timeout is None else timeout
        spawned = self._spawn(argv, env, parse_env, stdin is not None)
        if isinstance(spawned, CommandResult):
            return self._keep(spawned, record)
        proc, argv, start = spawned
        out = _Capture(proc.stdout, max_bytes)
        err = _Capture(proc.stderr, max_bytes)
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
            _kill_group(proc)
        # A child that exits but leaves a grandchild holding the pipe must not hang us either.
        deadline = time.monotonic() + 1.0
        for cap in (out, err):
            cap.thread.join(max(0.0, deadline - time.monotonic()))
            if cap.thread.is_alive():
                _kill_group(proc)
                cap.thread.join(0.5)
        status = "timeout" if timed_out else None
        return self._keep(_result(argv, proc, out, err, start, status, timeout), record)

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
    ) -> CommandResult:
        """Like :meth:`run` (no shell, bounded, never raises), for long actions such as installs.

        Output is passed to ``on_stdout`` / ``on_stderr`` as it arrives and captured too. The child
        runs in its own session; at the timeout, or when this process gets ``KeyboardInterrupt``
        (Ctrl-C), the child is asked to stop with SIGINT (pip and uv clean up on it), then killed
        after ``grace_s``. An interrupted run has ``status == "interrupted"``; the caller decides
        what to do next (the ``KeyboardInterrupt`` is not re-raised). Not parse-env'd: the user's
        locale is kept for a tool whose output is shown, not parsed.
        """
        spawned = self._spawn(argv, env, False, False)
        if isinstance(spawned, CommandResult):
            return self._keep(spawned, record)
        proc, argv, start = spawned
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
                _stop_group(proc, grace_s)
                break
            except KeyboardInterrupt:
                interrupted = True
                try:
                    _stop_group(proc, grace_s)
                except KeyboardInterrupt:  # a second Ctrl-C: stop now
                    _kill_group(proc)
                break
        for cap in (out, err):
            cap.thread.join(2.0)
        status = "interrupted" if interrupted else "timeout" if timed_out else None
        return self._keep(_result(argv, proc, out, err, start, status, timeout), record)

    def _spawn(
        self, argv: Sequence[str], env: Mapping[str, str | None] | None, parse_env: bool, with_stdin: bool
    ) -> tuple[subprocess.Popen, tuple[str, ...], float] | CommandResult:
        """Start ``argv`` in its own session with the merged environment, or say why it could not start."""
        argv = tuple(str(a) for a in argv)
        exe = argv[0]
        if os.sep not in exe:
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
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                (exe, *argv[1:]),
                stdin=subprocess.PIPE if with_stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=child_env,
                start_new_session=True,
                close_fds=True,
            )
        except FileNotFoundError:
            return CommandResult(argv, None, "", "", 0.0, "absent", detail="not found")
        except PermissionError as exc:
            return CommandResult(argv, None, "", "", 0.0, "denied", detail=exc.strerror or "permission denied")
        except OSError as exc:
            return CommandResult(argv, None, "", "", 0.0, "error", detail=exc.strerror or str(exc))
        return proc, argv, start

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
        status, detail = "error", f"killed by {_signame(sig)}"
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


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGINT to the child's process group (a tool's own clean-up path), SIGKILL after ``grace_s``."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        pass
