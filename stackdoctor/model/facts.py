"""Facts: what the probes found, as plain typed data.

Every subject has one dataclass; :class:`Facts` holds them all. They serialise to the
JSON report with :func:`to_data` and load back with :func:`from_data` (unknown keys are
ignored, missing keys take their defaults), so a report replays anywhere.

The keys listed in the README's "report contract" are public: add freely, never rename.
What is absent is ``None`` or an empty list, never a missing key. Where a value came from
is recorded beside it in the subject's ``sources`` mapping (fact name -> source, e.g.
``"driver_version": "nvml:nvmlSystemGetDriverVersion"``).
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Literal, Union

from stackdoctor.model.links import NetInterface as NetInterface  # the subject's facts, named here too
from stackdoctor.model.links import ThunderboltFacts as ThunderboltFacts
from stackdoctor.model.links import ThunderboltPort as ThunderboltPort

# Closed sets of the report contract (the JSON Schema lists their values).
Severity = Literal["ok", "warn", "fail"]
ProbeState = Literal["ok", "error", "timeout", "skipped"]
Vendor = Literal["nvidia", "amd", "intel", "apple"]
BuildKind = Literal["cuda", "rocm", "xpu", "cpu"]  # what a torch wheel is built for (MPS lives in macOS's default build)
Backend = Literal["cuda", "rocm", "mps", "xpu", "cpu"]  # what torch runs on

# ---------------------------------------------------------------------------- platform


@dataclass
class PlatformFacts:
    system: str | None = None  # "Linux" | "Darwin" | "Windows"
    machine: str | None = None  # "x86_64" | "aarch64" | "arm64" | "AMD64"
    os_id: str | None = None  # os-release ID: "ubuntu"
    os_name: str | None = None  # "Ubuntu 22.04.4 LTS" / "macOS 15.3" / "Windows 11"
    os_version: str | None = None  # "22.04" / "15.3" / "10.0.22631"
    kernel: str | None = None  # uname -r
    hostname: str | None = None
    libc: str | None = None  # "glibc" | "musl" | None
    glibc_version: str | None = None  # "2.35"
    is_wsl: bool = False
    wsl_version: int | None = None  # 1 | 2
    container: str | None = None  # "docker" | "podman" | "kubernetes" | "containerd" | "lxc" | "apptainer" | None
    container_nvidia_devices: bool | None = None  # NVIDIA runtime passed /dev/nvidia* in
    nvidia_pci_devices: list[PciDevice] = field(default_factory=list)
    amd_pci_devices: list[PciDevice] = field(default_factory=list)
    cpu_count: int | None = None
    cpu_model: str | None = None
    memory_total_mib: int | None = None
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class PciDevice:
    """A display controller on the PCI bus (``/sys/bus/pci/devices``)."""

    address: str  # "0000:01:00.0"
    vendor_id: str  # "0x10de"
    device_id: str  # "0x2684"
    class_id: str  # "0x030000"
    driver: str | None = None  # bound kernel driver: "nvidia", "amdgpu", "i915", "xe", "nouveau"
    name: str | None = None


# ---------------------------------------------------------------------------- python


@dataclass
class PythonFacts:
    executable: str | None = None
    version: str | None = None  # "3.11.7"
    implementation: str | None = None  # "cpython"
    free_threaded: bool = False
    abiflags: str | None = None
    platform_tag: str | None = None  # most specific accepted platform tag
    tags: list[str] = field(default_factory=list)  # accepted wheel tags, most preferred first
    env_kind: str | None = None  # "venv" | "conda" | "system"
    env_prefix: str | None = None
    pip_version: str | None = None
    uv_version: str | None = None
    uv_path: str | None = None
    # the rule that chose the target (stackdoctor.pipeline.which_python.RULES): "--python" | "VIRTUAL_ENV" | "CONDA_PREFIX" | ".venv" | "PATH" | "self"
    selected_by: str | None = None
    error: str | None = None
    unfinished_install: str | None = None  # a killed `stackdoctor install`'s journal in env_prefix: "phase install: torch 2.11.0+cpu -> 2.12.0+cpu"
    install_live: str | None = None  # that journal's install still runs: "process 4242, phase install" (its owner alive, same start time)
    install_unprinted: list[str] = field(default_factory=list)  # the lines the last install could not print (<env>/.stackdoctor-unprinted.json)
    install_backups: dict[str, int] = field(default_factory=dict)  # a committed install's backup left in env_prefix (stopped after `done:`): path -> bytes
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- nvidia


@dataclass
class NvidiaGpu:
    index: int
    name: str | None = None
    uuid: str | None = None
    compute_capability: str | None = None  # "8.9"
    memory_total_mib: int | None = None
    bus_id: str | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    power_limit_w: float | None = None
    mig_mode: str | None = None  # "Enabled" | "Disabled" | None
    persistence_mode: str | None = None  # "Enabled" | "Disabled"
    driver_model: str | None = None  # Windows: "WDDM" | "TCC" | "MCDM"
    serial: str | None = None
    sm_count: int | None = None
    max_sm_clock_mhz: int | None = None
    ecc_uncorrected: int | None = None
    retired_pages_pending: bool | None = None
    throttle_reasons: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # field -> NVML/tool error that left it unknown
    sources: dict[str, str] = field(default_factory=dict)
    # every witness's value of each field, by source: {"name": {"nvml": "NVIDIA H200", "nvidia-smi --query-gpu": ...}}.
    # The probe records them all; stackdoctor.reconcile weighs them into the fields above (reconcile.GPU_WITNESS_ORDER)
    observed: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class NvidiaProcGpu:
    """One GPU as the loaded kernel module lists it: ``/proc/driver/nvidia/gpus/<bus>/information``.

    Readable without nvidia-smi or NVML (a container started without the ``utility`` capability still
    sees procfs), so it names the GPUs when the user-space tools are absent.
    """

    bus_id: str | None = None  # "Bus Location" (else the directory name): "0000:62:00.0"
    name: str | None = None  # "Model": "NVIDIA H100 80GB HBM3"
    uuid: str | None = None  # "GPU UUID" (None when the GPU was not initialised: "GPU-????????-...")
    device_minor: int | None = None  # "Device Minor": N of /dev/nvidiaN
    video_bios: str | None = None
    excluded: bool | None = None  # "GPU Excluded" / older "Blacklisted"
    source: str | None = None  # the file read: "/proc/driver/nvidia/gpus/0000:62:00.0/information"


@dataclass
class NvidiaFacts:
    driver_version: str | None = None  # "550.54.14" (user-space: NVML / nvidia-smi)
    cuda_driver_version: str | None = None  # "12.4": the newest CUDA this driver runs
    kernel_module_version: str | None = None  # loaded kernel module (/proc, /sys)
    kernel_module_flavor: str | None = None  # "open" | "proprietary"
    nvml_version: str | None = None
    # the user-space driver's version as its library files are named (libcuda.so.550.90.07,
    # libnvidia-ml.so.550.90.07): a witness that needs no working NVML (driver-library-mismatch)
    driver_library_version: str | None = None
    gpus: list[NvidiaGpu] = field(default_factory=list)  # the user-space tools' GPUs (NVML, nvidia-smi)
    proc_gpus: list[NvidiaProcGpu] = field(default_factory=list)  # the kernel module's: /proc/driver/nvidia/gpus/*
    # How nvidia-smi / NVML answered. state: ok | absent | no-driver | lib-mismatch |
    # no-devices | cuda-err | timeout | error
    smi_state: str | None = None
    smi_path: str | None = None
    smi_exit_code: int | None = None
    smi_message: str | None = None  # verbatim failure line
    nvml_state: str | None = None  # ok | absent | no-driver | lib-mismatch | error | skipped
    nvml_error: str | None = None
    libcuda_paths: list[str] = field(default_factory=list)  # where libcuda.so was found (WSL shadowing)
    smi_version: str | None = None  # nvidia-smi's own version ("NVIDIA-SMI 545.46"); differs from the driver in WSL
    # every value seen for a system-level fact, by source: {"driver_version": {"nvml": "550.54.14", "nvidia-smi": ...}}
    observed: dict[str, dict[str, str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- cuda toolkit


@dataclass
class CudaToolkit:
    path: str  # the toolkit root or the nvcc path
    nvcc_version: str | None = None  # "12.4" (release) ...
    nvcc_build: str | None = None  # "V12.4.131"
    version_json: str | None = None  # version.json "cuda" -> "12.4.1"
    found_via: str | None = None  # "PATH" | "CUDA_HOME" | "CUDA_PATH" | "/usr/local/cuda*"


@dataclass
class CudaToolkitFacts:
    nvcc_version: str | None = None  # the nvcc that a build would use (PATH first, then CUDA_HOME)
    nvcc_path: str | None = None
    cuda_home: str | None = None
    toolkits: list[CudaToolkit] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- rocm


@dataclass
class RocmGpu:
    index: int
    name: str | None = None  # marketing name: "AMD Radeon RX 7600"
    gfx: str | None = None  # "gfx1102"
    integrated: bool = False
    uuid: str | None = None
    compute_units: int | None = None
    memory_total_mib: int | None = None
    bus_id: str | None = None  # "0000:03:00.0" (rocm-smi --showhw BUS)
    device_id: str | None = None  # "0x7480" (rocm-smi --showhw DID)
    smi_gfx_version: str | None = None  # rocm-smi's "GFX VER" verbatim (KFD rendering, e.g. "gfx11002")
    node: int | None = None  # KFD topology node id (rocminfo "Node:", amd-smi list NODE_ID)
    sources: dict[str, str] = field(default_factory=dict)  # field -> the tool that gave it


@dataclass
class KfdNode:
    """A GPU node of the kernel's KFD topology: ``/sys/class/kfd/kfd/topology/nodes/<node>/properties``.

    What the amdgpu kernel driver itself says about a compute GPU, readable without any ROCm tool
    (a container without rocminfo, a replayed tree).
    """

    node: int  # the directory name
    gfx_target_version: int | None = None  # KFD's encoding: major*10000 + minor*100 + stepping (100301)
    gfx: str | None = None  # the LLVM target it encodes: "gfx1031"
    vendor_id: str | None = None  # "0x1002"
    device_id: str | None = None  # "0x73df"
    simd_count: int | None = None  # > 0 for a GPU (0 for a CPU node)
    bus_id: str | None = None  # "0000:c2:00.0", from domain and location_id (PCI bus << 8 | devfn)
    drm_render_minor: int | None = None  # /dev/dri/renderD<N>
    local_mem_size: int | None = None  # bytes of dedicated VRAM KFD reports (0 on APUs)
    source: str | None = None  # the file read


@dataclass
class RocmFacts:
    version: str | None = None  # "6.3.3"
    hip_version: str | None = None
    gpus: list[RocmGpu] = field(default_factory=list)  # ROCm's tools (rocminfo, rocm_agent_enumerator, rocm-smi, amd-smi)
    kfd_nodes: list[KfdNode] = field(default_factory=list)  # the kernel's KFD topology (GPU nodes only)
    kfd_present: bool | None = None
    kfd_accessible: bool | None = None
    kfd_error: str | None = None
    amdgpu_loaded: bool | None = None
    amdgpu_version: str | None = None  # the loaded amdgpu's declared version (amdgpu-dkms: "6.10.5"); the in-tree one has none
    hsa_override_gfx_version: str | None = None
    hip_visible_devices: str | None = None
    rocr_visible_devices: str | None = None
    tool_errors: dict[str, str] = field(default_factory=dict)  # tool -> failure sentence
    # every value seen for a system-level fact, by source: {"version": {"file:/opt/rocm/.info/version": "6.3.3",
    # "amd-smi version": "6.3.3"}, "hip_version": {"hipconfig --version": "6.3.42133"}}
    observed: dict[str, dict[str, str]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- apple / intel / jetson


@dataclass
class AppleFacts:
    is_macos: bool = False
    macos_version: str | None = None  # "15.3.1"
    build: str | None = None
    chip: str | None = None  # "Apple M2 Max"
    arch: str | None = None  # hardware: "arm64" | "x86_64"
    rosetta: bool | None = None  # Python runs translated (sysctl.proc_translated)
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class IntelGpu:
    address: str
    device_id: str
    name: str | None = None  # derived: the matrix's family name for device_id
    driver: str | None = None  # "i915" | "xe"
    discrete: bool | None = None  # derived: None where the matrix does not list device_id
    xpu: bool | None = None  # derived: PyTorch's XPU build targets this family (None: unknown family)


@dataclass
class IntelFacts:
    gpus: list[IntelGpu] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class JetsonFacts:
    is_jetson: bool = False
    l4t_release: str | None = None  # "36.4.3"
    jetpack: str | None = None  # "6.2"
    model: str | None = None  # /proc/device-tree/model
    cuda: str | None = None  # JetPack's CUDA
    board: str | None = None
    raw: str | None = None
    l4t_core_version: str | None = None  # dpkg nvidia-l4t-core "32.3.1-20191209225816"
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- thunderbolt


# ---------------------------------------------------------------------------- torch


@dataclass
class TorchDevice:
    index: int
    name: str | None = None
    capability: str | None = None  # "8.9" (CUDA) / gcnArchName (ROCm)
    total_memory_mib: int | None = None
    kind: str = "cuda"  # "cuda" | "xpu" | "mps"
    uuid: str | None = None  # torch.cuda.get_device_properties(i).uuid
    bus_id: str | None = None  # "0000:01:00.0" from the properties' pci_domain_id / pci_bus_id / pci_device_id


@dataclass
class TorchLibrary:
    """The GPU code one of torch's shared libraries carries, read from the file (never loaded).

    ``stackdoctor.probes.torch_static``: the CUDA fat binary (``.nv_fatbin``), the ROCm clang offload
    bundles (``.hip_fatbin``) or the SYCL images of ``libtorch_cuda.so`` / ``libtorch_hip.so`` /
    ``libtorch_xpu.so`` (``torch_cuda.dll`` ...)."""

    path: str
    kind: str  # "cuda" | "hip" | "xpu"
    primary: bool = False  # carries the build's arch list (libtorch_cuda.so, libtorch_hip.so, ...)
    format: str | None = None  # "elf64-le" | "pe" | ...
    section: str | None = None  # ".nv_fatbin" | ".hip_fatbin" | "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen"
    section_size: int | None = None
    containers: int = 0  # fat-binary containers / offload bundles (about one per translation unit)
    entries: int = 0  # cubins + PTX / bundle entries
    compressed: int = 0  # compressed entries (CUDA) / bundles (HIP)
    archs: dict[str, int] = field(default_factory=dict)  # arch -> containers that carry it
    arch_list: list[str] = field(default_factory=list)  # in at least half of the containers: the build's list
    arch_extra: list[str] = field(default_factory=list)  # in fewer: per-file extras (sm_90a ...)
    images: list[str] = field(default_factory=list)  # XPU: "spir64_gen (zstd)", "spir64" ...
    error: str | None = None  # what could not be read, in one sentence
    read_ms: float | None = None


# the static read of torch's files (stackdoctor.probes.torch_static), before it joins TorchFacts
@dataclass
class LibraryInfo:
    """The GPU code one of torch's libraries carries (as :func:`stackdoctor.probes.torch_static.read_library` reads it)."""

    path: str
    kind: str  # "cuda" | "hip" | "xpu"
    primary: bool = False  # carries the build's arch list
    format: str | None = None  # "elf64-le" | "pe" | ...
    section: str | None = None  # ".nv_fatbin" | ".hip_fatbin" | "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen" ...
    section_size: int | None = None
    containers: int = 0  # fat-binary containers / offload bundles (about one per translation unit)
    entries: int = 0  # cubins + PTX / bundle entries (host entries included)
    compressed: int = 0  # compressed entries (CUDA) / compressed bundles (HIP)
    archs: dict[str, int] = field(default_factory=dict)  # arch -> containers that carry it
    arch_list: list[str] = field(default_factory=list)  # in at least half the containers
    arch_extra: list[str] = field(default_factory=list)  # in fewer (per-file extras: sm_90a ...)
    images: list[str] = field(default_factory=list)  # xpu: "spir64_gen (zstd)", "spir64" ...
    error: str | None = None
    read_ms: float | None = None


