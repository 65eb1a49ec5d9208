"""The GPUs of the machine's view, one :class:`~stackdoctor.model.facts.GpuView` per GPU from every witness that saw it
(:mod:`stackdoctor.reconcile` calls it): each built-in kind's user-space tools, its kernel driver's own list, the PCI
bus and torch's device list, joined by PCI address, UUID, then a name only one GPU has; every witness's value kept
in ``GpuView.seen``. A plug-in kind lists its own (``Accelerator.gpus``). Pure."""

from __future__ import annotations

import re
from collections.abc import Iterable

from stackdoctor import kinds
from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import Facts, GpuView, KfdNode, NvidiaGpu, RocmGpu, TorchDevice
from stackdoctor.model.view import W_PCI

__all__ = ["DERIVED", "GPU_WITNESS_ORDER", "NAME_LOOKUP", "W_KFD", "W_PCI", "W_PROC", "W_TORCH", "amd_gpus", "bus_key",
           "derived", "gpu_rank", "intel_gpus", "nvidia_gpus"]

DERIVED = "reconcile: "  # prefix of the source of every derived value


def derived(source: str | None) -> bool:
    return bool(source) and source.startswith(DERIVED)  # type: ignore[union-attr]


# The order in which the witnesses of one GPU's field are weighed (``NvidiaGpu.observed``, recorded by the probe):
# NVML, then nvidia-smi's CSV query, its ``-L`` list (full names and UUIDs), its table last (names cut to fit).
GPU_WITNESS_ORDER: tuple[str, ...] = ("nvml", "nvidia-smi --query-gpu", "nvidia-smi -L", "nvidia-smi")


def gpu_rank(source: str) -> tuple[int, str]:
    return (GPU_WITNESS_ORDER.index(source) if source in GPU_WITNESS_ORDER else len(GPU_WITNESS_ORDER), source)


# ---------------------------------------------------------------------------- GPUs

W_PROC = "/proc/driver/nvidia/gpus"  # the NVIDIA kernel module's GPU list
W_KFD = "/sys/class/kfd"  # the amdgpu kernel driver's KFD topology
W_TORCH = "torch"
NAME_LOOKUP = DERIVED + "compat_matrix/gpus.yaml (name lookup)"


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


def _torch_gpus(f: Facts, kind: str) -> list[TorchDevice]:
    """The GPUs torch itself listed for accelerator kind ``kind`` (its ``torch_api``: ROCm builds answer through
    torch.cuda too), only when it could use them (torch.cuda.is_available())."""
    acc = kinds.by_name(kind)
    if not f.torch.cuda_available or acc is None:
        return []
    want = re.compile(r"^gfx[0-9a-f]+", re.I) if f.torch.hip else re.compile(r"^\d+\.\d+$")
    return [d for d in f.torch.devices if d.kind == acc.torch_api and (d.capability is None or want.match(d.capability))]


def _witness(source: str) -> str:
    """The witness a source string names: "nvidia-smi --query-gpu" -> "nvidia-smi", "nvml" -> "nvml"."""
    return source.split(" ")[0] if source.startswith(("nvidia-smi", "rocm-smi", "amd-smi")) else source


def _witnesses_of(sources: dict[str, str], default: str) -> list[str]:
    names = {_witness(src) for src in sources.values() if src and not derived(src)}
    return sorted(names) or [default]


def _see(v: GpuView, field: str, witness: str, value: object) -> None:
    """Record what ``witness`` said of ``field`` beside the value kept."""
    if value is not None and value != "":
        v.seen.setdefault(field, {})[witness] = str(value)


def _witnessed(v: GpuView, witness: str) -> None:
    if witness not in v.witnesses:
        v.witnesses.append(witness)


def _join(views: list[GpuView], *, bus: str | None, uuid: str | None, name: str | None, taken: set[int], names_left: list[str]) -> GpuView | None:
    """The view that is the same GPU: by PCI address, then UUID, then a name that only one GPU on each side has."""
    free = [v for v in views if id(v) not in taken]
    if bus:
        hit = next((v for v in free if v.bus_id and bus_key(v.bus_id) == bus), None)
        if hit is not None:
            return hit
    if uuid:
        hit = next((v for v in free if _uuid_key(v.uuid) == uuid), None)
        if hit is not None:
            return hit
    if name:
        same = [v for v in free if v.name and v.name == name and not (bus and v.bus_id)]
        if len(same) == 1 and names_left.count(name) == 1:
            return same[0]
    return None


