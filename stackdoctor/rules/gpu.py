"""Rules about the GPUs: lost from the driver, unhealthy, or not among the torch build's targets."""

from __future__ import annotations

import re
from typing import Any

from stackdoctor import matrix as mx
from stackdoctor.facts import Evidence, GpuView, NvidiaGpu
from stackdoctor.reconcile import bus_key
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import (
    amd_gpus,
    built_for_files,
    gpu_label,
    install_fix,
    nvidia_gpus,
    nvidia_pci,
    sm,
    variant_name,
    variant_row,
    visible_to_torch,
)


def _label(g: NvidiaGpu) -> str:
    return f"GPU{g.index} {g.name or '?'}"


@rule("gpu-lost", severity="fail", layer="gpu", defers_to=("driver-missing", "driver-library-mismatch", "container-no-gpu"))
def gpu_lost(ctx: Ctx) -> None:
    n = ctx.facts.nvidia
    pci = nvidia_pci(ctx.facts)
    if ctx.has("driver-missing", "driver-library-mismatch", "container-no-gpu"):
        return
    if n.smi_state == "no-devices":
        ctx.add(
            facts=["nvidia.smi_state", "platform.nvidia_pci_devices"],
            message=n.smi_message or "No devices were found",
            pci=len(pci),
            seen=0,
            flavor=n.kernel_module_flavor or "?",
        )
        return
    given, lost = ctx.facts.driven("nvidia"), ctx.facts.lost("nvidia")
    if pci and given and lost and len(given) < len(pci) and (n.nvml_state == "ok" or n.smi_state == "ok"):
        gone = {g.bus_id for g in lost}
        ctx.add(
            detail="partial",
            facts=["nvidia.gpus", "platform.nvidia_pci_devices", "reconciled.gpus"],
            message=", ".join(d.address for d in pci if bus_key(d.address) in gone) or "-",
            pci=len(pci),
            seen=len(given),
            flavor=n.kernel_module_flavor or "?",
        )


@rule("gpu-ecc-errors", severity="fail", layer="gpu")
def gpu_ecc_errors(ctx: Ctx) -> None:
    for g in ctx.facts.nvidia.gpus:
        if (g.ecc_uncorrected or 0) > 0 or g.retired_pages_pending:
            ctx.add(
                detail="pending" if g.retired_pages_pending and not g.ecc_uncorrected else "default",
                facts=[f"nvidia.gpus[{g.index}].ecc_uncorrected", f"nvidia.gpus[{g.index}].retired_pages_pending"],
                gpu=_label(g),
                index=g.index,
                count=g.ecc_uncorrected or 0,
            )


_BAD_THROTTLE = ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")


@rule("gpu-throttled", severity="warn", layer="gpu")
def gpu_throttled(ctx: Ctx) -> None:
    for g in ctx.facts.nvidia.gpus:
        bad = [r for r in g.throttle_reasons if r in _BAD_THROTTLE]
        if bad:
            ctx.add(facts=[f"nvidia.gpus[{g.index}].throttle_reasons"], gpu=_label(g), index=g.index, reasons=", ".join(bad))


# Data-center parts, where persistence mode is expected on (names as nvidia-smi prints them, "NVIDIA " dropped).
_DATACENTER = re.compile(
    r"\b(tesla|[abhl]\d{1,3}[a-z]?|gh200|gb200|gb300|b[12]00|b300|h[12]00|h800|a800|l40s?|t4|v100|p100|p40|mi\d{3})\b", re.I
)


@rule("gpu-persistence-off", severity="warn", layer="gpu")
def gpu_persistence_off(ctx: Ctx) -> None:
    f = ctx.facts
    if f.platform.system not in (None, "Linux") or f.platform.is_wsl:
        return
    off = [g for g in f.nvidia.gpus if g.persistence_mode == "Disabled" and g.name and _DATACENTER.search(g.name.replace("NVIDIA ", ""))]
    if off:
        ctx.add(facts=[f"nvidia.gpus[{g.index}].persistence_mode" for g in off], gpus=", ".join(_label(g) for g in off))


