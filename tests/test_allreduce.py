"""allreduce: real gloo on loopback (2 and 3 ranks), a corrupted rank, a peer that never
joins, a port in use, launcher (torchrun-style) environment; plus the pure merge/findings."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import kernel_findings

from stackdoctor.model.facts import KernelFacts
from stackdoctor.system import System
from stackdoctor.verify.runner import (
    AllreduceOptions,
    allreduce_kernel_facts,
    fleet_table,
    free_port,
    merge_allreduce,
    node_summary,
    run_allreduce_local,
    run_allreduce_rank,
)

SMALL = AllreduceOptions(min_bytes=8, max_bytes=64 * 1024, factor=4, iters=5, warmup=1, timeout_s=30)


@pytest.fixture
def system():
    env = dict(os.environ)
    env.pop("STACKDOCTOR_TEST_HOOK", None)
    return System(env=env)


def codes(findings):
    return sorted(f.code for f in findings)


# ---------------------------------------------------------------------------- pure (synthetic rank reports)


def _ok(rank, wrong=0, busbw=1.0):
    row = {"bytes": 1024, "count": 256, "oop": {"time_us": 10.0, "algbw": 0.1, "busbw": busbw, "wrong": wrong},
           "ip": {"time_us": 10.0, "algbw": 0.1, "busbw": busbw, "wrong": wrong}}
    return {"rank": rank, "status": "ok", "backend": "gloo", "device": "cpu", "rows": [row], "max_busbw_gbs": busbw,
            "master_addr": "10.0.0.1", "master_port": 29500}


def test_merge_names_missing_ranks():
    s = merge_allreduce({0: {"rank": 0, "status": "timeout", "missing_ranks": [2, 3], "error": "ranks 2,3 never joined in 5 s",
                             "master_addr": "10.0.0.1", "master_port": 29500}}, 4)
    assert s["status"] == "timeout" and s["missing_ranks"] == [2, 3]
    (f,) = kernel_findings(allreduce_kernel_facts(s))
    assert f.code == "allreduce-timeout" and "2, 3" in f.detail and "10.0.0.1:29500" in f.fix


def test_merge_ok_and_gate():
    s = merge_allreduce({0: _ok(0, busbw=2.0), 1: _ok(1, busbw=2.0)}, 2)
    assert s["status"] == "ok" and s["ranks_reported"] == [0, 1]
    kf = allreduce_kernel_facts(s)
    assert kernel_findings(kf) == [] and kernel_findings(kf, min_busbw_gbs=1.5) == []
    (slow,) = kernel_findings(kf, min_busbw_gbs=20)
    assert slow.code == "allreduce-slow" and slow.severity == "fail"


def test_wrong_values_and_failed_rank():
    s = merge_allreduce({0: _ok(0, wrong=512), 1: {"rank": 1, "status": "failed", "error": "rank 1 was killed by SIGSEGV", "signal": "SIGSEGV"}}, 2)
    assert s["status"] == "failed" and s["signal"] == "SIGSEGV"
    assert codes(kernel_findings(allreduce_kernel_facts(s))) == ["allreduce-failed", "kernel-wrong-result"]


def test_port_in_use_fix_names_the_port():
    s = merge_allreduce({0: {"rank": 0, "status": "failed", "master_port": 29999,
                             "error": "could not open the rendezvous store at 127.0.0.1:29999: DistNetworkError: address already in use"}}, 2)
    (f,) = kernel_findings(allreduce_kernel_facts(s))
    assert f.code == "allreduce-failed" and "--master-port" in f.fix


def test_fleet_table_flags_differences_and_the_slowest():
    """Synthetic node summaries: one node on another driver and a slower GPU, one never reported."""
    a = {"rank": 0, "driver": "550.54.14", "torch": "2.13.0+cu126", "cuda": "12.6", "nccl": "2.26.2", "gpus": "NVIDIA H100", "matmul_fp32_tflops": 50.0}
    b = dict(a, rank=1)
    c = dict(a, rank=2, driver="535.104.05", matmul_fp32_tflops=20.0)
    t = fleet_table([a, b, c, None])
    assert list(t["differences"]) == ["driver"]
    assert t["differences"]["driver"] == {"550.54.14": [0, 1], "535.104.05": [2]}
    assert t["slowest_rank"] == 2 and t["slowest_ratio"] == 0.4
    assert fleet_table([a, b])["differences"] == {}


def test_node_summary_from_facts():
    from stackdoctor.model.facts import Facts, KernelResult, NvidiaGpu

    f = Facts()
    f.platform.hostname = "n1"
    f.nvidia.driver_version = "550.54.14"
    f.nvidia.gpus = [NvidiaGpu(index=0, name="NVIDIA H100"), NvidiaGpu(index=1, name="NVIDIA H100")]
    f.torch.version, f.torch.cuda, f.torch.nccl_version = "2.13.0+cu126", "12.6", "2.26.2"
    f.kernels.results = [KernelResult("matmul", "cpu", "fp32", ok=True, tflops=0.1), KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=40.0)]
    n = node_summary(f)
    assert n == {"hostname": "n1", "driver": "550.54.14", "torch": "2.13.0+cu126", "cuda": "12.6", "nccl": "2.26.2",
                 "gpus": "NVIDIA H100", "matmul_fp32_tflops": 40.0, "matmul_device": "cuda:0"}


# ---------------------------------------------------------------------------- real gloo


@pytest.mark.headline("gloo")
@pytest.mark.parametrize("n", [2, 3])
def test_gloo_loopback_exact(system, torch_python, n):
    kf = run_allreduce_local(system, torch_python, n, SMALL)
    ar = kf.allreduce
    assert ar["status"] == "ok", ar.get("errors")
    assert ar["backend"] == "gloo" and ar["world_size"] == n and ar["ranks_reported"] == list(range(n))
    assert [r["bytes"] for r in ar["rows"]] == [8, 32, 128, 512, 2048, 8192, 32768]
    for row in ar["rows"]:
        for mode in ("oop", "ip"):
            m = row[mode]
            assert m["wrong"] == 0
            assert m["time_us"] > 0
            assert m["algbw"] == pytest.approx(row["bytes"] / (m["time_us"] / 1e6) / 1e9, rel=1e-6)
            assert m["busbw"] == pytest.approx(m["algbw"] * 2 * (n - 1) / n, rel=1e-9)
    assert kernel_findings(kf) == []


def test_corrupted_rank_is_detected(system, torch_python):
    kf = run_allreduce_local(system, torch_python, 2, SMALL, hook="corrupt-rank=1")
    ar = kf.allreduce
    assert ar["status"] == "ok"
    # every element is off by one on both ranks: #wrong = count x ranks, for every size and mode
    for row in ar["rows"]:
        assert row["oop"]["wrong"] == row["ip"]["wrong"] == row["count"] * 2
    (f,) = kernel_findings(kf)
    assert f.code == "kernel-wrong-result" and f.severity == "fail"


def test_peer_that_never_joins_times_out(system, torch_python):
    opts = AllreduceOptions(max_bytes=64, timeout_s=4)
    start = time.monotonic()
    kf = run_allreduce_rank(system, torch_python, rank=0, world_size=2, master_addr="127.0.0.1", master_port=free_port(), opts=opts)
    assert time.monotonic() - start < 40
    ar = kf.allreduce
    assert ar["status"] == "timeout" and ar["missing_ranks"] == [1]
    (f,) = kernel_findings(kf)
    assert f.code == "allreduce-timeout" and "1" in f.detail


def test_rank1_whose_rank0_never_starts_waits_the_timeout_it_was_given(system, torch_python):
    """A client TCPStore retries its connect after a random back-off (timeout=4 s gave up after 10-15 s); the
    worker bounds the rendezvous by the timeout the user gave and says so."""
    opts = AllreduceOptions(max_bytes=64, timeout_s=4)
    start = time.monotonic()
    kf = run_allreduce_rank(system, torch_python, rank=1, world_size=2, master_addr="127.0.0.1", master_port=free_port(), opts=opts)
    assert time.monotonic() - start < 40
    ar = kf.allreduce
    assert ar["status"] == "timeout" and ar["missing_ranks"] == [0]
    assert ar["error"] == f"rank 0 (the store at 127.0.0.1:{ar['master_port']}) never answered in 4 s"


def test_the_rendezvous_bound_returns_what_it_got_in_time():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "stackdoctor" / "_worker"))
    try:
        import sd_allreduce
    finally:
        sys.path.pop(0)
    assert sd_allreduce._within(lambda: 7, 5) == (7, None)
    value, error = sd_allreduce._within(lambda: 1 / 0, 5)
    assert value is None and isinstance(error, ZeroDivisionError)
    start = time.monotonic()
    assert sd_allreduce._within(lambda: time.sleep(30), 0.2) == (None, None)
    assert time.monotonic() - start < 20  # it did not wait for the call


def test_rank_that_aborts_is_named(system, torch_python):
    opts = AllreduceOptions(max_bytes=64, timeout_s=4)
    kf = run_allreduce_local(system, torch_python, 2, opts, hook="abort-rank=1")
    ar = kf.allreduce
    assert ar["status"] == "timeout" and ar["missing_ranks"] == [1]
    assert ar["errors"]["1"] == "rank 1 was killed by SIGABRT"
    assert codes(kernel_findings(kf)) == ["allreduce-timeout"]


def test_port_in_use_is_allreduce_failed(system, torch_python):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        kf = run_allreduce_rank(system, torch_python, rank=0, world_size=2, master_addr="127.0.0.1", master_port=port,
                                opts=AllreduceOptions(max_bytes=64, timeout_s=5))
    ar = kf.allreduce
    assert ar["status"] == "failed"
    assert "in use" in ar["error"].lower() or "eaddrinuse" in ar["error"].lower(), ar["error"]
    (f,) = kernel_findings(kf)
    assert f.code == "allreduce-failed" and str(port) in f.fix


def test_under_a_launcher_environment(torch_python):
    """Two `stackdoctor kernels` processes configured only by RANK/WORLD_SIZE/MASTER_* (as torchrun sets them)."""
    port = free_port()
    base = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    procs = []
    for rank in (0, 1):
        env = {**base, "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        argv = [sys.executable, "-m", "stackdoctor", "kernels", "--python", torch_python, "--max-bytes", "1K", "--iters", "3", "--timeout", "30", "--json"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        docs.append(json.loads(out))
    for rank, doc in enumerate(docs):
        assert doc["schema"] == "stackdoctor.kernels/1"
        assert doc["allreduce"]["rank"] == rank and doc["allreduce"]["status"] == "ok"
        assert all(r["kernel"] == "allreduce" and r["extra"]["wrong"] == 0 for r in doc["results"])
        assert [r["kernel"] for r in doc["results"]].count("matmul") == 0  # a launcher run is the allreduce alone
        # fleet: every rank probed its node; the summaries went through the rendezvous store
        fleet = doc["allreduce"]["fleet"]
        assert [n["rank"] for n in fleet["nodes"]] == [0, 1]
        assert all(n["torch"].startswith("2.13.0") and n["matmul_fp32_tflops"] > 0 for n in fleet["nodes"])
        assert "torch" not in fleet["differences"]


@pytest.mark.headline("gloo")
def test_min_busbw_gate_on_the_cli(torch_python):
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    argv = [sys.executable, "-m", "stackdoctor", "kernels", "allreduce", "--nproc", "2", "--python", torch_python,
            "--max-bytes", "256", "--iters", "2", "--min-busbw", "8000Gb/s", "--json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == 1
    assert [f["code"] for f in doc["findings"]] == ["allreduce-slow"]
    assert isinstance(KernelFacts, type) and doc["allreduce"]["world_size"] == 2


def test_over_thunderbolt_without_an_interface_is_a_usage_error(tmp_path, torch_python):
    """A sysroot with no thunderbolt-net interface: one sentence, exit 2, no ranks started."""
    (tmp_path / "sys" / "class" / "net" / "eth0").mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    env["STACKDOCTOR_SYSROOT"] = str(tmp_path)
    p = subprocess.run([sys.executable, "-m", "stackdoctor", "kernels", "allreduce", "--over", "thunderbolt", "--python", torch_python],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 2
    assert "--over thunderbolt" in p.stderr and "Thunderbolt" in p.stderr
