"""Rules about the kernel driver and its user-space library (NVIDIA, AMD, WSL)."""

from __future__ import annotations

import re
from collections.abc import Callable

from stackdoctor.core.versions import same_release
from stackdoctor.model.facts import Disagreement
from stackdoctor.model.view import MachineView
from stackdoctor.reconcile import DERIVED, user_space_driver
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import amd_pci, nvidia_pci


@rule("driver-missing", severity="fail", layer="driver", defers_to=("container-no-gpu",))
def driver_missing(ctx: Ctx) -> None:
    f = ctx.view
    n, p = f.facts.nvidia, f.facts.platform
    if ctx.has("container-no-gpu") or f.facts.jetson.is_jetson:
        return
    pci = nvidia_pci(f)
    said_no_driver = n.smi_state == "no-driver" or n.nvml_state == "no-driver"
    torch_runs = bool(f.facts.torch.cuda_available) and not f.facts.torch.hip
    silent = (
        bool(pci)
        and f.driver("nvidia").value is None
        and not torch_runs
        and n.smi_state in (None, "absent", "no-driver")
        and n.nvml_state in (None, "absent", "no-driver", "skipped")
    )
    if not (said_no_driver or silent) or (not pci and not said_no_driver):
        return
    devices = ", ".join(f"{d.name or d.device_id} ({d.address}, driver {d.driver or 'none'})" for d in pci) or "-"
    nouveau = any(d.driver == "nouveau" for d in pci)
    key = "wsl" if p.is_wsl else ("nouveau" if nouveau else ("ubuntu" if p.os_id == "ubuntu" else "default"))
    ctx.add(
        detail="default" if pci else "no_pci",
        fix=key,
        facts=["platform.nvidia_pci_devices", "nvidia.smi_state", "nvidia.nvml_state"],
        devices=devices,
        message=n.smi_message or n.nvml_error or "-",
    )


@rule("driver-library-mismatch", severity="fail", layer="driver")
def driver_library_mismatch(ctx: Ctx) -> None:
    n = ctx.view.facts.nvidia
    if n.smi_state == "lib-mismatch" or n.nvml_state == "lib-mismatch":
        m = re.search(r"NVML library version:\s*([\d.]+)", (n.smi_message or "") + "\n" + (n.nvml_error or ""))
        # the libraries' own file names are exact (570.124.04); nvidia-smi's line gives two fields (570.124)
        ctx.add(
            facts=["nvidia.smi_state", "nvidia.nvml_state", "nvidia.kernel_module_version", "nvidia.driver_library_version"],
            user=user_space_driver(ctx.view) or ctx.view.chosen("nvidia.driver_library_version").value or (m.group(1) if m else None) or "?",
            kernel=ctx.view.chosen("nvidia.kernel_module_version").value or "?",
            message=n.smi_message or n.nvml_error or "",
        )


@rule("source-conflict", severity="warn", layer="driver", defers_to=("driver-library-mismatch",))
def source_conflict(ctx: Ctx) -> None:
    f = ctx.view
    n, p = f.facts.nvidia, f.facts.platform
    user = user_space_driver(f)
    kmod = f.chosen("nvidia.kernel_module_version")
    if not ctx.has("driver-library-mismatch") and not p.is_wsl and user and kmod.value:
        if not same_release(user, kmod.value):
            ctx.add(
                detail="module",
                fix="module",
                facts=["nvidia.driver_version", "nvidia.kernel_module_version"],
                user=user,
                user_source=n.sources.get("driver_version", "NVML") if n.driver_version else f.driver("nvidia").source,
                kernel=kmod.value,
                kernel_source=kmod.source or "/sys/module/nvidia/version",
            )
    for key, by_src in sorted(n.observed.items()):
        if key.endswith("_raw") or len(by_src) < 2:
            continue
        values = [v for v in by_src.values() if v]
        if all(same_release(values[0], v) for v in values[1:]):
            continue
        ctx.add(
            detail="observed",
            fix="observed",
            facts=[f"nvidia.observed.{key}"],
            key=key,
            values="; ".join(f"{src}: {val}" for src, val in sorted(by_src.items())),
        )
    for d in f.disagreements:
        said = _DISAGREEMENT_SENTENCES.get(d.subject)
        if said is not None:
            said(ctx, d)


