"""NVIDIA GPUs through CUDA: present when any witness sees an NVIDIA GPU, usable when a driver is known."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stackdoctor.accelerators.base import Accelerator, Say, Verified
from stackdoctor.facts import Facts, GpuView
from stackdoctor.versions import mm, release

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Variant


def verify_cuda(v: Verified) -> tuple[bool, str]:
    """torch.cuda after an install (CUDA, ROCm and Jetson builds all answer through it): a tensor added on the GPU."""
    if v.cuda_available and v.cuda_ok is not False:
        return True, f"runs on {v.device_name or 'the GPU'}"
    why = v.cuda_error or (v.warnings[0] if v.warnings else "torch.cuda.is_available() is False")
    level = getattr(v, "driver_api_version", None)
    build = getattr(v, "cuda", None)
    if level == 0:  # judged from the value torch's runtime gave, whatever its sentence
        return False, f"the GPU is not usable from it: no NVIDIA driver answers (cudaDriverGetVersion() = 0): {why}"
    # a newer CUDA major than the driver's is refused; a newer minor of the same major runs (minor-version
    # compatibility), as rules.driver judges driver-too-old
    if isinstance(level, int) and level > 0 and release(build) and release(build)[0] > level // 1000:
        return False, (f"the GPU is not usable from it: the NVIDIA driver runs CUDA {level // 1000}.{(level % 1000) // 10} at most, "
                       f"this build needs CUDA {mm(build)}: {why}")
    return False, f"the GPU is not usable from it: {why}"


class Nvidia(Accelerator):
    name = "nvidia"
    vendor = "nvidia"
    subject = "nvidia"
    label = "NVIDIA CUDA"
    backend = "cuda"
    build_kind = "cuda"
    variant_prefixes = ("cu",)
    available_field = "cuda_available"
    error_field = "cuda_error"
    runtime_families = ("cuda", "cuda12", "cuda13")
    hide_var = "CUDA_VISIBLE_DEVICES"
    build_label = "CUDA"
    vendor_label = "NVIDIA"
    torch_api = "cuda"
    tool_witnesses = ("nvml", "nvidia-smi")
    kernel_witness = "/proc/driver/nvidia/gpus"

    def present(self, facts: Facts) -> bool:
        return bool(self.devices(facts))

    # --- install ---
    gpu_code_library = "libtorch_cuda.so"
    gpu_code_kind = "cuda"
    gpu_code_headers_only = True
    conda_forge_build = True
    gpu_code_missing = " and no PTX at or below it"

    def runtime_family(self, name: str) -> str | None:
        """CUDA 12 wheels end in ``-cu12`` (``nvidia-cuda-runtime-cu12``); CUDA 13 ones drop the suffix
        (``nvidia-cublas``) or end in ``-cu13``, plus ``cuda-toolkit``; ``nvidia-ml-py`` (NVML bindings) is not one."""
        if name.startswith("nvidia-ml-py") or name == "pynvml":
            return None
        if name.startswith("nvidia-"):
            return "cuda12" if name.endswith("-cu12") else "cuda13"
        return {"cuda-toolkit": "cuda13", "triton": "cuda"}.get(name)

    def families_for(self, variant: str) -> set[str] | None:
        m = re.fullmatch(r"cu(\d+)", variant)
        if not m:
            return None
        major = int(m.group(1)[:2]) if len(m.group(1)) >= 3 else int(m.group(1)[:1])
        return {"cuda", "cuda12"} if major == 12 else {"cuda", "cuda13"} if major >= 13 else {"cuda"}

    def gpu_code_read(self, read: Mapping[str, Any]) -> list[str]:
        return list(read.get("arch_list") or []) + list(read.get("ptx") or [])

    def gpu_code_words(self, read: Mapping[str, Any]) -> str:
        sms, ptx = list(read.get("arch_list") or []), list(read.get("ptx") or [])
        return " ".join(sms + ptx) + (" (no PTX)" if not ptx else "") if sms or ptx else "no GPU code"

    def gpu_code_runs(self, gpu: GpuView, got: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """A cubin the arch rules let its compute capability run, or PTX at or below it (:func:`stackdoctor.matrix.arch_match`)."""
        from stackdoctor.matrix import arch_match

        cc = gpu.compute_capability
        if not cc:
            return None, None
        return f"sm_{cc.replace('.', '')}", arch_match(list(got), cc)

    def planned_gpu_code(self, variant: Variant, platform: str | None) -> list[str]:
        return list(variant.arch_for(platform))
    # --- install ---

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def usable(self, facts: Facts) -> bool:
        """A GPU and a driver that some witness reports (tools, NVML, the kernel module, torch's own messages)."""
        if facts.platform.system == "Darwin" or facts.apple.is_macos or facts.jetson.is_jetson:
            return False
        return self.present(facts) and facts.reconciled.nvidia_driver.value is not None

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        if facts.jetson.is_jetson:
            return []  # a Jetson's iGPU is the Jetson's line
        out = []
        for g in self.devices(facts):
            cc = f"sm_{g.compute_capability.replace('.', '')}" if g.compute_capability else "sm_?"
            mem = f", {g.memory_total_mib // 1024} GiB" if g.memory_total_mib else ""
            out.append(f"{g.index}: {g.name or '?'} ({cc}{mem})")
        return out

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        drv = facts.reconciled.nvidia_driver
        n = facts.nvidia
        if drv.value:
            ceiling = facts.reconciled.cuda_driver_version.value
            return f"NVIDIA {drv.value}" + (say("driver_supports_cuda", cuda=ceiling) if ceiling else "")
        if n.smi_state and n.smi_state not in ("absent", "ok"):
            return f"NVIDIA: {n.smi_message or n.smi_state}"
        return None
