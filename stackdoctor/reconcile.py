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
from collections.abc import Callable, Iterable
from typing import TypeVar

from stackdoctor import accelerators
from stackdoctor.facts import (
    Disagreement,
    Evidence,
    Facts,
    GpuView,
    KernelResult,
    KfdNode,
    NvidiaGpu,
    ReconciledFacts,
    RocmGpu,
    SeenValue,
    TorchDevice,
)
from stackdoctor.matrix import Matrix
from stackdoctor.versions import same_release
from stackdoctor.view import MachineView

__all__ = ["DERIVED", "reconcile", "recognise", "bus_key"]

DERIVED = "reconcile: "  # prefix of the source of every derived value


def reconcile(facts: Facts | MachineView, matrix: Matrix) -> MachineView:
    """The machine's view: derivations redone from the matrix on a copy of the facts, every witness joined, the
    report's stable keys and ``reconciled`` section written from it (``view.facts``). Pure; a view given is
    reconciled again from its facts (a replay redoes every derivation)."""
    f = copy.deepcopy(facts.facts if isinstance(facts, MachineView) else facts)
    _unpublish(f)
    _derive_jetson(f, matrix)
    _derive_rocm(f, matrix)
    _derive_intel(f, matrix)
    _derive_torch(f)
    _weigh_nvidia_gpus(f)
    view = ReconciledFacts(done=True)
    view.evidence = recognise(f)
    n = f.nvidia
    if n.kernel_module_version is None:  # the loaded module's version: /proc's file, else /sys's (no user-space witness)
        kmod = _pick(n.observed.get("kernel_module_version") or {}, None, None)
        if kmod.value:
            n.kernel_module_version, n.sources["kernel_module_version"] = kmod.value, kmod.source or "kernel module"
    more = {key: _pick(n.observed.get(key) or {}, getattr(n, key), n.sources.get(key)) for key in ("nvml_version", "driver_library_version")}
    view.nvidia_driver = _nvidia_driver(f)
    view.cuda_driver_version = _cuda_ceiling(f, view.evidence)
    view.rocm_version = _rocm_version(f)
    n = f.nvidia
    view.gpus = _nvidia_gpus(f, matrix) + _amd_gpus(f, matrix) + _intel_gpus(f) + _apple_gpus(f) + [g for a in accelerators.ALL for g in a.gpus(f)]
    view.disagreements = _disagreements(f, view)
    f.reconciled = view
    _publish(f, view, more)
    _publish_rocm(f, view)
    _derive_peaks(f, matrix)
    chosen = accelerators.select(f)
    view.accelerator = chosen.name if chosen else None
    return MachineView.of(f)


# ---------------------------------------------------------------------------- the stable keys carry the view

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


def _pick(observed: dict[str, str], given: str | None, given_source: str | None) -> SeenValue:
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


# The order in which the witnesses of one GPU's field are weighed (``NvidiaGpu.observed``, recorded by the probe):
# NVML, then nvidia-smi's CSV query, its ``-L`` list (full names and UUIDs), its table last (names cut to fit).
GPU_WITNESS_ORDER: tuple[str, ...] = ("nvml", "nvidia-smi --query-gpu", "nvidia-smi -L", "nvidia-smi")


def _gpu_rank(source: str) -> tuple[int, str]:
    return (GPU_WITNESS_ORDER.index(source) if source in GPU_WITNESS_ORDER else len(GPU_WITNESS_ORDER), source)


def _weigh_nvidia_gpus(f: Facts) -> None:
    """Each NVIDIA GPU's fields from its witnesses (the probe keeps every witness's value in ``observed`` and picks
    none): the first witness in :data:`GPU_WITNESS_ORDER` that gave a value is kept, with its source. A report
    without ``observed`` (an older stackdoctor's, a hand-written fixture) keeps the values it carries."""
    for g in f.nvidia.gpus:
        for name, by_src in g.observed.items():
            if not hasattr(g, name) or name in ("observed", "sources", "errors") or _derived(g.sources.get(name)):
                continue
            given = [(src, v) for src, v in sorted(by_src.items(), key=lambda kv: _gpu_rank(kv[0])) if v not in (None, "", [])]
            if given:
                src, value = given[0]
                setattr(g, name, list(value) if isinstance(value, list) else value)
                g.sources[name] = src


