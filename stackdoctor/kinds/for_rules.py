"""What the generic rules ask a kind (its trouble, its -ok words, its builds' facts), so they name none.

A part of :class:`stackdoctor.kinds.base.Accelerator` (which inherits it); every method has the generic default a kind
overrides where it has something to say."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from stackdoctor.model.facts import Facts, GpuView, TorchFacts

if TYPE_CHECKING:
    from stackdoctor.model.view import MachineView


class RulesSeam:

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
