"""Every witness counts (issue 12): each witness alone produces the right finding, the same GPU seen by several
witnesses is one GPU, witnesses that disagree are a finding of their own, and the resolver plans from the
reconciled view. The messages and tool outputs are real recordings from public bug reports
(tests/fixtures/real/<case>/source.md); where a test changes or combines one, it says so.

The end-to-end tests run the real CLI on a captured tree (``STACKDOCTOR_SYSROOT``) with fake tools that
replay recorded outputs.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from conftest import real_fixture, write_fake_tool
from helpers import machine_env, run_sd

from stackdoctor import matrix as mx
from stackdoctor.accelerators.amd import probe as rocm_probe
from stackdoctor.accelerators.nvidia import probe as nvidia_probe
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import (
    Facts,
    KfdNode,
    NvidiaFacts,
    NvidiaGpu,
    NvidiaProcGpu,
    PciDevice,
    PlatformFacts,
    PythonFacts,
    RocmFacts,
    RocmGpu,
    TorchDevice,
    TorchFacts,
)
from stackdoctor.model.plan import Request
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve import resolve, target_from
from stackdoctor.rules.diagnose import diagnose
from stackdoctor.system import System

C40 = "c40-proc-driver-nvidia-version-open-565-ubuntu2404"
P4_NOT = "r-kaggle-p100-torch-cu128-no-sm60-docker-python-1546"
FOUND_10020 = "r-torch-driver-too-old-found-10020-chexnet-42"
RX6700 = "r-rx6700xt-hipErrorNoBinaryForGpu-a1111-5067"
KFD1151 = "r-kfd-topology-gfx1151-strix-halo-lemonade-419"
KFD_DENIED = "r-rocminfo-kfd-permission-denied-rocm-docker-116"
H100_PROC = "r-proc-nvidia-gpus-information-h100-535"
L4_PROC = "r-proc-nvidia-gpus-information-l4-snapd-14893"
NCCL = "r-libtorch-cuda-undefined-symbol-ncclMemFree-returnn-1802"


@pytest.fixture(scope="module")
def m():
    return load_matrix([])


def linux(container: str | None = None) -> Facts:
    """A Linux x86_64 machine with Python 3.11 and nothing else known: each test adds only its witnesses."""
    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64", os_id="ubuntu", libc="glibc", glibc_version="2.35", container=container)
    f.python = PythonFacts(executable="/usr/bin/python3", version="3.11.9", implementation="cpython", platform_tag="manylinux_2_35_x86_64")
    f.nvidia = NvidiaFacts(smi_state="absent", nvml_state="absent")  # no nvidia-smi on PATH, no libnvidia-ml
    return f


def codes(out, severities=("warn", "fail")) -> set[str]:
    return {x.code for x in out if x.severity in severities}


def hit(out, code):
    found = [x for x in out if x.code == code]
    assert found, f"{code} not in {[(x.code, x.detail) for x in out]}"
    return found[0]


def last_line(text: str) -> str:
    return [ln for ln in text.splitlines() if ln.strip()][-1].strip()


def arch(m, version: str, variant: str) -> list[str]:
    return list(m.variant(version, variant).arch_list)


def planned_arch(m, fix: str) -> tuple[str, str, list[str]]:
    """(torch, variant, arch list) of a fix line ``stackdoctor install [--torch X] --variant V``."""
    mt = re.fullmatch(r"stackdoctor install (?:--torch (\S+) )?--variant (\S+)", fix.split("   #")[0].strip())
    assert mt, fix
    version = mt.group(1) or str(m.releases[0].version)
    return version, mt.group(2), arch(m, version, mt.group(2))


# ---------------------------------------------------------------------------- each witness alone


def test_p4_container_torch_alone_is_arch_unsupported_with_a_fitting_install_line(m):
    """A container without the `utility` capability (no nvidia-smi, no NVML): torch 2.9+cu128 lists a Tesla P4
    (capability 6.1) and its wheel starts at sm_70. torch's device list is the only witness of the GPU."""
    f = linux(container="docker")
    f.torch = TorchFacts(
        installed=True, version="2.9.0+cu128", variant="cu128", cuda="12.8", cuda_available=True, device_count=1,
        devices=[TorchDevice(0, "Tesla P4", "6.1", 7611)], arch_list=arch(m, "2.9.0", "cu128"),
    )
    r = reconcile(f, m)
    (g,) = r.reconciled.gpus
    assert (g.name, g.compute_capability, g.witnesses, g.sources["compute_capability"]) == ("Tesla P4", "6.1", ["torch"], "torch")
    assert g.seen["compute_capability"] == {"torch": "6.1", "reconcile: compat_matrix/gpus.yaml (name lookup)": "6.1"}  # they agree
    out = diagnose(f, m)
    a = hit(out, "gpu-arch-unsupported")
    assert a.severity == "fail" and "sm_61" in a.detail and "seen by torch" in a.detail
    version, variant, archs = planned_arch(m, a.fix)
    assert mx.arch_runs(archs, "6.1") and variant != "cu128", a.fix  # the line installs a build with kernels for the P4
    assert "source-conflict" not in codes(out)
    # install (the same resolver) plans that build from the reconciled view, and says how it knows the driver runs it
    plan = resolve(r, m, Request(torch="2.9.0"))
    assert (plan.torch_version, plan.variant) == (version, variant)
    assert any("torch's CUDA 12.8 build initialised on it" in w for w in plan.warnings), plan.warnings


