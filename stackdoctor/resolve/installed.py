"""The plan against the installed torch: no silent downgrade, what it replaces, the companions it lacks."""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import InvalidVersion, Version

from stackdoctor import kinds
from stackdoctor.matrix import (
    Matrix,
    variant_kind,
)
from stackdoctor.model.plan import Plan, PlannedPackage, Request
from stackdoctor.model.view import MachineView
from stackdoctor.resolve.machine import is_what_if, target_from
from stackdoctor.resolve.packages import install_command, planned_packages, variant_index_url
from stackdoctor.resolve.variant_fit import kind_name


def _installed_works(view: MachineView) -> bool:
    """The installed torch imports (or its files are whole) and, for a GPU build, saw its GPU."""
    t = view.facts.torch
    if not t.installed or t.import_error:
        return False
    kind = variant_kind(t.variant or "")
    acc = kinds.for_build(kind[0]) if kind else None
    return acc is None or acc.installed_sees_device(t) is not False


@dataclass
class _Installed:
    """The installed torch beside the plan's: versions, variants, and each written in full (``2.14.1+cu130``)."""

    inst: Version
    variant: str | None
    old_full: str
    new: Version
    new_full: str


def _installed(view: MachineView, request: Request, plan: Plan) -> _Installed | None:
    """The installed torch the plan replaces (None: another machine's plan, or nothing installed that says its version).
    A what-if for other GPUs or another driver plans for this same environment: its torch counts by its dist-info too."""
    t = view.facts.torch
    if request.platform or request.python_version or not t.installed or not plan.torch_version:
        return None  # another machine's plan: this one's torch is not what it replaces
    installed = (t.version or t.distributions.get("torch")) if is_what_if(request) else t.version
    if not installed:
        return None
    try:
        inst = Version(installed.split("+", 1)[0])
        new = Version(plan.torch_version)
    except InvalidVersion:
        return None
    variant = t.variant or (installed.split("+", 1)[1] if "+" in installed else None)
    acc = kinds.for_variant(plan.variant)
    new_full = f"{new}+{plan.variant}" if plan.variant and (acc is None or acc.index_builds) else str(new)
    old_full = installed if "+" in installed or not variant else f"{installed}+{variant}"
    return _Installed(inst, variant, old_full, new, new_full)


def mind_installed(view: MachineView, matrix: Matrix, request: Request, plan: Plan) -> None:
    """No silent downgrade: an unpinned plan older than a working installed build of the same kind keeps that
    build; any other plan older than the installed torch says "downgrade from X to Y" and why; a plan that
    replaces the installed torch says so (``2.14.1+cu130 -> 2.13.0+cpu``). A what-if (--gpu / --gfx / --driver:
    other accelerators, the same target environment) only plans: a plan older than its torch says "downgrade"."""
    seen = _installed(view, request, plan)
    if seen is None:
        return
    if is_what_if(request):
        if seen.inst > seen.new:
            _downgrade(plan, seen, "the what-if's GPUs and driver (--gpu, --gfx, --driver) fit no newer build the matrix knows; "
                                   f"the installed torch is {seen.old_full}")
        return
    if (seen.inst, seen.variant) == (seen.new, plan.variant):
        return
    if request.keep_torch and _installed_works(view):  # a companion never moves a working torch
        _keep_installed(view, matrix, request, plan, seen, adding=True)
        return
    if seen.inst <= seen.new:
        plan.reasons.insert(0, f"replaces the installed torch: {seen.old_full} -> {seen.new_full}")
        return
    ik, nk = variant_kind(seen.variant or ""), variant_kind(plan.variant or "")
    same_kind = ik is not None and nk is not None and ik[0] == nk[0]
    gpu_to_cpu = ik is not None and ik[0] != kinds.CPU and nk is not None and nk[0] == kinds.CPU
    works = _installed_works(view)
    paired = next((p for p in plan.packages if p.name in kinds.companion_names()), None)  # the companion pins the planned torch
    if not request.torch and request.variant == "auto" and works and (same_kind or gpu_to_cpu) and paired is None:
        _keep_installed(view, matrix, request, plan, seen)
        return
    _downgrade(plan, seen, _downgrade_why(view, request, seen, paired, works, ik[0] if ik else None))


