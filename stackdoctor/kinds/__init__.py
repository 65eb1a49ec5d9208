"""The accelerator seam: what an accelerator kind is (:mod:`.base`) and the one registry every layer asks ("which
accelerator does this machine have, and can torch use it?").

The kinds themselves live one package each in :mod:`stackdoctor.accelerators` (``nvidia/``, ``jetson/``, ``amd/``,
``intel/``, ``apple/``, ``ascend/``) or in another distribution (a plug-in): each says whether it is present and usable,
the torch build that serves it and its variant prefix, its ``torch.<x>.is_available`` fact, its runtime package
families, the variable that hides its devices, its probe, its rules and texts, and its lines on the screen. The rules,
the resolver, the project requirements, install's verification and the renderers all ask here, so ``check`` and
``install`` cannot disagree.

One registry for built-in and plug-in kinds alike: the built-in kinds are named by ``module:Class`` in the package that ships them
(``stackdoctor.accelerators.KINDS``) and loaded as a plug-in's entry point is, so this seam imports no kind and sits below them all. Everything here is a
pure function of :class:`~stackdoctor.model.facts.Facts` (after :func:`stackdoctor.reconcile.reconcile`).

Adding a kind: a package with an :class:`Accelerator` subclass, its line in ``stackdoctor.accelerators.KINDS`` (the order is the priority
when several are present), then the matrix rows and locale texts it needs (``docs/architecture.md`` lists the files).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence  # --- resolve ---
from typing import Any

from stackdoctor.core import texts
from stackdoctor.core.redact import DeviceIds  # --- seamlow ---
from stackdoctor.kinds.base import Accelerator, Companion, DeviceSpec, FitTarget, Say, TargetDevice, Verified  # --- resolve ---
from stackdoctor.model.facts import BuildKind, Facts, TorchFacts
from stackdoctor.model.view import MachineView, ViewKeys  # --- seamlow ---

__all__ = ["ALL", "Accelerator", "Companion", "DeviceSpec", "companion_kind", "companion_names", "import_hint", "what_if_options", "variant_examples", "source_build_steps", "Say", "device_specs", "device_types", "gpu_code_kind", "gpu_libraries", "runtime_wheel_prefixes", "tables", "rule_modules", "backends", "build_kind", "by_name", "by_vendor", "probes", "torch_questions", "verify_install", "Verified", "device_lines", "driver_lines", "for_subject", "for_backend", "for_variant", "present", "select", "CPU", "for_build", "serving", "build_label", "gpu_build_for", "TargetDevice", "with_device"]


SHIPPED = "stackdoctor.accelerators"  # the package of the kinds stackdoctor ships: its KINDS and BUNDLED_KINDS name them


def _shipped(attr: str) -> tuple[str, ...]:
    """The ``module:Class`` names the shipped kinds' package lists under ``attr`` (read as an entry point group is)."""
    import importlib

    names: tuple[str, ...] = getattr(importlib.import_module(SHIPPED), attr)
    return names


def _load(name: str) -> Accelerator:
    """One kind from its ``module:Class`` name, as an entry point is loaded."""
    import importlib

    module, _, cls = name.partition(":")
    acc = getattr(importlib.import_module(module), cls)()
    if not isinstance(acc, Accelerator):
        raise TypeError(f"{name} is not an Accelerator")
    return acc


def _all() -> tuple[Accelerator, ...]:
    return tuple(_load(k) for k in _shipped("KINDS"))


PLUGIN_GROUP = "stackdoctor.accelerators"  # the entry point group a plug-in kind registers its Accelerator class in
PLUGIN_ERRORS: list[str] = []  # a plug-in that could not be loaded, in one sentence each (shown by check -v)


def _plugins(builtin: tuple[Accelerator, ...]) -> tuple[Accelerator, ...]:
    """The kinds other distributions register (entry point group :data:`PLUGIN_GROUP`), after the built-in ones.

    Each declares everything kind-specific once (:class:`Accelerator`); its variant pattern joins the matrix's
    variant kinds, its probe joins ``engine``'s probes. One that fails to load is a sentence in
    :data:`PLUGIN_ERRORS`, never a crash of ``check``."""
    if not _group_maybe_declared(PLUGIN_GROUP):
        return ()
    from importlib.metadata import entry_points

    from stackdoctor import matrix

    out: list[Accelerator] = []
    taken = {a.name for a in builtin}
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            cls = ep.load()
            acc = cls()
            if not isinstance(acc, Accelerator) or acc.name in taken:
                raise TypeError(f"{ep.value} is not a new Accelerator kind")
            _register(acc, matrix)
        except Exception as exc:  # a broken plug-in is a fact, not a crash
            PLUGIN_ERRORS.append(f"accelerator plug-in {ep.name} ({ep.value}): {type(exc).__name__}: {exc}")
            continue
        taken.add(acc.name)
        out.append(acc)
    return tuple(out)