def test_p100_with_torch_cu128_real_warning_proves_the_arch_finding(m):
    """Real recording (Kaggle/docker-python issue 1546): torch cu128 in a container on a P100 (sm_60). The warning
    text, as the kernel pass's stderr carries it, is evidence; the finding quotes it."""
    warnings = real_fixture(P4_NOT, "torch-warnings.txt")
    f = linux(container="docker")
    f.torch = TorchFacts(
        installed=True, version="2.10.0+cu128", variant="cu128", cuda="12.8", cuda_available=True, device_count=1,
        devices=[TorchDevice(0, "Tesla P100-PCIE-16GB", "6.0", 16269)], arch_list=arch(m, "2.10.0", "cu128"),
    )
    f.kernels.ran, f.kernels.stderr_tail = True, warnings
    r = reconcile(f, m)
    proofs = [e for e in r.reconciled.evidence if e.proves == "gpu-arch-unsupported"]
    assert proofs and proofs[0].values.get("compute_capability") in ("6.0", None)
    assert any("sm_60 is not compatible" in e.line for e in proofs)
    a = hit(diagnose(f, m), "gpu-arch-unsupported")
    assert "sm_60" in a.detail and "not compatible with the current PyTorch installation" in a.detail
    _, variant, archs = planned_arch(m, a.fix)
    assert mx.arch_runs(archs, "6.0") and variant.startswith("cu"), a.fix  # torch's own advice: the CUDA 12.6 build


def test_found_version_10020_with_cu121_and_no_smi_names_the_cuda_10_2_ceiling(m):
    """The real message (arnoweng/CheXNet issue 42) is the only witness of the driver: its CUDA level is 10.2."""
    line = last_line(real_fixture(FOUND_10020, "torch-error.txt"))
    f = linux()
    f.platform.nvidia_pci_devices = [PciDevice("0000:01:00.0", "0x10de", "0x1b06", "0x030000", driver="nvidia")]
    f.torch = TorchFacts(installed=True, version="2.4.1+cu121", variant="cu121", cuda="12.1", cuda_available=False, device_count=0, cuda_error=line)
    r = reconcile(f, m)
    assert r.reconciled.cuda_driver_version.value == "10.2"
    assert r.reconciled.cuda_driver_version.witnesses == {"torch.cuda_error": "10.2"}
    out = diagnose(f, m)
    d = hit(out, "driver-too-old")
    assert d.severity == "fail" and "up to 10.2" in d.detail and "found version 10020" in d.detail and "12.1" in d.detail
    assert "525.60.13" in d.fix  # the driver CUDA 12.x needs
    assert "--variant cpu" not in d.fix  # a CPU build is no fix where a driver is there
    assert "driver-too-old" in hit(out, "cuda-unavailable").detail
    # the resolver knows the ceiling too: every CUDA build the matrix has needs more than CUDA 10.2
    t = target_from(r, m, Request())
    assert t.driver is None and t.driver_cuda == "10.2"
    plan = resolve(r, m, Request(variant="cu118"))
    assert plan.variant is None and any("runs CUDA up to 10.2" in x.reason for x in plan.rejected), [x.reason for x in plan.rejected]


def _kfd_tree(root: Path, properties: str) -> None:
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 12\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n")
    (nodes / "1").mkdir()
    (nodes / "1/properties").write_text(properties)


def rx6700xt_properties() -> str:
    """The real gfx1151 capture with the values that identify the chip replaced by an RX 6700 XT's (no public capture
    of a gfx1031 properties file was found; source.md of the RX 6700 XT case names each value's source)."""
    text = real_fixture(KFD1151, "properties.txt")
    for key, value in (("gfx_target_version", "100301"), ("device_id", "29663"), ("location_id", "768"), ("local_mem_size", "12868124672"), ("simd_count", "80")):
        text, n = re.subn(rf"(?m)^{key} \d+$", f"{key} {value}", text)
        assert n == 1, key
    return text


