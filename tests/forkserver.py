"""stackdoctor's command line as a process of its own, forked from an interpreter that has already imported it.

The suite starts stackdoctor about 900 times to read what it prints (``helpers.run_sd``). A fresh interpreter spends
most of a short command's CPU importing the package and compiling its dataclasses' methods: ``check --replay`` took
0.12 s of CPU with a warm cache and 0.22 s with the cold one every test's private cache directory starts with; forked
from here it takes about 0.05 s. What a test sees is still a process: its own pid, its own file descriptors 0, 1 and 2
(the pipes the test reads), its own environment, working directory and exit status, and ``stackdoctor.cli.main`` runs
in it exactly as the console script calls it (down to its ``os._exit``).

What differs from a fresh interpreter is what was done before the fork, and each difference is held to nothing:

- Only imports are done, and importing is what every run of the command does first (``stackdoctor.rules`` makes the
  kinds' registry as it is imported, plug-ins found on ``sys.path`` included, which is the server's exactly when the
  request sets no ``PYTHONPATH``). After the imports the server checks that no ``functools`` cache of the package was
  filled (the matrix, the texts); if one was, it refuses to serve and every command runs as a fresh interpreter
  again (``run`` answers None), with a warning naming it.
- An interpreter's start depends on its environment (the locale decides the standard streams' encoding; ``PYTHON*``
  variables the module path and the flags; typer reads ``TYPER_*`` when imported). A server is started per distinct
  set of those variables, with them set, the second time a set is asked for (a set asked for once, such as one test's
  temporary ``PYTHONPATH``, gets a fresh interpreter); at most six per test process, the least recently used ending.
- The dataclasses' method cache (``stackdoctor.core.classcode``) is off while the server imports and is installed in
  the child under the child's environment, as the console script would have installed it.

What is not held: the commands forked from one server share its string-hash seed (a fresh interpreter draws its
own), so an output whose order depends on a set of strings would not vary between them as between fresh runs.

``STACKDOCTOR_TEST_FORK=0`` turns this off: every command is a fresh interpreter (``tests/test_forkserver.py`` runs a
sample of commands both ways and compares what they print). ``STACKDOCTOR_TEST_FORK_LOG=FILE`` writes a line per
command there: forked or not, and its startup variables.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

# What an interpreter reads from its environment as it starts (or typer as it is imported): a server per distinct set.
_START_EXACT = ("LANG", "LANGUAGE")
_START_PREFIXES = ("LC_", "PYTHON", "TYPER_", "_TYPER_")
AFTER_RUN: list = []  # callables (argv, returncode, stdout) told of every finished run (tests/conftest.py checks its documents)
MAX_SERVERS = 6  # per test process; a seventh startup environment ends the server asked for longest ago

# What a command imports anyway: the command line, every command and the layers they run.
PRELOAD = (
    "stackdoctor.cli",
    "stackdoctor.commands.check",
    "stackdoctor.commands.install",
    "stackdoctor.commands.kernels",
    "stackdoctor.commands.matrix",
    "stackdoctor.commands.report",
    "stackdoctor.commands.explain",
    "stackdoctor.commands.diff",
    "stackdoctor.commands.help",
    "stackdoctor.pipeline",
    "stackdoctor.rules",
    "stackdoctor.render.human",
)


def startup_env(env: dict[str, str]) -> dict[str, str]:
    """The part of ``env`` an interpreter's start reads (its locale, its ``PYTHON*`` path and flags, typer's switches)."""
    return {k: v for k, v in env.items() if k in _START_EXACT or k.startswith(_START_PREFIXES)}


# ---------------------------------------------------------------------------------------------------- the server


def _filled_caches() -> list[str]:
    """Caches of the package a run fills, found filled after the imports (the fork would hand them to every child)."""
    import functools

    found = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("stackdoctor") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            info = getattr(value, "cache_info", None)
            if callable(info) and isinstance(value, functools._lru_cache_wrapper) and info().currsize:
                found.append(f"{name}.{attr}")
    if tempfile.tempdir is not None:  # chosen from TMPDIR once per process: each command chooses its own
        found.append("tempfile.tempdir")
    return found


def _child(header: dict, fds: list[int]) -> None:
    """In the forked child: become the command's process, then run the command line as the console script does."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    os.chdir(header["cwd"])
    os.environ.clear()
    os.environ.update(header["env"])
    sys.argv = list(header["argv"])
    if header["module"]:  # python -m stackdoctor: the working directory first on the path
        sys.path[0] = os.getcwd()
    from stackdoctor.cli import main
    from stackdoctor.core import classcode

    classcode.install()  # as the command's own process does, now under its environment
    main(header["args"])  # never returns: main leaves through os._exit