def _names_agree(values: Iterable[str]) -> bool:
    """Names of one GPU agree when each is the same, or a cut form of another (nvidia-smi's table writes
    ``Tesla V100-SXM2...`` for ``Tesla V100-SXM2-32GB``)."""
    names = {v.strip() for v in values if v and v.strip()}
    whole = {v for v in names if not v.endswith("...")}
    cut = [v.removesuffix("...").rstrip() for v in names - whole]
    if len(whole) != 1:
        return not whole  # two different whole names disagree; only cut forms cannot be told apart
    (w,) = whole
    return all(c and w.startswith(c) for c in cut)


def user_space_driver(f: Facts | MachineView) -> str | None:
    """The user-space driver's version (NVML, nvidia-smi): ``nvidia.driver_version`` unless reconcile took it
    from the kernel module because no user-space witness answered."""
    n = f.nvidia
    return None if _derived(n.sources.get("driver_version")) else n.driver_version


def _unpublish(f: Facts) -> None:
    """Undo what an earlier reconcile wrote into the stable keys (a replayed report), so it is derived again."""
    n = f.nvidia
    for key in ("driver_version", "cuda_driver_version", "nvml_version", "driver_library_version"):
        if _derived(n.sources.get(key)):
            setattr(n, key, None)
            del n.sources[key]
    n.gpus = [g for g in n.gpus if not _derived(g.sources.get("index"))]
    for g in n.gpus:
        if _derived(g.sources.get("compute_capability")):
            g.compute_capability = None
            del g.sources["compute_capability"]
    r = f.rocm
    if _derived(r.sources.get("version")):
        r.version = None
        del r.sources["version"]
    r.gpus = [g for g in r.gpus if not _derived(g.sources.get("index"))]
    for rg in r.gpus:
        if _derived(rg.sources.get("gfx")):
            rg.gfx = None
            del rg.sources["gfx"]
    t = f.torch
    if _derived(t.sources.get("cudnn_version")):
        t.cudnn_version = t.sources.pop("cudnn_version").split("torch.backends.cudnn.version() ", 1)[-1].strip() or None


def _publish(f: Facts, view: ReconciledFacts, more: dict[str, SeenValue]) -> None:
    """The reconciled values into the report's stable keys (``nvidia.driver_version``, ``nvidia.gpus`` ...),
    every witness's own value kept beside them (``nvidia.observed``, ``reconciled.*.witnesses``). A value
    no user-space tool gave is marked ``reconcile:`` so that a replay derives it again."""
    n = f.nvidia
    for key, seen in (("driver_version", view.nvidia_driver), ("cuda_driver_version", view.cuda_driver_version), *more.items()):
        if seen.value is None or getattr(n, key) is not None:
            continue
        setattr(n, key, seen.value)
        src = seen.source or "nvidia"
        user = src in WITNESS_ORDER or src in (n.observed.get(key) or {})
        n.sources[key] = src if user and not src.startswith(("/proc", "/sys")) else DERIVED + src
    _publish_gpus(
        n.gpus, view, "nvidia", fill="compute_capability", fields=("name", "uuid", "compute_capability", "memory_total_mib", "bus_id"),
        make=lambda v: NvidiaGpu(index=v.index, name=v.name, uuid=v.uuid, compute_capability=v.compute_capability, memory_total_mib=v.memory_total_mib, bus_id=v.bus_id),
    )


