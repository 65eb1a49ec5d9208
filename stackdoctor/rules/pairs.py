"""Rules about pairs read from their metadata: torch and the NumPy its release was built against (torch's own
``Requires-Dist`` where it names one, else the matrix's ``torch.numpy2_abi`` threshold, sourced), torch and the
torch its companions (torchvision, torchaudio) pin in their installed ``METADATA``. Both versions are in the files, so
the fast path (``check --no-kernels``) judges them as the import path does."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import InvalidVersion, Version

from stackdoctor.core.versions import local, public
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import index_for, python_exe, variant_name

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _version(text: str | None) -> Version | None:
    try:
        return Version(text) if text else None
    except InvalidVersion:
        return None


@dataclass(frozen=True)
class Pin:
    """One ``Requires-Dist`` line's name and version specifier: what the pair rules read of a requirement (its
    ``str`` as packaging's ``Requirement`` writes it)."""

    name: str
    specifier: SpecifierSet
    text: str

    def __str__(self) -> str:
        return self.text


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pin(line: str, name: str) -> Pin | None:
    """``line`` as a :class:`Pin` when it is a requirement on ``name`` without an ``extra`` marker. A plain
    ``name<spec>`` line is read with packaging's specifiers alone; one with extras, a URL or a marker with packaging's
    ``Requirement`` (its parser costs ~30-100 ms of import, paid only here, never for another distribution's line)."""
    m = _NAME.match(line)
    if m is None or _canonical(m.group(1)) != name:
        return None  # another distribution's line (or no requirement at all)
    rest, _, marker = line[m.end():].partition(";")
    if "extra" in marker:
        return None
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if not marker.strip() and not any(c in rest for c in "[@"):
        try:
            spec = SpecifierSet(rest.strip().removeprefix("(").removesuffix(")"))
        except InvalidSpecifier:
            return None
        return Pin(m.group(1), spec, f"{m.group(1)}{spec}")
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    if req.marker and "extra" in str(req.marker):
        return None
    return Pin(req.name, req.specifier, str(req))


def requirement_on(lines: Sequence[str], name: str) -> Pin | None:
    """The unconditional (no ``extra``) ``Requires-Dist`` on ``name`` among ``lines``; None when there is none."""
    for line in lines:
        pin = _pin(line, name)
        if pin is not None:
            return pin
    return None


def _numpy_bound(ctx: Ctx) -> tuple[str | None, str]:
    """("<2" or the spec torch's METADATA gives, where it is said) for the installed torch; (None, "") when it runs with either."""
    t = ctx.view.facts.torch
    req = requirement_on(t.requires.get("torch", []), "numpy")
    if req is not None and str(req.specifier):
        return str(req.specifier), t.sources.get("requires.torch", "torch's METADATA")
    row = ctx.matrix.threshold("torch.numpy2_abi") if ctx.matrix is not None else None
    tv = _version(public(t.version))
    if row is None or tv is None or tv >= Version(row.min_version):
        return None, ""
    return "<2", f"torch < {row.min_version} was built against NumPy 1 ({row.source})"


@rule("torch-numpy-abi", severity="fail", layer="torch")
def torch_numpy_abi(ctx: Ctx) -> None:
    """NumPy 2 beside a torch built against NumPy 1 (torch < 2.3): read from both dist-infos, on both paths."""
    f, t = ctx.view, ctx.view.facts.torch
    nv = _version(t.numpy_version)
    if not t.installed or nv is None:
        return
    bound, source = _numpy_bound(ctx)
    if bound is None:
        return
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        spec = SpecifierSet(bound)
    except InvalidSpecifier:
        return
    if spec.contains(nv, prereleases=True):
        return
    said = next((w for w in [*t.import_warnings, t.import_error or ""] if "NumPy" in w), "")
    ctx.add(
        detail="said" if said else "default",
        facts=["torch.version", "torch.numpy_version"] + (["torch.import_warnings"] if said else []),
        fix_text=f"{shlex.quote(python_exe(f))} -m pip install {shlex.quote('numpy' + bound)}",
        torch=t.version,
        numpy=t.numpy_version,
        bound=bound,
        source=source,
        warning=said,
    )


def pinned_torch(ctx: Ctx, pkg: str) -> tuple[Pin, str] | None:
    """``pkg``'s own pin on torch (its installed METADATA), and the file that says it, when the installed torch is
    outside it; None when it has no pin or torch meets it."""
    t = ctx.view.facts.torch
    req = requirement_on(t.requires.get(pkg, []), "torch")
    tv = _version(t.version)
    if req is None or tv is None or not str(req.specifier):
        return None
    if req.specifier.contains(tv, prereleases=True) or req.specifier.contains(_version(public(t.version)) or tv, prereleases=True):
        return None
    return req, t.sources.get(f"requires.{pkg}", f"{pkg}'s METADATA")


def pin_fix(ctx: Ctx, req: Pin, pkg: str) -> str:
    """The install that makes the pair fit: the ``pkg`` the matrix pairs with the installed torch (torch stays), else
    the torch ``req`` asks (an exact pin: that torch), each from the index of torch's variant."""
    t = ctx.view.facts.torch
    label = local(t.version)
    index = index_for(ctx, variant_name(ctx.view)) if label else None
    tail = f" --index-url {shlex.quote(index)}" if index else ""
    paired = ctx.matrix.paired(public(t.version) or "") if ctx.matrix is not None else (None, None)
    keep = paired[0] if pkg == "torchvision" else paired[1]
    if keep:
        want = f"{pkg}=={keep}" + (f"+{label}" if label and pkg == "torchvision" else "")
        return f"{shlex.quote(python_exe(ctx.view))} -m pip install --no-deps {shlex.quote(want)}" + tail
    exact = next((s.version for s in req.specifier if s.operator == "==" and not s.version.endswith(".*")), None)
    want = f"torch=={exact}" if exact else f"torch{req.specifier}"
    if exact and label and "+" not in exact:
        want += f"+{label}"
    return f"{shlex.quote(python_exe(ctx.view))} -m pip install {shlex.quote(want)}" + tail


@rule("torch-companion-pin", severity="fail", layer="torch", defers_to=("torchvision-mismatch", "torchaudio-mismatch"))
def torch_companion_pin(ctx: Ctx) -> None:
    """torchvision / torchaudio pin the torch they were built with (their METADATA's ``Requires-Dist: torch==X``); the
    installed torch is another one. Said where the matrix's pairing did not already say it (a release it does not know)."""
    t = ctx.view.facts.torch
    for pkg, code in (("torchvision", "torchvision-mismatch"), ("torchaudio", "torchaudio-mismatch")):
        got = pinned_torch(ctx, pkg)
        if got is None or ctx.has(code):
            continue
        req, where = got
        ctx.add(
            facts=["torch.version", f"torch.requires.{pkg}"],
            fix_text=pin_fix(ctx, req, pkg),
            pkg=pkg,
            installed=t.distributions.get(pkg) or "?",
            pin=str(req),
            torch=t.version,
            where=where,
        )
