"""The doctor's rules: facts that must trigger each code, facts that must not, and the real machines.

Every case starts from a synthetic healthy Linux machine (RTX 4090, driver 580.82.07,
torch 2.13.0+cu126 working) and changes only what the case is about, so a finding that
appears or disappears is caused by that change. Versions and tables come from the shipped
compat matrix (compat_matrix/*.yaml), not from this file.

The real machines are rebuilt from the YAML "Derived facts" block of each
``tests/fixtures/real/<case>/source.md`` (a public bug report); where the thread tells more
than the YAML (the torch the reporter ran, the resolution), the test adds it and says so.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from stackdoctor import kinds
from stackdoctor.accelerators.nvidia.rules import ROW_LAYER
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import (
    Facts,
    IntelGpu,
    KfdNode,
    LinkProblem,
    NetInterface,
    NvidiaFacts,
    NvidiaGpu,
    NvidiaProcGpu,
    PciDevice,
    PlatformFacts,
    PythonFacts,
    RocmGpu,
    ThunderboltPort,
    TorchDevice,
    TorchFacts,
)
from stackdoctor.model.report import Finding, ProbeStatus
from stackdoctor.rules import catalog
from stackdoctor.rules.diagnose import detect_lang, diagnose, list_checks, select

HERE = Path(__file__).resolve().parent
REAL = [HERE / "fixtures" / "real", HERE.parents[1] / "shared" / "fixtures" / "real"]


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([])


def arch(matrix, version: str, variant: str) -> list[str]:
    return list(matrix.variant(version, variant).arch_list)


def healthy(matrix) -> Facts:
    """A synthetic healthy machine: Linux, one RTX 4090, driver 580.82.07, torch 2.13.0+cu126 that works."""
    f = Facts()
    f.platform = PlatformFacts(
        system="Linux",
        machine="x86_64",
        os_id="ubuntu",
        os_name="Ubuntu 24.04.1 LTS",
        libc="glibc",
        glibc_version="2.39",
        nvidia_pci_devices=[PciDevice("0000:01:00.0", "0x10de", "0x2684", "0x030000", driver="nvidia", name="AD102 [GeForce RTX 4090]")],
    )
    f.python = PythonFacts(executable="/work/.venv/bin/python", version="3.12.3", implementation="cpython", platform_tag="manylinux_2_39_x86_64")
    f.nvidia = NvidiaFacts(
        driver_version="580.82.07",
        cuda_driver_version="13.0",
        kernel_module_version="580.82.07",
        smi_state="ok",
        nvml_state="ok",
        gpus=[NvidiaGpu(index=0, name="NVIDIA GeForce RTX 4090", uuid="GPU-5f1d2f0e-0000", compute_capability="8.9", bus_id="00000000:01:00.0", persistence_mode="Enabled")],
        libcuda_paths=["/usr/lib/x86_64-linux-gnu/libcuda.so.1"],
    )
    f.torch = TorchFacts(
        installed=True,
        version="2.13.0+cu126",
        variant="cu126",
        cuda="12.6",
        cuda_available=True,
        device_count=1,
        devices=[TorchDevice(0, "NVIDIA GeForce RTX 4090", "8.9")],
        arch_list=arch(matrix, "2.13.0", "cu126"),
        torchvision_version="0.28.0+cu126",
        distributions={"torch": "2.13.0+cu126", "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-ml-py": "13.580.65"},
    )
    f.environment = {"PATH": "/usr/bin:/bin"}
    return f


def codes(findings: list[Finding], severities=("warn", "fail")) -> set[str]:
    return {f.code for f in findings if f.severity in severities}


def by_code(findings: list[Finding], code: str) -> Finding:
    hits = [f for f in findings if f.code == code]
    assert hits, f"{code} not in {[f.code for f in findings]}"
    return hits[0]


# ---------------------------------------------------------------------------- baseline


def test_healthy_machine_has_no_problem_and_says_what_was_checked(matrix):
    out = diagnose(healthy(matrix), matrix)
    assert codes(out) == set()
    assert {"platform-ok", "driver-ok", "gpu-ok", "python-ok", "torch-ok", "runtime-ok"} <= codes(out, ("ok",))
    assert "NVIDIA GeForce RTX 4090" in by_code(out, "gpu-ok").detail


def test_diagnose_is_pure_and_repeatable(matrix):
    f = healthy(matrix)
    f.torch.cuda = "13.0"
    f.torch.version = "2.13.0+cu130"
    f.nvidia.driver_version = f.nvidia.kernel_module_version = "550.54.14"
    before = copy.deepcopy(f)
    a, b = diagnose(f, matrix), diagnose(f, matrix)
    assert a == b
    assert f == before


# ---------------------------------------------------------------------------- each rule: must trigger

def _driver_too_old(f, m):
    f.torch.version, f.torch.variant, f.torch.cuda = "2.13.0+cu130", "cu130", "13.0"
    f.torch.arch_list = arch(m, "2.13.0", "cu130")
    f.torch.torchvision_version = "0.28.0+cu130"
    f.nvidia.driver_version = f.nvidia.kernel_module_version = "550.54.14"
    f.nvidia.cuda_driver_version = "12.4"


def _minor_compat(f, m):
    f.nvidia.driver_version = f.nvidia.kernel_module_version = "550.54.14"  # >= 525.60.13 floor, < 560.28.03 for 12.6
    f.nvidia.cuda_driver_version = "12.4"


def _swap_gpu(f, name: str, cc: str) -> None:
    """Another GPU in the slot, as every witness sees it: nvidia-smi and torch's device list."""
    f.nvidia.gpus[0].name, f.nvidia.gpus[0].compute_capability = name, cc
    for d in f.torch.devices:
        d.name, d.capability = name, cc


def _arch_new_gpu(f, m):  # RTX 5090 (sm_120) on a cu126 wheel
    _swap_gpu(f, "NVIDIA GeForce RTX 5090", "12.0")


def _arch_old_gpu(f, m):  # GTX 1080 (sm_61) on a cu130 wheel
    f.torch.version, f.torch.variant, f.torch.cuda = "2.13.0+cu130", "cu130", "13.0"
    f.torch.arch_list = arch(m, "2.13.0", "cu130")
    f.torch.torchvision_version = "0.28.0+cu130"
    _swap_gpu(f, "NVIDIA GeForce GTX 1080", "6.1")


def _cpu_only(f, m):
    f.torch.version, f.torch.variant, f.torch.cuda = "2.13.0+cpu", "cpu", None
    f.torch.cuda_available, f.torch.arch_list, f.torch.device_count, f.torch.devices = False, [], 0, []
    f.torch.torchvision_version = "0.28.0+cpu"


def _rocm_on_nvidia(f, m):
    f.torch.version, f.torch.variant, f.torch.cuda, f.torch.hip = "2.13.0+rocm7.2", "rocm7.2", None, "7.2.26015"
    f.torch.cuda_available, f.torch.arch_list = False, []
    f.torch.torchvision_version = "0.28.0+rocm7.2"


def _cuda_unavailable(f, m):
    f.torch.cuda_available, f.torch.device_count = False, 0
    f.torch.cuda_error = "CUDA unknown error - this may be due to an incorrectly set up environment"


def _tv_version(f, m):
    f.torch.torchvision_version = "0.27.0+cu126"


def _tv_variant(f, m):  # the classic torchvision::nms case: same release, other build
    f.torch.torchvision_version = "0.28.0+cu130"


def _ta_mismatch(f, m):
    f.torch.version = "2.11.0+cu126"
    f.torch.arch_list = arch(m, "2.11.0", "cu126")
    f.torch.torchvision_version = "0.26.0+cu126"
    f.torch.torchaudio_version = "2.10.0+cu126"


def _nvcc(f, m):
    f.cuda_toolkit.nvcc_version, f.cuda_toolkit.nvcc_path = "11.8", "/usr/local/cuda-11.8/bin/nvcc"


def _python_old(f, m):  # Python 3.7: no torch 2.x release has wheels for it
    f.torch = TorchFacts(import_error="ModuleNotFoundError: No module named 'torch'", import_error_kind="exception")
    f.python.version = "3.7.17"


def _python_ft(f, m):  # 3.13t with torch 2.13 (3.13t wheels dropped in 2.12): a source build at best
    f.python.version, f.python.free_threaded = "3.13.1", True


def _glibc(f, m):
    f.platform.glibc_version = "2.17"
    f.platform.os_name = "CentOS Linux 7 (Core)"
    f.torch.installed, f.torch.version, f.torch.cuda = False, None, None
    f.torch.import_error = "ImportError: /lib64/libc.so.6: version `GLIBC_2.28' not found (required by torch/lib/libtorch_python.so)"
    f.torch.import_error_kind = "exception"


def _glibc_fresh(f, m):  # a fresh CentOS 7: the newest wheels are manylinux_2_28
    f.platform.glibc_version = "2.17"
    f.torch = TorchFacts(import_error="ModuleNotFoundError: No module named 'torch'", import_error_kind="exception")


def _mps(f, m):
    _mac(f)
    f.apple.macos_version = "13.7.4"
    f.torch.mps_built, f.torch.mps_available = True, False