@dataclass
class TorchFiles:
    """What the files of the installed torch say; every value's source is in ``sources``
    (:class:`stackdoctor.probes.torch_static.StaticTorch` adds the predicted load of its libraries)."""

    installed: bool = False
    location: str | None = None  # the torch package directory
    version: str | None = None  # "2.14.1+cu130"
    variant: str | None = None  # "cu130" | "cpu" | "rocm7.2" | "xpu"
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None
    rocm: str | None = None
    xpu: str | None = None
    git_version: str | None = None
    debug: bool | None = None
    arch_list: list[str] = field(default_factory=list)  # torch.cuda.get_arch_list() notation, sorted
    arch_extra: list[str] = field(default_factory=list)  # per-file extra archs of the primary library
    gfx_list: list[str] = field(default_factory=list)  # ROCm targets ("gfx942", "gfx90a:xnack-"), sorted
    libraries: list[LibraryInfo] = field(default_factory=list)
    runtime: dict[str, str] = field(default_factory=dict)  # "cudnn" -> "9.24.0.43", "nccl" -> "2.30.7"
    runtime_libraries: dict[str, str] = field(default_factory=dict)  # "libcudnn.so.9" -> its path
    runtime_bytes: dict[str, int] = field(default_factory=dict)  # "nvidia-cublas-cu12" -> bytes installed (its RECORD's sizes)
    distributions: dict[str, str] = field(default_factory=dict)  # "torch" -> "2.14.1" (dist-info)
    # every distribution of interest (OF_INTEREST, numpy, pip), normalised name -> version, the first in import order
    site_distributions: dict[str, str] = field(default_factory=dict)
    # what torch, its companions and torch-npu require (their METADATA's Requires-Dist lines, as written)
    requires: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # files that are there but could not be read ("path: why"): a FIFO, mode 000, 0 bytes, truncated, not ELF
    unreadable: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # "2.13.0 (.../torch-2.13.0.dist-info)" when torch is installed twice
    sources: dict[str, str] = field(default_factory=dict)


