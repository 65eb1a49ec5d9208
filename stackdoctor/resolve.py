"""The resolver: facts + compat matrix + request -> install plan. Pure: no I/O, no environment.

Rules (issue 3):

- Unpinned means the newest release that can use this machine's accelerator; a GPU build of an older
  release beats a CPU build of the newest (the plan says so).
- A variant fits when it is published for the target's platform (OS, arch, glibc / macOS floor) and
  Python; the NVIDIA driver meets its CUDA toolkit minimum (only the major's minor-version-compatibility
  floor met: still eligible, with a warning naming the driver to upgrade to; under WSL2 and on Windows
  the Windows column); EVERY GPU runs its arch list (:func:`stackdoctor.matrix.arch_runs`); an AMD GPU's
  gfx is in its list or a known ``HSA_OVERRIDE_GFX_VERSION`` applies (then ``env`` carries it).
- Among fitting variants of a release: the newest CUDA / ROCm. Intel GPU -> xpu; macOS arm64 -> the
  default PyPI build (MPS); Jetson -> its own wheel source; nothing usable -> cpu, saying why and what
  would make a GPU build possible. Nothing at all -> ``Plan(variant=None)`` with suggestions.
- Mixed GPUs: a variant that runs on all, else the plan names the GPU left out and how to hide it.
- Every rejected variant carries its reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from stackdoctor import accelerators
from stackdoctor.facts import Facts
from stackdoctor.install.leftovers import predict_leftovers
from stackdoctor.matrix import (
    Matrix,
    Release,
    Variant,
    arch_match,
    driver_meets,
    parse_platform,
    variant_kind,
)
from stackdoctor.plan import Plan, PlanError, PlannedPackage, Rejected, Request
from stackdoctor.versions import major_minor
from stackdoctor.versions import release as release_tuple

__all__ = ["resolve", "Target", "Gpu", "target_from"]


# ---------------------------------------------------------------------------- the machine, as the resolver sees it


@dataclass
class Gpu:
    vendor: str  # "nvidia" | "amd" | "intel"
    index: int
    name: str | None
    cc: str | None = None  # NVIDIA "8.9"
    gfx: str | None = None  # AMD "gfx1100"
    integrated: bool = False
    uuid: str | None = None

    def label(self) -> str:
        """``GPU 0 NVIDIA GeForce RTX 4090``; without a name only ``GPU 0`` (its sm_/gfx follows where it matters)."""
        return f"GPU {self.index} {self.name}" if self.name else f"GPU {self.index}"


@dataclass
class Target:
    os: str  # "linux" | "windows" | "macos" | "unknown"
    arch: str  # "x86_64" | "aarch64" | "amd64" | "arm64"
    glibc: tuple[int, int] | None = None
    macos: tuple[int, int] | None = None
    python: str | None = None  # "3.12" / "3.13t"
    windows_driver: bool = False  # compare the driver with the Windows column (Windows or WSL2)
    wsl: bool = False
    driver: str | None = None
    driver_cuda: str | None = None  # the newest CUDA the driver runs, when its version is unknown ("10.2" from torch's message)
    driver_runs_cuda: str | None = None  # a CUDA build that initialised on this driver (torch's), when nothing else is known
    gpus: list[Gpu] = field(default_factory=list)
    jetson: bool = False
    l4t: str | None = None
    jetpack: str | None = None
    musl: bool = False
    nvidia_unlisted: int = 0  # NVIDIA GPUs on the PCI bus that no working driver lists
    notes: list[str] = field(default_factory=list)  # facts the resolver could not check

    @property
    def tag(self) -> str:
        if self.os == "windows":
            return f"win_{self.arch}"
        if self.os == "macos":
            v = self.macos or (11, 0)
            return f"macosx_{v[0]}_{v[1]}_{self.arch}"
        if self.glibc:
            return f"manylinux_{self.glibc[0]}_{self.glibc[1]}_{self.arch}"
        return f"linux_{self.arch}"

    def nvidia(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "nvidia"]

    def amd(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "amd"]

    def intel(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "intel"]


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64"}


def _norm_arch(os_: str, machine: str | None) -> str:
    m = (machine or "").strip().lower()
    if os_ == "windows":
        return {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(m, m or "amd64")
    if os_ == "macos":
        return {"arm64": "arm64", "aarch64": "arm64", "x86_64": "x86_64"}.get(m, m)
    return _ARCH_ALIASES.get(m, m)


def _parse_gpu_request(text: str, matrix: Matrix) -> str | None:
    t = text.strip()
    m = re.match(r"^sm_?(\d+)(\d)$", t, re.I) or re.match(r"^(\d{1,2})\.(\d)$", t)
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    return matrix.gpu_compute_capability(t)


_INTEL_XPU_RE = re.compile(
    r"\b(arc|data center gpu|max \d{4}|flex|battlemage|alchemist|core ultra|meteor lake|arrow lake|lunar lake|panther lake|dg2|bmg)\b", re.I
)


def _reconciled(facts: Facts) -> Facts:
    """``facts`` as the pipeline hands them: reconciled (every witness weighed, derived values derived once)."""
    if not facts.reconciled.done:
        raise ValueError("resolve needs reconciled facts: pass them through stackdoctor.reconcile.reconcile first")
    return facts


def target_from(facts: Facts, matrix: Matrix, request: Request) -> Target:
    """The target of a resolution: this machine's facts (their reconciled view: every witness of the GPUs
    and the driver) with the request's what-if overrides applied."""
    facts = _reconciled(facts)
    p = facts.platform
    tag = request.platform or facts.python.platform_tag
    os_, arch, floor = ("unknown", "", None)
    if tag:
        os_, arch, floor = parse_platform(tag)
    if os_ in ("unknown", "musllinux") or not tag:
        sysname = (p.system or "").lower()
        fos = {"linux": "linux", "darwin": "macos", "windows": "windows"}.get(sysname, "unknown")
        if os_ == "musllinux":
            fos = "linux"
        machine: str | None
        if fos == "macos" and facts.apple.rosetta is False and facts.apple.arch:
            machine = facts.apple.arch
        else:
            machine = p.machine
        os_, arch = fos, _norm_arch(fos, machine if not arch else arch)
        floor = None
    else:
        arch = _norm_arch(os_, arch)
    t = Target(os=os_, arch=arch)
    t.musl = (tag or "").startswith("musllinux") or p.libc == "musl"
    if os_ == "linux":
        t.glibc = floor if floor else (major_minor(p.glibc_version) if not request.platform else None)
    if os_ == "macos":
        t.macos = floor if (floor and request.platform) else (major_minor(facts.apple.macos_version) or floor)
    # python
    if request.python_version:
        pv = request.python_version.strip().lower().removeprefix("cp").removeprefix("python")
        ft = pv.endswith("t")
        parts = pv.rstrip("t").split(".")
        if len(parts) == 1 and len(parts[0]) >= 2 and parts[0].isdigit():  # "312" / "cp313t"
            parts = [parts[0][0], parts[0][1:]]
        t.python = ".".join(parts[:2]) + ("t" if ft else "")
    elif facts.python.version:
        mm = ".".join(facts.python.version.split(".")[:2])
        t.python = mm + ("t" if facts.python.free_threaded else "")
    t.wsl = bool(p.is_wsl) and os_ == "linux" and not request.platform
    t.windows_driver = os_ == "windows" or t.wsl
    # GPUs: what-if overrides replace the probed ones
    if request.gpus or request.gfx or request.devices:
        for kind, names in request.devices.items():  # a kind's what-if flag (--npu 910B): its devices, named
            acc = accelerators.by_name(kind)
            if acc is not None:
                t.gpus.extend(Gpu(acc.vendor, i, n.strip()) for i, n in enumerate(names))
        for i, g in enumerate(request.gpus):
            cc = _parse_gpu_request(g, matrix)
            t.gpus.append(Gpu("nvidia", i, g if not re.match(r"^(sm_?\d+|\d+\.\d)$", g.strip(), re.I) else None, cc=cc))
            if cc is None:
                t.notes.append(f"--gpu {g}: unknown GPU name, its compute capability is not in the matrix")
        for i, g in enumerate(request.gfx):
            t.gpus.append(Gpu("amd", i, None, gfx=g.strip().lower()))
    else:
        # every witness joined (stackdoctor.reconcile): the tools, the kernel module, the PCI bus, torch
        view = facts.reconciled.gpus
        listed = [v for v in view if v.vendor == "nvidia" and v.witnesses != ["pci"]]
        for v in listed:
            t.gpus.append(Gpu("nvidia", v.index, v.name, cc=v.compute_capability, uuid=v.uuid))  # derived once, in reconcile
        unlisted = [v for v in view if v.vendor == "nvidia" and v.witnesses == ["pci"]]
        if not listed and unlisted and not facts.jetson.is_jetson:
            t.nvidia_unlisted = len(unlisted)
            t.notes.append(
                f"{len(unlisted)} NVIDIA GPU(s) on the PCI bus but the driver did not list them"
                + (f" (nvidia-smi: {facts.nvidia.smi_state})" if facts.nvidia.smi_state else "")
            )
        for v in view:
            if v.vendor == "amd" and v.witnesses != ["pci"]:
                t.gpus.append(Gpu("amd", v.index, v.name, gfx=(v.gfx or "").split(":", 1)[0].lower() or None, integrated=v.integrated, uuid=v.uuid))
        for i, iv in enumerate(v for v in view if v.vendor == "intel"):
            t.gpus.append(Gpu("intel", i, iv.name, integrated=iv.integrated))
        for acc in accelerators.ALL:
            if acc not in accelerators.BUILTIN:  # a plug-in kind: its GPUs as the reconciled view lists them
                t.gpus.extend(Gpu(acc.vendor, v.index, v.name, integrated=v.integrated, uuid=v.uuid) for v in acc.devices(facts))
    drv = facts.reconciled.nvidia_driver
    t.driver = request.driver or drv.value
    if not request.driver and drv.value and drv.source and drv.source.startswith(("/proc", "/sys")):
        t.notes.append(f"NVIDIA driver {drv.value}: the loaded kernel module's version ({drv.source}); no user-space tool reported one")
    if not t.driver:
        t.driver_cuda = facts.reconciled.cuda_driver_version.value
        tf = facts.torch
        if tf.cuda_available and tf.cuda and not tf.hip:
            t.driver_runs_cuda = tf.cuda
    # a what-if platform keeps the Jetson path only where a Jetson's wheels run: Linux aarch64
    t.jetson = facts.jetson.is_jetson and (not request.platform or (os_ == "linux" and arch == "aarch64"))
    t.l4t = facts.jetson.l4t_release
    t.jetpack = facts.jetson.jetpack
    return t


