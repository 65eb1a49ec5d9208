"""AMD GPUs through ROCm (HIP): present when a discrete AMD GPU is seen, usable on Linux with amdgpu loaded."""

from __future__ import annotations

from stackdoctor.accelerators.base import Accelerator, Say, Verified
from stackdoctor.accelerators.nvidia import CUDA_DEVICE, cuda_count, verify_cuda
from stackdoctor.facts import Facts, GpuView, TorchFacts


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
    build_witness = "hip"  # torch.version.hip: a ROCm build
    runtime_wheels = ("rocm",)
    gpu_code = "hip"
    gpu_libraries = ("torch/lib/libtorch_hip.so",)
    build_witness_rank = -1  # read before CUDA's (a HIP build says nothing of CUDA, but hip wins if both were set)
    device = CUDA_DEVICE  # ROCm's torch reaches its GPUs as torch.cuda (HIP); RCCL answers as "nccl"

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def present(self, facts: Facts) -> bool:
        return any(not g.integrated for g in self.devices(facts))

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

    # --- view ---
    def wrong_result_fix(self) -> str:
        return "result_rocm"

    def torch_count(self, torch: TorchFacts) -> int | None:
        return cuda_count(torch)

    def ok_name(self, g: GpuView) -> str | None:
        return g.name if g.name and g.name == g.gfx else f"{g.name or 'AMD GPU'} ({g.gfx or 'gfx?'})"
    # --- end view ---