def test_hip_no_binary_on_gfx1031_known_only_from_kfd_names_the_override(m, tmp_path):
    """No rocminfo, no amd-smi: the kernel's KFD topology is the only witness of the gfx target; torch aborted with
    the real message (AUTOMATIC1111/stable-diffusion-webui issue 5067, an RX 6700 XT)."""
    _kfd_tree(tmp_path, rx6700xt_properties())
    empty = tmp_path / "bin"
    empty.mkdir()
    ctx = ProbeContext(system=System(sysroot=str(tmp_path), env={"PATH": str(empty)}), target=Target("python", "self"))
    f = linux()
    f.rocm = rocm_probe.gather(ctx)
    assert f.rocm.gpus == [] and [n.gfx for n in f.rocm.kfd_nodes] == ["gfx1031"]
    message = next(ln for ln in real_fixture(RX6700, "launch-output.txt").splitlines() if "hipErrorNoBinaryForGpu" in ln)
    # what the target probe records when `import torch` aborts (probes/target.py): the signal, then stderr's tail;
    # the version comes from torch's files. The reporter's torch came from the rocm5.1.1 index, older than the
    # matrix; 2.5.1+rocm6.2 is a build the matrix knows whose gfx list lacks gfx1031, as the issue asks.
    f.torch = TorchFacts(installed=True, version="2.5.1+rocm6.2", variant="rocm6.2", hip="6.2.41133",
                         import_error=f"the target interpreter died while importing torch (SIGABRT): {message}", import_error_kind="crash")
    r = reconcile(f, m)
    (g,) = r.reconciled.gpus
    assert (g.gfx, g.witnesses, g.integrated, g.bus_id) == ("gfx1031", ["/sys/class/kfd"], False, "03:00.0")
    out = diagnose(f, m)
    x = hit(out, "rocm-gfx-unsupported")
    assert x.severity == "fail" and "gfx1031" in x.detail and "hipErrorNoBinaryForGpu" in x.detail and "/sys/class/kfd" in x.detail
    assert x.fix.startswith("export HSA_OVERRIDE_GFX_VERSION=10.3.0")
    assert "torch-import-failed" not in codes(out)  # one finding for one fault: the import error is its evidence
    plan = resolve(r, m, Request())
    assert plan.variant and plan.variant.startswith("rocm"), plan.reasons


def test_kfd_permission_line_alone_is_rocm_kfd_permission(m):
    """Only rocminfo's real failure text (ROCm/ROCm-docker issue 116); /dev/kfd not visible to the probe (a replay)."""
    line = next(ln for ln in real_fixture(KFD_DENIED, "rocminfo.txt").splitlines() if "/dev/kfd" in ln)
    f = linux()
    f.rocm = RocmFacts(kfd_present=False, tool_errors={"rocminfo": f"rocminfo exited with code 1: {line}"})
    out = diagnose(f, m, probes=[])
    k = hit(out, "rocm-kfd-permission")
    assert k.severity == "fail" and "Permission denied" in k.detail and k.detail.startswith("rocminfo")
    assert "probe-failed" not in codes(out)


def test_proc_version_alone_gives_a_driver_and_a_cuda_plan(m):
    """Only /proc/driver/nvidia/version (real, c40: open module 565.57.01): the driver version, its source, and a
    CUDA build planned for it."""
    version, flavor = nvidia_probe.parse_proc_driver_version(real_fixture(C40, "proc_driver_nvidia_version.txt"))
    f = linux()
    f.nvidia.kernel_module_version, f.nvidia.kernel_module_flavor = version, flavor
    f.nvidia.sources["kernel_module_version"] = "/proc/driver/nvidia/version"
    f.nvidia.observed["kernel_module_version"] = {"/proc/driver/nvidia/version": version}
    r = reconcile(f, m)
    drv = r.reconciled.nvidia_driver
    assert (drv.value, drv.source) == ("565.57.01", "/proc/driver/nvidia/version")
    plan = resolve(r, m, Request())
    assert plan.variant and plan.variant.startswith("cu"), plan.reasons
    row = m.cuda_row(m.variant(plan.torch_version, plan.variant).cuda)
    assert mx.driver_meets(row, "565.57.01", windows=False) != "no"
    assert any("driver 565.57.01" in x for x in plan.reasons)
    assert any("kernel module" in w and "/proc/driver/nvidia/version" in w for w in plan.warnings)


# ---------------------------------------------------------------------------- agreeing and disagreeing witnesses


def _h100_tools_and_proc(m) -> Facts:
    """nvidia-smi's view of a GPU and the kernel module's file of the same GPU (real, R535)."""
    f = linux()
    proc = nvidia_probe.parse_proc_gpu_information(real_fixture(H100_PROC, "information.txt"))
    assert proc is not None
    proc.source = "/proc/driver/nvidia/gpus/0000:62:00.0/information"
    f.nvidia = NvidiaFacts(driver_version="535.129.03", smi_state="ok", nvml_state="absent", kernel_module_version="535.129.03")
    f.nvidia.gpus = [NvidiaGpu(index=0, name="NVIDIA H100 80GB HBM3", uuid=proc.uuid, compute_capability="9.0", bus_id="00000000:62:00.0",
                               sources={"name": "nvidia-smi --query-gpu", "uuid": "nvidia-smi --query-gpu", "compute_capability": "nvidia-smi --query-gpu", "bus_id": "nvidia-smi --query-gpu"})]
    f.nvidia.proc_gpus = [proc]
    f.platform.nvidia_pci_devices = [PciDevice("0000:62:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia")]
    # torch 2.5.1+cu121: CUDA 12.1's toolkit minimum (530.30.02) is below this 535 driver, so nothing else is wrong
    f.torch = TorchFacts(installed=True, version="2.5.1+cu121", variant="cu121", cuda="12.1", cuda_available=True, device_count=1,
                         devices=[TorchDevice(0, "NVIDIA H100 80GB HBM3", "9.0", 81079, uuid=proc.uuid[4:], bus_id="0000:62:00.0")],
                         arch_list=arch(m, "2.5.1", "cu121"))
    return f


