"""Huawei Ascend NPUs (issue 32), the first real plug-in through the accelerator seam: its probe parses the recorded
real outputs (tests/fixtures/real/asc-*, doc-ascend-*), and `check` replays recorded machines (screen, JSON,
Markdown, zh) with the ascend-* findings — torch_npu missing or not pairing, a CUDA torch, CANN missing, not
sourced or too old, no driver, a container without /dev/davinci*, ASCEND_RT_VISIBLE_DEVICES hiding every NPU.

A machine is a captured tree (STACKDOCTOR_SYSROOT) with the recorded files in their real places, a fake `npu-smi`
printing the recorded table, the recorded environment, and a target venv whose torch and torch_npu are dist-info
files (torch_npu's METADATA carries the real wheel's `Requires-Dist` pin); `--no-kernels` reads them, never imports."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import machine_env, run_sd, venv_bin

from stackdoctor.accelerators.ascend import probe as ap
from stackdoctor.accelerators.ascend import rules as ar

REAL = Path(__file__).parent / "fixtures" / "real"
B4 = REAL / "asc-910b4-2x-cann83rc2-torchnpu280-vllm-ascend-5606"
A3 = REAL / "asc-a3-ascend910-2chip-npu-smi-vllm-ascend-2534"
DOC = REAL / "doc-ascend-driver-version-info-cann850-mind-cluster"
HCCL = REAL / "asc-torch-npu-libhccl-missing-x-oscar-4"
HIDDEN = REAL / "asc-visible-devices-out-of-range-gpustack-3352"
PLUGIN = Path(__file__).parent / "fixtures" / "plugin"


# ---------------------------------------------------------------------------- parsers on the recordings


def test_npu_smi_910b4_table():
    got = ap.parse_npu_smi_info((B4 / "npu-smi-info.txt").read_text())
    assert got["version"] == "25.2.2"
    assert [(c["npu"], c["name"], c["health"], c["bus_id"], c["memory_total_mib"]) for c in got["chips"]] == [
        (0, "910B4-1", "OK", "0000:0E:00.0", 65536), (1, "910B4-1", "OK", "0000:0F:00.0", 65536)]  # the process table is not a chip


def test_npu_smi_atlas_a3_two_chips_per_npu():
    got = ap.parse_npu_smi_info((A3 / "npu-smi-info.txt").read_text())
    assert got["version"] is None  # the stored excerpt has no banner
    assert [(c["npu"], c["chip"], c.get("phy_id"), c["bus_id"]) for c in got["chips"]] == [
        (0, 0, 0, "0000:9D:00.0"), (0, 1, 1, "0000:9F:00.0"), (1, 0, 2, "0000:99:00.0")]


def test_driver_and_cann_info_files():
    assert ap.parse_install_info((DOC / "version.info").read_text())["Version"] == "24.1.rc1"
    assert ap.parse_install_info((DOC / "ascend_toolkit_install.info").read_text())["version"] == "8.5.0"
    assert ap.parse_install_info((B4 / "ascend_toolkit_install.info").read_text())["path"] == "/usr/local/Ascend/ascend-toolkit/8.3.RC2/aarch64-linux"


def test_visible_devices_and_cann_order():
    assert ap.parse_visible_devices("4") == [4] and ap.parse_visible_devices("0,x,1") == [0]
    assert ar.cann_key("8.3.RC1") < ar.cann_key("8.3.RC2") < ar.cann_key("8.5.0") and ar.cann_key("8.0.T6") < ar.cann_key("8.0.RC1")


def test_the_torch_npu_table_pins_what_the_real_wheel_says():
    """The table's row for 2.8.0 is the real wheel's METADATA (``Requires-Dist: torch==2.8.0+cpu``) with its sha256."""
    wants, source = ar.paired_torch("2.8.0")
    assert wants == "2.8.0" and "METADATA" in source
    assert ar.paired_torch("2.8.0.post2")[0] == "2.8.0"  # a post release pairs with the same torch
    need, src = ar.needed_cann("2.8.0")
    assert need == "8.3.RC1" and "Ascend/pytorch" in (src or "")


# ---------------------------------------------------------------------------- recorded machines through check


def _venv(root: Path, torch: str | None, npu: str | None, pin: str | None) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    py = str(venv_bin(root))
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True,
                               check=True, timeout=60).stdout.strip())
    if torch:
        (site / "torch").mkdir()
        (site / "torch" / "__init__.py").write_text(f"__version__ = {torch!r}\n")
        cuda = "12.6" if "+cu" in torch else None
        (site / "torch" / "version.py").write_text(f"__version__ = {torch!r}\ncuda = {cuda!r}\nhip = None\ndebug = False\n")
        d = site / f"torch-{torch}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {torch}\n")
    if npu:
        d = site / f"torch_npu-{npu}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch_npu\nVersion: {npu}\nRequires-Dist: {pin}\n")
    return py


def _machine(base: Path, *, cann: str | None = "8.3.RC2", smi: bool = True, nodes: int = 2, driver: bool = False, container: bool = False) -> Path:
    root = base / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="openEuler"\nID=openEuler\nVERSION_ID="24.03"\n')
    (root / "dev").mkdir()
    for i in range(nodes):
        (root / f"dev/davinci{i}").write_text("")
    if cann:
        d = root / f"usr/local/Ascend/ascend-toolkit/{cann}/aarch64-linux"
        d.mkdir(parents=True)
        info = (B4 / "ascend_toolkit_install.info").read_text()
        (d / "ascend_toolkit_install.info").write_text(info.replace("8.3.RC2", cann))  # the recorded file, at the version asked
        os.symlink(cann, root / "usr/local/Ascend/ascend-toolkit/latest")
        (root / "usr/local/Ascend/ascend-toolkit/set_env.sh").write_text("# CANN's set_env.sh\n")
    if driver:
        (root / "usr/local/Ascend/driver").mkdir(parents=True)
        (root / "usr/local/Ascend/driver/version.info").write_text((DOC / "version.info").read_text())
    if container:
        (root / ".dockerenv").write_text("")
    (base / "bin").mkdir()
    if smi:
        tool = base / "bin" / "npu-smi"
        tool.write_text(f"#!/bin/sh\ncat '{B4 / 'npu-smi-info.txt'}'\n")
        tool.chmod(0o755)
    return root


def _recorded_env() -> dict[str, str]:
    """The environment the report recorded (CANN's set_env.sh sourced)."""
    return dict(line.split("=", 1) for line in (B4 / "env.txt").read_text().splitlines() if "=" in line)


def _check(base: Path, root: Path, py: str, *args: str, env: dict[str, str] | None = None) -> dict:
    e = machine_env(base / "bin", root, COLUMNS="200", **(env or {}))
    return run_sd(["check", "--json", "--no-kernels", "--python", py, *args], env=e).json()


def _codes(data: dict) -> dict[str, dict]:
    return {f["code"]: f for f in data["findings"]}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    base = tmp_path_factory.mktemp("asc-ok")
    root = _machine(base, driver=True)
    py = _venv(base / "venv", "2.8.0+cpu", "2.8.0", "torch==2.8.0+cpu")
    return base, root, py


def test_the_healthy_910b_machine_has_no_ascend_finding(healthy):
    base, root, py = healthy
    data = _check(base, root, py, env=_recorded_env())
    own = data["facts"]["plugins"]["ascend"]
    assert own["cann"]["version"] == "8.3.RC2" and own["env"]["active"] and own["npu_smi"]["version"] == "25.2.2"
    assert data["facts"]["reconciled"]["accelerator"] == "ascend"
    assert [g["name"] for g in data["facts"]["reconciled"]["gpus"]] == ["Ascend 910B4-1", "Ascend 910B4-1"]
    assert not [c for c in _codes(data) if c.startswith("ascend-") or c in ("torch-backend-mismatch", "torch-cpu-only")], sorted(_codes(data))


def test_screen_markdown_and_zh_show_the_npus(healthy):
    base, root, py = healthy
    e = machine_env(base / "bin", root, COLUMNS="200", **_recorded_env())
    screen = run_sd(["check", "--no-kernels", "--python", py], env=e).stdout
    assert "Ascend NPU driver 24.1.rc1 · CANN 8.3.RC2" in screen and "0: Ascend 910B4-1 (NPU, 64 GiB HBM)" in screen, screen
    md = run_sd(["check", "--format", "markdown", "--no-kernels", "--python", py], env=e).stdout
    assert "| driver | Ascend NPU driver 24.1.rc1 · CANN 8.3.RC2 |" in md, md


def test_cann_not_sourced_gives_the_exact_source_line_in_en_and_zh(healthy):
    base, root, py = healthy
    hit = _codes(_check(base, root, py))["ascend-cann-not-sourced"]  # the same machine, without CANN's environment
    assert hit["fix"] == "source /usr/local/Ascend/ascend-toolkit/set_env.sh" and "CANN 8.3.RC2" in hit["detail"], hit
    zh = _codes(_check(base, root, py, "--lang", "zh"))["ascend-cann-not-sourced"]
    assert "环境" in zh["detail"] and zh["fix"] == hit["fix"], zh


def test_torch_npu_missing_beside_a_cpu_torch(tmp_path):
    root = _machine(tmp_path, driver=True)
    hit = _codes(_check(tmp_path, root, _venv(tmp_path / "v", "2.8.0+cpu", None, None), env=_recorded_env()))["ascend-torch-npu-missing"]
    assert hit["fix"] == "pip install torch-npu==2.8.0" and "2 Ascend NPU chip" in hit["detail"], hit


def test_torch_npu_and_torch_that_do_not_pair(tmp_path):
    root = _machine(tmp_path, driver=True)
    hit = _codes(_check(tmp_path, root, _venv(tmp_path / "v", "2.13.0+cpu", "2.8.0", "torch==2.8.0+cpu"), env=_recorded_env()))["ascend-torch-npu-mismatch"]
    assert "torch_npu 2.8.0 needs torch 2.8.0" in hit["detail"] and "METADATA" in hit["detail"], hit
    assert hit["fix"] == "pip install torch==2.8.0 --index-url https://download.pytorch.org/whl/cpu"


def test_a_cuda_torch_on_the_ascend_machine_is_a_backend_mismatch(tmp_path):
    root = _machine(tmp_path, driver=True)
    codes = _codes(_check(tmp_path, root, _venv(tmp_path / "v", "2.8.0+cu126", None, None), env=_recorded_env()))
    assert "Huawei Ascend" in codes["torch-backend-mismatch"]["detail"] and "910B4-1" in codes["torch-backend-mismatch"]["detail"], codes
    assert "ascend-torch-npu-missing" not in codes  # a CUDA build is the problem, not a missing companion


def test_cann_missing_and_too_old(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    py = _venv(tmp_path / "v", "2.8.0+cpu", "2.8.0", "torch==2.8.0+cpu")
    missing = _codes(_check(a, _machine(a, cann=None, driver=True), py))
    assert "hiascend.com" in missing["ascend-cann-missing"]["detail"] and "ascend-cann-not-sourced" not in missing
    old = _codes(_check(b, _machine(b, cann="8.0.RC3", driver=True), py, env=_recorded_env()))["ascend-cann-too-old"]
    assert "CANN 8.0.RC3 is installed, but torch_npu 2.8.0 needs CANN 8.3.RC1" in old["detail"], old


def test_no_driver_and_a_container_without_device_nodes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    py = _venv(tmp_path / "v", "2.8.0+cpu", "2.8.0", "torch==2.8.0+cpu")
    drv = _codes(_check(a, _machine(a, smi=False), py, env=_recorded_env()))["ascend-driver-missing"]
    assert "version.info is missing and npu-smi is absent" in drv["detail"], drv
    box = _codes(_check(b, _machine(b, smi=False, nodes=0, driver=True, container=True), py, env=_recorded_env()))["ascend-container-devices"]
    assert "docker container" in box["detail"] and "--device /dev/davinci0" in box["fix"], box


def test_ascend_rt_visible_devices_hiding_every_npu(healthy):
    """The gpustack report's value (``ASCEND_RT_VISIBLE_DEVICES:4`` on a machine of two NPUs), on the 910B4 machine."""
    base, root, py = healthy
    value = "4"
    assert f"ASCEND_RT_VISIBLE_DEVICES:{value} error" in (HIDDEN / "error.txt").read_text()
    hit = _codes(_check(base, root, py, env={**_recorded_env(), "ASCEND_RT_VISIBLE_DEVICES": value}))["ascend-devices-hidden"]
    assert "ids 0 to 1" in hit["detail"] and hit["fix"] == "unset ASCEND_RT_VISIBLE_DEVICES", hit


def test_a_replayed_libhccl_import_error_says_source_set_env(healthy, tmp_path):
    """torch_npu's real import error (X-Oscar#4) in a replayed report: CANN's environment is the fix, even where
    the variables are set."""
    base, root, py = healthy
    data = _check(base, root, py, env=_recorded_env())
    data["facts"]["torch"]["import_error"] = (HCCL / "import-error.txt").read_text().splitlines()[0]
    (tmp_path / "r.json").write_text(json.dumps(data))
    out = run_sd(["check", "--replay", str(tmp_path / "r.json"), "--json"], env=machine_env(base / "bin")).json()
    hit = _codes(out)["ascend-cann-not-sourced"]
    assert "libhccl.so: cannot open shared object file" in hit["detail"] and hit["fix"].startswith("source "), hit


# ---------------------------------------------------------------------------- the seam's new hooks, used by the test-only plug-in too


def test_the_device_spec_hook_is_generic():
    """The test-only plug-in declares a worker device spec with no file in stackdoctor/ edited for it."""
    code = "import json; from stackdoctor import accelerators; print(json.dumps(accelerators.device_specs()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(PLUGIN)}, timeout=120)
    specs = json.loads(out.stdout)
    assert specs["foo"] == {"device": "foo", "torch_api": "foo", "synchronize": "foo.synchronize", "backend": "gloo", "imports": ["torch_foo"]}, specs
    assert specs["ascend"]["backend"] == "hccl" and specs["ascend"]["device"] == "npu"


def test_torch_npu_unavailable_says_what_torch_said(healthy, tmp_path):
    """torch was asked (a replayed report: torch_npu installed, ``torch.npu.is_available()`` False with the
    gpustack report's reason) and no other ascend-* finding explains it."""
    base, root, py = healthy
    data = _check(base, root, py, env=_recorded_env())
    reason = (HIDDEN / "error.txt").read_text().splitlines()[0]
    data["facts"]["torch"].update(imported=True, available={"ascend": False}, available_errors={"ascend": reason})
    (tmp_path / "r.json").write_text(json.dumps(data))
    out = run_sd(["check", "--replay", str(tmp_path / "r.json"), "--json"], env=machine_env(base / "bin")).json()
    hit = _codes(out)["ascend-npu-unavailable"]
    assert "aclrtGetDeviceCount" in hit["detail"] and "error code is 207004" in hit["detail"], hit


def test_every_ascend_code_has_a_scenario_here():
    """tests/test_rules.py leaves the kinds' own rules to their tests: each ascend-* code is asserted in this file."""
    from stackdoctor.rules import REGISTRY

    here = Path(__file__).read_text(encoding="utf-8")
    codes = {c for c, r in REGISTRY.items() if r.fn.__module__ == ar.__name__}
    assert len(codes) == 9 and all(f'"{c}"]' in here for c in codes), sorted(c for c in codes if f'"{c}"]' not in here)