def _wait_for_command(conn: socket.socket, header: dict, fds: list[int]) -> None:
    """In the waiter: fork the command, say its pid, wait for it, say how it ended. Neither process ever returns into
    the server's loop: each leaves through ``os._exit`` (a command whose start failed says why on its own stderr)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        conn.close()
        try:
            _child(header, fds)
        except BaseException:
            import traceback

            traceback.print_exc()  # on the test's pipe: run_sd's "no traceback" check fails on it
        os._exit(70)
    for fd in fds:
        os.close(fd)
    try:
        conn.sendall(struct.pack("!q", pid))
        _, status = os.waitpid(pid, 0)
        conn.sendall(struct.pack("!q", os.waitstatus_to_exitcode(status)))
    except OSError:  # the test process stopped listening (its timeout killed the command)
        pass


def _serve(sock_path: str, ready_fd: int) -> None:
    sys.path[0] = os.path.dirname(sys.executable)  # as the console script's own folder is, first on the path
    try:  # the server ends with the test process that started it, however that ends
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    import importlib

    for name in PRELOAD:
        importlib.import_module(name)
    filled = _filled_caches()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if not filled:  # listening before it says it is ready: a request never finds no socket there
        srv.bind(sock_path)
        srv.listen(8)
    with os.fdopen(ready_fd, "w") as ready:
        ready.write(json.dumps({"filled": filled}))
    if filled:
        return
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # each request's waiter is reaped by the kernel
    sys.stdout.flush()
    sys.stderr.flush()
    while True:
        conn, _ = srv.accept()
        try:
            raw, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        except OSError:
            conn.close()
            continue
        if not raw:  # the test process closed its end: it is done with this server
            conn.close()
            return
        header = json.loads(raw)
        if os.fork() == 0:  # the waiter
            try:
                srv.close()
                _wait_for_command(conn, header, fds)
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        conn.close()


# ---------------------------------------------------------------------------------------------------- the client


class _Server:
    def __init__(self, start_env: dict[str, str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="sd-fork-")
        self.sock = os.path.join(self.folder, "s")
        env = {"PATH": "/usr/bin:/bin", "HOME": self.folder, "STACKDOCTOR_NO_CACHE": "1", **start_env}
        r, w = os.pipe()
        # its stderr in a file, never a pipe nobody reads (a server that wrote much there would block before it is ready)
        with open(os.path.join(self.folder, "stderr"), "w+b") as err:
            self.proc = subprocess.Popen([sys.executable, __file__, self.sock, str(w)], env=env, pass_fds=(w,), stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
            os.close(w)
            with os.fdopen(r) as ready:
                said = ready.read()
            try:
                self.filled = json.loads(said)["filled"]
            except (ValueError, KeyError):
                err.seek(0)
                self.filled = [f"the server did not start: {err.read().decode(errors='replace')[-2000:]}"]
        if self.filled:
            warnings.warn(f"tests/forkserver.py: commands run as fresh interpreters: {'; '.join(self.filled)}", stacklevel=3)
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.connect(self.sock)
                    s.sendall(b"")
                    s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for name in ("s", "stderr"):
            try:
                os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass
        try:
            os.rmdir(self.folder)
        except OSError:
            pass


_SERVERS: dict[str, _Server] = {}


def enabled() -> bool:
    return os.environ.get("STACKDOCTOR_TEST_FORK", "1") != "0" and sys.platform.startswith("linux") and hasattr(socket, "send_fds")


_ASKED: dict[str, int] = {}


def _server_for(env: dict[str, str]) -> _Server | None:
    """The server for ``env``'s startup variables: started the second time they are asked for (a set one test alone
    uses, a temporary PYTHONPATH, costs no server); past :data:`MAX_SERVERS`, the one asked for longest ago ends."""
    start = startup_env(env)
    key = json.dumps(start, sort_keys=True)
    server = _SERVERS.pop(key, None)
    if server is None:
        _ASKED[key] = _ASKED.get(key, 0) + 1
        if _ASKED[key] < 2:
            return None
        server = _Server(start)
    _SERVERS[key] = server  # last asked for: last in the order
    while len(_SERVERS) > MAX_SERVERS:  # the one asked for longest ago goes
        _SERVERS.pop(next(iter(_SERVERS))).close()
    return None if server.filled or server.proc.poll() is not None else server


def close_all() -> None:
    for server in _SERVERS.values():
        server.close()
    _SERVERS.clear()


def run(argv: list[str], *, env: dict[str, str] | None, cwd: str | os.PathLike | None, stdin: str | bytes | int | None,
        timeout: float | None, text: bool = True) -> subprocess.CompletedProcess | None:
    """``subprocess.run(argv, capture_output=True, ...)`` for a stackdoctor command line, forked from a server; None
    when it is not (not Linux, turned off, another program or stdin, startup variables asked for the first time, a
    server that refused or could not be reached): the caller then starts it fresh.

    ``argv``: the console script or ``sys.executable -m stackdoctor``, then the arguments. ``stdin``: text or bytes
    to feed, ``subprocess.DEVNULL``, or None (this process's own, as ``subprocess.run`` would hand it on)."""
    if not enabled() or not (stdin is None or stdin == subprocess.DEVNULL or isinstance(stdin, (str, bytes))):
        return None
    script = os.path.join(os.path.dirname(sys.executable), "stackdoctor")
    if list(argv[:3]) == [sys.executable, "-m", "stackdoctor"]:
        module, args, argv0 = True, list(argv[3:]), str(Path(__file__).resolve().parents[1] / "stackdoctor" / "__main__.py")
    elif argv and str(argv[0]) == script:
        module, args, argv0 = False, list(argv[1:]), script
    else:
        return None
    where = os.fsdecode(cwd) if cwd is not None else os.getcwd()
    if not os.path.isdir(where):  # subprocess.run's own error, before anything runs
        raise FileNotFoundError(2, "No such file or directory", where)
    full_env = {os.fsdecode(k): os.fsdecode(v) for k, v in (os.environ if env is None else env).items()}
    server = _server_for(full_env)
    if os.environ.get("STACKDOCTOR_TEST_FORK_LOG"):  # a line per command: forked or not, and its startup variables
        with open(os.environ["STACKDOCTOR_TEST_FORK_LOG"], "a") as log:
            log.write(json.dumps({"fork": server is not None, "start": startup_env(full_env), "args": args[:2]}) + "\n")
    if server is None:
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    feed = None
    if isinstance(stdin, (str, bytes)):
        feed = tempfile.TemporaryFile()
        feed.write(stdin.encode() if isinstance(stdin, str) else stdin)
        feed.flush()
        feed.seek(0)
        in_fd = feed.fileno()
    elif stdin == subprocess.DEVNULL:
        in_fd = os.open(os.devnull, os.O_RDONLY)
    else:
        in_fd = 0
    header = {"argv": [argv0, *args], "args": args, "env": full_env, "cwd": where, "module": module}
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(server.sock)
        socket.send_fds(conn, [json.dumps(header).encode()], [in_fd, out_w, err_w])
    except OSError:
        for fd in (out_r, out_w, err_r, err_w):
            os.close(fd)
        conn.close()
        return None
    finally:
        if feed is not None:
            feed.close()
        elif stdin == subprocess.DEVNULL:
            os.close(in_fd)
    os.close(out_w)
    os.close(err_w)
    return _collect(conn, out_r, err_r, argv, timeout, text)


def _recv_q(conn: socket.socket, deadline: float | None) -> int | None:
    buf = b""
    while len(buf) < 8:
        conn.settimeout(None if deadline is None else max(0.001, deadline - time.monotonic()))
        try:
            part = conn.recv(8 - len(buf))
        except TimeoutError:
            return None
        if not part:
            raise ConnectionError("the fork server's waiter went away")
        buf += part
    return int(struct.unpack("!q", buf)[0])


def _collect(conn: socket.socket, out_r: int, err_r: int, argv: list[str], timeout: float | None, text: bool) -> subprocess.CompletedProcess:
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out_r: [], err_r: []}
    try:
        pid = _recv_q(conn, deadline)
        sel = selectors.DefaultSelector()
        for fd in chunks:
            sel.register(fd, selectors.EVENT_READ)
        timed_out = pid is None
        while sel.get_map() and not timed_out:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                data = os.read(key.fd, 1 << 16)
                if data:
                    chunks[key.fd].append(data)
                else:
                    sel.unregister(key.fd)
        sel.close()
        if timed_out:
            if pid is not None:
                try:
                    os.kill(pid, signal.SIGKILL)  # as subprocess.run does: the command, not what it started
                except ProcessLookupError:
                    pass
            out, err = b"".join(chunks[out_r]), b"".join(chunks[err_r])
            raise subprocess.TimeoutExpired(argv, timeout or 0, out.decode(errors="replace") if text else out,
                                            err.decode(errors="replace") if text else err)
        code = _recv_q(conn, None)
    finally:
        os.close(out_r)
        os.close(err_r)
        conn.close()
    out, err = b"".join(chunks[out_r]), b"".join(chunks[err_r])
    if text:  # as subprocess.run(text=True) reads: the locale's encoding, universal newlines
        import io
        import locale

        enc = locale.getpreferredencoding(False)
        done = subprocess.CompletedProcess(argv, code, io.TextIOWrapper(io.BytesIO(out), encoding=enc).read(),
                                           io.TextIOWrapper(io.BytesIO(err), encoding=enc).read())
    else:
        done = subprocess.CompletedProcess(argv, code, out, err)
    for after in AFTER_RUN:
        after(argv, done.returncode, done.stdout)
    return done


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
