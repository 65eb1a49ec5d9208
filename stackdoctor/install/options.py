"""What ``stackdoctor install`` is asked (:class:`InstallOptions`), what it ends with (:class:`InstallOutcome`), and
how the flow shows what must be seen while it acts (:class:`Hooks`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from stackdoctor.core.errors import ExitCode

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.install.result import InstallResult
    from stackdoctor.model.plan import Plan, Route
    from stackdoctor.resolve.availability import Sourcing
    from stackdoctor.system import CommandResult

KNOWN_PACKAGES = ("torch", "torchvision", "torchaudio")
PROBES = ["target", "platform"]  # the generic probes install runs, beside each accelerator kind's own
INSTALLERS = ("pip", "uv", "conda", "mamba", "micromamba", "pixi")
EMITS = ("requirements", "uv", "environment.yml")
DRIVER_RE = re.compile(r"^\d{2,4}(\.\d{1,3}){0,3}$")


@dataclass
class MachineOptions:
    """The machine a plan is for when it is not this one (a what-if: ``--python-version``, ``--platform``,
    ``--replay``, ``--driver``, ``--gpu``, ``--gfx`` and the other kinds' device flags); empty: this machine."""

    python_version: str | None = None
    platform: str | None = None
    replay: str | None = None
    driver: str | None = None
    gpus: list[str] = field(default_factory=list)
    gfx: list[str] = field(default_factory=list)
    devices: dict[str, list[str]] = field(default_factory=dict)  # other kinds' what-if devices (--npu 910B): {"ascend": ["910B"]}
    # the kinds' what-if values of their host (Accelerator.what_if_values), by kind and key: {"amd": {"userspace": "6.3.1"}}
    values: dict[str, dict[str, str]] = field(default_factory=dict)

    def any(self) -> bool:
        return bool(self.python_version or self.platform or self.replay or self.driver or self.gpus or self.gfx or any(self.devices.values())
                    or any(v for given in self.values.values() for v in given.values()))


@dataclass
class SourceOptions:
    """Where the wheels may come from, on top of the installer's own configuration, and the matrix layered in."""

    offline: bool = False
    no_index: bool = False
    index_base: str | None = None
    find_links: list[str] = field(default_factory=list)
    mirror: str | None = None
    matrix: list[str] = field(default_factory=list)
    index_timeout_s: float = 20.0


@dataclass
class InstallOptions:
    """``stackdoctor install``'s flags: what to install and how, the machine it is for, where the wheels come from."""

    packages: list[str] = field(default_factory=list)
    torch: str | None = None
    variant: str = "auto"
    python: str | None = None
    installer: str = "pip"
    dry_run: bool = False
    json_out: bool = False
    yes: bool = False
    emit: str | None = None
    remove_leftovers: bool = False
    recover: bool = False
    timeout_s: float = 3600.0
    verbose: bool = False  # -v: each step after the installer, with its time
    progress: bool = False  # a line before each step after the installer (the command sets it on a terminal)
    machine: MachineOptions = field(default_factory=MachineOptions)
    sources: SourceOptions = field(default_factory=SourceOptions)

    @property
    def what_if(self) -> bool:
        """A plan for another machine (``--driver``/``--gpu``/``--gfx`` too): never carried out here."""
        return self.machine.any()

    @property
    def conda_installer(self) -> bool:
        return self.installer in ("conda", "mamba", "micromamba", "pixi")


What = Literal["planned", "unmet", "dry-run", "satisfied", "emitted", "declined", "installed", "failed", "recovered"]


@dataclass
class InstallOutcome:
    """What ``install`` did, for the command to render: the plan, the exit code and what happened.

    ``what``: ``unmet`` (no build fits), ``dry-run`` (planned, nothing changed), ``satisfied`` (the target already has
    the plan), ``emitted`` (``--emit`` text in ``emitted``), ``declined`` (the user said no), ``installed`` /
    ``failed`` (the installer ran: ``result`` for pip / uv, ``conda_result`` and ``route`` for conda), ``recovered``
    (``--recover``: ``result``); ``planned`` while the flow is still going (an error stopped it: ``error``)."""

    opts: InstallOptions
    plan: Plan | None = None
    exit_code: int = ExitCode.OK
    what: What = "planned"
    python: str = ""
    hypothetical: bool = False
    windows: bool = False  # the plan's commands are for a Windows shell (PowerShell)
    sourcing: Sourcing | None = None  # where the wheels were found (None: not checked)
    result: InstallResult | None = None
    route: Route | None = None  # the conda-forge route shown (dry run) or run (--installer conda, mamba, ...)
    conda_result: CommandResult | None = None
    emitted: str | None = None  # what --emit prints on stdout
    checked: Literal["sizes", "sha256"] = "sha256"  # how an installed build was found complete (a dry run: its files' sizes)
    error: BaseException | None = None  # what stopped the flow (a StackdoctorError: one sentence; else interrupt or bug)

    @property
    def warnings(self) -> list[str]:
        return list(self.plan.warnings) if self.plan is not None else []


def _quiet(line: str, style: str = "") -> None:
    del line, style


def _no(question: str) -> bool | None:
    del question
    return None


@dataclass
class Hooks:
    """How the flow shows what must be seen while it acts; the command supplies them (the flow prints nothing)."""

    show: Callable[[InstallOutcome], None] = lambda outcome: None  # the plan is final: draw it (before any question)
    say: Callable[[str, str], None] = _quiet  # a line while acting (finishing a killed install, putting back)
    stream: Callable[[str], None] = lambda text: None  # the installer's own output
    confirm: Callable[[str], bool | None] = _no  # ask before changing the environment; None: no terminal to ask on
    keep_aside: bool = False  # the caller removes the replaced torch's backup after it showed the outcome (InstallResult.set_aside)


