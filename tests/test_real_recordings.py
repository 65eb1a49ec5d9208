"""Every parser in stackdoctor/probes/ reads at least one REAL recorded input (tests/fixtures/real/<case>/, each with
its source.md), or tests/fixtures/real/README.md says why none could be had. The facts asserted here are the ones
each case's source.md lists under "Derived facts".

Inputs a parser reads are registered in ``test_properties.REAL_CASES`` (which also checks that capture noise, a
shell prompt before or blank lines after, changes nothing) and in ``EXTRA`` below (parsers that take a second
argument, or single-value outputs that a prompt line would change).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_properties import PARSERS, REAL_CASES

from stackdoctor.accelerators.amd import probe as rocm
from stackdoctor.accelerators.apple import probe as apple
from stackdoctor.accelerators.jetson import probe as jetson
from stackdoctor.accelerators.nvidia import probe as nvidia
from stackdoctor.kinds import pci
from stackdoctor.probes import platform, target, thunderbolt

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
README = REAL / "README.md"


def read(case: str, name: str) -> str:
    return (REAL / case / name).read_text(encoding="utf-8")


def output(case: str, name: str) -> str:
    """The tool's output: the recording without the shell-prompt line the person pasted first."""
    text = read(case, name)
    first, _, rest = text.partition("\n")
    return rest if re.match(r"^(\S*[$#>] |nvidia-smi |kubectl )", first) else text


# (case, file, parser) for the inputs that are not in test_properties.REAL_CASES
EXTRA = [
    ("r-titanv-rtx5880ada-driver570-query-triton-8070", "nvidia-smi-query.csv", "nvidia.parse_smi_query"),
    ("r-titanv-rtx5880ada-driver570-query-triton-8070", "nvidia-smi-query.csv", "nvidia.parse_smi_query_driver"),
    ("r-apt-cache-show-nvidia-l4t-core-35.3.1-alliedvision-61", "apt-cache-show-nvidia-l4t-core.txt", "jetson.parse_dpkg_package_version"),
    ("doc-getconf-gnu-libc-version-man-malloc-info", "getconf-GNU_LIBC_VERSION.txt", "platform.parse_glibc_confstr"),
    ("r-sysctl-brand-string-m1-pro-rosetta-spack-30077", "sysctl-n-machdep.cpu.brand_string.txt", "apple.parse_sysctl_value"),
    ("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt", "thunderbolt_parse.parse_speed_gbps"),
    ("c22-linux-boltctl-razer-core-tb3-egpu", "boltctl.txt", "thunderbolt_parse.parse_speed_gbps"),
    ("local-build-machine-proc-net-and-pci-sysfs", "pci-0000-00-03.0-class.txt", "pci.parse_pci_id"),
    ("d01-h200-driver580-open-kernel-module-lent-device", "nvidia-smi.txt", "nvidia.parse_smi_table"),
    ("d01-h200-driver580-open-kernel-module-lent-device", "nvidia-smi-L.txt", "nvidia.parse_smi_list"),
    ("d01-h200-driver580-open-kernel-module-lent-device", "nvidia-smi-query-gpu.csv", "nvidia.parse_smi_query"),
    ("d01-h200-driver580-open-kernel-module-lent-device", "proc_driver_nvidia_version.txt", "nvidia.parse_proc_driver_version"),
    ("d01-h200-driver580-open-kernel-module-lent-device", "proc_driver_nvidia_gpus_0000_00_06.0_information.txt", "nvidia.parse_proc_gpu_information"),
    ("local-torch-2.14.1-cp311-pypi-wheel-files", "version.py", "torch_static.parse_torch_version_py"),
    ("local-torch-2.14.1-cp311-pypi-wheel-files", "METADATA", "torch_static.parse_dist_metadata"),
    ("local-torch-2.14.1-cp311-pypi-wheel-files", "METADATA", "torch_static.parse_requires_dist"),
    ("r-ls-driver-libraries-550-gpud-415", "ll-lib-x86_64-linux-gnu.txt", "nvidia.parse_driver_library_name"),
    ("local-torch-2.14.1-cp311-pypi-wheel-files", "dist-info-dirname.txt", "torch_static.parse_dist_info_dirname"),
    ("local-nvidia-cu13-runtime-dist-info", "nvidia_nvvm-13.0.88.dist-info/RECORD", "torch_static.parse_record_bytes"),
]


def registered() -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {}
    for case, name, parser in [*REAL_CASES, *EXTRA]:
        out.setdefault(parser, []).append((case, name))
    return out


