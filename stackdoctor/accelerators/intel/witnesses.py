"""Intel's GPUs in the machine's view (:meth:`Intel.joined_gpus <stackdoctor.accelerators.intel.Intel.joined_gpus>`):
the PCI bus's display devices of Intel's, as the intel probe read them, and what the matrix says of each. Pure."""

from __future__ import annotations

from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import Facts, GpuView
from stackdoctor.reconcile.gpus import DERIVED, W_PCI, bus_key

__all__ = ["derive", "intel_gpus"]


def intel_gpus(f: Facts) -> list[GpuView]:
    return [
        GpuView(
            vendor="intel",
            index=i,
            name=g.name,
            integrated=g.discrete is False,
            bus_id=bus_key(g.address),
            witnesses=[W_PCI],
            sources={"bus_id": "file:/sys/bus/pci/devices"},
        )
        for i, g in enumerate(f.intel.gpus)
    ]


def derive(f: Facts, matrix: Matrix) -> None:
    """Each Intel GPU's family, ``discrete`` and ``xpu`` flags from its PCI device id (``intel.yaml``)."""
    for g in f.intel.gpus:
        fam = matrix.intel_family(g.device_id)
        g.name = fam.name if fam else None
        g.discrete = fam.discrete if fam else None
        g.xpu = fam.xpu if fam else None
    if any(g.name for g in f.intel.gpus):
        f.intel.sources["name"] = DERIVED + "compat_matrix/intel.yaml (PCI device id)"
    else:
        f.intel.sources.pop("name", None)
