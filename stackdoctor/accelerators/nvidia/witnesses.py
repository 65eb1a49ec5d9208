"""NVIDIA's GPUs in the machine's view (:meth:`Nvidia.joined_gpus <stackdoctor.accelerators.nvidia.Nvidia.joined_gpus>`):
each GPU the user-space tools (NVML, nvidia-smi), the kernel module's list (/proc/driver/nvidia/gpus), the PCI bus and
torch's device list saw, joined into one :class:`~stackdoctor.model.facts.GpuView` with every witness's value. Pure."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping

from stackdoctor.core.versions import same_release
from stackdoctor.kinds import Accelerator
from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import (
    Disagreement,
    Evidence,
    Facts,
    GpuView,
    KernelResult,
    NvidiaFacts,
    NvidiaGpu,
    ReconciledFacts,
    SeenValue,
    TorchDevice,
)
from stackdoctor.model.view import MachineView
from stackdoctor.reconcile.gpus import (
    DERIVED,
    W_PCI,
    attach_torch,
    bus_key,
    derived,
    display,
    lookup_cc,
    merge_torch,
    publish_gpus,
    same_view,
    see,
    tool_witness,
    torch_devices,
    uuid_key,
    witnessed,
)

__all__ = ["GPU_WITNESS_ORDER", "RECOGNISED", "TORCH_DRIVER_API", "W_PROC", "WITNESS_ORDER", "chosen_values", "count_note",
           "driver_disagreements", "evidence_values", "gpu_disagreements", "gpu_rank", "names_agree", "nvidia_gpus", "peak",
           "peak_from_sm_clock", "pick", "publish", "published_gpus", "unpublish", "user_space_driver", "weigh_gpus"]

# The order in which the witnesses of one GPU's field are weighed (``NvidiaGpu.observed``, recorded by the probe):
# NVML, then nvidia-smi's CSV query, its ``-L`` list (full names and UUIDs), its table last (names cut to fit).
GPU_WITNESS_ORDER: tuple[str, ...] = ("nvml", "nvidia-smi --query-gpu", "nvidia-smi -L", "nvidia-smi")


def gpu_rank(source: str) -> tuple[int, str]:
    return (GPU_WITNESS_ORDER.index(source) if source in GPU_WITNESS_ORDER else len(GPU_WITNESS_ORDER), source)


W_PROC = "/proc/driver/nvidia/gpus"  # the NVIDIA kernel module's GPU list
_TOOLS = ("nvidia-smi",)


def _tool(source: str) -> str:
    """The witness a source string names: "nvidia-smi --query-gpu" -> "nvidia-smi", "nvml" -> "nvml"."""
    return tool_witness(source, _TOOLS)


def _witnesses_of(sources: dict[str, str], default: str) -> list[str]:
    names = {_tool(src) for src in sources.values() if src and not derived(src)}
    return sorted(names) or [default]


def _torch_gpus(f: Facts) -> list[TorchDevice]:
    """The GPUs torch itself listed through torch.cuda, only when it could use them (torch.cuda.is_available())."""
    if not f.torch.cuda_available:
        return []
    return torch_devices(f, "cuda", re.compile(r"^\d+\.\d+$"))


def nvidia_gpus(f: Facts, matrix: Matrix | None) -> list[GpuView]:
    """Every NVIDIA GPU any witness saw, joined: the user-space tools, the kernel module's list, the PCI bus, torch."""
    out = [_nvidia_tool_gpu(g) for g in f.nvidia.gpus]
    _join_nvidia_proc(f, out)
    _join_nvidia_pci(f, out)
    for v in out:
        if W_PCI not in v.witnesses or len(v.witnesses) > 1:
            lookup_cc(v, matrix)  # PCI's names are chip names ("AD102 [...]"), not what gpus.yaml lists
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
                see(v, k, _tool(wsrc), bus_key(str(val)) if k == "bus_id" else val)
        src = g.sources.get(k)
        if src:
            see(v, k, _tool(src) if not derived(src) else src, bus_key(g.bus_id) if k == "bus_id" else getattr(g, k))
    v.witnesses = sorted(set(v.witnesses) | {_tool(src) for by in g.observed.values() for src in by if not derived(src)})
    return v


