"""Whether one variant of a release fits the target (platform, Python, driver, every GPU), with the reason when it does not."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from packaging.version import Version

from stackdoctor import accelerators
from stackdoctor.matrix import (
    Matrix,
    Release,
    Variant,
    arch_match,
    driver_meets,
    parse_platform,
)
from stackdoctor.plan import Rejected, Request
from stackdoctor.resolve.target import Gpu, Target, norm_arch
from stackdoctor.versions import major_minor
from stackdoctor.versions import release as release_tuple

# ---------------------------------------------------------------------------- fitting


@dataclass
class Fit:
    release: Release
    version: Version
    variant: Variant
    warnings: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


class Reject(Exception):
    def __init__(self, reason: str, *, driver_needed: str | None = None, platform_blocked: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.driver_needed = driver_needed
        self.platform_blocked = platform_blocked


def platform_tag_for(release: Release, variant: Variant, t: Target) -> str:
    """The variant's platform tag that fits the target; raises Reject saying why none does."""
    blocked: list[str] = []
    for tag in variant.platforms:
        os_, arch, floor = parse_platform(tag)
        if os_ != t.os or norm_arch(os_, arch) != t.arch:
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
        raise Reject(blocked[0], platform_blocked=True)
    where = {"linux": f"Linux {t.arch}", "windows": f"Windows {t.arch}", "macos": f"macOS {t.arch}"}.get(t.os, t.tag)
    raise Reject(f"{variant.name} is not published for {where}", platform_blocked=True)


def python_fits(release: Release, variant: Variant, t: Target, packages: list[str]) -> None:
    if not t.python:
        return
    if t.python not in variant.pythons:
        known = ", ".join(variant.pythons) or "none known"
        raise Reject(f"{variant.name} has no wheels for Python {t.python} (it has {known})", platform_blocked=True)
    if not release.python_on(t.python, t.os, t.arch):
        where = ", ".join(_platform_words(tag) for tag in release.python_platforms.get(t.python, ()))
        raise Reject(
            f"{variant.name} has no wheels for Python {t.python} on {OS_WORDS.get(t.os, t.os)} {t.arch} "
            f"(torch {release.version} has them only for {where})",
            platform_blocked=True,
        )
    if t.python in release.torch_only_pythons and any(p != "torch" for p in packages):
        others = ", ".join(p for p in packages if p != "torch")
        raise Reject(f"Python {t.python} has torch wheels only in torch {release.version} (no {others})", platform_blocked=True)


OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}


def _platform_words(tag: str) -> str:
    """``manylinux_2_28_aarch64`` -> ``Linux aarch64``."""
    os_, arch, _ = parse_platform(tag)
    return f"{OS_WORDS.get(os_, os_)} {arch}"


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


