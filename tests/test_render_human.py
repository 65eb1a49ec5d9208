"""The check screen, rendered deterministically (no colour, fixed width)."""

from __future__ import annotations

import io

from rich.console import Console

from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, NvidiaGpu
from stackdoctor.model.report import Finding, Report
from stackdoctor.reconcile import reconcile, report_facts
from stackdoctor.render.human import render_report


def screen(report: Report, width: int = 100, verbose: bool = False) -> str:
    buf = io.StringIO()
    render_report(report, Console(file=buf, width=width, color_system=None), verbose=verbose)
    return buf.getvalue()


def gpu_report(gpu_name: str = "NVIDIA H200") -> Report:
    """A report as the pipeline hands it to the screen: its facts reconciled (the screen draws the reconciled view)."""
    f = Facts()
    f.python.version, f.python.executable, f.python.env_kind = "3.12.3", "/srv/venv/bin/python", "venv"
    f.torch.installed, f.torch.version, f.torch.variant, f.torch.cuda = True, "2.13.0+cu130", "cu130", "13.0"
    f.torch.cuda_available, f.torch.cudnn_version, f.torch.nccl_version = True, "91002", "2.27.3"
    f.nvidia.driver_version, f.nvidia.cuda_driver_version = "580.65.06", "13.0"
    f.nvidia.gpus = [NvidiaGpu(0, gpu_name, compute_capability="9.0", memory_total_mib=143771, sources={"name": "nvml", "compute_capability": "nvml"})]
    f.kernels = KernelFacts(
        ran=True,
        mode="quick",
        results=[
            KernelResult("matmul", "cuda:0", "bf16", ok=True, tflops=702.3, percent_of_peak=71.0),
            KernelResult("conv", "cuda:0", "fp32", ok=False, error="max error 3.1 above 1e-3"),
        ],
    )
    findings = [
        Finding("torch-ok", "ok", "torch imports", layer="torch"),
        Finding("gpu-throttled", "warn", "GPU 0 is throttled", detail="HW slowdown active on GPU 0 NVIDIA H200", fix="nvidia-smi -q -d PERFORMANCE", layer="gpu"),
    ]
    return Report(facts=report_facts(reconcile(f, load_matrix([]))), findings=findings)


def test_layers_in_order_with_versions_and_marks():
    out = screen(gpu_report())
    lines = out.splitlines()
    order = [next(i for i, ln in enumerate(lines) if key in ln) for key in ("Python 3.12.3", "torch 2.13.0+cu130", "CUDA 13.0", "NVIDIA 580.65.06", "NVIDIA H200")]
    assert order == sorted(order)
    # torch's integer cuDNN version (91002) is shown as the runtime names it, the form its files give
    assert "cuDNN 9.10.2" in out and "NCCL 2.27.3" in out and "sm_90" in out
    assert "✓ torch" in out and "! gpu" in out  # the worst finding of the layer marks it


def test_kernel_table_shows_peak_only_when_known():
    out = screen(gpu_report())
    assert "% peak" in out and "71%" in out and "702" in out
    assert "max error 3.1" in out
    r = gpu_report()
    for k in r.facts.kernels.results:
        k.percent_of_peak = None
    assert "% peak" not in screen(r)


def test_findings_with_fix_and_summary_line():
    out = screen(gpu_report())
    assert "gpu-throttled" in out and "fix: nvidia-smi -q -d PERFORMANCE" in out
    assert out.strip().splitlines()[-1] == "1 warning, 1 ok"
    assert "torch-ok" not in out  # ok findings only with -v
    assert "torch-ok" in screen(gpu_report(), verbose=True)


def test_external_text_is_not_markup():
    r = gpu_report("[bold red]evil[/] GPU")
    assert "[bold red]evil[/] GPU" in screen(r)


def test_narrow_terminal_wraps_without_losing_the_fix():
    out = screen(gpu_report(), width=40)
    assert "nvidia-smi -q -d" in out and max(len(ln) for ln in out.splitlines()) <= 40


def test_summary_line_in_chinese():
    buf = io.StringIO()
    render_report(gpu_report(), Console(file=buf, width=100, color_system=None), lang="zh")
    assert buf.getvalue().strip().splitlines()[-1] == "1 项警告，1 项正常"


def test_fix_is_never_folded_and_detail_still_wraps():
    r = gpu_report()
    long_fix = "python -m pip install --index-url https://download.pytorch.org/whl/cu130 torch==2.13.0+cu130 torchvision torchaudio"
    r.findings[1].fix = long_fix
    r.findings[1].detail = "HW slowdown active on GPU 0 NVIDIA H200 " * 4
    for width in (40, 60, 200):
        out = screen(r, width=width)
        assert f"    fix: {long_fix}" in out.splitlines(), out
        detail = [ln for ln in out.splitlines() if "slowdown" in ln]
        assert detail and max(len(ln) for ln in detail) <= width


def test_non_terminal_screen_has_no_trailing_spaces():
    out = screen(gpu_report(), width=60, verbose=True)
    assert out.splitlines() and all(ln == ln.rstrip() for ln in out.splitlines())


def test_screen_in_chinese_uses_the_locale_words():
    buf = io.StringIO()
    render_report(gpu_report(), Console(file=buf, width=100, color_system=None), lang="zh", verbose=True)
    out = buf.getvalue()
    for english in ("runtime", "driver", "fix:", "kernels", "result", "probes", "available"):
        assert english not in out, english
    assert "运行时" in out and "驱动" in out and "修复：" in out and "速率" in out
