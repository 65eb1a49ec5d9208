"""Run every probe concurrently into one :class:`~stackdoctor.model.report.Report`.

The whole run takes about as long as the slowest probe. Each tool call inside a probe
is bounded by its own timeout; the engine adds an outer deadline per probe so that
even a probe bug cannot hold ``check`` past it.
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackdoctor import kinds
from stackdoctor.core.errors import UsageError
from stackdoctor.model.facts import SUBJECTS, Facts, from_data, to_data
from stackdoctor.model.probing import ProbeContext, ProbeOutput, Target
from stackdoctor.model.report import ProbeStatus, Report
from stackdoctor.pipeline.which_python import CONDA_PYTHONS, VENV_PYTHONS

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import CommandResult, System

# The generic probes (probe name, module); every accelerator kind's come from the registry (kinds.probes()).
PROBES: tuple[tuple[str, str], ...] = (
    ("target", "stackdoctor.probes.target"),  # python + torch (+ quick kernels), one child process
    ("platform", "stackdoctor.probes.platform"),
    ("thunderbolt", "stackdoctor.probes.thunderbolt"),
)


def report_order() -> tuple[str, ...]:
    """The order of the report's "probes" list for the probes stackdoctor ships: the target and the platform, the
    shipped kinds' in their ``report_rank`` order (a kind's own, then its ``more_probes``), thunderbolt; a plug-in's
    come after them."""
    shipped = sorted((a for a in kinds.ALL if a.report_rank is not None), key=lambda a: a.report_rank or 0)
    subjects = [s for a in shipped for s in ([a.subject] if a.probe else []) + [m[0] for m in a.more_probes]]
    return ("target", "platform", *subjects, "thunderbolt")


def all_probes() -> list[tuple[str, str]]:
    """Every probe: the generic ones and every kind's, in the report's order."""
    rank = {name: i for i, name in enumerate(report_order())}
    found = [*PROBES, *kinds.probes()]
    return sorted(found, key=lambda p: rank.get(p[0], len(rank) + found.index(p)))


# Environment variables that shape the stack, recorded in facts.environment.
# Each kind's own prefixes are its ``env_prefixes``.
ENV_PREFIXES = (
    "NCCL_",
    "TORCH_",
    "PYTORCH_",
    "PIP_",
    "UV_",
    "CONDA_",
    "GLOO_",
    "LD_",
    "DYLD_",
)
ENV_NAMES = (
    "PATH",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
)


def select_target(python: str | None, env: Mapping[str, str], os_name: str | None = None, cwd: str | None = None) -> Target:
    """``--python``, else the active virtualenv, conda env, a ``.venv`` here or above, ``python3`` on PATH
    (:mod:`stackdoctor.pipeline.which_python`)."""
    from stackdoctor.pipeline.which_python import select_target as select

    return select(python, env, os_name, cwd)


@dataclass(frozen=True)
class PythonCheck:
    """What :func:`validate_python` learnt from an interpreter that answered as Python 3."""

    python: str  # the interpreter as given (a path, or a name found on PATH)
    version: tuple[int, int] | None  # (3, 11); None: it did not answer in time (left to the probes to report)
    torch: bool | None  # a ``torch`` package is importable there (found, not imported); None: unknown


# Asked of the interpreter: its version and whether a ``torch`` package is there (found, never imported).
# Python 2 can run it too, so a Python 2 target is named as such. The current folder is dropped from
# sys.path (``-c`` puts it first), since the workers never see it.
_ASK_PYTHON = (
    "import sys\n"
    "sys.path = [p for p in sys.path if p not in ('', '.')]\n"
    "try:\n"
    "    import importlib.util as u\n"
    "    t = u.find_spec('torch') is not None\n"
    "except Exception:\n"
    "    t = None\n"
    "sys.stdout.write('@@stackdoctor-python %d %d %s\\n' % (sys.version_info[0], sys.version_info[1], t))\n"
)
_PYTHON_MARK = "@@stackdoctor-python "


def validate_python(
    python: str,
    *,
    system: System | None = None,
    selected_by: str = "--python",
    timeout_s: float = 10.0,
    os_name: str | None = None,
    run: bool = True,
) -> PythonCheck:
    """Check that ``python`` is a Python 3 interpreter before anything runs in it.

    The one check behind ``--python`` for ``check``, ``report``, ``kernels`` (and ``install``). A
    folder (``did you mean DIR/bin/python?``; ``DIR\\Scripts\\python.exe`` first on Windows), a
    missing path, a file that is not executable (``/etc/passwd``), a program that is not Python
    (``/usr/bin/perl``) and Python 2 are each one sentence and exit 2. ``selected_by`` names where
    the path came from in that sentence (``"--python"``, ``"VIRTUAL_ENV"``, ...). An interpreter
    that does not answer within ``timeout_s`` passes (version None): the probes report a hang.

    ``run=False`` makes only the checks that start no process (a folder, a missing path, not a file,
    not executable): instant, so ``check`` answers those before probing and leaves the run (is it
    Python 3?) to :func:`stackdoctor.pipeline.build_report`, concurrently with the probes.

    :raises UsageError: the sentence.
    """
    from stackdoctor.system import System

    who = f"--python {python}" if selected_by == "--python" else f"the target interpreter {python} (from {selected_by})"
    kind = "nt" if (os_name or os.name) == "nt" else "posix"
    sys_ = system or System.from_env()
    exe = _refuse_path(_on_path(python, who, sys_), who, kind)
    if not run:
        return PythonCheck(python, None, None)
    res = sys_.run([exe, "-E", "-s", "-c", _ASK_PYTHON], timeout=timeout_s, parse_env=False, record=False)
    if res.status == "timeout":
        return PythonCheck(python, None, None)
    if res.status in ("absent", "denied", "error") and res.signal is None:
        raise UsageError(f"{who} cannot be run ({res.detail}), so it is not a Python interpreter.")
    for line in res.stdout.splitlines():
        i = line.find(_PYTHON_MARK)
        if i < 0:
            continue
        said = line[i + len(_PYTHON_MARK) :].split()
        if len(said) == 3 and said[0].isdigit() and said[1].isdigit():
            major, minor = int(said[0]), int(said[1])
            if major < 3:
                raise UsageError(f"{who} is Python {major}.{minor}; stackdoctor needs a Python 3 interpreter.")
            return PythonCheck(python, (major, minor), {"True": True, "False": False}.get(said[2]))
    raise _not_python(exe, who, res, sys_, timeout_s)


def _on_path(python: str, who: str, sys_: System) -> str:
    """``python`` as a path: a bare name is looked up on PATH."""
    if os.sep not in python and not (os.altsep and os.altsep in python) and not os.path.exists(python):
        found = sys_.which(python)
        if found is None:
            raise UsageError(f"{who}: no such interpreter on PATH.")
        return found
    return python


def _refuse_path(exe: str, who: str, kind: str) -> str:
    """``exe`` when it can be an interpreter: a folder, a missing path, not a file, not executable are one sentence each."""
    if os.path.isdir(exe):
        # a venv or conda prefix, or its bin/ (Scripts\) folder itself: the interpreter inside is named
        own = (("python",), ("python3",)) if kind == "posix" else (("python.exe",),)
        cands = [os.path.join(exe, *parts) for parts in (*VENV_PYTHONS[kind], *CONDA_PYTHONS[kind], *own)]
        for cand in cands:
            if os.path.isfile(cand):
                raise UsageError(f"{who} is a folder; did you mean {cand}?")
        for cand in cands:
            if os.path.islink(cand):  # there, but its target is gone (a venv whose base Python was removed or moved)
                raise UsageError(f"{who} is a folder whose {cand} is a broken link (it points to {os.path.realpath(cand)}, which does not exist).")
        inside = os.path.join("bin", "python") if kind == "posix" else os.path.join("Scripts", "python.exe")
        raise UsageError(f"{who} is a folder, and it holds no Python interpreter (no {inside}).")
    if not os.path.lexists(exe):
        raise UsageError(f"{who}: no such file.")
    if not os.path.exists(exe):
        raise UsageError(f"{who} is a broken link (it points to {os.path.realpath(exe)}, which does not exist).")
    if not os.path.isfile(exe):
        raise UsageError(f"{who} is not a file, so not a Python interpreter.")
    if kind == "posix" and not os.access(exe, os.X_OK):
        raise UsageError(f"{who} is not executable, so not a Python interpreter.")
    return exe


def _not_python(exe: str, who: str, res: CommandResult, sys_: System, timeout_s: float) -> UsageError:
    """The sentence for an interpreter that ran but did not answer as Python 3 (``--version`` says what it is)."""
    ver = sys_.run([exe, "--version"], timeout=timeout_s, parse_env=False, record=False)
    version = ((ver.stdout.strip() or ver.stderr.strip()).splitlines() or [""])[0].strip()
    if version.startswith("Python 2"):
        return UsageError(f"{who} is {version}; stackdoctor needs a Python 3 interpreter.")
    if version.startswith("Python ") and res.signal is None:
        return UsageError(f"{who} says it is {version} but could not run a one-line Python script: {_first_line(res.stderr) or res.describe_failure()}.")
    if res.signal is not None:
        return UsageError(f"{who} was killed by {res.detail.replace('killed by ', '')} before answering, so it cannot be used as the target.")
    told = _first_line(res.stderr) if res.returncode not in (0, None) else ""  # a broken interpreter says why
    return UsageError(f"{who} is not a Python interpreter" + (f" ({told[:160]})." if told else "."))


def _first_line(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def capture_environment(env: Mapping[str, str]) -> dict[str, str]:
    prefixes = ENV_PREFIXES + tuple(p for a in kinds.ALL for p in a.env_prefixes)
    return {k: v for k, v in sorted(env.items()) if k in ENV_NAMES or k.startswith(prefixes)}


def _load(module: str) -> Callable[[ProbeContext], ProbeOutput]:
    probe: Callable[[ProbeContext], ProbeOutput] = importlib.import_module(module).probe
    return probe


_STATUSES = ("ok", "error", "timeout", "skipped")


def _broken_on_purpose(name: str) -> ProbeOutput | None:
    """Tests only: ``STACKDOCTOR_TEST_HOOK=break-probe:NAME`` makes that probe return facts of the wrong types
    (its subject's dataclass with a number where text belongs, and an unknown subject), to prove the report
    still comes out with the probe's failure in it."""
    hook = os.environ.get("STACKDOCTOR_TEST_HOOK", "")
    if hook != f"break-probe:{name}":
        return None
    from stackdoctor.model.facts import PlatformFacts

    return ProbeOutput(facts={"platform": PlatformFacts(system=42), "no_such_subject": object()})  # type: ignore[arg-type]


def checked_output(name: str, out: object) -> ProbeOutput:
    """``out`` if it is a well-typed :class:`ProbeOutput`: each subject a known one, each value of that
    subject's dataclass with every field of the declared type (checked by the same loader a replay uses).
    Anything else becomes that probe's failure, naming what was wrong, so the rules, the renderers and
    ``stackdoctor report`` never meet a value of the wrong type: the report still comes out."""
    if not isinstance(out, ProbeOutput):
        return ProbeOutput(status="error", error=f"internal error in {name} probe: it returned {type(out).__name__}, not ProbeOutput")
    if not isinstance(out.status, str) or out.status not in _STATUSES or not (out.error is None or isinstance(out.error, str)):
        return ProbeOutput(status="error", error=f"internal error in {name} probe: status {out.status!r} / error {type(out.error).__name__}")
    if not isinstance(out.facts, dict):
        return ProbeOutput(status="error", error=f"internal error in {name} probe: facts are {type(out.facts).__name__}, not a mapping")
    blank = Facts()
    good: dict[str, object] = {}
    bad: list[str] = []
    plugin_subjects = {subject for subject, _ in kinds.plugin_probes()}
    for subject, value in out.facts.items():
        if isinstance(subject, str) and subject in plugin_subjects and subject not in SUBJECTS:
            try:  # a plug-in accelerator's own subject: kept as plain data, so it must be plain data
                json.dumps(to_data(value))
            except (TypeError, ValueError, RecursionError) as exc:
                bad.append(f"{subject}: not plain data ({exc})"[:300])
                continue
            good[subject] = value
            continue
        if not isinstance(subject, str) or subject not in SUBJECTS:
            bad.append(f"unknown subject {subject!r}")
            continue
        cls = type(getattr(blank, subject))
        try:
            if not isinstance(value, cls):
                raise TypeError(f"{subject} is {type(value).__name__}, not {cls.__name__}")
            from_data(cls, to_data(value))  # every field of the declared type, all the way down
        except (TypeError, ValueError, RecursionError) as exc:
            bad.append(str(exc)[:300])
            continue
        good[subject] = value
    if bad:
        return ProbeOutput(facts=good, status="error", error=f"internal error in {name} probe: wrong facts: {'; '.join(bad)[:600]}")
    return out


def run_probes(
    ctx: ProbeContext,
    *,
    only: Sequence[str] | None = None,
    on_progress: Callable[[str, ProbeStatus], None] | None = None,
) -> Report:
    """Run the probes concurrently; never raises; returns a report without findings."""
    facts = Facts()
    facts.environment = capture_environment(ctx.system.env)
    statuses: dict[str, ProbeStatus] = {}
    lock = threading.Lock()
    selected = [(n, m) for n, m in all_probes() if only is None or n in only]

    def one(name: str, module: str, loaded: Callable[[ProbeContext], ProbeOutput] | Exception | None) -> None:
        start = time.monotonic()
        try:
            if isinstance(loaded, Exception):
                raise loaded
            out = checked_output(name, _broken_on_purpose(name) or (loaded or _load(module))(ctx))
        except Exception as exc:  # a probe bug (or a broken install of it) must not take the run down
            out = ProbeOutput(status="error", error=f"internal error in {name} probe: {type(exc).__name__}: {exc}")
        st = ProbeStatus(name, out.status, round(time.monotonic() - start, 4), out.error)
        with lock:
            for subject, value in out.facts.items():
                if subject in SUBJECTS:
                    setattr(facts, subject, value)
                else:  # a plug-in accelerator's own subject
                    facts.plugins[subject] = to_data(value)
            statuses[name] = st
        if on_progress:
            on_progress(name, st)

    deadline = max(ctx.torch_timeout_s, ctx.timeout_s * 4) + 5.0
    pool = ThreadPoolExecutor(max_workers=len(selected) or 1, thread_name_prefix="probe")
    builtin = {m for _, m in PROBES} | {m for _, m in kinds.probes()} - {m for _, m in kinds.plugin_probes()}
    futures = {}
    for n, m in selected:
        # a built-in probe's module is imported here, just before its thread starts: imported on ten threads at once
        # they contend for the import lock and the GIL, and the target probe (first) started its worker 40 ms late;
        # a plug-in's module is imported on its own thread (a slow or hanging import stays under the deadline)
        loaded: Callable[[ProbeContext], ProbeOutput] | Exception | None = None
        if m in builtin:
            try:
                loaded = _load(m)
            except Exception as exc:
                loaded = exc
        futures[pool.submit(one, n, m, loaded)] = n
    end = time.monotonic() + deadline
    for fut, name in futures.items():
        try:
            fut.result(timeout=max(0.0, end - time.monotonic()))
        except Exception:  # TimeoutError: abandon the thread (daemon); record the probe as timed out
            with lock:
                statuses.setdefault(name, ProbeStatus(name, "timeout", deadline, f"{name} probe did not finish in {deadline:g} s"))
    pool.shutdown(wait=False, cancel_futures=True)
    with lock:
        probes = [statuses[n] for n, _ in selected if n in statuses]
        # an accelerator plug-in that could not be loaded is a failed probe of its own (probe-failed says so)
        probes += [ProbeStatus("plugins", "error", 0.0, error) for error in kinds.PLUGIN_ERRORS if only is None]
        raw = [r.to_dict() for r in ctx.system.record]
        snapshot = facts
    return Report(facts=snapshot, probes=probes, raw_outputs=raw)