def _downgrade_why(view: MachineView, request: Request, seen: _Installed, paired: PlannedPackage | None, works: bool, kind: str | None) -> str:
    """Why the plan is older than the installed torch: what the request pins, the companion's pin, the installed
    build not working here, or no build of the installed release fitting this machine."""
    if request.torch and request.torch_asked:
        return f"--torch {request.torch} asks for it"
    if request.torch:  # the install flow planned that release: the newer build is not on the sources
        return f"torch {request.torch} is the newest build of it the sources serve"
    if request.variant != "auto":
        return f"--variant {request.variant} asks for that build, and {seen.new_full} is the newest the matrix knows for this machine"
    if paired is not None:
        return f"{paired.name} {paired.version}, planned beside it, pins torch {seen.new}"
    if not works:
        return f"the installed build does not work here ({view.facts.torch.import_error or 'torch sees no GPU'})"
    return (f"no {kind_name(kind) if kind else ''} build of torch {seen.inst} that the matrix knows fits this machine; "
            f"{seen.new_full} is the newest that does").replace("  ", " ")


def _downgrade(plan: Plan, seen: _Installed, why: str) -> None:
    plan.reasons.insert(0, f"downgrade from {seen.old_full} to {seen.new_full}: {why}")
    plan.warnings.append(f"this plan downgrades torch from {seen.old_full} to {seen.new_full}")


def _keep_installed(view: MachineView, matrix: Matrix, request: Request, plan: Plan, seen: _Installed, *, adding: bool = False) -> None:
    """An unpinned plan older than a working installed build of the same kind keeps that build (no downgrade); so does
    a request that only adds companions (``adding``), whatever the plan would have been."""
    inst, inst_variant = seen.inst, seen.variant
    row = matrix.release(inst)
    unknown = row is None or not row.variants
    if adding:  # what was said of the build it would have planned no longer applies
        plan.reasons[:] = [r for r in plan.reasons if not r.startswith(f"torch {seen.new} ")]
        plan.warnings[:] = [w for w in plan.warnings if not w.startswith(f"torch {seen.new} ")]
        plan.reasons.insert(
            0,
            f"torch {seen.old_full} is installed and works, so adding {', '.join(p for p in request.packages if p != 'torch')} keeps it "
            f"(not {seen.new_full}: --torch or --variant moves torch)",
        )
    else:
        plan.reasons.insert(
            0,
            f"torch {seen.old_full} is installed and works; the newest build the matrix fits here is {seen.new_full}, older, so an unpinned "
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
    _companions_beside(view, matrix, request, plan, inst, inst_variant)


def _companions_beside(view: MachineView, matrix: Matrix, request: Request, plan: Plan, inst: Version, inst_variant: str | None) -> None:
    """The installed torch is kept: the requested companions it lacks are still planned, paired with it (the
    command names the installed torch too, so the installer keeps it)."""
    t = view.facts.torch
    have = {k.lower() for k in t.distributions} | {n for n, v in (("torchvision", t.torchvision_version), ("torchaudio", t.torchaudio_version)) if v}
    wanted = [n for n in request.packages if n in ("torchvision", "torchaudio") and n not in have]
    if not wanted:
        return
    labelled = bool(t.version and "+" in t.version and inst_variant)
    index_url = variant_index_url(matrix, request, inst_variant) if labelled and inst_variant else matrix.index_url("pypi")
    pkgs = planned_packages(matrix, replace(request, packages=["torch", *wanted]), inst, inst_variant if labelled else None, index_url, plan.warnings,
                     target_from(view, matrix, request))
    if len(pkgs) == 1:  # no pairing known for any of them: the warnings say so
        return
    plan.packages, plan.index_url, plan.satisfied = pkgs, index_url, False
    plan.command = install_command(view, request, [p.requirement for p in pkgs], index_url)
    plan.reasons.insert(1, f"{', '.join(f'{p.name} {p.version}' for p in pkgs[1:])} (paired with the installed torch {inst}): missing, planned beside it")
