"""Apple silicon GPUs through MPS: in macOS's default torch build; usable on arm64 when Python is not translated."""

from __future__ import annotations

from stackdoctor.accelerators.base import Accelerator, Say, Verified
from stackdoctor.facts import Facts


def is_mac(facts: Facts) -> bool:
    return facts.apple.is_macos or facts.platform.system == "Darwin"


def runs_x86(facts: Facts) -> bool:
    """macOS where the target Python runs x86_64 (an Intel Mac, or Rosetta on Apple silicon)."""
    if not is_mac(facts):
        return False
    a = facts.apple
    return bool(a.rosetta) or a.arch == "x86_64" or (facts.platform.machine == "x86_64" and a.arch != "arm64")


class Apple(Accelerator):
    name = "apple"
    vendor = "apple"
    subject = "apple"
    label = "Apple MPS"
    backend = "mps"
    build_kind = "cpu"  # MPS lives in macOS's default (PyPI) build
    variant_prefixes = ()
    available_field = "mps_available"
    hide_var = None
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
