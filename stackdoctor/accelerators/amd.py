"""AMD GPUs through ROCm (HIP): present when a discrete AMD GPU is seen, usable on Linux with amdgpu loaded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stackdoctor.accelerators.base import Accelerator, Say, Verified
from stackdoctor.accelerators.nvidia import verify_cuda
from stackdoctor.facts import Facts, GpuView

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Variant


# --- install ---
def _override_gfx(value: str | None) -> str | None:
    """``HSA_OVERRIDE_GFX_VERSION=10.3.0`` -> ``gfx1030`` (major, minor, stepping in hex: 9.0.10 -> gfx90a)."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", (value or "").strip())
    return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}" if m else None
# --- install ---


class Amd(Accelerator):
    name = "amd"
    vendor = "amd"
    subject = "rocm"
    label = "AMD ROCm"
    backend = "rocm"
    build_kind = "rocm"
    variant_prefixes = ("rocm",)
    available_field = "cuda_available"  # ROCm builds answer through torch.cuda
    error_field = "cuda_error"
    runtime_families = ("rocm",)
    hide_var = "HIP_VISIBLE_DEVICES"
    hide_vars = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    build_label = "ROCm"
    vendor_label = "AMD"
    torch_api = "cuda"  # ROCm builds answer through torch.cuda
    tool_witnesses = ("rocminfo", "rocm-smi", "amd-smi", "rocm_agent_enumerator")
    kernel_witness = "/sys/class/kfd"

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def present(self, facts: Facts) -> bool:
        return any(not g.integrated for g in self.devices(facts))

    # --- install ---
    gpu_code_library = "libtorch_hip.so"
    gpu_code_kind = "hip"  # offload bundles: read from a bounded copy
    conda_forge_build = False
    runtime_packages = ("rocm", "pytorch-triton-rocm", "triton-rocm")
    runtime_prefixes = ("rocm-sdk",)

    def gpu_code_read(self, read: Mapping[str, Any]) -> list[str]:
        return list(read.get("gfx") or [])

    def gpu_code_runs(self, gpu: GpuView, got: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """A code object for its gfx target, after the plan's ``HSA_OVERRIDE_GFX_VERSION``."""
        arch = _override_gfx(env.get("HSA_OVERRIDE_GFX_VERSION")) or ((gpu.gfx or "").split(":", 1)[0].lower() or None)
        if arch is None:
            return None, None
        return arch, "code object" if arch in {x.split(":", 1)[0].lower() for x in got} else None

    def planned_gpu_code(self, variant: Variant, platform: str | None) -> list[str]:
        return list(variant.gfx)
    # --- install ---

    def usable(self, facts: Facts) -> bool:
        p = facts.platform
        if p.system not in (None, "Linux") or p.is_wsl:
            return False
        return self.present(facts) and facts.rocm.amdgpu_loaded is not False

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        return [f"{g.index}: {g.name or '?'} ({g.gfx or '?'}{say('gpu_integrated') if g.integrated else ''})" for g in self.devices(facts)]

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        r = facts.rocm
        listed = [g for g in r.gpus if not (g.sources.get("index") or "").startswith("reconcile: ")]  # by ROCm's tools
        if not (r.version or listed):
            return None
        return f"ROCm {r.version or say('version_unknown')}" + ("" if r.amdgpu_loaded in (None, True) else say("driver_amdgpu_not_loaded"))
