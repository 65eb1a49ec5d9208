"""NVIDIA GPUs through CUDA: present when any witness sees an NVIDIA GPU, usable when a driver is known."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from stackdoctor.accelerators.nvidia import conda as nvidia_conda
from stackdoctor.accelerators.nvidia import library_code
from stackdoctor.accelerators.nvidia.fit import cannot_serve_cpu, fit_cuda, gpu_request_cc, impossible_cc
from stackdoctor.accelerators.nvidia.pins import parse_cuda_requirement, variant_from_cuda_pins
from stackdoctor.core.versions import mm, release, same_release
from stackdoctor.kinds.base import Accelerator, BuildAsk, DeviceSpec, FitNotes, FitTarget, Say, TargetDevice, Verified, device_summary
from stackdoctor.model.facts import Facts, GpuView, TorchFacts
from stackdoctor.reconcile import user_space_driver

if TYPE_CHECKING:
    from packaging.version import Version

    from stackdoctor.accelerators.nvidia.fit import CudaTarget
    from stackdoctor.kinds.for_lower import ErrorDialect  # --- seamlow ---
    from stackdoctor.matrix import CondaInfo, CondaRelease, Matrix, Release, Variant
    from stackdoctor.model.facts import Disagreement, KernelResult, ReconciledFacts, SeenValue  # --- reconcile ---
    from stackdoctor.model.plan import Request
    from stackdoctor.model.toolchain import BuildTools
    from stackdoctor.model.view import MachineView
    from stackdoctor.system import System

if TYPE_CHECKING:  # --- torchstatic ---
    from stackdoctor.binaries.binfmt import SectionTable, ZstdDecoder
    from stackdoctor.model.facts import LibraryInfo, TorchFiles


# torch.cuda's devices, for the workers: NVIDIA's, and ROCm's and Jetson's, which torch also reaches as "cuda"
CUDA_DEVICE = DeviceSpec(
    device="cuda", torch_api="cuda", label="CUDA", synchronize="cuda.synchronize", sync_takes_device=True, set_device="cuda.set_device",
    backend="nccl", backend_check="is_nccl_available", fall_through=True,  # no NCCL: the next kind, then gloo on the CPU
    fast_dtypes=({"dtype": "bf16", "when": "cuda.is_bf16_supported"}, "fp16", {"dtype": "tf32", "capability": 8, "unless": "version.hip"}),
    tf32_switch="backends.cuda.matmul.allow_tf32", conv_tf32="backends.cudnn.allow_tf32")


def verify_cuda(v: Verified) -> tuple[bool, str]:
    """torch.cuda after an install (CUDA, ROCm and Jetson builds all answer through it): a tensor added on the GPU."""
    if v.cuda_available and v.cuda_ok is not False:
        return True, f"runs on {v.device_name or 'the GPU'}"
    why = v.cuda_error or (v.warnings[0] if v.warnings else "torch.cuda.is_available() is False")
    level = getattr(v, "driver_api_version", None)
    build = getattr(v, "cuda", None)
    if level == 0:  # judged from the value torch's runtime gave, whatever its sentence
        return False, f"the GPU is not usable from it: no NVIDIA driver answers (cudaDriverGetVersion() = 0): {why}"
    # a newer CUDA major than the driver's is refused; a newer minor of the same major runs (minor-version
    # compatibility), as accelerators/nvidia_rules.py judges driver-too-old
    if isinstance(level, int) and level > 0 and release(build) and release(build)[0] > level // 1000:
        return False, (f"the GPU is not usable from it: the NVIDIA driver runs CUDA {level // 1000}.{(level % 1000) // 10} at most, "
                       f"this build needs CUDA {mm(build)}: {why}")
    return False, f"the GPU is not usable from it: {why}"


# --- view ---
def cuda_count(torch: TorchFacts) -> int | None:
    """torch.cuda's device count where torch.cuda.is_available() (CUDA, ROCm and Jetson builds all answer through it)."""
    if not torch.cuda_available:
        return None
    return torch.device_count if torch.device_count is not None else len([d for d in torch.devices if d.kind == "cuda"])
# --- end view ---