@dataclass
class LinkProblem:
    """One thing the dynamic loader would fail on when ``import torch`` loads torch's libraries, predicted from
    the files by :mod:`stackdoctor.binaries.linkage` (never loaded). ``kind``: "missing" (a needed library found on no
    search path), "unloadable" (found, but not a loadable ELF file), "version" (a symbol version the provider does not
    define), "symbol" (a symbol the provider does not define), "shadowed" (a copy outside the wheel is
    found before the wheel's own), "stub" (the ``libcuda.so.1`` the CUDA runtime would open is the toolkit's stub)."""

    kind: str
    library: str  # the needed name ("libcudnn.so.9") / the provider's path (version, symbol, shadowed)
    needed_by: str  # the path of the object that needs it
    symbol: str | None = None
    version: str | None = None
    detail: str | None = None  # shadowed: the wheel's copy; unloadable: why; stub: how it was found (ld_library_path, ldcache ...)
    found_version: str | None = None  # shadowed / stub: the version of the copy the loader takes, with the file that says it
    wheel_version: str | None = None  # shadowed: the version of the wheel's own copy, with the file that says it


@dataclass
class TorchFacts:
    installed: bool = False
    version: str | None = None  # as installed, local suffix kept: "2.13.0+cpu"
    variant: str | None = None  # "cpu" | "cu130" | "rocm6.2.4" | "xpu"
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None  # torch.version.hip
    debug: bool | None = None
    cuda_available: bool | None = None
    cuda_error: str | None = None  # exact text when unavailable (warning or exception), every line of it on one
    # the driver's CUDA level as torch's runtime reads it (torch._C._cuda_getDriverVersion(), cudaDriverGetVersion's
    # encoding: 12080 = CUDA 12.8; 0 = no driver); None where not asked (no import, not a CUDA build, torch lacks it)
    driver_api_version: int | None = None
    device_count: int | None = None
    devices: list[TorchDevice] = field(default_factory=list)
    arch_list: list[str] = field(default_factory=list)  # the build's arch list: torch's own when imported, else the files' (sources say which)
    cudnn_version: str | None = None
    cudnn_error: str | None = None  # what torch.backends.cudnn.version() raised ("cuDNN version incompatibility: ..."), on one line
    nccl_version: str | None = None
    mps_built: bool | None = None
    mps_available: bool | None = None
    xpu_available: bool | None = None
    xpu_error: str | None = None
    # an accelerator plug-in's torch.<torch_api>.is_available() (kinds.torch_questions()), by kind name;
    # the built-in kinds' answers are the fields above
    available: dict[str, bool] = field(default_factory=dict)
    available_errors: dict[str, str] = field(default_factory=dict)  # kind -> why torch gave no answer, or said False
    distributed_available: bool | None = None
    distributed_backends: list[str] = field(default_factory=list)
    torchvision_version: str | None = None
    torchaudio_version: str | None = None
    triton_version: str | None = None
    numpy_version: str | None = None  # from numpy's distribution metadata (not imported)
    config: dict[str, str] = field(default_factory=dict)  # torch.__config__.show() essentials
    location: str | None = None
    import_error: str | None = None  # the exception when import failed (its whole text on one line)
    import_error_kind: str | None = None  # "exception" | "timeout" | "crash"
    distributions: dict[str, str] = field(default_factory=dict)  # installed dists of interest -> version
    # torch's, its companions' and torch-npu's Requires-Dist lines, as their METADATA writes them (read from the files)
    requires: dict[str, list[str]] = field(default_factory=dict)
    conda_packages: list[str] = field(default_factory=list)  # conda-meta names of interest
    # --- how torch was read. True: `import torch` ran in the target and succeeded; False: torch was only
    # read from its files, because no import was asked (`check --no-kernels`) or because it failed
    # (then import_error says how); None: no torch installed.
    imported: bool | None = None
    # --- from torch's files (stackdoctor.probes.torch_static; never imported), beside what the import says
    git_version: str | None = None  # torch.version.git_version
    rocm: str | None = None  # torch.version.rocm (newer ROCm builds)
    xpu: str | None = None  # torch.version.xpu (XPU builds)
    arch_list_files: list[str] = field(default_factory=list)  # the GPU code in the primary library: "sm_90" / "gfx942"
    arch_extra: list[str] = field(default_factory=list)  # per-file extra targets in that library ("sm_90a"): not the build's list
    arch_list_torch: list[str] = field(default_factory=list)  # torch's own list (get_arch_list(), else _cuda_getArchFlags())
    runtime_versions: dict[str, str] = field(default_factory=dict)  # "cudnn" -> "9.24.0.43" (runtime wheels, library names)
    runtime_libraries: dict[str, str] = field(default_factory=dict)  # "libcudnn.so.9" -> its path
    runtime_bytes: dict[str, int] = field(default_factory=dict)  # "nvidia-cublas-cu12" -> bytes its files take (sum of its RECORD)
    import_warnings: list[str] = field(default_factory=list)  # what `import torch` warned ("UserWarning: Failed to initialize NumPy: ...")
    libraries: list[TorchLibrary] = field(default_factory=list)  # torch's GPU libraries as read
    static_errors: list[str] = field(default_factory=list)  # what the read of torch's files could not read
    static_unreadable: list[str] = field(default_factory=list)  # files there but unreadable ("path: why"): FIFO, mode 000, truncated
    duplicate_installs: list[str] = field(default_factory=list)  # "2.13.0 (<site>/torch-2.13.0.dist-info)" when torch is installed twice
    # the predicted load of torch's libraries (stackdoctor.binaries.linkage): None when not checked (no torch, not Linux)
    linkage_checked: bool | None = None
    linkage: list[LinkProblem] = field(default_factory=list)
    linkage_note: str | None = None  # what the prediction did not check (time budget, caps)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- kernels


