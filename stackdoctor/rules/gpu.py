"""Rules about the GPUs: lost from the driver, or unhealthy (a GPU the build has no code for is the kind's own
finding: ``accelerators/nvidia_rules.py``'s gpu-arch-unsupported, ``amd_rules.py``'s rocm-gfx-unsupported)."""

from __future__ import annotations

import re

from stackdoctor.model.facts import NvidiaGpu
from stackdoctor.reconcile import bus_key
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import (
    nvidia_pci,
)


def _label(g: NvidiaGpu) -> str:
    return f"GPU{g.index} {g.name or '?'}"


@rule("gpu-lost", severity="fail", layer="gpu", defers_to=("driver-missing", "driver-library-mismatch", "container-no-gpu"))
def gpu_lost(ctx: Ctx) -> None:
    n = ctx.view.facts.nvidia
    pci = nvidia_pci(ctx.view)
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
    given, lost = ctx.view.driven("nvidia"), ctx.view.lost("nvidia")
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
    for g in ctx.view.facts.nvidia.gpus:
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
    for g in ctx.view.facts.nvidia.gpus:
        bad = [r for r in g.throttle_reasons if r in _BAD_THROTTLE]
        if bad:
            ctx.add(facts=[f"nvidia.gpus[{g.index}].throttle_reasons"], gpu=_label(g), index=g.index, reasons=", ".join(bad))


# Data-center parts, where persistence mode is expected on (names as nvidia-smi prints them, "NVIDIA " dropped).
_DATACENTER = re.compile(
    r"\b(tesla|[abhl]\d{1,3}[a-z]?|gh200|gb200|gb300|b[12]00|b300|h[12]00|h800|a800|l40s?|t4|v100|p100|p40|mi\d{3})\b", re.I
)


@rule("gpu-persistence-off", severity="warn", layer="gpu")
def gpu_persistence_off(ctx: Ctx) -> None:
    f = ctx.view
    if f.facts.platform.system not in (None, "Linux") or f.facts.platform.is_wsl:
        return
    off = [g for g in f.facts.nvidia.gpus if g.persistence_mode == "Disabled" and g.name and _DATACENTER.search(g.name.replace("NVIDIA ", ""))]
    if off:
        ctx.add(facts=[f"nvidia.gpus[{g.index}].persistence_mode" for g in off], gpus=", ".join(_label(g) for g in off))


