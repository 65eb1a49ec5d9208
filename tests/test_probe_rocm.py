"""ROCm probe: parsers on real rocminfo / rocm_agent_enumerator / rocm-smi / amd-smi captures, the
probe with fake tools replaying them, /dev/kfd permission checked as an unprivileged user."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import FIXTURES, real_fixture, write_fake_tool
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.amd import probe as rocm
from stackdoctor.model.facts import RocmFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.system import System

C27 = "c27-amd-navi33-gfx1102-plus-raphael-igpu-hsa-override"
C30 = "c30-8xmi300x-gfx942-rocm633-rocminfo-sclk"
DOCKER116 = "r-rocminfo-kfd-permission-denied-rocm-docker-116"
ALLOC41 = "r-rocminfo-kfd-cannot-allocate-rocminfo-41"
MI300_4043 = "r-mi300x-container-kfd-invalid-argument-4043"
AMDSMI157 = "r-amd-smi-version-mi300x-k8s-157"


def ctx_for(root: Path | str = "/", env: dict[str, str] | None = None, timeout: float = 5.0) -> ProbeContext:
    e = {"PATH": os.environ.get("PATH", "")}
    e.update(env or {})
    return ProbeContext(system=System(sysroot=str(root), env=e, timeout_s=timeout), target=Target(sys.executable, "self"), timeout_s=timeout)


def fixture_path(case: str, name: str) -> str:
    p = FIXTURES / "real" / case / name
    assert p.exists(), p
    return str(p)


def dispatch_tool(bindir: Path, name: str, by_arg: dict[str, str]) -> None:
    """A fake tool printing a recorded file chosen by its first argument ("" = no argument)."""
    empty = '""'
    cases = "\n".join(f"  {shlex.quote(arg) if arg else empty}) cat {shlex.quote(path)} ;;" for arg, path in by_arg.items())
    write_fake_tool(bindir, name, script=f'case "${{1:-}}" in\n{cases}\n  *) echo "unsupported: $1" >&2; exit 2 ;;\nesac\n')


def only_cat_bin(tmp_path: Path) -> Path:
    """A PATH with nothing but ``cat`` (the fake tools' only need), so no real ROCm tool is found."""
    d = tmp_path / "onlycat"
    d.mkdir()
    os.symlink(shutil.which("cat") or "/bin/cat", d / "cat")
    return d


# ---------------------------------------------------------------------------- parsers on real outputs


def test_parse_rocm_agent_enumerator_c27_skips_cpu_prompt_and_comment() -> None:
    assert rocm.parse_rocm_agent_enumerator(real_fixture(C27, "rocm_agent_enumerator.txt")) == ["gfx1102", "gfx1102"]


def test_parse_rocminfo_c27_grep_output() -> None:
    rep = rocm.parse_rocminfo(real_fixture(C27, "rocminfo.txt"))
    assert [a.name for a in rep.gpus] == ["gfx1102"]  # the ISA "amdgcn-amd-amdhsa--gfx1102" line is not an agent
    assert rep.module_loaded is None and rep.kfd_error is None


def test_parse_rocminfo_c30_mi300x_partial() -> None:
    rep = rocm.parse_rocminfo(real_fixture(C30, "rocminfo.txt"))
    (gpu,) = rep.gpus
    assert gpu.name == "gfx942"
    assert gpu.marketing_name == "AMD Instinct MI300X"
    assert gpu.uuid == "GPU-8af705259683161c"
    assert gpu.device_type == "GPU" and gpu.chip_id == "0x74a1" and gpu.node == 2


@pytest.mark.parametrize(
    "case, error, version",
    [
        (DOCKER116, "Unable to open /dev/kfd read-write: Permission denied", None),
        (ALLOC41, "Unable to open /dev/kfd read-write: Cannot allocate memory", None),
        (MI300_4043, "Unable to open /dev/kfd read-write: Invalid argument", "6.7.0"),
    ],
)
def test_parse_rocminfo_kfd_failures_real(case: str, error: str, version: str | None) -> None:
    rep = rocm.parse_rocminfo(real_fixture(case, "rocminfo.txt"))
    assert rep.module_loaded is True and rep.module_version == version
    assert rep.kfd_error == error
    assert rep.agents == []


ROCMINFO_SYNTHETIC = """ROCk module is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.1
Machine Model:           LARGE

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD Ryzen 9 7950X 16-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD Ryzen 9 7950X 16-Core Processor
  Device Type:             CPU
  Compute Unit:            32
*******
Agent 2
*******
  Name:                    gfx1100
  Uuid:                    GPU-2f4b9c3a1e0d7788
  Marketing Name:          Radeon RX 7900 XTX
  Node:                    1
  Device Type:             GPU
  Chip ID:                 29772(0x744c)
  Compute Unit:            96
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx1100
*******
Agent 3
*******
  Name:                    gfx1036
  Marketing Name:          AMD Radeon Graphics
  Device Type:             GPU
  Compute Unit:            2
*** Done ***
"""


def test_parse_rocminfo_synthetic_full_layout_skips_cpu() -> None:
    rep = rocm.parse_rocminfo(ROCMINFO_SYNTHETIC)
    assert rep.module_loaded is True
    assert [a.device_type for a in rep.agents] == ["CPU", "GPU", "GPU"]
    assert [(a.name, a.marketing_name, a.compute_units) for a in rep.gpus] == [
        ("gfx1100", "Radeon RX 7900 XTX", 96),
        ("gfx1036", "AMD Radeon Graphics", 2),
    ]
    assert rep.gpus[0].chip_id == "0x744c"


def test_parse_rocm_smi_showhw_c27() -> None:
    rows = rocm.parse_rocm_smi_showhw(real_fixture(C27, "rocm-smi-showhw.txt"))
    assert [(r["GPU"], r["DID"], r["GFX VER"], r["BUS"]) for r in rows] == [
        ("0", "0x7480", "gfx11002", "0000:03:00.0"),
        ("1", "0x164e", "gfx1036", "0000:12:00.0"),
    ]
    assert rows[0]["VBIOS"] == "113-APM7076OC-100"


def test_parse_rocm_smi_kv_showallinfo_real() -> None:
    kv = rocm.parse_rocm_smi_kv(real_fixture(MI300_4043, "rocm-smi-showallinfo.txt"))
    assert kv == {0: {"Device Name": "AMD Instinct MI300X OAM", "Device ID": "0x74a1"}}


def test_parse_amd_smi_version_real() -> None:
    v = rocm.parse_amd_smi_version(real_fixture(AMDSMI157, "amd-smi-version.txt"))
    assert v["ROCm version"] == "6.4.0" and v["AMDSMI Tool"] == "25.3.0+ede62f2" and v["amd_hsmp version"] == "N/A"


def test_parse_amd_smi_list_synthetic() -> None:
    text = "GPU: 0\n    BDF: 0000:05:00.0\n    UUID: abff74a1-0000-1000-80d1-3c23a9580558\n\nGPU: 1\n    BDF: 0000:26:00.0\n"
    assert rocm.parse_amd_smi_list(text) == {
        0: {"BDF": "0000:05:00.0", "UUID": "abff74a1-0000-1000-80d1-3c23a9580558"},
        1: {"BDF": "0000:26:00.0"},
    }


@pytest.mark.parametrize(
    "value, expected",
    [("gfx11002", "gfx1102"), ("gfx9010", "gfx90a"), ("gfx1036", "gfx1036"), ("gfx942", "gfx942"), (None, None)],
)
def test_normalise_smi_gfx(value: str | None, expected: str | None) -> None:
    assert rocm.normalise_smi_gfx(value) == expected


def test_version_parsers() -> None:
    assert rocm.parse_rocm_version_file("6.3.3-74\n") == "6.3.3"
    assert rocm.parse_rocm_version_file("garbage") is None
    assert rocm.parse_hipconfig_version(real_fixture("r-hipconfig-version", "hipconfig-v-n-rocm600.txt")) == "6.0.32830"
    assert rocm.parse_hipconfig_version(real_fixture("r-hipconfig-version", "hipconfig-version-ubuntu-hipcc-rocm.txt")) == "7.2.53211"
    assert rocm.parse_hipconfig_version("") is None


def test_apu_table_in_the_matrix() -> None:
    from stackdoctor.matrix import load_matrix

    m = load_matrix([])
    assert m.apu("gfx1036") and m.apu("gfx90c") and m.apu("gfx1151") and m.apu("gfx1036:xnack-")
    assert not m.apu("gfx1100") and not m.apu("gfx942") and not m.apu(None)
    assert all(row.source for row in m.rocm_apus.values())


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_rocm_parsers_never_raise(text: str) -> None:
    rocm.parse_rocminfo(text)
    rocm.parse_rocm_agent_enumerator(text)
    rocm.parse_rocm_smi_showhw(text)
    rocm.parse_rocm_smi_kv(text)
    rocm.parse_amd_smi_list(text)
    rocm.parse_amd_smi_version(text)
    rocm.parse_rocm_version_file(text)
    rocm.parse_hipconfig_version(text)
    rocm.normalise_smi_gfx(text)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["Agent 1", "*******", "  Name:   gfx90a", "  Device Type: GPU", "  Compute Unit: x", "GPU[0] : a: b", "GPU  DID  BUS", "0 1 2"]), max_size=20))
