"""Kernels: real matmul / conv / compile on CPU torch 2.13.0, and the parent's handling of
crashes, hangs and wrong numbers (hooks in the worker: STACKDOCTOR_TEST_HOOK).

The pure parts (parsing the worker's lines, findings, units, peaks) use synthetic inputs,
named as such; everything that says "real" runs the worker in the real torch venv.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
from helpers import kernel_findings

from stackdoctor.accelerators.nvidia.witnesses import peak_from_sm_clock
from stackdoctor.core.units import parse_bandwidth
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import KernelFacts, KernelResult, NvidiaGpu, to_data
from stackdoctor.reconcile import reconcile
from stackdoctor.system import CommandResult, System
from stackdoctor.verify.runner import MARK, format_busbw_chart, kernel_facts_from_run, run_kernels, worker_path

MATRIX = load_matrix([])


def codes(findings):
    return sorted(f.code for f in findings)


# ---------------------------------------------------------------------------- pure


@pytest.mark.parametrize(
    ("text", "gbs"),
    [("20", 20.0), ("20GB/s", 20.0), ("20 GB/s", 20.0), ("160Gb/s", 20.0), ("100Gbps", 12.5), ("2.5TB/s", 2500.0), ("500MB/s", 0.5), (" 7.5 ", 7.5)],
)
def test_parse_bandwidth(text, gbs):
    assert parse_bandwidth(text) == pytest.approx(gbs)


@pytest.mark.parametrize("text", ["", "fast", "20XB/s", "1e3", "-5", "20 GB/h"])
def test_parse_bandwidth_rejects(text):
    with pytest.raises(ValueError):
        parse_bandwidth(text)


def _cr(stdout="", stderr="", rc=0, status="ok", signal=None, detail=""):
    return CommandResult(("python",), rc, stdout, stderr, 0.1, status, signal, False, detail)


def _line(section, **data):
    return MARK + json.dumps({"section": section, **data}) + "\n"


def test_partial_results_survive_a_crash():
    """Synthetic worker output: one result, then SIGSEGV."""
    out = _line("result", kernel="matmul", device="cpu", dtype="fp32", ok=True, max_error=1e-7, tolerance=1e-4, tflops=0.1)
    kf = kernel_facts_from_run(_cr(out, "Fatal Python error: Segmentation fault\n", rc=-11, status="error", signal=11))
    assert kf.ran and len(kf.results) == 1 and kf.results[0].ok
    assert kf.signal == "SIGSEGV"
    assert "SIGSEGV" in kf.error and "after 1 result" in kf.error
    assert "Segmentation fault" in kf.stderr_tail
    assert codes(kernel_findings(kf)) == ["kernel-failed"]


@pytest.mark.parametrize(
    ("res", "needle"),
    [
        (_cr(status="timeout", rc=-9, detail="5"), "did not finish in 5 s"),
        (_cr(status="absent", rc=None), "could not be run"),
        (_cr(rc=1, stderr="Traceback...\nImportError: libcudnn.so.9: cannot open shared object file\n"), "exited with code 1"),
        (_cr(rc=0), "ended without reporting"),
        (_cr(_line("done", ran=False, error="import torch failed: ImportError: x")), "import torch failed"),
    ],
    ids=["timeout", "absent", "exit-1", "silent", "import-error"],
)
def test_process_failures_become_kernel_failed(res, needle):
    kf = kernel_facts_from_run(res)
    assert needle in kf.error
    (f,) = kernel_findings(kf)
    assert f.code == "kernel-failed" and f.severity == "fail" and f.fix


def test_findings_per_result():
    """Synthetic results: wrong numbers, an exception, a slow one with a known peak, a fine one."""
    kf = KernelFacts(ran=True, mode="full", results=[
        KernelResult("matmul", "cuda:0", "bf16", ok=False, max_error=0.5, tolerance=0.03, error="max relative error 0.5"),
        KernelResult("matmul", "cuda:0", "fp16", ok=False, max_error=None, error="the result has NaN or Inf values", extra={"nonfinite": True}),
        KernelResult("conv", "cuda:0", "fp32", ok=False, error="RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", extra={"exception": True}),
        KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=1.0, peak_tflops=19.5, percent_of_peak=5.1, extra={"sweep_max": True}),
        KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=18.0, peak_tflops=19.5, percent_of_peak=92.0, extra={"sweep_max": True}),
        KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=0.1, peak_tflops=19.5, percent_of_peak=0.5, extra={"sweep_max": False}),
    ])
    fs = kernel_findings(kf)
    assert codes(fs) == ["kernel-failed", "kernel-slow", "kernel-wrong-result", "kernel-wrong-result"]
    slow = next(f for f in fs if f.code == "kernel-slow")
    assert slow.severity == "warn" and "5%" in slow.detail
    assert all(f.fix for f in fs)
    assert kernel_findings(KernelFacts(ran=True, results=[kf.results[4]])) == []


def test_peak_from_sm_clock_and_annotation():
    """Synthetic NVML facts for an A100-like GPU: 108 SMs x 64 FP32 lanes x 2 x 1410 MHz."""
    from stackdoctor.model.facts import Facts

    gpu = NvidiaGpu(index=0, name="NVIDIA A100-SXM4-40GB", compute_capability="8.0", sm_count=108, max_sm_clock_mhz=1410)
    assert peak_from_sm_clock(gpu, MATRIX) == pytest.approx(19.49, abs=0.01)
    assert peak_from_sm_clock(NvidiaGpu(index=0, compute_capability="8.0"), MATRIX) is None
    facts = Facts()
    facts.nvidia.gpus = [gpu]
    facts.kernels = KernelFacts(results=[KernelResult("matmul", "cuda:0", "fp32", ok=True, tflops=9.745, extra={"device_name": gpu.name}),
                                         KernelResult("matmul", "cuda:0", "bf16", ok=True, tflops=100.0, extra={"device_name": gpu.name})])
    rows = {k: v for k, v in MATRIX.peaks.items() if not gpu.name.lower().endswith(k)}  # a matrix without the A100 row
    import dataclasses

    no_row = dataclasses.replace(MATRIX, peaks={k: v for k, v in rows.items() if "a100" not in k})
    kf = reconcile(facts, no_row).facts.kernels
    assert kf.results[0].percent_of_peak == pytest.approx(50.0, abs=0.1)
    assert kf.results[0].extra["peak_source"].startswith("reconcile: NVML SM count")
    assert kf.results[1].percent_of_peak is None  # tensor-core peak: only from the matrix's peaks table
    assert facts.kernels.results[0].percent_of_peak is None  # reconcile is pure: its input is unchanged
    again = reconcile(reconcile(facts, no_row), no_row).facts.kernels  # a replay redoes the derivation, never stacks it
    assert again.results[0].percent_of_peak == kf.results[0].percent_of_peak


def test_busbw_chart_scales_to_the_largest():
    rows = [{"bytes": 1024, "ip": {"busbw": 1.0}}, {"bytes": 1 << 20, "ip": {"busbw": 4.0}}]
    lines = format_busbw_chart(rows, width=8)
    assert lines[0].count("█") == 2 and lines[1].count("█") == 8
    assert "1 KiB" in lines[0] and "1 MiB" in lines[1]


# ---------------------------------------------------------------------------- real torch


@pytest.fixture
def system():
    env = dict(os.environ)
    env.pop("STACKDOCTOR_TEST_HOOK", None)
    return System(env=env)


@pytest.mark.headline("torch")
def test_matmul_and_conv_for_real(system, torch_python):
    kf = run_kernels(system, torch_python, kernels=["matmul", "conv"], devices=["cpu"], sizes=[64, 128], timeout_s=120, min_time=0.02)
    assert kf.error is None, kf.stderr_tail
    mm = [r for r in kf.results if r.kernel == "matmul"]
    assert [(r.dtype, r.size) for r in mm] == [("fp32", "64x64x64"), ("fp32", "128x128x128"), ("bf16", "64x64x64"), ("bf16", "128x128x128")]
    for r in kf.results:
        assert r.ok, r.error
        assert r.device == "cpu"
        assert 0 <= r.max_error <= r.tolerance
        assert r.time_s > 0 and r.tflops > 0
    # fp32 against float64 is far tighter than bf16 (8 mantissa bits)
    assert max(r.max_error for r in mm if r.dtype == "fp32") < 1e-5 < min(r.max_error for r in mm if r.dtype == "bf16")
    conv = next(r for r in kf.results if r.kernel == "conv")
    assert set(conv.extra["errors"]) == {"output", "grad_input", "grad_weight"}
    assert kernel_findings(kf) == []


def test_unavailable_device_is_a_failed_result(system, torch_python):
    kf = run_kernels(system, torch_python, kernels=["matmul"], devices=["cuda:0"], sizes=[32], timeout_s=60)
    (r,) = kf.results
    assert not r.ok and "not available" in r.error
    assert codes(kernel_findings(kf)) == ["kernel-failed"]


def test_abort_in_the_child_is_kernel_failed(system, torch_python):
    kf = run_kernels(system, torch_python, kernels=["matmul"], sizes=[32], timeout_s=60, hook="abort")
    assert kf.signal == "SIGABRT"
    assert "os.abort()" in (kf.stderr_tail or "")
    (f,) = kernel_findings(kf)
    assert f.code == "kernel-failed" and "SIGABRT" in f.detail and "os.abort()" in f.detail


def test_nan_is_caught(system, torch_python):
    kf = run_kernels(system, torch_python, kernels=["matmul"], devices=["cpu"], sizes=[32], timeout_s=60, min_time=0.01, hook="nan")
    assert kf.error is None
    assert kf.results and all(not r.ok and "NaN" in r.error for r in kf.results)
    assert set(codes(kernel_findings(kf))) == {"kernel-wrong-result"}


def test_hang_is_killed_at_the_timeout(system, torch_python):
    start = time.monotonic()
    kf = run_kernels(system, torch_python, kernels=["matmul"], sizes=[32], timeout_s=4, hook="hang")
    assert time.monotonic() - start < 30
    assert "did not finish in 4 s" in kf.error
    assert codes(kernel_findings(kf)) == ["kernel-failed"]


def test_python_error_in_a_kernel_is_a_result(system, torch_python):
    kf = run_kernels(system, torch_python, kernels=["matmul"], devices=["cpu"], sizes=[32], timeout_s=60, min_time=0.01, hook="raise")
    assert kf.error is None and kf.results
    assert all("test hook: matmul raised" in r.error for r in kf.results)
    assert set(codes(kernel_findings(kf))) == {"kernel-failed"}


def test_compile_without_a_cxx_compiler_is_a_result(torch_python, tmp_path):
    env = dict(os.environ, CXX=str(tmp_path / "no-such-g++"), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("STACKDOCTOR_TEST_HOOK", None)
    kf = run_kernels(System(env=env), torch_python, kernels=["compile"], devices=["cpu"], timeout_s=120)
    (r,) = kf.results
    assert r.kernel == "compile" and not r.ok
    assert "compiler" in r.error.lower()
    assert codes(kernel_findings(kf)) == ["kernel-failed"]


def test_run_quick_shape_and_speed(torch_python):
    """The function sd_target.py calls inside the torch child: KernelFacts-shaped, never raises."""
    code = (
        "import sys, json, time; sys.path.insert(0, sys.argv[1]); import torch, sd_kernels;"
        "t = time.monotonic(); out = sd_kernels.run_quick(torch); out['took'] = time.monotonic() - t;"
        "print(json.dumps(out))"
    )
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    p = subprocess.run([torch_python, "-I", "-c", code, str(worker_path("sd_kernels.py").parent)], capture_output=True, text=True, timeout=120, env=env)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["ran"] is True and out["mode"] == "quick"
    assert {(r["kernel"], r["dtype"]) for r in out["results"]} == {("matmul", "fp32"), ("matmul", "bf16"), ("conv", "fp32")}
    assert all(r["ok"] for r in out["results"])
    assert out["took"] > 0  # its speed (goal ~2 s on 2 cores) is a benchmark's to say, not a test's: a loaded machine took 10.1 s
    from stackdoctor.model.facts import from_data

    kf = from_data(KernelFacts, {k: v for k, v in out.items() if k != "took"})
    assert to_data(kf)["results"][0]["kernel"] == "matmul"


def test_cli_json_and_exit_code(torch_python):
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    argv = [sys.executable, "-m", "stackdoctor", "kernels", "matmul", "--device", "cpu", "--sizes", "32", "--python", torch_python, "--json"]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    doc = json.loads(p.stdout)
    assert p.returncode == 0, p.stderr
    assert doc["schema"] == "stackdoctor.kernels/1" and doc["target"] == torch_python
    assert [r["dtype"] for r in doc["results"]] == ["fp32", "bf16"] and doc["findings"] == []
    p = subprocess.run(argv, capture_output=True, text=True, timeout=120, env={**env, "STACKDOCTOR_TEST_HOOK": "nan"})
    assert p.returncode == 1
    assert {f["code"] for f in json.loads(p.stdout)["findings"]} == {"kernel-wrong-result"}


@pytest.mark.parametrize(
    ("device", "hip", "says", "never"),
    [
        ("cuda:0", None, "nvidia-smi -q -d ECC", "amd-smi"),
        ("cuda:0", "6.4.43482", "amd-smi metric", "nvidia-smi"),
        ("cpu", None, "torch.__config__.show()", "nvidia-smi"),
        ("mps", None, "stackdoctor kernels --json", "nvidia-smi"),
    ],
)
def test_wrong_numbers_point_at_the_device_that_computed_them(device, hip, says, never):
    """Wrong numbers on an NVIDIA GPU send the user to its ECC counters; on ROCm (torch's device is also
    "cuda") to amd-smi; on a CPU to the BLAS torch uses; elsewhere to a rerun: never another vendor's tool."""
    from stackdoctor.model.facts import Facts

    f = Facts()
    f.torch.installed = True
    f.torch.version, f.torch.hip = ("2.9.1+rocm6.4", hip) if hip else ("2.9.1+cu128", None)
    f.python.executable = "/env/bin/python"
    kf = KernelFacts(ran=True, results=[KernelResult(kernel="matmul", device=device, dtype="fp32", size=64, ok=False, max_error=0.5, tolerance=1e-3)])
    (wrong,) = kernel_findings(kf, facts=f)
    assert wrong.code == "kernel-wrong-result" and f"matmul fp32 on {device} returned wrong numbers" in wrong.detail
    assert says in wrong.fix and never not in wrong.fix, wrong.fix
    if device == "cpu":
        assert wrong.fix.startswith("/env/bin/python -c ")


