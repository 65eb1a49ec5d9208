"""Display controllers on the PCI bus, read from ``/sys/bus/pci/devices`` under the sysroot.

Shared by the platform probe (the devices of each kind with a ``pci_devices_field``) and the intel probe; each
kind declares its vendor id (``Accelerator.pci_vendor``). Each device
directory holds one-line files ``vendor`` (``0x10de``), ``device`` (``0x2684``) and
``class`` (``0x030000``), and a ``driver`` symlink to the bound kernel driver
(``../../../bus/pci/drivers/nvidia``); ``uevent`` repeats the driver as ``DRIVER=nvidia``.
Display controllers are PCI base class ``0x03`` (VGA ``0x0300``, 3D ``0x0302``), the test
uv's accelerator detection uses (compat-facts.md §10, [UV] ``accelerator.rs``).
"""

from __future__ import annotations

import os
import re

from stackdoctor.model.facts import PciDevice
from stackdoctor.system import System

__all__ = [
    "PCI_DEVICES",
    "display_devices",
    "parse_pci_id",
    "parse_uevent_driver",
]

PCI_DEVICES = "/sys/bus/pci/devices"
DISPLAY_CLASS_PREFIX = "0x03"

_HEX = re.compile(r"^\s*(0x[0-9a-fA-F]+)\s*$")


def parse_pci_id(text: str) -> str | None:
    """One sysfs id file as a lower-case hex string, or None.

    Shape (``/sys/bus/pci/devices/0000:01:00.0/class``; sysfs prints the id as ``0x%06x``)::

        0x030000
    """
    m = _HEX.match(text or "")
    return m.group(1).lower() if m else None


def parse_uevent_driver(text: str) -> str | None:
    """The ``DRIVER=`` line of a PCI device's ``uevent`` file, or None.

    Shape (illustration)::

        DRIVER=nvidia
        PCI_CLASS=30000
        PCI_ID=10DE:2684
    """
    for line in (text or "").splitlines():
        if line.startswith("DRIVER="):
            value = line[len("DRIVER=") :].strip()
            return value or None
    return None


def _driver(system: System, base: str) -> str | None:
    # The driver symlink's target names the driver; readlink through the sysroot mapping so a
    # captured tree (with relative or absolute link targets) replays the same way.
    target = system.readlink(f"{base}/driver") or ""
    if target:
        name = os.path.basename(target.rstrip("/"))
        if name:
            return name
    ue = system.read_text(f"{base}/uevent")
    return parse_uevent_driver(ue.text) if ue.ok else None


def display_devices(system: System, vendor: str | None = None) -> list[PciDevice]:
    """Display controllers (class ``0x03xxxx``), optionally of one vendor, sorted by address."""
    out: list[PciDevice] = []
    for addr in system.listdir(PCI_DEVICES):
        base = f"{PCI_DEVICES}/{addr}"
        cls = system.read_text(f"{base}/class")
        class_id = parse_pci_id(cls.text) if cls.ok else None
        if class_id is None or not class_id.startswith(DISPLAY_CLASS_PREFIX):
            continue
        ven = system.read_text(f"{base}/vendor")
        vendor_id = parse_pci_id(ven.text) if ven.ok else None
        if vendor_id is None or (vendor is not None and vendor_id != vendor):
            continue
        dev = system.read_text(f"{base}/device")
        device_id = (parse_pci_id(dev.text) if dev.ok else None) or "unknown"
        out.append(PciDevice(address=addr, vendor_id=vendor_id, device_id=device_id, class_id=class_id, driver=_driver(system, base)))
    return out
