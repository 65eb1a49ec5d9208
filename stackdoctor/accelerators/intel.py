"""Intel GPUs through XPU (SYCL / Level Zero): usable when a GPU of a family the XPU build targets is seen."""

from __future__ import annotations

from stackdoctor.accelerators.base import Accelerator, Say
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

    def present(self, facts: Facts) -> bool:
        return bool(facts.intel.gpus) or bool(self.devices(facts))

    def usable(self, facts: Facts) -> bool:
        """A GPU whose family PyTorch's XPU build targets (compat_matrix/intel.yaml), on Linux or Windows."""
        if facts.platform.system not in (None, "Linux", "Windows"):
            return False
        return any(g.xpu for g in facts.intel.gpus)

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        return [f"Intel {g.name or g.device_id} ({g.driver or say('gpu_no_driver')})" for g in facts.intel.gpus]
