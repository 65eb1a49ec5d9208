"""Issue 43: AMD's window between the kernel driver and the ROCm user space. A torch ROCm wheel brings its own ROCm user
space; AMD supports it on a kernel driver only within a window (compat_matrix/rocm.yaml ``rocm_kernel_user_space``, from
AMD's "User and kernel-space support matrix" and ROCm/amdgpu-docs PR #97). A what-if states the host's ROCm
(``--rocm-userspace``), a real machine's is probed (its ROCm release, and the loaded amdgpu's own version); the plan
warns outside the window and says "unknown" where AMD's table does not list the driver, never "inside"."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import real_fixture
from helpers import machine_env, run_sd
from zhscreen import english_sentences, english_words

from stackdoctor.accelerators.amd import probe as rocm
from stackdoctor.accelerators.amd.fit import userspace_window
from stackdoctor.matrix import load_matrix
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.system import System

pytestmark = pytest.mark.skipif(os.name == "nt", reason="fake tools are /bin/sh scripts")

DEAD_INDEX = "http://127.0.0.1:9/simple"
MI300_4043 = "r-mi300x-container-kfd-invalid-argument-4043"  # rocminfo: "ROCk module version 6.7.0 is loaded"


@pytest.fixture(scope="module")
def shipped():
    return load_matrix([], embedded=True)


def _env(tmp_path: Path, sysroot: Path | None = None, **extra: str) -> dict[str, str]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    return machine_env(tmp_path / "bin", sysroot, PIP_INDEX_URL=DEAD_INDEX, **extra)


def _what_if(tmp_path: Path, userspace: str, *more: str) -> dict:
    run = run_sd(["install", "--dry-run", "--offline", "--json", "--gfx", "gfx1100", "--rocm-userspace", userspace, *more], env=_env(tmp_path))
    assert run.rc == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["variant"].startswith("rocm"), plan
    return plan


def _window_lines(plan: dict) -> list[str]:
    return [w for w in [*plan["warnings"], *plan["reasons"]] if "user space" in w]


# ---------------------------------------------------------------- the table and the rule (pure)


def test_the_window_follows_amds_rows_and_an_unlisted_driver_is_unknown(shipped):
    rows = shipped.table("rocm_kernel_user_space")
    assert rows and all(r.source.startswith("https://") for r in rows)
    # a 6.3 kernel driver (the one ROCm 6.3 ships) supports user space 6.1 .. 7.0 (AMD's table): 7.2 is outside
    assert userspace_window(shipped, "6.3.1", None, "7.2")[0] == "outside"
    assert userspace_window(shipped, "6.3.1", None, "6.4")[0] == "inside"
    # amdgpu 30.30.x (released apart from ROCm) supports 6.3 .. 7.2 (PR #97), named by its own version
    state, row = userspace_window(shipped, None, "30.30.2", "7.2")
    assert state == "inside" and row is not None and row.source == "https://github.com/ROCm/amdgpu-docs/pull/97"
    # ROCm 7.1's driver is in no source's row: unknown, never inside
    assert userspace_window(shipped, "7.1", None, "7.2") == ("unknown", None)
    # amdgpu-dkms's own numbers (6.10.5) are not ROCm releases: not read as the 6.x rows, so unknown
    assert userspace_window(shipped, "6.3.1", "6.10.5", "6.4") == ("unknown", None)


# ---------------------------------------------------------------- what-ifs through the real CLI


def test_a_what_if_outside_the_window_is_warned_with_its_source(tmp_path):
    plan = _what_if(tmp_path, "6.3.1")
    (line,) = _window_lines(plan)
    assert line in plan["warnings"], plan
    assert "outside AMD's window" in line and "ROCm 6.3.1" in line and "--rocm-userspace" in line
    assert "supports ROCm 6.1, 6.2, 6.3, 6.4, 7.0" in line and "user-kernel-space-compat-matrix" in line


def test_a_what_if_inside_the_window_is_a_reason_not_a_warning(tmp_path):
    plan = _what_if(tmp_path, "7.2.1")
    (line,) = _window_lines(plan)
    assert line in plan["reasons"] and "inside AMD's window" in line and "amdgpu-docs/pull/97" in line, plan


def test_a_driver_no_source_lists_is_unknown_never_ok(tmp_path):
    plan = _what_if(tmp_path, "7.1")
    (line,) = _window_lines(plan)
    assert line in plan["warnings"] and "is unknown" in line and "inside" not in line and "outside" not in line, plan


def test_a_bad_release_is_one_sentence_and_exit_2(tmp_path):
    run = run_sd(["install", "--dry-run", "--offline", "--gfx", "gfx1100", "--rocm-userspace", "6.x"], env=_env(tmp_path))
    assert run.rc == 2 and "--rocm-userspace 6.x is not a ROCm release" in run.stderr, run.stderr


@pytest.mark.parametrize("userspace", ["6.3.1", "7.1"])
def test_the_window_in_chinese_leaves_no_english(tmp_path, userspace):
    env = _env(tmp_path, LANG="zh_CN.UTF-8")
    run = run_sd(["install", "--dry-run", "--offline", "--gfx", "gfx1100", "--rocm-userspace", userspace], env=env)
    assert run.rc == 0, run.stderr
    lines = [ln for ln in run.stdout.splitlines() if "用户态" in ln]
    assert len(lines) == 1, run.stdout
    left = english_sentences(lines[0])
    assert not left, english_words(lines[0])


# ---------------------------------------------------------------- a real machine: the probed driver and ROCm


def _amd_root(root: Path, *, module_version: str | None) -> Path:
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\n')  # synthetic
    (root / "sys/module/amdgpu").mkdir(parents=True)
    if module_version is not None:
        (root / "sys/module/amdgpu/version").write_text(module_version + "\n")  # synthetic: amdgpu-dkms's numbering
    nodes = root / "sys/class/kfd/kfd/topology/nodes"
    (nodes / "1").mkdir(parents=True)
    # synthetic KFD node of an RX 7900 XTX (gfx1100: gfx_target_version 110000, AMD's vendor id 0x1002)
    (nodes / "1/properties").write_text("simd_count 192\ngfx_target_version 110000\nvendor_id 4098\ndevice_id 29772\n")
    (root / "opt/rocm/.info").mkdir(parents=True)
    (root / "opt/rocm/.info/version").write_text("6.3.1-48\n")  # synthetic content
    return root


def test_the_probe_reads_the_loaded_amdgpus_version_from_sys_and_rocminfo(tmp_path, fake_bin):
    root = _amd_root(tmp_path / "root", module_version="6.10.5")
    ctx = ProbeContext(system=System(sysroot=str(root), env={"PATH": os.environ.get("PATH", "")}, timeout_s=5.0),
                       target=Target("python3", "self"), timeout_s=5.0)
    f = rocm.probe(ctx).facts["rocm"]
    assert (f.amdgpu_version, f.sources["amdgpu_version"]) == ("6.10.5", "file:/sys/module/amdgpu/version")
    # rocminfo reads the same module (a real capture): its line is kept as a second witness
    fake_bin("rocminfo", real_fixture(MI300_4043, "rocminfo.txt"), rc=1)
    f = rocm.probe(ctx).facts["rocm"]
    assert f.observed["amdgpu_version"] == {"file:/sys/module/amdgpu/version": "6.10.5", "rocminfo (ROCk module line)": "6.7.0"}
    # the kernel's in-tree amdgpu declares no version: nothing is made up
    (root / "sys/module/amdgpu/version").unlink()
    fake_bin("rocminfo", "", rc=1)
    f = rocm.probe(ctx).facts["rocm"]
    assert f.amdgpu_version is None and "amdgpu_version" not in f.sources


@pytest.mark.parametrize(("module_version", "driver"), [("6.10.5", "amdgpu 6.10.5"), (None, "the kernel's own amdgpu, which declares no version")])
def test_a_real_machines_driver_is_its_own_and_unlisted_is_unknown(tmp_path, module_version, driver):
    root = _amd_root(tmp_path / "root", module_version=module_version)
    run = run_sd(["install", "--dry-run", "--offline", "--json"], env=_env(tmp_path, root))
    assert run.rc == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["variant"].startswith("rocm"), plan
    (line,) = _window_lines(plan)
    assert line in plan["warnings"] and f"kernel driver ({driver})" in line and "is unknown" in line, line
