"""ROCm's stable keys carry the reconciled view (issue 25, step 1), as NVIDIA's do: ``rocm.version`` and
``rocm.gpus`` hold what the witnesses together say, each value no ROCm tool gave marked ``reconcile:`` (so a
replay derives it again), and every witness's own value is kept (``rocm.observed``, ``reconciled.rocm_version``).

Through the real CLI on captured trees (``STACKDOCTOR_SYSROOT``): the real KFD topology node of a gfx1151 (Strix
Halo), real ``hipconfig --version`` and ``amd-smi version`` outputs and the real rocminfo of an MI300X."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import real_fixture, write_fake_tool
from helpers import machine_env, run_sd

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, KfdNode, RocmFacts, RocmGpu
from stackdoctor.reconcile import reconcile, report_facts

KFD1151 = "r-kfd-topology-gfx1151-strix-halo-lemonade-419"
HIPCONFIG = "r-hipconfig-version"
AMDSMI157 = "r-amd-smi-version-mi300x-k8s-157"
C30 = "c30-8xmi300x-gfx942-rocm633-rocminfo-sclk"

pytestmark = pytest.mark.skipif(os.name == "nt", reason="fake tools are /bin/sh scripts")


def tree(root: Path, *, kfd: bool = True) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    (root / "sys/module/amdgpu").mkdir(parents=True)
    if kfd:
        nodes = root / "sys/class/kfd/kfd/topology/nodes"
        (nodes / "0").mkdir(parents=True)
        (nodes / "0/properties").write_text("cpu_cores_count 12\nsimd_count 0\ngfx_target_version 0\nvendor_id 0\ndevice_id 0\n")
        (nodes / "1").mkdir()
        (nodes / "1/properties").write_text(real_fixture(KFD1151, "properties.txt"))
    return root


def test_no_rocm_tool_the_kernels_gpu_and_hips_release_are_the_stable_keys(tmp_path, plain_python):
    """No rocminfo, no amd-smi: only the kernel's KFD topology lists the GPU, and only hipconfig says which ROCm.
    rocm.gpus carries the KFD's GPU and rocm.version HIP's release, both marked reconcile:; a replay derives the
    same again; the screen's driver line and HIP_VISIBLE_DEVICES' check read them."""
    root = tree(tmp_path / "root")
    write_fake_tool(root / "opt/rocm/bin", "hipconfig", real_fixture(HIPCONFIG, "hipconfig-version-ubuntu-hipcc-rocm.txt").strip())
    (tmp_path / "bin").mkdir()
    env = machine_env(tmp_path / "bin", root, COLUMNS="200")
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env).json()
    r = data["facts"]["rocm"]
    assert (r["version"], r["hip_version"]) == ("7.2", "7.2.53211"), r
    assert r["sources"]["version"] == "reconcile: hipconfig --version (HIP 7.2.53211)"
    assert r["observed"] == {"hip_version": {"hipconfig --version": "7.2.53211"}}
    seen = data["facts"]["reconciled"]["rocm_version"]
    assert seen == {"value": "7.2", "source": "hipconfig --version (HIP 7.2.53211)", "witnesses": {"hipconfig --version (HIP 7.2.53211)": "7.2"}}
    (g,) = r["gpus"]
    assert (g["index"], g["gfx"], g["integrated"]) == (0, "gfx1151", True), g
    assert g["sources"]["index"] == "reconcile: reconciled view (/sys/class/kfd)" and g["sources"]["gfx"].startswith("reconcile: ")
    (v,) = data["facts"]["reconciled"]["gpus"]
    assert (v["vendor"], v["gfx"], v["witnesses"]) == ("amd", "gfx1151", ["/sys/class/kfd"])
    # a replay of that report derives the same keys again (nothing published is taken for a witness)
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(data))
    again = run_sd(["check", "--replay", str(saved), "--json"], env=env).json()["facts"]
    assert again["rocm"]["gpus"] == r["gpus"] and again["rocm"]["version"] == "7.2" and again["rocm"]["sources"] == r["sources"]
    assert again["reconciled"]["gpus"] == data["facts"]["reconciled"]["gpus"]
    screen = run_sd(["check", "--no-kernels", "--python", plain_python], env=env).stdout
    assert "ROCm 7.2" in screen, screen
    # HIP_VISIBLE_DEVICES is judged against the GPUs the kernel lists, as CUDA_VISIBLE_DEVICES is against /proc's
    hidden = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env={**env, "HIP_VISIBLE_DEVICES": "-1"}).json()
    (hit,) = [f for f in hidden["findings"] if f["code"] == "cuda-visible-devices-hides-all"]
    assert "HIP_VISIBLE_DEVICES" in hit["detail"] and "rocm.gpus" in hit["facts"], hit


def test_every_version_witness_is_kept_and_the_files_win(tmp_path, plain_python):
    """/opt/rocm's version file and amd-smi's "ROCm version" (a real MI300X's, 6.4.0) both answer: the file is
    the stable key, as the probe always took it; amd-smi's value and HIP's release stay beside it."""
    root = tree(tmp_path / "root", kfd=False)
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.3.3-74\n")  # synthetic content, as in tests/test_probe_rocm.py
    write_fake_tool(root / "opt/rocm/bin", "hipconfig", real_fixture(HIPCONFIG, "hipconfig-v-n-rocm600.txt").strip())
    write_fake_tool(tmp_path / "bin", "amd-smi", answers={"version": (real_fixture(AMDSMI157, "amd-smi-version.txt"), 0, "")})
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=machine_env(tmp_path / "bin", root)).json()
    r = data["facts"]["rocm"]
    assert (r["version"], r["sources"]["version"]) == ("6.3.3", "file:/opt/rocm/.info/version")
    assert r["observed"]["version"] == {"file:/opt/rocm/.info/version": "6.3.3", "amd-smi version": "6.4.0"}
    seen = data["facts"]["reconciled"]["rocm_version"]
    assert (seen["value"], seen["source"]) == ("6.3.3", "file:/opt/rocm/.info/version")
    assert seen["witnesses"] == {"file:/opt/rocm/.info/version": "6.3.3", "amd-smi version": "6.4.0", "hipconfig --version (HIP 6.0.32830)": "6.0"}


def test_the_tools_gpus_stay_the_tools(tmp_path, plain_python):
    """rocminfo lists the GPU (a real MI300X capture): rocm.gpus is rocminfo's, nothing published beside it."""
    root = tree(tmp_path / "root", kfd=False)
    write_fake_tool(root / "opt/rocm/bin", "rocminfo", real_fixture(C30, "rocminfo.txt"))
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=machine_env(tmp_path / "bin", root)).json()
    gpus = data["facts"]["rocm"]["gpus"]
    assert gpus and all(not g["sources"].get("index", "").startswith("reconcile: ") for g in gpus), gpus
    assert {g["gfx"] for g in gpus} == {"gfx942"} and "version" not in data["facts"]["rocm"]["sources"]
    assert len(gpus) == len([v for v in data["facts"]["reconciled"]["gpus"] if v["vendor"] == "amd"])


