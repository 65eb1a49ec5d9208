"""Whether a ROCm build fits AMD GPUs (the AMD kind's :meth:`~.base.Accelerator.fit`): every GPU's gfx target is in
the build's gfx list, or a known ``HSA_OVERRIDE_GFX_VERSION`` makes it load one that is (then the plan's environment
carries it; one value for the whole process). Pure: the matrix and the target, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from stackdoctor.accelerators.base import FitNotes, TargetDevice, Unfit, unverified

if TYPE_CHECKING:
    from stackdoctor.matrix import Matrix, Release, Variant

__all__ = ["fit_rocm"]


def fit_rocm(fit: FitNotes, release: Release, variant: Variant, matrix: Matrix, amd: Sequence[TargetDevice]) -> None:
    """The AMD kind's fit of a ROCm build on the GPUs ``amd``; raises :class:`Unfit` with the reason."""
    if amd and not variant.gfx:
        raise Unfit(f"{variant.name}: its gfx list is unknown to the matrix")
    overrides, native = _overrides(fit, variant, matrix, amd)
    values = set(overrides.values())
    if len(values) > 1:
        raise Unfit(f"{variant.name}: the GPUs need different HSA_OVERRIDE_GFX_VERSION values ({', '.join(sorted(values))}); it applies to the whole process")
    if values:
        _apply_override(fit, variant, matrix, amd, overrides, native, values.pop())
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