def _mac(f):
    f.platform = PlatformFacts(system="Darwin", machine="arm64", os_name="macOS 15.3")
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.apple.is_macos, f.apple.arch, f.apple.chip, f.apple.macos_version, f.apple.rosetta = True, "arm64", "Apple M2 Max", "15.3", False
    f.torch = TorchFacts(installed=True, version="2.13.0", mps_built=True, mps_available=True)


def _mac_rosetta(f, m):
    _mac(f)
    f.platform.machine = "x86_64"
    f.apple.rosetta = True
    f.torch = TorchFacts(installed=False, import_error="ModuleNotFoundError: No module named 'torch'")


def _gfx(f, m):  # RX 7600 (gfx1102) on torch 2.5.1+rocm6.2, whose list lacks it
    f.platform.nvidia_pci_devices = []
    f.platform.amd_pci_devices = [PciDevice("0000:03:00.0", "0x1002", "0x7480", "0x030000", driver="amdgpu")]
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.rocm.gpus = [RocmGpu(0, "AMD Radeon RX 7600", "gfx1102")]
    f.rocm.kfd_present = f.rocm.kfd_accessible = f.rocm.amdgpu_loaded = True
    f.torch = TorchFacts(installed=True, version="2.5.1+rocm6.2", variant="rocm6.2", hip="6.2.41133", cuda_available=True, device_count=1)


def _kfd(f, m):
    _gfx(f, m)
    f.rocm.kfd_accessible, f.rocm.kfd_error = False, "Unable to open /dev/kfd read-write: Permission denied"


def _amdgpu(f, m):
    _gfx(f, m)
    f.platform.amd_pci_devices[0].driver = None
    f.rocm.amdgpu_loaded, f.rocm.kfd_present = False, False


def _lib_path(f, m):
    f.environment["LD_LIBRARY_PATH"] = "/usr/local/cuda-12.1/lib64:/opt/intel/lib"
    f.torch.installed, f.torch.version = False, None
    f.torch.import_error = "OSError: /work/.venv/lib/python3.12/site-packages/nvidia/cusparse/lib/libcusparse.so.12: undefined symbol: __nvJitLinkAddData_12_1, version libnvJitLink.so.12"
    f.torch.import_error_kind = "exception"


def _wsl(f, m):
    f.platform.is_wsl, f.platform.kernel = True, "5.15.153.1-microsoft-standard-WSL2"
    f.platform.nvidia_pci_devices = []
    f.nvidia.libcuda_paths = ["/usr/lib/wsl/lib/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"]


def _container(f, m):
    f.platform.container, f.platform.container_nvidia_devices = "docker", False
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.torch.cuda_available, f.torch.device_count = False, 0


def _jetson(f, m):
    f.platform = PlatformFacts(system="Linux", machine="aarch64", libc="glibc", glibc_version="2.35", kernel="5.15.148-tegra")
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.jetson.is_jetson, f.jetson.l4t_release, f.jetson.jetpack, f.jetson.model = True, "36.4.3", "6.2", "NVIDIA Jetson Orin Nano Developer Kit"
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6", cuda_available=False)


def _probe_timeout(f, m):
    f.torch = TorchFacts(import_error="import torch did not finish in 60 s", import_error_kind="timeout")
    return [ProbeStatus("target", "timeout", 60.0, "import torch did not finish in 60 s")]


def _probe_failed(f, m):
    return [ProbeStatus("rocm", "error", 0.2, "rocminfo exited with code 1: hsa api call failure")]


def _driver_missing(f, m):
    f.nvidia = NvidiaFacts(
        smi_state="no-driver",
        smi_exit_code=9,
        smi_message="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        nvml_state="no-driver",
    )
    f.platform.nvidia_pci_devices[0].driver = None
    f.torch.cuda_available, f.torch.device_count = False, 0


def _lib_mismatch(f, m):
    f.nvidia = NvidiaFacts(
        smi_state="lib-mismatch",
        smi_exit_code=18,
        smi_message="Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124",
        nvml_state="lib-mismatch",
        kernel_module_version="570.124.06",
    )


def _source_conflict(f, m):
    f.nvidia.kernel_module_version = "580.65.06"


def _gpu_lost(f, m):
    f.nvidia.smi_state, f.nvidia.smi_message, f.nvidia.gpus = "no-devices", "No devices were found", []
    f.torch.cuda_available, f.torch.device_count = False, 0


def _cvd(f, m):
    f.environment["CUDA_VISIBLE_DEVICES"] = ""
    f.torch.cuda_available, f.torch.device_count = False, 0


def _conda(f, m):
    f.torch.conda_packages = ["cudatoolkit-11.8.0-h4ba93d1_13", "python-3.11.7-h955ad1f_0"]  # conda-meta record names


def _pynvml(f, m):
    f.torch.distributions["pynvml"] = "13.0.1"


def _ecc(f, m):
    f.nvidia.gpus[0].ecc_uncorrected = 3


def _throttle(f, m):
    f.nvidia.gpus[0].throttle_reasons = ["hw_thermal", "sw_power_cap"]


def _persistence(f, m):
    _swap_gpu(f, "NVIDIA H100 80GB HBM3", "9.0")
    f.nvidia.gpus[0].persistence_mode = "Disabled"


def _tb_mac(f):
    _mac(f)
    f.apple.macos_version = "26.2"
    f.thunderbolt.present = True
    f.thunderbolt.ports = [
        ThunderboltPort("Thunderbolt 5 bus 1", link_speed_gbps=80.0, peer="Mac Studio"),
        ThunderboltPort("Thunderbolt 5 bus 2", link_speed_gbps=80.0, peer="Mac mini"),
    ]
    f.thunderbolt.interfaces = [
        NetInterface("bridge0", kind="thunderbolt-bridge", up=True, members=["en2", "en3"]),
        NetInterface("en2", kind="thunderbolt", up=True, addresses=["192.168.10.1/30"]),
    ]
    f.thunderbolt.bridge_enabled = False
    f.thunderbolt.rdma_state = "enabled"
    f.thunderbolt.rdma_devices = ["rdma_en2"]


def _tb_loop(f, m):
    _tb_mac(f)
    f.thunderbolt.bridge_enabled = True


def _tb_rdma_off(f, m):
    _tb_mac(f)
    f.thunderbolt.rdma_state, f.thunderbolt.rdma_devices = "disabled", []


def _tb_slow(f, m):
    _tb_mac(f)
    f.thunderbolt.ports[0].link_speed_gbps = 40.0


def _tb_ll(f, m):
    _tb_mac(f)
    f.thunderbolt.interfaces[1].addresses = ["169.254.12.7/16"]


def _install_killed(f: Facts, m) -> None:
    f.python.unfinished_install = "phase install: torch 2.12.0+cu126 -> torch 2.13.0+cu130"


def _install_live(f: Facts, m) -> None:
    _install_killed(f, m)
    f.python.install_live = "process 4242, phase install"


def _install_unprinted(f: Facts, m) -> None:
    f.python.env_prefix = "/home/u/.venv"
    f.python.install_unprinted = ["the previous torch 2.12.0+cu126 was put back (complete: every file's sha256 checked) and imports."]


def _install_backup_left(f: Facts, m) -> None:
    f.python.env_prefix = "/home/u/.venv"
    f.python.install_backups = {"/home/u/.venv/.stackdoctor-install.done-4242-1": 759_000_000}


def _torch_missing(f, m):
    f.torch = TorchFacts(import_error="ModuleNotFoundError: No module named 'torch'", import_error_kind="exception")


def _torch_newer(f, m):  # a torch released after the matrix: one minor past its newest release
    newest = m.releases[0].version
    f.torch.version = f"{newest.major}.{newest.minor + 1}.0+cu126"


def _import_failed(f, m):  # the cuDNN the wheel needs is missing and nothing on LD_LIBRARY_PATH explains it
    f.torch = TorchFacts(
        import_error="ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory", import_error_kind="exception"
    )


def _mps_rosetta(f, m):  # x86_64 Python under Rosetta on an M2: torch 2.2.2 (the last x86_64 wheel), no MPS
    _mac(f)
    f.platform.machine, f.apple.rosetta = "x86_64", True
    f.torch = TorchFacts(installed=True, version="2.2.2", mps_built=False, mps_available=False)


def _import_crash(f, m):  # the target probe records installed=True when the import raises or crashes
    f.torch = TorchFacts(
        installed=True,
        version="2.13.0+cu126",
        import_error="the target interpreter died while importing torch (SIGSEGV)",
        import_error_kind="crash",
    )
    return [ProbeStatus("target", "error", 0.8, "the target interpreter died while importing torch (SIGSEGV)")]


def _macos_x86(f, m):
    _mac(f)
    f.platform.machine = "x86_64"
    f.apple.arch, f.apple.chip = "x86_64", "Intel(R) Core(TM) i7-8569U"
    f.torch = TorchFacts(installed=False, import_error="ModuleNotFoundError: No module named 'torch'")


def _arc_a770(f, m):
    """An Intel Arc A770 (PCI id 0x56a0, the xe driver) and no NVIDIA GPU."""
    f.nvidia = NvidiaFacts()
    f.platform.nvidia_pci_devices = []
    f.intel.gpus = [IntelGpu(address="0000:03:00.0", device_id="0x56a0", driver="xe")]


def _cpu_torch_on_arc(f, m):
    _arc_a770(f, m)
    f.torch = TorchFacts(installed=True, version="2.13.0+cpu", variant="cpu", cuda_available=False, xpu_available=False,
                         distributions={"torch": "2.13.0+cpu"})


