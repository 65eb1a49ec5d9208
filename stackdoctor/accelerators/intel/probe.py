"""Intel probe: Intel display devices on the PCI bus (vendor 0x8086, class 0x03xxxx).

The bound driver (``i915`` or ``xe``) comes from the device's ``driver`` link. What the device id
means (its family, discrete or integrated, whether PyTorch's XPU build targets it) follows from
``compat_matrix/intel.yaml`` in :mod:`stackdoctor.reconcile`. XPU availability is the torch probe's fact.
"""

from __future__ import annotations

from stackdoctor.accelerators.intel import Intel
from stackdoctor.kinds.pci import display_devices
from stackdoctor.model.facts import IntelFacts, IntelGpu
from stackdoctor.model.probing import ProbeContext, ProbeOutput

__all__ = ["probe"]

def gather(ctx: ProbeContext) -> IntelFacts:
    f = IntelFacts()
    for dev in display_devices(ctx.system, Intel.pci_vendor):
        f.gpus.append(IntelGpu(address=dev.address, device_id=dev.device_id, driver=dev.driver))
    f.sources["gpus"] = "file:/sys/bus/pci/devices"
    return f


def probe(ctx: ProbeContext) -> ProbeOutput:
    return ProbeOutput(facts={"intel": gather(ctx)})