def _publish_rocm(f: Facts, view: ReconciledFacts) -> None:
    """ROCm's stable keys from the reconciled view, as :func:`_publish` does NVIDIA's: ``rocm.version`` from its
    witnesses (``rocm.observed``, ``reconciled.rocm_version``), and in ``rocm.gpus`` every AMD GPU that a witness
    other than ROCm's tools lists (the kernel's KFD topology, torch), each marked ``reconcile:``; a GPU a tool
    lists gains the gfx target another witness gave where the tool gave none."""
    r = f.rocm
    seen = view.rocm_version
    if r.version is None and seen.value:
        src = seen.source or "rocm"
        r.version = seen.value
        r.sources["version"] = src if src in (r.observed.get("version") or {}) else DERIVED + src
    _publish_gpus(
        r.gpus, view, "amd", fill="gfx", fields=("name", "gfx", "uuid", "memory_total_mib", "bus_id"),
        make=lambda v: RocmGpu(index=v.index, name=v.name, gfx=v.gfx, integrated=v.integrated, uuid=v.uuid, memory_total_mib=v.memory_total_mib, bus_id=v.bus_id),
    )


_G = TypeVar("_G", NvidiaGpu, RocmGpu)


def _publish_gpus(own: list[_G], view: ReconciledFacts, kind: str, *, fill: str, fields: tuple[str, ...], make: Callable[[GpuView], _G]) -> None:
    """A kind's GPUs in its stable keys from the reconciled view: a GPU its own tools list gains the ``fill`` value
    (compute capability, gfx target) another witness gave where the tool gave none; a GPU only other witnesses list
    (the kernel driver's files, torch) is added, marked ``reconcile:``; one only the PCI bus sees is no driver's GPU."""
    acc = _kind(kind)
    tools = set(acc.tool_witnesses)
    by_bus = {bus_key(g.bus_id): g for g in own if bus_key(g.bus_id)}
    for v in (g for g in view.gpus if g.vendor == acc.vendor):
        if set(v.witnesses) & tools:
            g = by_bus.get(v.bus_id) or next((x for x in own if x.index == v.index), None)
            value = getattr(v, fill)
            if g is not None and getattr(g, fill) is None and value:
                src = v.sources.get(fill) or "reconciled view"
                setattr(g, fill, value)
                g.sources[fill] = src if _derived(src) else DERIVED + src
            continue
        if v.witnesses == [W_PCI] or not v.witnesses and v.torch_index is None:
            continue  # a GPU no driver lists (only the PCI bus sees it) is not a driver's GPU
        g = make(v)
        g.sources["index"] = DERIVED + "reconciled view (" + ", ".join(v.witnesses or ["torch"]) + ")"
        for k in fields:
            given = v.sources.get(k)
            if getattr(g, k) is not None and given:
                g.sources[k] = given if _derived(given) else DERIVED + given
        own.append(g)
    own.sort(key=lambda g: g.index)


def _rocm_version(f: Facts) -> SeenValue:
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


# ---------------------------------------------------------------------------- derivations


def _derived(source: str | None) -> bool:
    return bool(source) and source.startswith(DERIVED)  # type: ignore[union-attr]


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
    if row is not None and r.dtype in ("fp32", "tf32", "bf16", "fp16"):
        value = getattr(row, r.dtype, None)  # tf32 has its own (Tensor Core) column: half of bf16 on Hopper
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
    """The user-space driver version (NVML, nvidia-smi, in :data:`WITNESS_ORDER`), else the loaded kernel
    module's (``/proc``, ``/sys``); every witness's value beside it."""
    n = f.nvidia
    seen = _pick(n.observed.get("driver_version") or {}, n.driver_version, n.sources.get("driver_version"))
    for src, value in sorted((n.observed.get("kernel_module_version") or {}).items()):
        if value:
            seen.witnesses.setdefault(src, value)
    if n.kernel_module_version:
        seen.witnesses.setdefault(n.sources.get("kernel_module_version") or "kernel module", n.kernel_module_version)
        if seen.value is None:
            seen.value, seen.source = n.kernel_module_version, n.sources.get("kernel_module_version") or "kernel module"
    return seen


TORCH_DRIVER_API = "torch._C._cuda_getDriverVersion()"


