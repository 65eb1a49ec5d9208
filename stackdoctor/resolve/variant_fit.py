"""Whether one variant of a release fits the target (platform, Python, driver, every GPU), with the reason when it does not."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from packaging.version import Version

from stackdoctor import kinds
from stackdoctor.core.versions import major_minor
from stackdoctor.core.versions import release as release_tuple
from stackdoctor.kinds.base import Unfit, device_summary
from stackdoctor.matrix import (
    OS_WORDS,
    Matrix,
    Release,
    Variant,
    parse_platform,
    platform_words,
)
from stackdoctor.model.plan import Rejected, Request
from stackdoctor.resolve.machine import Gpu, Target, norm_arch

# ---------------------------------------------------------------------------- fitting


@dataclass
class Fit:
    release: Release
    version: Version
    variant: Variant
    warnings: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)


Reject = Unfit  # a variant that does not fit: its reason (raised by the kinds' fit too)


def platform_tag_for(release: Release, variant: Variant, t: Target) -> str:
    """The variant's platform tag that fits the target; raises Reject saying why none does."""
    blocked: list[str] = []
    for tag in variant.platforms:
        os_, arch, floor = parse_platform(tag)
        if os_ != t.os or norm_arch(os_, arch) != t.arch:
            continue
        if os_ == "linux":
            if t.musl:
                blocked.append(f"{variant.name} has glibc (manylinux) wheels only; this system uses musl")
                continue
            need = floor or major_minor(release.manylinux_glibc)
            if need and t.glibc and t.glibc < need:
                blocked.append(f"{variant.name} wheels need glibc >= {need[0]}.{need[1]}; this system has {t.glibc[0]}.{t.glibc[1]}")
                continue
        if os_ == "macos":
            need = floor
            if need and t.macos and t.macos < need:
                blocked.append(f"{variant.name} wheels need macOS >= {need[0]}.{need[1]}; this Mac runs {t.macos[0]}.{t.macos[1]}")
                continue
        return tag
    if blocked:
        raise Reject(blocked[0], platform_blocked=True)
    where = {"linux": f"Linux {t.arch}", "windows": f"Windows {t.arch}", "macos": f"macOS {t.arch}"}.get(t.os, t.tag)
    if release.build_state(variant.name, t.os, t.arch) == "unknown":
        raise Reject(build_unknown(variant.name, str(release.version), where), platform_blocked=True, blocker="unknown")
    raise Reject(f"{variant.name} is not published for {where}", platform_blocked=True)


def build_unknown(variant: str, version: str, where: str) -> str:
    """The sentence for a build nobody says exists or not (three states: known, known absent, unknown)."""
    return f"{variant} for {where}: unknown (no source lists torch {version}'s builds for it; it is not known to be absent)"


def announced_note(fit: Fit, tag: str) -> None:
    """A planned build only a release-day source announces: the plan says its state."""
    if fit.variant.state_on(tag) == "announced":
        by = (fit.variant.announced_by or fit.variant.source).split(" (", 1)[0]
        fit.warnings.append(
            f"torch {fit.version} {fit.variant.name} for {platform_words(tag)}: announced ({by}), no artifact seen yet; "
            "the index the installer reaches confirms it or not"
        )


def absent_here(release: Release, variant: Variant, tag: str, matrix: Matrix, request: Request) -> None:
    """A build the index this plan installs from listed torch without (learned at run time, ``absent_on``): known absent
    there, for that platform; another index may still serve it, so it is no reason for a source build."""
    if not variant.absent_on:
        return
    url = f"{(request.index_base or matrix.index_url('pytorch')).rstrip('/')}/{variant.name}"
    fam = parse_platform(tag)[:2]
    if any(parse_platform(t)[:2] == fam for t in variant.absent_on.get(url, ())):
        raise Reject(f"torch {release.version} {variant.name} for {platform_words(tag)}: {url} lists torch without this build (known absent there)",
                     blocker="unknown")


def python_fits(release: Release, variant: Variant, t: Target, packages: list[str]) -> None:
    if not t.python:
        return
    if t.python not in variant.pythons:
        known = ", ".join(variant.pythons) or "none known"
        raise Reject(f"{variant.name} has no wheels for Python {t.python} (it has {known})", platform_blocked=True, blocker="python")
    if not release.python_on(t.python, t.os, t.arch):
        where = ", ".join(platform_words(tag) for tag in release.python_platforms.get(t.python, ()))
        raise Reject(
            f"{variant.name} has no wheels for Python {t.python} on {OS_WORDS.get(t.os, t.os)} {t.arch} "
            f"(torch {release.version} has them only for {where})",
            platform_blocked=True, blocker="python",
        )
    if t.python in release.torch_only_pythons and any(p != "torch" for p in packages):
        others = ", ".join(p for p in packages if p != "torch")
        raise Reject(f"Python {t.python} has torch wheels only in torch {release.version} (no {others})", platform_blocked=True, blocker="python")


