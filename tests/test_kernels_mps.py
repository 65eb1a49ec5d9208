"""MPS kernels, run here without a Mac: real torch (CPU build) with a torch function mode that
plays an Apple GPU. ``tensor.to("mps")`` gives a tensor marked as living on the GPU, every op on
it gives marked tensors, ``.cpu()`` / ``.to("cpu")`` unmarks, and float64 on a marked tensor
raises the error MPS raises (MPS has no float64). The worker must list ``mps`` when torch says it
is available and compute every float64 reference on the CPU."""

from __future__ import annotations

import json
import os
import subprocess

from stackdoctor import kinds
from stackdoctor._worker import worker_path

SCRIPT = r'''
import json, sys, importlib.util
import torch
from torch.overrides import TorchFunctionMode

spec = importlib.util.spec_from_file_location("sd_kernels", sys.argv[1])
sd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sd)

MPS_F64 = "Cannot convert a MPS Tensor to float64 dtype as the MPS framework doesn't support float64. Please use float32 instead."
float64_on_gpu = []

def on_gpu(t):
    return isinstance(t, torch.Tensor) and getattr(t, "_sd_mps", False)

def mark(out):
    if isinstance(out, torch.Tensor):
        out._sd_mps = True
    elif isinstance(out, (tuple, list)):
        for o in out:
            mark(o)
    return out

def wants_cpu(args, kwargs):
    target = [a for a in list(args[1:]) + list(kwargs.values()) if isinstance(a, (str, torch.device))]
    return any(str(t).startswith("cpu") for t in target)

def wants_f64(func, args, kwargs):
    if func in (torch.Tensor.double,):
        return True
    dt = [a for a in list(args[1:]) + list(kwargs.values()) if isinstance(a, torch.dtype)]
    return torch.float64 in dt or kwargs.get("dtype") is torch.float64

class FakeMps(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat = list(args) + list(kwargs.values())
        src_gpu = any(on_gpu(a) for a in flat) or any(on_gpu(x) for a in flat if isinstance(a, (list, tuple)) for x in a)
        if func in (torch.Tensor.to,) and any(str(a) == "mps" for a in list(args[1:]) + list(kwargs.values())):
            return mark(args[0].detach().clone().requires_grad_(args[0].requires_grad))
        if src_gpu and wants_f64(func, args, kwargs):
            float64_on_gpu.append(getattr(func, "__name__", str(func)))
            raise TypeError(MPS_F64)
        if src_gpu and (func in (torch.Tensor.cpu,) or (func is torch.Tensor.to and wants_cpu(args, kwargs))):
            return args[0].detach().clone().requires_grad_(args[0].requires_grad)
        out = func(*args, **kwargs)
        return mark(out) if src_gpu and func not in (torch.Tensor.requires_grad_,) else out

torch.backends.mps.is_available = lambda: True
torch.mps.synchronize = lambda: None
torch.compile = lambda f: f   # the reference is what is tested here, not Inductor on MPS
with FakeMps():
    devices = sd.list_devices(torch)
    results = [sd.matmul(torch, "mps", "fp32", 64, min_time=0.0, max_iters=2),
               sd.matmul(torch, "mps", "fp16", 64, min_time=0.0, max_iters=2),
               sd.conv(torch, "mps", batch=2, cin=4, cout=4, hw=8, min_time=0.0, max_iters=2),
               sd.compile_check(torch, "mps", n=64)]
    quick = sd.run_quick(torch, with_compile=True)
print(json.dumps({"devices": devices, "results": results, "quick": quick, "float64_on_gpu": float64_on_gpu}, default=str))
'''


def run_fake_mps(torch_python: str) -> dict:
    """The worker knows the MPS device from Apple's device spec, handed over as the parent hands it (STACKDOCTOR_DEVICES)."""
    # the quick pass at 64: at its GPU size (1024) the fp16 matmuls under the fake device's Python mode took 14 s on the CPU
    env = {**os.environ, "STACKDOCTOR_DEVICES": json.dumps(kinds.device_specs()), "STACKDOCTOR_TEST_HOOK": "quick=64"}
    proc = subprocess.run([torch_python, "-c", SCRIPT, str(worker_path("sd_kernels.py"))], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_mps_is_listed_and_every_reference_is_float64_on_the_cpu(torch_python):
    out = run_fake_mps(torch_python)
    assert out["devices"] == ["cpu", "mps"]
    assert out["float64_on_gpu"] == [], "a float64 reference was computed on the (fake) Apple GPU"
    by = {(r["kernel"], r.get("dtype")): r for r in out["results"]}
    for key in (("matmul", "fp32"), ("matmul", "fp16"), ("conv", "fp32"), ("compile", "fp32")):
        r = by[key]
        assert r["ok"], r
        assert r["device"] == "mps" and r["max_error"] is not None and r["max_error"] <= r["tolerance"]
    assert by[("matmul", "fp32")]["extra"]["device_name"] == "Apple MPS"
    quick = out["quick"]
    assert "error" not in quick and {r["device"] for r in quick["results"]} == {"cpu", "mps"}
    assert all(r["ok"] for r in quick["results"]), quick["results"]
    conv = next(r for r in quick["results"] if r["kernel"] == "conv")
    assert conv["device"] == "mps"  # the first accelerator gets the conv


def test_the_fake_gpu_refuses_float64_like_mps(torch_python):
    """The harness has teeth: float64 on a tensor moved to "mps" raises MPS's own error."""
    probe = SCRIPT.split("torch.backends.mps.is_available")[0] + (
        "with FakeMps():\n"
        "    x = torch.ones(2).to('mps')\n"
        "    try:\n"
        "        x.double(); print('no error')\n"
        "    except TypeError as e:\n"
        "        print(str(e)[:40])\n"
        "    print(x.cpu().double().sum().item())\n"
    )
    proc = subprocess.run([torch_python, "-c", probe, str(worker_path("sd_kernels.py"))], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.splitlines() == ["Cannot convert a MPS Tensor to float64 d", "2.0"]
