"""Rules over the project's requirements (``[tool.stackdoctor]``): one finding per unmet requirement."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from stackdoctor import kinds
from stackdoctor.core.versions import public
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import install_fix


def _spec_ok(spec: str, version: str | None) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return bool(version) and SpecifierSet(spec, prereleases=True).contains(Version(version or ""), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _busbw_values(obj: Any) -> list[float]:
    """Every number under a key containing ``busbw`` (GB/s), anywhere in ``obj``."""
    out: list[float] = []
    if isinstance(obj, dict):
        for key, v in obj.items():
            if "busbw" in str(key).lower() and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))
            else:
                out.extend(_busbw_values(v))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_busbw_values(v))
    return out


def best_busbw(ctx: Ctx) -> float | None:
    """The best allreduce bus bandwidth measured (GB/s), or None when allreduce did not run."""
    k = ctx.view.facts.kernels
    vals = _busbw_values(k.allreduce or {})
    for r in k.results:
        if r.kernel == "allreduce":
            vals.extend(_busbw_values(r.extra))
    return max(vals) if vals else None


@dataclass
class _Unmet:
    key: str  # the detail / fix template
    facts: list[str]
    fix_text: str | None
    values: dict[str, Any]


class _Check:
    """What each requirement found, for one report: the unmet ones (findings) and the met ones (requirements-ok)."""

    def __init__(self, ctx: Ctx) -> None:
        self.ctx = ctx
        self.reqs = ctx.requirements
        self.source = getattr(self.reqs, "source", None) or "the project requirements"
        self.met: list[str] = []
        self.failed: list[_Unmet] = []

    def unmet(self, key: str, facts: list[str], fix_text: str | None = None, **values: Any) -> None:
        self.failed.append(_Unmet(key, facts, fix_text, values))


def _backend(chk: _Check, backend: str) -> None:
    ctx = chk.ctx
    f, t = ctx.view, ctx.view.facts.torch
    if backend == "cpu":  # vendor branch: the CPU is no accelerator kind, so no kind answers for it
        chk.met.append("backend cpu")
        return
    acc = kinds.for_backend(backend)
    assert acc is not None
    if not t.installed or t.import_error:
        chk.unmet("backend_no_torch", ["torch.installed", "torch.import_error"], "stackdoctor install", backend=backend, error=t.import_error or "-")
        return
    kind = kinds.build_kind(t)
    built = kind == acc.build_kind and acc.backend_built(t)
    if built and t.imported is False:  # read from its files only: whether torch can use the device is unknown
        chk.unmet("not_imported", ["torch.imported"], "stackdoctor check --import-torch", what=f"backend {backend}", torch=t.version)
        return
    if not built:
        build = _installed_build(t, kind)
        version_facts = list(dict.fromkeys(x for a in kinds.ALL if (x := a.build_version_fact())))  # torch.<its build's version>
        if acc.usable(f.facts):  # the install that meets it: a build for that backend, as the resolver plans it
            chk.unmet("backend_build", ["torch.variant", *version_facts], install_fix(ctx, exclude="cpu"), backend=backend,
                      torch=t.version, build=build)
        else:  # no build gives this machine the device: the build that meets it, for the machine that has one
            variant = _backend_variant(ctx, acc)
            chk.unmet("backend_build_nodevice", ["torch.variant", *version_facts, "reconciled.gpus"],
                      None if variant else "stackdoctor install", backend=backend, torch=t.version, build=build, variant=variant or "-")
        return
    if acc.torch_available(t):
        chk.met.append(f"backend {backend}")
        return
    chk.unmet(
        "backend_unavailable",
        [acc.torch_fact()],
        backend=backend,
        torch=t.version,
        api=acc.torch_api,
        error=acc.torch_error(t) or "-",
    )


def _installed_build(t: Any, kind: str | None) -> str:
    """The installed torch's build in a sentence ("CUDA 12.4", "CPU-only"), as the kind of its build writes it."""
    if kind == kinds.CPU:
        return "CPU-only"
    return next((w for a in kinds.ALL if a.build_kind == kind and (w := a.installed_build(t))), None) or "unknown"


def _backend_variant(ctx: Ctx, acc: Any) -> str | None:
    """The newest build for ``acc`` of the installed torch's release (else of the newest release) in the matrix."""
    from stackdoctor.core.versions import public as _public

    if ctx.matrix is None:
        return None
    rel = ctx.matrix.release(_public(ctx.view.facts.torch.version)) if ctx.view.facts.torch.version else None
    for r in ([rel] if rel else []) + list(ctx.matrix.releases):  # newest first
        names: list[str] = [str(v.name) for v in r.variants if acc.serves(v.name)]
        if names:
            return max(names, key=lambda n: [int(x) for x in re.findall(r"\d+", n)] or [0])
    return None


def _usable_gpus(ctx: Ctx, backend: str | None) -> int:
    """The devices torch can use: the project's backend's kind's count (``Accelerator.torch_count``), else the first
    kind's, in priority order, that torch can use."""
    t = ctx.view.facts.torch
    if not t.installed:
        return 0
    wanted = [a for a in kinds.ALL if backend is None or a.backend == backend]
    return next((n for a in wanted if (n := a.torch_count(t)) is not None), 0)


