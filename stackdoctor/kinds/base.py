"""The accelerator plug-in's interface: :class:`Accelerator`, which every kind in this package subclasses.

Kept apart from the registry (``stackdoctor.accelerators``) so that the kinds import it and the registry
imports the kinds, with no import circle.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from stackdoctor.kinds.low_seam import LowSeam
from stackdoctor.model.facts import Backend, BuildKind, Facts, GpuView, Severity, TorchFacts

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.matrix import Matrix, Release, Variant
    from stackdoctor.model.facts import Disagreement, KernelResult, ReconciledFacts, SeenValue  # --- reconcile ---
    from stackdoctor.model.plan import Request
    from stackdoctor.model.view import MachineView


__all__ = ["Accelerator", "Companion", "DeviceSpec", "FitNotes", "FitTarget", "Say", "TargetDevice", "Unfit", "Verified", "device_summary", "unverified"]
__all__ = ["Accelerator", "BuildAsk", "Companion", "DeviceSpec", "Say", "Verified"]


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


class Verified(Protocol):
    """What the import of torch after an install found (``stackdoctor.install.Verification``, read by
    ``_worker/sd_verify.py``): the built-in kinds' answers, and each plug-in kind's in ``available``."""

    cuda_available: bool | None
    cuda_ok: bool | None
    cuda_error: str | None
    cuda: str | None  # the build's CUDA (torch.version.cuda)
    driver_api_version: int | None  # torch._C._cuda_getDriverVersion(): 12080 = CUDA 12.8, 0 = no driver
    device_name: str | None
    mps_available: bool | None
    xpu_available: bool | None
    available: dict[str, bool]
    available_errors: dict[str, str]
    warnings: list[str]


# --- resolve ---
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
    """What a kind's :meth:`Accelerator.fit` reads of the resolver's target (``stackdoctor.resolve.Target``)."""

    os: str
    arch: str
    driver: str | None
    driver_cuda: str | None
    driver_runs_cuda: str | None
    windows_driver: bool
    wsl: bool
    rocm_userspace: str | None
    rocm_userspace_source: str | None
    amdgpu_version: str | None
    amdgpu_loaded: bool | None


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


class Accelerator(LowSeam):
    """One kind of accelerator. Subclasses set the class attributes and :meth:`present` / :meth:`usable`."""

    name: ClassVar[str]  # "nvidia" | "amd" | "intel" | "apple" | "jetson"
    vendor: ClassVar[str]  # GpuView.vendor of its devices
    subject: ClassVar[str]  # the probe (engine.PROBES) and the Facts subject that show it: "nvidia" | "rocm" | ...
    label: ClassVar[str]  # "NVIDIA CUDA": what the screen calls it
    backend: ClassVar[Backend]  # what torch runs on: "cuda" | "rocm" | "xpu" | "mps"
    build_kind: ClassVar[BuildKind]  # the torch build that serves it ("cpu" for MPS: macOS's default build)
    variant_prefixes: ClassVar[tuple[str, ...]]  # index variants that serve it: ("cu",) | ("rocm",) | ("xpu",) | ()
    available_field: ClassVar[str]  # the TorchFacts field of torch.<x>.is_available()
    error_field: ClassVar[str | None] = None  # the TorchFacts field with torch's reason when unavailable
    runtime_families: ClassVar[tuple[str, ...]] = ()  # leftovers.runtime_family() names of its runtime wheels
    hide_var: ClassVar[str | None] = None  # the variable a plan sets to hide devices from torch
    hide_vars: ClassVar[tuple[str, ...]] = ()  # every variable that hides its devices (default: hide_var)
    build_label: ClassVar[str] = ""  # its torch build in a sentence: "CUDA" | "ROCm" | "XPU"
    vendor_label: ClassVar[str] = ""  # its vendor in a sentence: "NVIDIA" | "AMD" | "Intel" | "Apple"
    torch_api: ClassVar[str] = ""  # the torch module that answers for it: torch.<torch_api>.is_available()
    tool_witnesses: ClassVar[tuple[str, ...]] = ()  # the user-space tools that list its devices (device counting)
    kernel_witness: ClassVar[str | None] = None  # the kernel driver's own list of them (device counting)
    build_witness: ClassVar[str | None] = None  # the TorchFacts field only a build of its kind sets ("hip": torch.version.hip)
    build_witness_rank: ClassVar[int] = 0  # the order the witnesses are read in (lowest first)
    build_answers: ClassVar[bool] = False  # torch answering its is_available() True says the build is of its kind (XPU)
    # Every kind names its probe module (built-in and plug-in alike: the engine runs the registry's probes) and a
    # plug-in the pattern of its index variants' names (the built-in kinds' variants are the matrix's own:
    # cuXYZ, rocmX.Y, xpu).
    probe: ClassVar[str | None] = None  # "my_plugin.probe": a module with probe(ctx) -> ProbeOutput, for `subject`
    more_probes: ClassVar[tuple[tuple[str, str], ...]] = ()  # (subject, module) of a kind's other probes (NVIDIA's nvcc)
    variant_pattern: ClassVar[str | None] = None  # regex of its variants' names, e.g. r"^foo\d+$"
    # A plug-in kind may also bring its own findings, texts, worker device and companion packages:
    rules: ClassVar[str | None] = None  # "my_plugin.rules": a module whose @rule functions join the catalogue
    locale: ClassVar[str | None] = None  # "my_plugin": a package with locale/en.yaml and zh.yaml (codes, sentences)
    device: ClassVar[DeviceSpec | None] = None  # how the kernel and allreduce workers run on its device
    peaks: ClassVar[bool] = False  # the matrix's peaks (peaks.yaml, FP32 lanes x SMs x clock) know its devices' TFLOPS
    companions: ClassVar[tuple[str, ...]] = ()  # distributions installed beside torch for it ("torch-npu")
    torch_api_needs: ClassVar[str | None] = None  # torch is asked about it only where this module is installed ("torch_npu")
    what_if_option: ClassVar[str | None] = None  # install's what-if flag naming one of its devices ("--npu 910B"), as --gpu does
    # what `matrix learn` reads of its builds (stackdoctor/wheels/learn.py): the runtime wheels their metadata pins (name
    # prefixes), and the GPU code their libraries carry (a stackdoctor.binaries.binfmt format, "cuda" | "hip", in these wheel members)
    runtime_wheels: ClassVar[tuple[str, ...]] = ()  # ("nvidia-", "cuda-toolkit")
    gpu_code: ClassVar[str | None] = None  # "cuda": fat binaries (sm_XY, compute_XY); "hip": offload bundles (gfxNNNN)
    gpu_libraries: ClassVar[tuple[str, ...]] = ()  # ("torch/lib/libtorch_cuda.so",)
    # its own matrix table: a YAML file in the package its class is in ("torch_npu.yaml"), each row sourced; a companion
    # table's shape is {"package": "torch-npu", "source": ..., "releases": [{"version": ..., "torch": ..., ...}]}. It is
    # what its companion() reads, and `matrix show` lists it beside the shared matrix (kinds.tables())
    table: ClassVar[str | None] = None

    def own_table(self) -> dict[str, Any]:
        """Its matrix table (:attr:`table`) as plain data; {} when it has none or it cannot be read."""
        if not self.table:
            return {}
        from importlib import resources

        import yaml

        try:
            data = yaml.safe_load(resources.files(type(self).__module__).joinpath(self.table).read_text(encoding="utf-8"))
        except (OSError, ValueError, yaml.YAMLError):
            return {}
        return data if isinstance(data, dict) else {}

    def companion(self, facts: Facts, torch: str, *, os: str, arch: str, python: str | None, hypothetical: bool,
                  strict: bool = True) -> Companion | str | None:
        """The package to plan beside torch release ``torch`` (a :class:`Companion`) on a target with this kind's devices
        (``os`` "linux", ``arch`` "x86_64", ``python`` "3.11"); a sentence when that release has none that fits; None when
        the kind installs nothing beside torch. ``hypothetical``: a what-if, so ``facts`` are not the target's machine.
        ``strict``: only a release whose needs are known and met; the resolver asks again without it when none is."""
        return None

    def import_hint(self, error: str, facts: Facts | None) -> str | None:
        """What to do when torch's import after an install failed with ``error`` because of this kind's stack (a
        sentence ending the verdict), or None."""
        return None

    def hiding(self) -> tuple[str, ...]:
        """Every variable that hides its devices from torch, the first the one a plan sets."""
        return self.hide_vars or ((self.hide_var,) if self.hide_var else ())

    def own_facts(self, facts: Facts) -> dict[str, Any]:
        """A plug-in kind's facts as its probe wrote them (``Facts.plugins[subject]``, plain data); {} for none."""
        data = facts.plugins.get(self.subject)
        return data if isinstance(data, dict) else {}

    def gpus(self, facts: Facts) -> list[GpuView]:
        """Its GPUs for the reconciled view, from its own facts. The built-in kinds' GPUs are joined by
        :mod:`stackdoctor.reconcile` from every witness; a plug-in kind lists its own here."""
        return []

    def devices(self, facts: Facts) -> list[GpuView]:
        """Its GPUs in the reconciled view (every witness joined)."""
        return [g for g in facts.reconciled.gpus if g.vendor == self.vendor]

    def present(self, facts: Facts) -> bool:
        """The hardware is here (any witness)."""
        raise NotImplementedError

    def usable(self, facts: Facts) -> bool:
        """torch could use it with the right build: the hardware and what drives it are here."""
        raise NotImplementedError

    def targeted(self, kind: BuildKind | None) -> bool:
        """The installed torch, a build of ``kind`` (:func:`stackdoctor.accelerators.build_kind`), is a build for
        this kind; a CPU build targets none (MPS is in macOS's CPU build, but a CPU build mismatches nothing)."""
        return kind is not None and kind != "cpu" and kind == self.build_kind

    def reached(self, view: MachineView) -> bool:
        """A witness saw this kind here: its hardware (:meth:`present`) or any of its devices the view joined, an
        integrated one too. What makes a build of its kind that torch calls unavailable this machine's problem."""
        return self.present(view.facts) or bool(view.devices(self.vendor))

    def integrated_served(self, view: MachineView, matrix: Matrix | None) -> list[str]:
        """Its integrated GPUs that some build of its kind in the matrix carries code for, as a finding names them
        ("Radeon 8060S (gfx1151)"): an iGPU torch would run on, which only a build for it drives. [] for none."""
        return []

    def needs_build(self, facts: Facts) -> bool:
        """This machine has a device of this kind that only a build for it drives: present, and usable or a
        discrete GPU (an integrated GPU torch cannot use is no reason for another build)."""
        if self.build_kind == "cpu" or not self.present(facts):
            return False
        return self.usable(facts) or any(not g.integrated for g in self.devices(facts))

    def torch_available(self, torch: TorchFacts) -> bool | None:
        """What torch said: ``torch.<x>.is_available()`` (None: not asked, or torch did not import). A kind
        with no TorchFacts field of its own (a plug-in) is asked by its :attr:`torch_api` (:func:`torch_questions`)."""
        if not self.available_field:
            return torch.available.get(self.name)
        value = getattr(torch, self.available_field, None)
        return value if isinstance(value, bool) else None

    def torch_error(self, torch: TorchFacts) -> str | None:
        if not self.available_field:
            return torch.available_errors.get(self.name)
        return getattr(torch, self.error_field, None) if self.error_field else None

    def torch_fact(self) -> str:
        """The fact key of its ``is_available()`` answer: "torch.cuda_available", "torch.available.foo"."""
        return f"torch.{self.available_field}" if self.available_field else f"torch.available.{self.name}"

    def serves(self, variant: str | None) -> bool:
        """True when the index variant ``variant`` ("cu126", "rocm7.2", "xpu") is a build for this kind."""
        if self.variant_pattern and variant and re.match(self.variant_pattern, variant):
            return True
        return bool(variant) and any(variant.startswith(p) for p in self.variant_prefixes)  # type: ignore[union-attr]

    def builds(self, variant: str | None) -> bool:
        """True when the index variant ``variant`` is a build whose install is verified on this kind
        (:meth:`verify`): the variants it :meth:`serves`; Apple's is macOS's default build."""
        return self.serves(variant)

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        """After an install of a build for this kind: (ok, clause) from what torch said, None when torch was not
        asked. The clause completes "torch X imports in the target and <clause>" when ok, "..., but <clause>;
        run `stackdoctor check`" when not ("runs on <device>" / "torch.xpu.is_available() is False")."""
        if self.name in v.available:
            if v.available[self.name]:
                return True, f"sees the {self.label}"
            why = v.available_errors.get(self.name)
            return False, f"torch.{self.torch_api}.is_available() is False" + (f" ({why})" if why else "")
        if self.name in v.available_errors:
            return False, f"torch.{self.torch_api}.is_available() could not be asked: {v.available_errors[self.name]}"
        return None

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        """Its devices as lines of the screen and the Markdown stack ("0: NVIDIA GeForce RTX 4090 (sm_89, 23 GiB)"),
        from the reconciled view."""
        return [f"{g.index}: {g.name or '?'}" for g in self.devices(facts)]

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        """The driver layer's line on the screen and in the Markdown stack, or None when this kind shows none."""
        return None

    # --- view ---
    def texts(self) -> Mapping[str, Mapping[str, Any]]:
        """Its own findings' and sentences' texts in every language it speaks, as data in the locale files' form:
        ``{"en": {"codes": {code: {"title", "explain", "detail", "fix"}}, "sentences": {...}}, "zh": {...}}``, added
        to stackdoctor's (never replacing one) when its :attr:`rules` are declared. By default the ``TEXTS`` its rules
        module declares; {} for none (a kind may ship ``locale/<lang>.yaml`` files instead: :attr:`locale`)."""
        found = getattr(sys.modules.get(self.rules or ""), "TEXTS", None)
        return found if isinstance(found, Mapping) else {}

    def named(self, facts: Facts) -> str:
        """Its devices as a finding names them ("NVIDIA GeForce RTX 4090, ..."): the view's devices that are not
        integrated, "-" for none."""
        return ", ".join(g.name or f"GPU{g.index}" for g in self.devices(facts) if not g.integrated) or "-"

    def ok_name(self, g: GpuView) -> str | None:
        """A device of its kind in the ``gpu-ok`` sentence, or None when that sentence does not list it."""
        return None

    def cpu_build(self) -> tuple[Severity, str] | None:
        """``torch-cpu-only`` where a CPU build of torch runs on a machine of this kind: (severity, detail), or None
        when a CPU build is no finding here."""
        return "fail", "default"

    def torch_count(self, torch: TorchFacts) -> int | None:
        """How many of its devices torch can use, where torch said it can use them; None where it cannot, or where
        its devices are not counted (a project's ``min_gpus``)."""
        return None

    def wrong_result_fix(self) -> str:
        """The ``kernel-wrong-result`` fix for a device of its kind that computed wrong numbers (the key of the text:
        where its vendor's tool shows the memory's error counters), "default" for the generic advice."""
        return "default"

    def driver_note(self, facts: Facts) -> str | None:
        """What the driver's own tool says where it is not well, beside a driver line that has a version (the
        Markdown stack's "NVIDIA 550.54 · nvidia-smi: no-devices"), or None."""
        return None
    # --- end view ---
    # --- install ---
    # Its runtime wheels (stackdoctor.wheels.leftovers): the names of runtime_families[0], and a variant's needs
    runtime_packages: ClassVar[tuple[str, ...]] = ()  # canonical names of its runtime wheels ("pytorch-triton-rocm")
    runtime_prefixes: ClassVar[tuple[str, ...]] = ()  # and the beginnings of theirs ("rocm-sdk")

    def runtime_family(self, name: str) -> str | None:
        """The runtime family of the distribution ``name`` (canonical) when it is one of this kind's runtime wheels."""
        if self.runtime_families and (name in self.runtime_packages or (self.runtime_prefixes and name.startswith(self.runtime_prefixes))):
            return self.runtime_families[0]
        return None

    def families_for(self, variant: str) -> set[str] | None:
        """The runtime families a build of ``variant`` (one this kind serves) uses; None when not known (then
        nothing is called a leftover)."""
        return set(self.runtime_families)

    # Whether conda-forge builds pytorch for it (stackdoctor.install.conda): True, False, or None (not said)
    conda_forge_build: ClassVar[bool | None] = None

    def verified_after(self, variant: str | None, facts: Facts) -> bool:
        """An install of ``variant`` is checked on this kind afterwards (the backend the import must find usable,
        ``install.flow.accelerator_seen``): a build for it, or a CPU build its companion package serves (Ascend)."""
        return self.serves(variant) or (bool(self.companions) and self.builds(variant))

    # What an install reads of a build for this kind before it commits (stackdoctor.install.verify.check_gpu_code):
    gpu_code_kind: ClassVar[str | None] = None  # the kind of that library's code, as learn's reader names it ("cuda")
    gpu_code_headers_only: ClassVar[bool] = False  # read in place from its headers (a wheel's member: no copy)
    gpu_code_library: ClassVar[str | None] = None  # the library that carries its GPU code ("libtorch_cuda.so"); None: not read
    gpu_code_missing: ClassVar[str] = ""  # what a GPU also lacks when no code runs on it (" and no PTX at or below it")

    def gpu_code_read(self, read: Mapping[str, Any]) -> list[str]:
        """The GPU code names a read of :attr:`gpu_code_library` found (``sm_90``, ``compute_90``; ``gfx942``)."""
        return []

    def gpu_code_words(self, read: Mapping[str, Any]) -> str:
        """The code read, as the note names it."""
        return " ".join(self.gpu_code_read(read)) or "no GPU code"

    def gpu_code_runs(self, gpu: GpuView, got: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """(the GPU's architecture, how it runs the code ``got``: None when none of it runs); (None, None) when its
        architecture is not known. ``env``: the plan's environment (an override of the architecture)."""
        return None, None

    def planned_gpu_code(self, variant: Variant, platform: str | None) -> list[str]:
        """The GPU code the matrix lists for a build of this kind (``platform``: the wheel's platform tag)."""
        return []
    # --- install ---
    # --- build --- (``install --from-source``: :mod:`stackdoctor.resolve.source_build` asks these, so it names no kind)
    build_switch: ClassVar[str | None] = None  # the variable PyTorch's setup.py reads to build for it: "USE_CUDA"
    builds_on_macos: ClassVar[bool] = True  # False: a source build for it on macOS is planned CPU-only (CUDA, ROCm)
    offers_source_build: ClassVar[bool] = False  # install offers --from-source when no published build runs on its GPUs

    def build_targets(self, facts: Facts) -> list[str] | None:
        """What a source build compiles for on this machine's devices of this kind (NVIDIA: compute capabilities;
        AMD: gfx names; [] for a kind whose devices need no list); None when it has none to build for."""
        return None

    def build_arch_env(self, targets: list[str], *, ptx: bool) -> dict[str, tuple[str, str]]:
        """The build's variables that name ``targets`` ({"TORCH_CUDA_ARCH_LIST": (value, why)})."""
        return {}

    def build_home_env(self, tools: Any) -> dict[str, tuple[str, str]]:
        """The variable that points the build at the kind's toolkit when it is not in the default place ({"CUDA_HOME": ...})."""
        return {}

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        """What a source build for this kind needs beyond the compiler and tools (its toolkit), as prerequisites."""
        return []

    def build_steps(self, python: str) -> list[tuple[str, list[str]]]:
        """Steps of its own before the build (AMD's hipify: ``tools/amd_build/build_amd.py``), as (step, argv)."""
        return []

    def build_label_of(self, cc: str | None, gfx: str | None) -> str | None:
        """One of its GPUs (the resolver's compute capability or gfx) as a source build names it ("sm_35"), or None."""
        return None
    # --- end build ---

    def __repr__(self) -> str:
        return f"<accelerator {self.name}>"

    # --- resolve ---
    # How the resolver plans for this kind (stackdoctor.resolve): its devices on the target, whether a build of it
    # fits them, how the rest are hidden, what the plan says of it. The defaults are a plug-in kind's: its devices
    # as the reconciled view lists them, any build of its kind fits them, nothing to hide by architecture.
    mixed_subsets: ClassVar[bool] = False  # mixed devices: try the groups by architecture (cc / gfx), hiding the rest
    separate_runtime_wheels: ClassVar[bool] = False  # its builds pull their runtime libraries as wheels of their own

    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        """Its devices on this machine as the resolver plans for them (every witness joined, in the reconciled view)."""
        return [TargetDevice(self.vendor, v.index, v.name, integrated=v.integrated, uuid=v.uuid) for v in self.devices(facts)]

    def unlisted(self, facts: Facts) -> tuple[int, str | None]:
        """Devices of its kind that only the PCI bus shows (no working driver lists them), and the note saying so."""
        return 0, None

    def named_devices(self, names: Sequence[str]) -> list[TargetDevice]:
        """The devices its what-if flag names (``--npu 910B``), numbered from 0."""
        return [TargetDevice(self.vendor, i, n.strip()) for i, n in enumerate(names)]

    def flag_devices(self, request: Request, matrix: Matrix) -> tuple[list[TargetDevice], list[str]]:
        """The devices the built-in what-if flags name for it (``--gpu``, ``--gfx``), and notes on what is unknown of them."""
        return [], []

    def what_if_arch(self, text: str, matrix: Matrix) -> str | None:
        """The architecture a what-if device value names for this kind (NVIDIA's ``--gpu sm_90`` / ``9.0`` / a GPU name
        -> its compute capability), or None: a kind without one is never asked."""
        return None

    def gpu_name(self, name: str) -> bool:
        """A ``--gpu`` value that names a device of this kind (``"Arc B580"``: Intel's); the what-if plans it as one.
        False by default: ``--gpu`` is NVIDIA's unless a kind claims the name."""
        return False

    def flag_error(self, request: Request, matrix: Matrix) -> str | None:
        """One sentence when a what-if flag names a device of its kind that nobody makes (``--gpu sm_999``): the
        install command exits 2 with it instead of planning for it. None: every value can mean a device."""
        return None

    def claims(self, devices: Sequence[TargetDevice], target: FitTarget) -> bool:
        """A build of its kind is what serves these devices (the first kind in priority order that claims them wins)."""
        return any(g.vendor == self.vendor for g in devices)

    def select_devices(self, devices: list[TargetDevice], warnings: list[str]) -> tuple[list[TargetDevice], str | None]:
        """The devices a build of its kind plans for, when it serves them (others are left out, saying so in
        ``warnings``), and the reason when its build targets none of them (a CPU build is then planned)."""
        return devices, None

    def fit(self, fit: FitNotes, release: Release, version: Version, variant: Variant, tag: str, target: FitTarget, matrix: Matrix,
            devices: Sequence[TargetDevice], auto: bool) -> None:
        """Does ``variant``, a build of its kind for the wheel platform ``tag``, run on ``devices`` with the target's driver:
        raises :class:`Unfit` with the reason; adds to ``fit`` its warnings, reasons and environment. ``auto``: the
        request names no variant. The default: any build of its kind fits (nothing more is known to check)."""

    def cannot_serve_cpu(self, release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix,
                         devices: Sequence[TargetDevice]) -> str | None:
        """Why a build of its kind must not serve as a CPU build here (it would see a device it has no code for), or None."""
        return None

    def hide_env(self, kept: Sequence[TargetDevice]) -> dict[str, str]:
        """The environment that leaves only ``kept`` visible to torch."""
        return {self.hide_var or "HIP_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}

    def chosen_reason(self, version: Version, variant: str, what: str, requested: bool, target: FitTarget) -> str | None:
        """The plan's reason for choosing ``variant`` for ``what`` (the devices), when the kind says more than the
        generic one (the driver it runs with)."""
        return None

    def installed_sees_device(self, torch: TorchFacts) -> bool | None:
        """Whether the installed torch, a build of its kind, saw its device (None: not a question for this kind)."""
        return None
    # --- end resolve ---
    # --- render ---
    device_example: ClassVar[str | None] = None  # one of its devices as `kernels --device` takes it, for the help ("cuda:0", "mps")
    fleet_runtime: ClassVar[str | None] = None  # the fleet table's column of the runtime its torch bundles ("cuda"): a node's key
    witness_keys: ClassVar[tuple[str, str] | None] = None  # the ui keys of the witness rows of its driver and runtime in the view

    def fleet_node(self, facts: Facts) -> tuple[str | None, str | None, str | None]:
        """(driver, runtime, GPU names) of this node as the fleet table compares them, for the kind that declares
        :attr:`fleet_runtime`."""
        return None, None, None

    def toolkit(self, facts: Facts) -> tuple[str, str | None] | None:
        """Its compiler toolkit as the stack's toolkit layer shows it (the tool and version, the path), or None."""
        return None

    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        """The runtime layer's words when the installed torch carries its runtime ("CUDA 12.6 (bundled in the wheel),
        cuDNN 9.1"), and whether torch's availability follows them; None when it carries none of it."""
        return None

    def files_build_words(self, facts: Facts, say: Say) -> str | None:
        """The runtime layer's words for a torch read from its files (not imported) on its platform ("macOS build")."""
        return None

    def torch_versions(self, torch: TorchFacts) -> list[tuple[str, str]]:
        """Its runtime's versions as the Markdown torch row lists them ([("CUDA", "12.6")])."""
        return []

    def availability_words(self, torch: TorchFacts, say: Say) -> str | None:
        """What torch said of its devices, for the Markdown torch row ("MPS available"), or None."""
        return None

    def compared(self, facts: Facts) -> dict[str, Any]:
        """Its facts as ``diff`` compares them, key -> plain value (``nvidia.driver_version``, ``nvidia.gpus[0].name``,
        ``torch.cuda``): the stack-defining ones, never volatile or identifying ones (UUIDs, serials, paths)."""
        return {}

    def diff_sections(self) -> dict[str, int]:
        """The sections of its keys (``compared``) and their places in the diff's stack order
        (:data:`stackdoctor.model.diff.SECTION_PLACES` holds every machine's)."""
        return {}

    # the shared matrix's tables that are about it, as `matrix validate` counts them: (place in its sentence, table, words)
    matrix_counts: ClassVar[tuple[tuple[int, str, str], ...]] = ()
    variant_examples: ClassVar[tuple[str, ...]] = ()  # its index variants as the help shows them ("cu126", "cu130")

    def matrix_lines(self, data: Mapping[str, Any]) -> list[str]:
        """Its lines in `matrix show`, from the shared matrix's data (``Matrix.to_data``), after the releases."""
        return []

    # --- reconcile ---
    env_prefixes: ClassVar[tuple[str, ...]] = ()  # the variables that shape its stack, by prefix ("HIP_"): kept in facts.environment
    report_rank: ClassVar[int | None] = None  # where its probes stand among the shipped kinds' in the report's "probes" list
    # (lowest first, a kind's own before its more_probes); None: after the generic probes, in priority order (a plug-in's place)

    def joined_gpus(self, facts: Facts, matrix: Matrix | None) -> list[GpuView]:
        """Its GPUs in the machine's view, each joined from every witness that saw it (its tools, its kernel driver's
        list, the PCI bus, torch's device list: :mod:`stackdoctor.reconcile.gpus` has the joining), on reconcile's copy
        of the facts. The default: the GPUs it lists itself (:meth:`gpus`), as a plug-in kind does."""
        return self.gpus(facts)

    def derive(self, facts: Facts, matrix: Matrix) -> None:
        """What follows from its facts by the matrix, redone on reconcile's copy of them (what an earlier reconcile
        wrote into its stable keys undone first), and its witnesses weighed where its probe picked none. Default: nothing."""

    def reconciled(self, facts: Facts, rec: ReconciledFacts) -> dict[str, SeenValue]:
        """Its values chosen from their witnesses (``rec.evidence`` recognised already): its driver's version and its
        runtime level written into the reconciled section ``rec`` (its documented keys); returned, the stable keys whose
        value reconcile chooses (``view.chosen``). Default: none."""
        return {}

    def publish(self, facts: Facts, view: MachineView, rec: ReconciledFacts) -> None:
        """Its stable keys written from the view (``rec``: the view's reconciled section) into the report's copy of the
        facts, every witness's own value kept beside them (:func:`stackdoctor.reconcile.report_facts`). Default: nothing."""

    def driver_disagreements(self, rec: ReconciledFacts) -> list[Disagreement]:
        """The witnesses of its driver's values that disagree (the reconciled section ``rec``)."""
        return []

    def gpu_disagreements(self, facts: Facts, g: GpuView, label: str) -> list[Disagreement]:
        """The witnesses of one of its GPU's fields that disagree, and what explains it."""
        return []

    def recognised(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        """(regex, the finding it proves): the messages of its runtime recognised line by line, before the generic ones."""
        return ()

    def evidence_values(self, groups: Mapping[str, str | None]) -> dict[str, str]:
        """What a line one of its :attr:`recognised` patterns matched says (the pattern's named groups), in its words."""
        return {}

    def torch_messages(self, facts: Facts) -> list[tuple[str, str]]:
        """torch's messages about its device (where each was read, the text): read before the generic ones."""
        return []

    def tool_messages(self, facts: Facts) -> list[tuple[str, str]]:
        """Its tools' error messages (where each was read, the text): read after the generic ones."""
        return []

    def counts_torch(self, torch: TorchFacts) -> bool:
        """torch's device count (``TorchFacts.device_count``) counts its devices: compared with its driver's list."""
        return False

    def count_note(self, facts: Facts, witness: str) -> str | None:
        """What explains torch counting another number of its devices than ``witness`` (its driver's list), besides a
        hiding variable: in a container, the kernel driver's list may show the host's."""
        return "container" if facts.platform.container and witness and witness == self.kernel_witness else None

    def peak(self, facts: Facts, rec: ReconciledFacts, r: KernelResult, matrix: Matrix) -> tuple[float | None, str]:
        """The peak TFLOP/s of kernel result ``r`` on its device, and its source (when :attr:`peaks`)."""
        return None, ""

    def user_space_driver(self, view: MachineView) -> str | None:
        """Its user-space driver's version, unless reconcile took the view's from the kernel module for want of one."""
        return None

    pci_vendor: ClassVar[str | None] = None  # its display devices' PCI vendor id ("0x10de"), as /sys/bus/pci/devices/*/vendor says
    pci_devices_field: ClassVar[str | None] = None  # the PlatformFacts field the platform probe lists them in

    def container_devices(self, container: str) -> tuple[str, tuple[str, ...]] | None:
        """Inside a container (``container``: "docker", "apptainer" ...): the PlatformFacts field that says whether its
        devices were passed in, and the paths (device nodes, bound driver libraries) whose presence says so; None: not asked."""
        return None
    # the kind whose devices its own are a form of (Jetson: "nvidia", an integrated NVIDIA GPU): never the one that
    # answers for a vendor, a backend or a build kind (by_vendor, for_backend, for_build, backends)
    variant_of: ClassVar[str | None] = None

    # What torch's own files and the target worker say of a build of its kind (probes/target.py):
    torch_version_fields: ClassVar[tuple[str, ...]] = ()  # TorchFacts fields its runtime's version is in ("rocm"), from torch/version.py too
    static_arch_field: ClassVar[str | None] = None  # the field of torch's files read that lists its GPU code, when its build witness is set
    arch_list_sources: ClassVar[tuple[str, str] | None] = None  # torch's own arch list: (get_arch_list's source, the build flags')
    triton_forks: ClassVar[tuple[str, ...]] = ()  # its Triton distributions ("pytorch-triton-<x>"), read before the generic pytorch-triton

    # --- rules ---

    def collective_error_fix(self, error: str) -> str | None:
        """The ``allreduce-failed`` fix key for a collective's error (lower-cased) that says its device was wanted and
        not there (the key of the text), or None: not its kind's words."""
        return None

    def probe_findings(self, ctx: Any, status: str) -> None:
        """Add to the running ``probe-timeout`` (``status`` "timeout") or ``probe-failed`` ("error") rule, through
        ``ctx.add`` (a :class:`stackdoctor.rules.core.Ctx`), what its kind's own tools said that ended so: a tool
        that hung or failed leaves part of its stack unknown. The default: nothing (its probe's failure is the
        generic one's)."""

    def tool_error_told(self, ctx: Any, error: str) -> bool:
        """Whether one of its kind's findings (one the running rule defers to) already says what a tool's ``error``
        says, so ``probe-failed`` leaves it out."""
        return False

    def source_conflicts(self, ctx: Any) -> None:
        """Add to the running ``source-conflict`` rule (``ctx.add``) what its kind's own witnesses of its driver say
        against each other (the generic disagreements between witnesses follow). The default: nothing."""

    def ok_driver(self, view: MachineView) -> str | None:
        """Its driver, as ``driver-ok`` names it ("NVIDIA 550.54 (CUDA 12.4)"), when it is there; None: not its kind's."""
        return None

    def ok_unlisted(self, facts: Facts) -> list[str]:
        """Its devices as ``gpu-ok`` names them when the view lists no GPU of any kind (an integrated one: a Mac's chip)."""
        return []

    def ok_runtime(self, torch: TorchFacts) -> tuple[str, int | str] | None:
        """(its backend's name, the devices torch counts) for ``runtime-ok`` when torch runs its kind's build on its
        device; None: not its kind's."""
        return None

    def backend_built(self, torch: TorchFacts) -> bool:
        """Whether an installed build of its build kind has its backend built in (``[tool.stackdoctor] backend``);
        False only where torch says it was left out."""
        return True

    def installed_build(self, torch: TorchFacts) -> str | None:
        """The installed torch, a build of its build kind, in a sentence with its version ("CUDA 12.4"), or None."""
        return None

    def build_version_fact(self) -> str | None:
        """The torch fact that holds the version of its build ("torch.cuda"), for a finding about the build's kind."""
        return None

    def compute_capable(self, view: MachineView) -> list[GpuView]:
        """Its devices that ``[tool.stackdoctor] compute_capability`` is checked against (none: not its kind's word)."""
        return []

    def hidden_devices(self, ctx: Any) -> None:
        """Add to the running ``cuda-visible-devices-hides-all`` rule (``ctx.add``) the variables of its own that hide
        every GPU of its kind from torch (HIP_VISIBLE_DEVICES for ROCm). The default: nothing."""

    def stale_runtimes(self, view: MachineView) -> list[str]:
        """Its runtime wheels of another family beside the installed build's own (``torch-lib-stale``: what to uninstall)."""
        return []

    def judges_build(self, facts: Facts) -> bool:
        """Whether its own rule judges the installed torch's build on this machine (so ``torch-backend-mismatch`` does not)."""
        return False

    def arch_list_call(self) -> str | None:
        """The torch call that lists the GPU code of a build that answers through it ("torch.cuda.get_arch_list()")."""
        return None

    def conda_runtime_packages(self) -> tuple[str, ...]:
        """Its runtime as conda packages (``conda-pip-mix``: beside a pip torch they shadow or duplicate its own)."""
        return ()

    def pip_runtime_prefix(self) -> str | None:
        """The prefix of the runtime wheels a pip build of its kind brings ("nvidia-"): a sign torch came from pip."""
        return None

    def same_build_level(self, variant: Any, torch: TorchFacts) -> bool | None:
        """Whether matrix row ``variant`` has the level of its kind's runtime the label-less installed build has (PyPI's
        CUDA build by its CUDA version); None: the row carries no level of its kind."""
        return None

    def driver_wants_build(self, view: MachineView) -> bool:
        """Whether a driver of its kind is known to be here (a tool's version, torch's words), so that a CPU build is
        no fix (``install_fix``)."""
        return False
