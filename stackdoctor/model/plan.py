"""The install plan: what ``stackdoctor install`` would put in the target, and why.

Produced by the pure resolver (``stackdoctor.resolve``), consumed by the installer and the
renderers. ``to_data()`` is the public ``stackdoctor.plan/1`` JSON contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackdoctor.model.facts import to_data

PLAN_SCHEMA = "stackdoctor.plan/1"


@dataclass
class PlannedPackage:
    name: str  # "torch"
    version: str  # "2.13.0" (public version, no local suffix)
    variant: str | None  # "cu130"; None where the index has no local versions (PyPI's macOS wheels)
    index_url: str | None  # the index this package comes from
    source: str | None = None  # where the index check found its wheel: an index page, a find-links folder or page
    wheel: str | None = None  # the wheel file found there: "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"

    @property
    def requirement(self) -> str:
        """The pip requirement string: ``torch==2.13.0+cu130`` (or ``torch==2.13.0``)."""
        return f"{self.name}=={self.version}+{self.variant}" if self.variant else f"{self.name}=={self.version}"


@dataclass
class Rejected:
    variant: str
    reason: str  # a sentence for people; it starts with "torch <release>:"
    torch: str | None = None  # the release this build of it was rejected for (what code compares, not the sentence)
    # what holds it back: "driver" | "python" | "platform" | "device" (the GPU) | "unknown" (the build may exist: the
    # matrix has no source either way) | "newer" (it fits; another build is preferred) | None (not said)
    blocker: str | None = None


@dataclass
class PlanSource:
    """A place the installer can take packages from, and what the index check found there."""

    url: str  # index root (PEP 503), find-links folder / page
    kind: str  # "index" | "links"
    role: str  # "default" | "extra" | "links" | "pytorch" | "mirror"
    origin: str  # "pip's default (PyPI)", "/root/.config/pip/pip.conf [global] extra-index-url", "PIP_FIND_LINKS", "--mirror aliyun"
    configured: bool  # the installer uses it unasked (configuration / environment)
    status: str = "unchecked"  # "ok" | "missing" (answered; no such package) | "unreachable" | "failing" | "skipped" | "unchecked"
    detail: str | None = None  # why it is not "ok", one sentence
    used: bool = False  # handed to the installer (an unreachable one never is)


@dataclass
class Route:
    """Another way to install (conda targets): the command and why one would pick it."""

    name: str  # "pip-wheels" | "conda-forge"
    title: str
    command: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    cautions: list[str] = field(default_factory=list)
    specs: list[str] = field(default_factory=list)  # conda match specs ("pytorch=2.13.0=cuda*", "cuda-version=12.9")
    channels: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # e.g. {"CONDA_OVERRIDE_CUDA": "12.9"} for a what-if
    recommended: bool = False


@dataclass
class PlanError:
    """Why ``install`` stopped (``--json`` prints the plan with this instead of nothing)."""

    kind: str  # "usage" | "index" | "matrix" | "unmet" | "install"
    message: str  # the one sentence also printed on stderr
    exit_code: int = 2


@dataclass
class Plan:
    torch_version: str | None
    variant: str | None  # index name: "cpu" | "cu126" | "rocm7.2" | "xpu" | "jetson-jp6-cu126"; None: nothing fits
    index_url: str | None
    packages: list[PlannedPackage] = field(default_factory=list)
    command: list[str] = field(default_factory=list)  # argv of the install command
    reasons: list[str] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # e.g. {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    suggestions: list[str] = field(default_factory=list)  # nearest requests that would work (variant None)
    leftovers: list[str] = field(default_factory=list)  # old variant's runtime packages left behind
    sources: list[PlanSource] = field(default_factory=list)  # what the index check asked, and what answered
    command_env: dict[str, str | None] = field(default_factory=dict)  # environment the command needs (None: unset)
    machine: str | None = None  # what-ifs: the hypothetical machine the plan is for
    satisfied: bool = False  # the target already has exactly this plan: nothing to do
    routes: list[Route] = field(default_factory=list)  # conda targets: pip wheels vs conda-forge
    error: PlanError | None = None

    @property
    def satisfiable(self) -> bool:
        return self.variant is not None

    def to_data(self) -> dict[str, Any]:
        return {"schema": PLAN_SCHEMA, **to_data(self)}


@dataclass
class Request:
    """What the user asked ``install`` for. ``None`` means "from this machine's facts"."""

    torch: str | None = None  # "2.13.0" or a specifier ">=2.6,<2.12"; None: newest usable
    variant: str = "auto"  # "auto" | "cpu" | "cu126" | "rocm7.2" | "xpu" | ...
    packages: list[str] = field(default_factory=lambda: ["torch"])  # + torchvision / torchaudio
    python_version: str | None = None  # what-if: "3.12"
    platform: str | None = None  # what-if wheel platform tag: "manylinux_2_28_x86_64", "win_amd64", "macosx_14_0_arm64"
    driver: str | None = None  # what-if NVIDIA driver "570.86.10"
    gpus: list[str] = field(default_factory=list)  # what-if GPUs: names or "sm_90"
    gfx: list[str] = field(default_factory=list)  # what-if AMD gfx: "gfx1100"
    values: dict[str, dict[str, str]] = field(default_factory=dict)  # what-if values of a kind's host, by kind and key: {"amd": {"userspace": "6.3.1"}}
    devices: dict[str, list[str]] = field(default_factory=dict)  # what-if devices of other kinds, by kind: {"ascend": ["910B"]}
    index_base: str | None = None  # base of the variant indexes; None: the matrix's ``pytorch`` index
    installer: str = "pip"  # "pip" | "uv"
    # the request names torchvision / torchaudio and not torch, nor --torch / --variant: a working installed torch is
    # kept (a companion never moves it), and a companion its sources lack is said, not served by another torch
    keep_torch: bool = False
    torch_asked: bool = True  # ``torch`` came from the user's --torch (False: the install flow re-resolved for a release)
