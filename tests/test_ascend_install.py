"""Ascend (issue 32): install plans torch's CPU build + the torch-npu its wheel's METADATA pairs with, says which CANN
that needs (Ascend's table) and whether the machine has it; as a what-if (``--npu 910B``) and on the recorded machines
of tests/test_ascend.py (a captured tree, a fake npu-smi printing the recorded table, a target venv of dist-info files).
The plans are dry runs with ``--offline``: the resolver's answer, no index asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import machine_env, run_sd
from test_ascend import _machine, _recorded_env, _venv

from stackdoctor.accelerators.ascend import pairing, table


def _plan(args: list[str], env: dict[str, str] | None = None) -> dict:
    out = run_sd(["install", "--dry-run", "--json", "--offline", *args], env=env)
    return out.json()


def _reqs(plan: dict) -> list[str]:
    return [f"{p['name']}=={p['version']}" + (f"+{p['variant']}" if p["variant"] else "") for p in plan["packages"]]


def test_what_if_npu_plans_the_cpu_build_and_the_paired_torch_npu():
    plan = _plan(["--npu", "910B", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"])
    # 2.12.1 exists, but no torch-npu pins it; the newest post release of 2.12.0's torch-npu is planned (issue 43)
    assert _reqs(plan) == ["torch==2.12.0+cpu", "torch-npu==2.12.0.post3"], plan
    assert plan["command"][-4:] == ["--index-url", "https://download.pytorch.org/whl/cpu", "--extra-index-url", "https://pypi.org/simple/"]
    text = "\n".join(plan["reasons"])
    assert "torch-npu 2.12.0.post3 pins torch==2.12.0 (its wheel's METADATA: https://files.pythonhosted.org/" in text, text
    assert "torch-npu 2.12.0 of the same torch needs CANN 9.1.0 or newer, so it needs at least that" in text, text
    assert any("CANN is not known to this what-if" in w for w in plan["warnings"]) and "Huawei Ascend NPU 910B" in plan["machine"]


def test_what_if_aarch64_uses_the_label_less_cpu_wheel():
    plan = _plan(["--npu", "910B4", "--python-version", "3.10", "--platform", "manylinux_2_28_aarch64", "--torch", "2.8.0"])
    assert _reqs(plan) == ["torch==2.8.0", "torch-npu==2.8.0.post5"], plan  # the newest 2.8.0 torch-npu (its CANN floor: 2.8.0.post4's 9.0.0)
    assert "pins torch==2.8.0 (its wheel's METADATA" in "\n".join(plan["reasons"])  # the aarch64 wheel's own pin, no +cpu


def test_a_pin_no_torch_npu_pairs_with_is_unmet():
    out = run_sd(["install", "--dry-run", "--json", "--offline", "--npu", "910B", "--torch", "2.12.1"])
    assert out.rc == 1
    assert "no torch-npu release pins it" in out.json()["error"]["message"], out.json()


def test_a_release_missing_from_ascends_table_is_planned_only_when_pinned_and_says_so():
    plan = _plan(["--npu", "910C", "--torch", "2.14.0", "--python-version", "3.12", "--platform", "manylinux_2_28_x86_64"])
    assert _reqs(plan) == ["torch==2.14.0+cpu", "torch-npu==2.14.0"]
    assert any("the CANN it needs is unknown" in w for w in plan["warnings"]), plan["warnings"]


def _on_machine(tmp_path: Path, torch: str, *, cann: str = "8.3.RC2", sourced: bool = True) -> dict:
    root = _machine(tmp_path, cann=cann, driver=True)
    py = _venv(tmp_path / "v", torch, None, None)
    env = machine_env(tmp_path / "bin", root, COLUMNS="200", **(_recorded_env() if sourced else {}))
    return _plan(["--python", py], env=env)


def test_the_recorded_910b_machine_gets_the_torch_npu_its_cann_can_load(tmp_path):
    """CANN 8.3.RC2: torch-npu 2.12 .. 2.9 need CANN 8.5.0 or newer, 2.8.0 needs 8.3.RC1 — so torch 2.8.0, a downgrade
    from the installed 2.13.0+cpu that says why."""
    plan = _on_machine(tmp_path, "2.13.0+cpu")
    assert _reqs(plan) == ["torch==2.8.0+cpu", "torch-npu==2.8.0"], plan
    text = "\n".join(plan["reasons"])
    assert "this machine has CANN 8.3.RC2 (/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info), which meets it" in text, text
    assert "downgrade from 2.13.0+cpu to 2.8.0+cpu: torch-npu 2.8.0, planned beside it, pins torch 2.8.0" in text


def test_a_cuda_torch_on_the_ascend_machine_is_replaced_by_the_cpu_build(tmp_path):
    plan = _on_machine(tmp_path, "2.8.0+cu126", sourced=False)
    assert _reqs(plan) == ["torch==2.8.0+cpu", "torch-npu==2.8.0"], plan
    assert "replaces the installed torch: 2.8.0+cu126 -> 2.8.0+cpu" in plan["reasons"], plan["reasons"]
    assert any("source /usr/local/Ascend/ascend-toolkit/set_env.sh" in w for w in plan["warnings"]), plan["warnings"]  # not sourced


def test_cann_too_old_for_every_release_plans_the_newest_and_says_upgrade():
    rows = list(table()["releases"])
    own = {"cann": {"version": "8.0.RC3", "info_file": "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info"}}
    args = {"os": "linux", "arch": "x86_64", "python": "3.11", "hypothetical": False}
    assert isinstance(pairing.companion(rows, own, "2.8.0", strict=True, **args), str)  # strict: none of 2.8.0's meets 8.0.RC3
    c = pairing.companion(rows, own, "2.8.0", strict=False, **args)
    assert not isinstance(c, str) and c.version == "2.8.0.post5"
    assert any("this machine has CANN 8.0.RC3" in w and "upgrade CANN" in w for w in c.warnings), c.warnings


@pytest.mark.parametrize("python,arch,want", [("3.9", "x86_64", "2.8.0.post5"), ("3.13", "aarch64", "2.8.0.post5"), ("3.14", "x86_64", None)])
def test_the_wheels_python_and_platform_decide(python, arch, want):
    c = pairing.companion(list(table()["releases"]), {}, "2.8.0", os="linux", arch=arch, python=python, hypothetical=True, strict=True)
    assert (c if isinstance(c, str) else c.version) == want if want else isinstance(c, str) and "no torch-npu" in c


# ---------------------------------------------------------------------------- a real install of stand-in wheels, verified

TORCH_INIT = '''"""STAND-IN torch {v} for stackdoctor tests - not PyTorch."""
{mark}
__version__ = {v!r}
from . import version, cuda


def _import_device_backends():
    # as torch/__init__.py does since 2.5: load every "torch.backends" entry point (torch_npu registers one), and
    # turn a failure into the RuntimeError torch raises
    from importlib.metadata import entry_points

    for ext in entry_points(group="torch.backends"):
        try:
            ext.load()()
        except Exception as err:
            raise RuntimeError(f"Failed to load the backend extension: {{ext.name}}. You can disable extension auto-loading "
                               "with TORCH_DEVICE_BACKEND_AUTOLOAD=0.") from err


_import_device_backends()
'''

NPU_INIT = '''"""STAND-IN torch_npu {v} for stackdoctor tests - not Ascend's. Like the real one it needs CANN's environment: without
it the import fails as the real one does (X-Oscar#4's message); with it, torch.npu answers (npu devices are the CPU)."""
import os
import sys
import types

if not os.environ.get("ASCEND_HOME_PATH") or "ascend" not in os.environ.get("LD_LIBRARY_PATH", "").lower():
    raise ImportError("libhccl.so: cannot open shared object file: No such file or directory")
__version__ = {v!r}


def _autoload():
    import torch

    npu = types.ModuleType("torch.npu")
    npu.is_available = lambda: True
    npu.device_count = lambda: 2
    npu.synchronize = lambda *a: None
    torch.npu = npu
    sys.modules["torch.npu"] = npu
'''


@pytest.fixture(scope="module")
def standins(tmp_path_factory) -> Path:
    """A find-links folder with a stand-in torch 2.8.0+cpu and a stand-in torch_npu 2.8.0 whose METADATA carries the
    real wheel's pin (torch_npu.yaml: ``torch==2.8.0+cpu``, read from the x86_64 wheel)."""
    from indexserver import FAKE_MARK, WheelSpec, _torch_files, build_wheel

    row = next(r for r in table()["releases"] if r["version"] == "2.8.0")
    d = tmp_path_factory.mktemp("asc-wheels")
    torch = WheelSpec("torch", "2.8.0+cpu", "py3-none-any", [], {**_torch_files("2.8.0+cpu"), "torch/__init__.py": TORCH_INIT.format(v="2.8.0+cpu", mark=FAKE_MARK)})
    npu = WheelSpec("torch-npu", "2.8.0", "py3-none-any", [row["requires_dist"]["x86_64"]],
                    {"torch_npu/__init__.py": NPU_INIT.format(v="2.8.0"), "torch_npu-2.8.0.dist-info/entry_points.txt": "[torch.backends]\ntorch_npu = torch_npu:_autoload\n"})
    for spec in (torch, npu):
        (d / spec.filename).write_bytes(build_wheel(spec))
    return d


def _pip_venv(where: Path) -> str:
    import shutil
    import subprocess
    import sys

    import pip
    from helpers import venv_bin

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    shutil.copytree(Path(pip.__file__).parent, next(where.glob("lib/python*/site-packages")) / "pip")
    return str(venv_bin(where))


def _install(tmp_path: Path, standins: Path, *, sourced: bool) -> tuple[object, str]:
    from test_install import isolated_env

    root = _machine(tmp_path, driver=True)
    py = _pip_venv(tmp_path / "venv")
    env = {**isolated_env(tmp_path), **machine_env(tmp_path / "bin", root, COLUMNS="200", **(_recorded_env() if sourced else {}))}
    if not sourced:
        env.pop("ASCEND_HOME_PATH", None)
        env["LD_LIBRARY_PATH"] = ""
    out = run_sd(["install", "--python", py, "--no-index", "--find-links", str(standins), "--yes", "--json"], env=env, timeout=300)
    return out, py


@pytest.mark.posix
def test_a_real_install_of_the_stand_ins_with_cann_sourced_sees_the_npus(tmp_path, standins):
    out, py = _install(tmp_path, standins, sourced=True)
    plan = out.json()
    assert out.rc == 0, (out.stdout[-2000:], out.stderr[-2000:])
    assert _reqs(plan) == ["torch==2.8.0+cpu", "torch-npu==2.8.0"]
    assert "torch 2.8.0+cpu imports in the target and sees the Huawei Ascend NPU" in out.stderr + out.stdout, out.stderr[-2000:]


@pytest.mark.posix
def test_a_real_install_without_cann_sourced_says_the_exact_source_line(tmp_path, standins):
    out, py = _install(tmp_path, standins, sourced=False)
    said = out.stderr + out.stdout
    assert out.rc != 0, said[-2000:]
    assert "Failed to load the backend extension: torch_npu" in said and "libhccl.so" in said, said[-3000:]
    assert "run `source /usr/local/Ascend/ascend-toolkit/set_env.sh`" in said, said[-3000:]


def test_the_plan_reads_in_chinese():
    """The plan's torch_npu and CANN sentences are the Ascend locale's (sentences: in its en.yaml and zh.yaml)."""
    import os

    env = {**os.environ, "LANG": "zh_CN.UTF-8", "LC_ALL": "", "LC_MESSAGES": ""}
    out = run_sd(["install", "--npu", "910B", "--dry-run", "--offline", "--python-version", "3.11", "--platform", "manylinux_2_28_x86_64"], env=env)
    said = out.stdout + out.stderr
    assert "华为昇腾 NPU 使用 torch 的 CPU 构建，并在旁边安装 torch-npu" in said and "torch-npu 2.12.0 需要 CANN 9.1.0 或更新版本" in said, said
    assert "此假设分析不知道目标机器的 CANN" in said
