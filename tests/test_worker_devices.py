"""The kernel and allreduce workers know devices only from the kinds' device specs (``_worker/sd_devices.py`` reading
``STACKDOCTOR_DEVICES``, issue 31): what they did per vendor before is now each kind's ``DeviceSpec``, and these tests
pin that the built-in kinds' specs give the same answers the vendor branches gave. No GPU here: torch is a stand-in
object with only what a spec names (``torch.cuda.device_count()`` ...), each call recorded; the real-torch runs are
tests/test_kernels*.py, tests/test_ascend_kernels.py and tests/test_plugin_seam.py."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from stackdoctor import kinds
from stackdoctor._worker import worker_path


@pytest.fixture
def workers(monkeypatch):
    monkeypatch.syspath_prepend(str(worker_path("sd_kernels.py").parent))
    monkeypatch.setenv("STACKDOCTOR_DEVICES", json.dumps(kinds.device_specs()))
    import sd_allreduce
    import sd_devices
    import sd_kernels

    return SimpleNamespace(devices=sd_devices, kernels=sd_kernels, allreduce=sd_allreduce)


def _api(calls: list, name: str, available: bool, count: int = 0, **more):
    ns = SimpleNamespace(is_available=lambda: available, device_count=lambda: count,
                         synchronize=lambda *a: calls.append((name + ".synchronize", a)),
                         set_device=lambda d: calls.append((name + ".set_device", d)),
                         get_device_name=lambda i: f"{name} device {i}")
    for k, v in more.items():
        setattr(ns, k, v)
    return ns


def _torch(calls: list, *, cuda: int = 0, capability: int = 9, bf16: bool = True, hip: str | None = None, xpu: int = 0, mps: bool = False):
    return SimpleNamespace(
        __version__="2.13.0",
        device=lambda d, i=None: ("device", d if i is None else f"{d}:{i}"),
        cuda=_api(calls, "cuda", cuda > 0, cuda, get_device_capability=lambda d: (capability, 0), is_bf16_supported=lambda: bf16),
        xpu=_api(calls, "xpu", xpu > 0, xpu),
        mps=SimpleNamespace(synchronize=lambda: calls.append(("mps.synchronize", ()))),
        backends=SimpleNamespace(mps=SimpleNamespace(is_available=lambda: mps), cuda=SimpleNamespace(matmul=SimpleNamespace(allow_tf32=True)),
                                 cudnn=SimpleNamespace(allow_tf32=True)),
        version=SimpleNamespace(hip=hip, cuda=None if hip else "13.0"),
    )


def test_without_the_specs_the_workers_know_only_the_cpu(workers, monkeypatch):
    monkeypatch.delenv("STACKDOCTOR_DEVICES")
    assert workers.devices.list_devices(_torch([], cuda=2, mps=True)) == ["cpu"]


def test_the_devices_each_kind_lists(workers):
    assert workers.devices.list_devices(_torch([], cuda=2)) == ["cpu", "cuda:0", "cuda:1"]  # NVIDIA, ROCm, Jetson: one "cuda" kind
    assert workers.devices.list_devices(_torch([], xpu=1)) == ["cpu", "xpu:0"]
    assert workers.devices.list_devices(_torch([], mps=True)) == ["cpu", "mps"]  # unindexed
    assert workers.kernels.device_name(_torch([], cuda=2), "cuda:1") == "cuda device 1"
    assert workers.kernels.device_name(_torch([], mps=True), "mps") == "Apple MPS"
    assert [workers.devices.first(d) for d in ("cuda", "xpu", "mps", "cpu", "cuda:1")] == ["cuda:0", "xpu:0", "mps", "cpu", "cuda:1"]


@pytest.mark.parametrize(("torch_kw", "device", "want"), [
    ({"cuda": 1, "capability": 9}, "cuda:0", ["bf16", "fp16", "tf32"]),
    ({"cuda": 1, "capability": 9, "hip": "6.4"}, "cuda:0", ["bf16", "fp16"]),  # ROCm: no TF32
    ({"cuda": 1, "capability": 7, "bf16": False}, "cuda:0", ["fp16"]),  # a V100
    ({"xpu": 1}, "xpu:0", ["bf16", "fp16"]),
    ({"mps": True}, "mps", ["fp16"]),
    ({}, "cpu", ["bf16"]),
])
def test_the_fast_dtypes_each_kind_declares(workers, torch_kw, device, want):
    assert workers.kernels.fast_dtypes(_torch([], **torch_kw), device) == want


def test_synchronize_waits_for_the_device_it_names(workers):
    calls: list = []
    torch = _torch(calls, cuda=2, xpu=1, mps=True)
    for d in ("cuda:1", "xpu:0", "mps", "cpu"):
        workers.kernels.synchronize(torch, d)
    assert calls == [("cuda.synchronize", (("device", "cuda:1"),)), ("xpu.synchronize", (("device", "xpu:0"),)), ("mps.synchronize", ())]


def test_the_tf32_switch_is_the_cuda_specs_and_put_back(workers):
    torch = _torch([], cuda=1)
    spec = workers.devices.spec_for("cuda:0")
    before = workers.devices.set_attr(torch, spec["tf32_switch"], False)
    assert before is True and torch.backends.cuda.matmul.allow_tf32 is False
    assert workers.devices.spec_for("cpu") is None and workers.devices.spec_for("mps")["tf32_switch"] == ""


@pytest.mark.parametrize(("torch_kw", "dist_kw", "want"), [
    ({"cuda": 2}, {"is_nccl_available": lambda: True}, ("nccl", "cuda", "CUDA device present and torch has NCCL")),
    ({"cuda": 2}, {"is_nccl_available": lambda: False}, ("gloo", "cpu", "CPU tensors: gloo over TCP")),  # no NCCL: the next kind, then gloo
    ({"xpu": 1}, {"is_xccl_available": lambda: True}, ("xccl", "xpu", "XPU device present and torch has XCCL")),
    ({"xpu": 1}, {}, ("gloo", "cpu", "CPU tensors: gloo over TCP")),
    ({"mps": True}, {}, ("gloo", "cpu", "MPS device, but this torch has no tccl backend (PyTorch PR 189856 is not in it): gloo over TCP")),
    ({}, {}, ("gloo", "cpu", "CPU tensors: gloo over TCP")),
])
def test_allreduce_chooses_each_kinds_backend_as_before(workers, torch_kw, dist_kw, want):
    dist = SimpleNamespace(**dist_kw)
    assert workers.allreduce.choose_backend(_torch([], **torch_kw), dist, "auto", None) == want


def test_tccl_needs_apples_library_too(workers, monkeypatch):
    import ctypes.util

    dist = SimpleNamespace(is_tccl_available=lambda: True)
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    assert workers.allreduce.choose_backend(_torch([], mps=True), dist, "auto", None)[2].startswith("tccl is registered but Apple's librdma")
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "/usr/lib/librdma.dylib" if name == "rdma" else None)
    assert workers.allreduce.choose_backend(_torch([], mps=True), dist, "auto", None) == ("tccl", "mps", "tccl registered and librdma.dylib present")


def test_a_backend_asked_for_runs_on_its_kinds_device(workers):
    torch, dist = _torch([]), SimpleNamespace()
    got = {b: workers.allreduce.choose_backend(torch, dist, b, None)[1] for b in ("nccl", "xccl", "tccl", "hccl", "gloo")}
    assert got == {"nccl": "cuda", "xccl": "xpu", "tccl": "mps", "hccl": "npu", "gloo": "cpu"}


def test_each_rank_gets_its_own_cuda_device_and_makes_it_current(workers):
    calls: list = []
    torch = _torch(calls, cuda=2)
    assert workers.allreduce._rank_device(torch, "nccl", "cuda", 3) == ("cuda:1", None)
    assert calls == [("cuda.set_device", "cuda:1")]
    assert workers.allreduce._rank_device(_torch([], xpu=2), "xccl", "xpu", 2) == ("xpu:0", None)  # XPU: no set_device, as before
    assert workers.allreduce._rank_device(_torch([], mps=True), "tccl", "mps", 1) == ("mps", None)
    assert workers.allreduce._rank_device(torch, "gloo", "cpu", 1) == ("cpu", None)
    assert workers.allreduce._rank_device(_torch([]), "nccl", "cuda", 0) == ("cuda", "nccl needs a CUDA device, but this torch (2.13.0) sees none")