def test_the_pipeline_runs_and_judges_kernels_as_check_is_built(system, torch_python, tmp_path, monkeypatch):
    """``kernels`` is built as ``check`` is: the pipeline runs the kernels in the real torch venv (the progress
    shown while they run), judges them, and the screen's findings and the exit code come from that one report;
    the project's policy (``ignore`` in [tool.stackdoctor]) applies to it as to ``check``."""
    from stackdoctor import pipeline

    monkeypatch.chdir(tmp_path)  # no project file above: no policy
    entered = []

    class Shown:
        def __enter__(self):
            entered.append("kernels")

        def __exit__(self, *exc):
            return False

    run = pipeline.KernelRun(python=torch_python, compute=["matmul"], devices=["cpu"], sizes=[32], timeout_s=60, hook="nan")
    report = pipeline.build_kernels_report(run, pipeline.Options(python=torch_python), system, progress=Shown)
    assert entered == ["kernels"] and report.facts.kernels.ran
    assert set(codes(report.findings)) == {"kernel-wrong-result"} and pipeline.exit_code(report) == 1
    (tmp_path / "pyproject.toml").write_text('[tool.stackdoctor]\nignore = ["kernel-wrong-result"]\n')
    ignored = pipeline.build_kernels_report(run, pipeline.Options(python=torch_python), system)
    assert "kernel-wrong-result" not in {f.code for f in ignored.findings if f.severity == "fail"} and pipeline.exit_code(ignored) == 0
    assert pipeline.run_kernel_facts(pipeline.KernelRun(python=torch_python), system).ran is False  # nothing asked: nothing run
