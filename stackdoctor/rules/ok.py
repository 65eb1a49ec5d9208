"""The ``<layer>-ok`` findings: one per layer that was checked and has no problem (they run last)."""

from __future__ import annotations

from typing import Any

from stackdoctor import kinds
from stackdoctor.model.view import W_PCI
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import (
    built_for,
    imports,
    python_exe,
    read_only,
    variant_name,
)


def _bad_layers(ctx: Ctx) -> set[str]:
    bad = {f.layer or "" for f in ctx.out if f.severity in ("warn", "fail")}
    if any(f.code in ("probe-failed", "probe-timeout") and "probes.target" in f.facts for f in ctx.out):
        bad |= {"python", "torch", "runtime"}
    if any(f.code in ("probe-timeout",) and "torch.import_error" in f.facts for f in ctx.out):
        bad |= {"torch", "runtime"}
    return bad


def _ok(ctx: Ctx, layer: str, checked: bool, key: str = "default", **values: Any) -> None:
    if checked and layer not in _bad_layers(ctx):
        ctx.add(severity="ok", detail=key, fix=None, **values)


@rule("platform-ok", severity="ok", layer="platform", summary=True)
def platform_ok(ctx: Ctx) -> None:
    p = ctx.view.facts.platform
    _ok(ctx, "platform", bool(p.system), os=p.os_name or p.system or "?", machine=p.machine or "?")


@rule("driver-ok", severity="ok", layer="driver", summary=True)
def driver_ok(ctx: Ctx) -> None:
    f = ctx.view
    drv = f.driver("nvidia").value
    what = f"NVIDIA {drv} (CUDA {f.runtime('nvidia').value or '?'})" if drv else "amdgpu"
    _ok(ctx, "driver", bool(drv or f.facts.rocm.amdgpu_loaded), driver=what)


def _gpu_names(ctx: Ctx) -> list[str]:
    f = ctx.view
    names: list[str] = []
    for g in f.gpus:
        kind = kinds.by_vendor(g.vendor)
        name = kind.ok_name(g) if kind is not None and g.witnesses != [W_PCI] else None  # each kind names its own
        if name:
            names.append(name)
    if not names and f.facts.apple.chip:
        names = [f.facts.apple.chip]
    if not names and f.facts.jetson.is_jetson:
        names = [f.facts.jetson.model or "Jetson"]
    return names


@rule("gpu-ok", severity="ok", layer="gpu", summary=True)
def gpu_ok(ctx: Ctx) -> None:
    names = _gpu_names(ctx)
    _ok(ctx, "gpu", bool(names), gpus=", ".join(names) or "-")


@rule("python-ok", severity="ok", layer="python", summary=True)
def python_ok(ctx: Ctx) -> None:
    f = ctx.view
    _ok(ctx, "python", bool(f.facts.python.version), python=f.facts.python.version or "?", executable=python_exe(f))


@rule("torch-ok", severity="ok", layer="torch", summary=True)
def torch_ok(ctx: Ctx) -> None:
    t = ctx.view.facts.torch
    key = "files" if read_only(t) else "default"  # read from its files, not imported: says so
    _ok(ctx, "torch", imports(t) or (read_only(t) and bool(t.version and t.location)), key, torch=t.version or "?", variant=variant_name(ctx.view) or "-")


@rule("runtime-ok", severity="ok", layer="runtime", summary=True)
def runtime_ok(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if not imports(t):
        return
    acc = kinds.select(f.facts)
    if t.cuda_available:
        _ok(ctx, "runtime", True, "gpu", backend="ROCm/HIP" if t.hip else "CUDA", count=t.device_count if t.device_count is not None else "?")
    elif t.mps_available:
        _ok(ctx, "runtime", True, "gpu", backend="MPS", count=1)
    elif t.xpu_available:
        intel = kinds.by_name("intel")
        _ok(ctx, "runtime", True, "gpu", backend="XPU", count=(intel.torch_count(t) if intel is not None else None) or "?")
    elif built_for(f) == kinds.CPU and (acc is None or acc.build_kind == kinds.CPU):
        _ok(ctx, "runtime", True, "cpu")


@rule("runtime-not-verified", severity="ok", layer="runtime", summary=True)
def runtime_not_verified(ctx: Ctx) -> None:
    """torch read from its files only (``check --no-kernels``): what only its running runtime proves is said to be not
    verified, with the command that verifies it (issue 42: unverified is a verdict, never a silent ok)."""
    t = ctx.view.facts.torch
    if read_only(t) and kinds.build_kind(t) != kinds.CPU:  # a GPU build: its device runtime is unproven
        ctx.add(severity="ok", fix=None, facts=["torch.imported"], torch=t.version or "?")


@rule("toolkit-ok", severity="ok", layer="toolkit", summary=True)
def toolkit_ok(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    checked = built_for(f) == "cuda" and bool(t.cuda) and bool(f.facts.cuda_toolkit.nvcc_version)
    _ok(ctx, "toolkit", checked, nvcc=f.facts.cuda_toolkit.nvcc_version or "?", cuda=t.cuda or "?")


@rule("network-ok", severity="ok", layer="network", summary=True)
def network_ok(ctx: Ctx) -> None:
    tb = ctx.view.facts.thunderbolt
    _ok(ctx, "network", tb.present and bool(tb.ports or tb.interfaces), ports=len(tb.ports), interfaces=len(tb.interfaces))