def _cc_disagreement(ctx: Ctx, d: Disagreement) -> None:
    measured = {w: v for w, v in d.values.items() if not w.startswith(DERIVED)}
    lookup = next((v for w, v in d.values.items() if w.startswith(DERIVED)), None)
    if lookup is not None and len(set(measured.values())) == 1:
        # one measured value (torch, nvidia-smi) against the matrix's name lookup: the matrix is wrong for this name
        ctx.add(
            detail="lookup",
            fix="lookup",
            facts=["reconciled.disagreements", "reconciled.gpus"],
            gpu=d.note or "GPU",
            lookup=lookup,
            measured=next(iter(measured.values())),
            witnesses=", ".join(sorted(measured)),
        )
        return
    ctx.add(
        detail="observed",
        fix="observed",
        facts=["reconciled.disagreements"],
        key=f"compute capability of {d.note}" if d.note else "compute capability",
        values="; ".join(f"{src.removeprefix(DERIVED)}: {val}" for src, val in sorted(d.values.items())),
    )


def _gfx_disagreement(ctx: Ctx, d: Disagreement) -> None:
    if d.explained_by is None:
        ctx.add(
            detail="observed",
            fix="observed",
            facts=["reconciled.disagreements"],
            key=f"gfx target of {d.note}" if d.note else "gfx target",
            values="; ".join(f"{src}: {val}" for src, val in sorted(d.values.items())),
        )


def _count_disagreement(ctx: Ctx, d: Disagreement) -> None:
    if d.explained_by is not None:
        return
    witness = next((w for w in d.values if w != "torch"), "?")
    hidden = d.note.split("; ", 1)[1] if d.note and "; " in d.note else None
    ctx.add(
        detail="count_hidden" if hidden else "count",
        fix="count",
        facts=["torch.device_count", "reconciled.gpus", "reconciled.disagreements"],
        torch_count=d.values.get("torch", "?"),
        witness=witness,
        count=d.values.get(witness, "?"),
        hidden=hidden or "",
    )


# the disagreements between witnesses that driver-source-conflict says (the others are their own findings, or explained)
_DISAGREEMENT_SENTENCES: dict[str, Callable[[Ctx, Disagreement], None]] = {
    "gpu.compute_capability": _cc_disagreement,
    "gpu.gfx": _gfx_disagreement,
    "gpu.count": _count_disagreement,
}


@rule("wsl-driver", severity="fail", layer="driver")
def wsl_driver(ctx: Ctx) -> None:
    p, n = ctx.view.facts.platform, ctx.view.facts.nvidia
    if not p.is_wsl:
        return
    foreign = [x for x in n.libcuda_paths if not x.startswith("/usr/lib/wsl/")]
    if foreign:
        ctx.add(facts=["nvidia.libcuda_paths", "platform.is_wsl"], paths=", ".join(foreign))
    elif n.smi_state == "cuda-err":
        ctx.add(
            severity="fail" if ctx.view.facts.torch.cuda_available is False else "warn",
            detail="cuda_err",
            fix="cuda_err",
            facts=["nvidia.smi_state", "platform.is_wsl"],
            driver=ctx.view.driver("nvidia").value or "?",
            smi=n.smi_version or "?",
        )


def kfd_refused(f: MachineView) -> str | None:
    """The line that says this user cannot open /dev/kfd: the probe's own open(), else rocminfo's error text."""
    r = f.facts.rocm
    if r.kfd_present and r.kfd_accessible is False:
        return r.kfd_error or "permission denied"
    proof = next((e for e in f.evidence if e.proves == "rocm-kfd-permission"), None)
    return proof.line if proof else None


@rule("amdgpu-not-loaded", severity="fail", layer="driver")
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


@rule("rocm-kfd-permission", severity="fail", layer="driver", precedes=("probe-failed",))
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
