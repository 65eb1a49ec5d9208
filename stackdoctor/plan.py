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
    variant: str | None  # "cu130"; None where the index has no local variants (PyPI macOS)
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