def _cuda_ceiling(f: Facts, evidence: list[Evidence]) -> SeenValue:
    """The newest CUDA the driver runs: NVML / nvidia-smi / the driver library, else torch's "found version NNNN" message."""
    n = f.nvidia
    seen = _pick(n.observed.get("cuda_driver_version") or {}, n.cuda_driver_version, n.sources.get("cuda_driver_version"))
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


def _derive_torch(f: Facts) -> None:
    """cuDNN's version in one form, the runtime's own ("9.10.2"): torch.backends.cudnn.version() answers an
    integer (91002 = 9.10.2; 8907 = 8.9.7 before cuDNN 9); the runtime wheels' files name "9.24.0.43"."""
    t = f.torch
    raw = t.cudnn_version
    if raw and raw.isdigit():
        v = int(raw)
        major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
        dotted = f"{major}.{rest // 100}.{rest % 100}"
        files = t.runtime_versions.get("cudnn")
        t.cudnn_version = files if files and (files == dotted or files.startswith(dotted + ".")) else dotted
        t.sources["cudnn_version"] = DERIVED + "torch.backends.cudnn.version() " + raw


# ---------------------------------------------------------------------------- GPUs

W_PROC = "/proc/driver/nvidia/gpus"  # the NVIDIA kernel module's GPU list
W_KFD = "/sys/class/kfd"  # the amdgpu kernel driver's KFD topology
W_PCI = "pci"  # /sys/bus/pci/devices
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


def _torch_gpus(f: Facts) -> list[TorchDevice]:
    """The GPUs torch itself listed (only when it could use them: torch.cuda.is_available())."""
    if not f.torch.cuda_available:
        return []
    want = re.compile(r"^gfx[0-9a-f]+", re.I) if f.torch.hip else re.compile(r"^\d+\.\d+$")
    return [d for d in f.torch.devices if d.kind == "cuda" and (d.capability is None or want.match(d.capability))]


def _witness(source: str) -> str:
    """The witness a source string names: "nvidia-smi --query-gpu" -> "nvidia-smi", "nvml" -> "nvml"."""
    return source.split(" ")[0] if source.startswith(("nvidia-smi", "rocm-smi", "amd-smi")) else source


def _witnesses_of(sources: dict[str, str], default: str) -> list[str]:
    names = {_witness(src) for src in sources.values() if src and not _derived(src)}
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
    if value and (getattr(v, field) is None or _derived(v.sources.get(field))):
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


def _nvidia_gpus(f: Facts, matrix: Matrix | None) -> list[GpuView]:
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
        for wsrc, val in sorted((g.observed.get(k) or {}).items(), key=lambda kv: _gpu_rank(kv[0]), reverse=True):
            if wsrc != g.sources.get(k):
                _see(v, k, _witness(wsrc), bus_key(str(val)) if k == "bus_id" else val)
        src = g.sources.get(k)
        if src:
            _see(v, k, _witness(src) if not _derived(src) else src, bus_key(g.bus_id) if k == "bus_id" else getattr(g, k))
    v.witnesses = sorted(set(v.witnesses) | {_witness(src) for by in g.observed.values() for src in by if not _derived(src)})
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
    for d in _attach_torch(out, _torch_gpus(f), field="compute_capability"):
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


def _amd_gpus(f: Facts, matrix: Matrix | None) -> list[GpuView]:
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
        from stackdoctor.probes.rocm import normalise_smi_gfx

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
    unmatched = _attach_torch(out, _torch_gpus(f), field="gfx")
    if f.rocm.gpus or f.rocm.kfd_nodes:
        return
    for d in unmatched:
        v = GpuView(vendor="amd", index=d.index, witnesses=[], sources={})
        _merge_torch(v, d, "gfx")
        v.sources["gfx"] = "torch (gcnArchName)"
        v.integrated = matrix is not None and matrix.apu(v.gfx) is not None
        out.append(v)


def _intel_gpus(f: Facts) -> list[GpuView]:
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