def _attach_torch(views: list[GpuView], devices: list[TorchDevice], *, field: str) -> list[TorchDevice]:
    """Join torch's devices to ``views`` (by PCI address, UUID, then a unique name; one left on each side is
    the same GPU); return the unmatched ones. torch asked the device itself, so its capability replaces
    one that was only looked up by name (the lookup stays in ``seen``); a measured one stays."""
    left = list(devices)
    taken = {id(v) for v in views if v.torch_index is not None}
    names = [d.name or "" for d in devices]
    for d in list(devices):
        match = _join(views, bus=bus_key(d.bus_id), uuid=_uuid_key(d.uuid), name=d.name, taken=taken, names_left=names)
        if match is None:
            continue
        taken.add(id(match))
        left.remove(d)
        _merge_torch(match, d, field)
    free = [v for v in views if id(v) not in taken and v.witnesses != [W_PCI]]
    if len(left) == 1 and len(free) == 1 and not (bus_key(left[0].bus_id) and free[0].bus_id):
        _merge_torch(free[0], left.pop(), field)
    return left


def _merge_torch(v: GpuView, d: TorchDevice, field: str) -> None:
    v.torch_index = d.index
    _witnessed(v, W_TORCH)
    value = (d.capability or "").split(":")[0] or None
    if field == "gfx" and value:
        value = value.lower()
    _see(v, field, W_TORCH, value)
    _see(v, "name", W_TORCH, d.name)
    _see(v, "memory_total_mib", W_TORCH, d.total_memory_mib)
    if value and (getattr(v, field) is None or derived(v.sources.get(field))):
        setattr(v, field, value)
        v.sources[field] = W_TORCH
    if v.name is None and d.name:
        v.name, v.sources["name"] = d.name, W_TORCH
    if v.memory_total_mib is None and d.total_memory_mib:
        v.memory_total_mib = d.total_memory_mib
        v.sources["memory_total_mib"] = W_TORCH
    if v.uuid is None and d.uuid:
        v.uuid, v.sources["uuid"] = d.uuid, W_TORCH
    if v.bus_id is None and bus_key(d.bus_id):
        v.bus_id, v.sources["bus_id"] = bus_key(d.bus_id), W_TORCH


def _lookup_cc(v: GpuView, matrix: Matrix | None) -> None:
    """The compute capability the matrix gives the GPU's name: kept when nothing measured one, always in ``seen``."""
    if matrix is None or not v.name:
        return
    cc = matrix.gpu_compute_capability(v.name)
    if cc is None:
        return
    _see(v, "compute_capability", NAME_LOOKUP, cc)
    if v.compute_capability is None:
        v.compute_capability = cc
        v.sources["compute_capability"] = NAME_LOOKUP


def nvidia_gpus(f: Facts, matrix: Matrix | None) -> list[GpuView]:
    """Every NVIDIA GPU any witness saw, joined: the user-space tools, the kernel module's list, the PCI bus, torch."""
    out = [_nvidia_tool_gpu(g) for g in f.nvidia.gpus]
    _join_nvidia_proc(f, out)
    _join_nvidia_pci(f, out)
    for v in out:
        if W_PCI not in v.witnesses or len(v.witnesses) > 1:
            _lookup_cc(v, matrix)  # PCI's names are chip names ("AD102 [...]"), not what gpus.yaml lists
    if not f.torch.hip:
        _join_nvidia_torch(f, out, matrix)
    return out


_NV_FIELDS = ("name", "compute_capability", "memory_total_mib", "uuid", "bus_id")


def _nvidia_tool_gpu(g: NvidiaGpu) -> GpuView:
    """1. A GPU the user-space tools (NVML, nvidia-smi) listed, as the nvidia probe merged them."""
    v = GpuView(
        vendor="nvidia",
        index=g.index,
        name=g.name,
        compute_capability=g.compute_capability,
        memory_total_mib=g.memory_total_mib,
        uuid=g.uuid,
        bus_id=bus_key(g.bus_id),
        witnesses=_witnesses_of(g.sources, "nvidia-smi"),
        sources={k: g.sources[k] for k in _NV_FIELDS if k in g.sources},
    )
    for k in _NV_FIELDS:
        # every witness's own value (the probe's record), the kept one last so that it stands for its tool
        for wsrc, val in sorted((g.observed.get(k) or {}).items(), key=lambda kv: gpu_rank(kv[0]), reverse=True):
            if wsrc != g.sources.get(k):
                _see(v, k, _witness(wsrc), bus_key(str(val)) if k == "bus_id" else val)
        src = g.sources.get(k)
        if src:
            _see(v, k, _witness(src) if not derived(src) else src, bus_key(g.bus_id) if k == "bus_id" else getattr(g, k))
    v.witnesses = sorted(set(v.witnesses) | {_witness(src) for by in g.observed.values() for src in by if not derived(src)})
    return v


