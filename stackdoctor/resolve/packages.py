"""What a plan installs: the packages and their requirements, the index, the installer's command, the companion beside torch."""

from __future__ import annotations

import re

from packaging.version import Version

from stackdoctor import kinds
from stackdoctor.matrix import (
    Matrix,
    Release,
)
from stackdoctor.model.plan import Plan, PlannedPackage, Request
from stackdoctor.model.view import MachineView
from stackdoctor.resolve.machine import Target, is_what_if, target_from
from stackdoctor.resolve.variant_fit import Fit
from stackdoctor.wheels.leftovers import predict_leftovers

# ---------------------------------------------------------------------------- plan building


def variant_index_url(matrix: Matrix, request: Request, variant: str) -> str:
    base = request.index_base or matrix.index_url("pytorch")
    return f"{base.rstrip('/')}/{variant}"


def install_command(view: MachineView, request: Request, reqs: list[str], index_url: str | None) -> list[str]:
    py = view.facts.python.executable or "python3"
    idx = ["--index-url", index_url] if index_url else []
    if request.installer == "uv":
        return [view.facts.python.uv_path or "uv", "pip", "install", "--python", py, *reqs, *idx]
    return [py, "-m", "pip", "install", *reqs, *idx]


def planned_packages(
    matrix: Matrix,
    request: Request,
    version: Version,
    pkg_variant: str | None,
    index_url: str | None,
    warnings: list[str],
    t: Target | None = None,
) -> list[PlannedPackage]:
    aarch64 = t is not None and t.os == "linux" and t.arch == "aarch64"
    # Linux aarch64: CPU torch wheels (e.g. torch-2.1.1-...manylinux2014_aarch64.whl) and torchvision wheels carry
    # no local suffix (compat-facts 4.3); a plain ==X.Y.Z also matches X.Y.Z+variant, so leave the suffix out there.
    torch_variant = None if aarch64 and pkg_variant == kinds.CPU else pkg_variant
    out = [PlannedPackage("torch", str(version), torch_variant, index_url)]
    tv, ta = matrix.paired(version)
    for name in request.packages:
        if name == "torch":
            continue
        paired = {"torchvision": tv, "torchaudio": ta}.get(name)
        if name not in ("torchvision", "torchaudio"):
            warnings.append(f"{name}: not a torch companion the matrix pairs; install it separately")
            continue
        if paired is None:
            warnings.append(f"{name}: the version paired with torch {version} is unknown to the matrix; not planned (a --matrix file can add it)")
            continue
        out.append(PlannedPackage(name, paired, None if aarch64 and name == "torchvision" else pkg_variant, index_url))
    return out


_WHEEL_URL = re.compile(r"\S+\.whl")
_WHEEL_OS = {"linux": ("linux",), "windows": ("win",), "macos": ("macosx",)}
_WHEEL_ARCH = {"x86_64": ("x86_64", "amd64"), "amd64": ("x86_64", "amd64"), "aarch64": ("aarch64", "arm64"), "arm64": ("aarch64", "arm64")}


def _learned_where(source: str, t: Target) -> str | None:
    """The artifact a learned variant's row was read from, for this target's platform: the first wheel of the
    target's OS and architecture; ``None`` when the learned wheels are all other platforms' (a merged row whose
    build for this platform has another source); the first location when the source names no wheel."""
    wheels: list[str] = _WHEEL_URL.findall(source)
    if not wheels:
        return source.split(" (", 1)[0].split("; ", 1)[0] or None
    oses, arches = _WHEEL_OS.get(t.os, ()), _WHEEL_ARCH.get(t.arch, ())
    for url in wheels:
        plat = url.rsplit("/", 1)[-1].rsplit("-", 1)[-1]
        if (not oses or any(w in plat for w in oses)) and (not arches or any(w in plat for w in arches)):
            after = source.split(url, 1)[1].split()[:1]
            return url + (f" {after[0]}" if after and after[0].startswith("sha256:") else "")
    return None


def finish(view: MachineView, matrix: Matrix, request: Request, fit: Fit, plan: Plan, *, pypi: bool = False) -> Plan:
    v = fit.variant
    t = target_from(view, matrix, request)
    if v.index and fit.release.build_state(v.name, t.os, t.arch) == "announced":
        index_url, pkg_variant = variant_index_url(matrix, request, v.name), v.name  # announced for <pytorch>/<name>, not seen on the learned index
    elif pypi or v.index == "pypi":
        # a label-less default build (PyPI's): the index that serves it, with a plain ==version requirement
        index_url, pkg_variant = matrix.index_url("pypi"), None
    elif v.index:
        index_url, pkg_variant = v.index, v.name  # learned from that index (an index witness)
    else:
        index_url, pkg_variant = variant_index_url(matrix, request, v.name), v.name
    where = _learned_where(v.source, t) if v.learned else None
    if where:
        plan.reasons.append(
            f"torch {fit.version} {v.name}: learned {v.learned} from the index's own files ({where})"
            + (f"; GPU code {v.derived_from}" if v.derived_from and v.derived_from.startswith("inferred") else "")
        )
    plan.torch_version = str(fit.version)
    plan.variant = v.name
    plan.index_url = index_url
    plan.warnings.extend(w for w in fit.warnings if w not in plan.warnings)
    plan.reasons.extend(fit.reasons)
    plan.env.update(fit.env)
    plan.packages = planned_packages(matrix, request, fit.version, pkg_variant, index_url, plan.warnings, t)
    plan.command = install_command(view, request, [p.requirement for p in plan.packages], index_url)
    plan.leftovers = predict_leftovers(view.facts.torch.distributions, v.name)  # the one prediction (install's too)
    return plan


def paired_companions(
    view: MachineView, request: Request, t: Target, acc: kinds.Accelerator, cands: list[tuple[Release, Version]], plan: Plan
) -> tuple[list[tuple[Release, Version]], dict[str, kinds.Companion]]:
    """The releases a kind's companion package pairs with on this target (``torch-npu`` beside torch's CPU build), newest
    first, and the companion of each: first only those whose needs are known and met (:meth:`Accelerator.companion`'s
    ``strict``), else any that pairs, with its warnings. No release pairs: none, and the plan says why."""
    why: list[str] = []
    for strict in (True, False):
        paired: dict[str, kinds.Companion] = {}
        for _rel, ver in cands:
            c = acc.companion(view.facts, str(ver), os=t.os, arch=t.arch, python=t.python, hypothetical=is_what_if(request), strict=strict)
            if isinstance(c, kinds.Companion):
                paired[str(ver)] = c
            elif isinstance(c, str) and c not in why:
                why.append(c)
        if paired:
            return [(r, v) for r, v in cands if str(v) in paired], paired
    plan.reasons.append(why[0] if why else f"no {', '.join(acc.companions)} release pairs with the requested torch")
    plan.reasons.extend(why[1:3])
    return [], {}


def with_companion(view: MachineView, request: Request, plan: Plan, c: kinds.Companion | None) -> Plan:
    """``plan`` with the companion package beside torch: its requirement, its index (an extra one), its reasons."""
    if c is None:
        return plan
    plan.packages.append(PlannedPackage(c.name, c.version, None, c.index_url))
    plan.reasons.extend(c.reasons)
    plan.warnings.extend(w for w in c.warnings if w not in plan.warnings)
    plan.command = install_command(view, request, [p.requirement for p in plan.packages], plan.index_url)
    extra = list(dict.fromkeys(p.index_url for p in plan.packages if p.index_url and p.index_url != plan.index_url))
    for url in extra:
        plan.command += ["--extra-index-url", url]
    return plan