def without_public_recording() -> dict[str, str]:
    """README.md's "Parsers without a public recording" list: ``- `module.parse_x`: why``."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Parsers without a public recording", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^- `([a-z_]+\.parse_[a-z_0-9]+)`: (.+)$", section, re.MULTILINE)}


def test_every_parser_has_a_real_input_or_a_reason():
    have = registered()
    missing = without_public_recording()
    for name in sorted(PARSERS):
        assert name in have or name in missing, f"{name} reads no real recording and README.md does not say why"
        assert name not in missing or len(missing[name]) > 20, f"{name}: say why, in a sentence"
    for case, name in (pair for pairs in have.values() for pair in pairs):
        assert (REAL / case / name).is_file() and (REAL / case / "source.md").is_file(), (case, name)
    assert not set(missing) - set(PARSERS), "README.md names a parser that does not exist"


def test_every_case_has_its_source_and_is_read_by_a_test():
    """Each case names its source and derived facts, and some test reads it: by the registry above, or by name
    in another test module (the witness, fault and end-to-end tests read whole machines)."""
    used = {case for pairs in registered().values() for case, _ in pairs}
    tests_dir = Path(__file__).resolve().parent
    named = "\n".join(p.read_text(encoding="utf-8") for p in tests_dir.rglob("*.py") if "fixtures" not in p.parts and p != Path(__file__).resolve())
    for d in sorted(p for p in REAL.iterdir() if p.is_dir()):
        src = (d / "source.md").read_text(encoding="utf-8")
        assert "```yaml" in src, f"{d.name}/source.md has no derived facts"
        assert re.search(r"https?://|captured", src), f"{d.name}/source.md names no source"
        assert d.name in used or d.name in named, f"{d.name} is read by no test"


# ---------------------------------------------------------------------------- what each real input says (source.md)


def test_smi_query_answer_with_its_own_fields():
    fields = ("compute_cap", "compute_mode", "driver_version", "name", "index")
    text = read("r-titanv-rtx5880ada-driver570-query-triton-8070", "nvidia-smi-query.csv")
    gpus = nvidia.parse_smi_query(text, fields)  # the header line and the prompt line are not rows
    assert [(g.index, g.name, g.compute_capability) for g in gpus] == [(0, "NVIDIA TITAN V", "7.0"), (1, "NVIDIA RTX 5880 Ada Generation", "8.9")]
    assert all(g.sources["compute_capability"] == "nvidia-smi --query-gpu" for g in gpus)
    assert nvidia.parse_smi_query_driver(text, fields) == "570.86.15"


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("r-titanv-rtx5880ada-driver570-query-triton-8070", [(0, "NVIDIA TITAN V", "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd"),
                                                             (1, "NVIDIA RTX 5880 Ada Generation", "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137")]),
        ("r-2x-quadro-rtx4000-driver535-nvidia-smi-L-akash-12", [(0, "Quadro RTX 4000", "GPU-c7b57be0-94ff-d352-a59b-d0ee00aeed43"),
                                                                 (1, "Quadro RTX 4000", "GPU-d6de6afc-bdfe-75c4-5273-0544439153fc")]),
    ],
)
def test_smi_list(case, expected):
    assert [(g.index, g.name, g.uuid) for g in nvidia.parse_smi_list(read(case, "nvidia-smi-L.txt"))] == expected


def test_driver_library_names_in_a_real_listing():
    """Every name in a real ``ll /lib/x86_64-linux-gnu`` (both sides of each link): only the two files named by
    the driver's version are driver libraries; the links, the debugger library and ICU are not."""
    text = read("r-ls-driver-libraries-550-gpud-415", "ll-lib-x86_64-linux-gnu.txt")
    names = {n for line in text.splitlines() if line.startswith(("-rw", "lrw")) for n in line.split()[8:] if n != "->"}
    assert len(names) == 10, sorted(names)  # the 10 entries listed (every link points at one of them)
    got = {n: nvidia.parse_driver_library_name(n) for n in names}
    assert {n: v for n, v in got.items() if v} == {"libnvidia-ml.so.550.90.07": ("libnvidia-ml", "550.90.07"),
                                                  "libcuda.so.550.90.07": ("libcuda", "550.90.07")}


def test_smi_list_skips_mig_devices():
    gpus = nvidia.parse_smi_list(read("r-4xa100-mig-nvidia-smi-L-telegraf-5812", "nvidia-smi-L.txt"))
    assert [g.index for g in gpus] == [0, 1, 2, 3] and {g.name for g in gpus} == {"NVIDIA A100-SXM4-80GB"}
    assert gpus[0].uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"


def test_amd_smi_list_and_version_of_eight_mi300x():
    text = read("doc-amd-smi-list-8xmi300x-oci-hpc-oke", "amd-smi-list.txt")
    gpus = rocm.parse_amd_smi_list(text)
    assert sorted(gpus) == list(range(8))
    assert gpus[0] == {"BDF": "0000:11:00.0", "UUID": "d4ff74a1-0000-1000-80b1-dbb1e6a69543"}
    assert gpus[7]["BDF"] == "0000:da:00.0"
    v = rocm.parse_amd_smi_version(text)
    assert (v["AMDSMI Tool"], v["AMDSMI Library version"], v["ROCm version"]) == ("24.5.1+c5106a9", "24.5.2.0", "6.1.2")


def test_rocm_smi_showallinfo_key_values():
    kv = rocm.parse_rocm_smi_kv(read("r-mi300x-container-kfd-invalid-argument-4043", "rocm-smi-showallinfo.txt"))
    assert kv[0]["Device Name"] == "AMD Instinct MI300X OAM" and kv[0]["Device ID"] == "0x74a1"


