"""The machine as one frozen view: what :func:`stackdoctor.reconcile.reconcile` returns, and what the rules,
the renderers, ``diff`` and the report's judging read.

:class:`MachineView` holds the answers reconcile chose from every witness, keyed by accelerator kind where they
are a kind's (``drivers["nvidia"]``: the user-space driver's version; ``runtimes["nvidia"]``: the newest CUDA the
driver runs; ``runtimes["amd"]``: the installed ROCm release), the devices every witness saw (joined), the
recognised messages and the disagreements, and the facts as the witnesses gave them (``view.facts``, derivations
from the matrix done). One way to ask for each chosen value: ``view.driver(kind)``, ``view.runtime(kind)``,
``view.gpus`` / ``view.devices`` / ``view.driven``, ``view.chosen(key)``; ``view.facts.nvidia.driver_version`` is
what a probe said, not the answer. Being a type, it is its own guard: a raw :class:`~stackdoctor.model.facts.Facts`
is not a view, so nothing that takes a view can be handed unweighed witnesses.

The report's JSON keeps its documented keys: the ``reconciled`` section (:class:`~stackdoctor.model.facts.ReconciledFacts`)
and the stable keys (``nvidia.driver_version``, ``rocm.version``, ...) are written from the view by
:func:`stackdoctor.reconcile.report_facts`, where the report is made; :meth:`MachineView.of` reads a view back from
a report's facts (a saved report's, a renderer's: there ``view.facts`` carries the published keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from stackdoctor.model.facts import (
    Disagreement,
    Evidence,
    Facts,
    GpuView,
    ReconciledFacts,
    SeenValue,
)

__all__ = ["W_PCI", "MachineView", "NotAView", "ViewKeys", "facts_of"]

W_PCI = "pci"  # the PCI bus's witness name (/sys/bus/pci/devices)

@dataclass(frozen=True)
class ViewKeys:
    """Where the kinds' values live in the report (its documented keys), as the kinds declare them
    (:func:`stackdoctor.kinds.view_keys`): each kind's driver and runtime level in the ``reconciled`` section, and the
    other stable keys whose value reconcile chooses from their witnesses (:meth:`MachineView.chosen`)."""

    drivers: Mapping[str, str] = field(default_factory=dict)  # kind -> its ReconciledFacts field of its driver's version
    runtimes: Mapping[str, str] = field(default_factory=dict)  # kind -> its ReconciledFacts field of its runtime level
    chosen: tuple[str, ...] = ()  # "subject.name" stable keys


def _frozen(values: Mapping[str, SeenValue]) -> Mapping[str, SeenValue]:
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class MachineView:
    """One view of the machine, joined from every witness (:func:`stackdoctor.reconcile.reconcile`)."""

    facts: Facts  # the witnesses' facts, derivations from the matrix done; the chosen values are the view's (below)
    gpus: tuple[GpuView, ...] = ()  # every device any witness saw, the same one seen by several joined
    drivers: Mapping[str, SeenValue] = field(default_factory=lambda: _frozen({}))  # kind -> its driver's version
    runtimes: Mapping[str, SeenValue] = field(default_factory=lambda: _frozen({}))  # kind -> the runtime level it runs
    accelerator: str | None = None  # the machine's chosen accelerator kind
    evidence: tuple[Evidence, ...] = ()  # recognised messages and what they prove
    disagreements: tuple[Disagreement, ...] = ()  # witnesses of one fact that disagree, and what explains it
    values: Mapping[str, SeenValue] = field(default_factory=lambda: _frozen({}))  # stable key -> its chosen value (keys.chosen)
    keys: ViewKeys = field(default_factory=ViewKeys, compare=False, repr=False)  # where the report keeps the kinds' values

    # ------------------------------------------------------------------ from and to the report's form

    @classmethod
    def of(cls, facts: Facts, values: Mapping[str, SeenValue] | None = None, *, keys: ViewKeys) -> MachineView:
        """The view of facts with a ``reconciled`` section: reconcile's (``values``: the stable keys' chosen values),
        or a report's (a saved report's, a renderer's: the values read back from the stable keys it published).
        ``keys``: where the kinds' values are (:func:`stackdoctor.kinds.view_keys`; ``stackdoctor.kinds.view_of``)."""
        r = facts.reconciled
        if values is None:
            values = {key: _published(facts, key) for key in keys.chosen}
        drivers = {kind: getattr(r, key) for kind, key in keys.drivers.items()}
        runtimes = {kind: getattr(r, key) for kind, key in keys.runtimes.items()}
        return cls(
            facts=facts,
            gpus=tuple(r.gpus),
            drivers=_frozen({k: v for k, v in drivers.items() if v.value or v.witnesses}),
            runtimes=_frozen({k: v for k, v in runtimes.items() if v.value or v.witnesses}),
            accelerator=r.accelerator,
            evidence=tuple(r.evidence),
            disagreements=tuple(r.disagreements),
            values=_frozen(values),
            keys=keys,
        )

    def to_reconciled(self) -> ReconciledFacts:
        """The report's ``reconciled`` section (its documented keys) from the view."""
        r = ReconciledFacts(done=True, gpus=list(self.gpus), accelerator=self.accelerator, evidence=list(self.evidence),
                            disagreements=list(self.disagreements))
        for kind, key in self.keys.drivers.items():
            setattr(r, key, self.driver(kind))
        for kind, key in self.keys.runtimes.items():
            setattr(r, key, self.runtime(kind))
        return r

    def replaced(self, **subjects: Any) -> MachineView:
        """The same view with some fact subjects replaced (``jetson=...``): a what-if copy, this view unchanged.
        The answers (drivers, devices, evidence) stay the ones reconcile chose; only what reads the subjects sees
        the change (the resolver's Jetson Thor path resolves with ``jetson.is_jetson`` off)."""
        return replace(self, facts=replace(self.facts, **subjects))

    @property
    def reconciled(self) -> ReconciledFacts:
        """The joined view as the facts carry it, for the accelerator kinds only (their methods take facts or a view
        and read ``facts.reconciled``); every other reader asks the answers below."""
        return self.facts.reconciled

    # ------------------------------------------------------------------ the answers

    def driver(self, kind: str) -> SeenValue:
        """Kind ``kind``'s driver version with every witness's value (an empty one when no witness gave one)."""
        return self.drivers.get(kind) or SeenValue()

    def runtime(self, kind: str) -> SeenValue:
        """The runtime level kind ``kind``'s stack runs (NVIDIA: the newest CUDA its driver runs; AMD: the ROCm release)."""
        return self.runtimes.get(kind) or SeenValue()

    def chosen(self, key: str) -> SeenValue:
        """The value chosen for stable key ``key`` (one of ``keys.chosen``: NVIDIA's ``"nvidia.kernel_module_version"``
        ...), with its source as the report publishes it (an empty one when no witness gave one)."""
        return self.values.get(key) or SeenValue()

    def devices(self, vendor: str) -> tuple[GpuView, ...]:
        """The devices of ``vendor`` (``GpuView.vendor``) in the view."""
        return tuple(g for g in self.gpus if g.vendor == vendor)

    def proves(self, code: str) -> Evidence | None:
        """The first recognised message that proves finding ``code``, or None."""
        return next((e for e in self.evidence if e.proves == code), None)

    def driven(self, vendor: str) -> tuple[GpuView, ...]:
        """The GPUs of ``vendor`` a driver gives out (any witness but the PCI bus alone: the tools, the kernel
        module's list without the GPUs it excludes, torch), in the driver's order: what a ``CUDA_VISIBLE_DEVICES``
        index counts, and what reconcile writes into the kind's stable keys (``nvidia.gpus``)."""
        mine = (g for g in self.devices(vendor) if g.witnesses != [W_PCI] and (g.witnesses or g.torch_index is not None))
        return tuple(sorted(mine, key=lambda g: g.index))

    def lost(self, vendor: str) -> tuple[GpuView, ...]:
        """The one answer to "which GPUs of ``vendor`` were lost": those only the PCI bus sees, that no driver lists
        (neither its tools, nor the kernel module's list, nor torch). The ``gpu-lost`` rule and the resolver's
        "on the PCI bus but the driver did not list them" both read it."""
        return tuple(g for g in self.devices(vendor) if g.witnesses == [W_PCI])


def _published(facts: Facts, key: str) -> SeenValue:
    subject, name = key.split(".", 1)
    sub = getattr(facts, subject)
    return SeenValue(value=getattr(sub, name), source=sub.sources.get(name))


class NotAView(TypeError, ValueError):
    """Raw facts where the machine's view was needed (a caller's bug)."""


def facts_of(given: Facts | MachineView) -> Facts:
    """The reconciled facts of a view, for the code behind an entry point that takes the view (the resolver,
    install) and still reads facts. Only a :class:`MachineView` passes: the type is the only guard.

    :raises NotAView: ``given`` is raw facts, not a view (pass them through :func:`stackdoctor.reconcile.reconcile`)."""
    if isinstance(given, MachineView):
        return given.facts
    raise NotAView("needs the machine's reconciled view: pass the facts through stackdoctor.reconcile.reconcile first")
