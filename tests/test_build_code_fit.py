"""The build's own code decides the GPU fit (stackdoctor/accelerators/amd/rules.py, nvidia_rules.py).

The installed torch's ``libtorch_hip.so`` is read by the real static probe (the offload bundles of
tests/binfixtures.py, or a real zstd-compressed library from PyPI's bitsandbytes wheel), joined into the facts as
``check --no-kernels`` joins it, and judged against each GPU's gfx target. The matrix's list is used only where the
files cannot be read, and the finding then says it was inferred.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from binfixtures import bundle, cached_wheel, elf, extract

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, NvidiaFacts, PciDevice, PlatformFacts, RocmGpu, TorchFacts
from stackdoctor.probes.target import merge_static
from stackdoctor.probes.torch_static import read_static_torch
from stackdoctor.rules.diagnose import diagnose
from stackdoctor.system import System

HOST = "host-x86_64-unknown-linux-gnu-"
HIP = "hipv4-amdgcn-amd-amdhsa--"
SITE = "/venv/lib/python3.11/site-packages"
# torch 2.7.0+rocm6.2.4: the matrix's list (uv's table for ROCm 6.2.4) names gfx1200 and gfx1201
VERSION_PY = "__version__ = '2.7.0+rocm6.2.4'\nhip = '6.2.41134'\ncuda = None\ndebug = False\n"
OLDER_LIST = ["gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101"]  # no RDNA4 code


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([])


def site_with(root: Path, hip_lib: bytes | None, version_py: str = VERSION_PY) -> None:
    pkg = root / SITE.lstrip("/") / "torch"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('never imported')\n")
    (pkg / "version.py").write_text(version_py)
    if hip_lib is not None:
        (pkg / "lib" / "libtorch_hip.so").write_bytes(hip_lib)
    d = root / SITE.lstrip("/") / f"torch-{version_py.split(chr(39))[1].split('+')[0]}.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.7.0+rocm6.2.4\n\n")


def hip_library(targets: list[str], units: int = 3) -> bytes:
    one = bundle([(HOST, b"")] + [(HIP + t, b"\x7fELF" + t.encode() * 8) for t in targets])
    return elf([(".text", b"\x90" * 16), (".hip_fatbin", one * units)])


def machine(root: Path, gfx: str, name: str) -> Facts:
    """An AMD GPU seen by the KFD topology and the fast path's torch, read from the files under ``root``."""
    st = read_static_torch(System(sysroot=str(root)), [SITE])
    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64", amd_pci_devices=[PciDevice("0000:03:00.0", "0x1002", "0x7551", "0x030000", driver="amdgpu")])
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")
    f.rocm.gpus = [RocmGpu(0, name, gfx)]
    f.rocm.kfd_present = f.rocm.kfd_accessible = f.rocm.amdgpu_loaded = True
    f.torch = merge_static(TorchFacts(installed=True), st, imported=False)
    return f


def test_rdna4_on_a_build_without_its_code_fails_although_the_matrix_lists_it(tmp_path, matrix):
    """The issue's case: an RX 9070 XT (gfx1201) on a ROCm 6.2.4 build whose library carries no gfx12 code; the
    matrix's row for it names gfx1201, so judging by the matrix said all ok."""
    assert "gfx1201" in matrix.variant("2.7.0", "rocm6.2.4").gfx  # the premise: the matrix would have passed it
    site_with(tmp_path, hip_library(OLDER_LIST))
    f = machine(tmp_path, "gfx1201", "AMD Radeon RX 9070 XT")
    assert f.torch.arch_list_files == OLDER_LIST and f.torch.imported is False
    found = [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"]
    assert len(found) == 1 and found[0].severity == "fail"
    assert "gfx1201" in found[0].detail and "libtorch_hip.so" in found[0].detail and "inferred" not in found[0].detail


def test_code_the_files_carry_passes_where_the_matrix_lacks_it(tmp_path, matrix):
    """torch 2.6.0+rocm6.2.4: the matrix leaves gfx1102 out of its list; a library that carries gfx1102 code runs it."""
    version_py = VERSION_PY.replace("2.7.0", "2.6.0")
    assert "gfx1102" not in matrix.variant("2.6.0", "rocm6.2.4").gfx
    site_with(tmp_path, hip_library(OLDER_LIST + ["gfx1102"]), version_py)
    f = machine(tmp_path, "gfx1102", "AMD Radeon RX 7600")
    assert [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"] == []


def test_without_readable_files_the_matrix_is_said_to_be_inferred(tmp_path, matrix):
    version_py = VERSION_PY.replace("2.7.0", "2.6.0")
    site_with(tmp_path, None, version_py)
    f = machine(tmp_path, "gfx1102", "AMD Radeon RX 7600")
    found = [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"]
    assert len(found) == 1 and "inferred from the matrix" in found[0].detail


def test_a_real_compressed_rocm64_library_has_no_gfx950_code(tmp_path, matrix):
    """A real ROCm 6.4 library (bitsandbytes 0.50.2's, zstd-compressed bundles) as the build's code: an MI350X
    (gfx950) is judged from those files, whatever the matrix lists."""
    real = extract(cached_wheel("bitsandbytes==0.50.2", "bitsandbytes-0.50.2"), "bitsandbytes/libbitsandbytes_rocm64.so").read_bytes()
    site_with(tmp_path, real)
    f = machine(tmp_path, "gfx950", "AMD Instinct MI350X")
    assert "gfx942" in f.torch.arch_list_files and "gfx950" not in f.torch.arch_list_files
    found = [x for x in diagnose(f, matrix) if x.code == "rocm-gfx-unsupported"]
    assert len(found) == 1 and "gfx950" in found[0].detail and "libtorch_hip.so" in found[0].detail
    ok = machine(tmp_path, "gfx942", "AMD Instinct MI300X")
    assert [x for x in diagnose(ok, matrix) if x.code == "rocm-gfx-unsupported"] == []


def test_a_cuda_build_whose_files_were_not_read_says_its_list_is_inferred(matrix):
    """An RTX 5090 (sm_120) on torch 2.5.1+cu124, read from neither torch nor its libraries: the matrix's arch list
    judges it, and the finding says it was inferred."""
    from test_diagnose import healthy

    f = healthy(matrix)
    f.nvidia.gpus[0].name, f.nvidia.gpus[0].compute_capability = "NVIDIA GeForce RTX 5090", "12.0"
    f.torch = TorchFacts(installed=True, version="2.5.1+cu124", variant="cu124", cuda="12.4", imported=False)
    found = [x for x in diagnose(f, matrix) if x.code == "gpu-arch-unsupported"]
    assert len(found) == 1 and "inferred from the matrix" in found[0].detail and "sm_120" in found[0].detail