def _join_nvidia_proc(f: Facts, out: list[GpuView]) -> None:
    """2. The kernel module's list (/proc/driver/nvidia/gpus/*/information): no tool needed."""
    proc = [g for g in f.nvidia.proc_gpus if (g.bus_id or g.name) and not g.excluded]  # an excluded GPU is not given out
    host_only = bool(f.platform.container) and bool(out)
    taken: set[int] = set()
    names = [g.name or "" for g in proc]
    for pg in proc:
        key = bus_key(pg.bus_id)
        match = same_view(out, bus=key, uuid=uuid_key(pg.uuid), name=pg.name, taken=taken, names_left=names)
        if match is None and host_only:
            continue  # in a container the tools list what it was given; procfs may also show the host's other GPUs
        if match is None:
            match = GpuView(vendor="nvidia", index=len(out), name=pg.name, uuid=pg.uuid, bus_id=key, witnesses=[])
            for k, val in (("name", pg.name), ("uuid", pg.uuid), ("bus_id", key)):
                if val:
                    match.sources[k] = pg.source or W_PROC
            out.append(match)
        taken.add(id(match))
        witnessed(match, W_PROC)
        for k, val in (("name", pg.name), ("uuid", pg.uuid), ("bus_id", key)):
            see(match, k, W_PROC, val)
            if val and getattr(match, k) is None:
                setattr(match, k, val)
                match.sources[k] = pg.source or W_PROC


def _join_nvidia_pci(f: Facts, out: list[GpuView]) -> None:
    """3. The PCI bus (sysfs): a GPU no driver lists is still seen there."""
    pci = display(f.platform.nvidia_pci_devices)
    for d in pci:
        key = bus_key(getattr(d, "address", None))
        match = next((v for v in out if key and v.bus_id == key), None)
        if match is None and len(out) == len(pci) and not any(v.bus_id for v in out):
            match = out[len([x for x in out if W_PCI in x.witnesses])] if out else None
        if match is not None:
            witnessed(match, W_PCI)
            see(match, "bus_id", W_PCI, key)
            if match.bus_id is None and key:
                match.bus_id = key
                match.sources["bus_id"] = "file:/sys/bus/pci/devices"
            continue
        out.append(GpuView(vendor="nvidia", index=len(out), name=getattr(d, "name", None), bus_id=key, witnesses=[W_PCI], sources={"bus_id": "file:/sys/bus/pci/devices"}, seen={"bus_id": {W_PCI: key or "?"}}))


def _join_nvidia_torch(f: Facts, out: list[GpuView], matrix: Matrix | None) -> None:
    """4. torch's own device list: a GPU no driver tool listed (a container without the utility capability, a Windows
    shell without nvidia-smi on PATH) has torch as its witness; a PCI-only GPU may be the same one."""
    for d in attach_torch(out, _torch_gpus(f), field="compute_capability"):
        pci_only = next((v for v in out if v.witnesses == [W_PCI] and v.torch_index is None and (not d.bus_id or bus_key(d.bus_id) == v.bus_id)), None)
        if pci_only is not None:
            pci_only.name = None  # the chip name of the PCI database is not the GPU's name
            pci_only.sources.pop("name", None)
            merge_torch(pci_only, d, "compute_capability")
            lookup_cc(pci_only, matrix)
            continue
        cap = d.capability if d.capability and re.fullmatch(r"\d+\.\d+", d.capability) else None
        v = GpuView(vendor="nvidia", index=d.index, torch_index=d.index, witnesses=[], bus_id=bus_key(d.bus_id), uuid=d.uuid)
        merge_torch(v, d, "compute_capability")
        if cap is None:
            v.compute_capability = None
            v.sources.pop("compute_capability", None)
        lookup_cc(v, matrix)
        out.append(v)


# ---------------------------------------------------------------------------- the witnesses weighed (reconcile's copy)