def _kernel(chk: _Check, kernel: str) -> None:
    k = chk.ctx.view.facts.kernels
    results = [r for r in k.results if r.kernel == kernel]
    if kernel == "allreduce" and not results and isinstance(k.allreduce, dict) and k.allreduce:
        if k.allreduce.get("ok") is True:
            chk.met.append("allreduce passed")
        else:
            chk.unmet("kernel_failed", ["kernels.allreduce"], f"stackdoctor kernels {kernel}", kernel=kernel, where="-", error=str(k.allreduce.get("error") or "-"))
        return
    if not results:
        key = "kernel_missing" if k.ran else "kernel_not_run_why" if k.error else "kernel_not_run"
        chk.unmet(key, ["kernels.results"], f"stackdoctor kernels {kernel}", kernel=kernel, error=k.error)  # no "(-)" when no reason is known
        return
    bad = [r for r in results if not r.ok]
    if bad:
        r = bad[0]
        where = r.device + (f" ({r.dtype})" if r.dtype else "")
        chk.unmet("kernel_failed", ["kernels.results"], f"stackdoctor kernels {kernel}", kernel=kernel, where=where, error=r.error or "-")
        return
    chk.met.append(f"{kernel} passed on {', '.join(sorted({r.device for r in results}))}")


def assess(ctx: Ctx) -> _Check | None:
    """Every requirement of the project checked against the facts (pure); None without requirements."""
    reqs = ctx.requirements
    if reqs is None or reqs.empty:
        return None
    chk = _Check(ctx)
    if reqs.torch:
        _torch_req(chk, reqs.torch)
    if reqs.backend:
        _backend(chk, reqs.backend)
    if reqs.min_gpus is not None and reqs.min_gpus > 0:
        _gpus_req(chk, reqs.min_gpus, reqs.backend)
    if reqs.compute_capability:
        _cc_req(chk, reqs.compute_capability)
    for kernel in reqs.kernels:
        _kernel(chk, kernel)
    if reqs.min_busbw is not None:
        _busbw_req(chk, reqs.min_busbw)
    return chk


def _torch_req(chk: _Check, spec: str) -> None:
    t = chk.ctx.view.facts.torch
    fix = f'stackdoctor install --torch "{spec}"'
    if not t.installed or not t.version:
        chk.unmet("torch_missing", ["torch.installed"], fix, spec=spec)
    elif _spec_ok(spec, public(t.version)):
        chk.met.append(f"torch {t.version} ({spec})")
    else:
        chk.unmet("torch_version", ["torch.version"], fix, spec=spec, torch=t.version)


def _gpus_req(chk: _Check, min_gpus: int, backend: str | None) -> None:
    ctx = chk.ctx
    f, t = ctx.view, ctx.view.facts.torch
    if t.installed and t.imported is False and not t.import_error:
        chk.unmet("not_imported", ["torch.imported"], "stackdoctor check --import-torch", what=f"at least {min_gpus} GPU(s)", torch=t.version)
        return
    n = _usable_gpus(ctx, backend)
    listed = len([g for g in f.gpus if not g.integrated])  # (Apple's GPU is integrated)
    if n >= min_gpus:
        chk.met.append(f"{n} GPU(s) (min {min_gpus})")
    elif listed < min_gpus:  # fewer GPUs in the machine than asked: no command here gives more (nor a re-run of check)
        chk.unmet("gpus", ["torch.device_count", "reconciled.gpus"], fix_key="gpus_machine", min=min_gpus, n=n, listed=listed)
    else:
        chk.unmet("gpus", ["torch.device_count", "reconciled.gpus"], min=min_gpus, n=n, listed=listed)


def _cc_req(chk: _Check, spec: str) -> None:
    caps = [(f"GPU {g.index} {g.name or ''}".strip(), g.compute_capability) for a in kinds.ALL for g in a.compute_capable(chk.ctx.view) if g.compute_capability]
    caps = [(lbl, c) for lbl, c in caps if c and re.fullmatch(r"\d+\.\d+", c)]
    if not caps:
        chk.unmet("cc_none", ["reconciled.gpus"], spec=spec)
        return
    bad = [(lbl, c) for lbl, c in caps if not _spec_ok(spec, c)]
    if bad:
        chk.unmet("cc_bad", ["reconciled.gpus"], spec=spec, gpus=", ".join(f"{lbl} ({c})" for lbl, c in bad))
    else:
        chk.met.append(f"compute capability {', '.join(sorted({c for _, c in caps}))} ({spec})")


def _busbw_req(chk: _Check, gate: float) -> None:
    bw = best_busbw(chk.ctx)
    if bw is None:
        chk.unmet("busbw_missing", ["kernels.allreduce"], f"stackdoctor kernels allreduce --min-busbw {gate:g}", gate=f"{gate:g}")
    elif bw < gate:
        chk.unmet("busbw_low", ["kernels.allreduce"], gate=f"{gate:g}", busbw=f"{bw:.3g}")
    else:
        chk.met.append(f"allreduce busbw {bw:.3g} GB/s")


@rule("requirement-unmet", severity="fail", layer="requirements", defers_to=("allreduce-slow",))
def requirement_unmet(ctx: Ctx) -> None:
    chk = assess(ctx)
    for u in chk.failed if chk else []:
        if u.key == "busbw_low" and ctx.has("allreduce-slow"):  # said once, by allreduce-slow (with the backend's own fix)
            continue
        values = {k: v for k, v in u.values.items() if k != "fix_key"}
        fix = None if u.fix_text else u.values.get("fix_key", u.key)
        ctx.add(detail=u.key, fix=fix, fix_text=u.fix_text, facts=u.facts, source=chk.source, **values)  # type: ignore[union-attr]


@rule("requirements-ok", severity="ok", layer="requirements")
def requirements_ok(ctx: Ctx) -> None:
    chk = assess(ctx)
    if chk is not None and not chk.failed and chk.met:
        ctx.add(severity="ok", fix=None, source=chk.source, met="; ".join(chk.met))