def test_witnesses_that_agree_are_one_gpu(m):
    r = reconcile(_h100_tools_and_proc(m), m)
    (g,) = r.reconciled.gpus
    assert sorted(g.witnesses) == sorted(["nvidia-smi", "/proc/driver/nvidia/gpus", "pci", "torch"])
    assert g.seen["bus_id"] == {"nvidia-smi": "62:00.0", "/proc/driver/nvidia/gpus": "62:00.0", "pci": "62:00.0"}
    assert g.seen["name"]["/proc/driver/nvidia/gpus"] == g.seen["name"]["torch"] == "NVIDIA H100 80GB HBM3"
    assert r.reconciled.disagreements == []
    out = diagnose(_h100_tools_and_proc(m), m)
    assert not codes(out), [(x.code, x.detail) for x in out if x.severity != "ok"]


def test_two_tool_lists_without_addresses_join_by_a_unique_name(m):
    """The kernel module's file and torch name the same single GPU; neither gives an address the other has."""
    f = linux()
    proc = nvidia_probe.parse_proc_gpu_information(real_fixture(L4_PROC, "information.txt"))
    proc.bus_id = None
    f.nvidia.proc_gpus = [proc]
    f.nvidia.kernel_module_version = "550.127.05"
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", cuda="12.8", cuda_available=True, device_count=1, devices=[TorchDevice(0, "NVIDIA L4", "8.9")])
    (g,) = reconcile(f, m).reconciled.gpus
    assert g.witnesses == ["/proc/driver/nvidia/gpus", "torch"] and g.compute_capability == "8.9"


def test_torch_capability_against_the_tool_is_a_disagreement(m):
    f = _h100_tools_and_proc(m)
    f.torch.devices[0].capability = "8.0"  # torch reports another capability than nvidia-smi measured
    r = reconcile(f, m)
    (d,) = [x for x in r.reconciled.disagreements if x.subject == "gpu.compute_capability"]
    assert d.values["torch"] == "8.0" and d.values["nvidia-smi"] == "9.0"
    assert r.reconciled.gpus[0].compute_capability == "9.0"  # the tool's measurement stays
    s = hit(diagnose(f, m), "source-conflict")
    assert s.severity == "warn" and "compute capability of GPU0" in s.detail and "torch: 8.0" in s.detail


def test_torch_capability_against_the_matrix_name_lookup_is_its_own_detail(m):
    """No tool measured the capability; torch did, and the matrix's lookup by name says otherwise: the matrix row is
    wrong for that name (a --matrix layer plays the wrong row here)."""
    f = linux()
    f.nvidia.kernel_module_version = "550.127.05"
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", variant="cu128", cuda="12.8", cuda_available=True, device_count=1,
                         devices=[TorchDevice(0, "Tesla P4", "6.1")], arch_list=arch(m, "2.9.0", "cu128"))
    wrong = load_matrix([])
    from stackdoctor.matrix import normalise_gpu_name

    wrong.gpus[normalise_gpu_name("Tesla P4")] = "7.5"
    r = reconcile(f, wrong)
    assert r.reconciled.gpus[0].compute_capability == "6.1"  # measured beats looked up
    s = hit(diagnose(f, wrong), "source-conflict")
    assert "7.5" in s.detail and "6.1" in s.detail and "by its name" in s.detail and "gpus.yaml" in s.fix


def test_kernel_module_and_user_space_library_differ(m):
    """The existing driver findings read the kernel module beside the library: a mismatch the tools reported is
    driver-library-mismatch; two readable versions that differ are source-conflict's `module` detail."""
    f = _h100_tools_and_proc(m)
    f.nvidia.kernel_module_version = "550.127.05"
    f.nvidia.sources["kernel_module_version"] = "/sys/module/nvidia/version"
    r = reconcile(f, m)
    assert any(d.subject == "nvidia.driver_version" for d in r.reconciled.disagreements)
    s = hit(diagnose(f, m), "source-conflict")
    assert "535.129.03" in s.detail and "550.127.05" in s.detail and "reboot" in s.fix


def _two_gpus(m, torch_count: int) -> Facts:
    f = _h100_tools_and_proc(m)
    second = NvidiaGpu(index=1, name="NVIDIA H100 80GB HBM3", uuid="GPU-00000000-1111-2222-3333-444444444444", compute_capability="9.0",
                       bus_id="00000000:63:00.0", sources={"name": "nvidia-smi --query-gpu", "bus_id": "nvidia-smi --query-gpu"})
    f.nvidia.gpus.append(second)
    f.torch.device_count = torch_count
    f.torch.devices = f.torch.devices[:torch_count]
    return f


