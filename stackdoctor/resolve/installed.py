"""The plan against the installed torch: no silent downgrade, what it replaces, the companions it lacks."""

from __future__ import annotations

from dataclasses import replace

from packaging.version import InvalidVersion, Version

from stackdoctor import accelerators
from stackdoctor.facts import Facts
from stackdoctor.matrix import (
    Matrix,
    variant_kind,
)
from stackdoctor.plan import Plan, Request
from stackdoctor.resolve.fit import kind_name
from stackdoctor.resolve.packages import install_command, planned_packages, variant_index_url
from stackdoctor.resolve.target import is_what_if, target_from


def _installed_works(facts: Facts) -> bool:
    """The installed torch imports (or its files are whole) and, for a GPU build, saw its GPU."""
    t = facts.torch
    if not t.installed or t.import_error:
        return False
    kind = variant_kind(t.variant or "")
    acc = accelerators.for_build(kind[0]) if kind else None
    return acc is None or acc.installed_sees_device(t) is not False


def mind_installed(facts: Facts, matrix: Matrix, request: Request, plan: Plan) -> None:
    """No silent downgrade: an unpinned plan older than a working installed build of the same kind keeps that
    build; any other plan older than the installed torch says "downgrade from X to Y" and why; a plan that
    replaces the installed torch says so (``2.14.1+cu130 -> 2.13.0+cpu``)."""
    t = facts.torch
    if request.platform or request.python_version or not t.installed or not plan.torch_version:
        return  # another machine's plan: this one's torch is not what it replaces
    if is_what_if(request):  # --gpu / --gfx / --driver: other accelerators, the same target environment
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
            why = f"no {kind_name(ik[0]) if ik else ''} build of torch {inst} that the matrix knows fits this machine; {new_full} is the newest that does".replace("  ", " ")
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
    index_url = variant_index_url(matrix, request, inst_variant) if labelled and inst_variant else matrix.index_url("pypi")
    pkgs = planned_packages(matrix, replace(request, packages=["torch", *wanted]), inst, inst_variant if labelled else None, index_url, plan.warnings,
                     target_from(facts, matrix, request))
    if len(pkgs) == 1:  # no pairing known for any of them: the warnings say so
        return
    plan.packages, plan.index_url, plan.satisfied = pkgs, index_url, False
    plan.command = install_command(facts, request, [p.requirement for p in pkgs], index_url)
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
