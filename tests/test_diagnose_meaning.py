"""Diagnose from values and from every witness, not from one wording (issue 33).

The texts are torch's own, as public bug reports quote them (URL beside each); the machines are built from
``tests/test_diagnose.py``'s healthy one with the witnesses a recording had removed.
"""

from __future__ import annotations

import pytest
from test_diagnose import by_code, codes, healthy
from test_target_probe import make_fake_torch_env, run_probe

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import IntelGpu, KfdNode, NvidiaFacts, PciDevice, TorchFacts
from stackdoctor.reconcile import reconcile
from stackdoctor.rules.diagnose import diagnose

# torch 1.0 (torch/cuda/__init__.py _check_driver): a multi-line AssertionError whose last line says nothing;
# the worker's one-line form of it (every line kept). https://github.com/wuhuikai/FastFCN/issues/37
ASSERTION_1X = (
    "AssertionError: \nThe NVIDIA driver on your system is too old (found version 9000).\n"
    "Please update your GPU driver by downloading and installing a new\nversion from the URL: "
    "http://www.nvidia.com/Download/index.aspx\nAlternatively, go to: https://pytorch.org to install\n"
    "a PyTorch version that has been compiled with your version\nof the CUDA driver."
)
# torch 1.7.1 (c10/cuda/CUDAFunctions.cpp:100), a warning: https://github.com/ultralytics/yolov5/issues/2389
WARNING_171 = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version 10010). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
    "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver. "
    "(Triggered internally at  /pytorch/c10/cuda/CUDAFunctions.cpp:100.)"
)
# torch 2.9 cu130 on a 12.8 driver (c10/cuda/CUDAFunctions.cpp:119): https://github.com/pytorch/pytorch/pull/162531
WARNING_29 = (
    "CUDA initialization: The NVIDIA driver on your system is too old (found version 12080). Please update your GPU driver by "
    "downloading and installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
    "https://pytorch.org/ to install a PyTorch version that has been compiled with your version of the CUDA driver. "
    "(Triggered internally at /var/lib/jenkins/workspace/c10/cuda/CUDAFunctions.cpp:119.)"
)
# torch 0.4 (THC), the CUDA runtime's own sentence, no number:
# https://github.com/microsoft/human-pose-estimation.pytorch/issues/23
RUNTIME_04 = "RuntimeError: cuda runtime error (35) : CUDA driver version is insufficient for CUDA runtime version at /pytorch/aten/src/THC/THCGeneral.cpp:74"
# a CUDA 13 torch: https://github.com/nagadomi/nunif/issues/702
RUNTIME_CU13 = "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version"

WORDINGS = [
    pytest.param(ASSERTION_1X, "9.0", id="torch-1.0-multiline-assertionerror"),
    pytest.param(" ".join(ln.strip() for ln in ASSERTION_1X.splitlines() if ln.strip()), "9.0", id="torch-1.0-as-the-worker-flattens-it"),
    pytest.param(WARNING_171, "10.1", id="torch-1.7.1-warning"),
    pytest.param(WARNING_29, "12.8", id="torch-2.9-cu130-warning"),
    pytest.param(RUNTIME_04, None, id="torch-0.4-cuda-runtime-error-35"),
    pytest.param(RUNTIME_CU13, None, id="cuda-13-runtime-insufficient"),
    pytest.param(WARNING_29.replace("found version", "found"), "12.8", id="without-the-word-version"),
]


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([])


def _no_tools(f, text: str | None = None):
    """A cu130 torch that imported; no nvidia-smi, NVML, kernel module or PCI witness (a container, a replay)."""
    f.platform.nvidia_pci_devices = []
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.torch.version, f.torch.variant, f.torch.cuda, f.torch.torchvision_version = "2.13.0+cu130", "cu130", "13.0", None
    f.torch.cuda_available, f.torch.device_count, f.torch.devices = False, 0, []
    f.torch.cuda_error = text
    return f


@pytest.mark.parametrize("text, level", WORDINGS)
def test_driver_too_old_in_every_wording_and_never_no_gpu(matrix, text, level):
    f = _no_tools(healthy(matrix), text)
    out = diagnose(f, matrix)
    hit = by_code(out, "driver-too-old")
    assert hit.severity == "fail"
    if level:
        assert reconcile(f, matrix).reconciled.cuda_driver_version.value == level
        assert level in hit.detail
    # torch's words prove a driver: never "a machine without an NVIDIA GPU", never "the CPU build would do"
    assert "torch-gpu-build-no-gpu" not in codes(out)
    assert "--variant cpu" not in hit.fix


def test_the_driver_api_number_decides_whatever_the_sentence(matrix):
    """torch._C._cuda_getDriverVersion() = 12020 under a cu130 build: too old, though the sentence names no version."""
    f = _no_tools(healthy(matrix), "CUDA unknown error - this may be due to an incorrectly set up environment")
    f.torch.driver_api_version = 12020
    out = diagnose(f, matrix)
    seen = reconcile(f, matrix).reconciled.cuda_driver_version
    assert seen.value == "12.2" and seen.source == "torch._C._cuda_getDriverVersion()"
    assert "driver-too-old" in codes(out) and "torch-gpu-build-no-gpu" not in codes(out)


