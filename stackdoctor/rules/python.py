"""Rules about the target Python: a version torch has no wheels for (the deprecated pynvml shim is NVIDIA's own
finding: ``accelerators/nvidia/rules.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from stackdoctor.core.versions import mm
from stackdoctor.core.versions import release as vt
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import release, variant_row


def _py_tag(ctx: Ctx) -> str | None:
    p = ctx.view.facts.python
    m = mm(p.version)
    return m + ("t" if p.free_threaded else "") if m else None


def _suggest_python(pythons: Sequence[str]) -> str:
    plain = sorted((p for p in pythons if not p.endswith("t")), key=vt)
    # the newest regular Python that is not the newest one (wider ecosystem support), else the newest
    return (plain[-2] if len(plain) >= 2 else plain[-1]) if plain else "3.12"


@rule("python-unsupported", severity="fail", layer="python")
def python_unsupported(ctx: Ctx) -> None:
    tag = _py_tag(ctx)
    if tag is None or ctx.matrix is None:
        return
    t = ctx.view.facts.torch
    if t.installed:
        v = variant_row(ctx)
        rel = release(ctx, t.version)
        pythons = tuple(getattr(v, "pythons", ()) or ()) or tuple(getattr(rel, "pythons", ()) or ())
        if pythons and tag not in pythons:
            ctx.add(
                severity="warn" if t.import_error is None else "fail",
                detail="installed",
                facts=["python.version", "torch.version"],
                python=tag,
                torch=t.version,
                pythons=", ".join(pythons),
                suggested=_suggest_python(pythons),
            )
        return
    releases = [r for r in ctx.matrix.releases if r.pythons and r.variants]
    if releases and next((r for r in releases if tag in tuple(r.pythons or ())), None) is None:
        newest = releases[0]
        ctx.add(
            facts=["python.version"],
            python=tag,
            torch=str(newest.version),
            pythons=", ".join(newest.pythons),
            suggested=_suggest_python(tuple(newest.pythons)),
        )
