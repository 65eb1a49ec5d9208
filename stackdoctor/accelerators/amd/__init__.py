"""AMD GPUs through ROCm (HIP): present when a discrete AMD GPU is seen, usable on Linux with amdgpu loaded."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from stackdoctor.accelerators.amd import library_code
from stackdoctor.accelerators.amd.fit import RocmHost, fit_rocm
from stackdoctor.accelerators.nvidia import CUDA_DEVICE, cuda_count, verify_cuda
from stackdoctor.kinds.base import Accelerator, BuildAsk, FitNotes, FitTarget, Say, TargetDevice, Verified, WhatIfValue
from stackdoctor.model.facts import Facts, GpuView, TorchFacts

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.kinds.for_lower import ErrorDialect  # --- seamlow ---
    from stackdoctor.matrix import Matrix, Release, Variant
    from stackdoctor.model.facts import Disagreement, ReconciledFacts, SeenValue  # --- reconcile ---
    from stackdoctor.model.plan import Request
    from stackdoctor.model.toolchain import BuildTools
    from stackdoctor.model.view import MachineView
    from stackdoctor.system import System

if TYPE_CHECKING:  # --- torchstatic ---
    from stackdoctor.binaries.binfmt import SectionTable, ZstdDecoder
    from stackdoctor.model.facts import LibraryInfo, TorchFiles


# --- install ---
def _override_gfx(value: str | None) -> str | None:
    """``HSA_OVERRIDE_GFX_VERSION=10.3.0`` -> ``gfx1030`` (major, minor, stepping in hex: 9.0.10 -> gfx90a)."""
    m = re.match(r"^(\d+)\.(\d+)\.(\d+)$", (value or "").strip())
    return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}" if m else None
# --- install ---


class Amd(Accelerator):
    name = "amd"
    rules = "stackdoctor.accelerators.amd.rules"  # its own findings (the seam: rules + texts)
    vendor = "amd"
    subject = "rocm"
    probe = "stackdoctor.accelerators.amd.probe"
    label = "AMD ROCm"
    backend = "rocm"
    build_kind = "rocm"
    variant_prefixes = ("rocm",)
    available_field = "cuda_available"  # ROCm builds answer through torch.cuda
    error_field = "cuda_error"
    runtime_families = ("rocm",)
    hide_var = "HIP_VISIBLE_DEVICES"
    hide_vars = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
    build_label = "ROCm"
    vendor_label = "AMD"
    torch_api = "cuda"  # ROCm builds answer through torch.cuda
    tool_witnesses = ("rocminfo", "rocm-smi", "amd-smi", "rocm_agent_enumerator")
    kernel_witness = "/sys/class/kfd"
    build_witness = "hip"  # torch.version.hip: a ROCm build
    runtime_wheels = ("rocm",)
    gpu_code = "hip"
    gpu_libraries = ("torch/lib/libtorch_hip.so",)
    build_witness_rank = -1  # read before CUDA's (a HIP build says nothing of CUDA, but hip wins if both were set)
    device = CUDA_DEVICE  # ROCm's torch reaches its GPUs as torch.cuda (HIP); RCCL answers as "nccl"

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def present(self, facts: Facts) -> bool:
        return any(not g.integrated for g in self.devices(facts))

    def integrated_served(self, view: MachineView, matrix: Matrix | None) -> list[str]:
        # an APU some ROCm build carries code for ("Radeon 8060S (gfx1151)"): Linux only (no ROCm torch elsewhere)
        if matrix is None or view.facts.platform.system not in (None, "Linux") or view.facts.platform.is_wsl:
            return []
        targets = {a.split(":", 1)[0] for r in matrix.releases for v in r.variants if v.kind == self.build_kind for a in (*v.gfx, *v.arch_list)}
        return [f"{g.name or 'AMD GPU'} ({g.gfx})" for g in view.devices(self.vendor) if g.integrated and g.gfx and g.gfx.split(":", 1)[0] in targets]

    # --- install ---
    gpu_code_library = "libtorch_hip.so"
    gpu_code_kind = "hip"  # offload bundles: read from a bounded copy
    conda_forge_build = False
    runtime_packages = ("rocm", "pytorch-triton-rocm", "triton-rocm")
    runtime_prefixes = ("rocm-sdk",)

    def gpu_code_read(self, read: Mapping[str, Any]) -> list[str]:
        return list(read.get("gfx") or [])

    def gpu_code_runs(self, gpu: GpuView, got: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """A code object for its gfx target, after the plan's ``HSA_OVERRIDE_GFX_VERSION``."""
        arch = _override_gfx(env.get("HSA_OVERRIDE_GFX_VERSION")) or ((gpu.gfx or "").split(":", 1)[0].lower() or None)
        if arch is None:
            return None, None
        return arch, "code object" if arch in {x.split(":", 1)[0].lower() for x in got} else None

    def planned_gpu_code(self, variant: Variant, platform: str | None) -> list[str]:
        return list(variant.gfx)
    # --- install ---

    def usable(self, facts: Facts) -> bool:
        p = facts.platform
        if p.system not in (None, "Linux") or p.is_wsl:
            return False
        return self.present(facts) and facts.rocm.amdgpu_loaded is not False

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        return [f"{g.index}: {g.name or '?'} ({g.gfx or '?'}{say('gpu_integrated') if g.integrated else ''})" for g in self.devices(facts)]

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        r = facts.rocm
        listed = [g for g in r.gpus if not (g.sources.get("index") or "").startswith("reconcile: ")]  # by ROCm's tools
        version = facts.reconciled.rocm_version.value  # the installed ROCm release, as reconcile chose it
        if not (version or listed):
            return None
        return f"ROCm {version or say('version_unknown')}" + ("" if r.amdgpu_loaded in (None, True) else say("driver_amdgpu_not_loaded"))

    # --- view ---
    def wrong_result_fix(self) -> str:
        return "result_rocm"

    def torch_count(self, torch: TorchFacts) -> int | None:
        return cuda_count(torch)

    def ok_name(self, g: GpuView) -> str | None:
        return g.name if g.name and g.name == g.gfx else f"{g.name or 'AMD GPU'} ({g.gfx or 'gfx?'})"
    # --- end view ---
    # --- resolve ---
    mixed_subsets = True

    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        return [TargetDevice(self.vendor, v.index, v.name, gfx=(v.gfx or "").split(":", 1)[0].lower() or None, integrated=v.integrated, uuid=v.uuid)
                for v in self.devices(facts) if v.witnesses != ["pci"]]

    def flag_devices(self, request: Request, matrix: Matrix) -> tuple[list[TargetDevice], list[str]]:
        return [TargetDevice(self.vendor, i, None, gfx=g.strip().lower()) for i, g in enumerate(request.gfx)], []  # --gfx gfx1100

    def gpu_name(self, name: str) -> bool:
        # AMD's GPU brands (--gpu "Radeon RX 7900 XTX", "Instinct MI300X", "MI250"); "AMD ..." names any
        return bool(re.match(r"^\s*(amd\b|radeon\b|instinct\b|mi\d{2,3}[a-z]?\b)", name, re.I))

    def select_devices(self, devices: list[TargetDevice], warnings: list[str]) -> tuple[list[TargetDevice], str | None]:
        return [g for g in devices if g.vendor != "intel"], None  # an Intel iGPU beside an AMD GPU: the ROCm build ignores it

    def fit(self, fit: FitNotes, release: Release, version: Version, variant: Variant, tag: str, target: FitTarget, matrix: Matrix,
            devices: Sequence[TargetDevice], auto: bool) -> None:
        # the host's ROCm user space and amdgpu, as fit_host() read them into the resolver's target
        fit_rocm(fit, release, variant, matrix, [g for g in devices if g.vendor == self.vendor], cast("RocmHost | None", target.hosts.get(self.name)))

    def installed_sees_device(self, torch: TorchFacts) -> bool | None:
        return torch.cuda_available  # ROCm builds answer through torch.cuda
    # --- end resolve ---
    # --- build ---
    build_switch = "USE_ROCM"
    builds_on_macos = False
    offers_source_build = True

    def build_targets(self, facts: Facts) -> list[str] | None:
        gfx = [(v.gfx or "").split(":", 1)[0].lower() for v in self.devices(facts) if v.gfx and not v.integrated and v.witnesses != ["pci"]]
        return gfx or None

    def build_arch_env(self, targets: list[str], *, ptx: bool) -> dict[str, tuple[str, str]]:
        return {"PYTORCH_ROCM_ARCH": (";".join(dict.fromkeys(targets)), "the AMD GPUs' gfx architectures")} if targets else {}

    def build_home_env(self, tools: Any) -> dict[str, tuple[str, str]]:
        if tools is not None and tools.rocm.path and tools.rocm.path.rstrip("/") != "/opt/rocm":
            return {"ROCM_PATH": (tools.rocm.path, "ROCm is not in /opt/rocm")}
        return {}

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        """ROCm at the matrix's minimum, on Linux (PyTorch builds for ROCm only there)."""
        rmin = ask.minimum("rocm")
        r = ask.tool("rocm", ask.tools.rocm if ask.tools else None, f"ROCm >= {rmin} (Linux only)" if rmin else "ROCm (Linux only)",
                     f"install ROCm ({ask.url('rocm') or 'AMD ROCm'}); one not in /opt/rocm is named by ROCM_PATH", ["amd", "build"],
                     ask.source("rocm"), rmin)
        if ask.os != "linux":
            r.status, r.fix = "missing", "ROCm builds are for Linux only"
        return [r]

    def build_steps(self, python: str) -> list[tuple[str, list[str]]]:
        return [("amd", [python, "tools/amd_build/build_amd.py"])]

    def build_label_of(self, cc: str | None, gfx: str | None) -> str | None:
        return gfx or None
    # --- end build ---
    # --- render ---
    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        return (f"ROCm/HIP {torch.hip}", True) if torch.hip else None

    def torch_versions(self, torch: TorchFacts) -> list[tuple[str, str]]:
        return [("HIP", torch.hip)] if torch.hip else []

    _DIFF_FIELDS = ("version", "hip_version", "kfd_present", "kfd_accessible", "amdgpu_loaded", "amdgpu_version", "hsa_override_gfx_version")
    _DIFF_GPU = ("name", "gfx", "integrated", "compute_units", "memory_total_mib")

    def compared(self, facts: Facts) -> dict[str, Any]:
        out: dict[str, Any] = {f"rocm.{name}": getattr(facts.rocm, name) for name in self._DIFF_FIELDS}
        out["torch.hip"] = facts.torch.hip
        out["rocm.gpu_count"] = len(facts.rocm.gpus)
        for g in facts.rocm.gpus:
            for name in self._DIFF_GPU:
                out[f"rocm.gpus[{g.index}].{name}"] = getattr(g, name)
        return out

    def diff_sections(self) -> dict[str, int]:
        return {"rocm": 10}

    matrix_counts = ((2, "rocm_overrides", "ROCm override(s)"),)
    variant_examples = ("rocm7.2",)

    # --- reconcile ---
    env_prefixes = ("HIP_", "HSA_", "ROCM_", "ROCR_")
    report_rank = 1

    def joined_gpus(self, facts: Facts, matrix: Matrix | None) -> list[GpuView]:
        from stackdoctor.accelerators.amd.witnesses import amd_gpus

        return amd_gpus(facts, matrix)

    def derive(self, facts: Facts, matrix: Matrix) -> None:
        from stackdoctor.accelerators.amd.witnesses import derive

        derive(facts, matrix)

    def reconciled(self, facts: Facts, rec: ReconciledFacts) -> dict[str, SeenValue]:
        from stackdoctor.accelerators.amd.witnesses import rocm_version

        rec.rocm_version = rocm_version(facts)
        return {}

    def publish(self, facts: Facts, view: MachineView, rec: ReconciledFacts) -> None:
        from stackdoctor.accelerators.amd.witnesses import publish

        publish(self, facts, rec)

    def gpu_disagreements(self, facts: Facts, g: GpuView, label: str) -> list[Disagreement]:
        from stackdoctor.accelerators.amd.witnesses import gpu_disagreements

        return gpu_disagreements(facts, g, label)

    def recognised(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        from stackdoctor.accelerators.amd.witnesses import RECOGNISED

        return RECOGNISED

    def tool_messages(self, facts: Facts) -> list[tuple[str, str]]:
        from stackdoctor.accelerators.amd.witnesses import tool_messages

        return tool_messages(facts)

    def counts_torch(self, torch: TorchFacts) -> bool:
        return bool(torch.cuda_available) and bool(torch.hip)

    pci_vendor = "0x1002"
    pci_devices_field = "amd_pci_devices"
    torch_version_fields = ("rocm",)
    static_arch_field = "gfx_list"
    triton_forks = ("pytorch-triton-rocm",)

    # --- rules ---

    def probe_findings(self, ctx: Any, status: str) -> None:
        """The ROCm tools that failed (rocminfo, amd-smi, rocm-smi): one warning each; a tool that is not installed is a
        fact, not a failure, and /dev/kfd trouble is rocm-kfd-permission's."""
        if status != "error":
            return
        for tool, err in sorted(ctx.view.facts.rocm.tool_errors.items()):
            if not err or "not installed" in err or self.tool_error_told(ctx, err):
                continue
            ctx.add(severity="warn", facts=[f"rocm.tool_errors.{tool}"], probe=tool, error=err, seconds="")

    def tool_error_told(self, ctx: Any, error: str) -> bool:
        return "kfd" in error.lower() and ctx.has("rocm-kfd-permission")

    def ok_driver(self, view: MachineView) -> str | None:
        return "amdgpu" if view.facts.rocm.amdgpu_loaded else None

    def ok_runtime(self, torch: TorchFacts) -> tuple[str, int | str] | None:
        return ("ROCm/HIP", torch.device_count if torch.device_count is not None else "?") if torch.cuda_available and torch.hip else None

    def installed_build(self, torch: TorchFacts) -> str | None:
        return f"ROCm {torch.hip}"

    def build_version_fact(self) -> str | None:
        return "torch.hip"

    def hidden_devices(self, ctx: Any) -> None:
        from stackdoctor.rules.helpers import visible_count

        env = ctx.view.facts.environment
        amd: Sequence[Any] = ctx.view.driven("amd")  # ROCm's tools' list and the GPUs the kernel's KFD topology or torch add
        for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
            if var in env and amd and visible_count(env[var], amd) == 0:
                ctx.add(facts=[f"environment.{var}", "rocm.gpus"], var=var, value=env[var], count=len(amd))
    # --- resolve ---
    what_if_flags = ("--gfx", "--rocm-userspace")
    what_if_values = (WhatIfValue("--rocm-userspace", "userspace", "VERSION", "What-if: the host's ROCm user space release (6.3.1). Implies --dry-run.",
                                  r"^\d{1,2}\.\d{1,2}(\.\d{1,3})?$", "--rocm-userspace {value} is not a ROCm release (expected like 6.3.1 or 7.2)."),)
    option_help = (("--gfx", "What-if AMD GPU arch gfxNNNN (repeatable). Implies --dry-run."),)

    def fit_host(self, view: MachineView, values: Mapping[str, str], what_if: bool) -> RocmHost | None:
        """The host's ROCm user space (the what-if's, else the reconciled release) and the loaded kernel driver's version
        (a what-if machine's kernel driver is not this one's: only its stated user space is known)."""
        if values.get("userspace"):
            return RocmHost(values["userspace"], "--rocm-userspace")
        if what_if:
            return None
        seen = view.runtime(self.name)
        rocm = view.facts.rocm
        return RocmHost(seen.value, seen.source, rocm.amdgpu_version, rocm.amdgpu_loaded)

    triton_packages = ("pytorch-triton-rocm",)
    library_code_sections = library_code.SECTIONS
    library_code_zstd = True
    learned_variant = r"rocm\d+\.\d+(\.\d+)?"

    def find_build_tools(self, system: System, tools: BuildTools, *, python: str, timeout_s: float) -> None:
        from stackdoctor.accelerators.amd.build_tools import rocm_tool

        tools.rocm = rocm_tool(system)

    def learned_code_into(self, row: dict[str, Any], code: Mapping[str, Any], platform: str) -> None:
        row["gfx"] = code["gfx"]

    def learned_code_from(self, row: dict[str, Any], known: Variant) -> None:
        row["gfx"] = list(known.gfx)

    def read_library_code(self, fh: Any, sec: Any, label: str) -> dict[str, Any]:
        return library_code.read_hip_code(fh, sec, label)

    def installed_library_code(self, info: Any, member: str) -> dict[str, Any]:
        return library_code.installed_hip_code(info, member)

    def runtime_release(self, variant: Variant) -> str | None:
        return variant.rocm

    # --- torchstatic ---
    static_code = "hip"
    torch_library_files = (("lib/libtorch_hip.so", True),)
    runtime_library_names = (("amdhip64", "hip"), ("miopen", "miopen"), ("rccl", "rccl"), ("rocblas", "rocblas"))

    def static_variant(self, files: TorchFiles) -> str | None:
        from stackdoctor.accelerators.amd import static

        return static.static_variant(files)

    def read_gpu_code(self, info: LibraryInfo, fh: Any, table: SectionTable, zstd: ZstdDecoder | None, deadline: float | None) -> None:
        from stackdoctor.accelerators.amd import static

        static.read_gpu_code(info, fh, table, zstd, deadline)

    def take_arch_list(self, files: TorchFiles, info: LibraryInfo) -> None:
        from stackdoctor.accelerators.amd import static

        static.take_arch_list(files, info)

    # --- seamlow ---
    gpu_ids = ("uuid",)
    runtime_key = "rocm_version"  # the installed ROCm release
    def runtime_error_dialect(self) -> ErrorDialect | None:
        from stackdoctor.accelerators.amd.runtime_errors import DIALECT

        return DIALECT
