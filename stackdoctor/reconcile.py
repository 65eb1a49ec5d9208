"""Reconcile: join every witness into one view of the machine, and derive what follows from the facts.

``reconcile(facts, matrix) -> Facts`` is pure: it returns new facts and never changes its input.
It runs once, between the probes and the rules, on a live run and on a replay alike (a replayed
report is reconciled again with today's matrix, so stale derivations never survive).

What it does, in order:

1. **Derivations from the matrix**, each marked with a ``reconcile:`` source so that a replay can
   tell them from probed values and redo them: an NVIDIA GPU's compute capability from its name
   (``gpus.yaml``), a Jetson's JetPack and CUDA from its L4T release (``jetson.yaml``), an AMD GPU's
   ``integrated`` flag from its gfx target (``rocm.yaml``), an Intel GPU's family, ``discrete`` and
   ``xpu`` flags from its PCI id (``intel.yaml``), and the peak TFLOP/s of kernel results
   (``peaks.yaml``).
2. **The reconciled view** (``facts.reconciled``): every GPU seen by any witness (the driver's tools
   and NVML, the PCI bus, torch's device list, ROCm's tools), the same GPU seen by several witnesses
   joined into one, with each witness named; the NVIDIA driver version and the newest CUDA it runs,
   with every witness's value; recognised messages as evidence; the disagreements between witnesses;
   and the machine's accelerator (:mod:`stackdoctor.accelerators`).

The rules and the resolver read the reconciled view, so a finding fires whichever witness is there.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable

from stackdoctor import accelerators
from stackdoctor.facts import (
    Disagreement,
    Evidence,
    Facts,
    GpuView,
    KernelResult,
    NvidiaGpu,
    ReconciledFacts,
    SeenValue,
    TorchDevice,
)
from stackdoctor.matrix import Matrix
from stackdoctor.versions import same_release

__all__ = ["DERIVED", "reconcile", "recognise", "bus_key"]

DERIVED = "reconcile: "  # prefix of the source of every derived value


def reconcile(facts: Facts, matrix: Matrix) -> Facts:
    """New facts: derivations redone from the matrix and ``reconciled`` built from every witness. Pure."""
    f = copy.deepcopy(facts)
    _derive_nvidia(f, matrix)
    _derive_jetson(f, matrix)
    _derive_rocm(f, matrix)
    _derive_intel(f, matrix)
    _derive_peaks(f, matrix)
    view = ReconciledFacts()
    view.evidence = recognise(f)
    view.nvidia_driver = _nvidia_driver(f)
    view.cuda_driver_version = _cuda_ceiling(f, view.evidence)
    view.gpus = _nvidia_gpus(f, view) + _amd_gpus(f) + _intel_gpus(f) + _apple_gpus(f)
    view.disagreements = _disagreements(f, view)
    f.reconciled = view
    chosen = accelerators.select(f)
    view.accelerator = chosen.name if chosen else None
    return f


# ---------------------------------------------------------------------------- derivations


def _derived(source: str | None) -> bool:
    return bool(source) and source.startswith(DERIVED)  # type: ignore[union-attr]


def _derive_nvidia(f: Facts, matrix: Matrix) -> None:
    for g in f.nvidia.gpus:
        if _derived(g.sources.get("compute_capability")):
            g.compute_capability = None
            del g.sources["compute_capability"]
        if g.compute_capability is None and g.name:
            cc = matrix.gpu_compute_capability(g.name)
            if cc:
                g.compute_capability = cc
                g.sources["compute_capability"] = DERIVED + "compat_matrix/gpus.yaml (name lookup)"


def _derive_jetson(f: Facts, matrix: Matrix) -> None:
    j = f.jetson
    for key in ("jetpack", "cuda"):
        if _derived(j.sources.get(key)):
            setattr(j, key, None)
            del j.sources[key]
    row = matrix.jetpack_for(j.l4t_release)
    if row is None:
        return
    if j.jetpack is None:
        j.jetpack = row.jetpack
        j.sources["jetpack"] = DERIVED + f"compat_matrix/jetson.yaml l4t_releases ({row.source})"
    if j.cuda is None and row.cuda:
        j.cuda = row.cuda
        j.sources["cuda"] = DERIVED + f"compat_matrix/jetson.yaml l4t_releases ({row.source})"


def _derive_rocm(f: Facts, matrix: Matrix) -> None:
    from stackdoctor.probes.rocm import normalise_smi_gfx

    for g in f.rocm.gpus:
        g.integrated = matrix.apu(g.gfx) is not None or matrix.apu(normalise_smi_gfx(g.smi_gfx_version)) is not None


def _derive_intel(f: Facts, matrix: Matrix) -> None:
    for g in f.intel.gpus:
        fam = matrix.intel_family(g.device_id)
        g.name = fam.name if fam else None
        g.discrete = fam.discrete if fam else None
        g.xpu = fam.xpu if fam else None
    if any(g.name for g in f.intel.gpus):
        f.intel.sources["name"] = DERIVED + "compat_matrix/intel.yaml (PCI device id)"
    else:
        f.intel.sources.pop("name", None)


def _derive_peaks(f: Facts, matrix: Matrix) -> None:
    """``peak_tflops`` / ``percent_of_peak`` of matmul results: the matrix's peaks table first, else
    (fp32 on NVIDIA) SM count x max SM clock x FP32 lanes per SM (``fp32_lanes_per_sm``)."""
    for r in f.kernels.results:
        if _derived(r.extra.get("peak_source")):
            r.peak_tflops = r.percent_of_peak = None
            del r.extra["peak_source"]
        if r.kernel != "matmul" or r.tflops is None or not r.device.startswith("cuda") or r.peak_tflops is not None:
            continue
        peak, source = _peak(f, r, matrix)
        if peak:
            r.peak_tflops = round(peak, 3)
            r.percent_of_peak = round(100.0 * r.tflops / peak, 1)
            r.extra["peak_source"] = DERIVED + source


def _peak(f: Facts, r: KernelResult, matrix: Matrix) -> tuple[float | None, str]:
    name = r.extra.get("device_name")
    gpus = f.nvidia.gpus
    gpu = next((g for g in gpus if g.name and name and g.name == name), None)
    if gpu is None and name is None:
        idx = r.device.partition(":")[2]
        gpu = next((g for g in gpus if str(g.index) == idx), None)
    row = matrix.peak(name or (gpu.name if gpu else None))
    if row is not None and r.dtype in ("fp32", "bf16", "fp16", "tf32"):
        value = getattr(row, {"tf32": "bf16"}.get(r.dtype, r.dtype), None)
        if value:
            return float(value), f"compat_matrix/peaks.yaml: {row.source}"
    if r.dtype == "fp32" and gpu is not None:
        peak = peak_from_sm_clock(gpu, matrix)
        if peak:
            return peak, "NVML SM count x max SM clock x compat_matrix/peaks.yaml fp32_lanes_per_sm"
    return None, ""


def peak_from_sm_clock(gpu: NvidiaGpu, matrix: Matrix) -> float | None:
    """FP32 (CUDA-core) peak TFLOP/s from NVML's SM count and max SM clock; None when unknown."""
    lanes = matrix.fp32_lanes.get(gpu.compute_capability or "")
    if lanes is None or not gpu.sm_count or not gpu.max_sm_clock_mhz:
        return None
    return gpu.sm_count * lanes.lanes * 2 * gpu.max_sm_clock_mhz * 1e6 / 1e12


