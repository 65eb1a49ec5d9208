"""The accelerator plug-in's interface: :class:`Accelerator`, which every kind in this package subclasses.

Kept apart from the registry (``stackdoctor.accelerators``) so that the kinds import it and the registry
imports the kinds, with no import circle.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from stackdoctor.model.facts import Backend, BuildKind, Facts, GpuView, Severity, TorchFacts

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.matrix import Matrix, Release, Variant
    from stackdoctor.model.plan import Request
    from stackdoctor.model.view import MachineView

from stackdoctor.kinds.for_lower import LowSeam
from stackdoctor.kinds.for_reconcile import ReconcileSeam
from stackdoctor.kinds.for_render import RenderSeam
from stackdoctor.kinds.for_resolve import ResolveSeam
from stackdoctor.kinds.for_rules import RulesSeam
from stackdoctor.kinds.for_static import StaticSeam
from stackdoctor.kinds.shapes import (
    BuildAsk,
    Companion,
    DeviceSpec,
    FitNotes,
    FitTarget,
    Say,
    TargetDevice,
    Unfit,
    Verified,
    WhatIfValue,
    device_summary,
    unverified,
)

__all__ = ["Accelerator", "BuildAsk", "Companion", "DeviceSpec", "FitNotes", "FitTarget", "Say", "TargetDevice", "Unfit", "Verified", "WhatIfValue", "device_summary", "unverified"]


class Accelerator(RenderSeam, ReconcileSeam, RulesSeam, ResolveSeam, StaticSeam, LowSeam):
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
    # install's what-if flags for values of its host beside its devices (AMD's --rocm-userspace 6.3.1): each goes to
    # Request.values[name][key], and its fit reads them through fit_host()
    what_if_values: ClassVar[tuple[WhatIfValue, ...]] = ()
    # the help of install's built-in options that are its own (AMD's --gfx, NVIDIA's --driver): (flag, help)
    option_help: ClassVar[tuple[tuple[str, str], ...]] = ()
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
