"""The plan of a source build of torch (``stackdoctor install --from-source``): pure over the facts the probes gathered.

PyTorch's README ("From Source") asks a machine for a list of things: a Python, a C++20 compiler, CMake, Ninja,
git, free disk, memory for the parallel jobs, and for an accelerator its toolkit (nvcc, cuDNN, NVTX; ROCm; Intel's
prerequisites). :func:`build_plan` turns the reconciled facts, the build tools found
(:class:`stackdoctor.model.toolchain.BuildTools`) and the matrix's ``source_build`` table into one
:class:`BuildPlan`: each prerequisite needed / found / ok or missing with its fix, the environment the build reads
(``TORCH_CUDA_ARCH_LIST`` from the GPUs' compute capabilities, ``PYTORCH_ROCM_ARCH`` from their gfx,
``USE_CUDA`` / ``USE_ROCM`` / ``USE_XPU``, ``CMAKE_PREFIX_PATH``, ``CUDA_HOME`` / ``ROCM_PATH``, ``MAX_JOBS``) and
the commands in order, quoted for the platform's shell. No version is written here: the minimums are the matrix's.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackdoctor import kinds
from stackdoctor.core.shell import powershell_set, word
from stackdoctor.core.versions import dotted

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.kinds import Accelerator
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.toolchain import BuildTools, Tool
    from stackdoctor.model.view import MachineView

__all__ = ["BUILD_PLAN_SCHEMA", "BuildCommand", "BuildPlan", "BuildRequest", "Prerequisite", "build_plan", "env_file",
           "max_jobs", "offer_from_source", "steps"]

BUILD_PLAN_SCHEMA = "stackdoctor.build-plan/1"
_GB = 1000**3


@dataclass
class Prerequisite:
    """One thing the build needs: what, what was found (version, path, what said so), ok / missing / unknown, the fix."""

    name: str  # "python", "compiler", "cmake", "ninja", "git", "pip", "disk", "memory", "nvcc", "cudnn", "nvtx", "rocm", "intel-gpu"
    needed: str
    found: str | None = None
    path: str | None = None
    witness: str | None = None
    status: str = "unknown"  # "ok" | "missing" | "unknown" (not checked here: a what-if for another platform, or nothing to read)
    fix: str | None = None
    source: str | None = None  # where the requirement is written (the matrix row's source)
    steps: list[str] = field(default_factory=list)  # the commands that need it (a run stops before the first of them)
    provided_by: str | None = None  # a step that installs it ("deps": the dev group brings cmake and ninja), so a run that has it does not stop


@dataclass
class BuildCommand:
    step: str  # one of steps()
    argv: list[str]
    cwd: str  # where it runs: "." (the folder the source is cloned into) or the source folder
    line: str  # the command as typed in the plan's shell (POSIX sh or PowerShell)


@dataclass
class BuildPlan:
    torch_version: str | None  # the release built (None: the matrix knows none)
    tag: str | None  # "v2.13.0"
    accelerator: str  # "cuda" | "rocm" | "xpu" | "cpu"
    os: str  # "linux" | "windows" | "macos"
    shell: str  # "posix" | "powershell"
    source_url: str
    source_dir: str
    python: str
    prerequisites: list[Prerequisite] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    env_reasons: dict[str, str] = field(default_factory=dict)  # why each value
    commands: list[BuildCommand] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    machine: str | None = None  # what-ifs: the machine planned for
    log: str | None = None  # a run: the log file
    ran: list[str] = field(default_factory=list)  # a run: the steps that finished
    error: str | None = None

    @property
    def ready(self) -> bool:
        """No prerequisite is missing that no step of the plan installs."""
        steps = {c.step for c in self.commands}
        return not any(p.status == "missing" and p.provided_by not in steps for p in self.prerequisites)

    def blocking(self, steps: list[str], ran: list[str] | None = None) -> Prerequisite | None:
        """The first missing prerequisite one of ``steps`` needs (one a step in ``ran`` installed does not count)."""
        done = set(ran or ())
        return next((p for p in self.prerequisites if p.status == "missing" and set(p.steps) & set(steps) and p.provided_by not in done), None)

    def to_data(self) -> dict[str, Any]:
        from stackdoctor.model.facts import to_data

        return {"schema": BUILD_PLAN_SCHEMA, **to_data(self)}


@dataclass
class BuildRequest:
    torch: str | None = None  # a release ("2.13.0"); None: the newest the matrix knows
    gpus: list[str] = field(default_factory=list)  # what-if: names or sm_XY
    gfx: list[str] = field(default_factory=list)
    platform: str | None = None  # what-if wheel platform tag (its OS decides the shell)
    python_version: str | None = None
    ptx: bool = False  # add +PTX to the newest arch
    source_url: str | None = None  # default: the matrix's repository
    source_dir: str = "pytorch"
    checkout: bool = False  # source_dir already is a git checkout: the clone step checks the tag out in it instead


# ---------------------------------------------------------------------------- helpers


def _row(matrix: Matrix, name: str) -> Any:
    table = matrix.table("source_build") or {}
    return table.get(name)


def _minimum(matrix: Matrix, name: str) -> str | None:
    row = _row(matrix, name)
    return row.minimum if row is not None else None


def _src(matrix: Matrix, name: str) -> str | None:
    row = _row(matrix, name)
    return row.source if row is not None else None


def _url(matrix: Matrix, name: str) -> str | None:
    row = _row(matrix, name)
    return row.url if row is not None else None


def _at_least(found: str | None, minimum: str | None) -> bool | None:
    """found >= minimum (None: either is unknown)."""
    if minimum is None:
        return True if found else None
    f, m = dotted(found or ""), dotted(minimum)
    if f is None or m is None:
        return None
    n = max(len(f), len(m))
    return f + (0,) * (n - len(f)) >= m + (0,) * (n - len(m))


def os_of(request: BuildRequest, facts: Facts) -> str:
    tag = (request.platform or "").lower()
    if tag.startswith("win"):
        return "windows"
    if tag.startswith("macosx"):
        return "macos"
    if tag:
        return "linux"
    return {"Windows": "windows", "Darwin": "macos"}.get(facts.platform.system or "", "linux")


def _release(matrix: Matrix, torch: str | None) -> str | None:
    if torch:
        return torch.strip()
    return str(matrix.releases[0].version) if matrix.releases else None


def max_jobs(available: int | None, per_job_gb: str | None, cpus: int | None) -> int | None:
    """How many compile jobs fit in ``available`` bytes at ``per_job_gb`` each (at least 1, at most the CPUs)."""
    if available is None or per_job_gb is None:
        return None
    fit = max(1, math.floor(available / (float(per_job_gb) * _GB)))
    return min(fit, cpus) if cpus else fit


def steps() -> tuple[str, ...]:
    """Every step a source build may have, in order (``--step``): :func:`stackdoctor.kinds.source_build_steps`."""
    return kinds.source_build_steps()


def _gb(n: int) -> str:
    return f"{n / _GB:.1f} GB"


# ---------------------------------------------------------------------------- the accelerator


def _targets(facts: Facts, matrix: Matrix, request: BuildRequest) -> tuple[Accelerator | None, dict[str, list[str]], list[str]]:
    """(the kind built for, None for a CPU-only build; what the build compiles for, by kind name; notes) of the machine
    planned for: the what-if devices (``--gpu`` NVIDIA's, ``--gfx`` AMD's), else the first kind with devices to build for."""
    from stackdoctor.resolve import parse_gpu_request as _parse_gpu_request
    from stackdoctor.resolve.machine import flag_kind

    notes: list[str] = []
    if request.gpus or request.gfx:
        ccs = []
        for g in request.gpus:
            cc = _parse_gpu_request(g, matrix)
            if cc is None:
                notes.append(f"--gpu {g}: unknown GPU name, its compute capability is not in the matrix")
            else:
                ccs.append(cc)
        gpu_kind, gfx_kind = flag_kind("--gpu"), flag_kind("--gfx")
        assert gpu_kind is not None and gfx_kind is not None
        return (gpu_kind if request.gpus else gfx_kind), {gpu_kind.name: ccs, gfx_kind.name: [g.strip().lower() for g in request.gfx]}, notes
    for acc in kinds.ALL:
        found = acc.build_targets(facts)
        if found is not None:
            return acc, {acc.name: found}, notes
    return None, {}, notes


# ---------------------------------------------------------------------------- prerequisites


def _tool_prereq(name: str, tool: Tool | None, needed: str, fix: str, steps: list[str], source: str | None, minimum: str | None = None) -> Prerequisite:
    p = Prerequisite(name, needed, source=source, steps=steps)
    if tool is None:
        return p
    p.found, p.path, p.witness = tool.version, tool.path, tool.witness
    if tool.path is None:
        p.status, p.fix = "missing", fix
    elif tool.version is None and minimum is not None:
        p.status, p.fix = "unknown", None
        p.found = tool.error
    elif _at_least(tool.version, minimum) is False:
        p.status, p.fix = "missing", fix
    else:
        p.status = "ok"
    return p


def _compiler(os_: str, tools: BuildTools | None, matrix: Matrix) -> Prerequisite:
    gcc_min = _minimum(matrix, "gcc")
    if os_ == "windows":
        url = _url(matrix, "msvc") or ""
        cl = next((t for t in tools.compilers if t.name == "cl"), _absent("cl")) if tools else None
        return _tool_prereq(
            "compiler", cl, "Visual Studio or its Build Tools (cl.exe, in a `vcvarsall.bat x64` environment)",
            f"install the Visual Studio Build Tools ({url}) and run the build from an \"x64 Native Tools\" prompt (vcvarsall.bat x64)",
            ["build"], _src(matrix, "msvc"),
        )
    if os_ == "macos":
        clang = next((t for t in tools.compilers if t.name == "clang"), _absent("clang")) if tools else None
        return _tool_prereq("compiler", clang, "clang with C++20 (Xcode's command line tools)",
                            "xcode-select --install", ["build"], _src(matrix, "clang"))
    needed = f"gcc >= {gcc_min} (C++20), or clang" if gcc_min else "gcc or clang with C++20"
    p = Prerequisite("compiler", needed, source=_src(matrix, "gcc"), steps=["build"])
    if tools is None:
        return p
    gcc = next((t for t in tools.compilers if t.name == "gcc"), None)
    clang = next((t for t in tools.compilers if t.name == "clang" and t.version), None)
    fix = f"install gcc {gcc_min} or newer (your distribution's g++ package of that version) and name it: export CC=gcc-N CXX=g++-N"
    if gcc is not None and gcc.version and _at_least(gcc.version, gcc_min) is not False:
        p.found, p.path, p.witness, p.status = f"gcc {gcc.version}", gcc.path, gcc.witness, "ok"
    elif gcc is not None and gcc.version:
        p.found, p.path, p.witness, p.status = f"gcc {gcc.version}", gcc.path, gcc.witness, "missing"
        p.fix = fix + (f"; or build with clang {clang.version}: export CC=clang CXX=clang++" if clang else "")
    elif clang is not None:
        p.found, p.path, p.witness, p.status = f"clang {clang.version}", clang.path, clang.witness, "ok"
    else:
        p.status, p.fix = "missing", fix
        if gcc is not None:
            p.path, p.found = gcc.path, gcc.error
    return p


def _absent(name: str) -> Tool:
    from stackdoctor.model.toolchain import Tool

    return Tool(name)


@dataclass
class _Ask:
    """What a kind's :meth:`~stackdoctor.kinds.Accelerator.build_prerequisites` is given (``kinds.base.BuildAsk``)."""

    facts: Facts
    tools: BuildTools | None
    os: str
    matrix: Matrix

    def minimum(self, name: str) -> str | None:
        return _minimum(self.matrix, name)

    def source(self, name: str) -> str | None:
        return _src(self.matrix, name)

    def url(self, name: str) -> str | None:
        return _url(self.matrix, name)

    def at_least(self, found: str | None, minimum: str | None) -> bool | None:
        return _at_least(found, minimum)

    def prerequisite(self, name: str, needed: str, **fields: Any) -> Prerequisite:
        return Prerequisite(name, needed, **fields)

    def tool(self, name: str, tool: Tool | None, needed: str, fix: str, steps: list[str], source: str | None, minimum: str | None = None) -> Prerequisite:
        return _tool_prereq(name, tool, needed, fix, steps, source, minimum)