def _xpu_torch_unavailable(f, m):
    _arc_a770(f, m)
    f.torch = TorchFacts(installed=True, version="2.13.0+xpu", variant="xpu", cuda_available=False, xpu_available=False,
                         xpu_error="RuntimeError: no XPU device (Level Zero driver not found)", distributions={"torch": "2.13.0+xpu"})


LIBTORCH_CUDA = "/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so .nv_fatbin (475 fat-binary containers)"


def _arch_lists_differ(f, m):  # torch names cu126's list, its libtorch_cuda.so carries cu130's (a library of another build)
    f.torch.arch_list_torch = list(f.torch.arch_list)
    f.torch.arch_list_files = arch(m, "2.13.0", "cu130")
    f.torch.imported = True
    f.torch.sources.update(arch_list_torch="torch.cuda.get_arch_list()", arch_list_files=LIBTORCH_CUDA)


def _files_unreadable(f, m):  # --no-kernels on a torch package without its version.py (a source tree never built)
    f.torch = TorchFacts(installed=True, imported=False, location="/src/pytorch/torch", static_errors=["/src/pytorch/torch/version.py: absent"])


def _lib_stale(f, m):
    """Real (rwth-i6/returnn issue 1802, tests/fixtures/real): `import torch` fails on a NCCL symbol with -cu11 and
    -cu12 NCCL wheels installed side by side."""
    case = HERE / "fixtures" / "real" / "r-libtorch-cuda-undefined-symbol-ncclMemFree-returnn-1802"
    f.torch.import_error = (case / "import-error.txt").read_text().strip().splitlines()[-1]
    f.torch.import_error_kind = "exception"
    for line in (case / "pip-nccl.txt").read_text().splitlines():
        name, _, version = line.removeprefix("[pip3] ").partition("==")
        f.torch.distributions[name] = version


def _torch_sees_fewer(f, m):  # nvidia-smi lists two GPUs, torch one, and no variable, MIG or container explains it
    f.nvidia.gpus.append(NvidiaGpu(index=1, name="NVIDIA GeForce RTX 4090", uuid="GPU-5f1d2f0e-0001", compute_capability="8.9", bus_id="00000000:02:00.0",
                                   sources={"name": "nvidia-smi --query-gpu", "bus_id": "nvidia-smi --query-gpu"}))
    f.nvidia.gpus[0].sources = {"name": "nvidia-smi --query-gpu", "bus_id": "nvidia-smi --query-gpu"}


def _cuda_build_without_gpu(f, m):  # what `pip install torch` gives on Linux, on a machine with no NVIDIA GPU
    f.platform.nvidia_pci_devices, f.nvidia = [], NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.torch.cuda_available, f.torch.device_count, f.torch.devices = False, 0, []
    f.torch.runtime_bytes = {"nvidia-cublas-cu12": 566_000_000, "nvidia-cudnn-cu12": 1_070_000_000}


def _numpy_missing(f, m):
    f.torch.import_warnings = ["UserWarning: Failed to initialize NumPy: No module named 'numpy' (Triggered internally at tensor_numpy.cpp:84.)"]


SITE = "/venv/lib/python3.12/site-packages"


def _fast(f):  # check --no-kernels: torch read from its files (defined below, with the read-only comparison)
    return _as_read_only(f)


def _fast_unreadable_lib(f, m):  # a 0-byte libtorch_cuda.so: the fast path names it instead of "torch ok"
    _fast(f).torch.static_unreadable = [f"{SITE}/torch/lib/libtorch_cuda.so: empty or unreadable file"]


def _installed_twice(f, m):
    f.torch.duplicate_installs = [f"2.13.0+cu126 ({SITE}/torch-2.13.0+cu126.dist-info)", f"2.12.1 ({SITE}/torch-2.12.1.dist-info)"]


def _fast_cudnn_missing(f, m):  # the files say what `import torch` would: libcudnn.so.9 is on no search path
    _fast(f).torch.linkage_checked = True
    f.torch.linkage = [LinkProblem("missing", "libcudnn.so.9", f"{SITE}/torch/lib/libtorch_cuda.so")]


def _fast_nccl_lacks_symbol(f, m):  # the NCCL copy that would be loaded lacks ncclMemFree
    _fast(f).torch.linkage_checked = True
    f.torch.linkage = [LinkProblem("symbol", f"{SITE}/nvidia/nccl/lib/libnccl.so.2", f"{SITE}/torch/lib/libtorch_cuda.so", symbol="ncclMemFree")]


def _fast_shadowed(f, m):  # a system cuDNN first on LD_LIBRARY_PATH, ahead of the wheel's
    _fast(f).torch.linkage_checked = True
    f.environment["LD_LIBRARY_PATH"] = "/usr/local/cuda-12.1/lib64"
    f.torch.linkage = [LinkProblem("shadowed", "/usr/local/cuda-12.1/lib64/libcudnn.so.9", f"{SITE}/torch/lib/libtorch_cuda.so",
                                   detail=f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9")]


def _numpy2_under_torch22(f, m):  # NumPy 2 beside torch 2.2 (built against NumPy 1), both read from their dist-info
    f.torch.version, f.torch.numpy_version = "2.2.2+cu121", "2.0.1"


def _companion_pins_other_torch(f, m):  # torchvision's own METADATA pins another torch than the installed one
    f.torch.torchvision_version = None
    f.torch.distributions["torchvision"] = "0.16.0"
    f.torch.requires = {"torchvision": ["numpy", "torch (==2.1.0)"]}


def _jetson_by_tegra_kernel(f, m):  # an Orin known only by its -tegra kernel: no nv_tegra_release, no nvidia-smi
    f.platform = PlatformFacts(system="Linux", machine="aarch64", libc="glibc", glibc_version="2.35", kernel="5.15.148-tegra")
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    # what the jetson probe makes of it (tests/test_probe_jetson.py: the kernel release as the only witness)
    f.jetson.is_jetson, f.jetson.sources = True, {"is_jetson": "file:/proc/sys/kernel/osrelease (5.15.148-tegra)"}
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6", imported=False, location=f"{SITE}/torch",
                         distributions={"torch": "2.13.0+cu126"})


def _cvd_hides_gpus_no_tool(f, m):  # no nvidia-smi/NVML in the container; the kernel module lists the GPU
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent", kernel_module_version="580.82.07",
                           proc_gpus=[NvidiaProcGpu(bus_id="0000:01:00.0", name="NVIDIA GeForce RTX 4090")])
    f.environment["CUDA_VISIBLE_DEVICES"] = "-1"
    _fast(f)


def _driver_cuda_from_any_sentence(f, m):  # cu130 torch; the driver's CUDA level known only from a message
    _driver_too_old(f, m)
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent", kernel_module_version="550.54.14")
    f.torch.cuda_available, f.torch.device_count = False, 0
    f.torch.cuda_error = "UserWarning: CUDA initialization: CUDA driver initialization failed, found version 12070 of the driver API"


def _rocm_abort_under_override(f, m):  # HSA_OVERRIDE_GFX_VERSION set to the wrong value: import torch aborts
    _gfx(f, m)
    f.environment["HSA_OVERRIDE_GFX_VERSION"] = "9.0.0"
    f.torch = TorchFacts(installed=True, version="2.5.1+rocm6.2", variant="rocm6.2", hip="6.2.41133",
                         import_error="the target interpreter died while importing torch (killed by SIGABRT)", import_error_kind="crash")


def _gfx_only_kfd(f, m):  # no ROCm tool in the container: only the KFD topology names the gfx
    _gfx(f, m)
    f.rocm.gpus = []
    f.rocm.kfd_nodes = [KfdNode(node=1, gfx_target_version=110002, gfx="gfx1102", vendor_id="0x1002", device_id="0x7480", simd_count=64,
                                bus_id="0000:03:00.0")]
    _fast(f)


def _cuda_wheel_on_amd_no_tool(f, m):  # a CUDA wheel on an AMD GPU, and no NVIDIA tool at all
    _gfx(f, m)
    f.rocm.gpus = []
    f.rocm.kfd_nodes = [KfdNode(node=1, gfx_target_version=110002, gfx="gfx1102", vendor_id="0x1002", device_id="0x7480", simd_count=64)]
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6", imported=False, location=f"{SITE}/torch",
                         distributions={"torch": "2.13.0+cu126"})


def _error_802_on_an_hgx(f, m):  # torch's real text (hiyouga/LlamaFactory#7888): the driver answered 802
    f.torch.cuda_available, f.torch.device_count = False, 0
    f.torch.cuda_error = (HERE / "fixtures" / "real" / "e-802-c10-torch270-llamafactory-7888" / "torch-error.txt").read_text().strip()