def test_torch_seeing_fewer_gpus_than_the_driver_is_a_finding(m):
    out = diagnose(_two_gpus(m, 1), m)
    s = hit(out, "source-conflict")
    assert s.severity == "warn" and "torch sees 1 GPU(s) but nvidia-smi lists 2" in s.detail
    assert "CUDA_VISIBLE_DEVICES" in s.detail  # it says what it checked


@pytest.mark.parametrize(
    "change, explained",
    [
        (lambda f: f.environment.update(CUDA_VISIBLE_DEVICES="0"), "CUDA_VISIBLE_DEVICES=0"),
        (lambda f: setattr(f.nvidia.gpus[0], "mig_mode", "Enabled"), "MIG"),
    ],
    ids=["visible-devices", "mig"],
)
def test_a_variable_or_mig_explains_the_difference(m, change, explained):
    f = _two_gpus(m, 1)
    change(f)
    r = reconcile(f, m)
    (d,) = [x for x in r.reconciled.disagreements if x.subject == "gpu.count"]
    assert d.explained_by == explained
    assert "source-conflict" not in codes(diagnose(f, m))


def test_a_visible_devices_value_that_leaves_more_than_torch_sees_is_not_an_explanation(m):
    f = _two_gpus(m, 1)
    f.environment["CUDA_VISIBLE_DEVICES"] = "0,1"
    s = hit(diagnose(f, m), "source-conflict")
    assert "CUDA_VISIBLE_DEVICES=0,1 (leaves 2)" in s.detail


def test_in_a_container_the_kernels_list_is_the_hosts(m):
    """/proc and sysfs show the host's GPUs inside a container; torch sees what the container was given."""
    f = linux(container="docker")
    f.environment["NVIDIA_VISIBLE_DEVICES"] = "1"
    for bus in ("0000:62:00.0", "0000:63:00.0"):
        f.nvidia.proc_gpus.append(NvidiaProcGpu(bus_id=bus, name="NVIDIA H100 80GB HBM3"))
    f.nvidia.kernel_module_version = "535.129.03"
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", cuda="12.8", cuda_available=True, device_count=1,
                         devices=[TorchDevice(0, "NVIDIA H100 80GB HBM3", "9.0", bus_id="0000:63:00.0")], arch_list=arch(m, "2.9.0", "cu128"))
    r = reconcile(f, m)
    (d,) = [x for x in r.reconciled.disagreements if x.subject == "gpu.count"]
    assert d.explained_by == "container (NVIDIA_VISIBLE_DEVICES=1)"
    assert [g.torch_index for g in r.reconciled.gpus] == [None, 0]  # joined by address: torch's GPU is the second
    assert "source-conflict" not in codes(diagnose(f, m))


def test_amd_gfx_from_kfd_and_rocminfo_under_an_override_is_explained(m):
    """rocminfo reports the ISA after HSA_OVERRIDE_GFX_VERSION; KFD reports the chip: explained, not a conflict."""
    f = linux()
    f.environment["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0"
    f.rocm = RocmFacts(amdgpu_loaded=True, kfd_present=True, kfd_accessible=True,
                       gpus=[RocmGpu(0, "AMD Radeon RX 6700 XT", "gfx1030", node=1, sources={"gfx": "rocminfo", "name": "rocminfo", "node": "rocminfo"})],
                       kfd_nodes=[KfdNode(node=1, gfx_target_version=100301, gfx="gfx1031", vendor_id="0x1002", device_id="0x73df", simd_count=80, bus_id="0000:03:00.0")])
    r = reconcile(f, m)
    (g,) = r.reconciled.gpus
    assert g.witnesses == ["rocminfo", "/sys/class/kfd"] and g.bus_id == "03:00.0"
    (d,) = r.reconciled.disagreements
    assert (d.subject, d.values, d.explained_by) == ("gpu.gfx", {"rocminfo": "gfx1030", "/sys/class/kfd": "gfx1031"}, "HSA_OVERRIDE_GFX_VERSION=10.3.0")
    del f.environment["HSA_OVERRIDE_GFX_VERSION"]
    s = hit(diagnose(f, m), "source-conflict")
    assert "gfx target of GPU0" in s.detail and "gfx1031" in s.detail


# ---------------------------------------------------------------------------- recognised messages


def test_stale_library_undefined_symbol_is_torch_lib_stale(m):
    """Real (rwth-i6/returnn issue 1802): `import torch` fails on ncclMemFree with -cu11 and -cu12 NCCL wheels."""
    f = linux()
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", variant="cu128", cuda="12.8",
                         import_error=last_line(real_fixture(NCCL, "import-error.txt")), import_error_kind="exception")
    for line in real_fixture(NCCL, "pip-nccl.txt").splitlines():
        name, _, version = line.removeprefix("[pip3] ").partition("==")
        f.torch.distributions[name] = version
    out = diagnose(f, m)
    s = hit(out, "torch-lib-stale")
    assert "ncclMemFree" in s.detail and "libtorch_cuda.so" in s.detail and "nvidia-nccl-cu11" in s.detail
    assert s.fix.endswith("-m pip uninstall -y nvidia-nccl-cu11")
    assert "torch-import-failed" not in codes(out)