def _prerequisites(
    facts: Facts, matrix: Matrix, request: BuildRequest, tools: BuildTools | None, os_: str, acc: Accelerator | None, python: str
) -> tuple[list[Prerequisite], int | None]:
    out = [_python_prereq(facts, matrix, request, python), _compiler(os_, tools, matrix)]
    out += _tool_prereqs(matrix, tools)
    out.append(_pip_prereq(facts, matrix, request, tools, os_, python))
    out.append(_disk_prereq(matrix, tools))
    memory, jobs = _memory_prereq(matrix, tools)
    out.append(memory)
    if acc is not None:
        out.extend(acc.build_prerequisites(_Ask(facts, tools, os_, matrix)))
    return out, jobs


def _python_prereq(facts: Facts, matrix: Matrix, request: BuildRequest, python: str) -> Prerequisite:
    py_min = _minimum(matrix, "python")
    pyv = request.python_version or facts.python.version
    py = Prerequisite("python", f"Python >= {py_min}" if py_min else "Python", found=pyv, path=None if request.python_version else python,
                      witness="--python-version" if request.python_version else ("the target interpreter" if pyv else None),
                      source=_src(matrix, "python"), steps=list(steps()[2:]))
    ok = _at_least(pyv, py_min)
    py.status = "unknown" if ok is None else "ok" if ok else "missing"
    if ok is False:
        py.fix = f"build in an environment with Python {py_min} or newer (e.g. `python3.12 -m venv .venv`), then --python .venv/bin/python"
    return py