def test_publishing_is_pure_and_idempotent():
    """reconcile leaves its input alone, and reconciling its own output gives the same ROCm keys; a tool's GPU
    without a gfx gains the KFD's, marked, and loses it again before the next reconcile derives it."""
    m = load_matrix([])
    f = Facts()
    f.platform.system = "Linux"
    f.rocm = RocmFacts(amdgpu_loaded=True, hip_version="6.2.41133", sources={"hip_version": "hipconfig --version"},
                       gpus=[RocmGpu(0, "AMD Instinct MI300X", None, node=2, sources={"name": "amd-smi list", "node": "amd-smi list"})],
                       kfd_nodes=[KfdNode(node=2, gfx="gfx942", simd_count=1216, bus_id="0000:05:00.0", source="/sys/class/kfd/kfd/topology/nodes/2/properties"),
                                  KfdNode(node=3, gfx="gfx942", simd_count=1216, bus_id="0000:26:00.0", source="/sys/class/kfd/kfd/topology/nodes/3/properties")])
    once = reconcile(f, m)
    assert f.rocm.version is None and f.rocm.gpus[0].gfx is None and len(f.rocm.gpus) == 1  # the input is unchanged
    assert once.facts.rocm.version is None and len(once.facts.rocm.gpus) == 1  # the view's facts: the witnesses' own
    pub = report_facts(once).rocm  # what the report publishes
    a, b = pub.gpus
    assert (a.name, a.gfx, a.sources["gfx"]) == ("AMD Instinct MI300X", "gfx942", "reconcile: /sys/class/kfd/kfd/topology/nodes/2/properties")
    assert (b.index, b.gfx, b.bus_id, b.sources["index"]) == (1, "gfx942", "26:00.0", "reconcile: reconciled view (/sys/class/kfd)")
    assert (pub.version, pub.sources["version"]) == ("6.2", "reconcile: hipconfig --version (HIP 6.2.41133)")
    assert once.runtime("amd").value == "6.2"
    twice = reconcile(report_facts(once), m)  # the report replayed
    assert report_facts(twice).rocm == pub and twice.gpus == once.gpus
