"""Whether a CUDA build fits NVIDIA GPUs and their driver (the NVIDIA kind's :meth:`~.base.Accelerator.fit`): the
driver meets the build's CUDA toolkit minimum (or only the major's minor-version-compatibility floor: still eligible,
with a warning; under WSL2 and on Windows the Windows column), and EVERY GPU runs its arch list
(:func:`stackdoctor.matrix.arch_match`), natively or by PTX JIT. Pure: the matrix and the target, no I/O."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from stackdoctor.core.versions import major_minor
from stackdoctor.kinds.base import FitNotes, FitTarget, TargetDevice, Unfit, device_summary, unverified
from stackdoctor.matrix import arch_match, driver_meets, platform_words

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.matrix import CudaRow, Matrix, Release, Variant

__all__ = ["arch_list_for", "cannot_serve_cpu", "describe_arch", "fit_cuda", "gpu_request_cc", "meets_unknown_driver"]


class CudaTarget(FitTarget, Protocol):
    """What NVIDIA's fit reads of the resolver's target beyond every kind's: the newest CUDA its driver runs (a tool's
    or a CUDA torch's word), or the CUDA of a torch build that initialised on it."""

    driver_cuda: str | None
    driver_runs_cuda: str | None



def gpu_request_cc(text: str, matrix: Matrix) -> str | None:
    """The compute capability a ``--gpu`` value names: ``sm_90`` / ``sm90`` / ``9.0``, or a GPU name the matrix knows."""
    t = text.strip()
    m = re.match(r"^sm_?(\d+)(\d)$", t, re.I) or re.match(r"^(\d{1,2})\.(\d)$", t)
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    return matrix.gpu_compute_capability(t)


def newest_known_cc(matrix: Matrix) -> tuple[int, int] | None:
    """The newest compute capability the matrix names anywhere: a GPU row, a Jetson row, a build's arch list."""
    ccs: list[tuple[int, int]] = []
    for cc in (*matrix.gpus.values(), *(c for j in matrix.jetson for c in j.gpu_cc)):
        m = re.match(r"^(\d+)\.(\d+)", cc or "")
        if m:
            ccs.append((int(m.group(1)), int(m.group(2))))
    for r in matrix.releases:
        for v in r.variants:
            for a in (*v.arch_list, *(x for archs in v.arch_by_platform.values() for x in archs)):
                m = re.match(r"^(?:sm|compute)_(\d+)(\d)[a-z]?$", a)
                if m:
                    ccs.append((int(m.group(1)), int(m.group(2))))
    return max(ccs) if ccs else None


def impossible_cc(text: str, matrix: Matrix) -> str | None:
    """The sentence for a ``--gpu sm_XY`` newer than every compute capability the matrix knows (no such GPU is made
    that any source names); None for a name, or a compute capability within what is known."""
    t = text.strip()
    m = re.match(r"^sm_?(\d+)(\d)$", t, re.I) or re.match(r"^(\d{1,3})\.(\d)$", t)
    newest = newest_known_cc(matrix)
    if not m or newest is None or (int(m.group(1)), int(m.group(2))) <= newest:
        return None
    return (f"--gpu {t}: no NVIDIA GPU with compute capability {int(m.group(1))}.{m.group(2)} is known (the newest any GPU or build in the "
            f"matrix names is {newest[0]}.{newest[1]}, sm_{newest[0]}{newest[1]}); name a GPU (--gpu \"RTX 4090\") or its sm_XY.")


def describe_arch(archs: tuple[str, ...], cc: str) -> str:
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