def _tool_prereqs(matrix: Matrix, tools: BuildTools | None) -> list[Prerequisite]:
    """CMake and Ninja (the deps step brings both) and git."""
    out: list[Prerequisite] = []
    cmake_min = _minimum(matrix, "cmake")
    deps_fix = "the deps step (pip install --group dev) installs it into the environment"
    for name, tool, needed, minimum in (
        ("cmake", tools.cmake if tools else None, f"CMake >= {cmake_min}" if cmake_min else "CMake", cmake_min),
        ("ninja", tools.ninja if tools else None, "Ninja", None),
    ):
        p = _tool_prereq(name, tool, needed, deps_fix, ["build"], _src(matrix, name), minimum)
        p.provided_by = "deps"
        out.append(p)
    out.append(_tool_prereq("git", tools.git if tools else None, "git", "install git (https://git-scm.com/downloads)", ["clone", "submodules"], _src(matrix, "repository")))
    return out


def _pip_prereq(facts: Facts, matrix: Matrix, request: BuildRequest, tools: BuildTools | None, os_: str, python: str) -> Prerequisite:
    pip_min = _minimum(matrix, "pip")
    pipv = facts.python.pip_version
    pip = Prerequisite("pip", f"pip >= {pip_min} (pip install --group dev)" if pip_min else "pip", found=pipv, path=python if pipv else None,
                       witness="the target's pip" if pipv else None, source=_src(matrix, "pip"), steps=["deps"])
    ok = _at_least(pipv, pip_min) if tools is not None and not request.python_version else None
    pip.status = "unknown" if ok is None else "ok" if ok else "missing"
    pip.fix = f"{word(python, windows=os_ == 'windows')} -m pip install --upgrade pip" if ok is False else None
    return pip


