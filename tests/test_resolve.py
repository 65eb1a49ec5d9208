"""The resolver, table-driven over machines (tests/fixtures/machines: real cases from tests/fixtures/real and the
synthetic machines issue 3 lists). Expected plans follow issue 3's rules, not the fixtures' expected_* notes.

The rules are tested against a FROZEN matrix (tests/fixtures/matrix: made-up releases 7.0.0-7.9.0 shaped like real
ones), so a new torch release changes compat_matrix/ and nothing here. A few smoke tests at the end run the shipped
matrix, with expectations computed from it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from packaging.version import Version

from stackdoctor.matrix import (
    Matrix,
    arch_runs,
    driver_meets,
    load_matrix,
    variant_kind,
)
from stackdoctor.model.facts import Facts, PciDevice, from_data
from stackdoctor.model.plan import Plan, Request
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve import resolve as _resolve

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MACHINES = FIXTURES / "machines"
TEST_MATRIX = [FIXTURES / "matrix" / "releases.yaml", FIXTURES / "matrix" / "platform.yaml"]


def frozen(*extra: Path) -> Matrix:
    """The frozen test matrix, with ``extra`` files layered over it."""
    return load_matrix([*TEST_MATRIX, *extra], embedded=False)


@pytest.fixture(scope="module")
def m():
    return frozen()


@pytest.fixture(scope="module")
def shipped():
    return load_matrix([], embedded=True)


def machine(name: str) -> Facts:
    data = json.loads((MACHINES / f"{name}.json").read_text(encoding="utf-8"))
    assert data["source"]
    return from_data(Facts, data["facts"])


def resolve(facts: Facts, matrix: Matrix, request: Request) -> Plan:
    """The resolver as check and install call it: on the machine's reconciled facts."""
    return _resolve(reconcile(facts, matrix), matrix, request)


def text(plan: Plan) -> str:
    return "\n".join(plan.reasons + plan.warnings + plan.suggestions + [f"{r.variant}: {r.reason}" for r in plan.rejected])


