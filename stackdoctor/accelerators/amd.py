"""AMD GPUs through ROCm (HIP): present when a discrete AMD GPU is seen, usable on Linux with amdgpu loaded."""

from __future__ import annotations

from typing import Any

from stackdoctor.accelerators.base import Accelerator, BuildAsk, Say, Verified
from stackdoctor.accelerators.nvidia import verify_cuda
from stackdoctor.facts import Facts


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

    # --- build ---
    build_switch = "USE_ROCM"
    builds_on_macos = False
    offers_source_build = True

    def build_targets(self, facts: Facts) -> list[str] | None:
        gfx = [(v.gfx or "").split(":", 1)[0].lower() for v in self.devices(facts) if v.gfx and not v.integrated and v.witnesses != ["pci"]]
        return gfx or None

    def build_arch_env(self, targets: list[str], *, ptx: bool) -> dict[str, tuple[str, str]]:
        return {"PYTORCH_ROCM_ARCH": (";".join(dict.fromkeys(targets)), "the AMD GPUs' gfx architectures")} if targets else {}

    def build_home_env(self, tools: Any) -> dict[str, tuple[str, str]]:
        if tools is not None and tools.rocm.path and tools.rocm.path.rstrip("/") != "/opt/rocm":
            return {"ROCM_PATH": (tools.rocm.path, "ROCm is not in /opt/rocm")}
        return {}

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        """ROCm at the matrix's minimum, on Linux (PyTorch builds for ROCm only there)."""
        rmin = ask.minimum("rocm")
        r = ask.tool("rocm", ask.tools.rocm if ask.tools else None, f"ROCm >= {rmin} (Linux only)" if rmin else "ROCm (Linux only)",
                     f"install ROCm ({ask.url('rocm') or 'AMD ROCm'}); one not in /opt/rocm is named by ROCM_PATH", ["amd", "build"],
                     ask.source("rocm"), rmin)
        if ask.os != "linux":
            r.status, r.fix = "missing", "ROCm builds are for Linux only"
        return [r]

    def build_steps(self, python: str) -> list[tuple[str, list[str]]]:
        return [("amd", [python, "tools/amd_build/build_amd.py"])]

    def build_label_of(self, cc: str | None, gfx: str | None) -> str | None:
        return gfx or None
    # --- end build ---
