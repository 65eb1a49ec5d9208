"""Shared test fixtures.

- ``torch_python``: one real venv with torch 2.13.0+cpu shared by the whole suite.
  ``STACKDOCTOR_TEST_TORCH_PYTHON`` names an existing interpreter (CI creates it once);
  otherwise it is built at ``~/.cache/stackdoctor-tests/torch-venv`` the first time (tests/torchenv.py).
- ``unprivileged_install``: stackdoctor installed where uid 65534 can run it (tests/unprivileged.py).
- ``fake_bin``: puts a fake tool on PATH that replays a recorded output (the tool's real
  contract: argv in, text and an exit code out).
- ``REAL``: ``../shared/fixtures/real`` (real machines from public bug reports) and
  ``tests/fixtures`` (our own captures).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import forkserver
import pytest

# Under the test suite a rule that raises fails the run (stackdoctor.rules.core.judge), in this process and in
# every stackdoctor the tests start; outside tests it becomes a visible `rule-error` finding.
os.environ.setdefault("STACKDOCTOR_STRICT_RULES", "1")

# A suite started in the background of a script (``pytest &`` with no job control) inherits SIGINT ignored, and so would
# every stackdoctor it starts: the Ctrl-C tests would then wait out their timeouts and fail. Python's own handler back.
if hasattr(signal, "SIGINT") and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REPO = Path(__file__).resolve().parents[1]
SHARED_REAL = REPO.parent / "shared" / "fixtures" / "real"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """What ``-n auto`` (pyproject's addopts) means here: one worker more than the cores this process may use, since
    most tests spend their time waiting on subprocesses (tools held to a timeout, pip, torch children): on 2 cores
    the third worker runs while the others wait. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` still decides when set (xdist's
    own answer)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    """The package's bytecode, compiled once before any test runs (by the xdist controller, before its workers start).
    The suite starts stackdoctor as a process about 1000 times; where nothing has written its ``__pycache__`` (a fresh
    clone on a machine that sets ``PYTHONDONTWRITEBYTECODE``, as the project's CI machine does) each of them compiled
    every module from source, which doubled its start (``stackdoctor --version``: 0.21 s -> 0.10 s of CPU)."""
    if hasattr(config, "workerinput"):
        return
    import compileall

    import stackdoctor

    compileall.compile_dir(str(Path(stackdoctor.__file__).resolve().parent), quiet=2)  # a read-only install stays as it is


def real_fixture(case: str, name: str) -> str:
    """Text of one recorded tool output: ``tests/fixtures/real/<case>/<name>`` or ``../shared/fixtures/real/...``."""
    for base in (FIXTURES / "real", SHARED_REAL):
        p = base / case / name
        if p.exists():
            return p.read_text(encoding="utf-8", errors="replace")
    pytest.fail(f"fixture {case}/{name} is missing from tests/fixtures/real")


def find_test_uv() -> str | None:
    """The uv binary of the declared test dependency (``uv`` in the ``test`` extra), wherever pip put it for the
    interpreter running the tests: beside ``sys.executable``, in its environment's scripts folder, or in its user
    scripts folder (``pip install --user``). Never found by luck of PATH, and never the base installation's uv
    (``uv.find_uv_bin`` would take that one, so a venv that lost its own uv would still pass)."""
    import sysconfig

    folders = [os.path.dirname(sys.executable), sysconfig.get_path("scripts")]
    try:
        folders.append(sysconfig.get_path("scripts", f"{os.name}_user"))
    except KeyError:
        pass
    for folder in dict.fromkeys(f for f in folders if f):
        found = shutil.which("uv", path=folder)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def torch_python() -> str:
    """Path of an interpreter whose environment has torch 2.13.0, the CPU build (tests/torchenv.py)."""
    import torchenv

    env = os.environ.get("STACKDOCTOR_TEST_TORCH_PYTHON")
    if env:
        if not torchenv.has_cpu_torch(env):
            pytest.fail(f"STACKDOCTOR_TEST_TORCH_PYTHON={env} does not import torch {torchenv.TORCH_VERSION}+cpu")
        return env
    return str(torchenv.ensure(torchenv.DEFAULT_DIR))


def _session_root(tmp_path_factory) -> Path:
    """A folder shared by every xdist worker of this run (each worker's basetemp is a child of it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _shared(root: Path, name: str):
    """An exclusive lock over ``root/name`` across the run's workers."""
    import fcntl

    with open(root / f".{name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield root / name
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def stackdoctor_wheel(tmp_path_factory) -> Path:
    """The checkout built into a wheel once per run (``pip wheel --no-deps``, the first half of ``pip install .``),
    shared by the xdist workers."""
    from unprivileged import build_wheel

    with _shared(_session_root(tmp_path_factory), "wheel") as folder:
        found = sorted(folder.glob("stackdoctor-*.whl")) if folder.is_dir() else []
        return found[0] if found else build_wheel(REPO, folder)


@pytest.fixture(scope="session")
def unprivileged_install(tmp_path_factory, stackdoctor_wheel):
    """stackdoctor installed where uid 65534 can run it, whoever can read this checkout (tests/unprivileged.py).
    Built once per run and shared by the xdist workers; the last one to finish removes it."""
    import dataclasses
    import json as _json

    from unprivileged import UnprivilegedInstall, install, remove

    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root to switch to uid 65534 (the unprivileged tests)")
    root = _session_root(tmp_path_factory)
    with _shared(root, "unprivileged.json") as record:
        if record.is_file():
            data = _json.loads(record.read_text())
            inst = UnprivilegedInstall(**{**data["install"], "root": Path(data["install"]["root"])})
            data["users"] += 1
        else:
            inst = install(stackdoctor_wheel)
            data = {"install": {**dataclasses.asdict(inst), "root": str(inst.root)}, "users": 1}
        record.write_text(_json.dumps(data))
    yield inst
    with _shared(root, "unprivileged.json") as record:
        data = _json.loads(record.read_text())
        data["users"] -= 1
        if data["users"] <= 0:
            remove(inst)
            record.unlink()
        else:
            record.write_text(_json.dumps(data))


@pytest.fixture(scope="session")
def plain_python(tmp_path_factory) -> str:
    """An interpreter in a fresh venv with no torch (and no packaging)."""
    d = tmp_path_factory.mktemp("plainvenv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    from helpers import venv_bin

    return str(venv_bin(d))


def write_fake_tool(bindir: Path, name: str, stdout: str = "", rc: int = 0, stderr: str = "", sleep: float = 0.0, script: str | None = None,
                    answers: dict[str, tuple[str, int, str]] | None = None) -> Path:
    """A fake tool: prints ``stdout``/``stderr`` verbatim and exits with ``rc``.

    ``answers`` makes it answer per argument list, as a real tool does: ``{"$*": (stdout, rc, stderr)}``
    (``""`` is no arguments); any other argument list is an error (exit 2) saying that nothing was recorded
    for it. tests/fakesmi.py builds such answers for ``nvidia-smi`` from a machine's real recordings.
    ``script`` replaces the body with arbitrary POSIX sh (for hangs, signals, partial output).
    A fake tool is a ``/bin/sh`` script: on Windows (no POSIX shell) the test that needs one is skipped.
    """
    if os.name == "nt":
        pytest.skip("this test's fake tool is a /bin/sh script, and Windows has no POSIX shell")
    bindir.mkdir(parents=True, exist_ok=True)
    data = bindir / f".{name}.stdout"
    data.write_text(stdout, encoding="utf-8")
    err = bindir / f".{name}.stderr"
    err.write_text(stderr, encoding="utf-8")
    if answers is not None and script is None:
        arms = []
        for i, (args, (out, code, errtext)) in enumerate(sorted(answers.items())):
            o, e = bindir / f".{name}.{i}.stdout", bindir / f".{name}.{i}.stderr"
            o.write_text(out, encoding="utf-8")
            e.write_text(errtext, encoding="utf-8")
            arms.append(f"  {shlex.quote(args)}) cat {shlex.quote(str(o))}; cat {shlex.quote(str(e))} >&2; exit {code} ;;")
        script = 'case "$*" in\n' + "\n".join(arms) + f'\n  *) echo "fake {name}: nothing was recorded for the arguments: $*" >&2; exit 2 ;;\nesac\n'
    body = script if script is not None else textwrap.dedent(
        f"""\
        cat {shlex.quote(str(data))}
        cat {shlex.quote(str(err))} >&2
        {"sleep " + str(sleep) if sleep else ""}
        exit {rc}
        """
    )
    tool = bindir / name
    tool.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return tool


@pytest.fixture
def fake_bin(tmp_path, monkeypatch):
    """Returns ``add(name, stdout="", rc=0, stderr="", sleep=0, script=None)``; the dir is first on PATH."""
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    def add(name: str, stdout: str = "", rc: int = 0, stderr: str = "", sleep: float = 0.0, script: str | None = None) -> Path:
        return write_fake_tool(bindir, name, stdout, rc, stderr, sleep, script)

    add.dir = bindir  # type: ignore[attr-defined]
    return add


# Markers that skip by themselves where the system cannot run the test (the reason is in the report).
_NEEDS = {
    "posix": (lambda: os.name != "nt", "needs POSIX (a /bin/sh fake, POSIX signals or file modes); this is Windows"),
    "linux": (lambda: sys.platform.startswith("linux"), "needs Linux itself (/proc, /dev/full, ip netns)"),
    "netns": (lambda: sys.platform.startswith("linux") and hasattr(os, "geteuid") and os.geteuid() == 0, "needs Linux, root and network namespaces"),
}


def _skip_where_the_system_cannot(items) -> None:
    for item in items:
        for name, (runs_here, reason) in _NEEDS.items():
            if item.get_closest_marker(name) is not None and not runs_here():
                item.add_marker(pytest.mark.skip(reason=reason))


def _is_stackdoctor(argv: object) -> bool:
    """A command line that runs stackdoctor: its console script, ``python -m stackdoctor``, or either behind a
    wrapper such as ``ip netns exec NS ...``."""
    if not isinstance(argv, (list, tuple)):
        return False
    parts = [str(a) for a in argv]
    return any(os.path.basename(p) == "stackdoctor" for p in parts[:6]) or any(
        a == "-m" and b == "stackdoctor" for a, b in zip(parts, parts[1:], strict=False)
    )


def _documents(argv: list[str], stdout: object) -> list[str]:
    """The texts a stackdoctor run produced: its stdout, and the file or folder named by --output/-o."""
    texts = []
    if isinstance(stdout, bytes):
        stdout = stdout.decode("utf-8", "replace")
    if isinstance(stdout, str):
        texts.append(stdout)
    for flag in ("--output", "-o"):
        if flag in argv[:-1]:
            path = Path(argv[argv.index(flag) + 1])
            if path.is_file():
                texts.append(path.read_text(encoding="utf-8", errors="replace"))
            elif path.is_dir() and (path / "report.json").is_file():
                texts.append((path / "report.json").read_text(encoding="utf-8"))
    return texts


@pytest.fixture(autouse=True, scope="session")
def _every_document_keeps_the_contract():
    """Every public JSON document the suite's stackdoctor runs produce (stdout, or the --output/-o file) is
    checked by ``helpers.check_document``: a report (``stackdoctor.report/1``) validates against the shipped
    schema, has a fix on every warn/fail finding and only codes that ``explain`` documents in both languages;
    a plan (``plan/1``), kernels (``kernels/1``) or diff (``diff/2``) document validates against its shipped
    schema. It hooks ``subprocess.Popen.communicate``, which ``subprocess.run`` uses too, so a stackdoctor
    started either way (even behind ``ip netns exec``) is seen, and ``tests/forkserver.py``'s runs."""
    import json as _json

    from helpers import SEEN_DOCUMENTS, check_document

    real_popen = subprocess.Popen

    def check(args: object, returncode: int | None, out: object) -> None:
        if returncode in (0, 1) and _is_stackdoctor(args):
            argv = [str(a) for a in args]  # type: ignore[union-attr]
            for text in _documents(argv, out):
                if '"schema": "stackdoctor.' not in text[:300]:
                    continue
                try:
                    data = _json.loads(text)
                except ValueError:
                    continue
                check_document(data)

    class CheckedPopen(real_popen):  # type: ignore[misc,valid-type]
        def communicate(self, *args, **kwargs):
            out, err = super().communicate(*args, **kwargs)
            check(self.args, self.returncode, out)
            return out, err

    subprocess.Popen = CheckedPopen  # type: ignore[misc]
    forkserver.AFTER_RUN.append(check)  # a command forked from tests/forkserver.py is seen too
    yield SEEN_DOCUMENTS
    forkserver.AFTER_RUN.remove(check)
    subprocess.Popen = real_popen  # type: ignore[misc]


# ---------------------------------------------------------------------------- headline tests

# What README's "Reliability" section claims, by category. A test marked ``@pytest.mark.headline(CATEGORY)`` proves one
# of these; .ci/run fails when one of them did not run (skipped, or never reached), unless STACKDOCTOR_CI_ALLOW_SKIP
# names its category. The categories are fixed here so that a typo in a marker fails at collection.
HEADLINE_CATEGORIES = {
    "netns": "network namespaces joined by a veth named thunderbolt0 (needs root and `ip netns`)",
    "install": "real pip and uv installs into real venvs",
    "unprivileged": "faults seen as an unprivileged user (uid 65534; needs root to switch to it)",
    "torch": "real-torch kernels in the CPU build of torch 2.13.0",
    "gloo": "gloo allreduce across real processes",
    "browser": "report.html opened by a real headless Chromium: no request, no console error, every finding shown (.ci/run installs it)",
}


def pytest_collection_modifyitems(config, items):
    # one hook: this module defined it twice, and the second definition hid the first, so a posix, linux or netns
    # test ran (and failed) where the system cannot run it instead of being skipped with the reason
    _skip_where_the_system_cannot(items)
    for item in items:
        for mark in item.iter_markers("headline"):
            (category,) = mark.args
            if category not in HEADLINE_CATEGORIES:
                raise pytest.UsageError(f"{item.nodeid}: unknown headline category {category!r} (known: {', '.join(HEADLINE_CATEGORIES)})")
            item.user_properties.append(("headline", category))  # travels with the reports, under xdist too


_HEADLINE_OUTCOMES: dict[str, dict[str, str]] = {}


def pytest_runtest_logreport(report):
    cats = [v for k, v in report.user_properties if k == "headline"]
    if not cats:
        return
    entry = _HEADLINE_OUTCOMES.setdefault(report.nodeid, {"category": cats[0], "outcome": "not run", "reason": ""})
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        entry.update(outcome="skipped", reason=reason.removeprefix("Skipped: "))
    elif report.failed:
        entry.update(outcome="failed")
    elif report.when == "call" and entry["outcome"] == "not run":
        entry.update(outcome="passed")


def pytest_sessionfinish(session, exitstatus):
    """With STACKDOCTOR_HEADLINE_REPORT=FILE (set by .ci/run), write what became of every headline test there."""
    forkserver.close_all()  # this process's fork servers (tests/forkserver.py) end with it
    path = os.environ.get("STACKDOCTOR_HEADLINE_REPORT")
    if not path or hasattr(session.config, "workerinput"):  # xdist workers report to the controller, which writes
        return
    import json as _json

    Path(path).write_text(_json.dumps({"categories": HEADLINE_CATEGORIES, "tests": _HEADLINE_OUTCOMES}, indent=2, sort_keys=True))


@pytest.fixture(autouse=True)
def _learned_layer_of_the_test(monkeypatch, tmp_path_factory):
    """The install flow remembers what an index showed of an announced build in the user's learned layer (issue 43):
    each test has a layer of its own (helpers.machine_env too), never the HOME of the machine running the suite, and
    one test's index never tells another's plan that a build is absent."""
    monkeypatch.setenv("STACKDOCTOR_LEARNED", str(tmp_path_factory.mktemp("learned") / "learned.yaml"))
