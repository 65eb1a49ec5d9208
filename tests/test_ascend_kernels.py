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

from stackdoctor import accelerators
from stackdoctor._worker import worker_path

STANDIN = '''import sys, types
import torch

npu = types.ModuleType("torch.npu")
npu.calls = []
npu.is_available = lambda: True
npu.device_count = lambda: 2
npu.get_device_name = lambda i=0: "Ascend910B4-1"
npu.synchronize = lambda *a: npu.calls.append("synchronize")
torch.npu = npu
sys.modules["torch.npu"] = npu
'''

PROBE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
import torch, torch.distributed as dist
import sd_kernels, sd_allreduce
devs = sd_kernels.list_devices(torch)
sd_kernels.synchronize(torch, "npu:1")
sd_allreduce.synchronize(torch, "npu:0")
print(json.dumps({"devices": devs, "name": sd_kernels.device_name(torch, "npu:0"), "calls": getattr(getattr(torch, "npu", None), "calls", None),
                  "auto": sd_allreduce.choose_backend(torch, dist, "auto", None),
                  "asked": sd_allreduce.choose_backend(torch, dist, "hccl", None)}))
'''


def test_the_workers_use_the_npu_through_the_device_spec(torch_python, tmp_path):
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text(STANDIN)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "STACKDOCTOR_DEVICES": json.dumps(accelerators.device_specs())}
    out = subprocess.run([torch_python, "-c", PROBE, str(Path(worker_path("sd_kernels.py")).parent)], capture_output=True, text=True,
                         env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["devices"][-2:] == ["npu:0", "npu:1"], got  # torch_npu imported by the spec ("imports"), counted by torch.npu
    assert got["name"] == "Ascend910B4-1" and got["calls"] == ["synchronize", "synchronize"], got
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