def _group_maybe_declared(group: str, path: list[str] | None = None) -> bool:
    """False only when no distribution on ``path`` (default ``sys.path``) can declare an entry point in ``group``:
    no ``*.dist-info`` / ``*.egg-info`` ``entry_points.txt`` there names it. Read directly, as a few small files:
    importing :mod:`importlib.metadata` and parsing every distribution's metadata is tenths of a second of each
    ``check`` (issue 33). True (ask :mod:`importlib.metadata`) wherever distributions may be found otherwise: a
    zip or egg on the path, a finder of distributions besides the standard path finder."""
    import os
    import sys

    if any(hasattr(f, "find_distributions") and f.__module__ not in ("_frozen_importlib_external", "importlib._bootstrap_external") for f in sys.meta_path):
        return True
    header = f"[{group}]"
    for entry in sys.path if path is None else path:
        where = entry or os.curdir
        if os.path.isfile(where) or where.lower().endswith(".egg"):
            return True
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            if name.lower().endswith((".dist-info", ".egg-info")):
                try:
                    with open(os.path.join(where, name, "entry_points.txt"), encoding="utf-8", errors="replace") as fh:
                        if header in fh.read():
                            return True
                except OSError:
                    continue
    return False


def _register(acc: Accelerator, matrix: object) -> None:
    """What a plug-in kind adds to the rest: its variant pattern to the matrix's variant kinds, its texts."""
    if acc.variant_pattern:
        matrix.register_variant_kind(acc.build_kind, acc.variant_pattern)  # type: ignore[attr-defined]
    if acc.locale:
        texts.add_locale(acc.locale)


def _bundled() -> tuple[Accelerator, ...]:
    """The plug-in kinds shipped inside stackdoctor: each in a package of its own that uses only the seam, taking
    the plug-ins' path (probe module, Facts.plugins, torch asked by name, its own rules, texts and device spec)."""
    from stackdoctor import matrix

    kinds = tuple(_load(k) for k in _shipped("BUNDLED_KINDS"))
    for acc in kinds:
        _register(acc, matrix)
    return kinds


# The registry, made on first use (not at import: a kind's package imports this seam, so the seam cannot load the
# kinds while it is itself being imported). ``kinds.ALL`` / ``BUILTIN`` / ``BUNDLED`` are read through __getattr__.
ALL: tuple[Accelerator, ...]  # every kind, in priority order
BUILTIN: tuple[Accelerator, ...]  # the KINDS
BUNDLED: tuple[Accelerator, ...]  # the BUNDLED_KINDS
_LOADING: list[bool] = []
_LOCK = threading.RLock()  # the probes ask from several threads at once: one load, the others wait for it


def _kinds() -> tuple[Accelerator, ...]:
    """:data:`ALL`, made the first time it is asked for (a test may set ``kinds.ALL``: that is what is then read)."""
    g = globals()
    if "ALL" not in g:
        with _LOCK:
            if "ALL" not in g:
                if _LOADING:  # the same thread, from inside a kind's import: a kind must not ask while it is loaded
                    raise ImportError("an accelerator kind asked the registry for the kinds while being loaded by it")
                _LOADING.append(True)
                try:
                    builtin = _all()
                    bundled = _bundled()
                    g["BUILTIN"], g["BUNDLED"] = builtin, bundled
                    g["ALL"] = builtin + bundled + _plugins(builtin + bundled)
                finally:
                    _LOADING.clear()
    all_kinds: tuple[Accelerator, ...] = g["ALL"]
    return all_kinds


def _builtin() -> tuple[Accelerator, ...]:
    _kinds()
    builtin: tuple[Accelerator, ...] = globals()["BUILTIN"]
    return builtin


def __getattr__(name: str) -> Any:
    if name in ("ALL", "BUILTIN", "BUNDLED"):
        _kinds()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backends() -> tuple[str, ...]:
    """Every backend torch can run on here, as ``[tool.stackdoctor] backend`` names them: each kind's, then "cpu"."""
    return tuple(dict.fromkeys([*(a.backend for a in _kinds() if a.variant_of is None), "cpu"]))


