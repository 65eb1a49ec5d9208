"""Platform probe and the shared PCI scan: parsers on real outputs, probe on synthetic sysroots."""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path

import pytest
from conftest import real_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.kinds.pci import display_devices, parse_pci_id, parse_uevent_driver
from stackdoctor.model.facts import PlatformFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.probes import platform as plat
from stackdoctor.system import Host, System

# ---------------------------------------------------------------------------- helpers


def ctx_for(root: Path | str = "/", env: dict[str, str] | None = None) -> ProbeContext:
    e = {"PATH": os.environ.get("PATH", "")}
    e.update(env or {})
    return ProbeContext(system=System(sysroot=str(root), env=e, timeout_s=5.0), target=Target(sys.executable, "self"))


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")
    return p


def add_pci(root: Path, addr: str, vendor: str, device: str, cls: str, driver: str | None = None, *, uevent_only: bool = False) -> None:
    """A synthetic /sys/bus/pci/devices/<addr> entry; the driver as a symlink (as sysfs has it) or only in uevent."""
    base = f"/sys/bus/pci/devices/{addr}"
    write(root, f"{base}/vendor", vendor + "\n")
    write(root, f"{base}/device", device + "\n")
    write(root, f"{base}/class", cls + "\n")
    if driver and uevent_only:
        write(root, f"{base}/uevent", f"DRIVER={driver}\nPCI_CLASS={cls[2:]}\n")
    elif driver:
        drv = root / "sys/bus/pci/drivers" / driver
        drv.mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../bus/pci/drivers/{driver}", root / base.lstrip("/") / "driver")


# ---------------------------------------------------------------------------- parsers

OS_RELEASE_SYNTHETIC = '''PRETTY_NAME="Ubuntu 22.04.4 LTS"
NAME="Ubuntu"
VERSION_ID="22.04"
VERSION="22.04.4 LTS (Jammy Jellyfish)"
ID=ubuntu
ID_LIKE=debian
# a comment
garbage line
'''


def test_parse_os_release_quotes_and_junk() -> None:
    rel = plat.parse_os_release(OS_RELEASE_SYNTHETIC)
    assert rel["ID"] == "ubuntu"
    assert rel["PRETTY_NAME"] == "Ubuntu 22.04.4 LTS"
    assert rel["VERSION_ID"] == "22.04"
    assert "garbage line" not in rel and len(rel) == 6


def test_parse_os_release_real_ubuntu2404() -> None:
    rel = plat.parse_os_release(real_fixture("r-os-release-ubuntu2404-k8s-157", "os-release.txt"))
    assert (rel["ID"], rel["VERSION_ID"], rel["PRETTY_NAME"]) == ("ubuntu", "24.04", "Ubuntu 24.04.2 LTS")
    assert rel["HOME_URL"] == "https://www.ubuntu.com/" and rel["VERSION_CODENAME"] == "noble"


def test_parse_proc_version_jetson_uname_real() -> None:
    kernel, machine = plat.parse_proc_version(real_fixture("c32-jetson-nano-jetbot-l4t-r32.3.1", "uname.txt"))
    assert kernel == "4.9.140-tegra"
    assert machine == "aarch64"


@pytest.mark.parametrize(
    "name, expected",
    [
        ("uname-r-wsl1.txt", (True, 1)),
        ("uname-r-wsl2-2019.txt", (True, 2)),
    ],
)
def test_detect_wsl_real_kernel_releases(name: str, expected: tuple[bool, int]) -> None:
    assert plat.detect_wsl(real_fixture("r-wsl-kernel-releases", name).strip()) == expected


def test_wsl2_from_proc_version_real() -> None:
    kernel, machine = plat.parse_proc_version(real_fixture("r-wsl-kernel-releases", "proc-version-wsl2.txt"))
    assert kernel == "5.4.72-microsoft-standard-WSL2"
    assert machine is None
    assert plat.detect_wsl(kernel) == (True, 2)


def test_detect_wsl_plain_kernels() -> None:
    assert plat.detect_wsl("4.9.140-tegra") == (False, None)
    assert plat.detect_wsl(None) == (False, None)


@pytest.mark.parametrize(
    "text, kind",
    [
        ("12:cpuset:/docker/3f0c1a6e0d2b\n11:memory:/docker/3f0c1a6e0d2b\n", "docker"),
        ("0::/kubepods/besteffort/pod1234/abcd\n", "kubernetes"),
        ("0::/machine.slice/libpod-1234.scope\n", "podman"),
        ("0::/\n", None),
        ("", None),
    ],
    ids=["docker-v1", "k8s", "podman", "cgroup2-root", "empty"],
)
def test_parse_cgroup_container_synthetic(text: str, kind: str | None) -> None:
    assert plat.parse_cgroup_container(text) == kind


