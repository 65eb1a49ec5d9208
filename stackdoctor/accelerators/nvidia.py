"""NVIDIA GPUs through CUDA: present when any witness sees an NVIDIA GPU, usable when a driver is known."""

from __future__ import annotations

from typing import Any

from stackdoctor.accelerators.base import Accelerator, BuildAsk, Say, Verified
from stackdoctor.facts import Facts
from stackdoctor.versions import mm, release


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

    # --- build ---
    build_switch = "USE_CUDA"
    builds_on_macos = False
    offers_source_build = True

    def build_targets(self, facts: Facts) -> list[str] | None:
        ccs = [v.compute_capability for v in self.devices(facts) if v.compute_capability and v.witnesses != ["pci"]]
        return ccs or None

    def build_arch_env(self, targets: list[str], *, ptx: bool) -> dict[str, tuple[str, str]]:
        if not targets:
            return {}
        why = "the GPUs' compute capabilities" + (" (+PTX: the newest also as PTX, for newer GPUs)" if ptx else "")
        return {"TORCH_CUDA_ARCH_LIST": (arch_list(targets, ptx=ptx), why)}

    def build_home_env(self, tools: Any) -> dict[str, tuple[str, str]]:
        if tools is not None and tools.cuda_home and tools.cuda_home.rstrip("/") != "/usr/local/cuda":
            return {"CUDA_HOME": (tools.cuda_home, f"the toolkit of {tools.nvcc.path}")}
        return {}

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        """nvcc (a toolkit the driver runs), cuDNN, NVTX: PyTorch's README for a CUDA build."""
        tools = ask.tools
        matrix_url = ask.url("cuda") or "PyTorch's support matrix"
        nvcc = ask.tool("nvcc", tools.nvcc if tools else None, f"a CUDA toolkit from the support matrix ({matrix_url}), its nvcc on PATH",
                        f"install a CUDA toolkit the release supports ({matrix_url}) and put its bin/ on PATH (e.g. export PATH=/usr/local/cuda-12.8/bin:$PATH)",
                        ["build"], ask.source("cuda"))
        if tools is not None and tools.nvcc.version:
            nvcc.found = f"CUDA {tools.nvcc.version}"
            drv = ask.facts.reconciled.cuda_driver_version.value
            if drv and ask.at_least(drv, tools.nvcc.version) is False:
                nvcc.status = "missing"
                nvcc.fix = (f"the driver runs CUDA {drv} code, nvcc is CUDA {tools.nvcc.version}: what it builds would not run here; "
                            f"install a toolkit no newer than CUDA {drv}, or a newer driver")
            elif drv:
                nvcc.found += f" (the driver runs CUDA {drv})"
        cmin = ask.minimum("cudnn")
        cudnn = ask.tool("cudnn", tools.cudnn if tools else None, f"cuDNN >= {cmin} (its headers: cudnn_version.h)" if cmin else "cuDNN",
                         f"install cuDNN {cmin} or newer for this CUDA ({ask.url('cudnn') or 'the cuDNN support matrix'})",
                         ["build"], ask.source("cudnn"), cmin)
        nvtx_fix = ("run the CUDA installer again and check Nsight Compute (NVTX), after Visual Studio" if ask.os == "windows"
                    else "install the toolkit's NVTX headers (include/nvtx3, the cuda-nvtx package)")
        nvtx = ask.tool("nvtx", tools.nvtx if tools else None, "NVTX (the CUDA toolkit's include/nvtx3)", nvtx_fix, ["build"], ask.source("nvtx"))
        return [nvcc, cudnn, nvtx]

    def build_label_of(self, cc: str | None, gfx: str | None) -> str | None:
        return "sm_" + cc.replace(".", "") if cc else None
    # --- end build ---


def arch_list(ccs: list[str], *, ptx: bool = False) -> str:
    """``TORCH_CUDA_ARCH_LIST``: the compute capabilities, lowest first, once each; ``+PTX`` on the newest when asked."""
    uniq = sorted(set(ccs), key=lambda c: tuple(int(x) for x in c.split(".")))
    if ptx and uniq:
        uniq[-1] += "+PTX"
    return ";".join(uniq)