def _disk_prereq(matrix: Matrix, tools: BuildTools | None) -> Prerequisite:
    disk_min = _minimum(matrix, "disk")
    disk = Prerequisite("disk", f">= {disk_min} GB free for the source and the build" if disk_min else "free disk", source=_src(matrix, "disk"),
                        steps=["clone", "build"])
    if tools is not None and tools.free_disk_bytes is not None:
        disk.found, disk.path, disk.witness = f"{_gb(tools.free_disk_bytes)} free", tools.disk_path, "free space of the file system"
        enough = disk_min is None or tools.free_disk_bytes >= float(disk_min) * _GB
        disk.status = "ok" if enough else "missing"
        if not enough:
            disk.fix = f"free {disk_min} GB on {tools.disk_path}, or clone elsewhere: --source-dir /a/roomier/disk/pytorch"
    return disk


def _memory_prereq(matrix: Matrix, tools: BuildTools | None) -> tuple[Prerequisite, int | None]:
    """The memory the parallel compile jobs need, and how many fit (``MAX_JOBS``)."""
    per_job = _minimum(matrix, "memory_per_job")
    jobs = max_jobs(tools.memory_available_bytes if tools else None, per_job, tools.cpus if tools else None)
    mem = Prerequisite("memory", f"{per_job} GB per parallel compile job" if per_job else "memory for the compile jobs",
                       source=_src(matrix, "memory_per_job"), steps=["build"])
    if tools is not None and tools.memory_available_bytes is not None:
        mem.found, mem.witness = f"{_gb(tools.memory_available_bytes)} available: {jobs} job(s) fit", tools.memory_witness
        small = per_job is not None and tools.memory_available_bytes < float(per_job) * _GB
        mem.status = "missing" if small else "ok"
        if small:
            heaviest = next((f"{a.heaviest_build_files} " for a in kinds.ALL if a.heaviest_build_files), "")
            mem.fix = f"free memory or add swap; even one job (MAX_JOBS=1) needs {per_job} GB for the largest {heaviest}files"
    return mem, jobs


