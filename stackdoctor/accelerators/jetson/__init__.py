"""NVIDIA Jetson: the integrated GPU of a Tegra board, reached through CUDA with wheels built for JetPack."""

from __future__ import annotations

from collections.abc import Sequence  # --- resolve ---
from typing import (
    TYPE_CHECKING,  # --- reconcile ---
    Any,  # --- resolve ---
)

from stackdoctor.accelerators.nvidia import CUDA_DEVICE, cuda_count, verify_cuda
from stackdoctor.kinds.base import Accelerator, FitTarget, Say, TargetDevice, Verified  # --- resolve ---
from stackdoctor.model.facts import Facts, Severity, TorchFacts

if TYPE_CHECKING:  # --- reconcile ---
    from stackdoctor.matrix import Matrix  # --- reconcile ---
if TYPE_CHECKING:  # --- resolve ---
    from packaging.version import Version

    from stackdoctor.matrix import Matrix, Release
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.view import MachineView


class Jetson(Accelerator):
    name = "jetson"
    vendor = "nvidia"
    subject = "jetson"
    probe = "stackdoctor.accelerators.jetson.probe"
    label = "NVIDIA Jetson (CUDA)"
    backend = "cuda"
    build_kind = "cuda"
    variant_prefixes = ("jetson-",)
    available_field = "cuda_available"
    error_field = "cuda_error"
    runtime_families = ("cuda", "cuda12", "cuda13")

    # --- install ---
    def verified_after(self, variant: str | None, facts: Facts) -> bool:
        return super().verified_after(variant, facts) or (variant or "").startswith("cu")  # a CUDA build runs on its GPU too

    def runtime_family(self, name: str) -> str | None:
        return None  # its CUDA wheels are NVIDIA's (Nvidia.runtime_family)

    def families_for(self, variant: str) -> set[str] | None:
        return None  # JetPack's builds: what they need is not known, so nothing is called a leftover
    # --- install ---
    hide_var = "CUDA_VISIBLE_DEVICES"
    build_label = "CUDA"
    vendor_label = "NVIDIA"
    torch_api = "cuda"
    device = CUDA_DEVICE

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def present(self, facts: Facts) -> bool:
        return facts.jetson.is_jetson

    def usable(self, facts: Facts) -> bool:
        # the iGPU is driven by L4T itself: no separate driver to install
        return facts.jetson.is_jetson

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        j = facts.jetson
        if not j.is_jetson:
            return []
        what = j.model or "Jetson"
        return [f"{what} (L4T {j.l4t_release or '?'}, JetPack {j.jetpack or '?'})"]

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        j = facts.jetson
        return f"L4T {j.l4t_release or '?'} (JetPack {j.jetpack or '?'}, CUDA {j.cuda or '?'})" if j.is_jetson else None

    # --- view ---
    def wrong_result_fix(self) -> str:
        return "result"

    def torch_count(self, torch: TorchFacts) -> int | None:
        return cuda_count(torch)

    def named(self, facts: Facts) -> str:
        return facts.jetson.model or "Jetson"

    def cpu_build(self) -> tuple[Severity, str] | None:
        return None  # a Jetson's CPU build is jetson-wrong-wheel's finding
    # --- end view ---
    # --- resolve ---
    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        return []  # the iGPU is planned for by the Jetson's own path (its wheel source), never as a discrete NVIDIA GPU

    def claims(self, devices: Sequence[TargetDevice], target: FitTarget) -> bool:
        return False
    # --- end resolve ---
    # --- render ---
    def compared(self, facts: Facts) -> dict[str, object]:
        return {f"jetson.{name}": getattr(facts.jetson, name) for name in ("is_jetson", "l4t_release", "jetpack", "model", "cuda")}

    def diff_sections(self) -> dict[str, int]:
        return {"jetson": 90}

    matrix_counts = ((3, "jetson", "Jetson row(s)"),)

    # --- reconcile ---
    report_rank = 4

    def derive(self, facts: Facts, matrix: Matrix) -> None:
        from stackdoctor.accelerators.jetson.witnesses import derive

        derive(facts, matrix)

    variant_of = "nvidia"

    # --- rules ---

    def ok_unlisted(self, facts: Facts) -> list[str]:
        return [facts.jetson.model or "Jetson"] if facts.jetson.is_jetson else []

    def judges_build(self, facts: Facts) -> bool:
        return facts.jetson.is_jetson  # jetson-wrong-wheel (accelerators/nvidia/rules.py) judges a Jetson's build
    # --- resolve ---
    index_builds = False  # JetPack's wheels: their versions do not carry the plan's variant (jetson-jp6-cu126)

    def plans_target(self, target: Any) -> bool:
        return bool(target.own_builds)  # a Jetson (on Linux aarch64): JetPack's wheel source

    def plan_target(self, view: MachineView, matrix: Matrix, request: Request, target: Any, cands: list[tuple[Release, Version]],
                    plan: Plan) -> Plan:
        from stackdoctor.accelerators.jetson.plan import resolve_jetson

        return resolve_jetson(view, matrix, request, target, cands, plan)

    # --- seamlow ---
    anonymous_names = ("nvidia", "jetson")  # its systems' default user and host names (redaction keeps them)
