"""The shapes the seam speaks in: a kind's device spec for the workers, its companions, the protocols it is handed
(``Say``, ``BuildAsk``, ``Verified``, ``FitTarget``, ``FitNotes``), install's ``WhatIfValue`` and the resolver's ``TargetDevice`` / ``Unfit``."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from stackdoctor.model.facts import Facts, Verification

if TYPE_CHECKING:
    from stackdoctor.matrix import Release, Variant


@dataclass(frozen=True)
class DeviceSpec:
    """How the workers (``_worker/sd_kernels.py``, ``sd_allreduce.py``, through ``_worker/sd_devices.py``) run on a
    kind's device, as plain data (they are stdlib-only and import nothing of stackdoctor; the parent hands every
    kind's spec over as JSON in ``STACKDOCTOR_DEVICES``): ``torch.device(f"{device}:{i}")`` for i below
    ``torch.<torch_api>.device_count()``, the function that waits for it (``torch.<synchronize>()``), the
    collectives' backend (``torch.distributed`` ``init_process_group(backend)``), the modules imported before torch
    is asked (a companion package such as ``torch_npu``, when torch does not load it itself), and what the kernel pass
    needs to know of it (its fast matmul types, its TF32 switches). Every built-in kind declares one, as a plug-in
    does: the workers have no branch of their own for any device but the CPU."""

    device: str  # "cuda" | "npu" | "foo": the torch device type
    torch_api: str  # "cuda": torch.cuda (is_available, device_count, get_device_name, get_device_capability)
    synchronize: str = ""  # "npu.synchronize": torch.npu.synchronize(); "" when the device needs none
    backend: str = "gloo"  # "nccl" | "hccl" | "gloo"
    imports: tuple[str, ...] = ()  # ("torch_npu",): imported (when importable) before torch.<torch_api> is used
    indexed: bool = True  # devices "<device>:<i>"; False: one device, "<device>" (MPS)
    available: str = ""  # the torch function that says it is usable when not torch.<torch_api>.is_available ("backends.mps.is_available")
    label: str = ""  # its name in the workers' sentences ("CUDA"); default: the device type
    name: str = ""  # its devices' name when torch gives none ("Apple MPS"); else torch.<torch_api>.get_device_name(i)
    sync_takes_device: bool = False  # synchronize(torch.device(d)) rather than synchronize()
    set_device: str = ""  # what makes a rank's device current ("cuda.set_device"), given "<device>:<i>"
    # the reduced-precision matmul types it runs fast, in order: a name, or {"dtype": name, "when": a torch function that
    # must answer True, "capability": the least torch.<torch_api>.get_device_capability() major, "unless": a torch attribute
    # that must be unset}
    fast_dtypes: tuple[str | dict[str, Any], ...] = ("bf16",)
    tf32_switch: str = ""  # the flag that lets fp32 matmuls use TF32 ("backends.cuda.matmul.allow_tf32"), set per dtype
    conv_tf32: str = ""  # the flag under which its fp32 convolutions may use TF32 (the tolerance is TF32's)
    backend_check: str = ""  # torch.distributed's own question ("is_nccl_available"); default is_backend_available(backend)
    fall_through: bool = False  # its backend missing, the next kind is tried (else gloo on the CPU, saying why)
    library: str = ""  # a shared library the backend needs besides (ctypes.util.find_library("rdma"))
    reasons: tuple[tuple[str, str], ...] = ()  # its own sentences for the backend's choice: "ok", "missing", "no_library"
    init_device: bool = False  # init_process_group(device_id=torch.device(device, 0)) (tccl)

    _ALWAYS: ClassVar[tuple[str, ...]] = ("device", "torch_api", "synchronize", "backend", "imports")

    def to_dict(self) -> dict[str, Any]:
        """Plain data: the first five fields always, the others where they are not their defaults (the workers
        apply the same defaults)."""
        defaults = DeviceSpec(device="", torch_api="")
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in self._ALWAYS or value != getattr(defaults, f.name):
                out[f.name] = dict(value) if f.name == "reasons" else list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Companion:
    """A package a kind installs beside torch (``torch-npu`` beside torch's CPU build), paired with one torch release:
    what the resolver adds to a plan for a machine of that kind (:meth:`Accelerator.companion`)."""

    name: str  # "torch-npu"
    version: str  # "2.8.0.post2"
    index_url: str | None  # the index that serves it ("https://pypi.org/simple/"); None: the plan's own
    reasons: tuple[str, ...] = ()  # why this release, with its sources (the pin, what it needs)
    warnings: tuple[str, ...] = ()  # what the machine still lacks for it


class Say(Protocol):
    """An interface word in the screen's language: ``say("gpu_integrated")`` (``locale/<lang>.yaml``, ``ui:``)."""

    def __call__(self, key: str, /, **values: object) -> str: ...


# --- build ---
class BuildAsk(Protocol):
    """What a kind's source-build methods (:meth:`Accelerator.build_prerequisites`) are given by
    :mod:`stackdoctor.resolve.source_build`: the machine, its build tools, the matrix's ``source_build`` rows, and the one way
    to make a prerequisite (``source_build.Prerequisite``; this package does not import the plan above it)."""

    facts: Facts
    tools: Any  # model.toolchain.BuildTools, or None: a what-if for another platform (nothing was looked at)
    os: str  # "linux" | "windows" | "macos"

    def minimum(self, name: str) -> str | None: ...
    def source(self, name: str) -> str | None: ...
    def url(self, name: str) -> str | None: ...
    def at_least(self, found: str | None, minimum: str | None) -> bool | None: ...
    def prerequisite(self, name: str, needed: str, **fields: Any) -> Any: ...
    def tool(self, name: str, tool: Any, needed: str, fix: str, steps: list[str], source: str | None, minimum: str | None = None) -> Any: ...
# --- end build ---


Verified = Verification  # what the import of torch after an install found (model.facts.Verification), as a kind's verify() reads it


# --- resolve ---
@dataclass(frozen=True)
class WhatIfValue:
    """A value of a kind's host that install's what-if takes beside its devices (AMD's ``--rocm-userspace 6.3.1``):
    the flag, the key the request keeps it under (``Request.values[kind][key]``), how the help shows it, the pattern a
    value (stripped) must match, and the sentence install exits 2 with when it does not (``{value}``: the value given)."""

    flag: str
    key: str
    metavar: str
    help: str
    pattern: str
    bad: str

    def error(self, value: str) -> str | None:
        """The sentence install exits 2 with for ``value``, or None when it is one."""
        return None if re.match(self.pattern, value.strip()) else self.bad.format(value=value)


@dataclass
class TargetDevice:
    """One device as the resolver plans for it (``stackdoctor.resolve.Gpu``): from the reconciled view, or named by a
    what-if flag (``--gpu``, ``--gfx``, a kind's own)."""

    vendor: str  # GpuView.vendor: "nvidia" | "amd" | "intel" | a plug-in kind's
    index: int
    name: str | None
    cc: str | None = None  # NVIDIA "8.9"
    gfx: str | None = None  # AMD "gfx1100"
    integrated: bool = False
    uuid: str | None = None

    def label(self) -> str:
        """``GPU 0 NVIDIA GeForce RTX 4090``; without a name only ``GPU 0`` (its sm_/gfx follows where it matters)."""
        return f"GPU {self.index} {self.name}" if self.name else f"GPU {self.index}"


class Unfit(Exception):
    """A variant does not fit the target: the reason (``stackdoctor.resolve.Reject``); ``driver_needed``: the driver
    that would make it fit; ``platform_blocked``: the platform or Python, not the devices, rule it out."""

    def __init__(self, reason: str, *, driver_needed: str | None = None, platform_blocked: bool = False, blocker: str | None = None,
                 driver_floor: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.driver_needed = driver_needed
        self.driver_floor = driver_floor  # an older driver that runs it too, through minor-version compatibility
        self.platform_blocked = platform_blocked
        # what holds the build back, for the order a user can act in: "driver", "python", "platform", "device" (the GPU's
        # arch or kind) or "unknown" (the matrix does not know whether the build exists: never a reason for a source build)
        self.blocker = blocker or ("driver" if driver_needed else "platform" if platform_blocked else "device")


class FitTarget(Protocol):
    """What every kind's :meth:`Accelerator.fit` reads of the resolver's target (``stackdoctor.resolve.Target``); a
    kind reads its own driver's fields through its own protocol (``accelerators/<kind>/fit.py``)."""

    os: str
    arch: str
    driver: str | None
    windows_driver: bool
    wsl: bool

    @property
    def hosts(self) -> Mapping[str, object]:
        """Each kind's host state its fit reads (:meth:`Accelerator.fit_host`), by kind name."""
        ...


class FitNotes(Protocol):
    """What a kind's :meth:`Accelerator.fit` adds to the fit it judges (``stackdoctor.resolve.Fit``)."""

    warnings: list[str]
    reasons: list[str]
    env: dict[str, str]


def device_summary(devices: Sequence[TargetDevice]) -> str:
    """``GPU 0 NVIDIA GeForce RTX 4090 (sm_89), GPU 1 (gfx1100)``: each device with its architecture where known."""
    parts = []
    for g in devices:
        what = f"sm_{g.cc.replace('.', '')}" if g.cc else g.gfx
        parts.append(f"{g.label()} ({what})" if what else g.label())
    return ", ".join(parts)


def unverified(fit: FitNotes, release: Release, variant: Variant) -> None:
    """The warning a fit carries when the matrix row of ``variant`` has facts nobody verified."""
    if variant.unknown:
        fit.warnings.append(f"matrix: {variant.name} of torch {release.version} has unverified facts: {'; '.join(variant.unknown)}")


# --- end resolve ---
