"""macOS's own resolution path (:meth:`Apple.plan_target`): the default PyPI build, which on Apple silicon carries MPS,
on Intel Macs CPU only. The resolver's stages (:mod:`stackdoctor.resolve.planner`) hand a macOS target to it."""

from __future__ import annotations

from packaging.version import Version

from stackdoctor import kinds
from stackdoctor.core.versions import major_minor
from stackdoctor.matrix import Matrix, Release
from stackdoctor.model.plan import Plan, Rejected, Request
from stackdoctor.model.view import MachineView
from stackdoctor.resolve.machine import Target
from stackdoctor.resolve.packages import finish
from stackdoctor.resolve.planner import nothing_suggestions
from stackdoctor.resolve.variant_fit import Fit, cpu_fits


def resolve_macos(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: list[tuple[Release, Version]], plan: Plan) -> Plan:
    """macOS: the default PyPI build (no local suffix); on Apple silicon it carries MPS."""
    rejects: list[str] = []
    first_ok: Fit | None = None
    for rel, ver, fit in cpu_fits(cands, t, matrix, request, rejects):
        if t.arch == "arm64":
            mps = major_minor(rel.mps_min_macos)
            if mps and t.macos and t.macos < mps:
                if first_ok is None:
                    first_ok = fit
                plan.rejected.append(Rejected(kinds.CPU, f"torch {ver}: installs on macOS {t.macos[0]}.{t.macos[1]}, but its MPS needs macOS >= {rel.mps_min_macos}", torch=str(ver)))
                continue
            plan.reasons.append(f"torch {ver}: the newest {'requested ' if request.torch else ''}release for macOS arm64; PyPI's default build carries MPS (Apple GPU): its cpu variant is the Apple GPU build too")
            if first_ok is not None:
                plan.reasons.append(f"an older release with MPS beats torch {first_ok.version} without it on this macOS")
        else:
            plan.reasons.append(f"torch {ver}: Intel Macs get CPU builds only, and {ver} is the newest {'requested ' if request.torch else ''}release with macOS x86_64 wheels")
        return finish(view, matrix, request, fit, plan, pypi=True)
    if first_ok is not None:
        plan.reasons.append(f"torch {first_ok.version}: no release here has MPS on this macOS; CPU only")
        plan.suggestions.append(f"upgrade macOS to >= {first_ok.release.mps_min_macos} for MPS")
        return finish(view, matrix, request, first_ok, plan, pypi=True)
    plan.reasons.extend(rejects[:3] or ["no torch build for this Mac"])
    if t.arch == "x86_64":
        last = matrix.newest_release_for("macos", "x86_64")
        plan.reasons.append(
            f"Intel Macs (macOS x86_64) have wheels only up to torch {last.version}"
            if last is not None
            else "the matrix knows no torch release with macOS x86_64 wheels"
        )
    plan.suggestions.extend(nothing_suggestions(t, matrix, request, cands))
    return plan
