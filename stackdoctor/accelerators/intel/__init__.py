"""Intel GPUs through XPU (SYCL / Level Zero): usable when a GPU of a family the XPU build targets is seen."""

from __future__ import annotations

import re
from collections.abc import Sequence  # --- torchstatic ---
from typing import TYPE_CHECKING, Any

from stackdoctor.kinds.base import Accelerator, BuildAsk, DeviceSpec, Say, TargetDevice, Verified
from stackdoctor.matrix import Matrix  # --- reconcile ---
from stackdoctor.model.facts import (
    Facts,
    GpuView,  # --- reconcile ---
    Severity,
    TorchFacts,
)

if TYPE_CHECKING:  # --- torchstatic ---
    from stackdoctor.binaries.binfmt import SectionTable, ZstdDecoder
    from stackdoctor.model.facts import LibraryInfo, TorchFiles

# --- resolve ---
XPU_FAMILIES = re.compile(  # the GPU names of the families PyTorch's XPU build targets
    r"\b(arc|data center gpu|max \d{4}|flex|battlemage|alchemist|core ultra|meteor lake|arrow lake|lunar lake|panther lake|dg2|bmg)\b", re.I
)
# --- end resolve ---


class Intel(Accelerator):
    name = "intel"
    rules = "stackdoctor.accelerators.intel.rules"  # its own findings (the seam: rules + texts)
    vendor = "intel"
    subject = "intel"
    probe = "stackdoctor.accelerators.intel.probe"
    label = "Intel XPU"
    backend = "xpu"
    build_kind = "xpu"
    variant_prefixes = ("xpu",)
    available_field = "xpu_available"
    error_field = "xpu_error"
    runtime_families = ("xpu",)
    # --- install ---
    conda_forge_build = False
    runtime_packages = ("intel-sycl-rt", "intel-pti", "pytorch-triton-xpu", "triton-xpu", "pyzes")
    runtime_prefixes = ("onemkl-sycl",)
    # --- install ---
    hide_var = "ZE_AFFINITY_MASK"
    build_label = "XPU"
    vendor_label = "Intel"
    torch_api = "xpu"
    runtime_wheels = ("intel-", "onemkl-")
    build_answers = True  # torch.xpu.is_available() is True only in an XPU build
    device = DeviceSpec(device="xpu", torch_api="xpu", label="XPU", synchronize="xpu.synchronize", sync_takes_device=True,
                        backend="xccl", backend_check="is_xccl_available", fall_through=True, fast_dtypes=("bf16", "fp16"))

    def verify(self, v: Verified) -> tuple[bool, str]:
        return (True, "sees the Intel GPU") if v.xpu_available else (False, "torch.xpu.is_available() is False")

    def needs_build(self, facts: Facts) -> bool:
        return self.usable(facts)  # a GPU of a family the matrix does not list is no reason for an XPU build

    def present(self, facts: Facts) -> bool:
        return bool(facts.intel.gpus) or bool(self.devices(facts))

    def usable(self, facts: Facts) -> bool:
        """A GPU whose family PyTorch's XPU build targets (compat_matrix/intel.yaml), on Linux or Windows."""
        if facts.platform.system not in (None, "Linux", "Windows"):
            return False
        return any(g.xpu for g in facts.intel.gpus)

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        return [f"Intel {g.name or g.device_id} ({g.driver or say('gpu_no_driver')})" for g in facts.intel.gpus]

    # --- view ---
    def torch_count(self, torch: TorchFacts) -> int | None:
        return (len([d for d in torch.devices if d.kind == "xpu"]) or 1) if torch.xpu_available else None

    def named(self, facts: Facts) -> str:
        return ", ".join(f"Intel {g.name or g.device_id}" for g in facts.intel.gpus) or "-"

    def cpu_build(self) -> tuple[Severity, str] | None:
        return "warn", "xpu"  # XPU builds are newer: a missed opportunity, not a broken stack
    # --- end view ---
    # --- resolve ---
    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        return [TargetDevice(self.vendor, i, v.name, integrated=v.integrated) for i, v in enumerate(self.devices(facts))]

    def gpu_name(self, name: str) -> bool:
        # Intel's GPU brands (--gpu "Arc B580", "Data Center GPU Max 1550"); "Intel ..." names any
        return bool(re.match(r"^\s*(intel\b|arc\s+[ab]\d|data center gpu\b|iris\b)", name, re.I))

    def select_devices(self, devices: list[TargetDevice], warnings: list[str]) -> tuple[list[TargetDevice], str | None]:
        """The GPUs PyTorch's XPU build targets: a discrete one, or an integrated one of a family it lists."""
        suitable = [g for g in devices if g.vendor == self.vendor and (not g.integrated or XPU_FAMILIES.search(g.name or ""))]
        if suitable:
            return suitable, None
        return [], f"Intel GPU(s) {', '.join(g.name or '?' for g in devices)} are not among the XPU build's GPUs (Arc, Data Center GPU Max, Core Ultra)"
    # --- end resolve ---
    # --- build ---
    build_switch = "USE_XPU"

    def build_targets(self, facts: Facts) -> list[str] | None:
        return [] if any(not v.integrated for v in self.devices(facts)) else None  # a discrete Intel GPU: an XPU build, no list to name

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        return [ask.prerequisite("intel-gpu", "the PyTorch prerequisites for Intel GPUs", status="unknown",
                                 fix=f"follow {ask.url('intel_gpu') or 'Intel'}", source=ask.source("intel_gpu"), steps=["build"])]
    # --- end build ---
    # --- render ---
    device_example = "xpu:0"

    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        return (say("runtime_xpu"), False) if torch.xpu_available else None

    def availability_words(self, torch: TorchFacts, say: Say) -> str | None:
        return say("md_xpu_available") if torch.xpu_available else None

    def compared(self, facts: Facts) -> dict[str, Any]:
        out: dict[str, Any] = {"torch.xpu_available": facts.torch.xpu_available}
        for g in facts.intel.gpus:
            out[f"intel.gpus[{g.address}].name"] = g.name or g.device_id
        return out

    def diff_sections(self) -> dict[str, int]:
        return {"intel": 100}

    variant_examples = ("xpu",)

    # --- reconcile ---
    env_prefixes = ("ZE_", "ONEAPI_")
    report_rank = 3

    def joined_gpus(self, facts: Facts, matrix: Matrix | None) -> list[GpuView]:
        from stackdoctor.accelerators.intel.witnesses import intel_gpus

        return intel_gpus(facts)

    def derive(self, facts: Facts, matrix: Matrix) -> None:
        from stackdoctor.accelerators.intel.witnesses import derive

        derive(facts, matrix)

    pci_vendor = "0x8086"  # its own probe lists them (IntelFacts.gpus)
    torch_version_fields = ("xpu",)
    triton_forks = ("pytorch-triton-xpu",)

    # --- rules ---

    def ok_runtime(self, torch: TorchFacts) -> tuple[str, int | str] | None:
        return ("XPU", self.torch_count(torch) or "?") if torch.xpu_available else None

    def installed_build(self, torch: TorchFacts) -> str | None:
        return "XPU"
    # --- resolve ---
    triton_packages = ("pytorch-triton-xpu",)
    learned_variant = "xpu"

    # --- torchstatic ---
    static_code = "xpu"
    torch_library_files = (("lib/libtorch_xpu.so", True), ("lib/torch_xpu.dll", True))

    def torch_libraries(self, listing: Sequence[str]) -> tuple[tuple[str, bool], ...]:
        from stackdoctor.accelerators.intel import static

        return self.torch_library_files + static.sycl_kernel_libraries(listing)

    def static_variant(self, files: TorchFiles) -> str | None:
        from stackdoctor.accelerators.intel import static

        return static.static_variant(files)

    def read_gpu_code(self, info: LibraryInfo, fh: Any, table: SectionTable, zstd: ZstdDecoder | None, deadline: float | None) -> None:
        from stackdoctor.accelerators.intel import static

        static.read_gpu_code(info, fh, table, deadline)