TRIGGER = [
    pytest.param("runtime-error-code", _error_802_on_an_hgx, id="error-802-fabric-manager"),
    pytest.param("jetson-wrong-wheel", _jetson_by_tegra_kernel, id="jetson-known-only-by-its-tegra-kernel"),
    pytest.param("cuda-visible-devices-hides-all", _cvd_hides_gpus_no_tool, id="fast-path-cvd-hides-the-gpu-the-kernel-lists"),
    pytest.param("driver-too-old", _driver_cuda_from_any_sentence, id="found-version-12070-in-another-sentence"),
    pytest.param("rocm-gfx-unsupported", _rocm_abort_under_override, id="rocm-abort-under-hsa-override"),
    pytest.param("rocm-gfx-unsupported", _gfx_only_kfd, id="fast-path-gfx-only-in-kfd-topology"),
    pytest.param("torch-backend-mismatch", _cuda_wheel_on_amd_no_tool, id="cuda-wheel-on-amd-without-nvidia-tools"),
    pytest.param("torch-files-partial", _fast_unreadable_lib, id="fast-path-0-byte-libtorch-cuda"),
    pytest.param("torch-installed-twice", _installed_twice, id="two-torch-dist-infos"),
    pytest.param("torch-import-failed", _fast_cudnn_missing, id="fast-path-libcudnn-on-no-search-path"),
    pytest.param("torch-lib-stale", _fast_nccl_lacks_symbol, id="fast-path-nccl-lacks-ncclMemFree"),
    pytest.param("lib-path-shadowing", _fast_shadowed, id="fast-path-system-cudnn-first-on-ld-library-path"),
    pytest.param("torch-numpy-abi", _numpy2_under_torch22, id="numpy2-under-torch-2.2"),
    pytest.param("torch-companion-pin", _companion_pins_other_torch, id="torchvision-pins-torch-2.1.0"),
    pytest.param("torch-arch-list-mismatch", _arch_lists_differ, id="libtorch-cuda-of-another-build"),
    pytest.param("torch-files-unreadable", _files_unreadable, id="torch-without-version-py"),
    pytest.param("torch-cpu-only", _cpu_torch_on_arc, id="cpu-build-with-arc-a770"),
    pytest.param("torch-gpu-build-no-gpu", _cuda_build_without_gpu, id="cuda-build-without-gpu"),
    pytest.param("torch-numpy-missing", _numpy_missing, id="torch-warns-numpy-missing"),
    pytest.param("xpu-unavailable", _xpu_torch_unavailable, id="xpu-build-level-zero-missing"),
    pytest.param("driver-too-old", _driver_too_old, id="cu130-on-550"),
    pytest.param("driver-minor-compat", _minor_compat, id="cu126-on-550"),
    pytest.param("gpu-arch-unsupported", _arch_new_gpu, id="rtx5090-on-cu126"),
    pytest.param("gpu-arch-unsupported", _arch_old_gpu, id="gtx1080-on-cu130"),
    pytest.param("torch-cpu-only", _cpu_only, id="cpu-build-with-rtx4090"),
    pytest.param("torch-backend-mismatch", _rocm_on_nvidia, id="rocm-build-on-nvidia"),
    pytest.param("cuda-unavailable", _cuda_unavailable, id="cuda-unknown-error"),
    pytest.param("torchvision-mismatch", _tv_version, id="torchvision-0.27-with-2.13"),
    pytest.param("torchvision-mismatch", _tv_variant, id="torchvision-cu130-with-torch-cu126"),
    pytest.param("torchaudio-mismatch", _ta_mismatch, id="torchaudio-2.10-with-2.11"),
    pytest.param("nvcc-mismatch", _nvcc, id="nvcc-11.8-with-cu126"),
    pytest.param("python-unsupported", _python_old, id="python-3.7-no-wheels"),
    pytest.param("python-unsupported", _python_ft, id="python-3.13t-with-2.13"),
    pytest.param("glibc-too-old", _glibc, id="centos7-glibc-2.17"),
    pytest.param("glibc-too-old", _glibc_fresh, id="centos7-fresh"),
    pytest.param("mps-unavailable", _mps, id="macos13-torch-2.13"),
    pytest.param("macos-x86-torch-too-new", _mac_rosetta, id="rosetta-python"),
    pytest.param("mps-unavailable", _mps_rosetta, id="rosetta-torch-2.2.2"),
    pytest.param("macos-x86-torch-too-new", _macos_x86, id="intel-mac"),
    pytest.param("rocm-gfx-unsupported", _gfx, id="gfx1102-on-rocm6.2"),
    pytest.param("rocm-kfd-permission", _kfd, id="kfd-eacces"),
    pytest.param("amdgpu-not-loaded", _amdgpu, id="amdgpu-absent"),
    pytest.param("lib-path-shadowing", _lib_path, id="nvjitlink-undefined-symbol"),
    pytest.param("wsl-driver", _wsl, id="linux-libcuda-in-wsl"),
    pytest.param("container-no-gpu", _container, id="docker-without-gpus"),
    pytest.param("jetson-wrong-wheel", _jetson, id="orin-with-cu126-server-wheel"),
    pytest.param("probe-timeout", _probe_timeout, id="import-torch-hangs"),
    pytest.param("probe-failed", _probe_failed, id="rocminfo-fails"),
    pytest.param("driver-missing", _driver_missing, id="no-driver"),
    pytest.param("driver-library-mismatch", _lib_mismatch, id="nvml-lib-mismatch"),
    pytest.param("source-conflict", _source_conflict, id="sys-module-vs-nvml"),
    pytest.param("source-conflict", _torch_sees_fewer, id="torch-sees-fewer-gpus-than-nvidia-smi"),
    pytest.param("torch-lib-stale", _lib_stale, id="ncclMemFree-with-cu11-and-cu12-nccl"),
    pytest.param("gpu-lost", _gpu_lost, id="no-devices-found"),
    pytest.param("cuda-visible-devices-hides-all", _cvd, id="cvd-empty"),
    pytest.param("conda-pip-mix", _conda, id="conda-cudatoolkit-with-pip-torch"),
    pytest.param("pynvml-deprecated", _pynvml, id="pynvml-13"),
    pytest.param("gpu-ecc-errors", _ecc, id="ecc-uncorrected"),
    pytest.param("gpu-throttled", _throttle, id="hw-thermal"),
    pytest.param("gpu-persistence-off", _persistence, id="h100-persistence-off"),
    pytest.param("thunderbolt-bridge-loop", _tb_loop, id="bridge-with-two-peers"),
    pytest.param("thunderbolt-rdma-disabled", _tb_rdma_off, id="tb5-rdma-off"),
    pytest.param("thunderbolt-link-slow", _tb_slow, id="tb4-link-with-rdma"),
    pytest.param("thunderbolt-link-local-ip", _tb_ll, id="rdma-en2-link-local"),
    pytest.param("torch-missing", _torch_missing, id="fresh-machine"),
    pytest.param("install-unfinished", _install_killed, id="install-killed-halfway"),
    pytest.param("install-in-progress", _install_live, id="install-running-now"),
    pytest.param("install-unprinted", _install_unprinted, id="install-output-closed"),
    pytest.param("install-backup-left", _install_backup_left, id="install-stopped-after-done"),
    pytest.param("torch-import-failed", _import_failed, id="libcudnn-missing"),
    pytest.param("torch-newer-than-matrix", _torch_newer, id="torch-after-the-matrix"),
    pytest.param("torch-import-failed", _import_crash, id="import-segfaults-installed-true"),
]


@pytest.mark.parametrize("code, change", TRIGGER)
def test_rule_triggers(matrix, code, change):
    f = healthy(matrix)
    probes = change(f, matrix)
    out = diagnose(f, matrix, probes=probes)
    hit = by_code(out, code)
    assert hit.severity in ("warn", "fail")
    assert hit.fix, f"{code} has no fix"
    assert hit.title == catalog.title(code, "en")
    # runtime-error-code's layer is its error row's (issue 42: 802 the fabric manager's), the catalogue's the default
    assert hit.layer == catalog.info(code).layer or (code == "runtime-error-code" and hit.layer in ROW_LAYER.values())
    assert "{" not in hit.detail and "{" not in hit.fix, (hit.detail, hit.fix)


# ---------------------------------------------------------------------------- each rule: must not trigger (near misses)


def _nm_driver_new_enough(f, m):  # cu130 on a 580 driver: fine
    _driver_too_old(f, m)
    f.nvidia.driver_version = f.nvidia.kernel_module_version = "580.82.07"


def _nm_wsl_windows_driver(f, m):  # 551.88 is a Windows driver: above 528.33 / 531.14, so cu121 runs fully
    _wsl(f, m)
    f.nvidia.libcuda_paths = ["/usr/lib/wsl/lib/libcuda.so.1"]
    f.nvidia.driver_version, f.nvidia.kernel_module_version = "551.88", None
    f.torch.version, f.torch.variant, f.torch.cuda = "2.4.0+cu121", "cu121", "12.1"
    f.torch.arch_list, f.torch.torchvision_version = arch(m, "2.4.0", "cu121"), None


def _nm_sm89_runs_sm86(f, m):  # Ada has no own SASS in any wheel: it runs sm_86
    f.nvidia.gpus[0].compute_capability = "8.9"


def _nm_cpu_without_gpu(f, m):
    _cpu_only(f, m)
    f.platform.nvidia_pci_devices, f.nvidia = [], NvidiaFacts(smi_state="absent", nvml_state="absent")


def _nm_cpu_on_mac(f, m):
    _mac(f)
    f.torch.mps_available = True


def _nm_tv_aarch64_no_suffix(f, m):  # torchvision aarch64 wheels carry no suffix
    f.torch.torchvision_version = "0.28.0"