# ---------------------------------------------------------------------------- driver


def _nvidia_driver(f: Facts) -> SeenValue:
    """The user-space driver version (NVML, nvidia-smi), else the kernel module's (``/proc``, ``/sys``)."""
    n = f.nvidia
    seen = SeenValue()
    for src, value in sorted((n.observed.get("driver_version") or {}).items()):
        if value:
            seen.witnesses[src] = value
    for src, value in sorted((n.observed.get("kernel_module_version") or {}).items()):
        if value:
            seen.witnesses[src] = value
    if n.driver_version:
        seen.witnesses.setdefault(n.sources.get("driver_version") or "nvidia", n.driver_version)
        seen.value, seen.source = n.driver_version, n.sources.get("driver_version") or "nvidia"
    elif n.kernel_module_version:
        seen.witnesses.setdefault(n.sources.get("kernel_module_version") or "kernel module", n.kernel_module_version)
        seen.value, seen.source = n.kernel_module_version, n.sources.get("kernel_module_version") or "kernel module"
    return seen


def _cuda_ceiling(f: Facts, evidence: list[Evidence]) -> SeenValue:
    """The newest CUDA the driver runs: NVML / nvidia-smi, else torch's "found version NNNN" message."""
    n = f.nvidia
    seen = SeenValue()
    for src, value in sorted((n.observed.get("cuda_driver_version") or {}).items()):
        if value:
            seen.witnesses[src] = value
    if n.cuda_driver_version:
        seen.witnesses.setdefault(n.sources.get("cuda_driver_version") or "nvidia", n.cuda_driver_version)
        seen.value, seen.source = n.cuda_driver_version, n.sources.get("cuda_driver_version") or "nvidia"
    for ev in evidence:
        ceiling = ev.values.get("driver_cuda")
        if ceiling:
            seen.witnesses.setdefault(ev.source, ceiling)
            if seen.value is None:
                seen.value, seen.source = ceiling, ev.source
    return seen