# ---------------------------------------------------------------------------- environment and commands


def _environment(facts: Facts, request: BuildRequest, tools: BuildTools | None, os_: str, acc: Accelerator | None,
                 targets: dict[str, list[str]], jobs: int | None) -> tuple[dict[str, str], dict[str, str], list[str]]:
    env: dict[str, str] = {}
    why: dict[str, str] = {}
    warnings: list[str] = []
    build = f"a {acc.backend.upper()} build for this machine" if acc is not None else "a CPU-only build for this machine"
    for kind_ in kinds.ALL:  # every kind's switch: on for the kind built for, off for the others
        if kind_.build_switch:
            env[kind_.build_switch], why[kind_.build_switch] = ("1" if kind_ is acc else "0"), build
    for kind_ in kinds.ALL:
        for key, (value, reason) in kind_.build_arch_env(targets.get(kind_.name) or [], ptx=request.ptx).items():
            env[key], why[key] = value, reason
    kind, prefix = facts.python.env_kind, facts.python.env_prefix
    if prefix and kind in ("venv", "conda"):
        if tools is None:  # planned for another platform: the prefix as that shell names it once the env is active
            prefix = "${CONDA_PREFIX}" if kind == "conda" else "${VIRTUAL_ENV}"
        value = prefix + ("\\Library" if os_ == "windows" and kind == "conda" else "")
        env["CMAKE_PREFIX_PATH"] = value
        why["CMAKE_PREFIX_PATH"] = f"the target's {'conda environment' if kind == 'conda' else 'virtual environment'}"
    else:
        warnings.append("the target is no venv or conda environment: CMAKE_PREFIX_PATH is left to you (the README builds in one)")
    for key, (value, reason) in (acc.build_home_env(tools) if acc is not None else {}).items():
        env[key], why[key] = value, reason
    if jobs is not None:
        env["MAX_JOBS"] = str(jobs)
        why["MAX_JOBS"] = "the compile jobs that fit in the memory available"
    return env, why, warnings


def _line(argv: list[str], windows: bool) -> str:
    if not windows:
        return " ".join(word(a) for a in argv)
    words = [word(a, windows=True) for a in argv]
    return ("& " if words[0].startswith("'") else "") + " ".join(words)


def _commands(request: BuildRequest, tag: str | None, url: str, python: str, os_: str, arch: str, acc: Accelerator | None) -> list[BuildCommand]:
    windows = os_ == "windows"
    src = request.source_dir
    clone = ["git", "checkout", tag] if request.checkout and tag else ["git", "clone", *(["--branch", tag] if tag else []), url, src]
    steps: list[tuple[str, list[str], str]] = [
        ("clone", clone, src if request.checkout else "."),
        ("submodules", ["git", "submodule", "sync"], src),
        ("submodules", ["git", "submodule", "update", "--init", "--recursive"], src),
        ("deps", [python, "-m", "pip", "install", "--group", "dev"], src),
    ]
    if os_ in ("linux", "windows") and arch in ("x86_64", "amd64", ""):
        steps.append(("mkl", [python, "-m", "pip", "install", "mkl-static", "mkl-include"], src))
    steps += [(step, argv, src) for step, argv in (acc.build_steps(python) if acc is not None else [])]
    steps.append(("build", [python, "-m", "pip", "install", "--no-build-isolation", "-v", "-e", "."], src))
    return [BuildCommand(s, argv, cwd, _line(argv, windows)) for s, argv, cwd in steps]


