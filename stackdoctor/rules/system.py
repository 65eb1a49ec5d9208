"""Rules about the operating system: the C library (a container given no GPU is the kind's own finding:
``accelerators/nvidia/rules.py``'s container-no-gpu)."""

from __future__ import annotations

import re
from typing import Any

from stackdoctor import matrix as mx
from stackdoctor.core.versions import release as vt
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import release, variant_row

GROUP = "platform"  # the group its rules had when this module was rules/platform.py: `stackdoctor platform`, `explain` and `--list-checks` name it

@rule("glibc-too-old", severity="fail", layer="platform")
def glibc_too_old(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if f.facts.platform.system not in (None, "Linux") or f.facts.platform.libc not in (None, "glibc") or not f.facts.platform.glibc_version:
        return
    err = t.import_error or ""
    sym = re.search(r"GLIBC_(\d+\.\d+)", err)
    need: tuple[int, ...] | None = vt(sym.group(1)) if sym else None
    what = t.version or ""
    if need is None and ctx.matrix is not None:
        need, what = _glibc_floor(ctx, what)
    if not need or vt(f.facts.platform.glibc_version) >= tuple(need):
        return
    ctx.add(
        severity="fail" if (bool(sym) or t.installed) else "warn",
        detail="import" if sym else ("installed" if t.installed else "default"),
        facts=["platform.glibc_version", "torch.version"],
        glibc=f.facts.platform.glibc_version,
        need=".".join(str(x) for x in need),
        torch=what or "-",
        error=sym.group(0) if sym else "",
        os=f.facts.platform.os_name or f.facts.platform.os_id or "Linux",
    )


def _glibc_floor(ctx: Ctx, what: str) -> tuple[tuple[int, ...] | None, str]:
    """The glibc the installed torch's wheels need on this architecture (or, with no torch, the newest release's
    CPU build), from the matrix's platform tags; and the torch release that needs it."""
    t = ctx.view.facts.torch
    v = variant_row(ctx) if t.installed else None
    published = [r for r in ctx.matrix.releases if r.variants]
    rel = release(ctx, t.version) if t.installed else (published[0] if published else None)
    if rel is not None and not t.installed:
        what = str(rel.version)
        v = rel.variant("cpu") or (rel.variants[0] if rel.variants else None)
    return _floor_of(ctx, rel, v), what


def _floor_of(ctx: Ctx, rel: Any, v: Any) -> tuple[int, ...] | None:
    """The lowest glibc the Linux wheels of variant ``v`` (of release ``rel``) for this architecture need."""
    f, t = ctx.view, ctx.view.facts.torch
    arch = (f.facts.platform.machine or "x86_64").lower().replace("amd64", "x86_64").replace("arm64", "aarch64")
    tags = list(getattr(v, "platforms", ()) or ())
    if rel is not None and not t.installed and not any(mx.parse_platform(x)[:2] == ("linux", arch) for x in tags):
        tags = [x for w in rel.variants for x in w.platforms]  # its CPU build is not for Linux here: any build that is
    floors = []
    for tag in tags:
        os_, tarch, floor = mx.parse_platform(tag)
        if os_ == "linux" and tarch == arch:
            floors.append(floor or vt(getattr(rel, "manylinux_glibc", None) or "") or None)
    present = [x for x in floors if x]
    return tuple(min(present)) if present else None