@dataclass
class Verification:
    """What the import of torch in the target found right after an install (``_worker/sd_verify.py``; judged by
    :mod:`stackdoctor.install.verify` and each kind's ``Accelerator.verify``): the built-in kinds' answers, and each
    plug-in kind's in ``available``."""

    imported: bool = False
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    cuda_available: bool | None = None
    cuda_ok: bool | None = None
    cuda_error: str | None = None  # torch's whole error text, every line of it on one (bounded)
    driver_api_version: int | None = None  # torch._C._cuda_getDriverVersion() where CUDA was unusable: 12080 = CUDA 12.8, 0 = no driver
    device_name: str | None = None
    mps_available: bool | None = None
    xpu_available: bool | None = None
    available: dict[str, bool] = field(default_factory=dict)  # a plug-in kind's torch.<torch_api>.is_available(), by kind
    available_errors: dict[str, str] = field(default_factory=dict)  # kind -> why torch gave no answer, or said False
    warnings: list[str] = field(default_factory=list)
    import_warnings: list[str] = field(default_factory=list)  # what `import torch` itself warned (check's torch.import_warnings)
    error: str | None = None
    location: str | None = None

    @classmethod
    def read(cls, data: dict[str, Any]) -> Verification:
        """What ``_worker/sd_verify.py`` printed, each value of the type it should have (anything else: unknown)."""
        def strs(value: object) -> dict[str, str]:
            return {str(k): str(x) for k, x in value.items()} if isinstance(value, dict) else {}

        plain = {f.name: data.get(f.name) for f in fields(cls) if f.type in ("str | None", "bool | None") and f.name != "location"}
        said = data.get("available")
        return cls(
            **plain,
            imported=bool(data.get("imported")),
            driver_api_version=data.get("driver_api_version") if type(data.get("driver_api_version")) is int else None,
            available={str(k): x for k, x in said.items() if isinstance(x, bool)} if isinstance(said, dict) else {},
            available_errors=strs(data.get("available_errors")),
            warnings=[w for w in data.get("warnings") or [] if isinstance(w, str)],
            import_warnings=[w for w in data.get("import_warnings") or [] if isinstance(w, str)],
            location=data.get("file"),
        )


