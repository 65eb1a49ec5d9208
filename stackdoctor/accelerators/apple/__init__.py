"""Apple silicon GPUs through MPS: in macOS's default torch build; usable on arm64 when Python is not translated."""

from __future__ import annotations

from collections.abc import Sequence  # --- resolve ---
from typing import TYPE_CHECKING, Any  # --- resolve ---

from stackdoctor.kinds.base import Accelerator, DeviceSpec, FitTarget, Say, TargetDevice, Verified  # --- resolve ---
from stackdoctor.model.facts import Facts, GpuView, TorchFacts, is_mac

if TYPE_CHECKING:  # --- resolve ---
    from packaging.version import Version

    from stackdoctor.matrix import Matrix, Release
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.view import MachineView


class Apple(Accelerator):
    name = "apple"
    rules = "stackdoctor.accelerators.apple.rules"  # its own findings (the seam: rules + texts)
    vendor = "apple"
    subject = "apple"
    probe = "stackdoctor.accelerators.apple.probe"
    label = "Apple MPS"
    backend = "mps"
    build_kind = "cpu"  # MPS lives in macOS's default (PyPI) build
    variant_prefixes = ()
    available_field = "mps_available"
    hide_var = None
    # one device, "mps"; its collectives: tccl, Apple's Thunderbolt RDMA backend ("tccl" is also another vendor's
    # name, so Apple's librdma must be there too), else gloo on the CPU
    device = DeviceSpec(
        device="mps", torch_api="mps", label="MPS", indexed=False, available="backends.mps.is_available", name="Apple MPS",
        synchronize="mps.synchronize", fast_dtypes=("fp16",), backend="tccl", backend_check="is_tccl_available", library="rdma",
        init_device=True, reasons=(
            ("missing", "MPS device, but this torch has no tccl backend (PyTorch PR 189856 is not in it): gloo over TCP"),
            ("no_library", "tccl is registered but Apple's librdma.dylib is absent (macOS >= 26.2 with RDMA enabled needed): gloo over TCP"),
            ("ok", "tccl registered and librdma.dylib present")))
    build_label = "MPS"
    vendor_label = "Apple"
    torch_api = "backends.mps"

    def builds(self, variant: str | None) -> bool:
        return True  # MPS is in macOS's default build; no other build runs on a Mac's GPU

    def verify(self, v: Verified) -> tuple[bool, str]:
        return (True, "MPS is available") if v.mps_available else (False, "MPS is not available")

    def present(self, facts: Facts) -> bool:
        a = facts.apple
        return is_mac(facts) and (a.arch == "arm64" or (a.chip or "").startswith("Apple"))

    def usable(self, facts: Facts) -> bool:
        return self.present(facts) and not facts.apple.rosetta

    # --- install ---
    def verified_after(self, variant: str | None, facts: Facts) -> bool:
        return super().verified_after(variant, facts) or self.usable(facts)  # MPS is in every macOS build
    # --- install ---

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        return [facts.apple.chip] if facts.apple.is_macos and facts.apple.chip else []

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        return f"macOS {facts.apple.macos_version or '?'} (Metal)" if facts.apple.is_macos else None

    # --- view ---
    def torch_count(self, torch: TorchFacts) -> int | None:
        return 1 if torch.mps_available else None

    def gpus(self, facts: Facts) -> list[GpuView]:
        """Apple silicon's one GPU, as sysctl names the chip."""
        a = facts.apple
        if not (a.is_macos and a.chip and a.chip.startswith("Apple")):
            return []
        return [GpuView(vendor="apple", index=0, name=a.chip, integrated=True, witnesses=["sysctl"], sources={"name": a.sources.get("chip", "sysctl")})]
    # --- end view ---
    # --- resolve ---
    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        return []  # the Apple GPU is served by macOS's default build: the resolver's macOS path

    def claims(self, devices: Sequence[TargetDevice], target: FitTarget) -> bool:
        return False
    # --- end resolve ---
    # --- render ---
    device_example = "mps"

    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        return (say("runtime_mps"), False) if torch.mps_available else None

    def files_build_words(self, facts: Facts, say: Say) -> str | None:
        return say("runtime_macos_build") if facts.apple.is_macos else None

    def availability_words(self, torch: TorchFacts, say: Say) -> str | None:
        return say("md_mps_available") if torch.mps_available else None

    def compared(self, facts: Facts) -> dict[str, object]:
        out: dict[str, object] = {f"apple.{name}": getattr(facts.apple, name) for name in ("is_macos", "macos_version", "chip", "arch", "rosetta")}
        out["torch.mps_built"], out["torch.mps_available"] = facts.torch.mps_built, facts.torch.mps_available
        return out

    def diff_sections(self) -> dict[str, int]:
        return {"apple": 80}

    # --- reconcile ---
    report_rank = 2

    # --- rules ---

    def ok_unlisted(self, facts: Facts) -> list[str]:
        return [facts.apple.chip] if facts.apple.chip else []

    def ok_runtime(self, torch: TorchFacts) -> tuple[str, int | str] | None:
        return ("MPS", 1) if torch.mps_available else None

    def backend_built(self, torch: TorchFacts) -> bool:
        return torch.mps_built is not False
    # --- resolve ---
    clang_as_gcc = "Apple's Xcode tools"

    def host_machine(self, facts: Facts) -> str | None:
        return facts.apple.arch if facts.apple.rosetta is False else None  # the Mac's own CPU, read outside Rosetta

    def os_release(self, facts: Facts) -> str | None:
        return facts.apple.macos_version

    def plans_target(self, target: Any) -> bool:
        return bool(target.os == "macos")

    def plan_target(self, view: MachineView, matrix: Matrix, request: Request, target: Any, cands: list[tuple[Release, Version]],
                    plan: Plan) -> Plan:
        from stackdoctor.accelerators.apple.plan import resolve_macos

        return resolve_macos(view, matrix, request, target, cands, plan)