def _nm_ta_stable_abi(f, m):  # torchaudio 2.11.0+cu130 relabelled under 2.12's cu132: same build kind
    f.torch.version, f.torch.variant, f.torch.cuda = "2.12.1+cu132", "cu132", "13.2"
    f.torch.arch_list = arch(m, "2.12.1", "cu132")
    f.torch.torchvision_version, f.torch.torchaudio_version = "0.27.1+cu132", "2.11.0+cu130"


def _nm_nvcc_same_major(f, m):
    f.cuda_toolkit.nvcc_version = "12.4"


def _nm_python_supported(f, m):
    _python_old(f, m)
    f.python.version = "3.14.0"


def _nm_glibc_new(f, m):
    f.platform.glibc_version = "2.28"


def _nm_mps_intel(f, m):  # Intel Macs have no MPS with current torch; not a fault of this install
    _mac(f)
    f.apple.arch, f.apple.chip = "x86_64", "Intel(R) Core(TM) i9"
    f.torch.version, f.torch.mps_available = "2.2.2", False


def _nm_gfx_override_set(f, m):
    _gfx(f, m)
    f.environment["HSA_OVERRIDE_GFX_VERSION"] = "11.0.0"


def _nm_kfd_ok(f, m):
    _gfx(f, m)


def _nm_ld_path_harmless(f, m):
    f.environment["LD_LIBRARY_PATH"] = "/opt/intel/lib:/usr/lib/x86_64-linux-gnu"


def _nm_wsl_clean(f, m):
    _wsl(f, m)
    f.nvidia.libcuda_paths = ["/usr/lib/wsl/lib/libcuda.so.1"]


def _nm_container_with_gpu(f, m):
    f.platform.container, f.platform.container_nvidia_devices = "docker", True


def _nm_jetson_wheel(f, m):
    _jetson(f, m)
    f.torch.version, f.torch.variant, f.torch.cuda_available = "2.5.0a0+872d972e41.nv24.08", None, True


def _nm_tool_absent(f, m):  # a tool not installed is a fact, not a problem
    return [ProbeStatus("rocm", "skipped", 0.0, "not available in this build")]


def _nm_cvd_valid(f, m):
    f.environment["CUDA_VISIBLE_DEVICES"] = "0"


def _nm_conda_python_only(f, m):
    f.torch.conda_packages = ["python", "cuda-nvcc"]


def _nm_pynvml_old_alone(f, m):
    f.torch.distributions.pop("nvidia-ml-py")
    f.torch.distributions["pynvml"] = "11.5.0"


def _nm_throttle_idle(f, m):
    f.nvidia.gpus[0].throttle_reasons = ["gpu_idle"]


def _nm_persistence_consumer(f, m):
    f.nvidia.gpus[0].persistence_mode = "Disabled"  # RTX 4090: a desktop card


def _nm_tb_bridge_one_peer(f, m):
    _tb_mac(f)
    f.thunderbolt.bridge_enabled = True
    f.thunderbolt.ports = f.thunderbolt.ports[:1]


def _nm_tb_rdma_old_macos(f, m):
    _tb_rdma_off(f, m)
    f.apple.macos_version = "15.5"


def _nm_smi_table_prefix(f, m):  # nvidia-smi's table prints 580.82 for 580.82.07: not a conflict
    f.nvidia.observed = {"driver_version": {"nvml": "580.82.07", "nvidia-smi": "580.82"}}


def _nm_arch_extras(f, m):  # the files' per-file extras (sm_90a in a few kernels) are not the build's list
    f.torch.arch_list_torch = list(reversed(f.torch.arch_list))  # order does not matter: sets
    f.torch.arch_list_files, f.torch.arch_extra = list(f.torch.arch_list), ["sm_90a", "sm_100a"]
    f.torch.imported = True


def _nm_arch_gfx_features(f, m):  # ROCm: torch's list may leave out the feature flags the bundles name
    _gfx(f, m)
    f.torch.arch_list_torch = ["gfx90a", "gfx942", "gfx1100"]
    f.torch.arch_list_files = ["gfx90a:xnack-", "gfx90a:xnack+", "gfx942", "gfx1100"]
    f.torch.imported = True


def _nm_arch_not_imported(f, m):  # read from the files only: nothing of torch's own to compare with
    _as_read_only(f)
    f.torch.arch_list_files = arch(m, "2.13.0", "cu130")


NOT_TRIGGER = [
    pytest.param("torch-arch-list-mismatch", _nm_arch_extras, id="extras-and-order"),
    pytest.param("torch-arch-list-mismatch", _nm_arch_gfx_features, id="gfx-feature-flags"),
    pytest.param("torch-arch-list-mismatch", _nm_arch_not_imported, id="not-imported"),
    pytest.param("torch-files-unreadable", lambda f, m: _as_read_only(f) and None, id="read-only-with-version"),
    pytest.param("torch-ok", _files_unreadable, id="no-torch-ok-without-a-version"),
    pytest.param("driver-too-old", _nm_driver_new_enough, id="cu130-on-580"),
    pytest.param("driver-too-old", _nm_wsl_windows_driver, id="wsl-windows-driver-551"),
    pytest.param("driver-minor-compat", _nm_wsl_windows_driver, id="wsl-cu121-full"),
    pytest.param("gpu-arch-unsupported", _nm_sm89_runs_sm86, id="sm89-on-cu126"),
    pytest.param("torch-cpu-only", _nm_cpu_without_gpu, id="cpu-build-no-gpu"),
    pytest.param("torch-cpu-only", _nm_cpu_on_mac, id="macos-build"),
    pytest.param("torchvision-mismatch", _nm_tv_aarch64_no_suffix, id="torchvision-no-suffix"),
    pytest.param("torchaudio-mismatch", _nm_ta_stable_abi, id="torchaudio-2.11-with-2.12"),
    pytest.param("nvcc-mismatch", _nm_nvcc_same_major, id="nvcc-12.4-with-cu126"),
    pytest.param("python-unsupported", _nm_python_supported, id="python-3.12"),
    pytest.param("glibc-too-old", _nm_glibc_new, id="glibc-2.28"),
    pytest.param("mps-unavailable", _nm_mps_intel, id="intel-mac-no-mps"),
    pytest.param("rocm-gfx-unsupported", _nm_gfx_override_set, id="documented-override-set"),
    pytest.param("rocm-kfd-permission", _nm_kfd_ok, id="kfd-accessible"),
    pytest.param("amdgpu-not-loaded", _nm_kfd_ok, id="amdgpu-loaded"),
    pytest.param("lib-path-shadowing", _nm_ld_path_harmless, id="ld-path-without-cuda"),
    pytest.param("wsl-driver", _nm_wsl_clean, id="wsl-only-mounted-libcuda"),
    pytest.param("container-no-gpu", _nm_container_with_gpu, id="docker-gpus-all"),
    pytest.param("jetson-wrong-wheel", _nm_jetson_wheel, id="nvidia-jetson-wheel"),
    pytest.param("probe-failed", _nm_tool_absent, id="tool-not-installed"),
    pytest.param("cuda-visible-devices-hides-all", _nm_cvd_valid, id="cvd-0"),
    pytest.param("conda-pip-mix", _nm_conda_python_only, id="conda-python-and-nvcc"),
    pytest.param("pynvml-deprecated", _nm_pynvml_old_alone, id="pynvml-11-alone"),
    pytest.param("gpu-throttled", _nm_throttle_idle, id="idle"),
    pytest.param("gpu-persistence-off", _nm_persistence_consumer, id="geforce"),
    pytest.param("thunderbolt-bridge-loop", _nm_tb_bridge_one_peer, id="two-macs"),
    pytest.param("thunderbolt-rdma-disabled", _nm_tb_rdma_old_macos, id="macos-15"),
    pytest.param("source-conflict", _nm_smi_table_prefix, id="smi-table-short-version"),
    pytest.param("torch-missing", lambda f, m: None, id="torch-installed"),
    pytest.param("driver-missing", lambda f, m: None, id="driver-answers"),
    pytest.param("cuda-unavailable", _cpu_only, id="cpu-build-is-not-cuda-unavailable"),
    pytest.param("torch-import-failed", _lib_path, id="explained-by-lib-path-shadowing"),
    pytest.param("torch-import-failed", _glibc, id="explained-by-glibc"),
    pytest.param("torch-import-failed", _torch_missing, id="not-installed-is-not-a-failure"),
    pytest.param("install-unfinished", _install_live, id="a-running-install-is-not-a-stopped-one"),
    pytest.param("install-in-progress", _install_killed, id="a-stopped-install-is-not-running"),
]


@pytest.mark.parametrize("code, change", NOT_TRIGGER)
def test_rule_does_not_trigger(matrix, code, change):
    f = healthy(matrix)
    probes = change(f, matrix)
    out = diagnose(f, matrix, probes=probes)
    assert code not in {x.code for x in out}, [(x.code, x.detail) for x in out if x.code == code]


# ---------------------------------------------------------------------------- the details and fixes say the right thing


def test_driver_too_old_names_versions_and_the_build_this_driver_runs(matrix):
    f = healthy(matrix)
    _driver_too_old(f, matrix)
    hit = by_code(diagnose(f, matrix), "driver-too-old")
    assert "550.54.14" in hit.detail and "13.0" in hit.detail and "580" in hit.detail
    assert hit.fix.startswith("stackdoctor install") and "cu126" in hit.fix
    assert "cu130" not in hit.fix.split("#")[0]