def unpublish(f: Facts) -> None:
    """Undo what an earlier reconcile wrote into NVIDIA's stable keys (a replayed report), so it is derived again."""
    n = f.nvidia
    for key in ("driver_version", "cuda_driver_version", "nvml_version", "driver_library_version"):
        if derived(n.sources.get(key)):
            setattr(n, key, None)
            del n.sources[key]
    n.gpus = [g for g in n.gpus if not derived(g.sources.get("index"))]
    for g in n.gpus:
        if derived(g.sources.get("compute_capability")):
            g.compute_capability = None
            del g.sources["compute_capability"]


def weigh_gpus(f: Facts) -> None:
    """Each NVIDIA GPU's fields from its witnesses (the probe keeps every witness's value in ``observed`` and picks
    none): the first witness in :data:`GPU_WITNESS_ORDER` that gave a value is kept, with its source. A report
    without ``observed`` (an older stackdoctor's, a hand-written fixture) keeps the values it carries."""
    for g in f.nvidia.gpus:
        for name, by_src in g.observed.items():
            if not hasattr(g, name) or name in ("observed", "sources", "errors") or derived(g.sources.get(name)):
                continue
            given = [(src, v) for src, v in sorted(by_src.items(), key=lambda kv: gpu_rank(kv[0])) if v not in (None, "", [])]
            if given:
                src, value = given[0]
                setattr(g, name, list(value) if isinstance(value, list) else value)
                g.sources[name] = src


# The order in which the witnesses of one system-level NVIDIA value are weighed (the first that answered is
# kept; every other stays in ``nvidia.observed`` and in the view's ``witnesses``): NVML is the stable
# interface, nvidia-smi's CSV query the next, its table last; the driver library's own cuDriverGetVersion
# answers only the CUDA level.
WITNESS_ORDER: tuple[str, ...] = (
    "nvml", "nvidia-smi --query-gpu", "nvidia-smi", "nvidia-smi (NVML library version line)", "cuDriverGetVersion",
    "/proc/driver/nvidia/version", "/sys/module/nvidia/version",
)


def _rank(source: str) -> tuple[int, str]:
    return (WITNESS_ORDER.index(source) if source in WITNESS_ORDER else len(WITNESS_ORDER), source)


def pick(observed: dict[str, str], given: str | None, given_source: str | None) -> SeenValue:
    """One value from its witnesses: a value the report already carries (a probe of an older stackdoctor, a
    hand-written fixture) first, then the witnesses in :data:`WITNESS_ORDER`."""
    seen = SeenValue()
    for src, value in sorted(observed.items(), key=lambda kv: _rank(kv[0])):
        if value:
            seen.witnesses[src] = value
    if given:
        src = given_source or "nvidia"
        seen.witnesses.setdefault(src, given)
        seen.value, seen.source = given, src
    elif seen.witnesses:
        seen.source, seen.value = next(iter(seen.witnesses.items()))
    return seen


def chosen_values(f: Facts, rec: ReconciledFacts) -> dict[str, SeenValue]:
    """NVIDIA's values chosen from their witnesses: the driver and the newest CUDA it runs into the reconciled
    section (``rec``), and the stable keys reconcile chooses (the kernel module's, NVML's, the driver library's version)."""
    n = f.nvidia
    # the loaded module's version: its source, else /proc's file, else /sys's (no user-space witness)
    kmod = SeenValue(value=n.kernel_module_version, source=n.sources.get("kernel_module_version"))
    if n.kernel_module_version is None:
        picked = pick(n.observed.get("kernel_module_version") or {}, None, None)
        if picked.value:
            kmod = SeenValue(value=picked.value, source=picked.source or "kernel module", witnesses=picked.witnesses)
    chosen = {"nvidia.kernel_module_version": kmod}
    for key in ("nvml_version", "driver_library_version"):
        chosen["nvidia." + key] = pick(n.observed.get(key) or {}, getattr(n, key), n.sources.get(key))
    rec.nvidia_driver = _nvidia_driver(f, kmod)
    rec.cuda_driver_version = _cuda_ceiling(f, rec.evidence)
    return chosen