@dataclass
class KernelResult:
    kernel: str  # "matmul" | "conv" | "compile" | "allreduce"
    device: str  # "cpu" | "cuda:0" | "mps" | "xpu:0"
    dtype: str | None = None
    size: str | None = None  # "1024x1024x1024"
    ok: bool = False
    max_error: float | None = None
    tolerance: float | None = None
    time_s: float | None = None  # per call: the median of ``runs`` timed runs
    tflops: float | None = None  # the median run's rate
    runs: int | None = None  # timed runs behind time_s / tflops (each of several calls)
    tflops_min: float | None = None  # the slowest run's rate
    tflops_max: float | None = None  # the fastest run's rate
    peak_tflops: float | None = None
    percent_of_peak: float | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class KernelFacts:
    ran: bool = False
    mode: str | None = None  # "quick" | "full"
    results: list[KernelResult] = field(default_factory=list)
    error: str | None = None  # the kernel process failed as a whole
    signal: str | None = None
    stderr_tail: str | None = None
    allreduce: dict[str, Any] | None = None


# ---------------------------------------------------------------------------- reconciled (derived, never probed)


@dataclass
class GpuView:
    """One GPU as every witness that saw it describes it (``stackdoctor.reconcile``).

    The same GPU seen by the driver's tools, the PCI bus and torch is one ``GpuView``;
    ``witnesses`` names every source that saw it, ``sources`` where each value kept came from.
    """

    vendor: str  # Vendor: "nvidia" | "amd" | "intel" | "apple"
    index: int  # the index its vendor's tools give it (nvidia-smi, rocminfo, PCI order)
    name: str | None = None
    compute_capability: str | None = None  # NVIDIA: "8.9"
    gfx: str | None = None  # AMD: "gfx1100"
    integrated: bool = False
    memory_total_mib: int | None = None
    uuid: str | None = None
    bus_id: str | None = None  # "0000:01:00.0"
    torch_index: int | None = None  # the index torch gives it, when torch sees it
    witnesses: list[str] = field(default_factory=list)
    sources: dict[str, str] = field(default_factory=dict)
    # every witness's value for each field: {"name": {"nvidia-smi": "Tesla P4", "/proc/driver/nvidia/gpus": "Tesla P4"}}
    seen: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class SeenValue:
    """A value several witnesses can report: the one kept, where it came from, and what each witness said."""

    value: str | None = None
    source: str | None = None
    witnesses: dict[str, str] = field(default_factory=dict)