def test_arch_unsupported_names_gpu_sm_list_and_covering_variant(matrix):
    f = healthy(matrix)
    _arch_old_gpu(f, matrix)
    hit = by_code(diagnose(f, matrix), "gpu-arch-unsupported")
    assert "GTX 1080" in hit.detail and "sm_61" in hit.detail and "sm_75" in hit.detail
    assert re.match(r"^stackdoctor install (--torch \S+ )?--variant cu126$", hit.fix), hit.fix


def test_volta_on_211_cu128_is_sent_to_cu126(matrix):
    f = healthy(matrix)
    f.torch.version, f.torch.variant, f.torch.cuda = "2.11.0+cu128", "cu128", "12.8"
    f.torch.arch_list, f.torch.torchvision_version = arch(matrix, "2.11.0", "cu128"), None
    f.nvidia.gpus[0].name, f.nvidia.gpus[0].compute_capability = "Tesla V100-SXM2-32GB", "7.0"
    hit = by_code(diagnose(f, matrix), "gpu-arch-unsupported")
    assert "sm_70" in hit.detail
    assert hit.fix.endswith("--variant cu126"), hit.fix


def test_cpu_only_fix_installs_a_cuda_variant(matrix):
    f = healthy(matrix)
    _cpu_only(f, matrix)
    hit = by_code(diagnose(f, matrix), "torch-cpu-only")
    assert re.search(r"--variant cu\d+", hit.fix), hit.fix
    assert "RTX 4090" in hit.detail


def test_cuda_unavailable_names_its_cause(matrix):
    f = healthy(matrix)
    _cvd(f, matrix)
    out = diagnose(f, matrix)
    hit = by_code(out, "cuda-unavailable")
    assert "cuda-visible-devices-hides-all" in hit.detail
    assert by_code(out, "cuda-visible-devices-hides-all").fix.startswith("unset CUDA_VISIBLE_DEVICES")


def test_lib_path_fix_keeps_the_harmless_entries(matrix):
    f = healthy(matrix)
    _lib_path(f, matrix)
    hit = by_code(diagnose(f, matrix), "lib-path-shadowing")
    assert hit.severity == "fail"
    assert hit.fix == "export LD_LIBRARY_PATH=/opt/intel/lib"
    assert "__nvJitLinkAddData_12_1" in hit.detail


def test_probe_severity_depends_on_what_is_left_unknown(matrix):
    f = healthy(matrix)
    target = diagnose(f, matrix, probes=[ProbeStatus("target", "error", 1.0, "the target interpreter died (SIGSEGV)")])
    other = diagnose(f, matrix, probes=[ProbeStatus("thunderbolt", "timeout", 5.0, "system_profiler did not answer in 5 s")])
    assert by_code(target, "probe-failed").severity == "fail"
    assert "torch-ok" not in {x.code for x in target}
    assert by_code(other, "probe-timeout").severity == "warn"


def test_glibc_on_a_fresh_machine_is_a_warning_with_an_older_torch(matrix):
    f = healthy(matrix)
    _glibc_fresh(f, matrix)
    hit = by_code(diagnose(f, matrix), "glibc-too-old")
    assert hit.severity == "warn" and "2.17" in hit.detail and "2.28" in hit.detail
    assert "--torch 2.5.1" in hit.fix


@pytest.mark.parametrize("change", [_import_failed, _import_crash], ids=["raises", "crashes"])
def test_a_torch_that_cannot_be_imported_is_never_ok(matrix, change):
    f = healthy(matrix)
    probes = change(f, matrix)
    f.torch.installed = True
    out = diagnose(f, matrix, probes=probes)
    assert by_code(out, "torch-import-failed").severity == "fail"
    assert not {"torch-ok", "runtime-ok"} & {x.code for x in out}
    assert "probe-failed" not in {x.code for x in out}  # one finding for one fault


def test_torch_missing_is_a_warning_so_a_fresh_machine_exits_zero(matrix):
    f = healthy(matrix)
    _torch_missing(f, matrix)
    out = diagnose(f, matrix)
    assert by_code(out, "torch-missing").severity == "warn"
    assert by_code(out, "torch-missing").fix.startswith("stackdoctor install")
    assert not codes(out, ("fail",))


