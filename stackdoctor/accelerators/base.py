"""The accelerator plug-in's interface: :class:`Accelerator`, which every kind in this package subclasses.

Kept apart from the registry (``stackdoctor.accelerators``) so that the kinds import it and the registry
imports the kinds, with no import circle.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Protocol

from stackdoctor.facts import Backend, BuildKind, Facts, GpuView, TorchFacts

__all__ = ["Accelerator", "BuildAsk", "Companion", "DeviceSpec", "Say", "Verified"]


@dataclass(frozen=True)
class DeviceSpec:
    """How the workers (``_worker/sd_kernels.py``, ``sd_allreduce.py``) run on a kind's device, as plain data
    (they are stdlib-only and import nothing of stackdoctor): ``torch.device(f"{device}:{i}")``, torch's module
    for it (``torch.<torch_api>.device_count()``), the function that waits for it (``torch.<synchronize>()``),
    the collectives' backend (``torch.distributed`` ``init_process_group(backend)``), and the modules imported
    before torch is asked (a companion package such as ``torch_npu``, when torch does not load it itself)."""

    device: str  # "npu" | "foo"
    torch_api: str  # "npu": torch.npu
    synchronize: str = ""  # "npu.synchronize": torch.npu.synchronize(); "" when the device needs none
    backend: str = "gloo"  # "hccl" | "gloo"
    imports: tuple[str, ...] = ()  # ("torch_npu",): imported (when importable) before torch.<torch_api> is used

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}


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
    :mod:`stackdoctor.source_build`: the machine, its build tools, the matrix's ``source_build`` rows, and the one way
    to make a prerequisite (``source_build.Prerequisite``; this package does not import the plan above it)."""

    facts: Facts
    tools: Any  # probes.buildtools.BuildTools, or None: a what-if for another platform (nothing was looked at)
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


class Accelerator:
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
    # A plug-in kind (one outside this package, registered through the "stackdoctor.accelerators" entry
    # point group) also names its probe module and the pattern of its index variants' names; the built-in
    # kinds' probes are in engine.PROBES and their variants are the matrix's own (cuXYZ, rocmX.Y, xpu).
    probe: ClassVar[str | None] = None  # "my_plugin.probe": a module with probe(ctx) -> ProbeOutput
    variant_pattern: ClassVar[str | None] = None  # regex of its variants' names, e.g. r"^foo\d+$"
    # A plug-in kind may also bring its own findings, texts, worker device and companion packages:
    rules: ClassVar[str | None] = None  # "my_plugin.rules": a module whose @rule functions join the catalogue
    locale: ClassVar[str | None] = None  # "my_plugin": a package with locale/en.yaml and zh.yaml (codes, sentences)
    device: ClassVar[DeviceSpec | None] = None  # how the kernel and allreduce workers run on its device
    companions: ClassVar[tuple[str, ...]] = ()  # distributions installed beside torch for it ("torch-npu")
    torch_api_needs: ClassVar[str | None] = None  # torch is asked about it only where this module is installed ("torch_npu")
    what_if_option: ClassVar[str | None] = None  # install's what-if flag naming one of its devices ("--npu 910B"), as --gpu does

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

    # --- build --- (``install --from-source``: :mod:`stackdoctor.source_build` asks these, so it names no kind)
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