# ---------------------------------------------------------------------------- GPUs


def bus_key(bus_id: str | None) -> str | None:
    """A PCI address in one form: "00000000:01:00.0" and "0000:01:00.0" -> "01:00.0" (domain 0 dropped)."""
    if not bus_id:
        return None
    m = re.search(r"(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])\s*$", bus_id.strip().lower())
    if not m:
        return None
    domain = int(m.group(1) or "0", 16)
    key = f"{int(m.group(2), 16):02x}:{int(m.group(3), 16):02x}.{m.group(4)}"
    return key if domain == 0 else f"{domain:04x}:{key}"


def _uuid_key(uuid: str | None) -> str | None:
    if not uuid:
        return None
    u = uuid.strip().lower()
    return u[4:] if u.startswith(("gpu-", "mig-")) else u


def _display(devices: Iterable[object]) -> list[object]:
    return [d for d in devices if (getattr(d, "class_id", "") or "").lower().startswith("0x03")]


def _torch_gpus(f: Facts) -> list[TorchDevice]:
    """The GPUs torch itself listed (only when it could use them: torch.cuda.is_available())."""
    if not f.torch.cuda_available:
        return []
    want = re.compile(r"^gfx[0-9a-f]+", re.I) if f.torch.hip else re.compile(r"^\d+\.\d+$")
    return [d for d in f.torch.devices if d.kind == "cuda" and (d.capability is None or want.match(d.capability))]


def _witnesses_of(g: NvidiaGpu, default: str) -> list[str]:
    names = {src.split(" ")[0] if src.startswith("nvidia-smi") else src for src in g.sources.values() if src and not _derived(src)}
    return sorted(names) or [default]


def _attach_torch(views: list[GpuView], devices: list[TorchDevice], *, field: str) -> list[TorchDevice]:
    """Join torch's devices to ``views`` (by UUID, then PCI address, then a unique name); return the unmatched ones."""
    left = list(devices)
    for d in list(left):
        match = None
        if _uuid_key(d.uuid):
            match = next((v for v in views if v.torch_index is None and _uuid_key(v.uuid) == _uuid_key(d.uuid)), None)
        if match is None and bus_key(d.bus_id):
            match = next((v for v in views if v.torch_index is None and bus_key(v.bus_id) == bus_key(d.bus_id)), None)
        if match is None and d.name:
            same = [v for v in views if v.torch_index is None and v.name == d.name]
            if len(same) == 1 or (same and len([x for x in left if x.name == d.name]) == len(same)):
                match = same[0]
        if match is None:
            continue
        left.remove(d)
        match.torch_index = d.index
        match.witnesses.append("torch")
        value = (d.capability or "").split(":")[0] or None
        if value and getattr(match, field) is None:
            setattr(match, field, value)
            match.sources[field] = "torch"
        if match.memory_total_mib is None and d.total_memory_mib:
            match.memory_total_mib = d.total_memory_mib
            match.sources["memory_total_mib"] = "torch"
    return left


