"""Rules about stackdoctor's own view: a tool that failed or hung leaves part of the stack unknown."""

from __future__ import annotations

from stackdoctor import kinds
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
    t = ctx.view.facts.torch
    if t.import_error_kind == "timeout":
        ctx.add(severity="fail", detail="import", fix="import", facts=["torch.import_error"], error=t.import_error or "", python=python_exe(ctx.view))
    _probes_that(ctx, "timeout")
    for a in kinds.ALL:  # a kind's own tools that hung
        a.probe_findings(ctx, "timeout")


@rule("probe-failed", severity="fail", layer="probe")  # a kind's finding that says a tool's error first precedes it
def probe_failed(ctx: Ctx) -> None:
    _probes_that(ctx, "error")
    for a in kinds.ALL:  # a kind's own tools that failed
        a.probe_findings(ctx, "error")
    for tool, err in sorted(ctx.view.facts.thunderbolt.tool_errors.items()):
        if not err or "not installed" in err or any(a.tool_error_told(ctx, err) for a in kinds.ALL):
            continue  # absence is a fact; what a kind's finding says is that finding's
        ctx.add(severity="warn", facts=[f"thunderbolt.tool_errors.{tool}"], probe=tool, error=err, seconds="")