def test_an_unrecognised_message_stays_what_it_was(m):
    f = linux()
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", variant="cu128", cuda="12.8", import_error="RuntimeError: something nobody has seen before", import_error_kind="exception")
    r = reconcile(f, m)
    assert r.reconciled.evidence == []
    assert "torch-import-failed" in codes(diagnose(f, m))


def test_cuda_invalid_device_function_is_arch_evidence(m):
    f = linux()
    f.nvidia.kernel_module_version = "550.127.05"
    f.torch = TorchFacts(installed=True, version="2.9.0+cu128", variant="cu128", cuda="12.8", cuda_available=True, device_count=1,
                         devices=[TorchDevice(0, "NVIDIA GeForce RTX 4090", "8.9")], arch_list=arch(m, "2.9.0", "cu128"))
    f.kernels.ran = True
    f.kernels.stderr_tail = "RuntimeError: CUDA error: invalid device function\nCUDA kernel errors might be asynchronously reported at some other API call"
    (e,) = reconcile(f, m).reconciled.evidence
    assert (e.proves, e.source) == ("gpu-arch-unsupported", "kernels.stderr_tail")
    d = hit(diagnose(f, m), "gpu-arch-unsupported")
    assert "kernels.stderr_tail: RuntimeError: CUDA error: invalid device function" in d.detail  # the RTX 4090 is in the list: the message alone tells


# ---------------------------------------------------------------------------- no healthy machine gains a warning


def _new_findings(out) -> list[tuple[str, str]]:
    """Findings this issue adds: torch-lib-stale, and source-conflict's count / lookup / gfx details."""
    marks = ("torch sees", "by its name", "gfx target of")
    return [(x.code, x.detail) for x in out if x.code == "torch-lib-stale" or (x.code == "source-conflict" and any(k in x.detail for k in marks))]


def test_no_healthy_fixture_gains_a_finding_from_the_new_witnesses(m):
    """Every machine fixture and every healthy real case of test_diagnose: no unexplained disagreement between
    GPU witnesses, and none of the new findings."""
    import test_diagnose as td

    from stackdoctor.model.facts import from_data

    machines = {p.stem: from_data(Facts, json.loads(p.read_text())["facts"]) for p in sorted((Path(__file__).parent / "fixtures" / "machines").glob("*.json"))}
    machines.update({case: td.facts_from_source(case) for case in td.HEALTHY_CASES})
    machines["test_diagnose.healthy"] = td.healthy(m)
    for name, facts in machines.items():
        r = reconcile(facts, m)
        assert all(d.explained_by or d.subject not in ("gpu.count", "gpu.gfx", "gpu.compute_capability") for d in r.reconciled.disagreements), (name, r.reconciled.disagreements)
        assert not _new_findings(diagnose(facts, m)), name


# ---------------------------------------------------------------------------- end to end: the real CLI on a captured tree


def _tree(root: Path) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    return root


def test_cli_proc_version_alone_plans_cuda(tmp_path, plain_python):
    root = _tree(tmp_path / "root")
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(real_fixture(C40, "proc_driver_nvidia_version.txt"))
    env = machine_env(tmp_path / "bin", root)
    (tmp_path / "bin").mkdir()
    data = run_sd(["check", "--json", "--python", plain_python], env=env).json()
    drv = data["facts"]["reconciled"]["nvidia_driver"]
    assert (drv["value"], drv["source"]) == ("565.57.01", "/proc/driver/nvidia/version")
    assert data["facts"]["nvidia"]["driver_version"] == "565.57.01"  # the stable key carries the reconciled value
    assert "NVIDIA 565.57.01" in run_sd(["check", "--python", plain_python], env=env).stdout
    plan = run_sd(["install", "--offline", "--json", "--python", plain_python], env=env).json()
    assert plan["variant"].startswith("cu") and any("driver 565.57.01" in r for r in plan["reasons"]), plan


@pytest.mark.skipif(os.name == "nt", reason="the PCI address directory names hold colons")
def test_cli_verbose_and_report_show_each_witness(tmp_path, plain_python):
    root = _tree(tmp_path / "root")
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(real_fixture(C40, "proc_driver_nvidia_version.txt"))
    d = root / "proc/driver/nvidia/gpus/0000:62:00.0"
    d.mkdir(parents=True)
    (d / "information").write_text(real_fixture(H100_PROC, "information.txt"))
    (tmp_path / "bin").mkdir()
    env = machine_env(tmp_path / "bin", root, COLUMNS="200")
    screen = run_sd(["check", "-v", "--python", plain_python], env=env)
    assert "witnesses" in screen.stdout and "/proc/driver/nvidia/gpus" in screen.stdout and "NVIDIA H100 80GB HBM3" in screen.stdout
    assert "compat_matrix/gpus.yaml (name lookup): 9.0" in screen.stdout
    md = run_sd(["check", "--format", "markdown", "--python", plain_python], env=env).stdout
    assert "<summary>Witnesses</summary>" in md and "| NVIDIA driver | 565.57.01 | /proc/driver/nvidia/version |" in md