def test_parse_cpuinfo_and_meminfo_synthetic() -> None:
    cpu = "processor\t: 0\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD Ryzen 9 7950X 16-Core Processor\n"
    assert plat.parse_cpuinfo(cpu) == ("AMD Ryzen 9 7950X 16-Core Processor", 2)
    assert plat.parse_meminfo_total_mib("MemTotal:       131899588 kB\nMemFree: 1 kB\n") == 128808
    assert plat.parse_meminfo_total_mib("nothing") is None


def test_parse_glibc_confstr_and_file_names() -> None:
    assert plat.parse_glibc_confstr("glibc 2.35") == ("glibc", "2.35")
    assert plat.parse_glibc_confstr(None) == (None, None)
    assert plat.parse_glibc_confstr("musl 1.2") == (None, None)
    assert plat.parse_libc_filename("libc-2.31.so") == "2.31"
    assert plat.parse_libc_filename("libc.so.6") is None


def test_parse_pci_files() -> None:
    assert parse_pci_id("0x030000\n") == "0x030000"
    assert parse_pci_id("0x10DE\n") == "0x10de"
    assert parse_pci_id("garbage") is None
    assert parse_uevent_driver("DRIVER=amdgpu\nPCI_CLASS=30000\n") == "amdgpu"
    assert parse_uevent_driver("PCI_CLASS=30000\n") is None


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_platform_parsers_never_raise(text: str) -> None:
    plat.parse_os_release(text)
    plat.parse_proc_version(text)
    plat.detect_wsl(text)
    plat.parse_cgroup_container(text)
    plat.parse_cpuinfo(text)
    plat.parse_meminfo_total_mib(text)
    plat.parse_glibc_confstr(text)
    plat.parse_libc_filename(text)
    parse_pci_id(text)
    parse_uevent_driver(text)


# ---------------------------------------------------------------------------- probe on synthetic sysroots


@pytest.fixture
def docker_gpu_root(tmp_path: Path) -> Path:
    """Synthetic: an aarch64 Ubuntu container with an NVIDIA GPU passed in, plus AMD, Intel and non-display devices."""
    root = tmp_path / "synthetic-docker-gpu"
    write(root, "/etc/os-release", OS_RELEASE_SYNTHETIC)
    write(root, "/proc/sys/kernel/osrelease", "5.15.0-1058-nvidia\n")
    write(root, "/proc/version", "Linux version 5.15.0-1058-nvidia (buildd@host) (gcc 11) #1 SMP aarch64\n")
    write(root, "/proc/sys/kernel/hostname", "gpu-node-7\n")
    write(root, "/proc/cpuinfo", "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\n")
    write(root, "/proc/meminfo", "MemTotal:       2097152 kB\n")
    write(root, "/.dockerenv", "")
    write(root, "/dev/nvidiactl", "")
    write(root, "/lib/aarch64-linux-gnu/libc-2.31.so", "")
    write(root, "/lib/aarch64-linux-gnu/libc.so.6", "")
    add_pci(root, "0000:01:00.0", "0x10de", "0x2684", "0x030000", "nvidia")
    add_pci(root, "0000:01:00.1", "0x10de", "0x22ba", "0x040300", "snd_hda_intel")  # HDMI audio: not a display device
    add_pci(root, "0000:03:00.0", "0x1002", "0x7480", "0x030000", "amdgpu", uevent_only=True)
    add_pci(root, "0000:12:00.0", "0x1002", "0x164e", "0x038000")  # no driver bound
    add_pci(root, "0000:00:02.0", "0x8086", "0x9a49", "0x030000", "i915")
    return root


def test_probe_synthetic_container_sysroot(docker_gpu_root: Path) -> None:
    out = plat.probe(ctx_for(docker_gpu_root))
    f = out.facts["platform"]
    assert isinstance(f, PlatformFacts) and out.status == "ok"
    assert f.system == "Linux" and f.machine == "aarch64"
    assert (f.os_id, f.os_name, f.os_version) == ("ubuntu", "Ubuntu 22.04.4 LTS", "22.04")
    assert f.kernel == "5.15.0-1058-nvidia" and f.hostname == "gpu-node-7"
    assert (f.libc, f.glibc_version) == ("glibc", "2.31")
    assert f.is_wsl is False and f.wsl_version is None
    assert f.container == "docker" and f.container_nvidia_devices is True
    assert [(d.address, d.device_id, d.driver) for d in f.nvidia_pci_devices] == [("0000:01:00.0", "0x2684", "nvidia")]
    assert [(d.address, d.driver) for d in f.amd_pci_devices] == [("0000:03:00.0", "amdgpu"), ("0000:12:00.0", None)]
    assert f.cpu_count == 3 and f.memory_total_mib == 2048
    assert f.sources["container"] == "file:/.dockerenv"
    assert f.sources["glibc_version"].endswith("libc-2.31.so")
    assert f.sources["kernel"] == "file:/proc/sys/kernel/osrelease"


def test_display_devices_vendor_filter(docker_gpu_root: Path) -> None:
    system = System(sysroot=str(docker_gpu_root), env={})
    assert [d.vendor_id for d in display_devices(system)] == ["0x8086", "0x10de", "0x1002", "0x1002"]
    assert [d.address for d in display_devices(system, "0x8086")] == ["0000:00:02.0"]


