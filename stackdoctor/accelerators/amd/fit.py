"""Whether a ROCm build fits AMD GPUs (the AMD kind's :meth:`~.base.Accelerator.fit`): every GPU's gfx target is in
the build's gfx list, or a known ``HSA_OVERRIDE_GFX_VERSION`` makes it load one that is (then the plan's environment
carries it; one value for the whole process), and whether the build's own ROCm user space is inside AMD's window for the
host's kernel driver (:func:`userspace_window`). Pure: the matrix and the target, no I/O."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from stackdoctor.kinds.base import FitNotes, TargetDevice, Unfit, unverified

if TYPE_CHECKING:
    from stackdoctor.matrix import Matrix, Release, Variant
    from stackdoctor.matrix.kmd_table import KernelUserSpace

__all__ = ["RocmHost", "fit_rocm", "userspace_window"]


@dataclass(frozen=True)
class RocmHost:
    """What AMD's fit reads of the host beyond its GPUs (the kind's :meth:`~.base.Accelerator.fit_host`, in the resolver's
    ``Target.hosts``): the host's ROCm user space (stated or found, and from where) and its amdgpu kernel driver."""

    rocm_userspace: str | None = None  # the host's ROCm user space release (the what-if's, else the reconciled one)
    rocm_userspace_source: str | None = None  # where it was read ("--rocm-userspace", "file:/opt/rocm/.info/version")
    amdgpu_version: str | None = None  # the loaded amdgpu kernel driver's declared version, where it declares one
    amdgpu_loaded: bool | None = None  # amdgpu is loaded (this machine's: a what-if's kernel driver is not known)



def userspace_window(matrix: Matrix, host_rocm: str | None, amdgpu_version: str | None, build_rocm: str | None) -> tuple[str, KernelUserSpace | None]:
    """Whether a build's ROCm user space ``build_rocm`` ("7.2") is one AMD supports on the host's kernel driver:
    ``("inside" | "outside" | "unknown", the driver's row)``. The driver's row: the loaded amdgpu's own version where it
    names a listed release apart from ROCm (30.30.2 -> "30.30"; amdgpu-dkms's 6.x numbers are not ROCm releases), else
    the driver the host's ROCm release ships (``rocm`` of a row). No row, or no build release: unknown."""
    rows: tuple[KernelUserSpace, ...] = matrix.table("rocm_kernel_user_space") or ()
    row = None
    mm = re.match(r"^(\d+)\.(\d+)", amdgpu_version or "")
    if mm and int(mm.group(1)) >= 30:
        row = next((r for r in rows if r.driver == f"{mm.group(1)}.{mm.group(2)}"), None)
    hm = re.match(r"^(\d+)\.(\d+)", host_rocm or "")
    if row is None and hm and not mm:
        row = next((r for r in rows if r.rocm == f"{hm.group(1)}.{hm.group(2)}"), None)
    if row is None or not build_rocm:
        return "unknown", row
    return ("inside" if ".".join(build_rocm.split(".")[:2]) in row.user_space else "outside"), row


def _window_note(fit: FitNotes, variant: Variant, matrix: Matrix, target: RocmHost) -> None:
    """The build's ROCm user space against the host's kernel driver: a warning outside AMD's window or where unknown."""
    host, kmod = target.rocm_userspace, target.amdgpu_version
    if not (host or kmod):
        return  # nothing stated or seen of the host's ROCm: nothing to compare
    build = variant.rocm or (variant.name.removeprefix("rocm") if variant.name.startswith("rocm") else None)
    in_kernel = not kmod and target.amdgpu_loaded is True  # the kernel's own amdgpu: not a driver AMD's table lists
    state, row = userspace_window(matrix, None if in_kernel else host, kmod, build)
    if kmod:
        how = f"amdgpu {kmod}"
    elif in_kernel:
        how = "the kernel's own amdgpu, which declares no version"
    else:
        how = f"the one ROCm {host} ships, assumed from {target.rocm_userspace_source or '--rocm-userspace'}"
    if state == "outside" and row is not None:
        fit.warnings.append(
            f"{variant.name} brings ROCm {build}'s user space, outside AMD's window for the host's kernel driver ({how}), "
            f"which supports ROCm {', '.join(row.user_space)} (source: {row.source})"
        )
    elif state == "unknown":
        fit.warnings.append(
            f"whether {variant.name}'s ROCm {build or '?'} user space runs on the host's kernel driver ({how}) is unknown: "
            "AMD's kernel / user space table (compat_matrix/rocm.yaml) does not list that driver"
        )
    elif row is not None:
        fit.reasons.append(f"{variant.name}'s ROCm {build} user space is inside AMD's window for the host's kernel driver ({how}; source: {row.source})")


def fit_rocm(fit: FitNotes, release: Release, variant: Variant, matrix: Matrix, amd: Sequence[TargetDevice], target: RocmHost | None = None) -> None:
    """The AMD kind's fit of a ROCm build on the GPUs ``amd``; raises :class:`Unfit` with the reason."""
    if amd and not variant.gfx:
        raise Unfit(f"{variant.name}: its gfx list is unknown to the matrix")
    overrides, native = _overrides(fit, variant, matrix, amd)
    values = set(overrides.values())
    if len(values) > 1:
        raise Unfit(f"{variant.name}: the GPUs need different HSA_OVERRIDE_GFX_VERSION values ({', '.join(sorted(values))}); it applies to the whole process")
    if values:
        _apply_override(fit, variant, matrix, amd, overrides, native, values.pop())
    if target is not None:
        _window_note(fit, variant, matrix, target)
    unverified(fit, release, variant)


def _overrides(fit: FitNotes, variant: Variant, matrix: Matrix, amd: Sequence[TargetDevice]) -> tuple[dict[str, str], list[TargetDevice]]:
    """gfx -> the override value that makes it load the build's code, and the GPUs the build runs natively."""
    overrides: dict[str, str] = {}
    native: list[TargetDevice] = []
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
        raise Unfit(f"{variant.name}: {g.label()} is {g.gfx}; {variant.name} builds {', '.join(variant.gfx)} and no known override applies")
    return overrides, native


def _apply_override(fit: FitNotes, variant: Variant, matrix: Matrix, amd: Sequence[TargetDevice], overrides: dict[str, str],
                    native: list[TargetDevice], value: str) -> None:
    as_gfx = {matrix.rocm_override(k).as_gfx for k in overrides}  # type: ignore[union-attr]
    clash = [g for g in native if g.gfx not in as_gfx]
    if clash:
        raise Unfit(
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