def _join_nvidia_proc(f: Facts, out: list[GpuView]) -> None:
    """2. The kernel module's list (/proc/driver/nvidia/gpus/*/information): no tool needed."""
    proc = [g for g in f.nvidia.proc_gpus if (g.bus_id or g.name) and not g.excluded]  # an excluded GPU is not given out
    host_only = bool(f.platform.container) and bool(out)
    taken: set[int] = set()
    names = [g.name or "" for g in proc]
    for pg in proc:
        key = bus_key(pg.bus_id)
        match = _join(out, bus=key, uuid=_uuid_key(pg.uuid), name=pg.name, taken=taken, names_left=names)
        if match is None and host_only:
            continue  # in a container the tools list what it was given; procfs may also show the host's other GPUs
        if match is None:
            match = GpuView(vendor="nvidia", index=len(out), name=pg.name, uuid=pg.uuid, bus_id=key, witnesses=[])
            for k, val in (("name", pg.name), ("uuid", pg.uuid), ("bus_id", key)):
                if val:
                    match.sources[k] = pg.source or W_PROC
            out.append(match)
        taken.add(id(match))
        _witnessed(match, W_PROC)
        for k, val in (("name", pg.name), ("uuid", pg.uuid), ("bus_id", key)):
            _see(match, k, W_PROC, val)
            if val and getattr(match, k) is None:
                setattr(match, k, val)
                match.sources[k] = pg.source or W_PROC


def _join_nvidia_pci(f: Facts, out: list[GpuView]) -> None:
    """3. The PCI bus (sysfs): a GPU no driver lists is still seen there."""
    pci = _display(f.platform.nvidia_pci_devices)
    for d in pci:
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is None and len(out) == len(pci) and not any(v.bus_id for v in out):
            match = out[len([x for x in out if W_PCI in x.witnesses])] if out else None
        if match is not None:
            _witnessed(match, W_PCI)
            _see(match, "bus_id", W_PCI, key)
            if match.bus_id is None and key:
                match.bus_id = key
                match.sources["bus_id"] = "file:/sys/bus/pci/devices"
            continue
        out.append(GpuView(vendor="nvidia", index=len(out), name=getattr(d, "name", None), bus_id=key, witnesses=[W_PCI], sources={"bus_id": "file:/sys/bus/pci/devices"}, seen={"bus_id": {W_PCI: key or "?"}}))


def _join_nvidia_torch(f: Facts, out: list[GpuView], matrix: Matrix | None) -> None:
    """4. torch's own device list: a GPU no driver tool listed (a container without the utility capability, a Windows
    shell without nvidia-smi on PATH) has torch as its witness; a PCI-only GPU may be the same one."""
    for d in _attach_torch(out, _torch_gpus(f, "nvidia"), field="compute_capability"):
        pci_only = next((v for v in out if v.witnesses == [W_PCI] and v.torch_index is None and (not d.bus_id or bus_key(d.bus_id) == v.bus_id)), None)
        if pci_only is not None:
            pci_only.name = None  # the chip name of the PCI database is not the GPU's name
            pci_only.sources.pop("name", None)
            _merge_torch(pci_only, d, "compute_capability")
            _lookup_cc(pci_only, matrix)
            continue
        cap = d.capability if d.capability and re.fullmatch(r"\d+\.\d+", d.capability) else None
        v = GpuView(vendor="nvidia", index=d.index, torch_index=d.index, witnesses=[], bus_id=bus_key(d.bus_id), uuid=d.uuid)
        _merge_torch(v, d, "compute_capability")
        if cap is None:
            v.compute_capability = None
            v.sources.pop("compute_capability", None)
        _lookup_cc(v, matrix)
        out.append(v)


def amd_gpus(f: Facts, matrix: Matrix | None) -> list[GpuView]:
    """Every AMD GPU any witness saw, joined: ROCm's tools, the kernel's KFD topology, the PCI bus, torch."""
    nodes: dict[int, int] = {}  # id(view) -> KFD node id
    out = [_amd_tool_gpu(f, g, nodes) for g in f.rocm.gpus]
    _join_amd_kfd(f, out, nodes, matrix)
    _join_amd_pci(f, out)
    if f.torch.hip:
        _join_amd_torch(f, out, matrix)
    return out


_ROCM_TOOLS = {"rocminfo", "rocm-smi", "amd-smi", "rocm_agent_enumerator"}


