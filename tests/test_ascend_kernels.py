"""Ascend (issue 32): the kernel and allreduce workers reach an ``npu`` device only through the device spec the Ascend
kind declares (``accelerators.device_specs()``, handed over as ``STACKDOCTOR_DEVICES``): its device string, the torch
module that counts it, the function that synchronises it, and its collectives' backend (HCCL; gloo where torch has
none). Run under the real CPU torch (the ``torch_python`` fixture) with a stand-in ``torch_npu`` on PYTHONPATH that
gives torch a ``torch.npu`` module (two devices; ``synchronize`` counted)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from stackdoctor import kinds
from stackdoctor._worker import worker_path

STANDIN = '''"""STAND-IN torch_npu for stackdoctor tests - not Ascend's: torch.npu with two devices whose tensors are CPU tensors."""
import sys
import types

import torch

torch.utils.rename_privateuse1_backend("npu")  # torch.device("npu:0") parses, as with the real torch_npu


def _cpu(value):
    if isinstance(value, torch.device) and value.type == "npu":
        return torch.device("cpu")
    if isinstance(value, str) and value.split(":", 1)[0] == "npu":
        return "cpu"
    if isinstance(value, (list, tuple)):
        return type(value)(_cpu(v) for v in value)
    return value


class _NpuOnCpu(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*_cpu(tuple(args)), **{k: _cpu(v) for k, v in (kwargs or {}).items()})


npu = types.ModuleType("torch.npu")
npu.calls = []
npu.is_available = lambda: True
npu.device_count = lambda: 2
npu.get_device_name = lambda i=0: "Ascend910B4-1 (stand-in: CPU tensors)"
npu.synchronize = lambda *a: npu.calls.append("synchronize")
npu.set_device = lambda d: None
torch.npu = npu
sys.modules["torch.npu"] = npu
_NpuOnCpu().__enter__()
'''

PROBE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, torch.distributed as dist
import sd_kernels, sd_allreduce
devs = sd_kernels.list_devices(torch)
sd_kernels.synchronize(torch, "npu:1")
sd_allreduce.synchronize(torch, "npu:0")
conv = sd_kernels.conv(torch, "npu:0", "fp32", batch=2, cin=4, cout=8, hw=8, min_time=0.01, max_iters=3)
print(json.dumps({"conv": conv, "devices": devs, "name": sd_kernels.device_name(torch, "npu:0"), "calls": getattr(getattr(torch, "npu", None), "calls", None),
                  "auto": sd_allreduce.choose_backend(torch, dist, "auto", None),
                  "asked": sd_allreduce.choose_backend(torch, dist, "hccl", None)}))
'''


def test_the_workers_use_the_npu_through_the_device_spec(torch_python, tmp_path):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(STANDIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "STACKDOCTOR_DEVICES": json.dumps(kinds.device_specs())}
    out = subprocess.run([torch_python, "-c", PROBE, str(Path(worker_path("sd_kernels.py")).parent)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["devices"][-2:] == ["npu:0", "npu:1"], got  # torch_npu imported by the spec ("imports"), counted by torch.npu
    assert got["name"].startswith("Ascend910B4-1") and got["calls"][:2] == ["synchronize", "synchronize"], got
    conv = got["conv"]  # conv fwd+bwd on npu:0 (the stand-in's CPU tensors) against the float64 CPU reference
    assert conv["ok"] and conv["device"] == "npu:0" and conv["max_error"] < 1e-4 and len(got["calls"]) > 2, conv
    # the CPU torch has no HCCL backend registered: auto stays on gloo and says why; asked for, hccl runs on npu
    assert got["auto"] == ["gloo", "cpu", "npu device present, but torch.distributed has no hccl backend: gloo over TCP"], got
    assert got["asked"] == ["hccl", "npu", "asked for"], got


def test_without_the_spec_the_workers_see_no_npu(torch_python, tmp_path):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(STANDIN)
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_DEVICES"}
    env["PYTHONPATH"] = str(tmp_path)
    code = PROBE.replace('sd_kernels.synchronize(torch, "npu:1")\nsd_allreduce.synchronize(torch, "npu:0")\n', "")
    out = subprocess.run([torch_python, "-c", code, str(Path(worker_path("sd_kernels.py")).parent)], capture_output=True, text=True, env=env, timeout=300)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert not any(d.startswith("npu") for d in got["devices"]) and got["auto"][0] == "gloo", got


def _venv_with(torch_python: str, tmp_path: Path) -> str:
    """A venv whose site-packages .pth adds the shared CPU torch and the stand-in (the workers run ``python -I``,
    which ignores PYTHONPATH; the shared torch venv is not touched)."""
    import sys

    from helpers import venv_bin

    (tmp_path / "standin" / "torch_npu").mkdir(parents=True)
    (tmp_path / "standin" / "torch_npu" / "__init__.py").write_text(STANDIN)
    site = subprocess.run([torch_python, "-c", "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))"],
                          capture_output=True, text=True, timeout=300, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "v")], check=True, timeout=120)
    py = str(venv_bin(tmp_path / "v"))
    mine = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, timeout=60).stdout.strip()
    Path(mine, "sd-test-torch.pth").write_text(f"{site}\n{tmp_path / 'standin'}\n")
    return py


def test_stackdoctor_kernels_runs_matmul_on_npu0_through_the_spec(torch_python, tmp_path):
    from helpers import run_sd

    py = _venv_with(torch_python, tmp_path)
    data = run_sd(["kernels", "matmul", "--device", "npu:0", "--sizes", "64", "--python", py, "--json"], timeout=600).json()
    rows = [r for r in data["results"] if r["kernel"] == "matmul"]
    assert rows and all(r["device"] == "npu:0" and r["ok"] for r in rows), data
    assert {r["dtype"] for r in rows} == {"fp32", "bf16"} and rows[0]["extra"]["device_name"].startswith("Ascend910B4-1"), rows


def test_checks_quick_kernel_pass_runs_on_npu0_through_the_spec(torch_python, tmp_path):
    """`check`'s quick pass (in the target worker) is handed the same device specs as `kernels`, so a machine with
    torch_npu gets its matmuls on npu:0, not only on the CPU."""
    from helpers import run_sd

    py = _venv_with(torch_python, tmp_path)
    env = {**os.environ, "STACKDOCTOR_TEST_HOOK": "quick=64"}  # the stand-in's npu tensors are CPU tensors
    data = run_sd(["check", "--python", py, "--json"], timeout=600, env=env).json()
    rows = [r for r in data["facts"]["kernels"]["results"] if r["kernel"] == "matmul"]
    assert any(r["device"] == "npu:0" and r["ok"] for r in rows), rows
