"""Intel GPUs through XPU (SYCL / Level Zero): usable when a GPU of a family the XPU build targets is seen."""

from __future__ import annotations

from typing import Any

from stackdoctor.accelerators.base import Accelerator, BuildAsk, Say, Verified
from stackdoctor.facts import Facts


class Intel(Accelerator):
    name = "intel"
    vendor = "intel"
    subject = "intel"
    label = "Intel XPU"
    backend = "xpu"
    build_kind = "xpu"
    variant_prefixes = ("xpu",)
    available_field = "xpu_available"
    error_field = "xpu_error"
    runtime_families = ("xpu",)
    hide_var = "ZE_AFFINITY_MASK"
    build_label = "XPU"
    vendor_label = "Intel"
    torch_api = "xpu"

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

    # --- build ---
    build_switch = "USE_XPU"

    def build_targets(self, facts: Facts) -> list[str] | None:
        return [] if any(not v.integrated for v in self.devices(facts)) else None  # a discrete Intel GPU: an XPU build, no list to name

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        return [ask.prerequisite("intel-gpu", "the PyTorch prerequisites for Intel GPUs", status="unknown",
                                 fix=f"follow {ask.url('intel_gpu') or 'Intel'}", source=ask.source("intel_gpu"), steps=["build"])]
    # --- end build ---