@dataclass
class Evidence:
    """A recognised message (a torch warning, a tool's error line) and what it proves."""

    proves: str  # the finding code it supports: "driver-too-old", "gpu-arch-unsupported", ...
    source: str  # where it was read: "torch.cuda_error", "kernels.results[0].error", "rocm.tool_errors.rocminfo"
    line: str  # the message, quoted
    values: dict[str, str] = field(default_factory=dict)  # what it says: {"driver_cuda": "12.4"}


@dataclass
class Disagreement:
    """Two witnesses of the same fact that do not agree."""

    subject: str  # "nvidia.driver_version" | "nvidia.cuda_driver_version" | "gpu.count" | "gpu.compute_capability" | "gpu.gfx"
    values: dict[str, str] = field(default_factory=dict)  # witness -> what it said
    note: str | None = None  # which GPU, or what the disagreement is about
    explained_by: str | None = None  # what accounts for it, when something does: "CUDA_VISIBLE_DEVICES=0", "MIG", "container"


@dataclass
class ReconciledFacts:
    """One view of the machine joined from every witness (``stackdoctor.reconcile``); recomputed on replay."""

    gpus: list[GpuView] = field(default_factory=list)
    nvidia_driver: SeenValue = field(default_factory=SeenValue)  # user-space driver version
    cuda_driver_version: SeenValue = field(default_factory=SeenValue)  # the newest CUDA the driver runs
    rocm_version: SeenValue = field(default_factory=SeenValue)  # the installed ROCm release (its files, amd-smi, HIP's version)
    accelerator: str | None = None  # the machine's accelerator: "nvidia" | "amd" | "intel" | "apple" | "jetson"
    done: bool = False  # True once reconcile built this view (the resolver refuses facts without it)
    evidence: list[Evidence] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)


