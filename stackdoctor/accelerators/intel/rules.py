"""Intel's own findings, declared through the seam (:attr:`Intel.rules` names this module): an XPU build whose
devices torch cannot initialise. Texts in ``stackdoctor/locale/en.yaml`` and ``zh.yaml``; the rule keeps its layer's
group (``runtime``)."""

from __future__ import annotations

import re

from stackdoctor import kinds
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for, python_exe

_XPU_INIT = re.compile(r"Failed to initialize XPU devices|XPU device count is zero|No XPU devices are available", re.I)


@rule("xpu-unavailable", severity="fail", layer="runtime", defers_to=("torch-backend-mismatch",))
def xpu_unavailable(ctx: Ctx) -> None:
    """An XPU build on a machine with an Intel GPU the build targets, but torch.xpu.is_available() is False."""
    f, t = ctx.view, ctx.view.facts.torch
    intel = kinds.by_name("intel")
    if built_for(f) != "xpu" or t.xpu_available is not False or intel is None:
        return
    # torch's own words that its XPU runtime found no device to initialise (c10/xpu/XPUFunctions.cpp: "Failed to
    # initialize XPU devices" from torch 2.6 on, "XPU device count is zero!" before): with an Intel GPU here, the
    # driver / Level Zero side, even for a GPU whose family the matrix does not list
    said = bool(_XPU_INIT.search(t.xpu_error or ""))
    if not (intel.usable(f.facts) or (said and intel.present(f.facts))):
        return
    if ctx.has("torch-backend-mismatch"):
        return
    ctx.add(
        detail="default",
        facts=["torch.xpu_available", "torch.xpu_error", "intel.gpus"],
        torch=t.version,
        gpus=", ".join(f"Intel {g.name or g.device_id} ({g.driver or 'no driver'})" for g in f.facts.intel.gpus if g.xpu or not intel.usable(f.facts)) or "-",
        error=t.xpu_error or "-",
        python=python_exe(f),
        os=f.facts.platform.os_id or f.facts.platform.system or "?",
    )