class Nvidia(Accelerator):
    name = "nvidia"
    rules = "stackdoctor.accelerators.nvidia.rules"  # its own findings (the seam: rules + texts)
    vendor = "nvidia"
    subject = "nvidia"
    probe = "stackdoctor.accelerators.nvidia.probe"
    more_probes = (("cuda_toolkit", "stackdoctor.accelerators.nvidia.toolkit"),)
    label = "NVIDIA CUDA"
    backend = "cuda"
    build_kind = "cuda"
    variant_prefixes = ("cu",)
    available_field = "cuda_available"
    error_field = "cuda_error"
    runtime_families = ("cuda", "cuda12", "cuda13")
    hide_var = "CUDA_VISIBLE_DEVICES"
    build_label = "CUDA"
    vendor_label = "NVIDIA"
    torch_api = "cuda"
    tool_witnesses = ("nvml", "nvidia-smi")
    kernel_witness = "/proc/driver/nvidia/gpus"
    build_witness = "cuda"  # torch.version.cuda
    runtime_wheels = ("nvidia-", "cuda-toolkit")
    gpu_code = "cuda"
    gpu_libraries = ("torch/lib/libtorch_cuda.so", "torch/lib/torch_cuda.dll")
    device = CUDA_DEVICE
    peaks = True  # peaks.yaml names NVIDIA GPUs; its probe gives the SM count and clock the FP32-lanes rule needs

    def what_if_arch(self, text: str, matrix: Matrix) -> str | None:
        return gpu_request_cc(text, matrix)

    def present(self, facts: Facts) -> bool:
        return bool(self.devices(facts))

    def reached(self, view: MachineView) -> bool:
        # the driver's own CUDA level (a tool, or torch's "found version NNNN") proves a driver even where no tool lists a GPU
        return super().reached(view) or view.runtime("nvidia").value is not None

    # --- install ---
    gpu_code_library = "libtorch_cuda.so"
    gpu_code_kind = "cuda"
    gpu_code_headers_only = True
    conda_forge_build = True
    gpu_code_missing = " and no PTX at or below it"

    def runtime_family(self, name: str) -> str | None:
        """CUDA 12 wheels end in ``-cu12`` (``nvidia-cuda-runtime-cu12``); CUDA 13 ones drop the suffix
        (``nvidia-cublas``) or end in ``-cu13``, plus ``cuda-toolkit``; ``nvidia-ml-py`` (NVML bindings) is not one."""
        if name.startswith("nvidia-ml-py") or name == "pynvml":
            return None
        if name.startswith("nvidia-"):
            return "cuda12" if name.endswith("-cu12") else "cuda13"
        return {"cuda-toolkit": "cuda13", "triton": "cuda"}.get(name)

    def families_for(self, variant: str) -> set[str] | None:
        m = re.fullmatch(r"cu(\d+)", variant)
        if not m:
            return None
        major = int(m.group(1)[:2]) if len(m.group(1)) >= 3 else int(m.group(1)[:1])
        return {"cuda", "cuda12"} if major == 12 else {"cuda", "cuda13"} if major >= 13 else {"cuda"}

    def gpu_code_read(self, read: Mapping[str, Any]) -> list[str]:
        return list(read.get("arch_list") or []) + list(read.get("ptx") or [])

    def gpu_code_words(self, read: Mapping[str, Any]) -> str:
        sms, ptx = list(read.get("arch_list") or []), list(read.get("ptx") or [])
        return " ".join(sms + ptx) + (" (no PTX)" if not ptx else "") if sms or ptx else "no GPU code"

    def gpu_code_runs(self, gpu: GpuView, got: Sequence[str], env: Mapping[str, str]) -> tuple[str | None, str | None]:
        """A cubin the arch rules let its compute capability run, or PTX at or below it (:func:`stackdoctor.matrix.arch_match`)."""
        from stackdoctor.matrix import arch_match

        cc = gpu.compute_capability
        if not cc:
            return None, None
        return f"sm_{cc.replace('.', '')}", arch_match(list(got), cc)

    def planned_gpu_code(self, variant: Variant, platform: str | None) -> list[str]:
        return list(variant.arch_for(platform))
    # --- install ---

    def verify(self, v: Verified) -> tuple[bool, str] | None:
        return verify_cuda(v)

    def usable(self, facts: Facts) -> bool:
        """A GPU and a driver that some witness reports (tools, NVML, the kernel module, torch's own messages)."""
        if facts.platform.system == "Darwin" or facts.apple.is_macos or facts.jetson.is_jetson:
            return False
        return self.present(facts) and facts.reconciled.nvidia_driver.value is not None

    def device_lines(self, facts: Facts, say: Say) -> list[str]:
        if facts.jetson.is_jetson:
            return []  # a Jetson's iGPU is the Jetson's line
        out = []
        for g in self.devices(facts):
            cc = f"sm_{g.compute_capability.replace('.', '')}" if g.compute_capability else "sm_?"
            mem = f", {g.memory_total_mib // 1024} GiB" if g.memory_total_mib else ""
            out.append(f"{g.index}: {g.name or '?'} ({cc}{mem})")
        return out

    def driver_line(self, facts: Facts, say: Say) -> str | None:
        drv = facts.reconciled.nvidia_driver
        n = facts.nvidia
        if drv.value:
            ceiling = facts.reconciled.cuda_driver_version.value
            return f"NVIDIA {drv.value}" + (say("driver_supports_cuda", cuda=ceiling) if ceiling else "")
        if n.smi_state and n.smi_state not in ("absent", "ok"):
            return f"NVIDIA: {n.smi_message or n.smi_state}"
        return None

    # --- view ---
    def wrong_result_fix(self) -> str:
        return "result"

    def torch_count(self, torch: TorchFacts) -> int | None:
        return cuda_count(torch)

    def named(self, facts: Facts) -> str:
        names = [g.name or f"GPU{g.index}" for g in self.devices(facts) if not g.integrated]
        pci = [d for d in facts.platform.nvidia_pci_devices if (d.class_id or "").lower().startswith("0x03")]
        return ", ".join(names or [d.name or d.device_id for d in pci]) or "-"  # no driver lists one: the PCI bus's names

    def ok_name(self, g: GpuView) -> str | None:
        return (g.name or "NVIDIA GPU") + (f" (sm_{g.compute_capability.replace('.', '')})" if g.compute_capability else "")

    def driver_note(self, facts: Facts) -> str | None:
        n = facts.nvidia
        if facts.reconciled.nvidia_driver.value and n.smi_state and n.smi_state not in ("ok", "absent"):
            return f"nvidia-smi: {n.smi_state}"
        return None
    # --- end view ---
    # --- resolve ---
    mixed_subsets = True
    separate_runtime_wheels = True  # CUDA builds pull the CUDA runtime as nvidia-* wheels of their own

    def target_devices(self, facts: Facts) -> list[TargetDevice]:
        # the GPUs a driver lists (a GPU only the PCI bus shows is no device torch can use); cc derived once, in reconcile
        return [TargetDevice(self.vendor, v.index, v.name, cc=v.compute_capability, uuid=v.uuid) for v in self.devices(facts) if v.witnesses != ["pci"]]

    def unlisted(self, facts: Facts) -> tuple[int, str | None]:
        view = self.devices(facts)
        unlisted = [v for v in view if v.witnesses == ["pci"]]
        if len(unlisted) < len(view) or not unlisted or facts.jetson.is_jetson:
            return 0, None
        smi = facts.nvidia.smi_state
        return len(unlisted), f"{len(unlisted)} NVIDIA GPU(s) on the PCI bus but the driver did not list them" + (f" (nvidia-smi: {smi})" if smi else "")

    def flag_devices(self, request: Request, matrix: Matrix) -> tuple[list[TargetDevice], list[str]]:
        devices, notes = [], []
        for i, g in enumerate(request.gpus):  # --gpu: a GPU name, or its compute capability (sm_90, 9.0)
            cc = gpu_request_cc(g, matrix)
            devices.append(TargetDevice(self.vendor, i, g if not re.match(r"^(sm_?\d+|\d+\.\d)$", g.strip(), re.I) else None, cc=cc))
            if cc is None:
                notes.append(f"--gpu {g}: unknown GPU name, its compute capability is not in the matrix")
        return devices, notes

    def flag_error(self, request: Request, matrix: Matrix) -> str | None:
        return next((err for g in request.gpus if (err := impossible_cc(g, matrix))), None)

    def claims(self, devices: Sequence[TargetDevice], target: FitTarget) -> bool:
        # a driver and no GPU listed (a what-if --driver, a container without the tools): a CUDA build is still planned
        return super().claims(devices, target) or bool(target.driver and not devices and target.os != "macos")

    def select_devices(self, devices: list[TargetDevice], warnings: list[str]) -> tuple[list[TargetDevice], str | None]:
        others = [g for g in devices if g.vendor == "amd"]
        if others:
            warnings.append(f"AMD GPU(s) {device_summary(others)} are left out: one torch build serves one vendor")
            return [g for g in devices if g.vendor == self.vendor], None
        return [g for g in devices if g.vendor != "intel"], None

    def fit(self, fit: FitNotes, release: Release, version: Version, variant: Variant, tag: str, target: FitTarget, matrix: Matrix,
            devices: Sequence[TargetDevice], auto: bool) -> None:
        # the resolver's Target carries its driver's CUDA level too (resolve.machine reads it from NVIDIA's facts)
        fit_cuda(fit, release, version, variant, tag, cast("CudaTarget", target), matrix, [g for g in devices if g.vendor == self.vendor], auto)

    def cannot_serve_cpu(self, release: Release, version: Version, variant: Variant, tag: str, matrix: Matrix,
                         devices: Sequence[TargetDevice]) -> str | None:
        return cannot_serve_cpu(release, version, variant, tag, matrix, [g for g in devices if g.vendor == self.vendor and g.cc])

    def hide_env(self, kept: Sequence[TargetDevice]) -> dict[str, str]:
        uuids = [g.uuid for g in kept if g.uuid]
        if len(uuids) == len(kept):
            return {"CUDA_VISIBLE_DEVICES": ",".join(uuids)}
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(str(g.index) for g in kept)}

    def chosen_reason(self, version: Version, variant: str, what: str, requested: bool, target: FitTarget) -> str | None:
        if not target.driver:
            return None
        return (
            f"torch {version} {variant}: the newest {'requested ' if requested else ''}release and CUDA build that runs on {what} with driver {target.driver}"
            + (" (the Windows driver, as WSL2 sees it)" if target.wsl else "")
        )

    def installed_sees_device(self, torch: TorchFacts) -> bool | None:
        return torch.cuda_available
    # --- end resolve ---
    # --- build ---
    build_switch = "USE_CUDA"
    builds_on_macos = False
    offers_source_build = True

    def build_targets(self, facts: Facts) -> list[str] | None:
        ccs = [v.compute_capability for v in self.devices(facts) if v.compute_capability and v.witnesses != ["pci"]]
        return ccs or None

    def build_arch_env(self, targets: list[str], *, ptx: bool) -> dict[str, tuple[str, str]]:
        if not targets:
            return {}
        why = "the GPUs' compute capabilities" + (" (+PTX: the newest also as PTX, for newer GPUs)" if ptx else "")
        return {"TORCH_CUDA_ARCH_LIST": (arch_list(targets, ptx=ptx), why)}

    def build_home_env(self, tools: Any) -> dict[str, tuple[str, str]]:
        if tools is not None and tools.cuda_home and tools.cuda_home.rstrip("/") != "/usr/local/cuda":
            return {"CUDA_HOME": (tools.cuda_home, f"the toolkit of {tools.nvcc.path}")}
        return {}

    def build_prerequisites(self, ask: BuildAsk) -> list[Any]:
        """nvcc (a toolkit the driver runs), cuDNN, NVTX: PyTorch's README for a CUDA build."""
        tools = ask.tools
        matrix_url = ask.url("cuda") or "PyTorch's support matrix"
        nvcc = ask.tool("nvcc", tools.nvcc if tools else None, f"a CUDA toolkit from the support matrix ({matrix_url}), its nvcc on PATH",
                        f"install a CUDA toolkit the release supports ({matrix_url}) and put its bin/ on PATH (e.g. export PATH=/usr/local/cuda-12.8/bin:$PATH)",
                        ["build"], ask.source("cuda"))
        if tools is not None and tools.nvcc.version:
            nvcc.found = f"CUDA {tools.nvcc.version}"
            drv = ask.facts.reconciled.cuda_driver_version.value
            if drv and ask.at_least(drv, tools.nvcc.version) is False:
                nvcc.status = "missing"
                nvcc.fix = (f"the driver runs CUDA {drv} code, nvcc is CUDA {tools.nvcc.version}: what it builds would not run here; "
                            f"install a toolkit no newer than CUDA {drv}, or a newer driver")
            elif drv:
                nvcc.found += f" (the driver runs CUDA {drv})"
        cmin = ask.minimum("cudnn")
        cudnn = ask.tool("cudnn", tools.cudnn if tools else None, f"cuDNN >= {cmin} (its headers: cudnn_version.h)" if cmin else "cuDNN",
                         f"install cuDNN {cmin} or newer for this CUDA ({ask.url('cudnn') or 'the cuDNN support matrix'})",
                         ["build"], ask.source("cudnn"), cmin)
        nvtx_fix = ("run the CUDA installer again and check Nsight Compute (NVTX), after Visual Studio" if ask.os == "windows"
                    else "install the toolkit's NVTX headers (include/nvtx3, the cuda-nvtx package)")
        nvtx = ask.tool("nvtx", tools.nvtx if tools else None, "NVTX (the CUDA toolkit's include/nvtx3)", nvtx_fix, ["build"], ask.source("nvtx"))
        return [nvcc, cudnn, nvtx]

    def build_label_of(self, cc: str | None, gfx: str | None) -> str | None:
        return "sm_" + cc.replace(".", "") if cc else None
    # --- end build ---
    # --- render ---
    device_example = "cuda:0"
    fleet_runtime = "cuda"
    witness_keys = ("w_driver", "w_cuda")  # "NVIDIA driver", "driver's newest CUDA"

    def fleet_node(self, facts: Facts) -> tuple[str | None, str | None, str | None]:
        return (facts.nvidia.driver_version, facts.torch.cuda or facts.torch.hip,
                ", ".join(sorted({g.name or "?" for g in facts.nvidia.gpus})) or None)

    def toolkit(self, facts: Facts) -> tuple[str, str | None] | None:
        tk = facts.cuda_toolkit
        return (f"nvcc {tk.nvcc_version}", tk.nvcc_path) if tk.nvcc_version else None

    def runtime_words(self, torch: TorchFacts, say: Say) -> tuple[str, bool] | None:
        if not torch.cuda:
            return None
        parts = [say("runtime_cuda_bundled", version=torch.cuda)]
        cudnn, nccl = torch.cudnn_version or torch.runtime_versions.get("cudnn"), torch.nccl_version or torch.runtime_versions.get("nccl")
        if cudnn:
            parts.append(f"cuDNN {cudnn}")
        if nccl:
            parts.append(f"NCCL {nccl}")
        return say("list_sep").join(parts), True

    def torch_versions(self, torch: TorchFacts) -> list[tuple[str, str]]:
        return [("CUDA", torch.cuda)] if torch.cuda else []

    def availability_words(self, torch: TorchFacts, say: Say) -> str | None:
        return f"torch.cuda.is_available(): {torch.cuda_available}" if torch.cuda_available is not None else None

    _DIFF_FIELDS = ("driver_version", "cuda_driver_version", "kernel_module_version", "kernel_module_flavor", "nvml_version", "smi_state",
                    "smi_version", "nvml_state")
    _DIFF_GPU = ("name", "compute_capability", "memory_total_mib", "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "power_limit_w",
                 "mig_mode", "persistence_mode", "driver_model", "sm_count")

    def compared(self, facts: Facts) -> dict[str, Any]:
        out: dict[str, Any] = {f"nvidia.{name}": getattr(facts.nvidia, name) for name in self._DIFF_FIELDS}
        out["platform.container_nvidia_devices"] = facts.platform.container_nvidia_devices
        out["cuda_toolkit.nvcc_version"] = facts.cuda_toolkit.nvcc_version
        out["torch.cuda"], out["torch.cuda_available"] = facts.torch.cuda, facts.torch.cuda_available
        out["nvidia.gpu_count"] = len(facts.nvidia.gpus)
        for g in facts.nvidia.gpus:
            for name in self._DIFF_GPU:
                out[f"nvidia.gpus[{g.index}].{name}"] = getattr(g, name)
        for tk in facts.cuda_toolkit.toolkits:
            out[f"cuda_toolkit.toolkits.{tk.nvcc_version or tk.version_json or '?'}"] = True
        return out

    def diff_sections(self) -> dict[str, int]:
        return {"nvidia": 0, "cuda_toolkit": 50}

    matrix_counts = ((0, "cuda", "CUDA row(s)"), (1, "gpus", "GPU name(s)"))
    variant_examples = ("cu126", "cu130")

    def matrix_lines(self, data: Mapping[str, Any]) -> list[str]:
        if not data.get("cuda"):
            return []
        lines = ["CUDA: minimum driver Linux / Windows (minor-version floor Linux / Windows)"]
        for ver, row in data["cuda"].items():
            lines.append(
                f"  {ver:<5} {row['min_driver_linux'] or '?'} / {row['min_driver_windows'] or 'unknown'}"
                f" ({row['minor_compat_floor_linux'] or '?'} / {row['minor_compat_floor_windows'] or '?'})"
            )
        return lines

    # --- reconcile ---
    env_prefixes = ("CUDA_", "NVIDIA_")
    report_rank = 0

    def joined_gpus(self, facts: Facts, matrix: Matrix | None) -> list[GpuView]:
        from stackdoctor.accelerators.nvidia.witnesses import nvidia_gpus

        return nvidia_gpus(facts, matrix)

    def derive(self, facts: Facts, matrix: Matrix) -> None:
        from stackdoctor.accelerators.nvidia import witnesses

        witnesses.unpublish(facts)
        witnesses.weigh_gpus(facts)

    def reconciled(self, facts: Facts, rec: ReconciledFacts) -> dict[str, SeenValue]:
        from stackdoctor.accelerators.nvidia.witnesses import chosen_values

        return chosen_values(facts, rec)

    def publish(self, facts: Facts, view: MachineView, rec: ReconciledFacts) -> None:
        from stackdoctor.accelerators.nvidia.witnesses import publish

        publish(self, facts, view, rec)

    def driver_disagreements(self, rec: ReconciledFacts) -> list[Disagreement]:
        from stackdoctor.accelerators.nvidia.witnesses import driver_disagreements

        return driver_disagreements(rec)

    def gpu_disagreements(self, facts: Facts, g: GpuView, label: str) -> list[Disagreement]:
        from stackdoctor.accelerators.nvidia.witnesses import gpu_disagreements

        return gpu_disagreements(g, label)

    def recognised(self) -> tuple[tuple[re.Pattern[str], str], ...]:
        from stackdoctor.accelerators.nvidia.witnesses import RECOGNISED

        return RECOGNISED

    def evidence_values(self, groups: Mapping[str, str | None]) -> dict[str, str]:
        from stackdoctor.accelerators.nvidia.witnesses import evidence_values

        return evidence_values(groups)

    def torch_messages(self, facts: Facts) -> list[tuple[str, str]]:
        return [("torch.cuda_error", facts.torch.cuda_error)] if facts.torch.cuda_error else []

    def counts_torch(self, torch: TorchFacts) -> bool:
        return bool(torch.cuda_available) and not torch.hip

    def count_note(self, facts: Facts, witness: str) -> str | None:
        from stackdoctor.accelerators.nvidia.witnesses import count_note

        return count_note(facts, witness)

    def peak(self, facts: Facts, rec: ReconciledFacts, r: KernelResult, matrix: Matrix) -> tuple[float | None, str]:
        from stackdoctor.accelerators.nvidia.witnesses import peak

        return peak(self, facts, rec, r, matrix)

    def user_space_driver(self, view: MachineView) -> str | None:
        from stackdoctor.accelerators.nvidia.witnesses import user_space_driver

        return user_space_driver(view)

    pci_vendor = "0x10de"
    pci_devices_field = "nvidia_pci_devices"

    def container_devices(self, container: str) -> tuple[str, tuple[str, ...]] | None:
        if container == "apptainer":  # the host's /dev is bound in: its GPU access is the driver's libraries `--nv` binds
            return "container_nvidia_devices", ("/.singularity.d/libs/libcuda.so.1", "/.singularity.d/libs/libcuda.so")
        return "container_nvidia_devices", ("/dev/nvidia0", "/dev/nvidiactl")

    arch_list_sources = ("torch.cuda.get_arch_list()", "torch._C._cuda_getArchFlags()")
    # --- torchstatic ---
    static_code = "cuda"
    torch_library_files = (
        ("lib/libtorch_cuda.so", True),
        ("lib/libtorch_cuda_cu.so", True),  # torch 1.9-1.12
        ("lib/libtorch_cuda_cpp.so", False),
        ("lib/libtorch_cuda_linalg.so", False),
        ("lib/torch_cuda.dll", True),
        ("lib/torch_cuda_cu.dll", True),
        ("lib/torch_cuda_cpp.dll", False),
    )
    runtime_library_names = (("cudnn", "cudnn"), ("nccl", "nccl"), ("cublas", "cublas"), ("cudart", "cuda-runtime"), ("nvrtc", "cuda-nvrtc"),
                             ("nvjitlink", "nvjitlink"), ("cusparselt", "cusparselt"))
    runtime_library_dirs = ("nvidia",)  # site-packages/nvidia/<package>/lib (bin/ on Windows)
    site_interest = ("cuda-", "pynvml", "cupy")  # its other toolkit wheels, the NVML bindings, CuPy

    def runtime_name(self, dist: str) -> str | None:
        from stackdoctor.accelerators.nvidia import static

        return static.runtime_name(dist)

    def static_variant(self, files: TorchFiles) -> str | None:
        from stackdoctor.accelerators.nvidia import static

        return static.static_variant(files)

    def read_gpu_code(self, info: LibraryInfo, fh: Any, table: SectionTable, zstd: ZstdDecoder | None, deadline: float | None) -> None:
        from stackdoctor.accelerators.nvidia import static

        static.read_gpu_code(info, fh, table, deadline)

    def take_arch_list(self, files: TorchFiles, info: LibraryInfo) -> None:
        from stackdoctor.accelerators.nvidia import static

        static.take_arch_list(files, info)

    # --- rules ---

    def collective_error_fix(self, error: str) -> str | None:
        return "cuda" if "needs a cuda device" in error or "_cuda" in error else None

    def probe_findings(self, ctx: Any, status: str) -> None:
        """nvidia-smi that hung, failed, or answered that the driver cannot talk to the GPU (``cuda-err``; on WSL the
        host's driver answers for it, so that is no finding there)."""
        n = ctx.view.facts.nvidia
        if status == "timeout" and n.smi_state == "timeout":
            ctx.add(severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state"], error=n.smi_message or "")
        if status != "error":
            return
        if n.smi_state == "error" and n.smi_message and not ctx.has("probe-failed"):
            ctx.add(severity="warn", detail="smi", fix="smi", facts=["nvidia.smi_state", "nvidia.smi_message"], error=n.smi_message)
        elif n.smi_state == "cuda-err" and not ctx.view.facts.platform.is_wsl:
            ctx.add(severity="warn", detail="cuda_err", fix="cuda_err", facts=["nvidia.smi_state"])

    def source_conflicts(self, ctx: Any) -> None:
        """The user-space driver against the kernel module (unless their libraries already mismatch, or WSL, where the
        host's driver answers), and any value its witnesses read differently (``nvidia.observed``)."""
        f = ctx.view
        n, p = f.facts.nvidia, f.facts.platform
        user = user_space_driver(f)
        kmod = f.chosen("nvidia.kernel_module_version")
        if not ctx.has("driver-library-mismatch") and not p.is_wsl and user and kmod.value:
            if not same_release(user, kmod.value):
                ctx.add(
                    detail="module",
                    fix="module",
                    facts=["nvidia.driver_version", "nvidia.kernel_module_version"],
                    user=user,
                    user_source=n.sources.get("driver_version", "NVML") if n.driver_version else f.driver("nvidia").source,
                    kernel=kmod.value,
                    kernel_source=kmod.source or "/sys/module/nvidia/version",
                )
        for key, by_src in sorted(n.observed.items()):
            if key.endswith("_raw") or len(by_src) < 2:
                continue
            values = [v for v in by_src.values() if v]
            if all(same_release(values[0], v) for v in values[1:]):
                continue
            ctx.add(
                detail="observed",
                fix="observed",
                facts=[f"nvidia.observed.{key}"],
                key=key,
                values="; ".join(f"{src}: {val}" for src, val in sorted(by_src.items())),
            )

    def ok_driver(self, view: MachineView) -> str | None:
        drv = view.driver("nvidia").value
        return f"NVIDIA {drv} (CUDA {view.runtime('nvidia').value or '?'})" if drv else None

    def ok_runtime(self, torch: TorchFacts) -> tuple[str, int | str] | None:
        return ("CUDA", torch.device_count if torch.device_count is not None else "?") if torch.cuda_available and not torch.hip else None

    def installed_build(self, torch: TorchFacts) -> str | None:
        return f"CUDA {torch.cuda}"

    def build_version_fact(self) -> str | None:
        return "torch.cuda"

    def compute_capable(self, view: MachineView) -> list[GpuView]:
        return list(view.devices("nvidia"))

    def stale_runtimes(self, view: MachineView) -> list[str]:
        """The NVIDIA runtime wheels of another CUDA major beside the build's own (``nvidia-cublas-cu11`` beside -cu12)."""
        from stackdoctor.rules.helpers import variant_name

        t = view.facts.torch
        families: dict[str, list[str]] = {}
        for dist in sorted(t.distributions):
            m = re.match(r"^(nvidia-[a-z0-9-]+?)-cu(\d+)$", dist)
            if m:
                families.setdefault(m.group(1), []).append(m.group(2))
        major = (t.cuda or "").split(".")[0]
        if not major:
            vm = re.fullmatch(r"cu(\d+)\d", variant_name(view) or "")  # cu128 -> 12
            major = vm.group(1) if vm else ""
        return sorted(f"{lib}-cu{cu}" for lib, cus in families.items() if len(cus) > 1 for cu in cus if cu != major) if major else []

    def arch_list_call(self) -> str | None:
        return "torch.cuda.get_arch_list()"

    def conda_runtime_packages(self) -> tuple[str, ...]:
        return ("cudatoolkit", "cudnn", "nccl", "pytorch-cuda", "cuda-runtime", "cuda-cudart", "cuda-libraries", "cuda-toolkit",
                "libcublas", "libcusparse", "libnvjitlink")  # fmt: skip

    def pip_runtime_prefix(self) -> str | None:
        return "nvidia-"

    def same_build_level(self, variant: Any, torch: TorchFacts) -> bool | None:
        return variant.cuda == mm(torch.cuda) if variant.cuda else None

    def driver_wants_build(self, view: MachineView) -> bool:
        """Its driver or its CUDA level is known, or torch's words prove a driver (not a Jetson's nor a Mac's)."""
        from stackdoctor.rules.helpers import answered_with_error

        return bool(
            view.driver("nvidia").value
            or view.runtime("nvidia").value
            or any(e.proves in ("driver-too-old", "driver-cuda-level") or answered_with_error(e) for e in view.evidence)  # torch's words prove a driver
        ) and not view.facts.jetson.is_jetson and not view.facts.apple.is_macos
    # --- resolve ---
    what_if_flags = ("--gpu", "--driver")
    option_help = (("--driver", "What-if NVIDIA driver version. Implies --dry-run."),
                   ("--ptx", "--from-source: add +PTX to the newest GPU arch in TORCH_CUDA_ARCH_LIST."))
    heaviest_build_files = "CUDA"

    def initialised_runtime(self, torch: TorchFacts) -> str | None:
        return torch.cuda if torch.cuda_available and torch.cuda and not torch.hip else None  # a ROCm build answers torch.cuda too
    not_runtime_wheels = ("nvidia-ml-py",)  # NVML's bindings bundle nothing
    library_code_sections = library_code.SECTIONS
    learned_variant = r"cu\d{2,3}"
    unread_code_fields = ("arch_list", "arch_by_platform")

    def learned_code_into(self, row: dict[str, Any], code: Mapping[str, Any], platform: str) -> None:
        library_code.cuda_code_into(row, code, platform)

    def learned_code_from(self, row: dict[str, Any], known: Variant) -> None:
        library_code.cuda_code_from(row, known)

    def read_library_code(self, fh: Any, sec: Any, label: str) -> dict[str, Any]:
        return library_code.read_cuda_code(fh, sec, label)

    def installed_library_code(self, info: Any, member: str) -> dict[str, Any]:
        return library_code.installed_cuda_code(info, member)

    def runtime_release(self, variant: Variant) -> str | None:
        return variant.cuda

    def default_build_requires(self, requires: Iterable[str]) -> tuple[str, str] | None:
        cuda = parse_cuda_requirement(requires)
        return (cuda, f"the CUDA {int(cuda[2:-1])}.{cuda[-1]} runtime") if cuda else None

    def variant_from_pins(self, pins: Mapping[str, str]) -> str | None:
        return variant_from_cuda_pins(pins)

    conda_libraries = nvidia_conda.CONDA_CUDA_LIBS

    def conda_build(self, release: CondaRelease, subdir: str, view: MachineView, matrix: Matrix, driver: str | None,
                    reasons: list[str]) -> str | None:
        return nvidia_conda.cuda_build(release, subdir, view, matrix, driver, reasons)

    def conda_specs(self, info: CondaInfo, release: CondaRelease, runtime: str) -> list[str]:
        return nvidia_conda.cuda_specs(info, release, runtime)

    def conda_selection(self, info: CondaInfo, runtime: str, view: MachineView, hypothetical: bool) -> tuple[list[str], dict[str, str], list[str]]:
        return nvidia_conda.cuda_selection(info, runtime, view, hypothetical)

    def conda_forge_only(self, reasons: list[str], variant: str) -> None:
        nvidia_conda.cpu_only(reasons, variant)

    def bad_driver_error(self, value: str) -> str:
        return f"--driver {value} is not an NVIDIA driver version (expected like 550.54.14 or 580)."

    def no_driver_error(self, gpu: str) -> str:
        return f"--gpu {gpu}: this machine has no NVIDIA driver to assume; add --driver VERSION to plan a CUDA build."

    def unlisted_reason(self, count: int) -> tuple[str, str]:
        return (f"{count} NVIDIA GPU(s) are on the PCI bus but no working NVIDIA driver lists them, so no CUDA build can be checked or chosen",
                "install or repair the NVIDIA driver (nvidia-smi must list the GPU), then resolve again")

    def find_build_tools(self, system: System, tools: BuildTools, *, python: str, timeout_s: float) -> None:
        from stackdoctor.accelerators.nvidia.build_tools import find_cuda_tools

        find_cuda_tools(system, tools, python=python, timeout_s=timeout_s)

    # --- seamlow ---
    gpu_ids = ("uuid", "serial")
    driver_key = "nvidia_driver"
    runtime_key = "cuda_driver_version"  # the newest CUDA the driver runs
    chosen_keys = ("nvidia.kernel_module_version", "nvidia.nvml_version", "nvidia.driver_library_version")
    def runtime_error_dialect(self) -> ErrorDialect | None:
        from stackdoctor.accelerators.nvidia.runtime_errors import DIALECT

        return DIALECT


def arch_list(ccs: list[str], *, ptx: bool = False) -> str:
    """``TORCH_CUDA_ARCH_LIST``: the compute capabilities, lowest first, once each; ``+PTX`` on the newest when asked."""
    uniq = sorted(set(ccs), key=lambda c: tuple(int(x) for x in c.split(".")))
    if ptx and uniq:
        uniq[-1] += "+PTX"
    return ";".join(uniq)
