"""Rules about stackdoctor's own view: a tool that failed or hung leaves part of the stack unknown."""

from __future__ import annotations

from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import python_exe


def _probes_that(ctx: Ctx, status: str) -> None:
    """One finding per probe that ended with ``status``: the target's is a failure (the torch stack is
    unknown), another's a warning. A target whose ``import torch`` already failed is torch's finding."""
    t = ctx.view.facts.torch
    for p in ctx.probes:
        if p.status != status or (p.name == "target" and t.import_error_kind in ("timeout", "exception", "crash")):
            continue
        target = p.name == "target"
        ctx.add(
            severity="fail" if target else "warn",
            detail="target" if target else "default",
            fix="target" if target else "default",
            facts=[f"probes.{p.name}"],
            probe=p.name,
            error=p.error or "",
            seconds=f"{p.duration_s:g}",
            python=python_exe(ctx.view),
        )



GROUP = "probe"  # the group its rules had when this module was rules/probe.py: `stackdoctor probe`, `explain` and `--list-checks` name it

@rule("probe-timeout", severity="fail", layer="probe")
def probe_timeout(ctx: Ctx) -> None:
    t, n = ctx.view.facts.torch, ctx.view.facts.nvidia
    if t.import_error_kind == "timeout":
        ctx.add(severity="fail", detail="import", fix="import", facts=["torch.import_error"], error=t.import_error or "", python=python_exe(ctx.view))
    _probes_that(ctx, "timeout")
    if n.smi_state == "timeout":
        ctx.add(severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state"], error=n.smi_message or "")


@rule("probe-failed", severity="fail", layer="probe", defers_to=("rocm-kfd-permission",))
def probe_failed(ctx: Ctx) -> None:
    n = ctx.view.facts.nvidia
    _probes_that(ctx, "error")
    if n.smi_state == "error" and n.smi_message and not ctx.has("probe-failed"):
        ctx.add(severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state", "nvidia.smi_message"], error=n.smi_message)
    elif n.smi_state == "cuda-err" and not ctx.view.facts.platform.is_wsl:
        ctx.add(severity="warn", detail="cuda_err", fix="cuda_err", facts=["nvidia.smi_state"])
    kfd_told = ctx.has("rocm-kfd-permission")
    for subject, errors in (("rocm", ctx.view.facts.rocm.tool_errors), ("thunderbolt", ctx.view.facts.thunderbolt.tool_errors)):
        for tool, err in sorted(errors.items()):
            if not err or "not installed" in err or (kfd_told and "kfd" in err.lower()):
                continue  # absence is a fact; kfd trouble is rocm-kfd-permission's
            ctx.add(severity="warn", facts=[f"{subject}.tool_errors.{tool}"], probe=tool, error=err, seconds="")