# ---------------------------------------------------------------------------- all


@dataclass
class Facts:
    platform: PlatformFacts = field(default_factory=PlatformFacts)
    python: PythonFacts = field(default_factory=PythonFacts)
    nvidia: NvidiaFacts = field(default_factory=NvidiaFacts)
    cuda_toolkit: CudaToolkitFacts = field(default_factory=CudaToolkitFacts)
    rocm: RocmFacts = field(default_factory=RocmFacts)
    apple: AppleFacts = field(default_factory=AppleFacts)
    intel: IntelFacts = field(default_factory=IntelFacts)
    jetson: JetsonFacts = field(default_factory=JetsonFacts)
    thunderbolt: ThunderboltFacts = field(default_factory=ThunderboltFacts)
    torch: TorchFacts = field(default_factory=TorchFacts)
    kernels: KernelFacts = field(default_factory=KernelFacts)
    environment: dict[str, str] = field(default_factory=dict)  # variables that shape the stack
    plugins: dict[str, Any] = field(default_factory=dict)  # a plug-in accelerator's facts, by its probe's subject (plain data)
    reconciled: ReconciledFacts = field(default_factory=ReconciledFacts)  # derived: stackdoctor.reconcile


SUBJECTS = tuple(f.name for f in dataclasses.fields(Facts) if f.name not in ("environment", "plugins", "reconciled"))


