"""Execute an install plan in the target interpreter, verify it, and never leave it without torch.

Steps (all subprocesses through :class:`~stackdoctor.system.System`):

1. snapshot the target's torch family and runtime packages (``importlib.metadata`` in the
   target, no import of torch);
2. run ``<python> -m pip install ...`` or ``uv pip install --python <python> ...``, streaming
   its output to stderr while capturing it; Ctrl-C / the time-out reach the installer as
   SIGINT (:meth:`System.run_streaming`) so pip can roll back its own uninstall;
3. on failure or interruption, snapshot again: if the torch family changed (pip rolls back
   only the package it was installing), reinstall the recorded versions;
4. on success, import torch in the target and check the version, the variant and the
   accelerator; list the previous variant's runtime packages left behind and remove them
   only when asked.

The pure parts (command lines, ``--emit`` text, leftover rules) are plain functions.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor._worker import worker_path
from stackdoctor.errors import ExitCode
from stackdoctor.matrix import default_index_url

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.plan import Plan
    from stackdoctor.system import CommandResult, System

TORCH_FAMILY = ("torch", "torchvision", "torchaudio")
PYPI_HOSTS = ("pypi.org", "pypi.python.org")
DEFAULT_INSTALL_TIMEOUT_S = 3600.0
SNAP_MARK = "@@stackdoctor-snapshot@@ "
VERIFY_MARK = "@@stackdoctor-verify@@ "


# ---------------------------------------------------------------------------- data


@dataclass
class Snapshot:
    """Installed distributions of the target: canonical name -> (version, requirement names)."""

    versions: dict[str, str] = field(default_factory=dict)
    requires: dict[str, list[str]] = field(default_factory=dict)
    damaged: list[str] = field(default_factory=list)  # half-installed (no RECORD) or installed twice
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def torch_family(self) -> dict[str, str]:
        return {n: self.versions[n] for n in TORCH_FAMILY if n in self.versions}

    def family_damaged(self) -> list[str]:
        return [n for n in self.damaged if n in TORCH_FAMILY]

    def pins(self, names: Iterable[str]) -> list[str]:
        return [f"{n}=={self.versions[n]}" for n in names if n in self.versions]


@dataclass
class Verification:
    imported: bool = False
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cuda_available: bool | None = None
    cuda_ok: bool | None = None
    cuda_error: str | None = None
    device_name: str | None = None
    mps_available: bool | None = None
    xpu_available: bool | None = None
    warnings: list[str] = field(default_factory=list)
    error: str | None = None
    location: str | None = None


@dataclass
class InstallResult:
    ok: bool
    exit_code: int
    message: str  # one sentence for the user
    command: list[str] = field(default_factory=list)
    returncode: int | None = None
    interrupted: bool = False
    timed_out: bool = False
    before: dict[str, str] = field(default_factory=dict)  # torch family before
    after: dict[str, str] = field(default_factory=dict)  # torch family after
    restored: bool | None = None  # None: no restore was needed
    verification: Verification | None = None
    leftovers: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- command lines (pure)


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def is_pypi(url: str | None) -> bool:
    return not url or any(h in url for h in PYPI_HOSTS)


def requirements(plan: Plan) -> list[str]:
    return [p.requirement for p in plan.packages]


def install_command(
    plan: Plan,
    python: str,
    installer: str = "pip",
    *,
    find_links: str | None = None,
    uv: str = "uv",
    source_args: Sequence[str] | None = None,
) -> list[str]:
    """The exact argv that installs ``plan`` into ``python``.

    ``source_args`` (from the index check, :mod:`stackdoctor.availability`) point the installer at the
    sources that answered, on top of the user's configuration. Without them: ``--index-url`` is the
    variant's index (download.pytorch.org mirrors every dependency torch needs, as its own install
    commands assume); PyPI plans (macOS) leave the user's index configuration alone; ``find_links``
    installs from a directory with ``--no-index``.
    """
    reqs = requirements(plan)
    if installer == "uv":
        argv = [uv, "pip", "install", "--python", python, *reqs]
    else:
        argv = [python, "-m", "pip", "install", *reqs]
    if source_args is not None:
        argv += list(source_args)
    elif find_links:
        argv += ["--no-index", "--find-links", find_links]
    elif not is_pypi(plan.index_url):
        argv += ["--index-url", str(plan.index_url)]
    return argv


def uninstall_command(names: Sequence[str], python: str, installer: str = "pip", *, uv: str = "uv") -> list[str]:
    if installer == "uv":
        return [uv, "pip", "uninstall", "--python", python, *names]
    return [python, "-m", "pip", "uninstall", "-y", *names]


def emit_requirements(plan: Plan, *, find_links: str | None = None) -> str:
    """requirements.txt lines that keep this choice on the next ``pip install -r``.

    ``--extra-index-url`` (not ``--index-url``) so the file's other requirements still come from
    the user's index; the local label (``+cu130``) pins the variant, which PyPI does not carry.
    """
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor"]
    if find_links:
        lines.append(f"--find-links {find_links}")
    elif not is_pypi(plan.index_url):
        lines.append(f"--extra-index-url {plan.index_url}")
    lines += requirements(plan)
    return "\n".join(lines) + "\n"


def emit_uv(plan: Plan) -> str:
    """pyproject.toml fragments: ``[tool.uv.sources]`` + an explicit ``[[tool.uv.index]]``."""
    deps = ", ".join(f'"{p.name}=={p.version}"' for p in plan.packages)
    lines = [f"# torch {plan.torch_version} ({plan.variant}) chosen by stackdoctor", f"# [project] dependencies: {deps}"]
    if is_pypi(plan.index_url):
        lines.append("# these come from PyPI: no [tool.uv.sources] entry is needed")
        return "\n".join(lines) + "\n"
    name = f"pytorch-{plan.variant}"
    lines += ["", "[tool.uv.sources]"]
    lines += [f'{p.name} = [{{ index = "{name}" }}]' for p in plan.packages]
    lines += ["", "[[tool.uv.index]]", f'name = "{name}"', f'url = "{plan.index_url}"', "explicit = true"]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- leftovers (pure)


def runtime_family(name: str) -> str | None:
    """Which accelerator runtime a distribution belongs to (``None``: not a runtime package).

    Real names: CUDA 12 wheels end in ``-cu12`` (``nvidia-cuda-runtime-cu12``); CUDA 13 ones drop
    the suffix (``nvidia-cuda-runtime``, ``nvidia-cublas``) or end in ``-cu13`` (``nvidia-cudnn-cu13``),
    plus ``cuda-toolkit``; ROCm: ``rocm``, ``rocm-sdk-*``, ``pytorch-triton-rocm``; XPU: ``intel-sycl-rt``,
    ``onemkl-sycl-*``, ``pytorch-triton-xpu``. ``nvidia-ml-py`` (NVML bindings) is not a runtime.
    """
    n = canonical_name(name)
    if n.startswith("nvidia-ml-py") or n == "pynvml":
        return None
    if n.startswith("nvidia-"):
        return "cuda12" if n.endswith("-cu12") else "cuda13"
    if n in ("cuda-toolkit",):
        return "cuda13"
    if n in ("triton",):
        return "cuda"
    if n == "rocm" or n.startswith("rocm-sdk") or n in ("pytorch-triton-rocm", "triton-rocm"):
        return "rocm"
    if n in ("intel-sycl-rt", "intel-pti", "pytorch-triton-xpu", "triton-xpu", "pyzes") or n.startswith("onemkl-sycl"):
        return "xpu"
    return None


def families_needed(variant: str | None) -> set[str] | None:
    """Runtime families a variant uses; ``None`` when unknown (then nothing is called a leftover)."""
    if variant is None:
        return None
    m = re.fullmatch(r"cu(\d+)", variant)
    if m:
        major = int(m.group(1)[:2]) if len(m.group(1)) >= 3 else int(m.group(1)[:1])
        return {"cuda", "cuda12"} if major == 12 else {"cuda", "cuda13"} if major >= 13 else {"cuda"}
    if variant.startswith("rocm"):
        return {"rocm"}
    if variant == "xpu":
        return {"xpu"}
    if variant == "cpu":
        return set()
    return None


def predict_leftovers(installed: Mapping[str, str], variant: str | None) -> list[str]:
    """Before installing: runtime packages of another variant that the new one will not use."""
    need = families_needed(variant)
    if need is None:
        return []
    out = []
    for name in installed:
        fam = runtime_family(name)
        if fam is not None and fam not in need:
            out.append(canonical_name(name))
    return sorted(set(out))


def closure(snap: Snapshot, roots: Iterable[str]) -> set[str]:
    """Installed distributions reachable from ``roots`` through their requirements (markers ignored: over-inclusive)."""
    seen: set[str] = set()
    todo = [canonical_name(r) for r in roots]
    while todo:
        n = todo.pop()
        if n in seen or n not in snap.versions:
            continue
        seen.add(n)
        todo.extend(snap.requires.get(n, []))
    return seen


def exact_leftovers(before: Snapshot, after: Snapshot) -> list[str]:
    """After installing: runtime packages the old torch pulled in that nothing installed now needs."""
    old = closure(before, TORCH_FAMILY)
    new = closure(after, TORCH_FAMILY)
    others = [n for n in after.versions if n not in new and runtime_family(n) is None and n not in old]
    needed_by_others = closure(after, others) - set(others)
    return sorted(
        n for n in old if n in after.versions and n not in new and n not in needed_by_others and runtime_family(n) is not None
    )


# ---------------------------------------------------------------------------- the target


def _marked(stdout: str, mark: str) -> dict | None:
    for line in reversed(stdout.splitlines()):
        idx = line.find(mark)
        if idx >= 0:
            try:
                data = json.loads(line[idx + len(mark) :])
            except ValueError:
                return None
            return data if isinstance(data, dict) else None
    return None


def snapshot(system: System, python: str, *, timeout: float = 60.0) -> Snapshot:
    res = system.run([python, "-I", str(worker_path("sd_snapshot.py"))], timeout=timeout, record=False)
    data = _marked(res.stdout, SNAP_MARK) if res.ok else None
    if data is None:
        return Snapshot(error=res.describe_failure() or "the target printed no package list")
    damaged = data.pop("@damaged", [])
    snap = Snapshot(damaged=[d for d in damaged if isinstance(d, str)] if isinstance(damaged, list) else [])
    for name, info in data.items():
        if isinstance(info, dict) and isinstance(info.get("version"), str):
            snap.versions[name] = info["version"]
            snap.requires[name] = [r for r in info.get("requires") or [] if isinstance(r, str)]
    return snap


def verify(system: System, python: str, *, timeout: float = 300.0) -> Verification:
    res = system.run([python, "-I", str(worker_path("sd_verify.py"))], timeout=timeout, record=False)
    data = _marked(res.stdout, VERIFY_MARK)
    if data is None:
        why = res.describe_failure() or "it printed nothing"
        tail = (res.stderr.strip().splitlines() or [""])[-1][:300]
        return Verification(error=f"importing torch in the target failed: {why}" + (f" ({tail})" if tail and tail not in why else ""))
    v = Verification(
        imported=bool(data.get("imported")),
        version=data.get("version"),
        cuda=data.get("cuda"),
        hip=data.get("hip"),
        cuda_available=data.get("cuda_available"),
        cuda_ok=data.get("cuda_ok"),
        cuda_error=data.get("cuda_error"),
        device_name=data.get("device_name"),
        mps_available=data.get("mps_available"),
        xpu_available=data.get("xpu_available"),
        warnings=[w for w in data.get("warnings") or [] if isinstance(w, str)],
        error=data.get("error"),
        location=data.get("file"),
    )
    return v


def expected_version(plan: Plan) -> str | None:
    for p in plan.packages:
        if p.name == "torch":
            return p.requirement.split("==", 1)[1]
    return None


def judge(plan: Plan, v: Verification, accelerator: str | None) -> tuple[bool, str]:
    """(ok, sentence): did the install give the planned torch, and can it use the accelerator seen?

    ``accelerator`` is what the machine's facts show: "cuda" | "rocm" | "xpu" | "mps" | None.
    """
    if not v.imported:
        return False, f"torch does not import in the target: {v.error or 'unknown error'}"
    want = expected_version(plan)
    if want and v.version != want:
        from packaging.version import InvalidVersion, Version

        try:
            same = Version(v.version or "") == Version(want)
        except InvalidVersion:
            same = False
        if not same:
            return False, f"the target imports torch {v.version}, not the planned {want} (another torch shadows it? {v.location})"
    got = f"torch {v.version} imports in the target"
    variant = plan.variant or ""
    gpu_variant = variant.startswith(("cu", "rocm", "jetson")) or variant == "xpu"
    if accelerator in ("cuda", "rocm") and gpu_variant and variant != "xpu":
        if v.cuda_available and v.cuda_ok is not False:
            return True, f"{got} and runs on {v.device_name or 'the GPU'}"
        why = v.cuda_error or (v.warnings[0] if v.warnings else "torch.cuda.is_available() is False")
        return False, f"{got}, but the GPU is not usable from it: {why}; run `stackdoctor check`"
    if accelerator == "xpu" and variant == "xpu":
        return (True, f"{got} and sees the Intel GPU") if v.xpu_available else (False, f"{got}, but torch.xpu.is_available() is False; run `stackdoctor check`")
    if accelerator == "mps":
        return (True, f"{got} and MPS is available") if v.mps_available else (False, f"{got}, but MPS is not available; run `stackdoctor check`")
    if gpu_variant:
        return True, f"{got} (no matching GPU on this machine, so the accelerator was not tried)"
    return True, got


# ---------------------------------------------------------------------------- execution


def _variant_of(version: str) -> str | None:
    return version.partition("+")[2] or None


def restore_commands(
    before: Snapshot, python: str, installer: str, index_base: str, *, find_links: str | None = None, uv: str = "uv"
) -> list[list[str]]:
    """Reinstall the recorded torch family from its own variant's index: first its files, over
    whatever a failed install left (``--force-reinstall --no-deps``), then its dependencies."""
    pins = before.pins(TORCH_FAMILY)
    if not pins:
        return []
    where: list[str] = []
    old = _variant_of(before.versions.get("torch", ""))
    if find_links:
        where += ["--find-links", find_links]
    if old:
        where += ["--index-url", f"{index_base.rstrip('/')}/{old}"]
    if installer == "uv":
        base = [uv, "pip", "install", "--python", python]
        return [[*base, "--reinstall", "--no-deps", *pins, *where], [*base, *pins, *where]]
    base = [python, "-m", "pip", "install"]
    return [[*base, "--force-reinstall", "--no-deps", *pins, *where], [*base, *pins, *where]]


def execute(
    plan: Plan,
    *,
    system: System,
    python: str,
    installer: str = "pip",
    index_base: str | None = None,
    find_links: str | None = None,
    timeout_s: float = DEFAULT_INSTALL_TIMEOUT_S,
    remove_leftovers: bool = False,
    accelerator: str | None = None,
    say: Callable[[str], None] | None = None,
    stream: Callable[[str], None] | None = None,
    uv: str = "uv",
    grace_s: float = 30.0,
    source_args: Sequence[str] | None = None,
    env: Mapping[str, str | None] | None = None,
) -> InstallResult:
    """Install ``plan`` into ``python``; on failure leave (or put back) the previous torch.

    ``source_args`` / ``env``: where the installer takes the packages from (the index check's
    :class:`~stackdoctor.availability.Delivery`); without them the plan's own index is used.
    ``index_base`` is where the previous torch is put back from (``<index_base>/<its variant>``); None: the
    matrix's ``pytorch`` index."""
    index_base = index_base or default_index_url()
    say = say or (lambda line: print(line, file=sys.stderr))
    stream = stream or _stderr_writer
    argv = install_command(plan, python, installer, find_links=find_links, uv=uv, source_args=source_args)
    before = snapshot(system, python)
    if not before.ok:
        return InstallResult(False, ExitCode.USAGE, f"cannot read the target's installed packages ({before.error}); nothing was changed.", argv)
    prev = before.torch_family()
    res = system.run_streaming(argv, timeout=timeout_s, on_stdout=stream, on_stderr=stream, grace_s=grace_s, env=env)
    result = InstallResult(False, ExitCode.FAILED, "", argv, res.returncode, before=prev)
    result.interrupted = res.status == "interrupted"
    result.timed_out = res.status == "timeout"
    if res.ok and not result.interrupted:
        after = snapshot(system, python)
        v = verify(system, python)
        result.verification = v
        result.after = after.torch_family()
        ok, sentence = judge(plan, v, accelerator)
        if not v.imported and prev:
            # the new torch does not even import: put the previous one back
            say(f"stackdoctor: {sentence}; reinstalling the previous {_fmt(prev)}.")
            _restore(system, python, installer, index_base, find_links, before, result, stream, uv)
            result.exit_code = ExitCode.FAILED
            result.message = sentence + "; " + _restore_sentence(result, prev)
            return result
        result.ok = ok
        result.exit_code = ExitCode.OK if ok else ExitCode.FAILED
        result.message = sentence + "."
        if after.ok:
            result.leftovers = exact_leftovers(before, after)
        if result.leftovers and remove_leftovers:
            rm = system.run_streaming(
                uninstall_command(result.leftovers, python, installer, uv=uv), timeout=600, on_stdout=stream, on_stderr=stream
            )
            if rm.ok:
                result.removed = list(result.leftovers)
                result.leftovers = []
            else:
                result.notes.append(f"removing the leftovers failed: {rm.describe_failure()}")
        return result
    # failed, interrupted or timed out
    how = (
        "the install was interrupted"
        if result.interrupted
        else f"the install did not finish in {timeout_s:g} s"
        if result.timed_out
        else f"the install failed ({failure_line(res)})"
    )
    result.exit_code = 130 if result.interrupted else ExitCode.FAILED
    after = snapshot(system, python)
    result.after = after.torch_family() if after.ok else {}
    if after.ok and result.after == prev and not after.family_damaged():
        restored = verify(system, python) if prev else None
        result.verification = restored
        if not prev:
            result.message = f"{how}; the target had no torch before and has none now."
        elif restored and restored.imported:
            result.message = f"{how}; nothing changed: the previous torch {restored.version} still imports."
        else:
            result.message = f"{how}; the torch packages are as before ({_fmt(prev)}), but torch does not import: {restored.error if restored else '?'}."
        return result
    if not prev:
        result.message = f"{how}; the target had no torch before, and now has {_fmt(result.after) or 'partial packages'}."
        return result
    damaged = after.family_damaged() if after.ok else []
    state = _fmt(result.after) or "nothing importable"
    if damaged:
        state += f" (half-installed: {', '.join(damaged)})"
    say(f"stackdoctor: {how}; it left {state} instead of {_fmt(prev)}: reinstalling the previous versions.")
    _restore(system, python, installer, index_base, find_links, before, result, stream, uv)
    result.message = f"{how}; " + _restore_sentence(result, prev)
    return result