def test_a_new_enough_driver_api_number_is_no_too_old(matrix):
    f = _no_tools(healthy(matrix), "CUDA unknown error - this may be due to an incorrectly set up environment")
    f.torch.driver_api_version = 13000
    assert "driver-too-old" not in codes(diagnose(f, matrix))


def test_the_worker_keeps_every_line_of_the_assertionerror(tmp_path, matrix):
    """A stand-in torch 1.x: is_available() False without a word, torch.cuda.init() raises _check_driver's
    multi-line AssertionError; the worker returns all of it and the driver's number from torch._C."""
    init = '''
__version__ = "1.2.0"
class version:
    cuda = "10.0"; hip = None; debug = False
class _C:
    @staticmethod
    def _cuda_getDriverVersion():
        return 9000
class _Cuda:
    @staticmethod
    def is_available():
        return False
    @staticmethod
    def init():
        raise AssertionError(%r)
    @staticmethod
    def device_count():
        return 0
    @staticmethod
    def get_arch_list():
        return []
cuda = _Cuda()
''' % ASSERTION_1X.split(": ", 1)[1]
    out = run_probe(make_fake_torch_env(tmp_path, init))
    t = out.facts["torch"]
    assert t.driver_api_version == 9000
    assert "too old (found version 9000)" in t.cuda_error and t.cuda_error.endswith("of the CUDA driver.")
    assert "\n" not in t.cuda_error


# ---------------------------------------------------------------------------- no claim a witness contradicts


def test_no_gpu_claim_only_without_any_witness(matrix):
    f = _no_tools(healthy(matrix), None)
    assert "torch-gpu-build-no-gpu" in codes(diagnose(f, matrix))
    f = _no_tools(healthy(matrix), None)
    f.nvidia.kernel_module_version, f.nvidia.sources = "550.54.14", {"kernel_module_version": "file:/proc/driver/nvidia/version"}
    assert "torch-gpu-build-no-gpu" not in codes(diagnose(f, matrix))


def test_fast_path_in_a_container_says_what_it_could_not_verify(matrix):
    f = _no_tools(healthy(matrix), None)
    f.platform.container, f.platform.container_nvidia_devices = "docker", None
    f.torch = TorchFacts(installed=True, version="2.13.0+cu130", variant="cu130", cuda="13.0", imported=False,
                         location="/venv/lib/python3.12/site-packages/torch", distributions={"torch": "2.13.0+cu130"})
    hit = by_code(diagnose(f, matrix), "torch-gpu-build-no-gpu")
    assert "not known" in hit.detail and "has no NVIDIA GPU" not in hit.detail  # issue 42: no witness either way


def test_cvd_hiding_the_only_gpu_when_only_torch_sees_the_driver(matrix):
    """CUDA_VISIBLE_DEVICES=1 on a one-GPU machine, no nvidia-smi: torch counts 0 (cudaErrorNoDevice, no
    warning), torch.cuda.init() says "No CUDA GPUs are available", its runtime reaches a CUDA 13.0 driver."""
    f = _no_tools(healthy(matrix), "RuntimeError: No CUDA GPUs are available")
    f.torch.driver_api_version = 13000
    f.environment["CUDA_VISIBLE_DEVICES"] = "1"
    out = diagnose(f, matrix)
    hit = by_code(out, "cuda-visible-devices-hides-all")
    assert "CUDA_VISIBLE_DEVICES='1'" in hit.detail and "13.0" in hit.detail
    assert "torch-gpu-build-no-gpu" not in codes(out)


def test_cvd_set_but_no_driver_is_not_blamed(matrix):
    f = _no_tools(healthy(matrix), "RuntimeError: Found no NVIDIA driver on your system.")
    f.torch.driver_api_version = 0
    f.environment["CUDA_VISIBLE_DEVICES"] = "0"
    assert "cuda-visible-devices-hides-all" not in codes(diagnose(f, matrix))


def test_cuda_wheel_on_an_amd_apu_is_a_backend_mismatch(matrix):
    """Strix Halo (gfx1151, an APU the ROCm 7.x builds carry) known from its KFD topology
    (tests/fixtures/real/r-kfd-topology-gfx1151-strix-halo-lemonade-419), a cu130 wheel, no NVIDIA tool."""
    f = _no_tools(healthy(matrix), None)
    f.platform.amd_pci_devices = [PciDevice("0000:c2:00.0", "0x1002", "0x1586", "0x038000", driver="amdgpu")]
    f.rocm.kfd_present = f.rocm.amdgpu_loaded = True
    f.rocm.kfd_nodes = [KfdNode(node=1, gfx_target_version=110501, gfx="gfx1151", vendor_id="0x1002", device_id="0x1586",
                                simd_count=64, bus_id="0000:c2:00.0")]
    out = diagnose(f, matrix)
    hit = by_code(out, "torch-backend-mismatch")
    assert "gfx1151" in hit.detail and "rocm" in hit.fix
    assert "torch-gpu-build-no-gpu" not in codes(out)