def _arch_list_for(release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix, fit: Fit) -> tuple[str, ...]:
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
            raise Reject(f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix")
        raise Reject(
            f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix (another CPU architecture's list does not stand in for it)"
        )
    fit.warnings.append(
        f"matrix: the CUDA arch list of torch {version} {variant.name} for {_platform_words(tag)} is unknown; inferred from "
        f"torch {near[0]} {variant.name} for {_platform_words(tag)} (the nearest release with that list): {', '.join(near[1])}; "
        "read from the installed binaries after installing"
    )
    return near[1]


def unfit_gpus(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> str | None:
    """Why a GPU build must not serve as a CPU build here: it sees an NVIDIA GPU it has no kernels for (torch.cuda
    reports the GPU, then every kernel on it fails); None when no such GPU is here."""
    nv = [g for g in gpus if g.vendor == "nvidia" and g.cc]
    if not nv or variant.kind != "cuda":
        return None
    tag = platform_tag_for(release, variant, t)
    try:
        archs = _arch_list_for(release, version, variant, tag, matrix, Fit(release, version, variant))
    except Reject:
        return f"has no known CUDA arch list for {_platform_words(tag)}, so it cannot be shown to run on {gpu_summary(nv)}"
    bad = [g for g in nv if arch_match(archs, g.cc or "") is None]
    if not bad:
        return None
    return (
        f"has no kernels for {gpu_summary(bad)}; it {_describe_arch(archs, bad[0].cc or '')}, and torch.cuda would see the GPU and fail on it, "
        "so it is no CPU build here"
    )


def fit_variant(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> Fit:
    """Check one variant against the target; raises Reject with the reason."""
    tag = platform_tag_for(release, variant, t)
    python_fits(release, variant, t, request.packages)
    fit = Fit(release, version, variant)
    if variant.kind == "cuda":
        row = matrix.cuda_row(variant.cuda)
        if row is None:
            raise Reject(f"{variant.name}: the matrix has no driver data for CUDA {variant.cuda}")
        nv = [g for g in gpus if g.vendor == "nvidia"]
        if not t.driver and (t.driver_cuda or t.driver_runs_cuda):
            verdict, known = _meets_unknown_driver(row, variant, t, matrix)
            if verdict is None or verdict == "no":
                raise Reject(
                    f"{variant.name}: the NVIDIA driver version is unknown, and {known}"
                    + (f", not CUDA {variant.cuda}" if verdict == "no" else f"; that does not show it runs CUDA {variant.cuda}")
                )
            meets = verdict
            fit.warnings.append(f"the NVIDIA driver version is unknown; {known}, so {variant.name} runs" + (" (through CUDA minor-version compatibility)" if meets == "minor-compat" else ""))
        elif not t.driver:
            if nv or request.variant == "auto":
                raise Reject(f"{variant.name}: the NVIDIA driver version is unknown")
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
                raise Reject(
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
                raise Reject(f"{variant.name}: {g.label()} is {sm}; {variant.name} {_describe_arch(archs, g.cc)}")
            if how == "ptx":
                if meets != "full":
                    raise Reject(
                        f"{variant.name}: {g.label()} ({sm}) would need PTX JIT, which needs the driver to meet CUDA {variant.cuda}'s toolkit minimum"
                    )
                fit.warnings.append(f"{g.label()} ({sm}) has no native kernels in {variant.name}; it runs by PTX JIT (slow first start)")
        if variant.unknown:
            fit.warnings.append(f"matrix: {variant.name} of torch {release.version} has unverified facts: {'; '.join(variant.unknown)}")
    elif variant.kind == "rocm":
        amd = [g for g in gpus if g.vendor == "amd"]
        if amd and not variant.gfx:
            raise Reject(f"{variant.name}: its gfx list is unknown to the matrix")
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
            raise Reject(f"{variant.name}: {g.label()} is {g.gfx}; {variant.name} builds {', '.join(variant.gfx)} and no known override applies")
        values = set(overrides.values())
        if len(values) > 1:
            raise Reject(f"{variant.name}: the GPUs need different HSA_OVERRIDE_GFX_VERSION values ({', '.join(sorted(values))}); it applies to the whole process")
        if values:
            value = values.pop()
            as_gfx = {matrix.rocm_override(k).as_gfx for k in overrides}  # type: ignore[union-attr]
            clash = [g for g in native if g.gfx not in as_gfx]
            if clash:
                raise Reject(
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


def accel_kind(t: Target, gpus: list[Gpu]) -> str:
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


def kind_version(v: Variant) -> tuple[int, ...]:
    return release_tuple(v.cuda or v.rocm or "0")


def best_gpu_fit(
    release: Release, version: Version, t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], rejected: list[Rejected] | None
) -> tuple[Fit | None, list[Reject]]:
    fits: list[Fit] = []
    rejects: list[Reject] = []
    for v in release.variants:
        if v.kind != kind or (request.variant != "auto" and v.name != request.variant):
            continue
        try:
            fits.append(fit_variant(release, version, v, t, matrix, request, gpus))
        except Reject as r:
            rejects.append(r)
            if rejected is not None:
                reason = r.reason.removeprefix(f"{v.name}: ")
                rejected.append(Rejected(v.name, f"torch {version}: {reason}", torch=str(version)))
    if not fits:
        return None, rejects
    fits.sort(key=lambda f: kind_version(f.variant), reverse=True)
    best = fits[0]
    if rejected is not None:
        for other in fits[1:]:
            rejected.append(Rejected(other.variant.name, f"torch {version}: fits, but {best.variant.name} is the newer {kind_name(kind)} build", torch=str(version)))
    return best, rejects


def kind_name(kind: str) -> str:
    """How a build kind is written in a sentence: ``CUDA``, ``ROCm``, ``XPU``, ``CPU``."""
    if kind == "cpu":
        return "CPU"
    return next((a.build_label for a in accelerators.ALL if a.build_kind == kind and a.build_label), kind)


def gpu_summary(gpus: list[Gpu]) -> str:
    parts = []
    for g in gpus:
        what = f"sm_{g.cc.replace('.', '')}" if g.cc else g.gfx
        parts.append(f"{g.label()} ({what})" if what else g.label())
    return ", ".join(parts)


def gpu_subsets(gpus: list[Gpu]) -> list[list[Gpu]]:
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


def hide_env(kind: str, kept: list[Gpu], all_gpus: list[Gpu]) -> dict[str, str]:
    if kind == "cuda":
        if all(g.uuid for g in kept):
            return {"CUDA_VISIBLE_DEVICES": ",".join(g.uuid for g in kept)}  # type: ignore[misc]
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}
    acc = next((a for a in accelerators.ALL if a.build_kind == kind and a.hide_var), None)
    return {acc.hide_var if acc and acc.hide_var else "HIP_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}
