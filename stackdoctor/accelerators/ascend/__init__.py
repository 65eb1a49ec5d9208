"""Huawei Ascend NPUs through ``torch_npu`` and CANN — stackdoctor's first real accelerator plug-in.

Everything Ascend-specific lives in this package, declared once, and reaches the rest of stackdoctor only through
the accelerator seam (:class:`~stackdoctor.kinds.base.Accelerator`), as a plug-in distribution's kind would:

- :mod:`.probe` — npu-smi, the driver's ``version.info``, CANN's install info and ``set_env.sh``, the CANN
  environment, ``/dev/davinci*``, ``ASCEND_RT_VISIBLE_DEVICES`` (plain data in ``Facts.plugins["ascend"]``);
- :mod:`.rules` — its findings (``ascend-*`` codes), with their texts in ``locale/en.yaml`` and ``locale/zh.yaml``
  beside it (the seam's ``locale`` hook merges them into stackdoctor's catalogue);
- ``torch_npu.yaml`` — its matrix table: each torch_npu release, the torch it pins (its wheel's ``Requires-Dist``)
  and the CANN it needs (Ascend's published table), each row with its source;
- the worker-side device spec (:attr:`Ascend.device`): ``npu`` devices, ``torch.npu.synchronize``, HCCL.

torch_npu is not a torch build of its own: it is a companion package installed beside torch's **CPU** build (its
README: ``pip install torch==X --index-url https://download.pytorch.org/whl/cpu`` then ``pip install torch-npu==X``).
Since torch_npu 2.5.1 ``import torch`` loads it (torch's device-backend autoload) and ``torch.npu`` answers.
"""

from __future__ import annotations

import functools
import re
from typing import Any, ClassVar

from stackdoctor.kinds.base import Accelerator, Companion, DeviceSpec, Say
from stackdoctor.model.facts import Facts, GpuView, TorchFacts

__all__ = ["Ascend", "TORCH_NPU", "torch_npu_version", "table"]

TORCH_NPU = "torch-npu"  # the distribution's normalised name (TorchFacts.distributions keys)
VENDOR = "huawei"


def torch_npu_version(torch: TorchFacts) -> str | None:
    """torch_npu's version as its dist-info says (the fast path: read from the files, no import)."""
    return torch.distributions.get(TORCH_NPU) or torch.distributions.get("torch_npu")


@functools.cache
def table() -> dict[str, Any]:
    """The torch_npu table (``torch_npu.yaml`` beside this file): ``{"releases": [...], "source": ..., ...}``."""
    from importlib import resources

    from stackdoctor.core import parsecache

    raw = resources.files(__name__).joinpath("torch_npu.yaml").read_text(encoding="utf-8")

    def parse() -> Any:
        import yaml

        return yaml.safe_load(raw) or {}

    data = parsecache.kept("ascend-torch_npu", [raw], parse, lambda kept: isinstance(kept, dict))  # kept between runs
    return data if isinstance(data, dict) else {}