def test_rocm_gfx_fix_is_the_known_override_and_hides_the_igpu(matrix):
    f = healthy(matrix)
    _gfx(f, matrix)
    f.rocm.gpus.append(RocmGpu(1, "AMD Radeon Graphics", "gfx1036", integrated=True))
    out = [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"]
    fixes = {x.severity: x.fix for x in out}
    assert fixes["fail"].startswith("export HSA_OVERRIDE_GFX_VERSION=11.0.0")
    assert fixes["warn"] == "export HIP_VISIBLE_DEVICES=0"


def test_mps_old_macos_offers_an_older_torch_or_upgrade(matrix):
    f = healthy(matrix)
    _mps(f, matrix)
    hit = by_code(diagnose(f, matrix), "mps-unavailable")
    assert "13.7.4" in hit.detail and "14" in hit.detail
    assert "macOS" in hit.fix


def test_without_a_driver_version_the_drivers_cuda_level_still_tells(matrix):
    f = healthy(matrix)
    _driver_too_old(f, matrix)
    f.nvidia.driver_version = f.nvidia.kernel_module_version = None
    f.nvidia.observed = {}
    out = diagnose(f, matrix)
    # no driver version from any witness, but the driver's own CUDA level (12.4) against the wheel's 13.0 still tells
    hit = by_code(out, "driver-too-old")
    assert hit.fix and "12.4" in hit.detail


def test_chinese_texts_keep_codes_commands_and_versions(matrix):
    f = healthy(matrix)
    _driver_too_old(f, matrix)
    en = by_code(diagnose(f, matrix, lang="en"), "driver-too-old")
    zh = by_code(diagnose(f, matrix, lang="zh"), "driver-too-old")
    assert zh.code == en.code and zh.severity == en.severity and zh.layer == en.layer
    assert zh.title != en.title and re.search(r"[\u4e00-\u9fff]", zh.title)
    assert en.fix.split("#")[0] == zh.fix.split("#")[0]  # the command is the same
    for v in ("550.54.14", "13.0", "580"):
        assert v in zh.detail


# ---------------------------------------------------------------------------- select, list, language


def test_select_only_and_skip(matrix):
    f = healthy(matrix)
    _driver_too_old(f, matrix)
    out = diagnose(f, matrix)
    assert {x.code for x in select(out, ["driver-too-old"], None)} == {"driver-too-old"}
    assert "driver-too-old" not in {x.code for x in select(out, None, ["driver-too-old"])}
    assert all(x.code.endswith("-ok") for x in select(out, [c for c in catalog.codes() if c.endswith("-ok")], None))
    assert {x.code for x in select(out, ["thunderbolt-*", "driver-*"], None)} == {"driver-too-old"}


def test_list_checks_covers_the_catalogue():
    rows = list_checks("zh")
    assert [r[0] for r in rows] == catalog.codes()
    assert all(sev in ("ok", "warn", "fail") and title for _, sev, _, title in rows)


@pytest.mark.parametrize(
    "env, explicit, want",
    [
        pytest.param({"LANG": "zh_CN.UTF-8"}, None, "zh", id="lang-zh"),
        pytest.param({"LC_ALL": "en_US.UTF-8", "LANG": "zh_CN.UTF-8"}, None, "en", id="lc-all-wins"),
        pytest.param({"LC_MESSAGES": "zh_TW.UTF-8", "LANG": "en_US"}, None, "zh", id="lc-messages"),
        pytest.param({"LANG": "zh_CN.UTF-8"}, "en", "en", id="explicit-wins"),
        pytest.param({}, None, "en", id="default"),
        pytest.param({"LC_ALL": "", "LANG": "zh_SG"}, None, "zh", id="empty-lc-all-ignored"),
    ],
)
def test_detect_lang(env, explicit, want):
    assert detect_lang(env, explicit) == want


# ---------------------------------------------------------------------------- real machines (public bug reports)


def source_yaml(case: str) -> dict:
    for base in REAL:
        p = base / case / "source.md"
        if p.exists():
            text = p.read_text(encoding="utf-8")
            m = re.search(r"## Derived facts\s*```yaml\n(.*?)```", text, re.S)
            assert m, f"{case}: no YAML block"
            return yaml.safe_load(m.group(1))
    pytest.fail(f"{case} is missing from tests/fixtures/real")


def _first_version(value) -> str | None:
    m = re.search(r"\d+(?:\.\d+)+", str(value)) if value is not None else None
    return m.group(0) if m else None


def facts_from_source(case: str) -> Facts:
    """Facts as the source.md YAML states them (only what it states)."""
    y = source_yaml(case)
    f = Facts()
    os_text = str(y.get("os") or "")
    f.platform.system = "Darwin" if "mac" in os_text.lower() or "host" in y else "Linux"
    f.platform.is_wsl = "WSL" in os_text
    f.platform.machine = "aarch64" if "aarch64" in os_text or "l4t" in y else "x86_64"
    gpus = y.get("gpus") if isinstance(y.get("gpus"), list) else []
    driver = _first_version(y.get("driver_version"))
    if any(k in y for k in ("driver_version", "driver_max_cuda", "nvml_library_version")) and "gfx_arch" not in str(gpus):
        f.nvidia.driver_version = driver
        f.nvidia.cuda_driver_version = _first_version(y.get("driver_max_cuda"))
        f.nvidia.smi_version = _first_version(y.get("nvidia_smi_version"))
        f.nvidia.smi_state = "ok" if driver else None
        for i, g in enumerate(gpus):
            if "gfx_arch" in g or "Tegra" in str(g.get("name")):
                continue
            f.nvidia.gpus.append(
                NvidiaGpu(index=i, name=g.get("resolved_name") or g.get("name"), compute_capability=_first_version(g.get("compute_capability")), memory_total_mib=g.get("memory_mib"))
            )
    for i, g in enumerate(gpus):
        if "gfx_arch" in g:
            integrated = "iGPU" in str(g.get("family"))
            f.rocm.gpus.append(RocmGpu(index=g.get("index", i), name=g.get("name") or g.get("family"), gfx=g["gfx_arch"], integrated=integrated))
    if f.rocm.gpus:
        f.rocm.amdgpu_loaded = f.rocm.kfd_present = f.rocm.kfd_accessible = True
    if "l4t" in y:
        f.jetson.is_jetson = True
        f.jetson.l4t_release = _first_version(y["l4t"])
        f.jetson.jetpack = str(y.get("jetpack"))
        f.jetson.model = y.get("board")
    if y.get("python"):
        f.python.version = _first_version(y["python"])
    t = y.get("torch_installed")
    if isinstance(t, dict) and re.match(r"^\d+\.\d+\.\d+", str(t.get("version"))):
        f.torch = TorchFacts(installed=True, version=t["version"], cuda=t.get("cuda"), cuda_available=y.get("cuda_available"))
    elif t is None:
        f.torch = TorchFacts(import_error="ModuleNotFoundError: No module named 'torch'")
    return f


def _c18_thread(f: Facts) -> None:
    # the thread: nvidia-smi fails with the mismatch; user space 570.124.04, kernel module 570.124.06-p2p
    f.nvidia.smi_state = f.nvidia.nvml_state = "lib-mismatch"
    f.nvidia.smi_message = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124"
    f.nvidia.kernel_module_version = "570.124.06"


def _c06_thread(f: Facts) -> None:
    f.nvidia.smi_state = "cuda-err"  # "CUDA Version: ERR!" in the banner


def _c27_thread(f: Facts) -> None:
    # the thread is about PyTorch's ROCm build on Navi 33; the torch version is not named: assume 2.5.1+rocm6.2 (a 2025 build)
    f.torch = TorchFacts(installed=True, version="2.5.1+rocm6.2", variant="rocm6.2", hip="6.2.41133")


def _c25_thread(f: Facts) -> None:
    # system_profiler: bus 2 at 80 Gb/s to a Mac Studio advertising rdma; resolution: the Thunderbolt Bridge was on and the
    # RDMA ports had no own address (the default: members of bridge0 with a link-local address)
    f.apple.is_macos, f.apple.arch, f.apple.macos_version = True, "arm64", "26.2"
    f.thunderbolt.present = True
    f.thunderbolt.ports = [ThunderboltPort("Thunderbolt 5 bus 2", link_speed_gbps=80.0, peer="Mac Studio")]
    f.thunderbolt.bridge_enabled = True
    f.thunderbolt.rdma_state, f.thunderbolt.rdma_devices = "enabled", ["rdma_en2"]
    f.thunderbolt.interfaces = [
        NetInterface("bridge0", kind="thunderbolt-bridge", up=True, members=["en2", "en3"], addresses=["169.254.33.9/16"]),
        NetInterface("en2", kind="thunderbolt", up=True),
    ]


def _c32_thread(f: Facts) -> None:
    # JetPack 4.3 ships Python 3.6; plain `pip install torch` there gets PyPI's aarch64 CPU wheel (1.10.x was the last for 3.6)
    f.torch = TorchFacts(installed=True, version="1.10.2", cuda=None, cuda_available=False)


def _c36_thread(f: Facts) -> None:
    # a current default CUDA build on this 470 driver (the source's expectation: cu12x needs >= 525)
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6", cuda_available=False)


def _c05_thread(f: Facts) -> None:
    # Wan2.1 runs on a cu12x torch; the source: "cu12x wheels rely on CUDA minor-version compatibility" on driver 525
    f.torch = TorchFacts(installed=True, version="2.4.0+cu124", variant="cu124", cuda="12.4", cuda_available=True, device_count=1)


PROBLEM_CASES = [
    pytest.param("c18-nvml-mismatch-570-open-p2p-ubuntu2204", _c18_thread, "driver-library-mismatch", "fail", id="c18-lib-mismatch"),
    pytest.param("c06-wsl2-rtx3060laptop-driver546-cuda-err", _c06_thread, "wsl-driver", "warn", id="c06-wsl-cuda-err"),
    pytest.param("c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override", _c27_thread, "rocm-gfx-unsupported", "fail", id="c27-gfx1102"),
    pytest.param("c25-macmini-to-macstudio-tb5-rdma-system_profiler", _c25_thread, "thunderbolt-link-local-ip", "warn", id="c25-rdma-from-source"),
    pytest.param("c32-jetson-nano-jetbot-l4t-r32.3.1", _c32_thread, "jetson-wrong-wheel", "fail", id="c32-jetson-pypi-wheel"),
    pytest.param("c36-rtx3070-driver470-cuda114-ubuntu", _c36_thread, "driver-too-old", "fail", id="c36-driver-470-cu126"),
    pytest.param("c05-v100sxm2-32gb-driver525-linux", _c05_thread, "driver-minor-compat", "warn", id="c05-v100-525-cu124"),
]


@pytest.mark.parametrize("case, thread, code, severity", PROBLEM_CASES)
def test_real_machine_with_a_problem_gets_the_matching_finding(matrix, case, thread, code, severity):
    f = facts_from_source(case)
    thread(f)
    out = diagnose(f, matrix)
    hit = by_code(out, code)
    assert hit.severity == severity
    assert hit.fix
    for x in out:
        if x.severity != "ok":
            assert x.fix, x


def test_c27_override_and_igpu(matrix):
    f = facts_from_source("c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override")
    _c27_thread(f)
    out = [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"]
    assert any(x.fix.startswith("export HSA_OVERRIDE_GFX_VERSION=11.0.0") for x in out)
    assert any(x.fix == "export HIP_VISIBLE_DEVICES=0" for x in out)


def test_c36_fix_is_a_cuda_11_build(matrix):
    f = facts_from_source("c36-rtx3070-driver470-cuda114-ubuntu")
    _c36_thread(f)
    hit = by_code(diagnose(f, matrix), "driver-too-old")
    assert "470.57.02" in hit.detail and "525.60.13" in hit.detail
    assert re.search(r"--variant cu11\d", hit.fix), hit.fix


def test_c18_names_both_versions(matrix):
    f = facts_from_source("c18-nvml-mismatch-570-open-p2p-ubuntu2204")
    _c18_thread(f)
    hit = by_code(diagnose(f, matrix), "driver-library-mismatch")
    assert "570.124" in hit.detail and "570.124.06" in hit.detail
    assert "reboot" in hit.fix and "torch" not in hit.fix
    # with the libraries' file names as a witness, the exact user-space version (the thread's 570.124.04)
    f.nvidia.driver_library_version = "570.124.04"
    assert "are 570.124.04 but the loaded kernel module is 570.124.06" in by_code(diagnose(f, matrix), "driver-library-mismatch").detail


HEALTHY_CASES = [
    "c10-8xb200-driver610-kmd-umd-header",
    "c14-rtx4070-driver550-linux",
    "c22-linux-boltctl-razer-core-tb3-egpu",
    "c30-8xmi300x-gfx942-rocm633-rocminfo-sclk",
    "c40-proc-driver-nvidia-version-open-565-ubuntu2404",
    "c48-wsl2-rtx4070-laptop-driver551-torch240cu121-collect_env",
    "c51-intel-mac-t2-ifconfig-bridge0-4-thunderbolt-ports",
    "c05-v100sxm2-32gb-driver525-linux",
]


@pytest.mark.parametrize("case", HEALTHY_CASES)
def test_real_machine_without_a_stack_problem_has_no_fail(matrix, case):
    out = diagnose(facts_from_source(case), matrix)
    assert not codes(out, ("fail",)), [(x.code, x.detail) for x in out if x.severity == "fail"]
    for x in out:
        if x.severity != "ok":
            assert x.fix


def test_c48_wsl_working_torch_is_ok(matrix):
    f = facts_from_source("c48-wsl2-rtx4070-laptop-driver551-torch240cu121-collect_env")
    out = diagnose(f, matrix)
    assert {"torch-ok", "runtime-ok"} <= {x.code for x in out}
    assert not codes(out)


# ---------------------------------------------------------------------------- through `check`'s judge (the findings a report carries)


@pytest.mark.parametrize("code, change", TRIGGER)
def test_report_findings_have_fixes_and_explanations(matrix, code, change, monkeypatch):
    """Every finding `check` puts in a report: a fix when it warns or fails, and an `explain` text in both languages."""
    from stackdoctor.model.report import Report
    from stackdoctor.pipeline import Options, judge

    monkeypatch.delenv("STACKDOCTOR_MATRIX", raising=False)
    f = healthy(matrix)
    probes = change(f, matrix) or []
    report = judge(Report(facts=f, probes=probes), Options(replay="synthetic.json", kernels=False), matrix)
    assert code in {x.code for x in report.findings}
    for x in report.findings:
        if x.severity in ("warn", "fail"):
            assert x.fix, x
        for lang in catalog.LANGS:
            assert catalog.explain(x.code, lang), (x.code, lang)


# ---------------------------------------------------------------------------- both paths: torch read from its files vs imported

# What only `import torch` can tell: torch's runtime and what it sees. `check --no-kernels` reads torch from
# its files, so these stay unknown there (tests/test_target_probe.py shows the real probe does this).
IMPORT_ONLY = ("cuda_available", "cuda_error", "device_count", "devices", "cudnn_version", "nccl_version", "mps_built", "mps_available",
               "xpu_available", "xpu_error", "distributed_available", "distributed_backends", "config", "arch_list_torch")
# the findings only an import can give: the runtime's own verdicts, and the comparison of torch's arch list with the files'
IMPORT_CODES = {"runtime-ok", "cuda-unavailable", "xpu-unavailable", "mps-unavailable", "torch-arch-list-mismatch"}


def _as_read_only(f: Facts) -> Facts:
    """The same machine as ``check --no-kernels`` reports it: torch read from its files, not imported
    (version, CUDA/HIP, the arch list in libtorch_cuda.so and the distributions as before; the runtime unknown)."""
    t, blank = f.torch, TorchFacts()
    for name in IMPORT_ONLY:
        setattr(t, name, copy.deepcopy(getattr(blank, name)))
    t.imported = False
    t.arch_list_files = list(t.arch_list_files or t.arch_list)
    t.location = t.location or "/venv/lib/python3.12/site-packages/torch"  # the static read always finds the package
    return f


def _runtime_said_something(t: TorchFacts) -> bool:
    """The imported torch reported a problem, which only the importing path can see."""
    runtime = t.cuda_available is False and bool(t.cuda or t.hip) or bool(t.cuda_error) or t.xpu_available is False or t.mps_available is False
    own_list = bool(t.arch_list_torch and t.arch_list_files) and set(t.arch_list_torch) != set(t.arch_list_files)
    return runtime or own_list


def _both_paths_apply(f: Facts) -> bool:
    t = f.torch
    # a CUDA torch's device list is a witness of the GPUs only the import has: where it disagrees with
    # nvidia-smi, the importing path says so (source-conflict) and the files cannot
    sees_other = bool(t.cuda) and t.device_count is not None and bool(f.nvidia.gpus) and t.device_count != len(f.nvidia.gpus)
    return (t.installed and not t.import_error and t.import_error_kind is None and t.imported is not False
            and not _runtime_said_something(t) and not sees_other)


def _problems(findings: list[Finding]) -> set[tuple[str, str]]:
    return {(x.code, x.severity) for x in findings if x.code not in IMPORT_CODES and x.severity != "ok"}


def _machine_facts() -> list:
    import json

    from stackdoctor.model.facts import from_data

    out = []
    for path in sorted((HERE / "fixtures" / "machines").glob("*.json")):
        out.append(pytest.param(lambda m, p=path: from_data(Facts, json.loads(p.read_text())["facts"]), id=f"machine-{path.stem}"))
    return out


def _scenario_facts() -> list:
    out = [pytest.param(lambda m: healthy(m), id="healthy")]
    for p in TRIGGER + NOT_TRIGGER:
        _, change = p.values

        def build(m, change=change):
            f = healthy(m)
            change(f, m)
            return f

        out.append(pytest.param(build, id=f"scenario-{p.id}"))
    return out


def _real_facts() -> list:
    """The real machines (public bug reports) with what their threads add, and c48 (torch 2.4.0+cu121, collect_env)."""
    out = []
    for p in PROBLEM_CASES:
        case, thread = p.values[0], p.values[1]

        def build(m, case=case, thread=thread):
            f = facts_from_source(case)
            thread(f)
            return f

        out.append(pytest.param(build, id=f"real-{p.id}"))
    c48 = "c48-wsl2-rtx4070-laptop-driver551-torch240cu121-collect_env"
    out.append(pytest.param(lambda m: facts_from_source(c48), id="real-c48"))
    return out


def _applies(p) -> bool:
    try:
        return _both_paths_apply(p.values[0](load_matrix([])))
    except pytest.skip.Exception:  # a shared real case not present in this checkout
        return False


ALL_FACTS = _scenario_facts() + _real_facts() + _machine_facts()
BOTH_PATHS = [p for p in ALL_FACTS if _applies(p)]


@pytest.mark.parametrize("build", BOTH_PATHS)
def test_reading_torch_from_its_files_gives_the_same_findings_as_importing_it(matrix, build):
    """Every scenario and every recorded machine where torch imports and its runtime reports nothing:
    with torch read from its files only, the problems found are the importing path's; what needs the
    import (runtime-ok, the arch-list comparison) is absent; the "ok" findings are a subset (torch's
    device list is one more witness of a GPU); and torch-ok says that torch was not imported."""
    f = build(matrix)
    imported = diagnose(copy.deepcopy(f), matrix)
    read = diagnose(_as_read_only(copy.deepcopy(f)), matrix)
    assert _problems(read) == _problems(imported)
    assert not {x.code for x in read} & IMPORT_CODES
    assert codes(read, ("ok",)) - {"runtime-not-verified"} <= codes(imported, ("ok",))
    gpu_build = kinds.build_kind(f.torch) not in (None, kinds.CPU)  # issue 42: a GPU build's runtime is unproven
    assert ("runtime-not-verified" in codes(read, ("ok",))) == gpu_build and "runtime-not-verified" not in codes(imported, ("ok",))
    if "torch-ok" in {x.code for x in imported}:
        assert "not imported" in by_code(read, "torch-ok").detail


def test_both_paths_cover_most_scenarios():
    """The comparison above is not vacuous: it runs on most scenarios and on machines with a GPU build."""
    ids = {p.id for p in BOTH_PATHS}
    scenarios = [p for p in ALL_FACTS if p.id.startswith("scenario-")]
    assert len([i for i in ids if i.startswith("scenario-")]) >= len(scenarios) // 2, sorted(ids)
    assert {"healthy", "scenario-cu130-on-550", "scenario-rtx5090-on-cu126", "scenario-cpu-build-with-rtx4090"} <= ids
    assert {"real-c27-gfx1102", "real-c05-v100-525-cu124", "real-c32-jetson-pypi-wheel"} <= ids  # real machines with a torch


# ---------------------------------------------------------------------------- torch does not import: the files still judge


def _aborting_cuda_torch(f, m, version: str, variant: str, cuda: str) -> None:
    """``import torch`` aborted (hipErrorNoBinaryForGpu-style) after the files were read: the target probe's facts."""
    f.torch = TorchFacts(
        installed=True,
        imported=False,
        version=version,
        variant=variant,
        cuda=cuda,
        arch_list=arch(m, public_version(version), variant),
        arch_list_files=arch(m, public_version(version), variant),
        location="/venv/lib/python3.12/site-packages/torch",
        import_error="the target interpreter died while importing torch (killed by SIGABRT)",
        import_error_kind="crash",
        sources={"version": "/venv/lib/python3.12/site-packages/torch/version.py", "arch_list": LIBTORCH_CUDA},
    )


def public_version(v: str) -> str:
    return v.split("+", 1)[0]


def test_import_abort_still_judges_arch_and_driver_from_the_files(matrix):
    f = healthy(matrix)
    _swap_gpu(f, "NVIDIA GeForce GTX 1080", "6.1")
    f.nvidia.driver_version = f.nvidia.kernel_module_version = "550.54.14"
    f.nvidia.cuda_driver_version = "12.4"
    _aborting_cuda_torch(f, matrix, "2.13.0+cu130", "cu130", "13.0")
    out = diagnose(f, matrix)
    got = codes(out)
    assert {"torch-import-failed", "gpu-arch-unsupported", "driver-too-old"} <= got, got
    assert not got & {"torch-missing", "cuda-unavailable"}
    assert not codes(out, ("ok",)) & {"torch-ok", "runtime-ok"}  # nothing claims torch runs
    hit = by_code(out, "gpu-arch-unsupported")
    assert "sm_61" in hit.detail and "sm_75" in hit.detail and "libtorch_cuda.so" in hit.detail  # the files' list, named
    assert "13.0" in by_code(out, "driver-too-old").detail


def test_import_abort_still_judges_rocm_gfx_from_the_files(matrix):
    f = healthy(matrix)
    _gfx(f, matrix)
    f.torch = TorchFacts(installed=True, imported=False, version="2.5.1+rocm6.2", variant="rocm6.2", hip="6.2.41133",
                         import_error="the target interpreter died while importing torch (killed by SIGABRT): "
                                      "HIP error: hipErrorNoBinaryForGpu", import_error_kind="crash")
    out = diagnose(f, matrix)
    got = codes(out)
    # the abort is rocm-gfx-unsupported's evidence: that finding quotes it beside its fix, once
    assert "rocm-gfx-unsupported" in got and not got & {"torch-missing", "torch-import-failed"}, got
    hit = by_code(out, "rocm-gfx-unsupported")
    assert "gfx1102" in hit.detail and "hipErrorNoBinaryForGpu" in hit.detail, hit.detail
    assert not codes(out, ("ok",)) & {"torch-ok", "runtime-ok"}  # nothing claims torch runs
