"""The ``check`` screen: the stack as layers, the findings with their fixes, one summary line.

Renderers only draw: everything shown comes from the report. External text (tool output,
device names) is wrapped in :class:`rich.text.Text`, never parsed as markup.
"""

from __future__ import annotations

from contextvars import ContextVar

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from stackdoctor.console import UNICODE_MARKS, marks
from stackdoctor.facts import Facts
from stackdoctor.report import Finding, Report

MARKS = UNICODE_MARKS
_MARKS: ContextVar[dict] = ContextVar("marks", default=MARKS)  # the console's glyphs while render_report draws
ORDER = {"fail": 2, "warn": 1, "ok": 0}


def _worst(findings: list[Finding], layer: str) -> str | None:
    sev = None
    for f in findings:
        if f.layer == layer and (sev is None or ORDER.get(f.severity, 0) > ORDER.get(sev, 0)):
            sev = f.severity
    return sev


def _label(title: str, value: str, sev: str | None, note: str = "") -> Text:
    mk = _MARKS.get()
    mark, style = mk.get(sev, mk[None])
    t = Text()
    t.append(f"{mark} ", style=f"bold {style}")
    t.append(f"{title:<9}", style="bold")
    t.append(value)
    if note:
        t.append(f"  {note}", style="dim")
    return t


def runtime_line(f: Facts) -> str:
    t = f.torch
    if not t.installed or t.version is None:
        return "unknown (no torch)"
    if t.cuda:
        parts = [f"CUDA {t.cuda} (bundled in the wheel)"]
        if t.cudnn_version:
            parts.append(f"cuDNN {t.cudnn_version}")
        if t.nccl_version:
            parts.append(f"NCCL {t.nccl_version}")
        avail = "available" if t.cuda_available else "NOT available"
        return ", ".join(parts) + f"; {avail}"
    if t.hip:
        return f"ROCm/HIP {t.hip}; " + ("available" if t.cuda_available else "NOT available")
    if t.mps_available:
        return "MPS (Apple GPU)"
    if t.xpu_available:
        return "XPU (Intel GPU)"
    return "CPU only"


def driver_line(f: Facts) -> str | None:
    n = f.nvidia
    if n.driver_version or n.kernel_module_version:
        ver = n.driver_version or n.kernel_module_version
        ceiling = f", supports CUDA <= {n.cuda_driver_version}" if n.cuda_driver_version else ""
        return f"NVIDIA {ver}{ceiling}"
    if n.smi_state and n.smi_state not in ("absent", "ok"):
        return f"NVIDIA: {n.smi_message or n.smi_state}"
    if f.rocm.version or f.rocm.gpus:
        return f"ROCm {f.rocm.version or '(version unknown)'}" + ("" if f.rocm.amdgpu_loaded in (None, True) else " (amdgpu not loaded)")
    if f.apple.is_macos:
        return f"macOS {f.apple.macos_version or '?'} (Metal)"
    return None


def build_tree(report: Report) -> Tree:
    f, fs = report.facts, report.findings
    py = f.python
    pyv = f"Python {py.version or '?'}"
    if py.free_threaded:
        pyv += " (free-threaded)"
    pyv += f"  {py.executable or ''}"
    root = Tree(_label("python", pyv, _worst(fs, "python"), py.env_kind or ""), guide_style="dim")
    t = f.torch
    if t.installed and t.version:
        extras = [f"torchvision {t.torchvision_version}" if t.torchvision_version else "", f"torchaudio {t.torchaudio_version}" if t.torchaudio_version else ""]
        tv = f"torch {t.version}  [{t.variant}]"
        node = root.add(_label("torch", tv, _worst(fs, "torch"), " ".join(e for e in extras if e)))
    elif t.import_error:
        node = root.add(_label("torch", f"cannot be imported: {t.import_error}", _worst(fs, "torch") or "fail"))
    else:
        node = root.add(_label("torch", "not installed", _worst(fs, "torch") or "warn"))
    node = node.add(_label("runtime", runtime_line(f), _worst(fs, "runtime")))
    drv = driver_line(f)
    if drv:
        node = node.add(_label("driver", drv, _worst(fs, "driver")))
    gpu_sev = _worst(fs, "gpu")
    for g in f.nvidia.gpus:
        cc = f"sm_{g.compute_capability.replace('.', '')}" if g.compute_capability else "sm_?"
        mem = f", {g.memory_total_mib // 1024} GiB" if g.memory_total_mib else ""
        node.add(_label("gpu", f"{g.index}: {g.name or '?'} ({cc}{mem})", gpu_sev))
    for g in f.rocm.gpus:
        node.add(_label("gpu", f"{g.index}: {g.name or '?'} ({g.gfx or '?'}{', integrated' if g.integrated else ''})", gpu_sev))
    if f.apple.is_macos and f.apple.chip:
        node.add(_label("gpu", f.apple.chip, gpu_sev))
    for g in f.intel.gpus:
        node.add(_label("gpu", f"Intel {g.name or g.device_id} ({g.driver or 'no driver'})", gpu_sev))
    if not (f.nvidia.gpus or f.rocm.gpus or f.intel.gpus or (f.apple.is_macos and f.apple.chip)):
        node.add(_label("gpu", "none found", gpu_sev))
    return root


