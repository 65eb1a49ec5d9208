"""``stackdoctor install --from-source``: gather -> probe the build tools -> plan (:mod:`stackdoctor.resolve.source_build`) -> run.

Without ``--dry-run`` the plan's commands run in order through :class:`~stackdoctor.system.System` (no shell, a
timeout, the whole tree stopped on Ctrl-C), each in its folder, with the plan's environment, every line of their
output written to a log; a step whose prerequisite is missing is not started (the run stops there, saying which and
its fix), nor is anything after a command that failed. Prints nothing itself: lines go through ``say`` / ``stream``.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor.core.errors import ExitCode, UsageError
from stackdoctor.resolve.source_build import BuildPlan, BuildRequest, Prerequisite, build_plan, steps

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System


@dataclass
class FromSourceOptions:
    torch: str | None = None
    python: str | None = None
    matrix: list[str] = field(default_factory=list)
    replay: str | None = None
    gpus: list[str] = field(default_factory=list)
    gfx: list[str] = field(default_factory=list)
    platform: str | None = None
    python_version: str | None = None
    ptx: bool = False
    source_dir: str = "pytorch"
    source_url: str | None = None
    steps: list[str] = field(default_factory=list)  # only these steps (default: all)
    dry_run: bool = False
    yes: bool = False
    json_out: bool = False
    emit: str | None = None  # "build-env"
    log: str | None = None
    timeout_s: float = 4 * 3600.0

    @property
    def what_if(self) -> bool:
        return bool(self.gpus or self.gfx or self.platform or self.python_version or self.replay)


@dataclass
class BuildOutcome:
    plan: BuildPlan | None = None
    exit_code: int = ExitCode.OK
    what: str = "planned"  # "dry-run" | "emitted" | "built" | "blocked" | "failed"
    emitted: str | None = None


def check(opts: FromSourceOptions) -> None:
    known = steps()
    bad = [s for s in opts.steps if s not in known]
    if bad:
        raise UsageError(f"--step must be one of {', '.join(known)}, not {bad[0]!r}.")
    if opts.emit is not None and opts.emit != "build-env":
        raise UsageError(f"with --from-source, --emit takes build-env, not {opts.emit!r}.")
    if opts.emit and opts.json_out:
        raise UsageError("--emit and --json both print on stdout; choose one.")
    if opts.timeout_s <= 0:
        raise UsageError("--timeout and --index-timeout must be positive.")


_PYTORCH_REMOTE = re.compile(r"[/:]pytorch/pytorch(?:\.git)?/?$", re.IGNORECASE)


def check_source_dir(source_dir: str, source_url: str | None = None) -> None:
    """``--source-dir`` must be absent, an empty folder, or a PyTorch checkout: its git remote is PyTorch's (or the
    ``--source-url`` given), or it has PyTorch's ``version.txt`` and ``setup.py`` / ``pyproject.toml``. Anything else
    (another project's repository, a link to ``/``, a folder of other files) is one sentence (exit 2), before
    anything runs in it. Decided from the folder's files (the link followed), never by running anything in it."""
    from stackdoctor.system import System

    system = System.from_env().local
    path = os.path.realpath(os.path.abspath(source_dir))
    if not os.path.lexists(os.path.abspath(source_dir)):
        return
    if not os.path.isdir(path):
        raise UsageError(f"--source-dir {source_dir} is not a folder: choose an empty or absent folder, or a PyTorch checkout.")
    try:
        if not os.listdir(path):
            return
    except OSError:
        pass
    if _pytorch_remote(system, path, source_url) or _pytorch_files(system, path):
        return
    raise UsageError(
        f"--source-dir {source_dir} is neither empty nor a PyTorch checkout (its git remote and its version.txt / setup.py do not "
        "say PyTorch), so nothing was done in it: choose an empty or absent folder, or a PyTorch checkout."
    )


def _pytorch_remote(system: System, path: str, source_url: str | None) -> bool:
    res = system.read_text(os.path.join(path, ".git", "config"), max_bytes=1 << 20)
    urls = [m.group(1).strip() for m in re.finditer(r"^\s*url\s*=\s*(.+)$", res.text or "", re.MULTILINE)] if res.ok else []
    given = {source_url.rstrip("/"), os.path.abspath(source_url).rstrip("/")} if source_url else set()
    return any(_PYTORCH_REMOTE.search(u) or u.rstrip("/") in given for u in urls)


def _pytorch_files(system: System, path: str) -> bool:
    version = system.read_text(os.path.join(path, "version.txt"), max_bytes=4096)
    if not (version.ok and re.match(r"\d+\.\d+", (version.text or "").strip())):
        return False
    setup = system.read_text(os.path.join(path, "setup.py"), max_bytes=1 << 20)
    pyproject = system.read_text(os.path.join(path, "pyproject.toml"), max_bytes=1 << 20)
    return bool((setup.ok and re.search(r"TORCH_PACKAGE_NAME|\bPyTorch\b", setup.text or ""))
                or (pyproject.ok and re.search(r'^\s*name\s*=\s*"torch"\s*$', pyproject.text or "", re.MULTILINE)))


def _first_blocked(plan: BuildPlan, steps: list[str]) -> tuple[str, Prerequisite] | None:
    """The first step, in order, whose prerequisite is missing (one an earlier step installs does not count)."""
    ran: list[str] = []
    for step in steps:
        missing = plan.blocking([step], ran)
        if missing is not None:
            return step, missing
        ran.append(step)
    return None


def plan_only(opts: FromSourceOptions) -> BuildPlan:
    from stackdoctor.install.buildtools import probe_build_tools
    from stackdoctor.install.options import InstallOptions, MachineOptions, SourceOptions
    from stackdoctor.install.request import gather_view
    from stackdoctor.resolve.source_build import os_of
    from stackdoctor.system import System

    view, python, matrix = gather_view(InstallOptions(python=opts.python, machine=MachineOptions(replay=opts.replay), sources=SourceOptions(matrix=list(opts.matrix))))
    request = BuildRequest(
        torch=opts.torch, gpus=list(opts.gpus), gfx=list(opts.gfx), platform=opts.platform, python_version=opts.python_version,
        ptx=opts.ptx, source_url=opts.source_url, source_dir=opts.source_dir,
        checkout=not opts.what_if and os.path.isdir(os.path.join(opts.source_dir, ".git")),
    )
    if opts.torch and not any(str(r.version) == opts.torch.strip() for r in matrix.releases):
        raise UsageError(f"--torch {opts.torch}: the matrix knows no such release to build (a release version, like 2.13.0).")
    here = {"Windows": "windows", "Darwin": "macos"}.get(view.facts.platform.system or "", "linux")
    foreign = opts.replay is not None or os_of(request, view.facts) != here
    tools = None if foreign else probe_build_tools(System.from_env(), os.path.dirname(os.path.abspath(opts.source_dir)) or ".", python=python)
    shown_python = python
    if opts.what_if and (foreign or opts.python_version):
        shown_python = "python" if os_of(request, view.facts) == "windows" else "python3"
    plan = build_plan(view.facts, matrix, request, tools, shown_python)
    if opts.what_if:
        from stackdoctor.resolve.machine import flag_kind

        gfx_kind = flag_kind("--gfx")
        parts = [*(f"GPU {g}" for g in opts.gpus), *(f"{gfx_kind.vendor_label if gfx_kind else 'GPU'} {g}" for g in opts.gfx)]
        parts += [f"Python {opts.python_version}"] if opts.python_version else []
        parts += [opts.platform] if opts.platform else []
        parts += [f"the machine in {opts.replay}"] if opts.replay else []
        plan.machine = ", ".join(parts)
    return plan


def run(
    opts: FromSourceOptions,
    say: Callable[[str, str], None],
    stream: Callable[[str], None],
    show: Callable[[BuildPlan], None] | None = None,
    confirm: Callable[[str], bool | None] | None = None,
) -> BuildOutcome:
    """The whole flow; a usage error raises (one sentence, exit 2), everything else is in the outcome. Before it runs
    anything the plan is shown (``show``) and, without ``--yes``, ``confirm`` asks (None: no terminal to ask on)."""
    check(opts)
    if not (opts.what_if or opts.emit):  # the folder the build would run in: refused before anything runs (a dry run too)
        check_source_dir(opts.source_dir, opts.source_url)
    out = BuildOutcome()
    plan = out.plan = plan_only(opts)
    if opts.emit:
        from stackdoctor.resolve.source_build import env_file

        out.emitted, out.what = env_file(plan), "emitted"
        return out
    if opts.dry_run or opts.what_if:
        out.what = "dry-run"
        return out
    chosen = list(opts.steps) or list(steps())
    commands = [c for c in plan.commands if c.step in chosen]
    if show is not None:
        show(plan)
    first = _first_blocked(plan, [c.step for c in commands])
    if first is not None:
        step, missing = first
        plan.error = f"the {step} step needs {missing.needed}, which is missing: {missing.fix}"
        out.what, out.exit_code = "blocked", ExitCode.FAILED
        return out
    if not opts.yes:
        answer = confirm(f"Build torch {plan.torch_version} from source in {os.path.abspath(opts.source_dir)}?") if confirm else None
        if answer is None:
            raise UsageError("not building: there is no terminal to confirm on; re-run with --yes to build, or --dry-run to only see the plan.")
        if not answer:
            out.what = "declined"
            return out
    from stackdoctor.system import System

    system = System.from_env()
    base = os.path.abspath(".")
    log_path = os.path.abspath(opts.log or os.path.join(base, f"stackdoctor-build-{time.strftime('%Y%m%d-%H%M%S')}.log"))
    plan.log = log_path
    deadline = time.monotonic() + opts.timeout_s
    # the target's scripts folder first on PATH: the cmake and ninja the deps step installs there are the ones the build finds
    scripts = os.path.dirname(os.path.abspath(plan.python))
    env: dict[str, str | None] = {**plan.env, "PATH": scripts + os.pathsep + (system.getenv("PATH") or "")}
    with open(log_path, "a", encoding="utf-8") as log:
        for i, cmd in enumerate(commands, 1):
            still = plan.blocking([cmd.step], plan.ran)  # checked before asking too; a step that failed to install it would have stopped
            if still is not None:
                plan.error = f"the {cmd.step} step needs {still.needed}, which is missing: {still.fix}"
                log.write(plan.error + "\n")
                out.what, out.exit_code = "blocked", ExitCode.FAILED
                return out
            say(f"[{i}/{len(commands)}] {cmd.step}: {cmd.line}", "bold")
            log.write(f"$ {cmd.line}   (in {cmd.cwd})\n")
            log.flush()

            def sink(text: str) -> None:
                log.write(text)
                stream(text)

            folder = os.path.join(base, cmd.cwd) if not os.path.isabs(cmd.cwd) else cmd.cwd
            if not os.path.isdir(folder):
                plan.error = f"the {cmd.step} step runs in {folder}, which does not exist"
                out.what, out.exit_code = "failed", ExitCode.FAILED
                return out
            res = system.run_streaming(
                cmd.argv, timeout=max(1.0, deadline - time.monotonic()), on_stdout=sink, on_stderr=sink, env=env, cwd=folder
            )
            if not res.ok:
                plan.error = f"{cmd.line} failed ({res.describe_failure()}); the log is {log_path}"
                log.write(plan.error + "\n")
                out.what, out.exit_code = "failed", ExitCode.FAILED
                return out
            if cmd.step not in plan.ran:
                plan.ran.append(cmd.step)
    out.what = "built"
    return out