def _nvidia_gpus(f: Facts, view: ReconciledFacts) -> list[GpuView]:
    out: list[GpuView] = []
    for g in f.nvidia.gpus:
        v = GpuView(
            vendor="nvidia",
            index=g.index,
            name=g.name,
            compute_capability=g.compute_capability,
            memory_total_mib=g.memory_total_mib,
            uuid=g.uuid,
            bus_id=bus_key(g.bus_id),
            witnesses=_witnesses_of(g, "nvidia-smi"),
            sources={k: g.sources[k] for k in ("name", "compute_capability", "memory_total_mib", "uuid", "bus_id") if k in g.sources},
        )
        out.append(v)
    for d in _display(f.platform.nvidia_pci_devices):
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is None and len(out) == len(_display(f.platform.nvidia_pci_devices)) and not any(v.bus_id for v in out):
            match = out[len([x for x in out if "pci" in x.witnesses])] if out else None
        if match is not None:
            match.witnesses.append("pci")
            if match.bus_id is None and key:
                match.bus_id = key
                match.sources["bus_id"] = "file:/sys/bus/pci/devices"
            continue
        out.append(
            GpuView(
                vendor="nvidia",
                index=len(out),
                name=getattr(d, "name", None),
                bus_id=key,
                witnesses=["pci"],
                sources={"bus_id": "file:/sys/bus/pci/devices"},
            )
        )
    if not f.torch.hip:
        unmatched = _attach_torch(out, _torch_gpus(f), field="compute_capability")
        if not f.nvidia.gpus:
            # no driver tool listed the GPUs (a container without the utility capability, a Windows shell
            # without nvidia-smi on PATH): torch's own device list is the witness
            for d in unmatched:
                pci_only = next((v for v in out if v.witnesses == ["pci"] and (not d.bus_id or bus_key(d.bus_id) == v.bus_id)), None)
                cap = d.capability if d.capability and re.fullmatch(r"\d+\.\d+", d.capability) else None
                if pci_only is not None:
                    pci_only.witnesses.append("torch")
                    pci_only.torch_index = d.index
                    pci_only.name = pci_only.name or d.name
                    pci_only.compute_capability = cap
                    pci_only.memory_total_mib = d.total_memory_mib
                    pci_only.sources.update({"name": "torch", "compute_capability": "torch", "memory_total_mib": "torch"})
                    continue
                out.append(
                    GpuView(
                        vendor="nvidia",
                        index=d.index,
                        name=d.name,
                        compute_capability=cap,
                        memory_total_mib=d.total_memory_mib,
                        uuid=d.uuid,
                        bus_id=bus_key(d.bus_id),
                        torch_index=d.index,
                        witnesses=["torch"],
                        sources={"name": "torch", "compute_capability": "torch", "memory_total_mib": "torch"},
                    )
                )
    return out


def _amd_gpus(f: Facts) -> list[GpuView]:
    out: list[GpuView] = []
    for g in f.rocm.gpus:
        out.append(
            GpuView(
                vendor="amd",
                index=g.index,
                name=g.name,
                gfx=(g.gfx or "").split(":")[0].lower() or None,
                integrated=g.integrated,
                memory_total_mib=g.memory_total_mib,
                uuid=g.uuid,
                bus_id=bus_key(g.bus_id),
                witnesses=sorted({s.split(" ")[0] for s in f.rocm.sources.values() if s} & {"rocminfo", "rocm-smi", "amd-smi", "rocm_agent_enumerator"})
                or ["rocm"],
                sources={"gfx": f.rocm.sources.get("gpus", "rocminfo")},
            )
        )
    for d in _display(f.platform.amd_pci_devices):
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is not None:
            match.witnesses.append("pci")
            continue
        if out:
            continue  # ROCm's tools list GPUs without PCI addresses: do not count one GPU twice
        out.append(GpuView(vendor="amd", index=len(out), name=getattr(d, "name", None), bus_id=key, witnesses=["pci"], sources={"bus_id": "file:/sys/bus/pci/devices"}))
    if f.torch.hip:
        unmatched = _attach_torch(out, _torch_gpus(f), field="gfx")
        if not f.rocm.gpus:
            for d in unmatched:
                gfx = (d.capability or "").split(":")[0].lower() or None
                out.append(
                    GpuView(
                        vendor="amd",
                        index=d.index,
                        name=d.name,
                        gfx=gfx,
                        memory_total_mib=d.total_memory_mib,
                        torch_index=d.index,
                        witnesses=["torch"],
                        sources={"name": "torch", "gfx": "torch (gcnArchName)"},
                    )
                )
    return out


def _intel_gpus(f: Facts) -> list[GpuView]:
    return [
        GpuView(
            vendor="intel",
            index=i,
            name=g.name,
            integrated=g.discrete is False,
            bus_id=bus_key(g.address),
            witnesses=["pci"],
            sources={"bus_id": "file:/sys/bus/pci/devices"},
        )
        for i, g in enumerate(f.intel.gpus)
    ]