def probes() -> tuple[tuple[str, str], ...]:
    """(subject, module) of every kind's probes, built-in and plug-in alike, in priority order."""
    return tuple(p for a in _kinds() for p in ((((a.subject, a.probe),) if a.probe else ()) + a.more_probes))


def plugin_probes() -> tuple[tuple[str, str], ...]:
    """(subject, module) of the probes of the kinds that are not built in (bundled ones like Ascend, plug-ins): their
    subjects are kept as plain data in ``Facts.plugins``."""
    builtin = _builtin()
    return tuple((a.subject, a.probe) for a in _kinds() if a.probe and a not in builtin)


def probe_module(subject: str) -> str | None:
    """The module of the probe of ``subject`` ("cuda_toolkit"), for a caller that runs one probe on its own."""
    return dict(probes()).get(subject)


def torch_questions() -> dict[str, object]:
    """kind -> torch module, for every kind torch is asked about by name (``torch.<module>.is_available()``): the
    plug-in kinds with no TorchFacts field of their own. The target worker answers them into
    ``TorchFacts.available`` (its ``STACKDOCTOR_TORCH_ASK``, as JSON); the built-in kinds' questions are its own."""
    return {a.name: ({"api": a.torch_api, "needs": a.torch_api_needs} if a.torch_api_needs else a.torch_api)
            for a in _kinds() if a not in _builtin() and a.torch_api and not a.available_field}


def rule_modules() -> tuple[str, ...]:
    """The modules of the kinds' own rules (``Accelerator.rules``), imported by :mod:`stackdoctor.rules`."""
    return tuple(a.rules for a in _kinds() if a.rules)


def device_specs() -> dict[str, dict[str, object]]:
    """kind -> its worker device spec (:class:`DeviceSpec` as plain data), in priority order, for the kinds that declare
    one (every built-in kind but the CPU, and any plug-in that runs kernels): all the kernel and allreduce workers
    know of a device (``STACKDOCTOR_DEVICES``, JSON, read by ``_worker/sd_devices.py``)."""
    return {a.name: a.device.to_dict() for a in _kinds() if a.device is not None}


def tables() -> list[tuple[Accelerator, dict[str, Any]]]:
    """Every kind's own matrix table (:attr:`Accelerator.table`, read by :meth:`Accelerator.own_table`), in priority
    order: what `matrix show` lists beside the shared matrix."""
    return [(a, data) for a in _kinds() if a.table and (data := a.own_table())]


def runtime_wheel_prefixes() -> tuple[str, ...]:
    """The name prefixes of every kind's runtime wheels ("nvidia-", "cuda-toolkit", "rocm", "intel-"): the pins that
    say what a torch build bundles."""
    return tuple(p for a in _kinds() for p in a.runtime_wheels)


def gpu_libraries() -> dict[str, str]:
    """wheel member -> the GPU code format its library carries, for every kind whose builds carry GPU code
    ("torch/lib/libtorch_cuda.so" -> "cuda")."""
    return {m: a.gpu_code for a in _kinds() if a.gpu_code for m in a.gpu_libraries}


def gpu_code_kind(variant: str | None) -> Accelerator | None:
    """The kind whose builds of ``variant`` carry GPU code a static reader lists ("cu130" -> NVIDIA, "rocm7.2" -> AMD)."""
    kind = for_variant(variant)
    return kind if kind is not None and kind.gpu_code else None


def with_device(device: str | None) -> list[Accelerator]:
    """The kinds whose devices torch reaches as this device's type ("cuda:0": NVIDIA's, Jetson's and ROCm's; "mps",
    "npu:1"), in priority order; [] for the CPU."""
    kind = (device or "").split(":", 1)[0]
    return [a for a in _kinds() if a.device is not None and a.device.device == kind]


def device_types() -> frozenset[str]:
    """The torch device types of the kinds' devices ("cuda", "mps", "npu"): a kernel result on any other ran on the CPU."""
    return frozenset(a.device.device for a in _kinds() if a.device is not None)


def verify_install(accelerator: str | None, variant: str | None, v: Verified) -> tuple[bool, str] | None:
    """The post-install verdict of the kind ``accelerator`` names (its backend, "cuda" | "rocm" | ... as
    ``commands.install.accelerator_seen`` gives it, or its name) for a build of ``variant``: (ok, clause) from
    :meth:`Accelerator.verify`; None when no such kind builds ``variant`` or torch was not asked about it."""
    if not accelerator:
        return None
    for a in _kinds():
        if accelerator in (a.backend, a.name) and a.builds(variant):
            verdict = a.verify(v)
            if verdict is not None:
                return verdict
    return None