class Ascend(Accelerator):
    name = "ascend"
    vendor = VENDOR
    subject = "ascend"
    label = "Huawei Ascend NPU"
    backend = "npu"  # type: ignore[assignment]  # a plug-in's backend: [tool.stackdoctor] backend = "npu"
    build_kind = "cpu"  # torch_npu pairs with torch's CPU build; the NPU support is the companion package
    variant_prefixes = ()
    available_field = ""  # asked by name: torch.npu.is_available() (kinds.torch_questions())
    hide_var = "ASCEND_RT_VISIBLE_DEVICES"
    build_label = "CPU + torch_npu"
    vendor_label = "Huawei Ascend"
    torch_api = "npu"
    torch_api_needs = "torch_npu"  # asked only where torch_npu is installed: elsewhere torch has no torch.npu, which says nothing
    tool_witnesses = ("npu-smi",)
    probe = "stackdoctor.accelerators.ascend.probe"
    rules = "stackdoctor.accelerators.ascend.rules"
    locale = "stackdoctor.accelerators.ascend"
    device: ClassVar[DeviceSpec | None] = DeviceSpec(device="npu", torch_api="npu", synchronize="npu.synchronize", backend="hccl",
                                                     imports=("torch_npu",), set_device="npu.set_device")
    companions = (TORCH_NPU,)
    what_if_option = "--npu"
    table = "torch_npu.yaml"

    def own_table(self) -> dict[str, Any]:
        return table()  # kept between runs (parsecache)

    def companion(self, facts: Facts, torch: str, *, os: str, arch: str, python: str | None, hypothetical: bool,
                  strict: bool = True) -> Companion | str | None:
        """torch_npu beside torch's CPU build: the release of ``torch_npu.yaml`` pinning ``torch`` (:mod:`.pairing`)."""
        from stackdoctor.accelerators.ascend.pairing import companion

        return companion(list(table().get("releases") or []), self.own_facts(facts), torch, os=os, arch=arch, python=python,
                         hypothetical=hypothetical, strict=strict)

    def import_hint(self, error: str, facts: Facts | None) -> str | None:
        """torch_npu could not open CANN's libraries (``libhccl.so``, ``libascendcl.so``), or torch's autoload of it
        failed: CANN's environment, with the exact ``source`` line of the install the probe found."""
        if not re.search(r"lib(hccl|ascendcl)\S*\.so|backend extension: torch_npu|torch_npu", error or ""):
            return None
        cann = (self.own_facts(facts) if facts is not None else {}).get("cann") or {}
        line = cann.get("set_env") or (f"{cann['root']}/set_env.sh" if cann.get("root") else None)
        if not cann:
            return "no CANN install was found: install CANN (https://www.hiascend.com/cann/download), then `source` its set_env.sh"
        from stackdoctor.core.shell import format_command

        return f"CANN's libraries are not on the library path: run `{format_command(['source', str(line)])}` and try again"

    def own(self, facts: Facts) -> dict[str, Any]:
        return self.own_facts(facts)

    def gpus(self, facts: Facts) -> list[GpuView]:
        own = self.own_facts(facts)
        where = (own.get("sources") or {}).get("devices") or "npu-smi info"
        out = []
        for d in own.get("devices") or []:
            name = d.get("name")
            out.append(GpuView(vendor=VENDOR, index=int(d.get("index", 0)), name=f"Ascend {name}" if name and not name.startswith("Ascend") else name,
                               memory_total_mib=d.get("memory_total_mib"), bus_id=d.get("bus_id"), witnesses=[where],
                               sources={"name": where}))
        return out

    def present(self, facts: Facts) -> bool:
        return bool(self.devices(facts))

    def usable(self, facts: Facts) -> bool:
        """Chips, and what drives them: the NPU driver's version file, npu-smi answering, or torch.npu saying True."""
        own = self.own_facts(facts)
        driven = bool(own.get("driver")) or (own.get("npu_smi") or {}).get("state") == "ok"
        return self.present(facts) and (driven or self.torch_available(facts.torch) is True)

    def needs_build(self, facts: Facts) -> bool:
        """An Ascend machine needs torch's CPU build (with torch_npu beside it): a CUDA or ROCm build mismatches it."""
        return self.present(facts)

    def builds(self, variant: str | None) -> bool:
        return variant in (None, "cpu")  # the build torch_npu is installed beside


    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        lines = []
        for g in self.devices(facts):
            mem = f", {round(g.memory_total_mib / 1024)} GiB HBM" if g.memory_total_mib else ""
            lines.append(f"{g.index}: {g.name or '?'} (NPU{mem})")
        return lines

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        own = self.own_facts(facts)
        if not own.get("devices") and not own.get("driver") and not own.get("cann"):
            return None
        parts = [f"Ascend NPU driver {own.get('driver') or '?'}"]
        cann = own.get("cann") or {}
        parts.append(f"CANN {cann.get('version') or '?'}" if cann else "CANN not found")
        return " · ".join(parts)