def _nvidia_driver(f: Facts, kmod: SeenValue) -> SeenValue:
    """The user-space driver version (NVML, nvidia-smi, in :data:`WITNESS_ORDER`), else the loaded kernel
    module's (``kmod``: ``/proc``, ``/sys``); every witness's value beside it."""
    n = f.nvidia
    seen = pick(n.observed.get("driver_version") or {}, n.driver_version, n.sources.get("driver_version"))
    for src, value in sorted((n.observed.get("kernel_module_version") or {}).items()):
        if value:
            seen.witnesses.setdefault(src, value)
    if kmod.value:
        seen.witnesses.setdefault(kmod.source or "kernel module", kmod.value)
        if seen.value is None:
            seen.value, seen.source = kmod.value, kmod.source or "kernel module"
    return seen


TORCH_DRIVER_API = "torch._C._cuda_getDriverVersion()"


def _cuda_ceiling(f: Facts, evidence: list[Evidence]) -> SeenValue:
    """The newest CUDA the driver runs: NVML / nvidia-smi / the driver library, else torch's "found version NNNN" message."""
    n = f.nvidia
    seen = pick(n.observed.get("cuda_driver_version") or {}, n.cuda_driver_version, n.sources.get("cuda_driver_version"))
    raw = f.torch.driver_api_version
    if raw is not None and raw > 0:  # torch's own runtime asked the driver (cudaDriverGetVersion): a value, whatever the sentence
        level = f"{raw // 1000}.{(raw % 1000) // 10}"
        seen.witnesses.setdefault(TORCH_DRIVER_API, level)
        if seen.value is None:
            seen.value, seen.source = level, TORCH_DRIVER_API
    for ev in evidence:
        ceiling = ev.values.get("driver_cuda")
        if ceiling:
            seen.witnesses.setdefault(ev.source, ceiling)
            if seen.value is None:
                seen.value, seen.source = ceiling, ev.source
    return seen


def user_space_driver(view: MachineView) -> str | None:
    """The user-space driver's version (NVML, nvidia-smi): the view's driver version unless reconcile took it
    from the kernel module because no user-space witness answered."""
    n = view.facts.nvidia
    if n.driver_version is not None:  # the facts carry one (a probe of an older stackdoctor, or a report's published key)
        return None if derived(n.sources.get("driver_version")) else n.driver_version
    drv = view.driver("nvidia")
    return drv.value if drv.value is not None and not derived(_published_source(n, "driver_version", drv)) else None


# ---------------------------------------------------------------------------- the stable keys carry the view


def publish(acc: Accelerator, f: Facts, view: MachineView, rec: ReconciledFacts) -> None:
    """The reconciled values into NVIDIA's stable keys (``nvidia.driver_version``, ``nvidia.gpus`` ...), every
    witness's own value kept beside them (``nvidia.observed``, ``reconciled.*.witnesses``). A value no user-space
    tool gave is marked ``reconcile:`` so that a replay derives it again."""
    n = f.nvidia
    kmod = view.chosen("nvidia.kernel_module_version")
    if n.kernel_module_version is None and kmod.value:
        n.kernel_module_version, n.sources["kernel_module_version"] = kmod.value, kmod.source or "kernel module"
    more = {key: view.chosen("nvidia." + key) for key in ("nvml_version", "driver_library_version")}
    for key, seen in (("driver_version", rec.nvidia_driver), ("cuda_driver_version", rec.cuda_driver_version), *more.items()):
        if seen.value is None or getattr(n, key) is not None:
            continue
        setattr(n, key, seen.value)
        n.sources[key] = _published_source(n, key, seen)
    _publish_gpus(acc, n.gpus, rec)


def _published_source(n: NvidiaFacts, key: str, seen: SeenValue) -> str:
    """The source ``nvidia.<key>`` is published with: the witness's, marked ``reconcile:`` unless a user-space tool gave it."""
    src = seen.source or "nvidia"
    user = src in WITNESS_ORDER or src in (n.observed.get(key) or {})
    return src if user and not src.startswith(("/proc", "/sys")) else DERIVED + src