# ---------------------------------------------------------------------------- fitting


@dataclass
class _Fit:
    release: Release
    version: Version
    variant: Variant
    warnings: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


class _Reject(Exception):
    def __init__(self, reason: str, *, driver_needed: str | None = None, platform_blocked: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.driver_needed = driver_needed
        self.platform_blocked = platform_blocked


def _platform_tag_for(release: Release, variant: Variant, t: Target) -> str:
    """The variant's platform tag that fits the target; raises _Reject saying why none does."""
    blocked: list[str] = []
    for tag in variant.platforms:
        os_, arch, floor = parse_platform(tag)
        if os_ != t.os or _norm_arch(os_, arch) != t.arch:
            continue
        if os_ == "linux":
            if t.musl:
                blocked.append(f"{variant.name} has glibc (manylinux) wheels only; this system uses musl")
                continue
            need = floor or major_minor(release.manylinux_glibc)
            if need and t.glibc and t.glibc < need:
                blocked.append(f"{variant.name} wheels need glibc >= {need[0]}.{need[1]}; this system has {t.glibc[0]}.{t.glibc[1]}")
                continue
        if os_ == "macos":
            need = floor
            if need and t.macos and t.macos < need:
                blocked.append(f"{variant.name} wheels need macOS >= {need[0]}.{need[1]}; this Mac runs {t.macos[0]}.{t.macos[1]}")
                continue
        return tag
    if blocked:
        raise _Reject(blocked[0], platform_blocked=True)
    where = {"linux": f"Linux {t.arch}", "windows": f"Windows {t.arch}", "macos": f"macOS {t.arch}"}.get(t.os, t.tag)
    raise _Reject(f"{variant.name} is not published for {where}", platform_blocked=True)


def _python_fits(release: Release, variant: Variant, t: Target, packages: list[str]) -> None:
    if not t.python:
        return
    if t.python not in variant.pythons:
        known = ", ".join(variant.pythons) or "none known"
        raise _Reject(f"{variant.name} has no wheels for Python {t.python} (it has {known})", platform_blocked=True)
    if not release.python_on(t.python, t.os, t.arch):
        where = ", ".join(_platform_words(tag) for tag in release.python_platforms.get(t.python, ()))
        raise _Reject(
            f"{variant.name} has no wheels for Python {t.python} on {_OS_WORDS.get(t.os, t.os)} {t.arch} "
            f"(torch {release.version} has them only for {where})",
            platform_blocked=True,
        )
    if t.python in release.torch_only_pythons and any(p != "torch" for p in packages):
        others = ", ".join(p for p in packages if p != "torch")
        raise _Reject(f"Python {t.python} has torch wheels only in torch {release.version} (no {others})", platform_blocked=True)


_OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


def _platform_words(tag: str) -> str:
    """``manylinux_2_28_aarch64`` -> ``Linux aarch64``."""
    os_, arch, _ = parse_platform(tag)
    return f"{_OS_WORDS.get(os_, os_)} {arch}"


def _describe_arch(archs: tuple[str, ...], cc: str) -> str:
    sms = [a for a in archs if a.startswith("sm_")]
    ptx = [a for a in archs if a.startswith("compute_")]
    if not sms:
        return "no CUDA kernels known"

    def num(a: str) -> int:
        return int(re.sub(r"\D", "", a.split("_", 1)[1]) or 0)

    lo = min(sms, key=num)
    dev = int(cc.replace(".", ""))
    if dev < num(lo):
        return f"builds {lo} and newer"
    return f"builds {', '.join(sms)}" + (f" (+PTX {', '.join(ptx)})" if ptx else " without PTX")


def _arch_list_for(release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix, fit: _Fit) -> tuple[str, ...]:
    """The CUDA arch list that judges the GPUs for the wheel of ``tag``: the build's own list for that platform;
    where it is unknown, the same build's Linux x86_64 list for a platform of the same CPU architecture (Windows),
    else the nearest release's own list for that platform (marked inferred). Another CPU architecture's list never
    stands in (an aarch64 wheel carries fewer architectures than the x86_64 one); none known: the build is refused."""
    if variant.arch_known_for(tag):
        return variant.arch_for(tag)
    other = variant.arch_fallback(tag)
    if other is not None:
        fit.warnings.append(
            f"matrix: the CUDA arch list of torch {release.version} {variant.name} for {_platform_words(tag)} is unknown; "
            f"its {other[0]} list (same release, CUDA {variant.cuda}) stands in to judge the GPUs: {', '.join(other[1])}"
        )
        return other[1]
    same_arch = tag.endswith(("x86_64", "amd64"))
    near = None if same_arch else matrix.platform_arch_list(version, variant.name, tag)
    if near is None:
        if same_arch:
            raise _Reject(f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix")
        raise _Reject(
            f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix (another CPU architecture's list does not stand in for it)"
        )
    fit.warnings.append(
        f"matrix: the CUDA arch list of torch {version} {variant.name} for {_platform_words(tag)} is unknown; inferred from "
        f"torch {near[0]} {variant.name} for {_platform_words(tag)} (the nearest release with that list): {', '.join(near[1])}; "
        "read from the installed binaries after installing"
    )
    return near[1]


def _unfit_gpus(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> str | None:
    """Why a GPU build must not serve as a CPU build here: it sees an NVIDIA GPU it has no kernels for (torch.cuda
    reports the GPU, then every kernel on it fails); None when no such GPU is here."""
    nv = [g for g in gpus if g.vendor == "nvidia" and g.cc]
    if not nv or variant.kind != "cuda":
        return None
    tag = _platform_tag_for(release, variant, t)
    try:
        archs = _arch_list_for(release, version, variant, tag, matrix, _Fit(release, version, variant))
    except _Reject:
        return f"has no known CUDA arch list for {_platform_words(tag)}, so it cannot be shown to run on {_gpu_summary(nv)}"
    bad = [g for g in nv if arch_match(archs, g.cc or "") is None]
    if not bad:
        return None
    return (
        f"has no kernels for {_gpu_summary(bad)}; it {_describe_arch(archs, bad[0].cc or '')}, and torch.cuda would see the GPU and fail on it, "
        "so it is no CPU build here"
    )


def _fit(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> _Fit:
    """Check one variant against the target; raises _Reject with the reason."""
    tag = _platform_tag_for(release, variant, t)
    _python_fits(release, variant, t, request.packages)
    fit = _Fit(release, version, variant)
    if variant.kind == "cuda":
        row = matrix.cuda_row(variant.cuda)
        if row is None:
            raise _Reject(f"{variant.name}: the matrix has no driver data for CUDA {variant.cuda}")
        nv = [g for g in gpus if g.vendor == "nvidia"]
        if not t.driver and (t.driver_cuda or t.driver_runs_cuda):
            verdict, known = _meets_unknown_driver(row, variant, t, matrix)
            if verdict is None or verdict == "no":
                raise _Reject(
                    f"{variant.name}: the NVIDIA driver version is unknown, and {known}"
                    + (f", not CUDA {variant.cuda}" if verdict == "no" else f"; that does not show it runs CUDA {variant.cuda}")
                )
            meets = verdict
            fit.warnings.append(f"the NVIDIA driver version is unknown; {known}, so {variant.name} runs" + (" (through CUDA minor-version compatibility)" if meets == "minor-compat" else ""))
        elif not t.driver:
            if nv or request.variant == "auto":
                raise _Reject(f"{variant.name}: the NVIDIA driver version is unknown")
            fit.warnings.append(f"no NVIDIA driver on this machine: cannot check that the target's driver meets CUDA {variant.cuda}")
            meets = "full"
        else:
            meets = driver_meets(row, t.driver, windows=t.windows_driver)
            col = "Windows" if t.windows_driver else "Linux"
            minimum = (row.min_driver_windows if t.windows_driver else row.min_driver_linux)
            floor = (row.minor_compat_floor_windows if t.windows_driver else row.minor_compat_floor_linux)
            target_driver = minimum or floor
            if meets == "no":
                wsl = " (the Windows driver, as seen from WSL2)" if t.wsl else ""
                raise _Reject(
                    f"{variant.name}: driver {t.driver}{wsl} is older than CUDA {variant.cuda} needs ({col}: >= {target_driver}"
                    + (f"; minor-version-compatibility floor {floor}" if floor and minimum and floor != minimum else "")
                    + ")",
                    driver_needed=target_driver,
                )
            if meets == "minor-compat":
                fit.warnings.append(
                    f"driver {t.driver} is below CUDA {variant.cuda}'s toolkit minimum ({col}: {minimum}) but meets the "
                    f"CUDA {(variant.cuda or '?').split('.')[0]}.x minor-version-compatibility floor ({floor}): {variant.name} runs, "
                    f"but PTX JIT and features that need a newer driver can fail; upgrade the driver to >= {minimum}"
                )
        archs = _arch_list_for(release, version, variant, tag, matrix, fit) if nv else variant.arch_for(tag)
        for g in nv:
            if g.cc is None:
                fit.warnings.append(f"{g.label()}: compute capability unknown; could not check that {variant.name} has kernels for it")
                continue
            how = arch_match(archs, g.cc)
            sm = "sm_" + g.cc.replace(".", "")
            if how is None:
                raise _Reject(f"{variant.name}: {g.label()} is {sm}; {variant.name} {_describe_arch(archs, g.cc)}")
            if how == "ptx":
                if meets != "full":
                    raise _Reject(
                        f"{variant.name}: {g.label()} ({sm}) would need PTX JIT, which needs the driver to meet CUDA {variant.cuda}'s toolkit minimum"
                    )
                fit.warnings.append(f"{g.label()} ({sm}) has no native kernels in {variant.name}; it runs by PTX JIT (slow first start)")
        if variant.unknown:
            fit.warnings.append(f"matrix: {variant.name} of torch {release.version} has unverified facts: {'; '.join(variant.unknown)}")
    elif variant.kind == "rocm":
        amd = [g for g in gpus if g.vendor == "amd"]
        if amd and not variant.gfx:
            raise _Reject(f"{variant.name}: its gfx list is unknown to the matrix")
        overrides: dict[str, str] = {}
        native: list[Gpu] = []
        for g in amd:
            if not g.gfx:
                fit.warnings.append(f"{g.label()}: gfx target unknown; could not check {variant.name}")
                continue
            if g.gfx in variant.gfx:
                native.append(g)
                continue
            ov = matrix.rocm_override(g.gfx)
            if ov is not None and ov.as_gfx in variant.gfx:
                overrides[g.gfx] = ov.value
                continue
            raise _Reject(f"{variant.name}: {g.label()} is {g.gfx}; {variant.name} builds {', '.join(variant.gfx)} and no known override applies")
        values = set(overrides.values())
        if len(values) > 1:
            raise _Reject(f"{variant.name}: the GPUs need different HSA_OVERRIDE_GFX_VERSION values ({', '.join(sorted(values))}); it applies to the whole process")
        if values:
            value = values.pop()
            as_gfx = {matrix.rocm_override(k).as_gfx for k in overrides}  # type: ignore[union-attr]
            clash = [g for g in native if g.gfx not in as_gfx]
            if clash:
                raise _Reject(
                    f"{variant.name}: {', '.join(f'{g.label()} ({g.gfx})' for g in [g for g in amd if g.gfx in overrides])} needs "
                    f"HSA_OVERRIDE_GFX_VERSION={value}, which would also make {clash[0].label()} ({clash[0].gfx}) load {', '.join(sorted(as_gfx))} code"
                )
            fit.env["HSA_OVERRIDE_GFX_VERSION"] = value
            for gfx in overrides:
                ov = matrix.rocm_override(gfx)
                fit.reasons.append(
                    f"{gfx} is not in {variant.name}'s gfx list; HSA_OVERRIDE_GFX_VERSION={value} makes it load the {ov.as_gfx} code "  # type: ignore[union-attr]
                    f"(unofficial, source: {ov.source})"  # type: ignore[union-attr]
                )
        if variant.unknown:
            fit.warnings.append(f"matrix: {variant.name} of torch {release.version} has unverified facts: {'; '.join(variant.unknown)}")
    return fit


def _meets_unknown_driver(row: object, variant: Variant, t: Target, matrix: Matrix) -> tuple[str | None, str]:
    """("full" | "minor-compat" | "no" | None, how it is known) for a driver whose version is unknown.

    From its own CUDA level (a tool's "CUDA Version", torch's "found version NNNN"): it runs CUDA up to
    that level, a newer minor of the same major through minor-version compatibility, no newer major.
    Else from a CUDA build torch initialised on it: the driver is at least that major's
    minor-version-compatibility floor, and meets what that floor meets (None: unknown)."""
    v = major_minor(variant.cuda)
    if t.driver_cuda:
        c = major_minor(t.driver_cuda)
        how = f"it runs CUDA up to {t.driver_cuda}"
        if c is None or v is None:
            return None, how
        if v <= c:
            return "full", how
        return ("minor-compat" if v[0] == c[0] else "no"), how
    ran = matrix.cuda_row(t.driver_runs_cuda)
    how = f"torch's CUDA {t.driver_runs_cuda} build initialised on it"
    if ran is None:
        return None, how
    floor = (ran.minor_compat_floor_windows if t.windows_driver else ran.minor_compat_floor_linux) or (
        ran.min_driver_windows if t.windows_driver else ran.min_driver_linux
    )
    verdict = driver_meets(row, floor, windows=t.windows_driver) if floor else "no"  # type: ignore[arg-type]
    return (verdict if verdict != "no" else None), how


def _accel_kind(t: Target, gpus: list[Gpu]) -> str:
    if any(g.vendor == "nvidia" for g in gpus) or (t.driver and not gpus and t.os != "macos"):
        return "cuda"
    if any(g.vendor == "amd" for g in gpus):
        return "rocm"
    if any(g.vendor == "intel" for g in gpus):
        return "xpu"
    for acc in accelerators.ALL:  # a plug-in kind's build serves its GPUs
        if acc not in accelerators.BUILTIN and any(g.vendor == acc.vendor for g in gpus):
            return acc.build_kind
    return "cpu"


def _kind_version(v: Variant) -> tuple[int, ...]:
    return release_tuple(v.cuda or v.rocm or "0")


# ---------------------------------------------------------------------------- release candidates


def _candidates(matrix: Matrix, request: Request) -> tuple[list[tuple[Release, Version]], str | None]:
    """(release, version) pairs the request allows, newest first; an error sentence when the pin is unknown."""
    spec_text = (request.torch or "").strip()
    out: list[tuple[Release, Version]] = []
    if not spec_text:
        return [(r, r.version) for r in matrix.releases], None
    if re.search(r"[<>=!~,]", spec_text):
        try:
            spec = SpecifierSet(spec_text)
        except InvalidSpecifier:
            return [], f"--torch {spec_text!r} is neither a version nor a version specifier"
        for r in matrix.releases:
            for v in r.versions:
                if spec.contains(v, prereleases=True):
                    rel = matrix.release(v)
                    if rel is not None:
                        out.append((rel, v))
                    break
        if not out:
            return [], f"no torch release in the matrix matches {spec_text}"
        return out, None
    try:
        Version(spec_text.split("+", 1)[0])
    except InvalidVersion:
        return [], f"--torch {spec_text!r} is not a version"
    rel = matrix.release(spec_text)
    if rel is None:
        return [], f"torch {spec_text} is not in the compatibility matrix (known: {', '.join(str(r.version) for r in matrix.releases[:6])}, ...)"
    return [(rel, rel.version)], None


# ---------------------------------------------------------------------------- plan building


def _index_url(matrix: Matrix, request: Request, variant: str) -> str:
    base = request.index_base or matrix.index_url("pytorch")
    return f"{base.rstrip('/')}/{variant}"


def _command(facts: Facts, request: Request, reqs: list[str], index_url: str | None) -> list[str]:
    py = facts.python.executable or "python3"
    idx = ["--index-url", index_url] if index_url else []
    if request.installer == "uv":
        return [facts.python.uv_path or "uv", "pip", "install", "--python", py, *reqs, *idx]
    return [py, "-m", "pip", "install", *reqs, *idx]


def _packages(
    matrix: Matrix,
    request: Request,
    version: Version,
    pkg_variant: str | None,
    index_url: str | None,
    warnings: list[str],
    t: Target | None = None,
) -> list[PlannedPackage]:
    aarch64 = t is not None and t.os == "linux" and t.arch == "aarch64"
    # Linux aarch64: CPU torch wheels (e.g. torch-2.1.1-...manylinux2014_aarch64.whl) and torchvision wheels carry
    # no local suffix (compat-facts 4.3); a plain ==X.Y.Z also matches X.Y.Z+variant, so leave the suffix out there.
    torch_variant = None if aarch64 and pkg_variant == "cpu" else pkg_variant
    out = [PlannedPackage("torch", str(version), torch_variant, index_url)]
    tv, ta = matrix.paired(version)
    for name in request.packages:
        if name == "torch":
            continue
        paired = {"torchvision": tv, "torchaudio": ta}.get(name)
        if name not in ("torchvision", "torchaudio"):
            warnings.append(f"{name}: not a torch companion the matrix pairs; install it separately")
            continue
        if paired is None:
            warnings.append(f"{name}: the version paired with torch {version} is unknown to the matrix; not planned (a --matrix file can add it)")
            continue
        out.append(PlannedPackage(name, paired, None if aarch64 and name == "torchvision" else pkg_variant, index_url))
    return out


_WHEEL_URL = re.compile(r"\S+\.whl")
_WHEEL_OS = {"linux": ("linux",), "windows": ("win",), "macos": ("macosx",)}
_WHEEL_ARCH = {"x86_64": ("x86_64", "amd64"), "amd64": ("x86_64", "amd64"), "aarch64": ("aarch64", "arm64"), "arm64": ("aarch64", "arm64")}


def _learned_where(source: str, t: Target) -> str | None:
    """The artifact a learned variant's row was read from, for this target's platform: the first wheel of the
    target's OS and architecture; ``None`` when the learned wheels are all other platforms' (a merged row whose
    build for this platform has another source); the first location when the source names no wheel."""
    wheels: list[str] = _WHEEL_URL.findall(source)
    if not wheels:
        return source.split(" (", 1)[0].split("; ", 1)[0] or None
    oses, arches = _WHEEL_OS.get(t.os, ()), _WHEEL_ARCH.get(t.arch, ())
    for url in wheels:
        plat = url.rsplit("/", 1)[-1].rsplit("-", 1)[-1]
        if (not oses or any(w in plat for w in oses)) and (not arches or any(w in plat for w in arches)):
            after = source.split(url, 1)[1].split()[:1]
            return url + (f" {after[0]}" if after and after[0].startswith("sha256:") else "")
    return None


def _finish(facts: Facts, matrix: Matrix, request: Request, fit: _Fit, plan: Plan, *, pypi: bool = False) -> Plan:
    v = fit.variant
    if pypi or v.index == "pypi":
        # a label-less default build (PyPI's): the index that serves it, with a plain ==version requirement
        index_url, pkg_variant = matrix.index_url("pypi"), None
    elif v.index:
        index_url, pkg_variant = v.index, v.name  # learned from that index (an index witness)
    else:
        index_url, pkg_variant = _index_url(matrix, request, v.name), v.name
    where = _learned_where(v.source, target_from(facts, matrix, request)) if v.learned else None
    if where:
        plan.reasons.append(
            f"torch {fit.version} {v.name}: learned {v.learned} from the index's own files ({where})"
            + (f"; GPU code {v.derived_from}" if v.derived_from and v.derived_from.startswith("inferred") else "")
        )
    plan.torch_version = str(fit.version)
    plan.variant = v.name
    plan.index_url = index_url
    plan.warnings.extend(w for w in fit.warnings if w not in plan.warnings)
    plan.reasons.extend(fit.reasons)
    plan.env.update(fit.env)
    plan.packages = _packages(matrix, request, fit.version, pkg_variant, index_url, plan.warnings, target_from(facts, matrix, request))
    plan.command = _command(facts, request, [p.requirement for p in plan.packages], index_url)
    plan.leftovers = predict_leftovers(facts.torch.distributions, v.name)  # the one prediction (install's too)
    return plan


def _best_gpu_fit(
    release: Release, version: Version, t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], rejected: list[Rejected] | None
) -> tuple[_Fit | None, list[_Reject]]:
    fits: list[_Fit] = []
    rejects: list[_Reject] = []
    for v in release.variants:
        if v.kind != kind or (request.variant != "auto" and v.name != request.variant):
            continue
        try:
            fits.append(_fit(release, version, v, t, matrix, request, gpus))
        except _Reject as r:
            rejects.append(r)
            if rejected is not None:
                reason = r.reason.removeprefix(f"{v.name}: ")
                rejected.append(Rejected(v.name, f"torch {version}: {reason}", torch=str(version)))
    if not fits:
        return None, rejects
    fits.sort(key=lambda f: _kind_version(f.variant), reverse=True)
    best = fits[0]
    if rejected is not None:
        for other in fits[1:]:
            rejected.append(Rejected(other.variant.name, f"torch {version}: fits, but {best.variant.name} is the newer {_kind_name(kind)} build", torch=str(version)))
    return best, rejects


def _kind_name(kind: str) -> str:
    """How a build kind is written in a sentence: ``CUDA``, ``ROCm``, ``XPU``, ``CPU``."""
    if kind == "cpu":
        return "CPU"
    return next((a.build_label for a in accelerators.ALL if a.build_kind == kind and a.build_label), kind)


def _gpu_summary(gpus: list[Gpu]) -> str:
    parts = []
    for g in gpus:
        what = f"sm_{g.cc.replace('.', '')}" if g.cc else g.gfx
        parts.append(f"{g.label()} ({what})" if what else g.label())
    return ", ".join(parts)


def _subsets(gpus: list[Gpu]) -> list[list[Gpu]]:
    """GPU sets to try: all; without integrated GPUs; then each architecture group, most capable first."""
    out = [gpus]
    discrete = [g for g in gpus if not g.integrated]
    if discrete and len(discrete) < len(gpus):
        out.append(discrete)
    groups: dict[str, list[Gpu]] = {}
    for g in discrete or gpus:
        groups.setdefault(g.cc or g.gfx or "?", []).append(g)
    if len(groups) > 1:

        def rank(key: str) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", key)) or (0,)

        for key in sorted(groups, key=rank, reverse=True):
            out.append(groups[key])
    return out


def _hide_env(kind: str, kept: list[Gpu], all_gpus: list[Gpu]) -> dict[str, str]:
    if kind == "cuda":
        if all(g.uuid for g in kept):
            return {"CUDA_VISIBLE_DEVICES": ",".join(g.uuid for g in kept)}  # type: ignore[misc]
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}
    acc = next((a for a in accelerators.ALL if a.build_kind == kind and a.hide_var), None)
    return {acc.hide_var if acc and acc.hide_var else "HIP_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}


def _newer_than(version: Version, cands: list[tuple[Release, Version]]) -> list[tuple[Release, Version]]:
    return [(r, v) for r, v in cands if v > version]


def _fallback_suggestions(
    t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], cands: list[tuple[Release, Version]]
) -> list[str]:
    """What would make a GPU build possible: a driver upgrade, or another torch release."""
    out: list[str] = []
    newest = cands[0] if cands else None
    if newest:
        needed: list[tuple[tuple[int, ...], str, str]] = []
        for v in newest[0].variants:
            if v.kind != kind:
                continue
            try:
                _fit(newest[0], newest[1], v, t, matrix, request, gpus)
            except _Reject as rej:
                if rej.driver_needed:
                    # would it fit with that driver?
                    t2 = Target(**{**t.__dict__, "driver": rej.driver_needed})
                    try:
                        _fit(newest[0], newest[1], v, t2, matrix, request, gpus)
                        needed.append((_kind_version(v), rej.driver_needed, v.name))
                    except _Reject:
                        pass
        if needed:
            needed.sort()
            _, drv, name = needed[0]
            out.append(f"upgrade the driver to >= {drv} (torch {newest[1]} {name} then runs on this GPU)")
    # another release (ignoring the pin) that runs on these GPUs with this driver
    for r in matrix.releases:
        if any(r.version == c[0].version for c in cands[:1]):
            continue
        best, _ = _best_gpu_fit(r, r.version, t, matrix, Request(**{**request.__dict__, "torch": None, "variant": "auto"}), kind, gpus, None)
        if best is not None:
            out.append(f"torch {r.version} {best.variant.name} supports this GPU with this driver (--torch {r.version})")
            break
    return out


def _nothing_suggestions(t: Target, matrix: Matrix, request: Request, cands: list[tuple[Release, Version]]) -> list[str]:
    """The nearest requests that would install anything at all (another torch, another Python)."""
    out: list[str] = []
    relaxed = Request(**{**request.__dict__, "torch": None})
    for r in matrix.releases:
        if cands and r.version == cands[0][0].version:
            continue
        for v in r.variants:
            if v.kind != "cpu":
                continue
            try:
                _fit(r, r.version, v, t, matrix, relaxed, [])
            except _Reject:
                continue
            out.append(f"torch {r.version} is the newest release with a build for this platform and Python (--torch {r.version})")
            break
        if out:
            break
    if cands and t.python:
        rel = cands[0][0]
        cpu = rel.variant("cpu")
        if cpu is not None:
            for py in sorted(cpu.pythons, key=lambda s: release_tuple(s), reverse=True):
                if py.endswith("t") != t.python.endswith("t") or py in rel.torch_only_pythons or not rel.python_on(py, t.os, t.arch):
                    continue
                t2 = Target(**{**t.__dict__, "python": py})
                try:
                    _platform_tag_for(rel, cpu, t2)
                except _Reject:
                    break
                out.append(f"Python {py} (torch {cands[0][1]} has wheels for {', '.join(cpu.pythons)}; --python-version {py})")
                break
    return out


def _companions(
    facts: Facts, request: Request, t: Target, acc: accelerators.Accelerator, cands: list[tuple[Release, Version]], plan: Plan
) -> tuple[list[tuple[Release, Version]], dict[str, accelerators.Companion]]:
    """The releases a kind's companion package pairs with on this target (``torch-npu`` beside torch's CPU build), newest
    first, and the companion of each: first only those whose needs are known and met (:meth:`Accelerator.companion`'s
    ``strict``), else any that pairs, with its warnings. No release pairs: none, and the plan says why."""
    why: list[str] = []
    for strict in (True, False):
        paired: dict[str, accelerators.Companion] = {}
        for _rel, ver in cands:
            c = acc.companion(facts, str(ver), os=t.os, arch=t.arch, python=t.python, hypothetical=_what_if(request), strict=strict)
            if isinstance(c, accelerators.Companion):
                paired[str(ver)] = c
            elif isinstance(c, str) and c not in why:
                why.append(c)
        if paired:
            return [(r, v) for r, v in cands if str(v) in paired], paired
    plan.reasons.append(why[0] if why else f"no {', '.join(acc.companions)} release pairs with the requested torch")
    plan.reasons.extend(why[1:3])
    return [], {}


def _with_companion(facts: Facts, request: Request, plan: Plan, c: accelerators.Companion | None) -> Plan:
    """``plan`` with the companion package beside torch: its requirement, its index (an extra one), its reasons."""
    if c is None:
        return plan
    plan.packages.append(PlannedPackage(c.name, c.version, None, c.index_url))
    plan.reasons.extend(c.reasons)
    plan.warnings.extend(w for w in c.warnings if w not in plan.warnings)
    plan.command = _command(facts, request, [p.requirement for p in plan.packages], plan.index_url)
    extra = list(dict.fromkeys(p.index_url for p in plan.packages if p.index_url and p.index_url != plan.index_url))
    for url in extra:
        plan.command += ["--extra-index-url", url]
    return plan


def resolve(facts: Facts, matrix: Matrix, request: Request) -> Plan:
    """The install plan for ``request`` on the machine ``facts`` describe, from ``matrix``. Pure.

    One honest answer either way: a plan that cannot be met has no command and its ``error`` says why in one
    sentence (exit 1, README "Exit codes"); a plan against the installed torch says what it replaces, and
    never downgrades silently (:func:`_mind_installed`)."""
    plan = _resolve(facts, matrix, request)
    if not plan.satisfiable:
        plan.packages, plan.command = [], []
        if plan.error is None:
            plan.error = PlanError("unmet", _unmet_sentence(plan), 1)
        return plan
    _mind_installed(facts, matrix, request, plan)
    return plan


_PYTHON_RE = re.compile(r"^(?:cp|python)?(\d)(?:\.?(\d{1,2}))?(t?)$", re.I)


def request_value_error(torch: str | None = None, platform: str | None = None, python_version: str | None = None) -> str | None:
    """One sentence for a request value that cannot mean anything (the install command exits 2 with it), else None.

    ``--platform amiga`` (not a wheel platform tag), ``--python-version 2.7`` (torch wheels are Python 3 only),
    ``--torch banana`` (neither a version nor a specifier). Values that parse but that no release serves are
    the resolver's to answer (an unmet plan, with what would work instead)."""
    if platform is not None:
        os_, _arch, _floor = parse_platform(platform)
        if os_ == "unknown" or not platform.strip():
            return (
                f"--platform {platform!r} is not a wheel platform tag (expected like manylinux_2_28_x86_64, manylinux_2_28_aarch64, "
                "win_amd64 or macosx_14_0_arm64)."
            )
    if python_version is not None:
        m = _PYTHON_RE.match(python_version.strip())
        if not m:
            return f"--python-version {python_version!r} is not a Python version (expected like 3.12 or 3.13t)."
        if m.group(1) != "3":
            return f"--python-version {python_version}: torch wheels are for Python 3 only (e.g. --python-version 3.12)."
    if torch is not None:
        text = torch.strip()
        if not text:
            return "--torch needs a version (e.g. 2.13.0) or a specifier (e.g. '>=2.6,<2.12')."
        if re.search(r"[<>=!~,]", text):
            try:
                SpecifierSet(text)
            except InvalidSpecifier:
                return f"--torch {torch!r} is neither a version nor a version specifier (e.g. 2.13.0 or '>=2.6,<2.12')."
        else:
            try:
                Version(text)
            except InvalidVersion:
                return f"--torch {torch!r} is not a torch version (e.g. 2.13.0, or a specifier like '>=2.6,<2.12')."
    return None


def _unmet_sentence(plan: Plan) -> str:
    why = plan.reasons[0] if plan.reasons else "no torch build fits this request"
    s = f"No torch build fits this request: {why}"
    if plan.suggestions:
        s += f" (would work instead: {plan.suggestions[0]})"
    return s.rstrip(".") + "."


def _what_if(request: Request) -> bool:
    """The request plans for another machine, so this one's installed torch is not the one replaced."""
    return bool(request.platform or request.python_version or request.gpus or request.gfx or request.driver or request.devices)


def _installed_works(facts: Facts) -> bool:
    """The installed torch imports (or its files are whole) and, for a GPU build, saw its GPU."""
    t = facts.torch
    if not t.installed or t.import_error:
        return False
    kind = variant_kind(t.variant or "")
    if kind and kind[0] in ("cuda", "rocm") and t.cuda_available is False:
        return False
    return True


def _mind_installed(facts: Facts, matrix: Matrix, request: Request, plan: Plan) -> None:
    """No silent downgrade: an unpinned plan older than a working installed build of the same kind keeps that
    build; any other plan older than the installed torch says "downgrade from X to Y" and why; a plan that
    replaces the installed torch says so (``2.14.1+cu130 -> 2.13.0+cpu``)."""
    t = facts.torch
    if request.platform or request.python_version or not t.installed or not plan.torch_version:
        return  # another machine's plan: this one's torch is not what it replaces
    if _what_if(request):  # --gpu / --gfx / --driver: other accelerators, the same target environment
        installed = t.version or t.distributions.get("torch")  # its dist-info's version where torch did not say
        if installed:
            _mind_installed_what_if(installed, t.variant, plan)
        return
    if not t.version:
        return
    try:
        inst = Version(t.version.split("+", 1)[0])
        new = Version(plan.torch_version)
    except InvalidVersion:
        return
    inst_variant = t.variant or (t.version.split("+", 1)[1] if "+" in t.version else None)
    new_full = f"{new}+{plan.variant}" if plan.variant and not plan.variant.startswith("jetson-") else str(new)
    old_full = t.version if "+" in t.version or not inst_variant else f"{t.version}+{inst_variant}"
    if (inst, inst_variant) == (new, plan.variant):
        return
    ik, nk = variant_kind(inst_variant or ""), variant_kind(plan.variant or "")
    same_kind = ik is not None and nk is not None and ik[0] == nk[0]
    gpu_to_cpu = ik is not None and ik[0] != "cpu" and nk is not None and nk[0] == "cpu"
    if inst > new:
        works = _installed_works(facts)
        paired = any(p.name in accelerators.companion_names() for p in plan.packages)  # the companion pins the planned torch
        if not request.torch and request.variant == "auto" and works and (same_kind or gpu_to_cpu) and not paired:
            row = matrix.release(inst)
            unknown = row is None or not row.variants
            plan.reasons.insert(
                0,
                f"torch {old_full} is installed and works; the newest build the matrix fits here is {new_full}, older, so an unpinned "
                f"install keeps it (no downgrade)"
                + (f"; the matrix does not know torch {inst}'s builds: `stackdoctor matrix learn --torch {inst}` reads them from the index" if unknown else ""),
            )
            plan.torch_version, plan.variant = str(inst), inst_variant
            plan.packages = [p for p in plan.packages if p.name == "torch"]
            for p in plan.packages:
                p.version, p.variant = str(inst), inst_variant
            plan.command = []
            plan.satisfied = True
            plan.leftovers = []
            _companions_beside(facts, matrix, request, plan, inst, inst_variant)
            return
        if request.torch:
            why = f"--torch {request.torch} asks for it"
        elif request.variant != "auto":
            why = f"--variant {request.variant} asks for that build, and {new_full} is the newest the matrix knows for this machine"
        elif paired:
            why = next(f"{p.name} {p.version}, planned beside it, pins torch {new}" for p in plan.packages if p.name in accelerators.companion_names())
        elif not works:
            why = f"the installed build does not work here ({t.import_error or 'torch sees no GPU'})"
        else:
            why = f"no {_kind_name(ik[0]) if ik else ''} build of torch {inst} that the matrix knows fits this machine; {new_full} is the newest that does".replace("  ", " ")
        plan.reasons.insert(0, f"downgrade from {old_full} to {new_full}: {why}")
        plan.warnings.append(f"this plan downgrades torch from {old_full} to {new_full}")
        return
    plan.reasons.insert(0, f"replaces the installed torch: {old_full} -> {new_full}")


def _companions_beside(facts: Facts, matrix: Matrix, request: Request, plan: Plan, inst: Version, inst_variant: str | None) -> None:
    """The installed torch is kept: the requested companions it lacks are still planned, paired with it (the
    command names the installed torch too, so the installer keeps it)."""
    t = facts.torch
    have = {k.lower() for k in t.distributions} | {n for n, v in (("torchvision", t.torchvision_version), ("torchaudio", t.torchaudio_version)) if v}
    wanted = [n for n in request.packages if n in ("torchvision", "torchaudio") and n not in have]
    if not wanted:
        return
    labelled = bool(t.version and "+" in t.version and inst_variant)
    index_url = _index_url(matrix, request, inst_variant) if labelled and inst_variant else matrix.index_url("pypi")
    pkgs = _packages(matrix, replace(request, packages=["torch", *wanted]), inst, inst_variant if labelled else None, index_url, plan.warnings,
                     target_from(facts, matrix, request))
    if len(pkgs) == 1:  # no pairing known for any of them: the warnings say so
        return
    plan.packages, plan.index_url, plan.satisfied = pkgs, index_url, False
    plan.command = _command(facts, request, [p.requirement for p in pkgs], index_url)
    plan.reasons.insert(1, f"{', '.join(f'{p.name} {p.version}' for p in pkgs[1:])} (paired with the installed torch {inst}): missing, planned beside it")


def _mind_installed_what_if(installed: str, variant: str | None, plan: Plan) -> None:
    """A what-if for other GPUs or another driver plans for this same environment: a plan older than its torch
    says "downgrade" and names the installed build (nothing is kept: the what-if only plans)."""
    try:
        inst = Version(installed.split("+", 1)[0])
        new = Version(plan.torch_version or "")
    except InvalidVersion:
        return
    if inst <= new:
        return
    old_full = installed if "+" in installed or not variant else f"{installed}+{variant}"
    new_full = f"{new}+{plan.variant}" if plan.variant and not plan.variant.startswith("jetson-") else str(new)
    why = f"the what-if's GPUs and driver (--gpu, --gfx, --driver) fit no newer build the matrix knows; the installed torch is {old_full}"
    plan.reasons.insert(0, f"downgrade from {old_full} to {new_full}: {why}")
    plan.warnings.append(f"this plan downgrades torch from {old_full} to {new_full}")


def _resolve(facts: Facts, matrix: Matrix, request: Request) -> Plan:
    plan = Plan(torch_version=None, variant=None, index_url=None)
    t = target_from(facts, matrix, request)
    plan.warnings.extend(t.notes)
    if t.os == "unknown" or not t.arch:
        plan.reasons.append("the target platform is unknown (no OS / architecture facts), so no wheel can be chosen")
        plan.suggestions.append("name the target with --platform TAG (e.g. manylinux_2_28_x86_64, win_amd64, macosx_14_0_arm64)")
        return plan
    if not t.python:
        plan.warnings.append("the target's Python version is unknown: Python compatibility was not checked (--python-version X.Y)")
    cands, err = _candidates(matrix, request)
    if err:
        plan.reasons.append(err)
        plan.suggestions.append(f"torch {matrix.releases[0].version} is the newest release the matrix knows" if matrix.releases else "load a matrix")
        return plan
    if request.variant != "auto" and variant_kind(request.variant) is None and not request.variant.startswith("jetson-"):
        plan.reasons.append(f"--variant {request.variant}: not a variant name (cpu, cuXYZ, rocmX.Y, xpu)")
        return plan
    unknown_builds = [(r, v) for r, v in cands if not r.variants]
    if unknown_builds:
        plan.warnings.append(
            f"torch {', '.join(str(v) for _, v in unknown_builds)}: the matrix does not know its builds yet; not considered "
            "(a --matrix file can add them)"
        )
    cands = [(r, v) for r, v in cands if r.variants]
    if not cands:
        plan.reasons.append("no torch release in the request has builds the matrix knows")
        return plan
    comps = [p for p in request.packages if p in ("torchvision", "torchaudio")]
    if comps and not request.torch:
        # companions: the newest release whose torchvision / torchaudio the sources have, naming what is missing
        def missing(v: Version) -> list[str]:
            tv, ta = matrix.paired(v)
            return [c for c in comps if {"torchvision": tv, "torchaudio": ta}[c] is None]

        with_all = [(r, v) for r, v in cands if not missing(v)]
        if with_all and with_all[0][1] != cands[0][1]:
            newer = [(r, v) for r, v in cands if v > with_all[0][1]]
            gone = sorted({c for _, v in newer for c in missing(v)})
            plan.reasons.append(
                f"torch {', '.join(str(v) for _, v in newer[:3])}{' ...' if len(newer) > 3 else ''}: no {' or '.join(gone)} paired with it is known; "
                f"torch {with_all[0][1]} is the newest release with {' and '.join(comps)} (install torch alone for a newer one)"
            )
            cands = with_all
        elif not with_all:
            gone = sorted({c for _, v in cands for c in missing(v)})
            plan.reasons.append(f"no torch release in the matrix has a known {' and '.join(gone)} pairing")
            return plan
    if request.variant != "auto" and not request.variant.startswith("jetson-"):
        publishing = [(r, v) for r, v in cands if r.variant(request.variant) is not None]
        if not publishing:
            rel, ver = cands[0]
            plan.reasons.append(
                f"torch {ver if len(cands) == 1 else ', '.join(str(v) for _, v in cands[:3]) + (' ...' if len(cands) > 3 else '')} "
                f"publishes no {request.variant} build (torch {ver} has {', '.join(v.name for v in rel.variants)})"
            )
            newest = next((r for r in matrix.releases if r.variant(request.variant) is not None), None)
            if newest is not None:
                plan.suggestions.append(f"torch {newest.version} is the newest release with a {request.variant} build (--torch {newest.version})")
            return plan
        cands = publishing

    if t.jetson:
        return _resolve_jetson(facts, matrix, request, t, cands, plan)
    if t.os == "macos":
        return _resolve_macos(facts, matrix, request, t, cands, plan)

    gpus = list(t.gpus)
    kind = _accel_kind(t, gpus)
    if kind == "cuda" and any(g.vendor == "amd" for g in gpus):
        plan.warnings.append(f"AMD GPU(s) {_gpu_summary([g for g in gpus if g.vendor == 'amd'])} are left out: one torch build serves one vendor")
        gpus = [g for g in gpus if g.vendor == "nvidia"]
    if kind in ("cuda", "rocm") and any(g.vendor == "intel" for g in gpus):
        gpus = [g for g in gpus if g.vendor != "intel"]
    if kind == "xpu":
        suitable = [g for g in gpus if g.vendor == "intel" and (not g.integrated or _INTEL_XPU_RE.search(g.name or ""))]
        suitable = [g for g in suitable if _INTEL_XPU_RE.search(g.name or "") or not g.integrated]
        if not suitable:
            plan.reasons.append(
                f"Intel GPU(s) {', '.join(g.name or '?' for g in gpus)} are not among the XPU build's GPUs (Arc, Data Center GPU Max, Core Ultra)"
            )
            kind = "cpu"
        gpus = suitable
    explicit = request.variant != "auto"
    if explicit:
        vk = variant_kind(request.variant)
        kind = vk[0] if vk else kind

    companion: dict[str, accelerators.Companion] = {}
    beside = accelerators.companion_kind({g.vendor for g in gpus}) if kind == "cpu" and request.variant in ("auto", "cpu") else None
    if beside is not None:
        cands, companion = _companions(facts, request, t, beside, cands, plan)
        if not cands:
            return plan
    if kind != "cpu":
        rejected_all: list[Rejected] = []
        for subset in _subsets(gpus) if kind in ("cuda", "rocm") and gpus else [gpus]:
            rejected_here: list[Rejected] = []
            for rel, ver in cands:
                best, _ = _best_gpu_fit(rel, ver, t, matrix, request, kind, subset, rejected_here)
                if best is None:
                    continue
                plan.rejected.extend(rejected_here if subset is gpus else rejected_all + rejected_here)
                left = [g for g in gpus if g not in subset]
                what = _gpu_summary(subset) if subset else "this machine"
                if kind == "cuda" and t.driver:
                    plan.reasons.append(
                        f"torch {ver} {best.variant.name}: the newest {'requested ' if request.torch else ''}release and CUDA build that runs on {what} with driver {t.driver}"
                        + (" (the Windows driver, as WSL2 sees it)" if t.wsl else "")
                    )
                else:
                    plan.reasons.append(f"torch {ver} {best.variant.name}: the newest {'requested ' if request.torch else ''}release and {_kind_name(kind)} build for {what}")
                newer = _newer_than(ver, cands)
                if newer:
                    plan.reasons.append(
                        f"an older release with a GPU build beats a CPU build of torch {newer[0][1]}: no {_kind_name(kind)} build of "
                        f"{', '.join(str(v) for _, v in newer)} runs here" + (" (see rejected)" if plan.rejected else "")
                    )
                if left:
                    env = _hide_env(kind, subset, gpus)
                    best.env.update(env)
                    var = "CUDA_VISIBLE_DEVICES" if kind == "cuda" else "HIP_VISIBLE_DEVICES"
                    plan.warnings.append(
                        f"no {_kind_name(kind)} build runs on every GPU: {_gpu_summary(left)} would be left out"
                        + (" (an integrated GPU)" if all(g.integrated for g in left) else "")
                        + f"; hide it with {var}={env[var]}"
                    )
                return _finish(facts, matrix, request, best, plan)
            if subset is gpus:
                rejected_all = rejected_here
        # no GPU build anywhere in the request
        plan.rejected.extend(rejected_all)
        if gpus or t.driver:
            plan.reasons.append(
                f"no {_kind_name(kind)} build of torch {cands[0][1] if len(cands) == 1 else ', '.join(str(v) for _, v in cands[:3]) + (' ...' if len(cands) > 3 else '')} "
                f"runs on {_gpu_summary(gpus) if gpus else 'this machine'}" + (f" with driver {t.driver}" if t.driver else "")
            )
        plan.suggestions.extend(_fallback_suggestions(t, matrix, request, kind, gpus, cands))
        if explicit:
            plan.reasons.append(f"--variant {request.variant} does not fit this machine")
            return plan

    # CPU
    cpu_rejects: list[str] = []
    for rel, ver in cands:
        v = rel.variant("cpu")
        if v is None:
            continue
        try:
            fit = _fit(rel, ver, v, t, matrix, request, [])
        except _Reject as r:
            cpu_rejects.append(f"torch {ver}: {r.reason}")
            continue
        if str(ver) in companion:
            pass  # the companion's own reasons say why this build (_with_companion)
        elif kind == "cpu" and t.nvidia_unlisted and not t.driver:
            plan.reasons.append(
                f"torch {ver} cpu: {t.nvidia_unlisted} NVIDIA GPU(s) are on the PCI bus but no working NVIDIA driver lists them, "
                "so no CUDA build can be checked or chosen"
            )
            plan.suggestions.append("install or repair the NVIDIA driver (nvidia-smi must list the GPU), then resolve again")
        elif kind == "cpu" and not gpus and not t.driver:
            plan.reasons.append(f"torch {ver} cpu: no GPU found on this machine; the newest {'requested ' if request.torch else ''}release with a CPU build for it")
        else:
            plan.reasons.append(f"torch {ver} cpu: no GPU build fits{' (see rejected)' if plan.rejected else ''}; a CPU build is what works here")
        if plan.suggestions:
            plan.reasons.append("to get a GPU build: " + "; or ".join(plan.suggestions))
        return _with_companion(facts, request, _finish(facts, matrix, request, fit, plan), companion.get(str(ver)))
    # no CPU build: PyPI's default build (a CUDA build, learned from its wheels) runs on the CPU too, as `pip install torch` does
    for rel, ver in cands:
        for v in rel.variants:
            if v.index != "pypi" or v.kind == "cpu" or (request.variant != "auto" and v.name != request.variant):
                continue
            try:
                _platform_tag_for(rel, v, t)
                _python_fits(rel, v, t, request.packages)
            except _Reject:
                continue
            unfit = _unfit_gpus(rel, ver, v, t, matrix, request, gpus)
            if unfit:
                cpu_rejects.insert(0, f"torch {ver}: no CPU build of it is known for {_OS_WORDS.get(t.os, t.os)} {t.arch}, and PyPI's default build ({v.name}) {unfit}")
                continue
            plan.reasons.append(
                f"torch {ver} {v.name}: no CPU build of it is known for {_OS_WORDS.get(t.os, t.os)} {t.arch}"
                + (f" and Python {t.python}" if t.python else "")
                + f"; PyPI's default build ({v.name}) runs on the CPU as well, with its CUDA libraries unused"
            )
            return _finish(facts, matrix, request, _Fit(rel, ver, v), plan)
    # nothing at all
    plan.torch_version = None
    plan.reasons.extend(cpu_rejects[:3] or ["no build of the requested torch fits this platform and Python"])
    plan.suggestions = [s for s in plan.suggestions if "driver" not in s]
    plan.suggestions.extend(_nothing_suggestions(t, matrix, request, cands))
    plan.packages, plan.command = [], []
    return plan


def _resolve_macos(facts: Facts, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]], plan: Plan) -> Plan:
    """macOS: the default PyPI build (no local suffix); on Apple silicon it carries MPS."""
    rejects: list[str] = []
    first_ok: _Fit | None = None
    for rel, ver in cands:
        v = rel.variant("cpu")
        if v is None:
            continue
        try:
            fit = _fit(rel, ver, v, t, matrix, request, [])
        except _Reject as r:
            rejects.append(f"torch {ver}: {r.reason}")
            continue
        if t.arch == "arm64":
            mps = major_minor(rel.mps_min_macos)
            if mps and t.macos and t.macos < mps:
                if first_ok is None:
                    first_ok = fit
                plan.rejected.append(Rejected("cpu", f"torch {ver}: installs on macOS {t.macos[0]}.{t.macos[1]}, but its MPS needs macOS >= {rel.mps_min_macos}", torch=str(ver)))
                continue
            plan.reasons.append(f"torch {ver}: the newest {'requested ' if request.torch else ''}release for macOS arm64; PyPI's default build carries MPS (Apple GPU)")
            if first_ok is not None:
                plan.reasons.append(f"an older release with MPS beats torch {first_ok.version} without it on this macOS")
        else:
            plan.reasons.append(f"torch {ver}: Intel Macs get CPU builds only, and {ver} is the newest {'requested ' if request.torch else ''}release with macOS x86_64 wheels")
        return _finish(facts, matrix, request, fit, plan, pypi=True)
    if first_ok is not None:
        plan.reasons.append(f"torch {first_ok.version}: no release here has MPS on this macOS; CPU only")
        plan.suggestions.append(f"upgrade macOS to >= {first_ok.release.mps_min_macos} for MPS")
        return _finish(facts, matrix, request, first_ok, plan, pypi=True)
    plan.reasons.extend(rejects[:3] or ["no torch build for this Mac"])
    if t.arch == "x86_64":
        last = matrix.newest_release_for("macos", "x86_64")
        plan.reasons.append(
            f"Intel Macs (macOS x86_64) have wheels only up to torch {last.version}"
            if last is not None
            else "the matrix knows no torch release with macOS x86_64 wheels"
        )
    plan.suggestions.extend(_nothing_suggestions(t, matrix, request, cands))
    return plan


def _resolve_jetson(facts: Facts, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]], plan: Plan) -> Plan:
    row = matrix.jetson_row(t.l4t, t.jetpack)
    what = f"L4T {t.l4t}" if t.l4t else f"JetPack {t.jetpack}" if t.jetpack else "this Jetson"
    if row is None:
        plan.reasons.append(f"{what}: the matrix has no Jetson row for it, so no wheel source is known")
        return plan
    if row.use_pytorch_index:
        # Thor (JetPack 7): the SBSA userspace runs download.pytorch.org's aarch64 CUDA builds
        t2 = Target(**{**t.__dict__, "jetson": False})
        if not t2.gpus and row.gpu_cc:
            t2.gpus = [Gpu("nvidia", 0, facts.jetson.model or "Jetson GPU", cc=row.gpu_cc[0])]
        plan.reasons.append(f"{what} (JetPack {row.jetpack}): {row.note}")
        inner = _resolve_generic_target(facts, matrix, request, t2, cands)
        inner.reasons = plan.reasons + inner.reasons
        inner.warnings = plan.warnings + inner.warnings
        if inner.variant in (None, "cpu") and row.variant and row.index_url:
            inner.suggestions.append(f"NVIDIA's Jetson index {row.index_url} ({row.variant}) has torch {', '.join(row.torch)}")
        return inner
    if not row.variant or not row.index_url:
        plan.reasons.append(f"{what} (JetPack {row.jetpack}): {row.note or 'no torch wheel source is known'}")
        newer = [j for j in matrix.jetson if j.variant and j.index_url and j.jetpack > row.jetpack]
        if newer:
            plan.suggestions.append(f"JetPack {newer[0].jetpack} (L4T {', '.join(newer[0].l4t)}) has torch {', '.join(newer[0].torch)} from {newer[0].index_url}")
        return plan
    versions = [Version(v) for v in row.torch]
    wanted: list[Version] = []
    if request.torch:
        spec_text = request.torch.strip()
        try:
            spec = SpecifierSet(spec_text) if re.search(r"[<>=!~,]", spec_text) else SpecifierSet(f"=={spec_text}.*" if spec_text.count(".") == 1 else f"=={spec_text}")
        except InvalidSpecifier:
            spec = SpecifierSet()
        wanted = [v for v in versions if spec.contains(v, prereleases=True)]
    else:
        wanted = sorted(versions, reverse=True)
    if not wanted:
        plan.reasons.append(f"{what}: {row.index_url} has no torch {request.torch} (it has {', '.join(row.torch)})")
        plan.suggestions.append(f"--torch {row.torch[0]} (the newest on {row.variant})")
        return plan
    if t.python and row.pythons and t.python not in row.pythons:
        plan.reasons.append(f"{what}: {row.variant} wheels are for Python {', '.join(row.pythons)}, not {t.python}")
        plan.suggestions.append(f"Python {row.pythons[0]} (JetPack's Python; --python-version {row.pythons[0]})")
        return plan
    ver = wanted[0]
    plan.torch_version = str(ver)
    plan.variant = row.variant
    plan.index_url = row.index_url
    plan.reasons.append(f"{what} (JetPack {row.jetpack}, CUDA {row.cuda}): torch {ver} from NVIDIA's Jetson wheels at {row.index_url}; PyPI's aarch64 builds do not target the Jetson iGPU")
    if row.unknown:
        plan.warnings.append(f"matrix: {'; '.join(row.unknown)} (unknown)")
    plan.packages = _packages(matrix, request, ver, None, row.index_url, plan.warnings)
    plan.command = _command(facts, request, [p.requirement for p in plan.packages], row.index_url)
    return plan


def _resolve_generic_target(facts: Facts, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]]) -> Plan:
    """Resolve with an already-built target (used for Jetson Thor)."""
    import dataclasses

    sub = dataclasses.replace(
        facts,
        jetson=dataclasses.replace(facts.jetson, is_jetson=False),
    )
    req = dataclasses.replace(
        request,
        gpus=[f"sm_{g.cc.replace('.', '')}" for g in t.gpus if g.vendor == "nvidia" and g.cc] or request.gpus,
        driver=t.driver,
    )
    return resolve(sub, matrix, req)
