"""What reconcile and the engine ask a kind: its own witnesses joined and weighed, its report rank.

A part of :class:`stackdoctor.kinds.base.Accelerator` (which inherits it); every method has the generic default a kind
overrides where it has something to say."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, ClassVar

from stackdoctor.model.facts import Facts, GpuView, TorchFacts

if TYPE_CHECKING:
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.facts import Disagreement, KernelResult, ReconciledFacts, SeenValue
    from stackdoctor.model.view import MachineView


class ReconcileSeam:
    # what its defaults read of the kind (:class:`~stackdoctor.kinds.base.Accelerator` and the kinds set them)
    kernel_witness: ClassVar[str | None]

    if TYPE_CHECKING:  # the kind's own (Accelerator.gpus)

        def gpus(self, facts: Facts) -> list[GpuView]: ...

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
