"""The resolver, table-driven over machines (tests/fixtures/machines: real cases from tests/fixtures/real and the
synthetic machines issue 3 lists). Expected plans follow issue 3's rules, not the fixtures' expected_* notes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stackdoctor.facts import Facts, PciDevice, from_data
from stackdoctor.matrix import load_matrix
from stackdoctor.plan import Plan, Request
from stackdoctor.resolve import resolve

MACHINES = Path(__file__).resolve().parent / "fixtures" / "machines"


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def machine(name: str) -> Facts:
    data = json.loads((MACHINES / f"{name}.json").read_text(encoding="utf-8"))
    assert data["source"]
    return from_data(Facts, data["facts"])


def text(plan: Plan) -> str:
    return "\n".join(plan.reasons + plan.warnings + plan.suggestions + [f"{r.variant}: {r.reason}" for r in plan.rejected])


# case, request, torch_version, variant, env, fragments that must appear in reasons/warnings/suggestions/rejected
CASES = [
    pytest.param(
        "gtx1080-driver580", Request(), "2.14.0", "cu126", {},
        ["cu130: torch 2.14.0: GPU 0 NVIDIA GeForce GTX 1080 is sm_61; cu130 builds sm_75 and newer"],
        id="gtx1080-driver580",
    ),
    pytest.param(
        "rtx5090-driver570", Request(), "2.11.0", "cu128", {},
        ["older release with a GPU build beats a CPU build of torch 2.14.0", "is sm_120; cu126 builds", "driver 570.124.06 is older than CUDA 13.0"],
        id="rtx5090-driver570-unpinned",
    ),
    pytest.param(
        "rtx5090-driver570", Request(torch="2.13.0"), "2.13.0", "cpu", {},
        ["upgrade the driver to >= 580.65.06", "torch 2.11.0 cu128 supports this GPU"],
        id="rtx5090-driver570-pinned-2.13",
    ),
    pytest.param(
        "rtx3090-driver535", Request(), "2.14.0", "cu126", {},
        ["minor-version-compatibility floor (525.60.13)", "upgrade the driver to >= 560.28.03"],
        id="rtx3090-driver535",
    ),
    pytest.param(
        "k80-driver470", Request(), "2.7.1", "cu118", {},
        ["GPU 0 Tesla K80 (sm_37)", "older release with a GPU build", "unverified facts"],
        id="tesla-k80",
    ),
    pytest.param("c05-v100-driver525", Request(), "2.14.0", "cu126", {}, ["Tesla V100-SXM2-32GB (sm_70)", "525.60.13"], id="v100-c05"),
    pytest.param("c10-b200-driver610", Request(), "2.14.0", "cu132", {}, ["GPU 1 NVIDIA B200 (sm_100)"], id="b200-c10"),
    pytest.param("c14-rtx4070-driver550", Request(), "2.14.0", "cu126", {}, ["(sm_89)"], id="rtx4070-c14"),
    pytest.param(
        "mixed-rtx5090-rtx4090-driver580", Request(), "2.14.0", "cu132", {},
        ["GPU 0 NVIDIA GeForce RTX 5090 (sm_120), GPU 1 NVIDIA GeForce RTX 4090 (sm_89)", "upgrade the driver to >= 595.45.04"],
        id="mixed-5090-4090",
    ),
    pytest.param(
        "mixed-rtx5090-gtx1080-driver580", Request(), "2.14.0", "cu132", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"},
        ["GPU 1 NVIDIA GeForce GTX 1080 (sm_61) would be left out", "CUDA_VISIBLE_DEVICES=0"],
        id="mixed-5090-1080-one-left-out",
    ),
    pytest.param("amd-gfx1100", Request(), "2.14.0", "rocm7.2", {}, ["(gfx1100)"], id="amd-gfx1100"),
    pytest.param(
        "amd-gfx1031", Request(), "2.14.0", "rocm7.2", {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
        ["HSA_OVERRIDE_GFX_VERSION=10.3.0 makes it load the gfx1030 code"],
        id="amd-gfx1031-override",
    ),
    pytest.param("c30-8xmi300x-gfx942", Request(), "2.14.0", "rocm7.2", {}, ["GPU 7 AMD Instinct MI300X (gfx942)"], id="mi300x-gfx942-c30"),
    pytest.param(
        "c27-gfx1102-plus-igpu-gfx1036", Request(), "2.14.0", "rocm7.2", {"HIP_VISIBLE_DEVICES": "0"},
        ["GPU 1 AMD Radeon Graphics (gfx1036) would be left out (an integrated GPU)", "HIP_VISIBLE_DEVICES=0",
         "would also make GPU 0 AMD Radeon RX 7600 XT (gfx1102) load gfx1030 code"],
        id="gfx1102-plus-integrated-gfx1036-c27",
    ),
    pytest.param("apple-m2-macos15", Request(), "2.14.0", "cpu", {}, ["PyPI's default build carries MPS"], id="apple-m-series"),
    pytest.param("intel-mac-catalina", Request(), "2.2.2", "cpu", {}, ["Intel Macs get CPU builds only"], id="intel-mac-unpinned"),
    pytest.param(
        "intel-mac-catalina", Request(torch="2.5"), None, None, {},
        ["not published for macOS x86_64", "only up to torch 2.2.2", "--torch 2.2.2"],
        id="intel-mac-asks-2.5",
    ),
    pytest.param(
        "jetson-orin-jp62", Request(), "2.5.0", "jetson-jp6-cu126", {}, ["NVIDIA's Jetson wheels at https://pypi.jetson-ai-lab.io/jp6/cu126"],
        id="jetson-orin",
    ),
    pytest.param("c32-jetson-nano-l4t3231", Request(), None, None, {}, ["JetPack 4", "JetPack 6 (L4T 36.4)"], id="jetson-nano-jp4-c32"),
    pytest.param(
        "windows-gtx1070-driver551", Request(), "2.14.0", "cu126", {}, ["(Windows: 560.76)", "(528.33)", "(Windows: >= 580)"],
        id="windows-pascal",
    ),
    pytest.param(
        "c48-wsl2-rtx4070laptop-driver551", Request(), "2.14.0", "cu126", {}, ["Windows driver, as WSL2 sees it", "(Windows: 560.76)"],
        id="wsl2-windows-column-c48",
    ),
    pytest.param("no-gpu-linux", Request(), "2.14.0", "cpu", {}, ["no GPU found"], id="no-gpu"),
    pytest.param(
        "python315-linux", Request(torch="2.13.0"), None, None, {}, ["no wheels for Python 3.15", "--python-version 3.14", "--torch 2.14.0"],
        id="cp315-with-2.13",
    ),
    pytest.param("python315-linux", Request(torch="2.14.0", packages=["torch", "torchvision"]), None, None, {}, ["no torchvision"], id="cp315-torch-only"),
    pytest.param(
        "centos7-glibc217-rtx3090-driver535", Request(), "2.6.0", "cu124", {}, ["need glibc >= 2.28; this system has 2.17"],
        id="glibc217-unpinned-older-gpu-build",
    ),
    pytest.param(
        "centos7-glibc217-rtx3090-driver535", Request(torch="2.13.0"), None, None, {}, ["glibc >= 2.28", "--torch 2.6.0"],
        id="glibc217-pinned-2.13-nothing",
    ),
    pytest.param("intel-arc-a770", Request(), "2.14.0", "xpu", {}, ["XPU build"], id="intel-arc-xpu"),
]


@pytest.mark.parametrize("case, request_, torch_version, variant, env, fragments", CASES)
def test_resolve_machines(m, case, request_, torch_version, variant, env, fragments):
    plan = resolve(machine(case), m, request_)
    assert plan.torch_version == torch_version, text(plan)
    assert plan.variant == variant, text(plan)
    assert plan.env == env, text(plan)
    all_text = text(plan)
    for frag in fragments:
        assert frag in all_text, f"{frag!r} not in:\n{all_text}"
    assert plan.reasons, "every plan carries its reasons"
    for r in plan.rejected:
        assert r.reason.strip(), r
    if variant is None:
        assert plan.packages == [] and plan.command == [] and plan.suggestions
        assert not plan.satisfiable
    else:
        assert plan.packages[0].name == "torch" and plan.packages[0].version == torch_version
        assert plan.command and plan.index_url in plan.command


def test_gpu_build_of_pinned_release_is_the_one_asked(m):
    plan = resolve(machine("gtx1080-driver580"), m, Request(torch=">=2.9,<2.12"))
    assert (plan.torch_version, plan.variant) == ("2.11.0", "cu126")


def test_index_url_and_command_pip_and_uv(m):
    facts = machine("gtx1080-driver580")
    plan = resolve(facts, m, Request(index_base="https://mirror.example/whl/", packages=["torch", "torchvision", "torchaudio"]))
    assert plan.index_url == "https://mirror.example/whl/cu126"
    reqs = [p.requirement for p in plan.packages]
    # torchaudio stopped following torch after 2.11: 2.11.0 pairs with 2.14
    assert reqs == ["torch==2.14.0+cu126", "torchvision==0.29.0+cu126", "torchaudio==2.11.0+cu126"]
    # a pairing the matrix does not know is not planned, and said so
    gap = resolve(facts, m, Request(torch="2.14.0", packages=["torch", "torchtext"]))
    assert [p.name for p in gap.packages] == ["torch"] and any("torchtext" in w for w in gap.warnings)
    assert plan.command == [
        "/home/u/venv/bin/python", "-m", "pip", "install", *reqs, "--index-url", "https://mirror.example/whl/cu126",
    ]
    uv = resolve(facts, m, Request(installer="uv", torch="2.11.0", packages=["torch", "torchvision", "torchaudio"]))
    assert [p.requirement for p in uv.packages] == ["torch==2.11.0+cu126", "torchvision==0.26.0+cu126", "torchaudio==2.11.0+cu126"]
    assert uv.command[:5] == ["uv", "pip", "install", "--python", "/home/u/venv/bin/python"]
    assert uv.command[-2:] == ["--index-url", "https://download.pytorch.org/whl/cu126"]


def test_macos_packages_come_from_pypi_without_local_suffix(m):
    plan = resolve(machine("apple-m2-macos15"), m, Request(packages=["torch", "torchvision"]))
    assert plan.index_url == "https://pypi.org/simple"
    assert [p.requirement for p in plan.packages] == ["torch==2.14.0", "torchvision==0.29.0"]
    assert all(p.variant is None for p in plan.packages)


def test_old_macos_prefers_a_release_with_mps(m):
    facts = machine("apple-m2-macos15")
    facts.apple.macos_version = "13.6"
    facts.python.platform_tag = "macosx_13_0_arm64"
    plan = resolve(facts, m, Request())
    # 2.12+ wheels need macOS 14; 2.9-2.11 install but their MPS needs macOS 14: 2.8.0 is the newest with MPS
    assert plan.torch_version == "2.8.0", text(plan)
    assert any("MPS needs macOS >= 14.0" in r.reason for r in plan.rejected)


@pytest.mark.parametrize(
    "request_, torch_version, variant",
    [
        pytest.param(Request(gpus=["sm_90"], driver="570.124.06"), "2.14.0", "cu126", id="sm90-driver570"),
        pytest.param(Request(gpus=["NVIDIA H100 80GB HBM3"], driver="580.65.06"), "2.14.0", "cu132", id="h100-by-name-minor-compat-still-newest"),
        pytest.param(Request(gpus=["sm_120"], driver="570.124.06"), "2.11.0", "cu128", id="sm120-driver570"),
        pytest.param(Request(gfx=["gfx1032"]), "2.14.0", "rocm7.2", id="gfx1032-whatif"),
        pytest.param(Request(gpus=["sm_61"], driver="551.61", platform="win_amd64", python_version="3.11"), "2.14.0", "cu126", id="windows-target"),
        pytest.param(Request(platform="manylinux_2_17_x86_64"), "2.6.0", "cpu", id="platform-only-glibc217"),
    ],
)
def test_what_if_overrides_replace_probed_facts(m, request_, torch_version, variant):
    plan = resolve(machine("no-gpu-linux"), m, request_)
    assert (plan.torch_version, plan.variant) == (torch_version, variant), text(plan)


def test_what_if_driver_on_a_gpu_machine(m):
    plan = resolve(machine("rtx5090-driver570"), m, Request(driver="595.58.03"))
    assert (plan.torch_version, plan.variant) == ("2.14.0", "cu132")
    assert not any("minor-version" in w for w in plan.warnings)


def test_windows_driver_column_differs_from_linux(m):
    """The same number is judged against the Windows column under WSL2 and the Linux column on Linux."""
    wsl = resolve(machine("c48-wsl2-rtx4070laptop-driver551"), m, Request())
    facts = machine("c48-wsl2-rtx4070laptop-driver551")
    facts.platform.is_wsl = False
    native = resolve(facts, m, Request())
    assert "560.76" in "\n".join(wsl.warnings) and "560.76" not in "\n".join(native.warnings)
    assert "560.28.03" in "\n".join(native.warnings)


def test_explicit_variant_that_does_not_fit(m):
    plan = resolve(machine("gtx1080-driver580"), m, Request(variant="cu130"))
    assert plan.variant is None and not plan.packages
    assert any("sm_61" in r.reason for r in plan.rejected)


def test_explicit_cpu_variant(m):
    plan = resolve(machine("gtx1080-driver580"), m, Request(variant="cpu"))
    assert (plan.torch_version, plan.variant) == ("2.14.0", "cpu")


def test_unknown_pin_and_bad_specifier(m):
    plan = resolve(machine("no-gpu-linux"), m, Request(torch="3.0.0"))
    assert plan.variant is None and "not in the compatibility matrix" in plan.reasons[0]
    bad = resolve(machine("no-gpu-linux"), m, Request(torch=">=two"))
    assert bad.variant is None and "specifier" in bad.reasons[0]


def test_release_without_known_builds_is_skipped_and_said(m):
    plan = resolve(machine("no-gpu-linux"), m, Request())
    assert any("2.15.0" in w and "does not know its builds" in w for w in plan.warnings)


def test_leftovers_when_switching_cuda_major(m):
    facts = machine("gtx1080-driver580")
    facts.torch.installed = True
    facts.torch.version = "2.13.0+cu130"
    facts.torch.variant = "cu130"
    facts.torch.distributions = {"torch": "2.13.0+cu130", "nvidia-cublas": "13.0.0.19", "nvidia-cudnn-cu13": "9.13.0.50", "numpy": "2.3.0"}
    plan = resolve(facts, m, Request())
    assert plan.variant == "cu126"
    assert plan.leftovers == ["nvidia-cudnn-cu13"]


def test_resolve_is_pure(m):
    facts = machine("c27-gfx1102-plus-igpu-gfx1036")
    before = dataclasses.asdict(facts)
    first = resolve(facts, m, Request())
    second = resolve(facts, m, Request())
    assert dataclasses.asdict(facts) == before
    assert first.to_data() == second.to_data()


def test_plan_json_contract(m):
    data = resolve(machine("amd-gfx1031"), m, Request()).to_data()
    assert data["schema"] == "stackdoctor.plan/1"
    assert {"torch_version", "variant", "index_url", "packages", "command", "reasons", "rejected", "warnings", "env"} <= set(data)
    assert data["env"] == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    json.dumps(data)


def test_unknown_platform_gives_no_plan_and_says_how(m):
    plan = resolve(Facts(), m, Request())
    assert plan.variant is None and "platform is unknown" in plan.reasons[0]
    assert any("--platform" in s for s in plan.suggestions)
    plan = resolve(Facts(), m, Request(platform="manylinux_2_28_x86_64"))
    assert plan.variant == "cpu" and any("Python version is unknown" in w for w in plan.warnings)


@pytest.mark.parametrize("given, expected", [("3.12", "cu126"), ("3.12.4", "cu126"), ("cp313t", None), ("3.9", None)])
def test_python_version_forms(m, given, expected):
    plan = resolve(machine("gtx1080-driver580"), m, Request(python_version=given, torch="2.14.0"))
    assert plan.variant == expected, text(plan)


def test_linux_aarch64_cpu_and_torchvision_without_local_suffix(m):
    facts = machine("no-gpu-linux")
    facts.platform.machine = "aarch64"
    facts.python.platform_tag = "manylinux_2_35_aarch64"
    plan = resolve(facts, m, Request(packages=["torch", "torchvision"]))
    assert plan.variant == "cpu" and plan.index_url.endswith("/cpu")
    assert [p.requirement for p in plan.packages] == ["torch==2.14.0", "torchvision==0.29.0"]


def test_jetson_thor_uses_pytorch_aarch64_cuda13_builds(m):
    facts = from_data(
        Facts,
        {
            "platform": {"system": "Linux", "machine": "aarch64", "glibc_version": "2.39", "libc": "glibc", "kernel": "6.8.12-tegra"},
            "python": {"executable": "/usr/bin/python3", "version": "3.12.3", "platform_tag": "manylinux_2_39_aarch64"},
            "nvidia": {"driver_version": "580.65.06"},
            "jetson": {"is_jetson": True, "l4t_release": "38.2.0", "jetpack": "7.0", "model": "NVIDIA Jetson AGX Thor Developer Kit"},
        },
    )  # synthetic: L4T R38 / driver 580 as in pollen-robotics/microduck_rl#38 (AGX Thor)
    plan = resolve(facts, m, Request())
    assert (plan.torch_version, plan.variant) == ("2.14.0", "cu132"), text(plan)
    assert "sm_110" in text(plan) and "SBSA" in text(plan)


def test_amd_gpu_on_windows_gets_cpu_with_reasons(m):
    facts = machine("windows-gtx1070-driver551")
    facts.nvidia = from_data(type(facts.nvidia), {})
    facts.rocm = from_data(type(facts.rocm), {"gpus": [{"index": 0, "name": "AMD Radeon RX 7900 XTX", "gfx": "gfx1100"}]})
    plan = resolve(facts, m, Request())
    assert plan.variant == "cpu"
    assert any(r.variant == "rocm7.2" and "not published for Windows" in r.reason for r in plan.rejected)


def test_intel_igpu_that_xpu_does_not_serve_gets_cpu(m):
    facts = machine("no-gpu-linux")
    facts.intel = from_data(type(facts.intel), {"gpus": [{"address": "0000:00:02.0", "device_id": "0x9bc8", "name": "Intel UHD Graphics 630", "discrete": False}]})
    plan = resolve(facts, m, Request())
    assert plan.variant == "cpu" and any("not among the XPU build's GPUs" in r for r in plan.reasons)


def test_nvidia_gpu_without_a_working_driver(m):
    facts = machine("no-gpu-linux")  # c18-like: the GPU is on the bus, NVML cannot talk to the driver
    facts.platform.nvidia_pci_devices = [from_data(PciDevice, {"address": "0000:01:00.0", "vendor_id": "0x10de", "device_id": "0x2684", "class_id": "0x030000", "driver": "nvidia"})]
    facts.nvidia.smi_state = "lib-mismatch"
    plan = resolve(facts, m, Request())
    assert plan.variant == "cpu"
    assert "no working NVIDIA driver" in text(plan) and any("repair the NVIDIA driver" in s for s in plan.suggestions)