@rule("gpu-arch-unsupported", severity="fail", layer="gpu")
def gpu_arch_unsupported(ctx: Ctx) -> None:
    """A GPU (seen by any witness: the driver's tools, torch, the matrix's name lookup) whose compute
    capability the installed CUDA build has no kernels for; or a kernel that said so itself."""
    f, t = ctx.facts, ctx.facts.torch
    if built_for_files(f) != "cuda" or f.jetson.is_jetson:
        return
    arch = list(t.arch_list)
    source = t.sources.get("arch_list") or "torch.cuda.get_arch_list()"
    if not arch:
        v = variant_row(ctx)
        if v is not None:
            arch = list(v.arch_for(f.python.platform_tag))
            source = "compat matrix"
    proof = next((e for e in f.evidence if e.proves == "gpu-arch-unsupported"), None)
    fired = False
    if arch:
        for g in nvidia_gpus(f):
            if not visible_to_torch(g, f.environment):
                continue  # hidden from torch (CUDA_VISIBLE_DEVICES): its kernels never run there
            if g.compute_capability and not mx.arch_runs(arch, g.compute_capability):
                fired = True
                ctx.add(
                    detail="default" if proof is None else "proven",
                    facts=[f"reconciled.gpus[{g.index}].compute_capability", "torch.arch_list"],
                    fix_text=install_fix(ctx, exclude=variant_name(f)),
                    gpu=gpu_label(g),
                    sm=sm(g.compute_capability),
                    cc=g.compute_capability,
                    torch=t.version,
                    arch=" ".join(arch),
                    source=source,
                    witnesses=", ".join(dict.fromkeys([g.sources.get("compute_capability", "?")] + g.witnesses)),
                    error=proof.line if proof else "",
                )
    if proof is not None and not fired:
        ctx.add(
            detail="evidence",
            facts=[proof.source],
            fix_text=install_fix(ctx, exclude=variant_name(f)),
            torch=t.version,
            arch=" ".join(arch) or "?",
            error=proof.line,
            where=proof.source,
        )


@rule("rocm-gfx-unsupported", severity="fail", layer="gpu")
def rocm_gfx_unsupported(ctx: Ctx) -> None:
    f = ctx.facts
    gpus = amd_gpus(f)
    if built_for_files(f) != "rocm" or not gpus:
        return
    v = variant_row(ctx)
    if v is None or not v.gfx:
        return
    env = f.environment
    override = env.get("HSA_OVERRIDE_GFX_VERSION") or f.rocm.hsa_override_gfx_version
    proof = next((e for e in f.evidence if e.proves == "rocm-gfx-unsupported"), None)
    unsupported = [g for g in gpus if g.gfx and not mx.gfx_supported(v, g.gfx) and (g.integrated or visible_to_torch(g, env))]
    if not unsupported:
        return
    for g in [g for g in unsupported if not g.integrated]:
        _gfx_unsupported(ctx, g, v, override, proof)
    _igpus_unsupported(ctx, gpus, [g for g in unsupported if g.integrated], v)


def _gfx_unsupported(ctx: Ctx, g: GpuView, v: Any, override: str | None, proof: Evidence | None) -> None:
    """A discrete AMD GPU the ROCm build has no code for: the documented override, a wrong one, or another build."""
    assert g.gfx is not None
    t = ctx.facts.torch
    ov = ctx.matrix.rocm_override(g.gfx) if ctx.matrix is not None else None
    common = dict(
        gpu=f"GPU{g.index} {g.name or ''}".strip(),
        gfx=g.gfx,
        variant=v.name,
        torch=t.version,
        targets=" ".join(v.gfx),
        witnesses=", ".join(g.witnesses),
        error=proof.line if proof else "",
    )
    if ov is not None and override == ov.value:
        return  # running on the documented override
    if ov is not None and override and override != ov.value:
        ctx.add(
            detail="wrong_override",
            fix="override",
            facts=["reconciled.gpus", "environment.HSA_OVERRIDE_GFX_VERSION"],
            override=override,
            value=ov.value,
            as_gfx=ov.as_gfx,
            **common,
        )
        return
    ctx.add(
        detail="proven" if proof else "default",
        fix="override" if ov is not None else None,
        fix_text=None if ov is not None else install_fix(ctx, exclude=v.name),
        facts=["reconciled.gpus", "torch.hip"] + ([proof.source] if proof else []),
        override=override or "-",
        value=ov.value if ov else "",
        as_gfx=ov.as_gfx if ov else "",
        **common,
    )


def _igpus_unsupported(ctx: Ctx, gpus: list[GpuView], igpus_bad: list[GpuView], v: Any) -> None:
    """Integrated AMD GPUs the build has no code for, beside a GPU it runs on: hide them (HIP_VISIBLE_DEVICES)."""
    f, t = ctx.facts, ctx.facts.torch
    supported = [g for g in gpus if g.gfx and mx.gfx_supported(v, g.gfx)]
    hip_visible = f.environment.get("HIP_VISIBLE_DEVICES") or f.rocm.hip_visible_devices
    if igpus_bad and (supported or [g for g in gpus if not g.integrated]):
        keep = [g for g in gpus if not g.integrated]
        if hip_visible is not None and all(str(g.index) not in hip_visible.split(",") for g in igpus_bad):
            return
        ctx.add(
            severity="warn",
            detail="igpu",
            fix="igpu",
            facts=["reconciled.gpus", "environment.HIP_VISIBLE_DEVICES"],
            gpu=", ".join(f"GPU{g.index} {g.name or ''} ({g.gfx})".replace("  ", " ") for g in igpus_bad),
            gfx=", ".join(g.gfx or "?" for g in igpus_bad),
            variant=v.name,
            torch=t.version,
            targets=" ".join(v.gfx),
            keep=",".join(str(g.index) for g in keep),
        )