# case, request, torch_version, variant, env, fragments that must appear in reasons/warnings/suggestions/rejected
CASES = [
    pytest.param(
        "gtx1080-driver580", Request(), "7.8.0", "cu126", {},
        ["cu130: torch 7.8.0: GPU 0 NVIDIA GeForce GTX 1080 is sm_61; cu130 builds sm_75 and newer"],
        id="gtx1080-driver580",
    ),
    pytest.param(
        "rtx5090-driver570", Request(), "7.5.0", "cu128", {},
        ["older release with a GPU build beats a CPU build of torch 7.8.0", "is sm_120; cu126 builds", "driver 570.124.06 is older than CUDA 13.0"],
        id="rtx5090-driver570-unpinned",
    ),
    pytest.param(
        "rtx5090-driver570", Request(torch="7.7.0"), "7.7.0", "cpu", {},
        ["upgrade the driver to >= 580 (torch 7.7.0 cu130 then runs on this GPU, through CUDA minor-version compatibility; >= 580.65.06 for all of it)", "torch 7.5.0 cu128 supports this GPU"],
        id="rtx5090-driver570-pinned",
    ),
    pytest.param(
        "rtx3090-driver535", Request(), "7.8.0", "cu126", {},
        ["minor-version-compatibility floor (525.60.13)", "upgrade the driver to >= 560.28.03"],
        id="rtx3090-driver535",
    ),
    pytest.param(
        "k80-driver470", Request(), "7.2.0", "cu118", {},
        ["GPU 0 Tesla K80 (sm_37)", "older release with a GPU build", "unverified facts"],
        id="tesla-k80",
    ),
    pytest.param("c05-v100-driver525", Request(), "7.8.0", "cu126", {}, ["Tesla V100-SXM2-32GB (sm_70)", "525.60.13"], id="v100-c05"),
    pytest.param("c10-b200-driver610", Request(), "7.8.0", "cu132", {}, ["GPU 1 NVIDIA B200 (sm_100)"], id="b200-c10"),
    pytest.param("c14-rtx4070-driver550", Request(), "7.8.0", "cu126", {}, ["(sm_89)"], id="rtx4070-c14"),
    pytest.param(
        "mixed-rtx5090-rtx4090-driver580", Request(), "7.8.0", "cu132", {},
        ["GPU 0 NVIDIA GeForce RTX 5090 (sm_120), GPU 1 NVIDIA GeForce RTX 4090 (sm_89)", "upgrade the driver to >= 595.45.04"],
        id="mixed-5090-4090",
    ),
    pytest.param(
        "mixed-rtx5090-gtx1080-driver580", Request(), "7.8.0", "cu132", {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "0"},
        ["GPU 1 NVIDIA GeForce GTX 1080 (sm_61) would be left out", "CUDA_VISIBLE_DEVICES=0"],
        id="mixed-5090-1080-one-left-out",
    ),
    pytest.param("amd-gfx1100", Request(), "7.8.0", "rocm7.2", {}, ["(gfx1100)"], id="amd-gfx1100"),
    pytest.param(
        "amd-gfx1031", Request(), "7.8.0", "rocm7.2", {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
        ["HSA_OVERRIDE_GFX_VERSION=10.3.0 makes it load the gfx1030 code"],
        id="amd-gfx1031-override",
    ),
    pytest.param("c30-8xmi300x-gfx942", Request(), "7.8.0", "rocm7.2", {}, ["GPU 7 AMD Instinct MI300X (gfx942)"], id="mi300x-gfx942-c30"),
    pytest.param(
        "c27-gfx1102-plus-igpu-gfx1036", Request(), "7.8.0", "rocm7.2", {"HIP_VISIBLE_DEVICES": "0"},
        ["GPU 1 AMD Radeon Graphics (gfx1036) would be left out (an integrated GPU)", "HIP_VISIBLE_DEVICES=0",
         "would also make GPU 0 AMD Radeon RX 7600 XT (gfx1102) load gfx1030 code"],
        id="gfx1102-plus-integrated-gfx1036-c27",
    ),
    pytest.param("apple-m2-macos15", Request(), "7.8.0", "cpu", {}, ["PyPI's default build carries MPS (Apple GPU): its cpu variant"], id="apple-m-series"),
    pytest.param("intel-mac-catalina", Request(), "7.0.0", "cpu", {}, ["Intel Macs get CPU builds only"], id="intel-mac-unpinned"),
    pytest.param(
        "intel-mac-catalina", Request(torch="7.5"), None, None, {},
        ["not published for macOS x86_64", "only up to torch 7.0.0", "--torch 7.0.0"],
        id="intel-mac-asks-newer",
    ),
    pytest.param(
        "jetson-orin-jp62", Request(), "7.1.0", "jetson-jp6-cu126", {}, ["NVIDIA's Jetson wheels at https://pypi.jetson-ai-lab.io/jp6/cu126"],
        id="jetson-orin",
    ),
    pytest.param("c32-jetson-nano-l4t3231", Request(), None, None, {}, ["JetPack 4", "JetPack 6 (L4T 36.4)"], id="jetson-nano-jp4-c32"),
    pytest.param(
        "windows-gtx1070-driver551", Request(), "7.8.0", "cu126", {}, ["(Windows: 560.76)", "(528.33)", "(Windows: >= 580)"],
        id="windows-pascal",
    ),
    pytest.param(
        "c48-wsl2-rtx4070laptop-driver551", Request(), "7.8.0", "cu126", {}, ["Windows driver, as WSL2 sees it", "(Windows: 560.76)"],
        id="wsl2-windows-column-c48",
    ),
    pytest.param("no-gpu-linux", Request(), "7.8.0", "cpu", {}, ["no GPU found"], id="no-gpu"),
    pytest.param(
        "python315-linux", Request(torch="7.7.0"), None, None, {}, ["no wheels for Python 3.15", "--python-version 3.14", "--torch 7.8.0"],
        id="cp315-with-a-release-without-it",
    ),
    pytest.param("python315-linux", Request(torch="7.8.0", packages=["torch", "torchvision"]), None, None, {}, ["no torchvision"], id="cp315-torch-only"),
    pytest.param(
        "centos7-glibc217-rtx3090-driver535", Request(), "7.1.0", "cu124", {}, ["need glibc >= 2.28; this system has 2.17"],
        id="glibc217-unpinned-older-gpu-build",
    ),
    pytest.param(
        "centos7-glibc217-rtx3090-driver535", Request(torch="7.7.0"), None, None, {}, ["glibc >= 2.28", "--torch 7.1.0"],
        id="glibc217-pinned-nothing",
    ),
    pytest.param("intel-arc-a770", Request(), "7.8.0", "xpu", {}, ["XPU build"], id="intel-arc-xpu"),
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
    plan = resolve(machine("gtx1080-driver580"), m, Request(torch=">=7.3,<7.6"))
    assert (plan.torch_version, plan.variant) == ("7.5.0", "cu126")


def test_index_url_and_command_pip_and_uv(m):
    facts = machine("gtx1080-driver580")
    plan = resolve(facts, m, Request(index_base="https://mirror.example/whl/", packages=["torch", "torchvision", "torchaudio"]))
    assert plan.index_url == "https://mirror.example/whl/cu126"
    reqs = [p.requirement for p in plan.packages]
    # the test matrix's torchaudio stops following torch at 7.5.0, as the real one did at 2.11.0
    assert reqs == ["torch==7.8.0+cu126", "torchvision==1.8.0+cu126", "torchaudio==7.5.0+cu126"]
    # a pairing the matrix does not know is not planned, and said so
    gap = resolve(facts, m, Request(torch="7.8.0", packages=["torch", "torchtext"]))
    assert [p.name for p in gap.packages] == ["torch"] and any("torchtext" in w for w in gap.warnings)
    assert plan.command == [
        "/home/u/venv/bin/python", "-m", "pip", "install", *reqs, "--index-url", "https://mirror.example/whl/cu126",
    ]
    uv = resolve(facts, m, Request(installer="uv", torch="7.5.0", packages=["torch", "torchvision", "torchaudio"]))
    assert [p.requirement for p in uv.packages] == ["torch==7.5.0+cu126", "torchvision==1.5.0+cu126", "torchaudio==7.5.0+cu126"]
    assert uv.command[:5] == ["uv", "pip", "install", "--python", "/home/u/venv/bin/python"]
    assert uv.command[-2:] == ["--index-url", "https://download.pytorch.org/whl/cu126"]


def test_macos_packages_come_from_pypi_without_local_suffix(m):
    plan = resolve(machine("apple-m2-macos15"), m, Request(packages=["torch", "torchvision"]))
    assert plan.index_url == "https://pypi.org/simple"
    assert [p.requirement for p in plan.packages] == ["torch==7.8.0", "torchvision==1.8.0"]
    assert all(p.variant is None for p in plan.packages)


def test_old_macos_prefers_a_release_with_mps(m):
    facts = machine("apple-m2-macos15")
    facts.apple.macos_version = "13.6"
    facts.python.platform_tag = "macosx_13_0_arm64"
    plan = resolve(facts, m, Request())
    # 7.6+ wheels need macOS 14; 7.4-7.5 install but their MPS needs macOS 14: 7.3.0 is the newest with MPS
    assert plan.torch_version == "7.3.0", text(plan)
    assert any("MPS needs macOS >= 14.0" in r.reason for r in plan.rejected)


@pytest.mark.parametrize(
    "request_, torch_version, variant",
    [
        pytest.param(Request(gpus=["sm_90"], driver="570.124.06"), "7.8.0", "cu126", id="sm90-driver570"),
        pytest.param(Request(gpus=["NVIDIA H100 80GB HBM3"], driver="580.65.06"), "7.8.0", "cu132", id="h100-by-name-minor-compat-still-newest"),
        pytest.param(Request(gpus=["sm_120"], driver="570.124.06"), "7.5.0", "cu128", id="sm120-driver570"),
        pytest.param(Request(gfx=["gfx1032"]), "7.8.0", "rocm7.2", id="gfx1032-whatif"),
        pytest.param(Request(gpus=["sm_61"], driver="551.61", platform="win_amd64", python_version="3.11"), "7.8.0", "cu126", id="windows-target"),
        pytest.param(Request(platform="manylinux_2_17_x86_64"), "7.1.0", "cpu", id="platform-only-glibc217"),
    ],
)
def test_what_if_overrides_replace_probed_facts(m, request_, torch_version, variant):
    plan = resolve(machine("no-gpu-linux"), m, request_)
    assert (plan.torch_version, plan.variant) == (torch_version, variant), text(plan)


def test_what_if_driver_on_a_gpu_machine(m):
    plan = resolve(machine("rtx5090-driver570"), m, Request(driver="595.58.03"))
    assert (plan.torch_version, plan.variant) == ("7.8.0", "cu132")
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
    assert (plan.torch_version, plan.variant) == ("7.8.0", "cpu")


def test_unknown_pin_and_bad_specifier(m):
    plan = resolve(machine("no-gpu-linux"), m, Request(torch="9.9.9"))
    assert plan.variant is None and "not in the compatibility matrix" in plan.reasons[0]
    bad = resolve(machine("no-gpu-linux"), m, Request(torch=">=two"))
    assert bad.variant is None and "specifier" in bad.reasons[0]


def test_release_without_known_builds_is_skipped_and_said(m):
    plan = resolve(machine("no-gpu-linux"), m, Request())
    assert any("7.9.0" in w and "does not know its builds" in w for w in plan.warnings)


def test_leftovers_when_switching_cuda_major(m):
    facts = machine("gtx1080-driver580")
    facts.torch.installed = True
    facts.torch.version = "7.7.0+cu130"
    facts.torch.variant = "cu130"
    facts.torch.distributions = {"torch": "7.7.0+cu130", "nvidia-cublas": "13.0.0.19", "nvidia-cudnn-cu13": "9.13.0.50", "numpy": "2.3.0"}
    plan = resolve(facts, m, Request())
    assert plan.variant == "cu126"
    # CUDA 13 wheels without a suffix (nvidia-cublas) are left behind too, and numpy is no runtime
    assert plan.leftovers == ["nvidia-cublas", "nvidia-cudnn-cu13"]


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
    plan = resolve(machine("gtx1080-driver580"), m, Request(python_version=given, torch="7.8.0"))
    assert plan.variant == expected, text(plan)


def test_linux_aarch64_cpu_and_torchvision_without_local_suffix(m):
    facts = machine("no-gpu-linux")
    facts.platform.machine = "aarch64"
    facts.python.platform_tag = "manylinux_2_35_aarch64"
    plan = resolve(facts, m, Request(packages=["torch", "torchvision"]))
    assert plan.variant == "cpu" and plan.index_url.endswith("/cpu")
    assert [p.requirement for p in plan.packages] == ["torch==7.8.0", "torchvision==1.8.0"]


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
    assert (plan.torch_version, plan.variant) == ("7.8.0", "cu132"), text(plan)
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


# ---------------------------------------------------------------------------- what resolving real machines showed (issue 12)


@pytest.mark.parametrize(
    "platform, jetson",
    [
        pytest.param("manylinux_2_28_aarch64", True, id="manylinux-aarch64"),
        pytest.param("linux_aarch64", True, id="plain-linux-aarch64"),
        pytest.param("manylinux_2_28_x86_64", False, id="linux-x86_64"),
        pytest.param("win_amd64", False, id="windows"),
    ],
)
def test_what_if_platform_on_a_jetson_keeps_the_jetpack_source_on_linux_aarch64_only(m, platform, jetson):
    plan = resolve(machine("jetson-orin-jp62"), m, Request(platform=platform))
    row = m.jetson_row("36.4.3")
    if jetson:
        assert (plan.torch_version, plan.variant, plan.index_url) == ("7.1.0", row.variant, row.index_url), text(plan)
        assert plan.command[-1] == row.index_url
    else:
        assert plan.variant == "cpu" and plan.index_url == "https://download.pytorch.org/whl/cpu", text(plan)


def test_windows_arch_list_unknown_is_judged_by_the_same_builds_linux_list_and_said(m):
    facts = machine("windows-gtx1070-driver551")
    plan = resolve(facts, m, Request(torch="7.2.0", driver="472.50"))  # 472.50: an R470 Windows driver (CUDA 11.4 U3 row of Table 3)
    assert (plan.torch_version, plan.variant) == ("7.2.0", "cu118"), text(plan)
    warnings = "\n".join(plan.warnings)
    assert "the CUDA arch list of torch 7.2.0 cu118 for Windows amd64 is unknown; its Linux x86_64 list" in warnings
    assert "sm_60" in warnings and "minor-version-compatibility floor (452.39)" in warnings
    # the newer CUDA builds are refused for the driver, not for their unknown Windows lists
    assert any(r.variant == "cu126" and "older than CUDA 12.6" in r.reason for r in plan.rejected), text(plan)
    # a Windows list of its own is used as it is, without the warning
    own = resolve(facts, m, Request())
    assert own.variant == "cu126" and not any("stands in" in w for w in own.warnings)


def test_an_arch_list_unknown_on_every_platform_still_refuses_the_build(tmp_path):
    layer = tmp_path / "no-lists.yaml"
    layer.write_text(
        'releases:\n- version: "7.2.0"\n  source: "test: cu118 without any arch list"\n  variants:\n'
        '    - {name: cu118, platforms: [manylinux_2_28_x86_64, win_amd64], pythons: ["3.10", "3.12"], source: "test"}\n'
    )
    mm = frozen(layer)
    plan = resolve(machine("windows-gtx1070-driver551"), mm, Request(torch="7.2.0", variant="cu118", driver="472.50"))
    assert plan.variant is None
    assert any(r.variant == "cu118" and "its CUDA arch list for win_amd64 is unknown" in r.reason for r in plan.rejected), text(plan)
    linux = resolve(machine("k80-driver470"), mm, Request(torch="7.2.0", variant="cu118"))
    assert linux.variant is None and "arch list for manylinux_2_28_x86_64 is unknown" in text(linux)


def _aarch64(facts: Facts) -> Facts:
    facts.platform.machine = "aarch64"
    facts.python.platform_tag = "manylinux_2_35_aarch64"
    return facts


def test_linux_aarch64_arch_list_unknown_is_inferred_from_another_release_not_from_x86_64(m):
    # 7.2.0 cu128's aarch64 list is unknown; its x86_64 list (sm_75 ...) must not stand in for the aarch64 wheel
    plan = resolve(_aarch64(machine("no-gpu-linux")), m, Request(torch="7.2.0", gpus=["sm_90"], driver="580.65.06"))
    assert plan.variant == "cu128", text(plan)
    warnings = "\n".join(plan.warnings)
    assert "its Linux x86_64 list" not in warnings
    near = m.platform_arch_list(m.release("7.2.0").version, "cu128", "manylinux_2_35_aarch64")
    assert near is not None and near[0] != m.release("7.2.0").version
    assert (
        f"the CUDA arch list of torch 7.2.0 cu128 for Linux aarch64 is unknown; inferred from torch {near[0]} cu128 for Linux aarch64"
        in warnings
    ), warnings
    # a GPU the inferred aarch64 list lacks (sm_75: in the x86_64 list only) gets no cu128 build
    t4g = resolve(_aarch64(machine("no-gpu-linux")), m, Request(torch="7.2.0", gpus=["sm_75"], driver="580.65.06"))
    assert t4g.variant == "cpu", text(t4g)
    assert any(r.variant == "cu128" and "is sm_75; cu128 builds sm_80 and newer" in r.reason for r in t4g.rejected), text(t4g)


def test_aarch64_arch_list_unknown_everywhere_refuses_the_build(tmp_path):
    layer = tmp_path / "no-aarch64-lists.yaml"
    layer.write_text(
        'releases:\n- version: "7.2.0"\n  source: "test: cu128 with an x86_64 list only"\n  variants:\n'
        '    - {name: cpu, platforms: [manylinux_2_28_x86_64, manylinux_2_28_aarch64], pythons: ["3.12"], source: "test"}\n'
        '    - {name: cu128, platforms: [manylinux_2_28_x86_64, manylinux_2_28_aarch64], pythons: ["3.12"], arch_list: [sm_75, sm_80, sm_90], source: "test"}\n'
    )
    mm = load_matrix([layer, FIXTURES / "matrix" / "platform.yaml"], embedded=False)
    plan = resolve(_aarch64(machine("no-gpu-linux")), mm, Request(torch="7.2.0", gpus=["sm_90"], driver="580.65.06"))
    assert plan.variant == "cpu", text(plan)
    assert any(
        r.variant == "cu128" and "arch list for manylinux_2_28_aarch64 is unknown to the matrix (another CPU architecture's list does not stand in" in r.reason
        for r in plan.rejected
    ), text(plan)


@pytest.mark.parametrize("torch", [None, "2.14.1", "2.15.0"])
def test_a_t4g_on_aarch64_gets_no_cuda_build_that_lacks_sm_75(shipped, torch):
    """Issue 30: a T4G (sm_75) Graviton on driver 580 was planned 2.14.1 cu130 by the x86_64 list; its aarch64 wheel
    (read from the wheel, compat_matrix/learned.yaml) starts at sm_80."""
    facts = _aarch64(machine("no-gpu-linux"))
    plan = resolve(facts, shipped, Request(torch=torch, gpus=["sm_75"], driver="580.65.06"))
    for r in plan.rejected:
        assert "Linux x86_64 list" not in r.reason
    assert not any("its Linux x86_64 list" in w for w in plan.warnings), text(plan)
    if torch is None:  # unpinned: the newest CPU build for aarch64 (or an older CUDA build whose own aarch64 list has sm_75)
        assert plan.satisfiable, text(plan)
        if plan.variant != "cpu":
            v = shipped.variant(plan.torch_version, plan.variant)
            assert v is not None and v.arch_known_for("manylinux_2_35_aarch64") and "sm_75" in v.arch_for("manylinux_2_35_aarch64"), text(plan)
        else:
            assert any("no GPU build fits (see rejected)" in r for r in plan.reasons), text(plan)
        return
    # pinned to a release whose only aarch64 wheel on PyPI is its CUDA build: that build is no CPU build on a GPU it lacks;
    # the CPU build the release's build matrix announces is planned, its state said (issue 43: unknown is not absent)
    name = shipped.pypi_default(torch, "linux_aarch64").variant
    assert plan.variant == "cpu" and plan.torch_version == torch, text(plan)
    assert any(r.variant == name and f"is sm_75; {name} builds sm_80 and newer" in r.reason for r in plan.rejected), text(plan)
    assert any(f"torch {torch} cpu for Linux aarch64: announced (pytorch/test-infra" in w for w in plan.warnings), text(plan)
    from stackdoctor.core.texts import sentence

    zh = [sentence(w, "zh") for w in plan.warnings if "announced (" in w]
    assert zh and all("已公布" in z and "announced" not in z for z in zh), zh


def test_the_2_14_1_and_2_15_0_aarch64_arch_lists_are_the_wheels(shipped):
    want = ("sm_80", "sm_90", "sm_100", "sm_110", "sm_120")
    for version, name in (("2.14.1", "cu130"), ("2.15.0", "cu132")):
        v = shipped.variant(version, name)
        assert v is not None and v.arch_by_platform.get("manylinux_2_28_aarch64") == want, (version, v)
        assert "manylinux_2_28_aarch64.whl sha256:" in v.source and "GPU code read from torch/lib/libtorch_cuda.so" in v.source
        assert v.arch_list != want  # the x86_64 list is its own (sm_75 ...)


def test_a_python_with_wheels_on_some_platforms_only(m):
    linux = resolve(machine("no-gpu-linux"), m, Request(torch="7.1.0", python_version="3.13t"))
    assert (linux.torch_version, linux.variant) == ("7.1.0", "cpu"), text(linux)
    win = resolve(machine("windows-gtx1070-driver551"), m, Request(torch="7.1.0", python_version="3.13t"))
    assert win.variant is None
    assert "cpu has no wheels for Python 3.13t on Windows amd64 (torch 7.1.0 has them only for Linux x86_64)" in text(win)
    assert not any("Python 3.13t" in s for s in win.suggestions), win.suggestions  # not suggested where it has no wheels
    assert any("--torch 7.5.0" in s for s in win.suggestions)  # the newest release with 3.13t wheels for Windows


def test_the_intel_mac_cap_is_read_from_the_matrix(m, tmp_path):
    asked = Request(torch="7.5")
    assert "only up to torch 7.0.0" in text(resolve(machine("intel-mac-catalina"), m, asked))
    layer = tmp_path / "mac.yaml"  # a later release with macOS x86_64 wheels moves the cap
    layer.write_text(
        'releases:\n- version: "7.1.0"\n  source: "test: a made-up macOS x86_64 build"\n  variants:\n'
        '    - {name: cpu, platforms: [manylinux_2_17_x86_64, win_amd64, macosx_11_0_arm64, macosx_10_15_x86_64], source: "test"}\n'
    )
    moved = resolve(machine("intel-mac-catalina"), frozen(layer), asked)
    assert "only up to torch 7.1.0" in text(moved) and "7.0.0" not in "\n".join(moved.reasons)


def test_index_urls_come_from_the_matrix(tmp_path):
    layer = tmp_path / "mirror.yaml"
    layer.write_text(
        'indexes:\n  pytorch: {url: "https://mirror.test/pytorch/whl/", source: "test"}\n'
        '  pypi: {url: "https://mirror.test/pypi/simple", source: "test"}\n'
    )
    mm = frozen(layer)
    plan = resolve(machine("gtx1080-driver580"), mm, Request())
    assert plan.index_url == "https://mirror.test/pytorch/whl/cu126" and plan.command[-1] == plan.index_url
    assert resolve(machine("apple-m2-macos15"), mm, Request()).index_url == "https://mirror.test/pypi/simple"
    # --index-base / STACKDOCTOR_INDEX_BASE (the request's index_base) still wins
    own = resolve(machine("gtx1080-driver580"), mm, Request(index_base="https://other.test/whl/"))
    assert own.index_url == "https://other.test/whl/cu126"


# ---------------------------------------------------------------------------- smoke tests on the shipped matrix
# Expectations here are computed from the shipped matrix or pinned in the request, so a new release changes nothing.


@pytest.mark.parametrize("case", sorted(p.stem for p in MACHINES.glob("*.json")))
def test_shipped_matrix_every_machine_resolves_to_a_published_build(shipped, case):
    plan = resolve(machine(case), shipped, Request())
    assert plan.reasons, "every plan says why"
    if plan.variant is None:
        assert plan.suggestions or plan.rejected, text(plan)
        return
    if plan.variant.startswith("jetson-"):
        assert any(j.variant == plan.variant and plan.torch_version in j.torch for j in shipped.jetson), text(plan)
        return
    release = shipped.release(plan.torch_version)
    assert release is not None and release.variant(plan.variant) is not None, text(plan)
    assert plan.packages[0].requirement.startswith(f"torch=={plan.torch_version}")


def test_shipped_matrix_rtx4090_on_a_recent_driver_gets_the_newest_release_with_a_cuda_build(shipped):
    newest = next(r for r in shipped.releases if any(v.kind == "cuda" for v in r.variants))
    cuda = [v for v in newest.variants if v.kind == "cuda" and any(p.endswith("x86_64") and p.startswith("manylinux") for p in v.platforms)]
    rows = [shipped.cuda_row(v.cuda) for v in cuda]
    driver = max((r.min_driver_linux for r in rows if r and r.min_driver_linux), key=lambda d: tuple(int(x) for x in d.split(".")))
    python = max((p for p in newest.pythons if not p.endswith("t") and p not in newest.torch_only_pythons), key=lambda p: tuple(int(x) for x in p.split(".")))
    runs = [v for v in cuda if arch_runs(v.arch_list, "8.9") and driver_meets(shipped.cuda_row(v.cuda), driver, windows=False) == "full"]
    expected = max(runs, key=lambda v: tuple(int(x) for x in (v.cuda or "0").split(".")))
    plan = resolve(machine("no-gpu-linux"), shipped, Request(gpus=["NVIDIA GeForce RTX 4090"], driver=driver, python_version=python))
    assert (plan.torch_version, plan.variant) == (str(newest.version), expected.name), text(plan)
    assert variant_kind(plan.variant)[0] == "cuda"


def test_shipped_matrix_windows_pascal_on_an_r470_driver_gets_a_cuda_build_of_2_7_1(shipped):
    """Issue 12: a pinned torch 2.7.1 on a Pascal card with a 47x driver on Windows planned cpu because the Windows arch
    list was unknown; 2.7.1+cu118 runs there (sm_61 runs the sm_60 kernels; 47x meets CUDA 11's floor)."""
    facts = machine("windows-gtx1070-driver551")
    facts.nvidia.driver_version = "472.50"
    plan = resolve(facts, shipped, Request(torch="2.7.1"))
    assert (plan.torch_version, plan.variant) == ("2.7.1", "cu118"), text(plan)


def test_shipped_matrix_jetson_what_if_on_linux_aarch64_keeps_the_jetpack_source(shipped):
    plan = resolve(machine("jetson-orin-jp62"), shipped, Request(platform="manylinux_2_28_aarch64"))
    row = shipped.jetson_row("36.4.3")
    assert (plan.variant, plan.index_url) == (row.variant, row.index_url), text(plan)


@pytest.mark.parametrize(
    ("platform", "cited"),
    [("win_amd64", "win_amd64.whl"), ("macosx_14_0_arm64", "macosx_14_0_arm64.whl"), ("manylinux_2_28_x86_64", None)],
)
def test_a_learned_reason_cites_the_wheel_of_the_target_platform(shipped, platform, cited):
    """torch 2.14.0's cpu row is PyPI's macOS and Windows wheels (learned) merged with the PyTorch index's Linux
    builds (another source): a plan names the learned wheel of its own platform, and a Linux plan no learned wheel."""
    plan = resolve(Facts(), shipped, Request(platform=platform, python_version="3.12", torch="2.14.0"))
    assert (plan.torch_version, plan.variant) == ("2.14.0", "cpu"), plan.reasons
    learned = [r for r in plan.reasons if "learned" in r]
    if cited is None:
        assert learned == [], learned
    else:
        assert len(learned) == 1 and cited in learned[0] and "sha256:" in learned[0], learned
        assert all(p not in learned[0] for p in ("macosx", "win_amd64", "linux") if p not in cited)


def test_a_what_if_on_a_venv_with_a_newer_torch_says_downgrade_and_the_installed_version(shipped):
    """Issue 30: on a venv holding torch 2.16.0+cu132 (newer than the matrix knows), ``--gpu sm_90 --driver 600``
    planned 2.15.0 with no word of a downgrade. A what-if for other GPUs / another driver plans for this same
    environment; one for another platform or Python does not replace its torch and says nothing of it."""
    from stackdoctor.core.texts import sentence

    facts = machine("no-gpu-linux")
    facts.torch = dataclasses.replace(facts.torch, installed=True, version="2.16.0+cu132", variant="cu132")
    plan = resolve(facts, shipped, Request(gpus=["sm_90"], driver="600.10"))
    assert plan.satisfiable and Version(plan.torch_version or "9") < Version("2.16"), text(plan)
    new_full = f"{plan.torch_version}+{plan.variant}"
    assert plan.reasons[0].startswith(f"downgrade from 2.16.0+cu132 to {new_full}: "), plan.reasons
    assert "the installed torch is 2.16.0+cu132" in plan.reasons[0]
    assert f"this plan downgrades torch from 2.16.0+cu132 to {new_full}" in plan.warnings
    zh = sentence(plan.reasons[0], "zh")
    assert zh.startswith(f"降级：从 2.16.0+cu132 降到 {new_full}") and "已安装的 torch 是 2.16.0+cu132" in zh, zh
    assert sentence(plan.warnings[-1], "zh") == f"此计划会把 torch 从 2.16.0+cu132 降级到 {new_full}"
    assert plan.command  # a what-if only plans: nothing is kept
    other = resolve(facts, shipped, Request(gpus=["sm_90"], driver="600.10", platform="win_amd64", python_version="3.12"))
    assert not any("downgrade" in r for r in other.reasons + other.warnings), text(other)


def test_missing_companions_are_planned_beside_a_satisfied_torch(shipped):
    """Issue 30: on a venv holding a working torch newer than the plan, ``install torch torchvision torchaudio``
    answered "satisfied" with an empty command, dropping the two missing companions."""
    from stackdoctor.core.texts import sentence

    facts = machine("no-gpu-linux")
    # Python 3.10: torch 2.15.0 has no wheels for it (Requires-Python >=3.11), so the plan is older than the installed torch
    facts.python = dataclasses.replace(facts.python, version="3.10.12")
    facts.torch = dataclasses.replace(facts.torch, installed=True, version="2.15.0+cpu", variant="cpu", distributions={"torch": "2.15.0+cpu"})
    tv, ta = shipped.paired("2.15.0")
    assert tv and ta
    plan = resolve(facts, shipped, Request(packages=["torch", "torchvision", "torchaudio"]))
    assert plan.torch_version == "2.15.0" and not plan.satisfied, text(plan)
    assert [p.requirement for p in plan.packages] == ["torch==2.15.0+cpu", f"torchvision=={tv}+cpu", f"torchaudio=={ta}+cpu"]
    assert plan.command[-2:] == ["--index-url", "https://download.pytorch.org/whl/cpu"] and "torch==2.15.0+cpu" in plan.command
    said = next(r for r in plan.reasons if "planned beside it" in r)
    assert said == f"torchvision {tv}, torchaudio {ta} (paired with the installed torch 2.15.0): missing, planned beside it"
    assert "缺少" in sentence(said, "zh")
    # with both companions installed, it is satisfied as before
    facts.torch = dataclasses.replace(facts.torch, torchvision_version=tv, torchaudio_version=ta)
    done = resolve(facts, shipped, Request(packages=["torch", "torchvision", "torchaudio"]))
    assert done.satisfied and done.command == [], text(done)