def test_probe_synthetic_wsl2_no_container(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-wsl2"
    write(root, "/proc/version", real_fixture("r-wsl-kernel-releases", "proc-version-wsl2.txt"))
    write(root, "/usr/lib/wsl/lib/libcuda.so.1", "")
    f = plat.probe(ctx_for(root)).facts["platform"]
    assert f.kernel == "5.4.72-microsoft-standard-WSL2" and f.sources["kernel"] == "file:/proc/version"
    assert f.is_wsl is True and f.wsl_version == 2
    assert f.container is None and f.container_nvidia_devices is None
    assert f.nvidia_pci_devices == [] and f.libc is None and f.machine is None


def test_probe_machine_from_multiarch_dir(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-x86-tree"
    write(root, "/proc/version", "Linux version 6.8.0-45-generic (buildd@lcy02) (gcc 13.2.0) #45-Ubuntu SMP\n")
    write(root, "/usr/lib/x86_64-linux-gnu/libc.so.6", "")
    f = plat.probe(ctx_for(root)).facts["platform"]
    assert f.machine == "x86_64" and f.sources["machine"] == "file:/usr/lib/x86_64-linux-gnu"
    assert (f.libc, f.glibc_version) == ("glibc", None)  # glibc >= 2.34 has no versioned file name


def test_probe_wsl_marker_without_kernel_string(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-wsl-custom-kernel"
    write(root, "/proc/sys/kernel/osrelease", "6.6.0-custom\n")
    write(root, "/proc/sys/fs/binfmt_misc/WSLInterop", "enabled\n")
    f = plat.probe(ctx_for(root)).facts["platform"]
    assert f.is_wsl is True and f.wsl_version is None
    assert f.sources["is_wsl"] == "file:/proc/sys/fs/binfmt_misc/WSLInterop"


@pytest.mark.parametrize(
    "files, env, expected, nvidia",
    [
        ({"/run/.containerenv": ""}, {}, "podman", False),
        ({}, {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "kubernetes", False),
        ({"/proc/1/cgroup": "12:cpuset:/docker/abc\n", "/dev/nvidia0": ""}, {}, "docker", True),
        ({"/proc/1/cgroup": "0::/\n"}, {}, None, None),
    ],
    ids=["podman", "k8s-env", "docker-cgroup-with-gpu", "bare-metal"],
)
def test_probe_container_markers(tmp_path: Path, files: dict[str, str], env: dict[str, str], expected: str | None, nvidia: bool | None) -> None:
    root = tmp_path / "synthetic-container"
    root.mkdir()
    for rel, text in files.items():
        write(root, rel, text)
    f = plat.probe(ctx_for(root, env)).facts["platform"]
    assert f.container == expected
    assert f.container_nvidia_devices is nvidia


def test_probe_empty_sysroot_is_all_absent(tmp_path: Path) -> None:
    f = plat.probe(ctx_for(tmp_path)).facts["platform"]
    assert f.system == "Linux"
    assert f.os_id is None and f.kernel is None and f.hostname is None and f.glibc_version is None
    assert f.nvidia_pci_devices == [] and f.amd_pci_devices == [] and f.cpu_count is None


def test_probe_unreadable_files_do_not_raise(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-odd"
    (root / "etc/os-release").mkdir(parents=True)  # a directory where a file should be
    write(root, "/proc/cpuinfo", "\x00\xff garbage")
    (root / "sys/bus/pci/devices/0000:01:00.0").mkdir(parents=True)  # no id files
    f = plat.probe(ctx_for(root)).facts["platform"]
    assert f.os_id is None and f.nvidia_pci_devices == []


# ---------------------------------------------------------------------------- live machine and other OSes


def test_probe_live_machine_matches_stdlib() -> None:
    out = plat.probe(ctx_for("/"))
    f = out.facts["platform"]
    assert f.system == platform.system() and f.machine == platform.machine()
    assert f.cpu_count == os.cpu_count()
    if platform.system() == "Linux":
        libc, version = platform.libc_ver()
        if libc == "glibc":
            assert f.libc == "glibc" and f.glibc_version == version
        assert f.kernel == platform.release()


def test_darwin_os_version_from_sw_vers(fake_bin, tmp_path: Path) -> None:
    fake_bin("sw_vers", real_fixture("r-sw_vers-catalina-ruby-build-1451", "sw_vers.txt"))
    ctx = ctx_for("/")
    ctx.system.host_override = Host(system="Darwin", machine="x86_64", release="19.5.0", source="test")
    f = plat.gather(ctx)
    assert (f.os_id, f.os_version, f.os_name) == ("macos", "10.15.5", "Mac OS X 10.15.5")
    assert f.sources["os_version"] == "sw_vers"
    assert f.nvidia_pci_devices == []  # no PCI scan outside Linux