def failure_line(res: CommandResult) -> str:
    """The installer's own error line (pip ``ERROR: ...``, uv ``error: ...`` / ``×``), else how it ended.

    Its length must not decide what survives: pip names paths before it says why ("... has a file '<path>'
    trying to install outside the target directory '<path>'"), and a path is as long as the user's folders.
    So a long quoted path keeps its last three parts, then a line still over 300 characters keeps its start
    and its end."""
    for line in (res.stderr + "\n" + res.stdout).splitlines():
        s = line.strip()
        if s.startswith(("ERROR:", "error:", "×")):
            s = re.sub(r"(['\"])(/[^'\"]{60,})\1", lambda m: f"{m.group(1)}…/{'/'.join(m.group(2).rsplit('/', 3)[-3:])}{m.group(1)}", s)
            return s if len(s) <= 300 else f"{s[:150]} … {s[-147:]}"
    return res.describe_failure() or res.detail or "unknown failure"


def _restore(
    system: System,
    python: str,
    installer: str,
    index_base: str,
    find_links: str | None,
    before: Snapshot,
    result: InstallResult,
    stream: Callable[[str], None],
    uv: str,
) -> None:
    cmds = restore_commands(before, python, installer, index_base, find_links=find_links, uv=uv)
    if not cmds:
        result.restored = False
        return
    repair = system.run([python, "-I", str(worker_path("sd_repair.py")), json.dumps(list(TORCH_FAMILY))], timeout=120, record=False)
    if not repair.ok:
        result.notes.append(f"could not clear half-installed packages: {repair.describe_failure()}")
    ok = True
    for cmd in cmds:
        res = system.run_streaming(cmd, timeout=DEFAULT_INSTALL_TIMEOUT_S, on_stdout=stream, on_stderr=stream)
        if not res.ok:
            ok = False
            result.notes.append(f"restore step failed ({failure_line(res)}): {' '.join(cmd)}")
            break
    after = snapshot(system, python)
    v = verify(system, python)
    result.verification = v
    result.after = after.torch_family() if after.ok else {}
    result.restored = ok and result.after == before.torch_family() and not after.family_damaged() and v.imported


def _restore_sentence(result: InstallResult, prev: Mapping[str, str]) -> str:
    if result.restored:
        return f"the previous {_fmt(prev)} was reinstalled and imports."
    return (
        f"putting back the previous {_fmt(prev)} did not work (now: {_fmt(result.after) or 'none'}); "
        f"reinstall it with: pip install {' '.join(f'{k}=={v}' for k, v in prev.items())}."
    )


def _fmt(family: Mapping[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in family.items())


def _stderr_writer(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