def test_rocm_parsers_never_raise_on_structured_junk(lines: list[str]) -> None:
    text = "\n".join(lines)
    rocm.parse_rocminfo(text)
    rocm.parse_rocm_smi_showhw(text)
    rocm.parse_rocm_smi_kv(text)


# ---------------------------------------------------------------------------- probe with fake tools


def test_probe_c27_replay_dgpu_plus_igpu(fake_bin, tmp_path: Path) -> None:
    fake_bin("rocm_agent_enumerator", real_fixture(C27, "rocm_agent_enumerator.txt"))
    fake_bin("rocminfo", real_fixture(C27, "rocminfo.txt"))
    dispatch_tool(fake_bin.dir, "rocm-smi", {"--showhw": fixture_path(C27, "rocm-smi-showhw.txt")})
    root = tmp_path / "synthetic-empty-root"
    root.mkdir()
    out = rocm.probe(ctx_for(root, {"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "HIP_VISIBLE_DEVICES": "0"}))
    f = out.facts["rocm"]
    assert isinstance(f, RocmFacts) and out.status == "ok"
    assert len(f.gpus) == 2
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.reconcile import reconcile

    dgpu, igpu = reconcile(Facts(rocm=f), load_matrix([])).facts.rocm.gpus  # integrated follows from the gfx: reconcile
    assert (dgpu.gfx, dgpu.device_id, dgpu.bus_id, dgpu.smi_gfx_version, dgpu.integrated) == (
        "gfx1102", "0x7480", "0000:03:00.0", "gfx11002", False,
    )
    assert (igpu.device_id, igpu.bus_id, igpu.smi_gfx_version, igpu.integrated) == ("0x164e", "0000:12:00.0", "gfx1036", True)
    assert f.hsa_override_gfx_version == "11.0.0" and f.hip_visible_devices == "0" and f.rocr_visible_devices is None
    assert f.sources["hsa_override_gfx_version"] == "env:HSA_OVERRIDE_GFX_VERSION"
    assert f.sources["gpus"] == "rocminfo"
    # rocm-smi --showproductname is answered "unsupported" by the fake: a fact, not a crash.
    assert "exited with code 2" in f.tool_errors["rocm-smi --showproductname"]
    assert f.kfd_present is False and f.amdgpu_loaded is False


def test_probe_c30_tools_under_sysroot_opt_rocm(tmp_path: Path, monkeypatch) -> None:
    """Synthetic root: rocminfo found in <sysroot>/opt/rocm/bin (not on PATH), version file, /dev/kfd, amdgpu loaded."""
    root = tmp_path / "synthetic-mi300x"
    write_fake_tool(root / "opt/rocm/bin", "rocminfo", real_fixture(C30, "rocminfo.txt"))
    write_fake_tool(root / "opt/rocm/bin", "hipconfig", real_fixture("r-hipconfig-version", "hipconfig-v-n-rocm600.txt").strip())
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.3.3-74\n")  # synthetic content
    (root / "dev").mkdir()
    (root / "dev/kfd").write_text("")
    (root / "sys/module/amdgpu").mkdir(parents=True)
    f = rocm.probe(ctx_for(root, {"PATH": str(only_cat_bin(tmp_path))})).facts["rocm"]
    assert f.version == "6.3.3" and f.sources["version"] == "file:/opt/rocm/.info/version"
    assert f.hip_version == "6.0.32830" and f.sources["hip_version"] == "hipconfig --version"
    assert [(g.gfx, g.name, g.uuid, g.integrated) for g in f.gpus] == [("gfx942", "AMD Instinct MI300X", "GPU-8af705259683161c", False)]
    assert f.kfd_present is True and f.kfd_accessible is True and f.kfd_error is None
    assert f.amdgpu_loaded is True


def test_probe_kfd_error_from_rocminfo_and_amd_smi_version(fake_bin, tmp_path: Path) -> None:
    fake_bin("rocminfo", real_fixture(DOCKER116, "rocminfo.txt"), rc=1)
    dispatch_tool(fake_bin.dir, "amd-smi", {"version": fixture_path(AMDSMI157, "amd-smi-version.txt")})
    root = tmp_path / "synthetic-container"
    root.mkdir()
    f = rocm.probe(ctx_for(root)).facts["rocm"]
    assert f.kfd_error == "Unable to open /dev/kfd read-write: Permission denied"
    assert f.sources["kfd_error"] == "rocminfo"
    assert f.version == "6.4.0" and f.sources["version"] == "amd-smi version"
    assert f.gpus == []
    assert "rocminfo" in f.tool_errors
    assert "amd-smi list" in f.tool_errors  # the fake answers only "version"


def test_probe_hung_tool_is_bounded(fake_bin, tmp_path: Path) -> None:
    fake_bin("rocminfo", script="echo 'ROCk module is loaded'\nexec sleep 60\n")
    fake_bin("rocm_agent_enumerator", script="exec sleep 60\n")
    root = tmp_path / "synthetic-hang"
    root.mkdir()
    start = time.monotonic()
    f = rocm.probe(ctx_for(root, timeout=1.0)).facts["rocm"]
    elapsed = time.monotonic() - start
    assert elapsed < 10, elapsed  # generous bound: both hung tools run concurrently and are killed at 1 s
    assert f.tool_errors["rocminfo"] == "rocminfo did not answer in 1 s"
    assert f.tool_errors["rocm_agent_enumerator"] == "rocm_agent_enumerator did not answer in 1 s"


def test_probe_versioned_rocm_dir_and_rocm_path(tmp_path: Path) -> None:
    """Synthetic: ROCm only under /opt/rocm-6.3.3 (no /opt/rocm link); a second tree named by ROCM_PATH wins."""
    root = tmp_path / "synthetic-versioned"
    write_fake_tool(root / "opt/rocm-6.3.3/bin", "rocminfo", real_fixture(C30, "rocminfo.txt"))
    (root / "opt/rocm-6.3.3/.info").mkdir(parents=True)
    (root / "opt/rocm-6.3.3/.info/version").write_text("6.3.3-74\n")  # synthetic content
    bin_ = only_cat_bin(tmp_path)
    f = rocm.probe(ctx_for(root, {"PATH": str(bin_)})).facts["rocm"]
    assert f.version == "6.3.3" and f.sources["version"] == "file:/opt/rocm-6.3.3/.info/version"
    assert [g.gfx for g in f.gpus] == ["gfx942"]
    (root / "usr/rocm/.info").mkdir(parents=True)
    (root / "usr/rocm/.info/version").write_text("6.2.4-120\n")  # synthetic content
    f = rocm.probe(ctx_for(root, {"PATH": str(bin_), "ROCM_PATH": "/usr/rocm"})).facts["rocm"]
    assert f.version == "6.2.4" and f.sources["version"] == "file:/usr/rocm/.info/version"


def test_probe_no_rocm_at_all(tmp_path: Path) -> None:
    empty = tmp_path / "emptybin"
    empty.mkdir()
    f = rocm.probe(ctx_for(tmp_path, {"PATH": str(empty)})).facts["rocm"]
    assert f.version is None and f.gpus == [] and f.tool_errors == {}
    assert f.kfd_present is False and f.kfd_accessible is None


KFD_AS_NOBODY = """
import json, sys
from stackdoctor.model.facts import to_data
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.accelerators.amd import probe as rocm
from stackdoctor.system import System
root = sys.argv[1]
ctx = ProbeContext(system=System(sysroot=root, env={"PATH": root + "/bin"}, timeout_s=5.0), target=Target(sys.executable, "self"), timeout_s=5.0)
print(json.dumps(to_data(rocm.gather(ctx))))
"""


@pytest.mark.headline("unprivileged")
def test_probe_kfd_permission_denied_as_unprivileged_user(unprivileged_install) -> None:
    """/dev/kfd (mode 600, root) under a synthetic root, probed by the real probe running as uid 65534
    (stackdoctor's copy that user can read, tests/unprivileged.py). A crash of the probe is a failure."""
    from unprivileged import as_nobody

    base = Path(tempfile.mkdtemp(prefix="sd-kfd-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        root = base / "synthetic-kfd-root"
        (root / "dev").mkdir(parents=True)
        (root / "bin").mkdir()
        kfd = root / "dev/kfd"
        kfd.write_text("")
        os.chmod(kfd, 0o600)
        for d in (root, root / "dev", root / "bin"):
            os.chmod(d, 0o755)
        r = as_nobody([unprivileged_install.python, "-c", KFD_AS_NOBODY, str(root)], env={"PATH": "/usr/bin:/bin", **unprivileged_install.env})
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        data = json.loads(r.stdout)
        assert data["kfd_present"] is True
        assert data["kfd_accessible"] is False
        assert data["kfd_error"] == "Unable to open /dev/kfd read-write: Permission denied"
        assert data["sources"]["kfd_error"] == "open(/dev/kfd, O_RDWR)"
        # The same tree as root: accessible (root bypasses the mode), so the child's answer came from its uid.
        as_root = rocm.gather(ctx_for(root, {"PATH": str(root / "bin")}))
        assert as_root.kfd_accessible is True and as_root.kfd_error is None
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_probe_c27_tool_outputs_are_not_mutated_by_stderr_noise(fake_bin, tmp_path: Path) -> None:
    """rocminfo's diagnostics may go to stderr; the kfd line is found there too."""
    fake_bin("rocminfo", stdout="ROCk module is loaded\n", stderr="Unable to open /dev/kfd read-write: Invalid argument\n", rc=1)
    root = tmp_path / "synthetic-stderr"
    root.mkdir()
    f = rocm.probe(ctx_for(root)).facts["rocm"]
    assert f.kfd_error == "Unable to open /dev/kfd read-write: Invalid argument"


def test_fake_tool_is_executable(fake_bin) -> None:
    tool = fake_bin("rocminfo", "x")
    assert tool.stat().st_mode & stat.S_IXUSR


# ---------------------------------------------------------------------------- the kernel's KFD topology, amd-smi static

KFD1151 = "r-kfd-topology-gfx1151-strix-halo-lemonade-419"
AMDSMI_STATIC = "r-amd-smi-static-mi350x-rocm-systems-2987"
AMDSMI_LIST = "r-amd-smi-list-mi210-rocm-systems-3654"


def test_kfd_properties_real_gfx1151():
    props = rocm.parse_kfd_properties(real_fixture(KFD1151, "properties.txt"))
    assert props["gfx_target_version"] == 110501 and props["simd_count"] == 64 and props["local_mem_size"] == 0
    node = rocm.kfd_node(1, props)
    assert node is not None
    assert (node.gfx, node.vendor_id, node.device_id, node.bus_id, node.drm_render_minor) == ("gfx1151", "0x1002", "0x1586", "0000:c2:00.0", 128)


@pytest.mark.parametrize(
    "version, gfx",
    # the amdgpu kernel driver's kfd_device.c values: Navy Flounder (RX 6700 XT), Aldebaran (MI200), MI300X, Navi 33, Strix Halo
    [(100301, "gfx1031"), (90010, "gfx90a"), (90402, "gfx942"), (110002, "gfx1102"), (110501, "gfx1151"), (90012, "gfx90c"), (0, None), (None, None), (999999, None)],
)
def test_kfd_gfx_decodes_the_kernels_encoding(version, gfx):
    assert rocm.kfd_gfx(version) == gfx


def test_kfd_cpu_node_is_not_a_gpu():
    assert rocm.kfd_node(0, rocm.parse_kfd_properties("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\n")) is None


def test_amd_smi_static_real_mi350x():
    kv = rocm.parse_amd_smi_static(real_fixture(AMDSMI_STATIC, "amd-smi-static.txt"))
    g = kv[0]
    assert (g["ASIC.MARKET_NAME"], g["ASIC.TARGET_GRAPHICS_VERSION"], g["ASIC.DEVICE_ID"], g["BUS.BDF"]) == ("AMD Instinct MI350X", "gfx950", "0x75a0", "0000:05:00.0")
    assert g["DRIVER.NAME"] == "amdgpu" and g["ASIC.NUM_COMPUTE_UNITS"] == "128"


def test_amd_smi_list_real_with_a_nic_block():
    kv = rocm.parse_amd_smi_list(real_fixture(AMDSMI_LIST, "amd-smi-list.txt"))
    assert list(kv) == [0]  # AI_NIC: 0 is not a GPU
    assert (kv[0]["BDF"], kv[0]["NODE_ID"]) == ("0000:23:00.0", "2")


def test_probe_kfd_topology_alone(tmp_path: Path) -> None:
    """No ROCm tool at all (a container without rocminfo, a captured tree): the kernel's KFD topology gives the GPU."""
    root = tmp_path / "tree"
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "0").mkdir(parents=True)
    (nodes / "0/properties").write_text("cpu_cores_count 16\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n")
    (nodes / "1").mkdir()
    (nodes / "1/properties").write_text(real_fixture(KFD1151, "properties.txt"))
    f = rocm.probe(ctx_for(root, {"PATH": str(only_cat_bin(tmp_path))})).facts["rocm"]
    assert f.gpus == [] and [(n.node, n.gfx, n.bus_id) for n in f.kfd_nodes] == [(1, "gfx1151", "0000:c2:00.0")]
    assert f.kfd_nodes[0].source == "/sys/class/kfd/kfd/topology/nodes/1/properties"
    assert f.sources["kfd_nodes"] == "file:/sys/class/kfd/kfd/topology/nodes/*/properties"
    assert f.amdgpu_loaded is True and f.sources["amdgpu_loaded"] == "file:/sys/class/kfd (KFD topology)"


def test_probe_amd_smi_static_and_list_fill_the_gpu(fake_bin, tmp_path: Path) -> None:
    # two recordings from two machines (an MI210's `list`, an MI350X's `static`) served by one fake amd-smi:
    # the test is about the merge order and the sources, not about one real machine
    dispatch_tool(fake_bin.dir, "amd-smi", {"list": fixture_path(AMDSMI_LIST, "amd-smi-list.txt"), "static": fixture_path(AMDSMI_STATIC, "amd-smi-static.txt")})
    root = tmp_path / "tree"
    root.mkdir()
    f = rocm.probe(ctx_for(root)).facts["rocm"]
    (g,) = f.gpus
    # list answers first (BDF, UUID, NODE_ID); static adds the name, the device id and the gfx target
    assert (g.bus_id, g.node, g.name, g.gfx, g.device_id) == ("0000:23:00.0", 2, "AMD Instinct MI350X", "gfx950", "0x75a0")
    assert (g.sources["bus_id"], g.sources["gfx"], g.sources["name"]) == ("amd-smi list", "amd-smi static", "amd-smi static")