def _apple_gpus(f: Facts) -> list[GpuView]:
    a = f.apple
    if not (a.is_macos and a.chip and a.chip.startswith("Apple")):
        return []
    return [GpuView(vendor="apple", index=0, name=a.chip, integrated=True, witnesses=["sysctl"], sources={"name": a.sources.get("chip", "sysctl")})]


# ---------------------------------------------------------------------------- evidence


# (regex, the finding it proves): matched line by line against torch's messages, the kernel pass's errors and
# ROCm's tool errors. Each is a message the runtime prints when that fault is the cause; the sources
# are in tests/fixtures/real/*/source.md.
_RECOGNISED: tuple[tuple[re.Pattern[str], str], ...] = (
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
    (re.compile(r"hipErrorNoBinaryForGpu|HIP error: invalid device function|No binary for GPU|Unable to find code object for all current devices"), "rocm-gfx-unsupported"),
    (re.compile(r"Unable to open /dev/kfd read-write: (?:Permission denied|Operation not permitted)"), "rocm-kfd-permission"),
    # a library loaded from elsewhere (or an older/newer copy) lacks a symbol torch was linked against
    (re.compile(r"(?P<lib>[\w./+-]*\.so[\w.]*): undefined symbol: (?P<symbol>[\w@.]+)"), "torch-lib-stale"),
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
        for line in text.splitlines()[-400:]:
            line = line[:1000]  # real lines are short; the cap keeps every pattern linear on hostile input
            for pattern, proves in _RECOGNISED:
                m = pattern.search(line)
                if not m or (proves, source) in seen:
                    continue
                seen.add((proves, source))
                values: dict[str, str] = {}
                groups = m.groupdict()
                found = groups.get("found")
                if found:
                    n = int(found)
                    values["driver_cuda"] = f"{n // 1000}.{(n % 1000) // 10}"  # 12040 -> "12.4" (cudaDriverGetVersion's encoding)
                if groups.get("sm"):
                    values["compute_capability"] = f"{groups['sm'][:-1]}.{groups['sm'][-1]}"  # sm_61 -> "6.1"
                for key in ("lib", "symbol"):
                    if groups.get(key):
                        values[key] = groups[key]
                out.append(Evidence(proves=proves, source=source, line=line.strip()[:500], values=values))
    return out


# ---------------------------------------------------------------------------- disagreements

def _kind(vendor: str) -> accelerators.Accelerator:
    """The accelerator kind of ``vendor``'s devices: its tools, its kernel driver's list and its hiding variables."""
    acc = accelerators.by_vendor(vendor)
    if acc is None:  # pragma: no cover - the built-in kinds are always registered
        raise LookupError(f"no accelerator kind for vendor {vendor!r}")
    return acc


def _disagreements(f: Facts, view: ReconciledFacts) -> list[Disagreement]:
    out = _driver_disagreements(view)
    for g in view.gpus:
        judge = _GPU_DISAGREEMENTS.get(g.vendor)  # the witnesses of each kind's GPU fields that may disagree
        if judge is not None:
            out.extend(judge(f, g, f"GPU{g.index} {g.name or ''}".strip()))
    out.extend(_count_disagreements(f, view))
    return out


def _driver_disagreements(view: ReconciledFacts) -> list[Disagreement]:
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
    return out


def _nvidia_gpu_disagreements(f: Facts, g: GpuView, label: str) -> list[Disagreement]:
    out: list[Disagreement] = []
    said = g.seen.get("compute_capability", {})
    if len(set(said.values())) > 1:
        out.append(Disagreement("gpu.compute_capability", dict(said), label))
    names = {w: n for w, n in g.seen.get("name", {}).items() if w in ("nvml", "nvidia-smi")}
    if len(names) > 1 and not _names_agree(names.values()):
        out.append(Disagreement("gpu.name", names, label))
    mem = {w: m for w, m in g.seen.get("memory_total_mib", {}).items() if w in ("nvml", "nvidia-smi")}
    if len(set(mem.values())) > 1:
        out.append(Disagreement("gpu.memory_total_mib", dict(mem), label))
    return out


def _amd_gpu_disagreements(f: Facts, g: GpuView, label: str) -> list[Disagreement]:
    said = {k: v for k, v in g.seen.get("gfx", {}).items() if v}
    if len(set(said.values())) <= 1:
        return []
    override = f.environment.get("HSA_OVERRIDE_GFX_VERSION") or f.rocm.hsa_override_gfx_version
    # HSA's tools (rocminfo, torch) report the ISA after HSA_OVERRIDE_GFX_VERSION; KFD and the SMIs the chip
    return [Disagreement("gpu.gfx", said, label, f"HSA_OVERRIDE_GFX_VERSION={override}" if override else None)]


_GPU_DISAGREEMENTS: dict[str, Callable[[Facts, GpuView, str], list[Disagreement]]] = {
    "nvidia": _nvidia_gpu_disagreements,
    "amd": _amd_gpu_disagreements,
}


def visible_entries(value: str, count: int) -> int:
    """How many of ``count`` GPUs a ``CUDA_VISIBLE_DEVICES``-style value leaves (CUDA stops at the first bad entry)."""
    v = value.strip()
    if v in ("", "-1", "NoDevFiles", "none", "void"):
        return 0
    seen: list[str] = []
    for tok in (x.strip() for x in v.split(",")):
        if re.fullmatch(r"\d+", tok):
            if int(tok) >= count or tok in seen:
                break
        elif not tok.upper().startswith(("GPU-", "MIG-")):
            break
        seen.append(tok)
    return len(seen)


def _count_disagreements(f: Facts, view: ReconciledFacts) -> list[Disagreement]:
    """torch's device count against the driver's: the tools' list, else the kernel's (outside a container,
    where /proc and /sys show the host's GPUs). What explains a difference is kept beside it."""
    t = f.torch
    if not t.cuda_available or t.device_count is None:
        return []
    vendor = "amd" if t.hip else "nvidia"  # the kind torch.cuda answers for
    acc = _kind(vendor)
    counted, witness = _driver_count(view, acc)
    if not counted or t.device_count == len(counted):
        return []
    why = _count_why(f, acc, len(counted), witness)
    explained = why if why and "(leaves" not in why else None
    d = Disagreement("gpu.count", {witness: str(len(counted)), "torch": str(t.device_count)}, f"{vendor} GPUs", explained)
    if why and explained is None:
        d.note = f"{vendor} GPUs; {why}"
    return [d]


def _driver_count(view: ReconciledFacts, acc: accelerators.Accelerator) -> tuple[list[GpuView], str]:
    """The GPUs of kind ``acc`` its driver lists and the witness that listed them: its tools, else its kernel driver's list."""
    gpus = [g for g in view.gpus if g.vendor == acc.vendor]
    tools = [g for g in gpus if set(g.witnesses) & set(acc.tool_witnesses)]
    if tools:
        return tools, "/".join(w for w in acc.tool_witnesses if any(w in g.witnesses for g in tools))
    kernel = [g for g in gpus if acc.kernel_witness in g.witnesses]
    if kernel and acc.kernel_witness:
        return kernel, acc.kernel_witness
    return [], ""


def _count_why(f: Facts, acc: accelerators.Accelerator, count: int, witness: str) -> str | None:
    """What explains torch counting another number of GPUs than the driver: a hiding variable, MIG, a container."""
    t, env = f.torch, f.environment
    for var in acc.hiding():
        if var in env:
            left = visible_entries(env[var], count)
            return f"{var}={env[var]}" if t.device_count == left else f"{var}={env[var]} (leaves {left})"
    nvidia = acc.name == "nvidia"  # vendor branch: MIG and NVIDIA_VISIBLE_DEVICES are NVIDIA's own words
    if nvidia and any(g.mig_mode == "Enabled" for g in f.nvidia.gpus):
        return "MIG"
    if f.platform.container and witness in (W_PROC, W_KFD):
        nvd = env.get("NVIDIA_VISIBLE_DEVICES")
        return f"container (NVIDIA_VISIBLE_DEVICES={nvd})" if nvd and nvidia else "container"
    return None