def _apple_gpus(f: Facts) -> list[GpuView]:
    a = f.apple
    if not (a.is_macos and a.chip and a.chip.startswith("Apple")):
        return []
    return [GpuView(vendor="apple", index=0, name=a.chip, integrated=True, witnesses=["sysctl"], sources={"name": a.sources.get("chip", "sysctl")})]


# ---------------------------------------------------------------------------- evidence


# (regex, finding it proves, value names); matched against torch's messages and the kernel pass's errors
_RECOGNISED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"The NVIDIA driver on your system is too old \(found version (?P<found>\d+)\)"), "driver-too-old"),
    (re.compile(r"CUDA driver version is insufficient for CUDA runtime version"), "driver-too-old"),
    (re.compile(r"no kernel image is available for execution on the device"), "gpu-arch-unsupported"),
    (re.compile(r"hipErrorNoBinaryForGpu|HIP error: invalid device function|No binary for GPU"), "rocm-gfx-unsupported"),
    (re.compile(r"Unable to open /dev/kfd read-write: (?:Permission denied|Operation not permitted)"), "rocm-kfd-permission"),
)


def recognise(f: Facts) -> list[Evidence]:
    """Messages that prove a finding, with the line quoted: torch's CUDA init message, its import error,
    the kernel pass's errors and ROCm's tool errors. An unrecognised message stays what it was."""
    texts: list[tuple[str, str]] = []
    t = f.torch
    if t.cuda_error:
        texts.append(("torch.cuda_error", t.cuda_error))
    if t.import_error:
        texts.append(("torch.import_error", t.import_error))
    k = f.kernels
    if k.error:
        texts.append(("kernels.error", k.error))
    if k.stderr_tail:
        texts.append(("kernels.stderr_tail", k.stderr_tail))
    for i, r in enumerate(k.results):
        if r.error:
            texts.append((f"kernels.results[{i}].error", r.error))
    for tool, err in sorted(f.rocm.tool_errors.items()):
        texts.append((f"rocm.tool_errors.{tool}", err))
    if f.rocm.kfd_error:
        texts.append(("rocm.kfd_error", f.rocm.kfd_error))
    out: list[Evidence] = []
    seen: set[tuple[str, str]] = set()
    for source, text in texts:
        for line in text.splitlines():
            for pattern, proves in _RECOGNISED:
                m = pattern.search(line)
                if not m or (proves, source) in seen:
                    continue
                seen.add((proves, source))
                values: dict[str, str] = {}
                found = m.groupdict().get("found")
                if found:
                    n = int(found)
                    values["driver_cuda"] = f"{n // 1000}.{(n % 1000) // 10}"  # 12040 -> "12.4" (cudaDriverGetVersion's encoding)
                out.append(Evidence(proves=proves, source=source, line=line.strip()[:500], values=values))
    return out


# ---------------------------------------------------------------------------- disagreements


def _disagreements(f: Facts, view: ReconciledFacts) -> list[Disagreement]:
    out: list[Disagreement] = []
    drv = view.nvidia_driver.witnesses
    user = {k: v for k, v in drv.items() if "kernel" not in k and not k.startswith(("/proc", "/sys"))}
    kernel = {k: v for k, v in drv.items() if k not in user}
    values = list(drv.values())
    if len(values) >= 2 and not all(same_release(values[0], v) for v in values[1:]) and user and kernel:
        out.append(Disagreement("nvidia.driver_version", dict(drv), "the user-space driver and the loaded kernel module differ"))
    ceiling = view.cuda_driver_version.witnesses
    cv = list(ceiling.values())
    if len(cv) >= 2 and not all(same_release(cv[0], v) for v in cv[1:]):
        out.append(Disagreement("nvidia.cuda_driver_version", dict(ceiling)))
    for g in view.gpus:
        if g.vendor != "nvidia" or g.torch_index is None:
            continue
        tdev = next((d for d in _torch_gpus(f) if d.index == g.torch_index), None)
        drv_cc = next((x.compute_capability for x in f.nvidia.gpus if x.index == g.index and not _derived(x.sources.get("compute_capability"))), None)
        if tdev and tdev.capability and drv_cc and tdev.capability != drv_cc:
            out.append(Disagreement("gpu.compute_capability", {"nvidia-smi": drv_cc, "torch": tdev.capability}, f"GPU {g.index} {g.name or ''}".strip()))
    return out
