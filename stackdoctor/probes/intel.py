"""Intel probe: Intel display devices on the PCI bus (vendor 0x8086, class 0x03xxxx).

The bound driver (``i915`` or ``xe``) comes from the device's ``driver`` link. Whether a
device is a discrete card comes from the discrete families' PCI ids in the Linux kernel's
``include/drm/intel/pciids.h`` (:data:`DISCRETE_FAMILIES`); ids outside that list stay
``None`` (the header lists integrated parts too, but not every id a future part will use).
XPU availability is the torch probe's fact, not this one's.
"""

from __future__ import annotations

from stackdoctor.facts import IntelFacts, IntelGpu
from stackdoctor.probes import ProbeContext, ProbeOutput
from stackdoctor.probes.pci import INTEL_VENDOR, display_devices

__all__ = ["DISCRETE_FAMILIES", "discrete_family", "probe"]

_PCIIDS = "torvalds/linux include/drm/intel/pciids.h@0755a4e3e809610a14befc9ad28d35e2e460da68"

# Discrete Intel GPU families and their PCI device ids, from _PCIIDS (macro name in brackets).
DISCRETE_FAMILIES: dict[str, frozenset[int]] = {
    # Iris Xe MAX (INTEL_DG1_IDS)
    "DG1": frozenset({0x4905, 0x4906, 0x4907, 0x4908, 0x4909}),
    # Arc A-series / Alchemist (INTEL_DG2_IDS: G10, G11, G12 desktop, embedded and mobile)
    "DG2": frozenset(
        {
            0x56A0, 0x56A1, 0x56A2, 0x56BE, 0x56BF, 0x5690, 0x5691, 0x5692,  # G10
            0x56A5, 0x56A6, 0x56B0, 0x56B1, 0x56BA, 0x56BB, 0x56BC, 0x56BD, 0x5693, 0x5694, 0x5695,  # G11
            0x56A3, 0x56A4, 0x56B2, 0x56B3, 0x5696, 0x5697,  # G12
        }
    ),
    # Data Center GPU Flex / Arctic Sound-M (INTEL_ATS_M_IDS)
    "ATS-M": frozenset({0x56C0, 0x56C2, 0x56C1}),
    # Data Center GPU Max / Ponte Vecchio (INTEL_PVC_IDS)
    "PVC": frozenset(
        {0x0B69, 0x0B6E, 0x0BD4, 0x0BD5, 0x0BD6, 0x0BD7, 0x0BD8, 0x0BD9, 0x0BDA, 0x0BDB, 0x0BE0, 0x0BE1, 0x0BE5}
    ),
    # Arc B-series / Battlemage (INTEL_BMG_IDS)
    "BMG": frozenset(
        {0xE202, 0xE209, 0xE20B, 0xE20C, 0xE20D, 0xE210, 0xE211, 0xE212, 0xE216, 0xE220, 0xE221, 0xE222, 0xE223}
    ),
}  # fmt: skip


def discrete_family(device_id: str | None) -> str | None:
    """The discrete family ("DG2", "BMG", ...) of a PCI device id like ``"0x56a0"``, else None."""
    try:
        value = int(device_id or "", 16)
    except ValueError:
        return None
    for family, ids in DISCRETE_FAMILIES.items():
        if value in ids:
            return family
    return None


def gather(ctx: ProbeContext) -> IntelFacts:
    f = IntelFacts()
    for dev in display_devices(ctx.system, INTEL_VENDOR):
        family = discrete_family(dev.device_id)
        f.gpus.append(
            IntelGpu(
                address=dev.address,
                device_id=dev.device_id,
                name=f"Intel {family}" if family else None,
                driver=dev.driver,
                discrete=True if family else None,
            )
        )
    f.sources["gpus"] = "file:/sys/bus/pci/devices"
    if any(g.discrete for g in f.gpus):
        f.sources["discrete"] = _PCIIDS
    return f


def probe(ctx: ProbeContext) -> ProbeOutput:
    return ProbeOutput(facts={"intel": gather(ctx)})