def test_cli_kfd_tree_and_rocminfo_permission_text(tmp_path, plain_python):
    """A captured tree with the KFD topology (real gfx1151 node) and a rocminfo that replays its real refusal."""
    root = _tree(tmp_path / "root")
    _kfd_tree(root, real_fixture(KFD1151, "properties.txt"))
    write_fake_tool(tmp_path / "bin", "rocminfo", real_fixture(KFD_DENIED, "rocminfo.txt"), rc=1)
    data = run_sd(["check", "--json", "--python", plain_python], env=machine_env(tmp_path / "bin", root)).json()
    findings = {f["code"]: f for f in data["findings"]}
    assert findings["rocm-kfd-permission"]["severity"] == "fail" and "Permission denied" in findings["rocm-kfd-permission"]["detail"]
    (g,) = data["facts"]["reconciled"]["gpus"]
    assert (g["gfx"], g["witnesses"], g["integrated"]) == ("gfx1151", ["/sys/class/kfd"], True)


def test_in_a_container_the_hosts_other_gpus_from_sysfs_are_not_added(m):
    """rocminfo in the container lists the one GPU it was given; sysfs's KFD topology is the host's (two nodes)."""
    f = linux(container="docker")
    f.rocm = RocmFacts(amdgpu_loaded=True, gpus=[RocmGpu(0, "AMD Instinct MI300X", "gfx942", node=2, sources={"gfx": "rocminfo", "node": "rocminfo"})],
                       kfd_nodes=[KfdNode(node=2, gfx="gfx942", simd_count=1216, bus_id="0000:05:00.0"), KfdNode(node=3, gfx="gfx942", simd_count=1216, bus_id="0000:26:00.0")])
    (g,) = reconcile(f, m).reconciled.gpus
    assert g.witnesses == ["rocminfo", "/sys/class/kfd"] and g.bus_id == "05:00.0"


# ---------------------------------------------------------------------------- a real H200 (our own capture), every witness

H200 = "local-h200-driver580-open-proc-gpus"


def h200_tree(root: Path) -> Path:
    """The captured files of tests/fixtures/real/local-h200-driver580-open-proc-gpus laid out as a tree; the PCI
    directory is written from `pci_nvidia.txt`'s columns (its `uevent` carries the bound driver's name)."""
    _tree(root)
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(real_fixture(H200, "proc_driver_nvidia_version.txt"))
    g = root / "proc/driver/nvidia/gpus/0000:00:06.0"
    g.mkdir(parents=True)
    (g / "information").write_text(real_fixture(H200, "information.txt"))
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text(real_fixture(H200, "sys_module_nvidia_version.txt"))
    addr, device, cls, driver = real_fixture(H200, "pci_nvidia.txt").split()
    d = root / "sys/bus/pci/devices" / addr
    d.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", device), ("class", cls), ("uevent", f"DRIVER={driver}\nPCI_SLOT_NAME={addr}")):
        (d / name).write_text(value + "\n")
    return root


@pytest.mark.skipif(os.name == "nt", reason="the PCI address directory names hold colons")
def test_cli_real_h200_every_witness_is_one_gpu(tmp_path, plain_python):
    """nvidia-smi (replaying its captured `-L` and table; it does not answer stackdoctor's --query-gpu), the kernel
    module's file and the PCI bus: one GPU, no disagreement, nothing wrong but the missing torch."""
    root = h200_tree(tmp_path / "root")
    smi = tmp_path / "smi"
    smi.mkdir()
    for name in ("nvidia-smi-l.txt", "nvidia-smi.txt"):
        (smi / name).write_text(real_fixture(H200, name))
    write_fake_tool(tmp_path / "bin", "nvidia-smi", script=f'case "${{1:-}}" in\n  -L) cat {smi}/nvidia-smi-l.txt ;;\n  "") cat {smi}/nvidia-smi.txt ;;\n  *) exit 0 ;;\nesac\n')
    data = run_sd(["check", "--json", "--python", plain_python], env=machine_env(tmp_path / "bin", root)).json()
    (g,) = data["facts"]["reconciled"]["gpus"]
    assert {"nvidia-smi", "/proc/driver/nvidia/gpus", "pci"} <= set(g["witnesses"])
    assert (g["name"], g["compute_capability"], g["bus_id"], g["uuid"]) == ("NVIDIA H200", "9.0", "00:06.0", "GPU-51a35715-0f67-e401-1003-89c33c5360ca")
    assert data["facts"]["reconciled"]["disagreements"] == []
    assert {f["code"] for f in data["findings"] if f["severity"] != "ok"} == {"torch-missing"}