def env_file(plan: BuildPlan) -> str:
    """``--emit build-env``: the environment as a file to source (POSIX ``. ./build-env.sh``) or dot-source (PowerShell)."""
    if plan.shell == "powershell":
        lines = [f"# stackdoctor install --from-source: the environment of a torch {plan.torch_version} build (. .\\build-env.ps1)"]
        lines += [powershell_set(k, v) for k, v in plan.env.items()]
    else:
        lines = [f"# stackdoctor install --from-source: the environment of a torch {plan.torch_version} build (. ./build-env.sh)"]
        lines += [f"export {k}={word(v)}" for k, v in plan.env.items()]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- the plan


def build_plan(facts: Facts, matrix: Matrix, request: BuildRequest, tools: BuildTools | None, python: str) -> BuildPlan:
    """The plan; ``tools`` None: the build tools were not looked at (a what-if for another platform)."""
    os_ = os_of(request, facts)
    tag_version = _release(matrix, request.torch)
    tag = f"v{tag_version}" if tag_version and re.fullmatch(r"\d+\.\d+\.\d+", tag_version) else None
    url = request.source_url or _url(matrix, "repository") or ""
    acc, targets, notes = _targets(facts, matrix, request)
    if os_ == "macos" and acc is not None and not acc.builds_on_macos:
        from stackdoctor.resolve.candidates import english_sentence

        notes.append(english_sentence("src_macos_cpu", accel=acc.backend.upper()))  # what macOS's build has built in: the locale's
        acc, targets = None, {}
    windows = os_ == "windows"
    plan = BuildPlan(tag_version, tag, acc.backend if acc is not None else "cpu", os_, "powershell" if windows else "posix", url, request.source_dir, python)
    plan.prerequisites, jobs = _prerequisites(facts, matrix, request, tools, os_, acc, python)
    plan.env, plan.env_reasons, warns = _environment(facts, request, tools, os_, acc, targets, jobs)
    plan.warnings.extend(notes + warns)
    if tag is None and tag_version:
        plan.warnings.append(f"torch {tag_version} is not a release version: the clone takes the default branch")
    if windows:
        plan.warnings.append("run the commands in an \"x64 Native Tools\" PowerShell (vcvarsall.bat x64), where cl.exe is found")
    arch = (request.platform or "").rsplit("_", 1)[-1] if request.platform else (facts.platform.machine or "").lower()
    if request.platform and "x86_64" in request.platform:
        arch = "x86_64"
    plan.commands = _commands(request, tag, url, python, os_, arch, acc)
    return plan


# ---------------------------------------------------------------------------- install's offer


def offer_from_source(plan: Any, view: MachineView, matrix: Matrix, request: Any) -> str | None:
    """The line ``install`` adds when no published build of the newest (or pinned) release runs on this machine's
    GPUs: the plan is an older release or a CPU build (or nothing), and ``install --from-source`` builds the newer one.
    None when the plan already is a GPU build of that release, or no GPU is planned for."""
    from stackdoctor.matrix import variant_kind
    from stackdoctor.resolve import target_from

    t = target_from(view, matrix, request)
    gpus = [(g, label) for g in t.gpus if (acc := kinds.by_vendor(g.vendor)) is not None and acc.offers_source_build
            and (label := acc.build_label_of(g.cc, g.gfx))]
    if not gpus or t.own_builds or not matrix.releases:
        return None
    pinned = (request.torch or "").strip()
    newest = pinned if re.fullmatch(r"\d+\.\d+\.\d+", pinned) else str(matrix.releases[0].version)
    gpu_builds = {a.build_kind for a in kinds.ALL if a.offers_source_build}  # the builds a source build could make instead

    def kind_of(variant: str | None) -> str | None:
        vk = variant_kind(variant) if variant else None
        return vk[0] if vk else None

    if plan.torch_version == newest and kind_of(plan.variant) in gpu_builds:
        return None
    held = [r for r in plan.rejected if r.torch == newest and kind_of(r.variant) in gpu_builds]
    if not held:
        return None
    # a driver upgrade runs the published build, and a build nobody says is absent may exist: neither is a source build
    if any(r.blocker in ("driver", "unknown") for r in held):
        return None
    names = ", ".join(f"{g.name or 'GPU'} ({label})" for g, label in gpus)
    return (f"no published build of torch {newest} runs on {names}; "
            f"`stackdoctor install --from-source --torch {newest}` plans building it for them")
