"""AMD's GPUs in the machine's view (:meth:`Amd.joined_gpus <stackdoctor.accelerators.amd.Amd.joined_gpus>`): each
GPU ROCm's tools, the kernel's KFD topology, the PCI bus and torch's device list saw, joined into one
:class:`~stackdoctor.model.facts.GpuView` with every witness's value. Pure."""

from __future__ import annotations

import re

from stackdoctor.kinds import Accelerator
from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import (
    Disagreement,
    Facts,
    GpuView,
    KfdNode,
    ReconciledFacts,
    RocmGpu,
    SeenValue,
    TorchDevice,
    normalise_smi_gfx,
)
from stackdoctor.reconcile.gpus import (
    DERIVED,
    W_PCI,
    attach_torch,
    bus_key,
    derived,
    display,
    merge_torch,
    publish_gpus,
    see,
    tool_witness,
    torch_devices,
    witnessed,
)

__all__ = ["RECOGNISED", "W_KFD", "amd_gpus", "derive", "gpu_disagreements", "publish", "rocm_version", "tool_messages"]

W_KFD = "/sys/class/kfd"  # the amdgpu kernel driver's KFD topology
_SMI = ("rocm-smi", "amd-smi")


def _tool(source: str) -> str:
    """The witness a source string names: "rocm-smi --showproductname" -> "rocm-smi"."""
    return tool_witness(source, _SMI)