def import_hint(accelerator: str | None, error: str, facts: Facts | None) -> str | None:
    """What to do, in a sentence, when torch failed after an install of a build for the kind ``accelerator`` names (its
    backend or name) with ``error`` (the import's error, or why ``is_available()`` is False): the kind's
    :meth:`Accelerator.import_hint`; None when it has none."""
    for a in _kinds():
        if accelerator and accelerator in (a.backend, a.name):
            hint = a.import_hint(error, facts)
            if hint:
                return hint
    return None


def companion_kind(vendors: set[str]) -> Accelerator | None:
    """The kind among devices of ``vendors`` whose torch needs a package beside it (:attr:`Accelerator.companions`)."""
    return next((a for a in _kinds() if a.companions and a.vendor in vendors), None)


def companion_names() -> frozenset[str]:
    """Every kind's companion distributions ("torch-npu")."""
    return frozenset(c for a in _kinds() for c in a.companions)


def what_if_options() -> dict[str, Accelerator]:
    """install's what-if flags of the kinds that declare one ("--npu" -> Ascend), beside --gpu and --gfx."""
    return {a.what_if_option: a for a in _kinds() if a.what_if_option}


def variant_examples() -> tuple[str, ...]:
    """The kinds' index variants as install's help shows them ("cu126", "cu130", "rocm7.2", "xpu"), in the kinds' order."""
    return tuple(dict.fromkeys(v for a in _kinds() for v in a.variant_examples))


_SOURCE_BUILD_STEPS = ("clone", "submodules", "deps", "mkl")  # then each kind's own (AMD's hipify, "amd"), then "build"


def source_build_steps() -> tuple[str, ...]:
    """Every step a source build may have, in order (``install --step``): clone, submodules, deps, mkl, the kinds'
    own steps (:meth:`Accelerator.build_steps`: AMD's ``amd``), build."""
    own = dict.fromkeys(step for a in _kinds() for step, _ in a.build_steps("python"))
    return (*_SOURCE_BUILD_STEPS, *own, "build")


def by_vendor(vendor: str) -> Accelerator | None:
    """The (first) kind whose devices carry ``vendor`` in the reconciled view."""
    return next((a for a in _kinds() if a.vendor == vendor and a.variant_of is None), None)


def by_name(name: str | None) -> Accelerator | None:
    return next((a for a in _kinds() if a.name == name), None)


def for_backend(backend: str | None) -> Accelerator | None:
    """The accelerator torch reaches through ``backend`` ("cuda" -> NVIDIA, "rocm", "xpu", "mps")."""
    return next((a for a in _kinds() if a.backend == backend and a.variant_of is None), None)


def for_variant(variant: str | None) -> Accelerator | None:
    """The accelerator an index variant is built for ("cu126" -> NVIDIA, "jetson-jp6-cu126" -> Jetson); None for cpu."""
    return next((a for a in _kinds() if a.serves(variant)), None)


def for_subject(subject: str) -> list[Accelerator]:
    """The kinds a probe's subject shows ("nvidia" -> NVIDIA; "rocm" -> AMD)."""
    return [a for a in _kinds() if a.subject == subject]


def present(facts: Facts) -> list[Accelerator]:
    """Every kind whose hardware is here, in priority order."""
    return [a for a in _kinds() if a.present(facts)]


def select(facts: Facts) -> Accelerator | None:
    """The accelerator torch should use on this machine: the first usable kind in priority order."""
    return next((a for a in _kinds() if a.usable(facts)), None)


def driver_lines(facts: Facts, say: Say) -> list[str]:
    """Every kind's driver line (the screen's and the Markdown stack's driver layer), in priority order."""
    return [line for a in _kinds() if (line := a.driver_line(facts, say))]


def device_lines(facts: Facts, say: Say) -> list[str]:
    """Every kind's devices as lines (the GPU layer), in priority order; empty when no witness saw one."""
    return [line for a in _kinds() for line in a.device_lines(facts, say)]