# ---------------------------------------------------------------------------- containers


@pytest.mark.parametrize("runtime, fix", [("docker", "--gpus all"), ("podman", "nvidia.com/gpu=all"), ("apptainer", "--nv")])
def test_container_without_gpu_and_torch_found_no_driver(matrix, runtime, fix):
    # torch 2.x's sentence (c10/cuda/CUDAFunctions.cpp device_count_impl), raised by torch.cuda.init()
    f = _no_tools(healthy(matrix), "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU "
                                   "and installed a driver from http://www.nvidia.com/Download/index.aspx")
    f.torch.driver_api_version = 0
    f.platform.container, f.platform.container_nvidia_devices = runtime, False
    out = diagnose(f, matrix)
    # issue 42: torch's "no driver" is no witness that the host has a GPU: not known, the container's way named, and the
    # fast path says the same finding (tests/test_recorded_error_codes.py)
    hit = by_code(out, "torch-gpu-build-no-gpu")
    assert fix in hit.detail and "Found no NVIDIA driver" in hit.detail and "not known" in hit.detail
    assert "container-no-gpu" not in codes(out)


def test_found_no_driver_outside_a_container_is_the_cpu_build_hint(matrix):
    f = _no_tools(healthy(matrix), "RuntimeError: Found no NVIDIA driver on your system.")
    assert "torch-gpu-build-no-gpu" in codes(diagnose(f, matrix))


@pytest.mark.parametrize("how", ["files", "env"])
def test_apptainer_is_detected_and_its_gpu_access_read_from_its_libs(tmp_path, how):
    import sys

    from stackdoctor.model.probing import ProbeContext, Target
    from stackdoctor.probes import platform as plat
    from stackdoctor.system import System

    (tmp_path / ".singularity.d" / "libs").mkdir(parents=True)
    env = {"PATH": "", "APPTAINER_CONTAINER": "/images/train.sif"} if how == "env" else {"PATH": ""}

    def gather():
        return plat.gather(ProbeContext(system=System(sysroot=str(tmp_path), env=env, timeout_s=5.0), target=Target(sys.executable, "self")))

    f = gather()
    assert f.container == "apptainer" and f.container_nvidia_devices is False
    (tmp_path / ".singularity.d" / "libs" / "libcuda.so.1").write_bytes(b"")  # what `--nv` binds in
    assert gather().container_nvidia_devices is True


# ---------------------------------------------------------------------------- XPU


def test_xpu_devices_fail_to_initialise(matrix):
    """torch 2.7's warning on an Intel GPU (https://github.com/pytorch/pytorch/issues/147226), the family unknown
    to the matrix: the XPU-unavailable finding with the driver/runtime fix, not only a files warning."""
    f = healthy(matrix)
    f.nvidia, f.platform.nvidia_pci_devices = NvidiaFacts(), []
    f.intel.gpus = [IntelGpu(address="0000:03:00.0", device_id="0x56a5", driver="i915")]
    f.torch = TorchFacts(installed=True, version="2.13.0+xpu", variant="xpu", cuda_available=False, xpu_available=False,
                         xpu_error="Failed to initialize XPU devices. The driver may not be installed, installed incorrectly, or incompatible "
                                   "with the current setup. Please refer to the guideline (https://github.com/pytorch/pytorch?tab=readme-ov-file"
                                   "#intel-gpu-support) for proper installation and configuration. (Triggered internally at "
                                   "/pytorch/c10/xpu/XPUFunctions.cpp:109.)",
                         distributions={"torch": "2.13.0+xpu"})
    hit = by_code(diagnose(f, matrix), "xpu-unavailable")
    assert "Failed to initialize XPU devices" in hit.detail and "libze" in hit.fix


# ---------------------------------------------------------------------------- libc from the files


def test_glibc_version_read_from_libc_so_6_agrees_with_confstr(tmp_path):
    """glibc 2.34+ names its library only libc.so.6: its own GLIBC_2.xx version definitions give the release.
    This machine's real libc.so.6, copied into a sysroot, against what its glibc says of itself."""
    import os
    import shutil
    import sys

    from stackdoctor.model.probing import ProbeContext, Target
    from stackdoctor.probes import platform as plat
    from stackdoctor.system import System

    said = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None
    real = next((p for p in ("/lib/x86_64-linux-gnu/libc.so.6", "/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6", "/usr/lib/libc.so.6")
                 if os.path.isfile(p)), None)
    if not said or not said.startswith("glibc ") or real is None:
        pytest.skip("not a glibc machine")
    lib = tmp_path / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    shutil.copyfile(real, lib / "libc.so.6")
    f = plat.gather(ProbeContext(system=System(sysroot=str(tmp_path), env={"PATH": ""}, timeout_s=5.0), target=Target(sys.executable, "self")))
    assert f.libc == "glibc" and f.sources["glibc_version"] == "file:/lib/x86_64-linux-gnu/libc.so.6"
    assert f.glibc_version == said.split()[1]