def unfit_gpus(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> str | None:
    """Why a GPU build must not serve as a CPU build here: it sees a device it has no code for (torch reports the
    device, then every kernel on it fails); None when no such device is here."""
    acc = kinds.for_build(variant.kind)
    if acc is None:
        return None
    return acc.cannot_serve_cpu(release, version, variant, platform_tag_for(release, variant, t), matrix, gpus)


def fit_variant(release: Release, version: Version, variant: Variant, t: Target, matrix: Matrix, request: Request, gpus: list[Gpu]) -> Fit:
    """Check one variant against the target: its platform and Python here, its devices and driver by the kind it is
    a build for (:meth:`Accelerator.fit`); raises Reject with the reason."""
    tag = platform_tag_for(release, variant, t)
    absent_here(release, variant, tag, matrix, request)
    python_fits(release, variant, t, request.packages)
    fit = Fit(release, version, variant)
    acc = kinds.for_build(variant.kind)
    if acc is not None:
        acc.fit(fit, release, version, variant, tag, t, matrix, gpus, request.variant == "auto")
    announced_note(fit, tag)
    return fit


def cpu_fits(cands: Sequence[tuple[Release, Version]], t: Target, matrix: Matrix, request: Request,
             rejects: list[str]) -> Iterator[tuple[Release, Version, Fit]]:
    """The candidates' CPU builds that fit the target, newest first, each with its fit; a release without one is passed
    over, and why a build does not fit is added to ``rejects`` ("torch 2.9.0: ...")."""
    for rel, ver in cands:
        v = rel.variant(kinds.CPU)
        if v is None:
            continue
        try:
            fit = fit_variant(rel, ver, v, t, matrix, request, [])
        except Reject as r:
            rejects.append(f"torch {ver}: {r.reason}")
            continue
        yield rel, ver, fit


def kind_version(v: Variant) -> tuple[int, ...]:
    """The release of the runtime a build is made for, as its kind names it (:meth:`Accelerator.runtime_release`)."""
    acc = kinds.for_build(v.kind)
    return release_tuple((acc.runtime_release(v) if acc is not None else None) or "0")


def best_gpu_fit(
    release: Release, version: Version, t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], rejected: list[Rejected] | None
) -> tuple[Fit | None, list[Reject]]:
    fits: list[Fit] = []
    rejects: list[Reject] = []
    for v in release.variants:
        if v.kind != kind or (request.variant != "auto" and v.name != request.variant):
            continue
        try:
            fits.append(fit_variant(release, version, v, t, matrix, request, gpus))
        except Reject as r:
            rejects.append(r)
            if rejected is not None:
                reason = r.reason.removeprefix(f"{v.name}: ")
                rejected.append(Rejected(v.name, f"torch {version}: {reason}", torch=str(version), blocker=r.blocker))
    if not fits:
        return None, rejects
    fits.sort(key=lambda f: kind_version(f.variant), reverse=True)
    best = fits[0]
    if rejected is not None:
        for other in fits[1:]:
            rejected.append(Rejected(other.variant.name, f"torch {version}: fits, but {best.variant.name} is the newer {kind_name(kind)} build", torch=str(version),
                                     blocker="newer"))
    return best, rejects


kind_name = kinds.build_label  # a build kind in a sentence: CUDA, ROCm, XPU, CPU
gpu_summary = device_summary  # devices in a sentence, each with its sm_ / gfx


def gpu_subsets(gpus: list[Gpu]) -> list[list[Gpu]]:
    """GPU sets to try: all; without integrated GPUs; then each architecture group, most capable first."""
    out = [gpus]
    discrete = [g for g in gpus if not g.integrated]
    if discrete and len(discrete) < len(gpus):
        out.append(discrete)
    groups: dict[str, list[Gpu]] = {}
    for g in discrete or gpus:
        groups.setdefault(g.cc or g.gfx or "?", []).append(g)
    if len(groups) > 1:

        def rank(key: str) -> tuple[int, ...]:
            return tuple(int(x) for x in re.findall(r"\d+", key)) or (0,)

        for key in sorted(groups, key=rank, reverse=True):
            out.append(groups[key])
    return out
