"""What NVIDIA's rules share (``accelerators/nvidia/rules.py``): its GPUs and PCI devices, its
driver's witnesses, and torch's words about them. They were ``stackdoctor/rules/helpers.py``'s."""

from __future__ import annotations

import re
from typing import Any

from stackdoctor.accelerators.nvidia.runtime_errors import CUDA_APIS
from stackdoctor.model.facts import GpuView, TorchFacts
from stackdoctor.model.view import MachineView
from stackdoctor.rules.helpers import answered_with_error


def nvidia_gpus(facts: MachineView) -> list[GpuView]:
    return list(facts.devices("nvidia"))


def nvidia_pci(facts: MachineView) -> list[Any]:
    return [d for d in facts.facts.platform.nvidia_pci_devices if (d.class_id or "").lower().startswith("0x03")]


def windows_driver(facts: MachineView) -> bool:
    """The NVIDIA driver number is a Windows one (native Windows, or WSL where the host driver serves)."""
    return facts.facts.platform.system == "Windows" or facts.facts.platform.is_wsl


_NO_DRIVER = re.compile(r"Found no NVIDIA driver on your system", re.I)


def nvidia_witnesses(facts: MachineView) -> list[str]:
    """Every witness that points to NVIDIA hardware or an NVIDIA driver, as "<witness>: <what it saw>": the tools'
    GPUs, the kernel module and its GPU list, PCI, the driver's CUDA level (any tool, torch's runtime, torch's
    words), torch's own messages that name the driver, and the device nodes a container was given. Empty: no
    witness contradicts "no NVIDIA GPU here"."""
    f, t = facts, facts.facts.torch
    out: list[str] = []
    gpus = nvidia_gpus(f)
    if gpus:
        out.append(f"{'/'.join(sorted({w for g in gpus for w in g.witnesses}) or ['reconcile'])}: {len(gpus)} GPU(s)")
    kmod = f.chosen("nvidia.kernel_module_version")
    if kmod.value:
        out.append(f"{_said_by(kmod, 'kernel module')}: nvidia {kmod.value}")
    pci = nvidia_pci(f)
    if pci:
        out.append(f"pci: {', '.join(d.name or d.device_id for d in pci)}")
    drv = f.driver("nvidia")
    if drv.value and not kmod.value:
        out.append(f"{_said_by(drv, 'driver')}: {drv.value}")
    ceiling = f.runtime("nvidia")
    if ceiling.value:
        out.append(f"{_said_by(ceiling, 'driver')}: CUDA {ceiling.value}")
    for e in f.evidence:
        if e.proves in ("driver-too-old", "driver-cuda-level") and not e.values.get("driver_cuda"):
            out.append(f"{e.source}: {e.line}")
        elif answered_with_error(e) and e.values.get("api") in CUDA_APIS:
            out.append(f"{e.source}: error {e.values.get('number') or '?'} ({e.values.get('name', '?')})")
    if f.facts.platform.container_nvidia_devices:
        out.append(f.facts.platform.sources.get("container_nvidia_devices", "/dev/nvidia*"))
    if t.cuda_error and "driver" in t.cuda_error.lower() and not _NO_DRIVER.search(t.cuda_error) and not out:
        out.append(f"torch.cuda_error: {t.cuda_error[:300]}")
    return out


def _said_by(seen: Any, default: str) -> str:
    """The witness a chosen value (a :class:`~stackdoctor.model.facts.SeenValue`) came from, else ``default``."""
    return seen.source or default


def torch_found_no_driver(t: TorchFacts) -> bool:
    """torch's CUDA runtime says it found no NVIDIA driver (its sentence, or cudaDriverGetVersion() = 0)."""
    return bool(_NO_DRIVER.search(t.cuda_error or "")) or t.driver_api_version == 0
