"""AMD's own findings, declared through the seam (:attr:`Amd.rules` names this module): a ROCm build without code
for a GPU's gfx target (the documented HSA_OVERRIDE_GFX_VERSION, a wrong one, another build, or integrated GPUs to
hide). Texts in ``stackdoctor/locale/en.yaml`` and ``zh.yaml``; the rule keeps its layer's group (``gpu``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stackdoctor.model.facts import Evidence, GpuView
from stackdoctor.model.view import MachineView
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for_files, install_fix, variant_row, visible_to_torch


def amd_gpus(facts: MachineView) -> list[GpuView]:
    return list(facts.devices("amd"))


def amd_pci(facts: MachineView) -> list[Any]:
    return [d for d in facts.facts.platform.amd_pci_devices if (d.class_id or "").lower().startswith("0x03")]



@dataclass(frozen=True)
class Targets:
    """The gfx targets the installed build carries code for, and the witness: its own libraries, torch, or the matrix."""

    name: str  # the variant ("rocm6.2.4")
    gfx: tuple[str, ...]
    source: str


def build_targets(ctx: Ctx) -> Targets | None:
    """The build's own code objects first (``libtorch_hip.so``'s offload bundles, read from the files), then what a
    running torch listed, and the matrix's list only where neither is there (said as inferred)."""
    t = ctx.view.facts.torch
    v = variant_row(ctx)
    name = (v.name if v is not None else None) or t.variant or "?"
    files = [a for a in t.arch_list_files if a.lower().startswith("gfx")]
    if files and not any(a.endswith("-generic") for a in files):  # a generic code object runs on a family: not judged here
        return Targets(name, tuple(files), t.sources.get("arch_list_files") or "torch's libraries")
    own = [a for a in t.arch_list if a.lower().startswith("gfx")]
    if own and t.imported and not any(a.endswith("-generic") for a in own):
        return Targets(name, tuple(own), "torch.cuda.get_arch_list()")
    if v is not None and v.gfx:
        return Targets(name, tuple(v.gfx), "inferred from the matrix: torch's libraries could not be read")
    return None


def carries(targets: Targets, gfx: str) -> bool:
    """True when the build has code objects for ``gfx`` (feature suffixes like ":xnack-" ignored on both sides)."""
    want = gfx.split(":", 1)[0].lower()
    return any(x.split(":", 1)[0].lower() == want for x in targets.gfx)


@rule("rocm-gfx-unsupported", severity="fail", layer="gpu", precedes=("torch-import-failed",))
def rocm_gfx_unsupported(ctx: Ctx) -> None:
    f = ctx.view
    gpus = amd_gpus(f)
    if built_for_files(f) != "rocm" or not gpus:
        return
    v = build_targets(ctx)
    env = f.facts.environment
    override = env.get("HSA_OVERRIDE_GFX_VERSION") or f.facts.rocm.hsa_override_gfx_version
    proof = next((e for e in f.evidence if e.proves == "rocm-gfx-unsupported"), None)
    if v is None:
        if proof is not None:  # torch said so, and neither the files nor the matrix know the build's targets
            t = f.facts.torch
            ctx.add(detail="evidence", fix_text=install_fix(ctx, exclude=t.variant), facts=[proof.source, "reconciled.gpus"],
                    gpu=", ".join(f"GPU{g.index} {g.name or ''} ({g.gfx or '?'})".replace("  ", " ") for g in gpus), torch=t.version or t.variant or "?",
                    error=proof.line, where=proof.source)
        return
    unsupported = [g for g in gpus if g.gfx and not carries(v, g.gfx) and (g.integrated or visible_to_torch(g, env))]
    if not unsupported:
        return
    for g in [g for g in unsupported if not g.integrated]:
        _gfx_unsupported(ctx, g, v, override, proof)
    _igpus_unsupported(ctx, gpus, [g for g in unsupported if g.integrated], v)


def _gfx_unsupported(ctx: Ctx, g: GpuView, v: Targets, override: str | None, proof: Evidence | None) -> None:
    """A discrete AMD GPU the ROCm build has no code for: the documented override, a wrong one, or another build."""
    assert g.gfx is not None
    t = ctx.view.facts.torch
    ov = ctx.matrix.rocm_override(g.gfx) if ctx.matrix is not None else None
    if ov is not None and not carries(v, ov.as_gfx):
        ov = None  # the override makes it load code the build does not carry either
    common: dict[str, Any] = dict(
        gpu=f"GPU{g.index} {g.name or ''}".strip(),
        gfx=g.gfx,
        variant=v.name,
        torch=t.version,
        targets=" ".join(v.gfx),
        source=v.source,
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


def _igpus_unsupported(ctx: Ctx, gpus: list[GpuView], igpus_bad: list[GpuView], v: Targets) -> None:
    """Integrated AMD GPUs the build has no code for, beside a GPU it runs on: hide them (HIP_VISIBLE_DEVICES)."""
    f, t = ctx.view, ctx.view.facts.torch
    supported = [g for g in gpus if g.gfx and carries(v, g.gfx)]
    hip_visible = f.facts.environment.get("HIP_VISIBLE_DEVICES") or f.facts.rocm.hip_visible_devices
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


def kfd_refused(f: MachineView) -> str | None:
    """The line that says this user cannot open /dev/kfd: the probe's own open(), else rocminfo's error text."""
    r = f.facts.rocm
    if r.kfd_present and r.kfd_accessible is False:
        return r.kfd_error or "permission denied"
    proof = next((e for e in f.evidence if e.proves == "rocm-kfd-permission"), None)
    return proof.line if proof else None


# the driver layer's AMD findings, in their places when they were rules/driver.py's: after wsl-driver
@rule("amdgpu-not-loaded", severity="fail", layer="driver", after="wsl-driver")
def amdgpu_not_loaded(ctx: Ctx) -> None:
    r, p = ctx.view.facts.rocm, ctx.view.facts.platform
    if p.system not in (None, "Linux") or p.is_wsl:
        return
    amd = amd_pci(ctx.view)
    dgpu = [d for d in amd if d.driver != "amdgpu"]
    if amd and r.amdgpu_loaded is False:
        ctx.add(
            facts=["rocm.amdgpu_loaded", "platform.amd_pci_devices"],
            devices=", ".join(f"{d.name or d.device_id} ({d.address})" for d in (dgpu or amd)),
            container=p.container or "",
        )


@rule("rocm-kfd-permission", severity="fail", layer="driver", after="amdgpu-not-loaded", precedes=("probe-failed", "torch-import-failed"))
def rocm_kfd_permission(ctx: Ctx) -> None:
    p = ctx.view.facts.platform
    if p.system not in (None, "Linux") or p.is_wsl:
        return
    line = kfd_refused(ctx.view)
    if line:
        r = ctx.view.facts.rocm
        proof = next((e for e in ctx.view.evidence if e.proves == "rocm-kfd-permission"), None)
        ctx.add(
            detail="default" if r.kfd_present or proof is None else "evidence",
            where=proof.source.split(".")[-1] if proof else "",
            fix="container" if p.container else "default",
            facts=["rocm.kfd_present", "rocm.kfd_accessible", "rocm.kfd_error", "reconciled.evidence"],
            error=line,
        )