def _torch_gpus(f: Facts) -> list[TorchDevice]:
    """The GPUs torch itself listed (a ROCm build answers through torch.cuda), only when it could use them."""
    if not f.torch.cuda_available:
        return []
    return torch_devices(f, "cuda", re.compile(r"^gfx[0-9a-f]+", re.I))


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
    witnesses = sorted({_tool(x) for x in srcs.values()} & _ROCM_TOOLS) or sorted(
        {_tool(x) for x in f.rocm.sources.values() if x} & _ROCM_TOOLS
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
        see(v, k, _tool(srcs.get(k) or (witnesses[0] if witnesses else "rocm")), getattr(v, k))
    if g.smi_gfx_version:
        see(v, "gfx", "rocm-smi", normalise_smi_gfx(g.smi_gfx_version))
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
        witnessed(match, W_KFD)
        see(match, "gfx", W_KFD, n.gfx)
        see(match, "bus_id", W_KFD, key)
        if match.gfx is None and n.gfx:
            match.gfx, match.sources["gfx"] = n.gfx, n.source or W_KFD
        if match.bus_id is None and key:
            match.bus_id, match.sources["bus_id"] = key, n.source or W_KFD


def _join_amd_pci(f: Facts, out: list[GpuView]) -> None:
    """3. The PCI bus."""
    for d in display(f.platform.amd_pci_devices):
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is not None:
            witnessed(match, W_PCI)
            see(match, "bus_id", W_PCI, key)
            continue
        if out:
            continue  # ROCm's tools list GPUs without PCI addresses: do not count one GPU twice
        out.append(GpuView(vendor="amd", index=len(out), name=getattr(d, "name", None), bus_id=key, witnesses=[W_PCI], sources={"bus_id": "file:/sys/bus/pci/devices"}))


def _join_amd_torch(f: Facts, out: list[GpuView], matrix: Matrix | None) -> None:
    """4. torch's own device list (a ROCm build answers through torch.cuda)."""
    unmatched = attach_torch(out, _torch_gpus(f), field="gfx")
    if f.rocm.gpus or f.rocm.kfd_nodes:
        return
    for d in unmatched:
        v = GpuView(vendor="amd", index=d.index, witnesses=[], sources={})
        merge_torch(v, d, "gfx")
        v.sources["gfx"] = "torch (gcnArchName)"
        v.integrated = matrix is not None and matrix.apu(v.gfx) is not None
        out.append(v)


# ---------------------------------------------------------------------------- the witnesses weighed (reconcile's copy)


def derive(f: Facts, matrix: Matrix) -> None:
    """Undo what an earlier reconcile wrote into ROCm's stable keys (a replayed report), then each GPU's
    ``integrated`` flag from its gfx target (``rocm.yaml``)."""
    r = f.rocm
    if derived(r.sources.get("version")):
        r.version = None
        del r.sources["version"]
    r.gpus = [g for g in r.gpus if not derived(g.sources.get("index"))]
    for rg in r.gpus:
        if derived(rg.sources.get("gfx")):
            rg.gfx = None
            del rg.sources["gfx"]
    for g in f.rocm.gpus:
        g.integrated = matrix.apu(g.gfx) is not None or matrix.apu(normalise_smi_gfx(g.smi_gfx_version)) is not None


def rocm_version(f: Facts) -> SeenValue:
    """The installed ROCm release: the version a report already carries, else the first witness that gave one
    (its ``.info/version`` files, ``amd-smi version``: ``rocm.observed``), else the major.minor of HIP's
    version (``hipconfig --version``: HIP's version is numbered after the ROCm release that ships it)."""
    r = f.rocm
    seen = SeenValue()
    for src, value in (r.observed.get("version") or {}).items():
        if value:
            seen.witnesses[src] = value
    hip = r.hip_version or next(iter((r.observed.get("hip_version") or {}).values()), None)
    m = re.match(r"(\d+)\.(\d+)", hip or "")
    if m:
        seen.witnesses[f"{r.sources.get('hip_version') or 'hipconfig --version'} (HIP {hip})"] = f"{m[1]}.{m[2]}"
    if r.version:
        src = r.sources.get("version") or "rocm"
        seen.witnesses.setdefault(src, r.version)
        seen.value, seen.source = r.version, src
    elif seen.witnesses:
        seen.source, seen.value = next(iter(seen.witnesses.items()))
    return seen


def publish(acc: Accelerator, f: Facts, rec: ReconciledFacts) -> None:
    """ROCm's stable keys from the reconciled view, as NVIDIA's are published: ``rocm.version`` from its
    witnesses (``rocm.observed``, ``reconciled.rocm_version``), and in ``rocm.gpus`` every AMD GPU that a witness
    other than ROCm's tools lists (the kernel's KFD topology, torch), each marked ``reconcile:``; a GPU a tool
    lists gains the gfx target another witness gave where the tool gave none."""
    r = f.rocm
    seen = rec.rocm_version
    if r.version is None and seen.value:
        src = seen.source or "rocm"
        r.version = seen.value
        r.sources["version"] = src if src in (r.observed.get("version") or {}) else DERIVED + src
    publish_gpus(
        r.gpus, rec, acc, fill="gfx", fields=("name", "gfx", "uuid", "memory_total_mib", "bus_id"),
        make=lambda v: RocmGpu(index=v.index, name=v.name, gfx=v.gfx, integrated=v.integrated, uuid=v.uuid, memory_total_mib=v.memory_total_mib, bus_id=v.bus_id),
    )


def gpu_disagreements(f: Facts, g: GpuView, label: str) -> list[Disagreement]:
    said = {k: v for k, v in g.seen.get("gfx", {}).items() if v}
    if len(set(said.values())) <= 1:
        return []
    override = f.environment.get("HSA_OVERRIDE_GFX_VERSION") or f.rocm.hsa_override_gfx_version
    # HSA's tools (rocminfo, torch) report the ISA after HSA_OVERRIDE_GFX_VERSION; KFD and the SMIs the chip
    return [Disagreement("gpu.gfx", said, label, f"HSA_OVERRIDE_GFX_VERSION={override}" if override else None)]


# (regex, the finding it proves): matched line by line against torch's messages, the kernel pass's errors and
# ROCm's tool errors (stackdoctor.reconcile.recognise); the sources are in tests/fixtures/real/*/source.md.
RECOGNISED: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"hipErrorNoBinaryForGpu|HIP error: invalid device function|No binary for GPU|Unable to find code object for all current devices"), "rocm-gfx-unsupported"),
    (re.compile(r"Unable to open /dev/kfd read-write: (?:Permission denied|Operation not permitted)"), "rocm-kfd-permission"),
)


def tool_messages(f: Facts) -> list[tuple[str, str]]:
    """ROCm's tools' errors and the KFD's, each with where it was read."""
    texts = [(f"rocm.tool_errors.{tool}", err) for tool, err in sorted(f.rocm.tool_errors.items())]
    if f.rocm.kfd_error:
        texts.append(("rocm.kfd_error", f.rocm.kfd_error))
    return texts
