"""Rules over the kernel and collective results (``facts.kernels``): crashes, wrong numbers, slowness."""

from __future__ import annotations

from typing import Any

from stackdoctor import kinds
from stackdoctor.core.units import format_flops
from stackdoctor.model.facts import KernelResult
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for_files, python_exe

SLOW_FRACTION = 0.25  # kernel-slow below this fraction of the device's peak (largest size of a sweep)


def _label(r: KernelResult) -> str:
    return f"{r.kernel} {r.dtype or ''} on {r.device}".replace("  ", " ")


def _raised(r: KernelResult) -> bool:
    return bool(r.extra.get("exception") or r.extra.get("unavailable") or (r.max_error is None and not r.extra.get("nonfinite")))


def _tail(text: str | None) -> str:
    return ("\n" + text) if text else ""



GROUP = "kernels"  # the group its rules had when this module was rules/kernels.py: `stackdoctor kernels`, `explain` and `--list-checks` name it

@rule("kernel-failed", severity="fail", layer="kernels")
def kernel_failed(ctx: Ctx) -> None:
    k = ctx.view.facts.kernels
    if k.error:
        ctx.add(
            detail="process",
            fix="process",
            facts=["kernels.error", "kernels.signal", "kernels.stderr_tail"],
            error=k.error,
            signal=k.signal or "",
            stderr=_tail(k.stderr_tail),
        )
    for i, r in enumerate(k.results):
        if r.kernel != "allreduce" and not r.ok and _raised(r):
            ctx.add(detail="result", fix="result", facts=[f"kernels.results[{i}]"], label=_label(r), error=r.error or "-")


def _wrong_fix(ctx: Ctx, r: KernelResult) -> str:
    """Where to look when a device computes wrong numbers: the GPU's ECC counters with its vendor's tool, the
    CPU's BLAS build, else the generic advice."""
    device = (r.device or "").split(":")[0]
    if device == "cpu":  # vendor branch: the CPU is no accelerator kind; its BLAS build is what to look at
        return "result_cpu"
    built = built_for_files(ctx.view)
    on = [a for a in kinds.ALL if a.torch_api == device]  # the kinds whose torch module runs this device
    kind = next((a for a in on if a.targeted(built)), on[0] if on else None)  # the installed build's kind first
    return kind.wrong_result_fix() if kind is not None else "default"


@rule("kernel-wrong-result", severity="fail", layer="kernels")
def kernel_wrong_result(ctx: Ctx) -> None:
    k = ctx.view.facts.kernels
    for i, r in enumerate(k.results):
        if r.kernel != "allreduce" and not r.ok and not _raised(r):
            ctx.add(
                detail="result",
                fix=_wrong_fix(ctx, r),
                python=python_exe(ctx.view),
                facts=[f"kernels.results[{i}]"],
                label=_label(r),
                error=r.error or f"max relative error {r.max_error} > tolerance {r.tolerance}",
            )
    wrong = sum(int(r.extra.get("wrong") or 0) for r in k.results if r.kernel == "allreduce")
    if wrong:
        bad = [r.size for r in k.results if r.kernel == "allreduce" and r.extra.get("wrong")]
        ctx.add(
            detail="allreduce",
            fix="allreduce",
            facts=["kernels.results"],
            wrong=wrong,
            count=len(bad),
            sizes=", ".join(str(b) for b in bad[:8]),
        )


@rule("kernel-slow", severity="warn", layer="kernels")
def kernel_slow(ctx: Ctx) -> None:
    for i, r in enumerate(ctx.view.facts.kernels.results):
        if r.kernel != "matmul" or not r.ok or r.percent_of_peak is None or not r.extra.get("sweep_max"):
            continue
        if r.percent_of_peak < SLOW_FRACTION * 100:
            ctx.add(
                facts=[f"kernels.results[{i}]"],
                label=_label(r),
                percent=f"{r.percent_of_peak:.0f}",
                rate=format_flops(r.tflops),
                size=r.size or "?",
                peak=format_flops(r.peak_tflops),
                source=str(r.extra.get("peak_source") or "?"),
            )


def _ar(ctx: Ctx) -> dict[str, Any]:
    ar = ctx.view.facts.kernels.allreduce
    return ar if isinstance(ar, dict) else {}


@rule("allreduce-timeout", severity="fail", layer="network")
def allreduce_timeout(ctx: Ctx) -> None:
    ar = _ar(ctx)
    if ar.get("status") != "timeout":
        return
    names = ", ".join(str(m) for m in ar.get("missing_ranks") or []) or "?"
    iface = ar.get("iface")
    ctx.add(
        facts=["kernels.allreduce.missing_ranks"],
        ranks=names,
        error=str(ar.get("error") or ""),
        where=f"{ar.get('master_addr')}:{ar.get('master_port')}",
        world=ar.get("world_size"),
        over=f" over {iface}" if iface else "",
    )


@rule("allreduce-failed", severity="fail", layer="network")
def allreduce_failed(ctx: Ctx) -> None:
    ar = _ar(ctx)
    if ar.get("status") != "failed":
        return
    err = str(ar.get("error") or "")
    low = err.lower()
    iface = ar.get("iface")
    fix = "default"
    if "in use" in low or "address already" in low or "eaddrinuse" in low:
        fix = "port"
    elif kind_fix := next((k for k in (a.collective_error_fix(low) for a in kinds.ALL) if k), None):
        fix = kind_fix  # a kind's device the collective wanted and did not have
    elif "unable to find address for" in low or (iface and iface in err):
        fix = "iface"
    ctx.add(
        fix=fix,
        facts=["kernels.allreduce.error"],
        backend=ar.get("backend") or "?",
        error=err,
        stderr=_tail(ar.get("stderr_tail")),
        port=ar.get("master_port"),
        iface=iface or "",
    )


@rule("allreduce-slow", severity="fail", layer="network")
def allreduce_slow(ctx: Ctx) -> None:
    ar = _ar(ctx)
    gate = ctx.gates.min_busbw_gbs
    if gate is None and ctx.requirements is not None:
        gate = getattr(ctx.requirements, "min_busbw", None)
    if ar.get("status") != "ok" or gate is None:
        return
    best = ar.get("max_busbw_gbs")
    if best is not None and best >= gate:
        return
    iface = ar.get("iface")
    ctx.add(
        facts=["kernels.allreduce.max_busbw_gbs"],
        best=f"{best or 0:.2f}",
        gate=f"{gate:g}",
        backend=ar.get("backend") or "?",
        ranks=ar.get("world_size"),
        iface=f", interface {iface}" if iface else "",
        link=f"; link {ar.get('link_rate_gbps')} Gb/s" if ar.get("link_rate_gbps") else "",
    )