def arch_list_for(release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix, fit: FitNotes) -> tuple[str, ...]:
    """The CUDA arch list that judges the GPUs for the wheel of ``tag``: the build's own list for that platform;
    where it is unknown, the same build's Linux x86_64 list for a platform of the same CPU architecture (Windows),
    else the nearest release's own list for that platform (marked inferred). Another CPU architecture's list never
    stands in (an aarch64 wheel carries fewer architectures than the x86_64 one); none known: the build is refused."""
    if variant.arch_known_for(tag):
        return variant.arch_for(tag)
    other = variant.arch_fallback(tag)
    if other is not None:
        fit.warnings.append(
            f"matrix: the CUDA arch list of torch {release.version} {variant.name} for {platform_words(tag)} is unknown; "
            f"its {other[0]} list (same release, CUDA {variant.cuda}) stands in to judge the GPUs: {', '.join(other[1])}"
        )
        return other[1]
    same_arch = tag.endswith(("x86_64", "amd64"))
    near = None if same_arch else matrix.platform_arch_list(version, variant.name, tag)
    if near is None:
        if same_arch:
            raise Unfit(f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix")
        raise Unfit(
            f"{variant.name}: its CUDA arch list for {tag} is unknown to the matrix (another CPU architecture's list does not stand in for it)"
        )
    fit.warnings.append(
        f"matrix: the CUDA arch list of torch {version} {variant.name} for {platform_words(tag)} is unknown; inferred from "
        f"torch {near[0]} {variant.name} for {platform_words(tag)} (the nearest release with that list): {', '.join(near[1])}; "
        "read from the installed binaries after installing"
    )
    return near[1]


class _Notes:
    """A fit nobody reads: where :func:`arch_list_for` may put its warnings when only the list is wanted."""

    def __init__(self) -> None:
        self.warnings: list[str] = []
        self.reasons: list[str] = []
        self.env: dict[str, str] = {}


def cannot_serve_cpu(release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix, nv: Sequence[TargetDevice]) -> str | None:
    """Why a CUDA build must not serve as a CPU build here: it sees an NVIDIA GPU (of ``nv``, those with a known
    compute capability) it has no kernels for (torch.cuda reports the GPU, then every kernel on it fails); None when
    no such GPU is here."""
    if not nv:
        return None
    try:
        archs = arch_list_for(release, version, variant, tag, matrix, _Notes())
    except Unfit:
        return f"has no known CUDA arch list for {platform_words(tag)}, so it cannot be shown to run on {device_summary(nv)}"
    bad = [g for g in nv if arch_match(archs, g.cc or "") is None]
    if not bad:
        return None
    return (
        f"has no kernels for {device_summary(bad)}; it {describe_arch(archs, bad[0].cc or '')}, and torch.cuda would see the GPU and fail on it, "
        "so it is no CPU build here"
    )


def fit_cuda(fit: FitNotes, release: Release, version: Version, variant: Variant, tag: str, t: CudaTarget, matrix: Matrix,
             nv: Sequence[TargetDevice], auto: bool) -> None:
    """The NVIDIA kind's fit of a CUDA build: the driver, then every GPU of ``nv``; raises :class:`Unfit` with the reason."""
    row = matrix.cuda_row(variant.cuda)
    if row is None:
        raise Unfit(f"{variant.name}: the matrix has no driver data for CUDA {variant.cuda}")
    meets = _driver_fit(fit, row, variant, t, matrix, bool(nv), auto)
    archs = arch_list_for(release, version, variant, tag, matrix, fit) if nv else variant.arch_for(tag)
    _gpus_fit(fit, variant, archs, nv, meets)
    unverified(fit, release, variant)


def _driver_fit(fit: FitNotes, row: CudaRow, variant: Variant, t: CudaTarget, matrix: Matrix, has_gpus: bool, auto: bool) -> str:
    """"full" | "minor-compat": how the target's driver meets the build's CUDA; raises :class:`Unfit` when it does not."""
    if not t.driver and (t.driver_cuda or t.driver_runs_cuda):
        verdict, known = meets_unknown_driver(row, variant, t, matrix)
        if verdict is None or verdict == "no":
            raise Unfit(
                f"{variant.name}: the NVIDIA driver version is unknown, and {known}"
                + (f", not CUDA {variant.cuda}" if verdict == "no" else f"; that does not show it runs CUDA {variant.cuda}")
            )
        fit.warnings.append(f"the NVIDIA driver version is unknown; {known}, so {variant.name} runs" + (" (through CUDA minor-version compatibility)" if verdict == "minor-compat" else ""))
        return verdict
    if not t.driver:
        if has_gpus or auto:
            raise Unfit(f"{variant.name}: the NVIDIA driver version is unknown")
        fit.warnings.append(f"no NVIDIA driver on this machine: cannot check that the target's driver meets CUDA {variant.cuda}")
        return "full"
    return _known_driver_fit(fit, row, variant, t)


def _known_driver_fit(fit: FitNotes, row: CudaRow, variant: Variant, t: CudaTarget) -> str:
    assert t.driver is not None
    meets = driver_meets(row, t.driver, windows=t.windows_driver)
    col = "Windows" if t.windows_driver else "Linux"
    minimum = (row.min_driver_windows if t.windows_driver else row.min_driver_linux)
    floor = (row.minor_compat_floor_windows if t.windows_driver else row.minor_compat_floor_linux)
    target_driver = minimum or floor
    if meets == "no":
        wsl = " (the Windows driver, as seen from WSL2)" if t.wsl else ""
        raise Unfit(
            f"{variant.name}: driver {t.driver}{wsl} is older than CUDA {variant.cuda} needs ({col}: >= {target_driver}"
            + (f"; minor-version-compatibility floor {floor}" if floor and minimum and floor != minimum else "")
            + ")",
            driver_needed=target_driver,
            driver_floor=floor if floor and floor != target_driver else None,
        )
    if meets == "minor-compat":
        fit.warnings.append(
            f"driver {t.driver} is below CUDA {variant.cuda}'s toolkit minimum ({col}: {minimum}) but meets the "
            f"CUDA {(variant.cuda or '?').split('.')[0]}.x minor-version-compatibility floor ({floor}): {variant.name} runs, "
            f"but PTX JIT and features that need a newer driver can fail; upgrade the driver to >= {minimum}"
        )
    return meets


def _gpus_fit(fit: FitNotes, variant: Variant, archs: tuple[str, ...], nv: Sequence[TargetDevice], meets: str) -> None:
    """Every GPU runs the build's kernels (natively, or by PTX JIT where the driver meets the toolkit minimum)."""
    for g in nv:
        if g.cc is None:
            fit.warnings.append(f"{g.label()}: compute capability unknown; could not check that {variant.name} has kernels for it")
            continue
        how = arch_match(archs, g.cc)
        sm = "sm_" + g.cc.replace(".", "")
        if how is None:
            raise Unfit(f"{variant.name}: {g.label()} is {sm}; {variant.name} {describe_arch(archs, g.cc)}")
        if how == "ptx":
            if meets != "full":
                raise Unfit(
                    f"{variant.name}: {g.label()} ({sm}) would need PTX JIT, which needs the driver to meet CUDA {variant.cuda}'s toolkit minimum"
                )
            fit.warnings.append(f"{g.label()} ({sm}) has no native kernels in {variant.name}; it runs by PTX JIT (slow first start)")


def meets_unknown_driver(row: CudaRow, variant: Variant, t: CudaTarget, matrix: Matrix) -> tuple[str | None, str]:
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
    verdict = driver_meets(row, floor, windows=t.windows_driver) if floor else "no"
    return (verdict if verdict != "no" else None), how
