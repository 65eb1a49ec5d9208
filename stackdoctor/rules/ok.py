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


def layer_ok(ctx: Ctx, layer: str, checked: bool, key: str = "default", **values: Any) -> None:
    if checked and layer not in _bad_layers(ctx):
        ctx.add(severity="ok", detail=key, fix=None, **values)


@rule("platform-ok", severity="ok", layer="platform", summary=True)
def platform_ok(ctx: Ctx) -> None:
    p = ctx.view.facts.platform
    layer_ok(ctx, "platform", bool(p.system), os=p.os_name or p.system or "?", machine=p.machine or "?")


@rule("driver-ok", severity="ok", layer="driver", summary=True)
def driver_ok(ctx: Ctx) -> None:
    what = next((w for w in (a.ok_driver(ctx.view) for a in kinds.ALL) if w), None)  # the first kind's driver that is there
    layer_ok(ctx, "driver", what is not None, driver=what)


def _gpu_names(ctx: Ctx) -> list[str]:
    f = ctx.view
    names: list[str] = []
    for g in f.gpus:
        kind = kinds.by_vendor(g.vendor)
        name = kind.ok_name(g) if kind is not None and g.witnesses != [W_PCI] else None  # each kind names its own
        if name:
            names.append(name)
    for a in kinds.ALL:  # no GPU listed: a kind's integrated device (a Mac's chip, a Jetson)
        names = names or a.ok_unlisted(f.facts)
    return names


@rule("gpu-ok", severity="ok", layer="gpu", summary=True)
def gpu_ok(ctx: Ctx) -> None:
    names = _gpu_names(ctx)
    layer_ok(ctx, "gpu", bool(names), gpus=", ".join(names) or "-")


@rule("python-ok", severity="ok", layer="python", summary=True)
def python_ok(ctx: Ctx) -> None:
    f = ctx.view
    layer_ok(ctx, "python", bool(f.facts.python.version), python=f.facts.python.version or "?", executable=python_exe(f))


@rule("torch-ok", severity="ok", layer="torch", summary=True)
def torch_ok(ctx: Ctx) -> None:
    t = ctx.view.facts.torch
    key = "files" if read_only(t) else "default"  # read from its files, not imported: says so
    layer_ok(ctx, "torch", imports(t) or (read_only(t) and bool(t.version and t.location)), key, torch=t.version or "?", variant=variant_name(ctx.view) or "-")


@rule("runtime-ok", severity="ok", layer="runtime", summary=True)
def runtime_ok(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if not imports(t):
        return
    acc = kinds.select(f.facts)
    said = next((r for r in (a.ok_runtime(t) for a in kinds.ALL) if r), None)  # torch runs a kind's build on its device
    if said is not None:
        layer_ok(ctx, "runtime", True, "gpu", backend=said[0], count=said[1])
    elif built_for(f) == kinds.CPU and (acc is None or acc.build_kind == kinds.CPU):
        layer_ok(ctx, "runtime", True, "cpu")


@rule("runtime-not-verified", severity="ok", layer="runtime", summary=True)
def runtime_not_verified(ctx: Ctx) -> None:
    """torch read from its files only (``check --no-kernels``): what only its running runtime proves is said to be not
    verified, with the command that verifies it (issue 42: unverified is a verdict, never a silent ok)."""
    t = ctx.view.facts.torch
    if read_only(t) and kinds.build_kind(t) != kinds.CPU:  # a GPU build: its device runtime is unproven
        ctx.add(severity="ok", fix=None, facts=["torch.imported"], torch=t.version or "?")


@rule("network-ok", severity="ok", layer="network", summary=True)
def network_ok(ctx: Ctx) -> None:
    tb = ctx.view.facts.thunderbolt
    layer_ok(ctx, "network", tb.present and bool(tb.ports or tb.interfaces), ports=len(tb.ports), interfaces=len(tb.interfaces))
