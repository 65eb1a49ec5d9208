"""The install plan: what ``stackdoctor install`` would put in the target, and why.

Produced by the pure resolver (``stackdoctor.resolve``), consumed by the installer and the
renderers. ``to_data()`` is the public ``stackdoctor.plan/1`` JSON contract.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackdoctor.facts import to_data

PLAN_SCHEMA = "stackdoctor.plan/1"


@dataclass
class PlannedPackage:
    name: str  # "torch"
    version: str  # "2.13.0" (public version, no local suffix)
    variant: str | None  # "cu130"; None where the index has no local versions (PyPI's macOS wheels)
    index_url: str | None  # the index this package comes from

    @property
    def requirement(self) -> str:
        """The pip requirement string: ``torch==2.13.0+cu130`` (or ``torch==2.13.0``)."""
        return f"{self.name}=={self.version}+{self.variant}" if self.variant else f"{self.name}=={self.version}"


@dataclass
class Rejected:
    variant: str
    reason: str


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
    index_base: str | None = None  # base of the variant indexes; None: the matrix's ``pytorch`` index
    installer: str = "pip"  # "pip" | "uv"
