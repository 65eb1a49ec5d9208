"""Apple probe: macOS version, chip, hardware architecture and Rosetta (Darwin only).

- ``sw_vers``: ProductName / ProductVersion / BuildVersion.
- ``sysctl -n machdep.cpu.brand_string``: the chip ("Apple M2 Max").
- ``sysctl -n hw.optional.arm64``: 1 on Apple silicon even for a process under Rosetta, where
  ``uname -m`` says x86_64.
- ``sysctl -n sysctl.proc_translated``: 1 translated (Rosetta), 0 native; the key is absent on
  Intel Macs, which counts as 0 (Apple, "About the Rosetta translation environment"; Chromium
  ``base/mac/rosetta.mm``; compat-facts.md §9).

Note this process's own translation state is asked, which is the Python running stackdoctor;
the target interpreter's own machine is the python probe's fact.
"""

from __future__ import annotations

from stackdoctor.model.facts import AppleFacts
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.probes.platform import parse_sw_vers
from stackdoctor.system import CommandResult

__all__ = ["parse_sw_vers", "parse_sysctl_flag", "parse_sysctl_value", "gather", "probe"]


def parse_sysctl_value(text: str) -> str | None:
    """The value printed by ``sysctl -n <key>`` (first non-empty line), or None.

    Shape (``sysctl -n machdep.cpu.brand_string``; illustration)::

        Apple M2 Max
    """
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return None


def parse_sysctl_flag(text: str) -> bool | None:
    """``sysctl -n`` of a 0/1 key as a bool; None for anything else."""
    value = parse_sysctl_value(text)
    if value == "1":
        return True
    if value == "0":
        return False
    return None


def _ran(res: CommandResult) -> bool:
    return res.status == "ok" and res.returncode is not None


def gather(ctx: ProbeContext) -> tuple[AppleFacts, str, str | None]:
    """(facts, probe status, error) for the machine ``ctx.system`` describes (skipped unless it is a Mac)."""
    facts = AppleFacts()
    sys_ = ctx.system
    host = sys_.host()
    if host.system != "Darwin":
        return facts, "skipped", None
    facts.is_macos = True
    src = facts.sources
    src["is_macos"] = host.label("system")
    errors: list[str] = []

    sw = sys_.run(["sw_vers"], timeout=ctx.timeout_s)
    if sw.ok:
        info = parse_sw_vers(sw.stdout)
        facts.macos_version = info.get("ProductVersion") or None
        facts.build = info.get("BuildVersion") or None
        if facts.macos_version:
            src["macos_version"] = "sw_vers"
        if facts.build:
            src["build"] = "sw_vers"
    else:
        errors.append(sw.describe_failure())

    brand = sys_.run(["sysctl", "-n", "machdep.cpu.brand_string"], timeout=ctx.timeout_s)
    if brand.ok:
        facts.chip = parse_sysctl_value(brand.stdout)
        if facts.chip:
            src["chip"] = "sysctl -n machdep.cpu.brand_string"
    elif brand.status == "absent":
        errors.append(brand.describe_failure())

    translated = sys_.run(["sysctl", "-n", "sysctl.proc_translated"], timeout=ctx.timeout_s)
    if translated.ok:
        facts.rosetta = parse_sysctl_flag(translated.stdout)
    elif _ran(translated):
        facts.rosetta = False  # key absent: an Intel Mac, never translated
    if facts.rosetta is not None:
        src["rosetta"] = "sysctl -n sysctl.proc_translated"

    arm = sys_.run(["sysctl", "-n", "hw.optional.arm64"], timeout=ctx.timeout_s)
    arm64 = parse_sysctl_flag(arm.stdout) if arm.ok else None
    machine = host.machine
    if arm64:
        facts.arch = "arm64"
        src["arch"] = "sysctl -n hw.optional.arm64"
    elif facts.rosetta is False and machine:
        # Not translated: this process runs natively, so its machine is the hardware's.
        facts.arch = machine
        src["arch"] = host.label("machine") + " (not translated)"
    status = "error" if errors and not (facts.macos_version or facts.chip) else "ok"
    return facts, status, "; ".join(e for e in errors if e) or None


def probe(ctx: ProbeContext) -> ProbeOutput:
    # A captured tree is a Mac only when its host.json says so: the live Mac's tools are not that machine's.
    facts, status, error = gather(ctx)
    return ProbeOutput(facts={"apple": facts}, status=status, error=error)