def _publish_gpus(acc: Accelerator, own: list[NvidiaGpu], rec: ReconciledFacts) -> None:
    publish_gpus(
        own, rec, acc, fill="compute_capability", fields=("name", "uuid", "compute_capability", "memory_total_mib", "bus_id"),
        make=lambda v: NvidiaGpu(index=v.index, name=v.name, uuid=v.uuid, compute_capability=v.compute_capability, memory_total_mib=v.memory_total_mib, bus_id=v.bus_id),
    )


def published_gpus(acc: Accelerator, f: Facts, rec: ReconciledFacts) -> list[NvidiaGpu]:
    """``nvidia.gpus`` as the report publishes it (:func:`stackdoctor.reconcile.report_facts`), on a copy: ``f`` unchanged."""
    gpus = copy.deepcopy(f.nvidia.gpus)
    _publish_gpus(acc, gpus, rec)
    return gpus


# ---------------------------------------------------------------------------- disagreements


def names_agree(values: Iterable[str]) -> bool:
    """Names of one GPU agree when each is the same, or a cut form of another (nvidia-smi's table writes
    ``Tesla V100-SXM2...`` for ``Tesla V100-SXM2-32GB``)."""
    names = {v.strip() for v in values if v and v.strip()}
    whole = {v for v in names if not v.endswith("...")}
    cut = [v.removesuffix("...").rstrip() for v in names - whole]
    if len(whole) != 1:
        return not whole  # two different whole names disagree; only cut forms cannot be told apart
    (w,) = whole
    return all(c and w.startswith(c) for c in cut)


def driver_disagreements(rec: ReconciledFacts) -> list[Disagreement]:
    out: list[Disagreement] = []
    drv = rec.nvidia_driver.witnesses
    user = {k: v for k, v in drv.items() if "kernel" not in k and not k.startswith(("/proc", "/sys"))}
    kernel = {k: v for k, v in drv.items() if k not in user}
    values = list(drv.values())
    if len(values) >= 2 and not all(same_release(values[0], v) for v in values[1:]) and user and kernel:
        out.append(Disagreement("nvidia.driver_version", dict(drv), "the user-space driver and the loaded kernel module differ"))
    ceiling = rec.cuda_driver_version.witnesses
    cv = list(ceiling.values())
    if len(cv) >= 2 and not all(same_release(cv[0], v) for v in cv[1:]):
        out.append(Disagreement("nvidia.cuda_driver_version", dict(ceiling)))
    return out


def gpu_disagreements(g: GpuView, label: str) -> list[Disagreement]:
    out: list[Disagreement] = []
    said = g.seen.get("compute_capability", {})
    if len(set(said.values())) > 1:
        out.append(Disagreement("gpu.compute_capability", dict(said), label))
    names = {w: n for w, n in g.seen.get("name", {}).items() if w in ("nvml", "nvidia-smi")}
    if len(names) > 1 and not names_agree(names.values()):
        out.append(Disagreement("gpu.name", names, label))
    mem = {w: m for w, m in g.seen.get("memory_total_mib", {}).items() if w in ("nvml", "nvidia-smi")}
    if len(set(mem.values())) > 1:
        out.append(Disagreement("gpu.memory_total_mib", dict(mem), label))
    return out


# ---------------------------------------------------------------------------- evidence and peaks