def _amd_tool_gpu(f: Facts, g: RocmGpu, nodes: dict[int, int]) -> GpuView:
    """1. A GPU ROCm's tools (rocminfo, rocm_agent_enumerator, rocm-smi, amd-smi) listed, merged by the rocm probe."""
    srcs = {k: v for k, v in g.sources.items() if v}
    witnesses = sorted({_witness(x) for x in srcs.values()} & _ROCM_TOOLS) or sorted(
        {_witness(x) for x in f.rocm.sources.values() if x} & _ROCM_TOOLS
    ) or ["rocm"]
    gfx = (g.gfx or "").split(":")[0].lower() or None
    v = GpuView(
        vendor="amd",
        index=g.index,
        name=g.name,
        gfx=gfx,
        integrated=g.integrated,
        memory_total_mib=g.memory_total_mib,
        uuid=g.uuid,
        bus_id=bus_key(g.bus_id),
        witnesses=witnesses,
        sources={"gfx": srcs.get("gfx") or f.rocm.sources.get("gpus", "rocminfo"), **{k: srcs[k] for k in ("name", "bus_id", "uuid") if k in srcs}},
    )
    for k in ("name", "gfx", "bus_id", "uuid"):
        _see(v, k, _witness(srcs.get(k) or (witnesses[0] if witnesses else "rocm")), getattr(v, k))
    if g.smi_gfx_version:
        from stackdoctor.model.facts import normalise_smi_gfx

        _see(v, "gfx", "rocm-smi", normalise_smi_gfx(g.smi_gfx_version))
    if g.node is not None:
        nodes[id(v)] = g.node
    return v


def _kfd_match(f: Facts, out: list[GpuView], nodes: dict[int, int], n: KfdNode) -> GpuView | None:
    """The GPU a KFD node is: by node id, else PCI address, else (same count, nothing to join on) by order."""
    key = bus_key(n.bus_id)
    match = next((v for v in out if nodes.get(id(v)) == n.node), None)
    if match is None and key:
        match = next((v for v in out if v.bus_id and v.bus_id == key), None)
    if match is None and len(out) == len(f.rocm.kfd_nodes) and not nodes and not any(v.bus_id for v in out):
        match = out[f.rocm.kfd_nodes.index(n)]  # KFD's node order is rocminfo's agent order
    return match


def _join_amd_kfd(f: Facts, out: list[GpuView], nodes: dict[int, int], matrix: Matrix | None) -> None:
    """2. The kernel's KFD topology: no tool needed."""
    for n in f.rocm.kfd_nodes:
        key = bus_key(n.bus_id)
        match = _kfd_match(f, out, nodes, n)
        if match is None and f.platform.container and f.rocm.gpus:
            continue  # in a container sysfs shows the host's KFD nodes; ROCm's tools list what the container was given
        if match is None:
            match = GpuView(vendor="amd", index=len(out), gfx=n.gfx, bus_id=key, witnesses=[], sources={})
            if n.gfx:
                match.sources["gfx"] = n.source or W_KFD
            if key:
                match.sources["bus_id"] = n.source or W_KFD
            match.integrated = matrix is not None and matrix.apu(n.gfx) is not None
            out.append(match)
        _witnessed(match, W_KFD)
        _see(match, "gfx", W_KFD, n.gfx)
        _see(match, "bus_id", W_KFD, key)
        if match.gfx is None and n.gfx:
            match.gfx, match.sources["gfx"] = n.gfx, n.source or W_KFD
        if match.bus_id is None and key:
            match.bus_id, match.sources["bus_id"] = key, n.source or W_KFD


def _join_amd_pci(f: Facts, out: list[GpuView]) -> None:
    """3. The PCI bus."""
    for d in _display(f.platform.amd_pci_devices):
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is not None:
            _witnessed(match, W_PCI)
            _see(match, "bus_id", W_PCI, key)
            continue
        if out:
            continue  # ROCm's tools list GPUs without PCI addresses: do not count one GPU twice
        out.append(GpuView(vendor="amd", index=len(out), name=getattr(d, "name", None), bus_id=key, witnesses=[W_PCI], sources={"bus_id": "file:/sys/bus/pci/devices"}))


def _join_amd_torch(f: Facts, out: list[GpuView], matrix: Matrix | None) -> None:
    """4. torch's own device list (a ROCm build answers through torch.cuda)."""
    unmatched = _attach_torch(out, _torch_gpus(f, "amd"), field="gfx")
    if f.rocm.gpus or f.rocm.kfd_nodes:
        return
    for d in unmatched:
        v = GpuView(vendor="amd", index=d.index, witnesses=[], sources={})
        _merge_torch(v, d, "gfx")
        v.sources["gfx"] = "torch (gcnArchName)"
        v.integrated = matrix is not None and matrix.apu(v.gfx) is not None
        out.append(v)


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