@pytest.mark.skipif(os.name == "nt", reason="the PCI address directory names hold colons")
def test_cli_real_h200_without_any_user_space_tool(tmp_path, plain_python):
    """The same machine as a container without the `utility` capability sees it: no nvidia-smi, no NVML. The kernel
    module's files and the PCI bus still give the GPU, its capability (by name) and the driver; install plans for it."""
    root = h200_tree(tmp_path / "root")
    (tmp_path / "bin").mkdir()
    env = machine_env(tmp_path / "bin", root)
    data = run_sd(["check", "--json", "--python", plain_python], env=env).json()
    (g,) = data["facts"]["reconciled"]["gpus"]
    assert (g["name"], g["compute_capability"], g["witnesses"]) == ("NVIDIA H200", "9.0", ["/proc/driver/nvidia/gpus", "pci"])
    assert g["sources"]["compute_capability"] == "reconcile: compat_matrix/gpus.yaml (name lookup)"
    drv = data["facts"]["reconciled"]["nvidia_driver"]
    assert drv["value"] == "580.159.04" and drv["witnesses"] == {"/proc/driver/nvidia/version": "580.159.04", "/sys/module/nvidia/version": "580.159.04"}
    assert data["facts"]["reconciled"]["accelerator"] == "nvidia"
    plan = run_sd(["install", "--offline", "--json", "--python", plain_python], env=env).json()
    assert plan["variant"].startswith("cu") and any("NVIDIA H200" in r and "580.159.04" in r for r in plan["reasons"]), plan["reasons"]


@pytest.mark.skipif(os.name == "nt", reason="the PCI address directory names hold colons")
def test_cli_real_h200_without_tools_every_consumer_reads_the_reconciled_view(tmp_path, plain_python):
    """The same container (no nvidia-smi, no NVML): the report's stable keys carry the reconciled driver and GPU,
    each witness's value beside them; the screen and the Markdown stack show both; the --gpu what-if plans."""
    root = h200_tree(tmp_path / "root")
    (tmp_path / "bin").mkdir()
    env = machine_env(tmp_path / "bin", root, COLUMNS="200")
    data = run_sd(["check", "--json", "--python", plain_python], env=env).json()
    nv = data["facts"]["nvidia"]
    assert nv["driver_version"] == "580.159.04" and nv["sources"]["driver_version"] == "reconcile: /proc/driver/nvidia/version"
    assert nv["observed"]["kernel_module_version"] == {"/proc/driver/nvidia/version": "580.159.04", "/sys/module/nvidia/version": "580.159.04"}
    (g,) = nv["gpus"]
    assert (g["name"], g["bus_id"], g["compute_capability"], g["uuid"]) == ("NVIDIA H200", "00:06.0", "9.0", "GPU-51a35715-0f67-e401-1003-89c33c5360ca")
    assert g["sources"]["index"].startswith("reconcile: ") and g["sources"]["name"] == "reconcile: /proc/driver/nvidia/gpus/0000:00:06.0/information"
    # a replay of that report derives the same keys again (nothing published is taken for a witness)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    again = run_sd(["check", "--replay", str(saved), "--json"], env=env).json()
    assert again["facts"]["nvidia"]["gpus"] == nv["gpus"] and again["facts"]["nvidia"]["driver_version"] == "580.159.04"
    screen = run_sd(["check", "--python", plain_python], env=env).stdout
    assert "NVIDIA 580.159.04" in screen and "0: NVIDIA H200 (sm_90)" in screen and "none found" not in screen
    md = run_sd(["check", "--format", "markdown", "--python", plain_python], env=env).stdout
    stack = md[md.index("### Stack"):md.index("### Findings") if "### Findings" in md else None]
    assert "| driver | NVIDIA 580.159.04 |" in stack and "| GPU | 0: NVIDIA H200 (sm_90) |" in stack, stack
    plan = run_sd(["install", "--dry-run", "--offline", "--json", "--gpu", "NVIDIA H100 80GB HBM3", "--python", plain_python], env=env)
    assert plan.rc == 0, plan.stdout + plan.stderr
    body = plan.json()
    assert body["variant"].startswith("cu") and any("580.159.04" in r for r in body["reasons"]), body["reasons"]


def test_the_resolver_plans_only_from_reconciled_facts(m):
    """The resolver reads the reconciled view and never reconciles by itself: raw facts are a caller's bug."""
    raw = linux()
    raw.nvidia = NvidiaFacts(observed={"driver_version": {"nvml": "570.86.15"}}, gpus=[NvidiaGpu(0, "NVIDIA GeForce RTX 4090", sources={"name": "nvml"})])
    with pytest.raises(ValueError, match="reconciled"):
        resolve(raw, m, Request())
    plan = resolve(reconcile(raw, m), m, Request())
    assert plan.variant and plan.variant.startswith("cu") and any("570.86.15" in r for r in plan.reasons), plan.reasons