def test_cgroup_of_a_docker_container():
    assert platform.parse_cgroup_container(read("r-proc-1-cgroup-docker-ctrsploit-280", "proc-1-cgroup.txt")) == "docker"


def test_cpuinfo_of_an_arm_board_without_model_name():
    assert platform.parse_cpuinfo(read("r-cpuinfo-raspberry-pi-4b-fastfetch-1529", "cpuinfo.txt")) == ("Raspberry Pi 4 Model B Rev 1.5", 4)


def test_meminfo_without_memavailable():
    assert platform.parse_meminfo_total_mib(read("r-meminfo-openwrt-arm-sysinfo-164", "meminfo.txt")) == 125128 // 1024 == 122


def test_glibc_from_getconf():
    assert platform.parse_glibc_confstr(output("doc-getconf-gnu-libc-version-man-malloc-info", "getconf-GNU_LIBC_VERSION.txt").strip()) == ("glibc", "2.13")


def test_dpkg_style_stanza_of_nvidia_l4t_core():
    text = output("r-apt-cache-show-nvidia-l4t-core-35.3.1-alliedvision-61", "apt-cache-show-nvidia-l4t-core.txt")
    assert jetson.parse_dpkg_package_version(text, "nvidia-l4t-core") == "35.3.1-20230319081403"
    assert jetson.parse_dpkg_package_version(text, "nvidia-l4t-kernel") is None


def test_sysctl_brand_string():
    assert apple.parse_sysctl_value(output("r-sysctl-brand-string-m1-pro-rosetta-spack-30077", "sysctl-n-machdep.cpu.brand_string.txt")) == "Apple M1 Pro"


def test_ip_json_addresses_per_interface():
    got = thunderbolt.parse_ip_addr_json(read("r-ip-json-addr-cloud-init-testdata", "ip-json-addr-show.json"))
    assert got == {"lo": ["127.0.0.1/8", "::1/128"], "enp0s25": ["192.168.2.18/24", "fe80::7777:2222:1111:eeee/64", "fe80::8107:2b92:867e:f8a6/64"]}


def test_proc_if_inet6_and_pci_sysfs_of_the_build_machine():
    case = "local-build-machine-proc-net-and-pci-sysfs"
    assert thunderbolt.parse_proc_if_inet6(read(case, "proc-net-if_inet6.txt")) == {"eth0": ["fe80::fc:ff:fe00:1/64", "fd00::2/64"], "lo": ["::1/128"]}
    assert pci.parse_pci_id(read(case, "pci-0000-00-03.0-class.txt")) == "0x020000"
    assert pci.parse_pci_id(read(case, "pci-0000-00-03.0-vendor.txt")) == "0x1af4"
    assert pci.parse_uevent_driver(read(case, "pci-0000-00-03.0-uevent.txt")) == "virtio-pci"


def test_speeds_as_real_tools_print_them():
    speeds = re.findall(r"Speed: (.+)", read("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt"))
    assert speeds and {thunderbolt.parse_speed_gbps(s) for s in speeds} == {80.0}
    bolt = re.findall(r"(?:rx|tx) speed:\s+(.+)", read("c22-linux-boltctl-razer-core-tb3-egpu", "boltctl.txt"))
    assert bolt and {thunderbolt.parse_speed_gbps(s) for s in bolt} == {40.0}, bolt


def test_system_profiler_text_directly():
    ports = thunderbolt.parse_system_profiler_text(read("c25-macmini-to-macstudio-tb5-rdma-system_profiler", "system_profiler_thunderbolt.txt"))
    assert ports and any(p.link_speed_gbps == 80.0 and p.speed_text == "80 Gb/s" for p in ports), ports


def test_sections_of_the_real_target_worker():
    sections = target.parse_sections(read("local-sd-target-torch-2.13.0-cpu", "sd_target.txt"))
    assert list(sections) == ["python", "torch", "done"]
    assert sections["python"]["version"] == "3.11.7" and sections["python"]["env_kind"] == "venv"
    assert sections["torch"]["version"] == "2.13.0+cpu" and sections["torch"]["cuda_available"] is False


def test_the_torch_wheels_own_files_read_without_importing_it():
    """PyPI's torch 2.14.1 (a CUDA build): version.py parsed (never executed), METADATA and the dist-info name."""
    from stackdoctor.probes import torch_static

    case = "local-torch-2.14.1-cp311-pypi-wheel-files"
    v = torch_static.parse_torch_version_py(read(case, "version.py"))
    assert (v["__version__"], v["cuda"], v["hip"], v["debug"]) == ("2.14.1+cu130", "13.0", None, False)
    meta = torch_static.parse_dist_metadata(read(case, "METADATA"))
    assert (meta["name"], meta["version"]) == ("torch", "2.14.1")
    pins = torch_static.parse_requires_dist(read(case, "METADATA"))  # the pins the loader check names beside each copy
    assert 'nvidia-cudnn-cu13==9.24.0.43; platform_system == "Linux"' in pins and not any(p.startswith("numpy") for p in pins)
    assert torch_static.parse_dist_info_dirname(read(case, "dist-info-dirname.txt").strip()) == {"name": "torch", "version": "2.14.1"}