def build_kind(torch: TorchFacts) -> BuildKind | None:
    """What the installed torch was built for: "cuda" | "rocm" | "xpu" | "cpu"; None when no torch, or nothing says.

    From the kinds' own words, in this order: the torch field that only a build of the kind sets
    (:attr:`Accelerator.build_witness`: ``version.hip``, ``version.cuda``, read by importing torch or from
    ``torch/version.py`` without importing it), then the kind that serves the variant label ("+cu126", "+xpu", a
    plug-in kind's ``variant_pattern``), then a kind whose torch answer only its build gives
    (:attr:`Accelerator.build_answers`: ``torch.xpu.is_available()``). Whether
    torch also imports is a separate fact (``TorchFacts.import_error``).
    """
    from stackdoctor.matrix import variant_from_version

    witnesses = sorted((a for a in _kinds() if a.build_witness), key=lambda a: a.build_witness_rank)  # version.hip, then version.cuda
    if not torch.installed or not (torch.version or any(getattr(torch, a.build_witness or "", None) for a in witnesses)):
        return None
    built = next((a for a in witnesses if getattr(torch, a.build_witness or "", None)), None)
    if built is not None:
        return built.build_kind
    v = (torch.variant or variant_from_version(torch.version) or "").lower()
    served = next((a for a in _kinds() if a.serves(v)), None)  # "+cu126", "+rocm7.2", "+xpu", a plug-in kind's "+foo1"
    if served is not None:
        return served.build_kind
    answered = next((a for a in _kinds() if a.build_answers and a.torch_available(torch) is True), None)  # torch.xpu answered
    return answered.build_kind if answered is not None else "cpu"


# --- resolve ---
CPU: BuildKind = "cpu"  # the build no accelerator kind needs: what is planned when none is served (and macOS's MPS build)


def for_build(kind: str | None) -> Accelerator | None:
    """The kind whose devices a torch build of ``kind`` ("cuda", "rocm", "xpu", a plug-in's) runs on, as the resolver
    plans for them; None for the CPU build. A Jetson's builds are planned by its own path (the wheel source of its row)."""
    return next((a for a in _kinds() if a.build_kind == kind and kind != CPU and a.variant_of is None), None)


def serving(devices: Sequence[TargetDevice], target: FitTarget) -> Accelerator | None:
    """The kind whose build serves these devices on the target: the first in priority order that claims them."""
    return next((a for a in _kinds() if a.claims(devices, target)), None)


def build_label(kind: str) -> str:
    """How a build kind is written in a sentence: ``CUDA``, ``ROCm``, ``XPU``, ``CPU``."""
    if kind == CPU:
        return "CPU"  # not Apple's "MPS": macOS's default build is also every platform's CPU build
    return next((a.build_label for a in _kinds() if a.build_kind == kind and a.build_label), kind)


def gpu_build_for(variant: str | None) -> Accelerator | None:
    """The kind a variant is a GPU build for, whose devices (and driver) it needs to run on anything but the CPU:
    ``cu126`` -> NVIDIA, ``rocm6.4`` -> AMD, ``xpu`` -> Intel, ``jetson-jp6-cu126`` -> Jetson; None for a CPU build,
    ``auto`` or an unknown name. What the install flow asks instead of reading the variant's prefix itself."""
    acc = for_variant(variant)
    return acc if acc is not None and acc.build_kind != CPU else None
# --- end resolve ---
# --- seamlow ---


def view_keys() -> ViewKeys:
    """Where the report keeps every kind's values (:class:`~stackdoctor.model.view.ViewKeys`), as the kinds declare them."""
    from types import MappingProxyType

    ks = _kinds()
    return ViewKeys(
        drivers=MappingProxyType({a.name: a.driver_key for a in ks if a.driver_key}),
        runtimes=MappingProxyType({a.name: a.runtime_key for a in ks if a.runtime_key}),
        chosen=tuple(key for a in ks for key in a.chosen_keys),
    )


def view_of(facts: Facts) -> MachineView:
    """The view of facts with a ``reconciled`` section (a saved report's, a renderer's), read back."""
    return MachineView.of(facts, keys=view_keys())


def device_ids() -> DeviceIds:
    """What a redacted report hides of the kinds' devices and keeps of their names (:class:`~stackdoctor.core.redact.DeviceIds`)."""
    ks = _kinds()
    return DeviceIds(
        gpus=tuple(dict.fromkeys(a.subject for a in ks if a.gpu_ids)),
        serials=tuple(dict.fromkeys(a.subject for a in ks if "serial" in a.gpu_ids)),
        anonymous=frozenset(n for a in ks for n in a.anonymous_names),
    )
