"""Reconcile: join every witness into one view of the machine, and derive what follows from the facts.

``reconcile(facts, matrix) -> MachineView`` is pure: it returns a new frozen view of the machine and never changes its input.
It runs once, between the probes and the rules, on a live run and on a replay alike (a replayed
report is reconciled again with today's matrix, so stale derivations never survive).

What it does, in order:

1. **Derivations from the matrix**, each marked with a ``reconcile:`` source so that a replay can
   tell them from probed values and redo them: an NVIDIA GPU's compute capability from its name
   (``gpus.yaml``), a Jetson's JetPack and CUDA from its L4T release (``jetson.yaml``), an AMD GPU's
   ``integrated`` flag from its gfx target (``rocm.yaml``), an Intel GPU's family, ``discrete`` and
   ``xpu`` flags from its PCI id (``intel.yaml``), and the peak TFLOP/s of kernel results
   (``peaks.yaml``).
2. **The reconciled view** (the :class:`MachineView`; the report's ``reconciled`` section): every GPU seen by any witness (the driver's tools
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

from stackdoctor import kinds
from stackdoctor.core.versions import same_release
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
    RocmGpu,
    SeenValue,
)
from stackdoctor.model.view import MachineView
from stackdoctor.reconcile.gpus import (
    DERIVED,
    GPU_WITNESS_ORDER,
    W_KFD,
    W_PCI,
    W_PROC,
    amd_gpus,
    bus_key,
    gpu_rank,
    intel_gpus,
    nvidia_gpus,
)
from stackdoctor.reconcile.gpus import derived as _derived

__all__ = ["DERIVED", "GPU_WITNESS_ORDER", "reconcile", "recognise", "bus_key", "report_facts"]


def reconcile(facts: Facts | MachineView, matrix: Matrix) -> MachineView:
    """The machine's view: derivations redone from the matrix on a copy of the facts, every witness joined, and
    the values chosen from them held by the view beside those facts (``view.driver("nvidia")``, ``view.gpus``
    ...). Pure: the facts keep what the witnesses said (no chosen value is written into them); what the report
    publishes under its stable keys is :func:`report_facts`. A view given is reconciled again from its facts."""
    f = copy.deepcopy(facts.facts if isinstance(facts, MachineView) else facts)
    _unpublish(f)
    _derive_jetson(f, matrix)
    _derive_rocm(f, matrix)
    _derive_intel(f, matrix)
    _derive_torch(f)
    _weigh_nvidia_gpus(f)
    view = ReconciledFacts(done=True)
    view.evidence = recognise(f, matrix)
    n = f.nvidia
    # the loaded module's version: its source, else /proc's file, else /sys's (no user-space witness)
    kmod = SeenValue(value=n.kernel_module_version, source=n.sources.get("kernel_module_version"))
    if n.kernel_module_version is None:
        picked = _pick(n.observed.get("kernel_module_version") or {}, None, None)
        if picked.value:
            kmod = SeenValue(value=picked.value, source=picked.source or "kernel module", witnesses=picked.witnesses)
    chosen = {"nvidia.kernel_module_version": kmod}
    for key in ("nvml_version", "driver_library_version"):
        chosen["nvidia." + key] = _pick(n.observed.get(key) or {}, getattr(n, key), n.sources.get(key))
    view.nvidia_driver = _nvidia_driver(f, kmod)
    view.cuda_driver_version = _cuda_ceiling(f, view.evidence)
    view.rocm_version = _rocm_version(f)
    view.gpus = nvidia_gpus(f, matrix) + amd_gpus(f, matrix) + intel_gpus(f) + [g for a in kinds.ALL for g in a.gpus(f)]
    view.disagreements = _disagreements(f, view)
    f.reconciled = view  # the accelerator kinds read the joined view from the facts they are given
    _derive_peaks(f, matrix, _published_nvidia_gpus(f, view))
    chosen_kind = kinds.select(f)
    view.accelerator = chosen_kind.name if chosen_kind else None
    return MachineView.of(f, chosen)  # the view of the facts just reconciled (the one constructor)


def report_facts(view: MachineView) -> Facts:
    """The facts a report carries, from the view: its ``reconciled`` section and the stable keys
    (``nvidia.driver_version``, ``nvidia.gpus``, ``rocm.version``, ``rocm.gpus`` ...) written with the values
    the view chose, every witness's own value kept beside them. The one place they are published (the
    pipeline's judge); the view's facts are not changed."""
    f = copy.deepcopy(view.facts)
    rec = view.to_reconciled()
    f.reconciled = rec
    n = f.nvidia
    kmod = view.chosen("nvidia.kernel_module_version")
    if n.kernel_module_version is None and kmod.value:
        n.kernel_module_version, n.sources["kernel_module_version"] = kmod.value, kmod.source or "kernel module"
    _publish(f, rec, {key: view.chosen("nvidia." + key) for key in ("nvml_version", "driver_library_version")})
    _publish_rocm(f, rec)
    return f


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


def _weigh_nvidia_gpus(f: Facts) -> None:
    """Each NVIDIA GPU's fields from its witnesses (the probe keeps every witness's value in ``observed`` and picks
    none): the first witness in :data:`GPU_WITNESS_ORDER` that gave a value is kept, with its source. A report
    without ``observed`` (an older stackdoctor's, a hand-written fixture) keeps the values it carries."""
    for g in f.nvidia.gpus:
        for name, by_src in g.observed.items():
            if not hasattr(g, name) or name in ("observed", "sources", "errors") or _derived(g.sources.get(name)):
                continue
            given = [(src, v) for src, v in sorted(by_src.items(), key=lambda kv: gpu_rank(kv[0])) if v not in (None, "", [])]
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


def user_space_driver(view: MachineView) -> str | None:
    """The user-space driver's version (NVML, nvidia-smi): the view's driver version unless reconcile took it
    from the kernel module because no user-space witness answered."""
    n = view.facts.nvidia
    if n.driver_version is not None:  # the facts carry one (a probe of an older stackdoctor, or a report's published key)
        return None if _derived(n.sources.get("driver_version")) else n.driver_version
    drv = view.driver("nvidia")
    return drv.value if drv.value is not None and not _derived(_published_source(n, "driver_version", drv)) else None


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
        n.sources[key] = _published_source(n, key, seen)
    _publish_nvidia_gpus(n.gpus, view)


def _published_source(n: NvidiaFacts, key: str, seen: SeenValue) -> str:
    """The source ``nvidia.<key>`` is published with: the witness's, marked ``reconcile:`` unless a user-space tool gave it."""
    src = seen.source or "nvidia"
    user = src in WITNESS_ORDER or src in (n.observed.get(key) or {})
    return src if user and not src.startswith(("/proc", "/sys")) else DERIVED + src


def _publish_nvidia_gpus(own: list[NvidiaGpu], view: ReconciledFacts) -> None:
    _publish_gpus(
        own, view, "nvidia", fill="compute_capability", fields=("name", "uuid", "compute_capability", "memory_total_mib", "bus_id"),
        make=lambda v: NvidiaGpu(index=v.index, name=v.name, uuid=v.uuid, compute_capability=v.compute_capability, memory_total_mib=v.memory_total_mib, bus_id=v.bus_id),
    )


def _published_nvidia_gpus(f: Facts, view: ReconciledFacts) -> list[NvidiaGpu]:
    """``nvidia.gpus`` as the report publishes it (:func:`report_facts`), on a copy: ``f`` unchanged."""
    gpus = copy.deepcopy(f.nvidia.gpus)
    _publish_nvidia_gpus(gpus, view)
    return gpus


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
    from stackdoctor.model.facts import normalise_smi_gfx

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


def _derive_peaks(f: Facts, matrix: Matrix, gpus: list[NvidiaGpu]) -> None:
    """``peak_tflops`` / ``percent_of_peak`` of matmul results: the matrix's peaks table first, else
    (fp32 on NVIDIA) SM count x max SM clock x FP32 lanes per SM (``fp32_lanes_per_sm``)."""
    for r in f.kernels.results:
        if _derived(r.extra.get("peak_source")):
            r.peak_tflops = r.percent_of_peak = None
            del r.extra["peak_source"]
        if r.kernel != "matmul" or r.tflops is None or not any(k.peaks for k in kinds.with_device(r.device)) or r.peak_tflops is not None:
            continue
        peak, source = _peak(gpus, r, matrix)
        if peak:
            r.peak_tflops = round(peak, 3)
            r.percent_of_peak = round(100.0 * r.tflops / peak, 1)
            r.extra["peak_source"] = DERIVED + source


def _peak(gpus: list[NvidiaGpu], r: KernelResult, matrix: Matrix) -> tuple[float | None, str]:
    """The peak of result ``r`` from the NVIDIA GPUs the report lists (``gpus``: the published ``nvidia.gpus``)."""
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


def _nvidia_driver(f: Facts, kmod: SeenValue) -> SeenValue:
    """The user-space driver version (NVML, nvidia-smi, in :data:`WITNESS_ORDER`), else the loaded kernel
    module's (``kmod``: ``/proc``, ``/sys``); every witness's value beside it."""
    n = f.nvidia
    seen = _pick(n.observed.get("driver_version") or {}, n.driver_version, n.sources.get("driver_version"))
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


def _texts(f: Facts) -> list[tuple[str, str]]:
    """The messages a finding may be proven by, each with where it was read."""
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
    return texts


RUNTIME_ERROR = "runtime-error-code"  # the evidence of an error number (compat_matrix/runtime_errors.yaml)


def _error_codes(texts: list[tuple[str, str]], matrix: Matrix | None) -> list[Evidence]:
    """The CUDA runtime's, CUDA driver's or HIP's error each message names (a number, an enum name, the runtime's words,
    c10's sentence), judged from the matrix's ``runtime_errors`` row (:mod:`stackdoctor.kinds.runtime_errors`)."""
    from stackdoctor.kinds.runtime_errors import read_text

    rows = (matrix.table("runtime_errors") if matrix is not None else None) or ()
    out: list[Evidence] = []
    for source, text in texts:
        for found in read_text(text, rows):
            r = found.row
            values = {"api": found.api, "number": "" if found.number is None else str(found.number), "name": found.name or "?"}
            if r is not None:
                values.update(layer=r.layer, witness=r.witness, fix=r.fix, meaning=r.meaning, table_source=r.source)
            out.append(Evidence(proves=RUNTIME_ERROR, source=source, line=found.line.strip()[:500], values=values))
    return out


def recognise(f: Facts, matrix: Matrix | None = None) -> list[Evidence]:
    """Messages that prove a finding, with the line quoted: torch's CUDA init message, its import error,
    the kernel pass's errors and ROCm's tool errors; with a matrix, every error number they name too. An
    unrecognised message stays what it was."""
    texts = _texts(f)
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
    return out + _error_codes(texts, matrix)


# ---------------------------------------------------------------------------- disagreements

def _kind(vendor: str) -> kinds.Accelerator:
    """The accelerator kind of ``vendor``'s devices: its tools, its kernel driver's list and its hiding variables."""
    acc = kinds.by_vendor(vendor)
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


def _driver_count(view: ReconciledFacts, acc: kinds.Accelerator) -> tuple[list[GpuView], str]:
    """The GPUs of kind ``acc`` its driver lists and the witness that listed them: its tools, else its kernel driver's list."""
    gpus = [g for g in view.gpus if g.vendor == acc.vendor]
    tools = [g for g in gpus if set(g.witnesses) & set(acc.tool_witnesses)]
    if tools:
        return tools, "/".join(w for w in acc.tool_witnesses if any(w in g.witnesses for g in tools))
    kernel = [g for g in gpus if acc.kernel_witness in g.witnesses]
    if kernel and acc.kernel_witness:
        return kernel, acc.kernel_witness
    return [], ""


def _count_why(f: Facts, acc: kinds.Accelerator, count: int, witness: str) -> str | None:
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