# (regex, the finding it proves): matched line by line against torch's messages, the kernel pass's errors (before
# every other kind's and the generic ones: stackdoctor.reconcile.recognise). Each is a message the runtime prints
# when that fault is the cause; the sources are in tests/fixtures/real/*/source.md.
RECOGNISED: tuple[tuple[re.Pattern[str], str], ...] = (
    # torch's CUDA init: "...too old (found version 10020)..." (cudaDriverGetVersion's number: 10020 = CUDA 10.2)
    # torch 2.x: c10/cuda/CUDAFunctions.cpp device_count_impl, one line, as a "CUDA initialization:" warning;
    # torch 1.x: torch/cuda/__init__.py _check_driver, a multi-line AssertionError whose 2nd line says it
    # (quoted in https://github.com/pytorch/pytorch/issues/25581); the worker keeps every line, "version" optional
    (re.compile(r"The NVIDIA driver on your system is too old \(found (?:version )?(?P<found>\d{4,6})\)"), "driver-too-old"),
    (re.compile(r"CUDA driver version is insufficient for CUDA runtime version|cudaErrorInsufficientDriver"), "driver-too-old"),
    # the driver's CUDA level in any other wording ("... found version 12070 of the driver API"): a witness
    # of the level only; driver-too-old compares it with the build's CUDA (no verdict from the words alone)
    (re.compile(r"\bdriver\b.{0,200}?\bfound version (?P<found>\d{4,6})\b", re.I), "driver-cuda-level"),
    # a kernel with no SASS/PTX for this GPU; torch's own warning names the GPU's capability
    (re.compile(r"no kernel image is available for execution on the device|cudaErrorNoKernelImageForDevice"), "gpu-arch-unsupported"),
    (re.compile(r"with CUDA capability sm_(?P<sm>\d{2,3}) is not compatible with the current PyTorch installation"), "gpu-arch-unsupported"),
    (re.compile(r"CUDA error: invalid device function|cudaErrorInvalidDeviceFunction"), "gpu-arch-unsupported"),
)


def evidence_values(groups: Mapping[str, str | None]) -> dict[str, str]:
    """What a recognised line says in NVIDIA's words: the driver's CUDA level, a GPU's compute capability."""
    values: dict[str, str] = {}
    found = groups.get("found")
    if found:
        n = int(found)
        values["driver_cuda"] = f"{n // 1000}.{(n % 1000) // 10}"  # 12040 -> "12.4" (cudaDriverGetVersion's encoding)
    sm = groups.get("sm")
    if sm:
        values["compute_capability"] = f"{sm[:-1]}.{sm[-1]}"  # sm_61 -> "6.1"
    return values


def count_note(f: Facts, witness: str) -> str | None:
    """What explains torch counting another number of NVIDIA GPUs than the driver, besides a hiding variable: MIG, a container."""
    if any(g.mig_mode == "Enabled" for g in f.nvidia.gpus):
        return "MIG"
    if f.platform.container and witness == W_PROC:
        nvd = f.environment.get("NVIDIA_VISIBLE_DEVICES")
        return f"container (NVIDIA_VISIBLE_DEVICES={nvd})" if nvd else "container"
    return None


def peak(acc: Accelerator, f: Facts, rec: ReconciledFacts, r: KernelResult, matrix: Matrix) -> tuple[float | None, str]:
    """The peak of result ``r`` from the NVIDIA GPUs the report lists (the published ``nvidia.gpus``)."""
    gpus = published_gpus(acc, f, rec)
    name = r.extra.get("device_name")
    gpu = next((g for g in gpus if g.name and name and g.name == name), None)
    if gpu is None and name is None:
        idx = r.device.partition(":")[2]
        gpu = next((g for g in gpus if str(g.index) == idx), None)
    row = matrix.peak(name or (gpu.name if gpu else None))
    if row is not None and r.dtype in ("fp32", "tf32", "bf16", "fp16"):
        value = getattr(row, r.dtype, None)  # tf32 has its own (Tensor Core) column: half of bf16 on Hopper
        if value:
            return float(value), f"compat_matrix/peaks.yaml: {row.source}"
    if r.dtype == "fp32" and gpu is not None:
        p = peak_from_sm_clock(gpu, matrix)
        if p:
            return p, "NVML SM count x max SM clock x compat_matrix/peaks.yaml fp32_lanes_per_sm"
    return None, ""


def peak_from_sm_clock(gpu: NvidiaGpu, matrix: Matrix) -> float | None:
    """FP32 (CUDA-core) peak TFLOP/s from NVML's SM count and max SM clock; None when unknown."""
    lanes = matrix.fp32_lanes.get(gpu.compute_capability or "")
    if lanes is None or not gpu.sm_count or not gpu.max_sm_clock_mhz:
        return None
    return gpu.sm_count * lanes.lanes * 2 * gpu.max_sm_clock_mhz * 1e6 / 1e12