def kernels_table(report: Report) -> Table | None:
    k = report.facts.kernels
    if not k.results:
        return None
    with_peak = any(r.percent_of_peak is not None for r in k.results)
    table = Table(title="kernels", title_justify="left", show_edge=False, pad_edge=False)
    cols = [("kernel", "left"), ("device", "left"), ("dtype", "left"), ("result", "left"), ("TFLOP/s", "right")]
    if with_peak:
        cols.append(("% peak", "right"))
    for col, just in cols:
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    for r in k.results:
        row: list[str | Text] = [
            r.kernel,
            r.device,
            r.dtype or "",
            Text("ok", style="green") if r.ok else Text(r.error or "wrong", style="red"),
            _flops(r.tflops),
        ]
        if with_peak:
            row.append(f"{r.percent_of_peak:.0f}%" if r.percent_of_peak is not None else "")
        table.add_row(*row)
    return table


def _flops(tflops: float | None) -> str:
    """TFLOP/s with three significant digits (a CPU conv is 0.00123, an H200 bf16 matmul 700)."""
    if tflops is None:
        return ""
    return f"{tflops:.3g}" if tflops < 1000 else f"{tflops:.0f}"


def findings_view(report: Report, verbose: bool) -> RenderableType:
    rows: list[RenderableType] = []
    problems = [f for f in report.findings if f.severity != "ok"]
    problems.sort(key=lambda f: -ORDER.get(f.severity, 0))
    for f in problems:
        mark, style = _MARKS.get()[f.severity]
        head = Text()
        head.append(f"{mark} ", style=f"bold {style}")
        head.append(f"{f.code}", style=f"bold {style}")
        head.append(f"  {f.title}")
        rows.append(head)
        if f.detail:
            rows.append(Padding(Text(f.detail), (0, 0, 0, 4)))
        if f.fix:
            fix = Text("fix: ", style="bold")
            fix.append(f.fix, style="cyan")
            rows.append(Padding(fix, (0, 0, 0, 4)))
    if verbose:
        for f in report.findings:
            if f.severity == "ok":
                rows.append(Text(f"{_MARKS.get()['ok'][0]} {f.code}  {f.title}", style="green"))
    return Group(*rows)


def summary_line(report: Report, lang: str = "en") -> Text:
    from stackdoctor.catalog import ui

    c = report.counts
    parts = []
    if c.get("fail"):
        parts.append((ui("summary_failed", lang, n=c["fail"]), "bold red"))
    if c.get("warn"):
        parts.append((ui("summary_warning" if c["warn"] == 1 else "summary_warnings", lang, n=c["warn"]), "bold yellow"))
    parts.append((ui("summary_ok", lang, n=c.get("ok", 0)), "green"))
    t = Text()
    sep = ui("summary_sep", lang)
    for i, (s, style) in enumerate(parts):
        if i:
            t.append(sep)
        t.append(s, style=style)
    return t


def probes_table(report: Report) -> Table:
    table = Table(title="probes", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("probe", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("source / error")
    for p in report.probes:
        style = {"ok": "green", "skipped": "dim"}.get(p.status, "red")
        sub = getattr(report.facts, p.name, None) if p.name != "target" else report.facts.python
        sources = ", ".join(sorted(set(getattr(sub, "sources", {}).values())))[:200] if sub is not None else ""
        table.add_row(p.name, Text(p.status, style=style), f"{p.duration_s:.2f}s", Text(p.error or sources))
    return table


def render_report(report: Report, console: Console, *, verbose: bool = False, lang: str = "en") -> None:
    token = _MARKS.set(marks(console))  # ASCII stand-ins where the console's encoding has no glyph
    try:
        _render_report(report, console, verbose=verbose, lang=lang)
    finally:
        _MARKS.reset(token)


def _render_report(report: Report, console: Console, *, verbose: bool, lang: str) -> None:
    if report.replayed_from:
        when = f" (created {report.created_at})" if report.created_at else ""
        console.print(Text(f"replay of {report.replayed_from}{when}", style="dim"))
    console.print(build_tree(report))
    kt = kernels_table(report)
    if kt is not None:
        console.print()
        console.print(kt)
    if verbose:
        console.print()
        console.print(probes_table(report))
    if any(f.severity != "ok" for f in report.findings) or verbose:
        console.print()
        console.print(findings_view(report, verbose))
    console.print()
    console.print(summary_line(report, lang))