# ---------------------------------------------------------------------------- serialisation


def to_data(obj: Any) -> Any:
    """A dataclass tree as JSON-ready plain values (dict / list / str / int / float / bool / None)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_data(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_data(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_data(v) for v in obj]
    return obj


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        # its own module's names first (a subject's facts may live beside this file: model.links), then these
        _HINTS[cls] = typing.get_type_hints(cls, globalns={**globals(), **vars(sys.modules[cls.__module__])})
    return _HINTS[cls]


def _coerce(tp: Any, value: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        for arg in args:
            try:
                return _coerce(arg, value)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"{value!r} does not fit {tp}")
    if origin in (list, dict):
        return _coerce_container(tp, origin, value)
    if tp is Any:
        return value
    if origin is Literal:
        if value not in typing.get_args(tp):
            raise TypeError(f"{value!r} is not one of {', '.join(map(repr, typing.get_args(tp)))}")
        return value
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_data(tp, value)
    return _coerce_scalar(tp, value)


def _coerce_container(tp: Any, origin: Any, value: Any) -> Any:
    if origin is list:
        if not isinstance(value, list):
            raise TypeError(f"expected a list, got {type(value).__name__}")
        inner = (typing.get_args(tp) or (Any,))[0]
        return [_coerce(inner, v) for v in value]
    if not isinstance(value, dict):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    kv = typing.get_args(tp)
    inner = kv[1] if len(kv) == 2 else Any
    return {str(k): _coerce(inner, v) for k, v in value.items()}


def _coerce_scalar(tp: Any, value: Any) -> Any:
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError(f"expected true/false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"expected an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise TypeError(f"expected a string, got {value!r}")
        return value
    return value


T = typing.TypeVar("T")


def from_data(cls: type[T], data: Any) -> T:
    """Load a dataclass from plain values; unknown keys ignored, missing keys defaulted.

    :raises TypeError: when a value has the wrong type (the message names the field).
    """
    if not isinstance(data, dict):
        raise TypeError(f"{cls.__name__}: expected an object, got {type(data).__name__}")
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            try:
                kwargs[f.name] = _coerce(hints[f.name], data[f.name])
            except TypeError as exc:
                raise TypeError(f"{cls.__name__}.{f.name}: {exc}") from None
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: missing")
    return cls(**kwargs)


def conda_name(entry: str) -> str:
    """A conda-meta record name (``cudatoolkit-11.8.0-h4ba93d1_13``) -> the package name (``cudatoolkit``)."""
    m = re.match(r"^(.+)-([^-]+)-([^-]+)$", entry)
    return m.group(1) if m else entry


def is_mac(facts: Facts) -> bool:
    """macOS, by its own word (sw_vers) or the platform's."""
    return facts.apple.is_macos or facts.platform.system == "Darwin"


def runs_x86(facts: Facts) -> bool:
    """macOS where the target Python runs x86_64 (an Intel Mac, or Rosetta on Apple silicon)."""
    if not is_mac(facts):
        return False
    a = facts.apple
    return bool(a.rosetta) or a.arch == "x86_64" or (facts.platform.machine == "x86_64" and a.arch != "arm64")


def normalise_smi_gfx(value: str | None) -> str | None:
    """rocm-smi's "GFX VER" as an LLVM target where its KFD rendering can be read unambiguously.

    KFD renders major, minor and stepping in decimal with the stepping as two digits when it
    exceeds 9 (``gfx9010`` = 9.0.10 = gfx90a, failures.md B5); c27 shows ``gfx11002`` for a
    card that rocminfo calls gfx1102 (11.0.02). Five digits are read as major(2) minor(1)
    stepping(2); anything else is returned as printed.
    """
    if not value:
        return None
    m = re.fullmatch(r"gfx(\d{2})(\d)(\d{2})", value)
    if m:
        return f"gfx{int(m.group(1))}{int(m.group(2))}{int(m.group(3)):x}"
    m = re.fullmatch(r"gfx(\d)(\d)(1\d)", value)
    if m:  # 4 digits with a two-digit stepping 10-15: gfx9010 -> gfx90a
        return f"gfx{m.group(1)}{m.group(2)}{int(m.group(3)):x}"
    return value
