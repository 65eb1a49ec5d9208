"""The user's pip constraints (pure): what they allow of a planned package."""


from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from stackdoctor.system import read_bounded
from stackdoctor.wheels.index import (
    canonical_name,
)

if TYPE_CHECKING:  # pragma: no cover

    pass


# ---------------------------------------------------------------------------- constraints (pure)


def parse_constraints(text: str) -> dict[str, str]:
    """``{canonical name: specifier}`` from a pip constraints file (comments, options, URLs and
    markers dropped; several lines for one name are joined)."""
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-") or "://" in line or "@" in line:
            continue
        line = line.split(";", 1)[0].strip()
        m = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$", line)
        if not m:
            continue
        spec = m.group(2).replace(" ", "")
        if spec and not re.match(r"^(?:(?:===|==|!=|~=|<=|>=|<|>)[A-Za-z0-9.*+!_-]+,?)+$", spec):
            continue
        name = canonical_name(m.group(1))
        out[name] = ",".join(s for s in (out.get(name), spec.rstrip(",")) if s)
    return out


def read_constraints(paths: Sequence[str]) -> list[tuple[str, str, str]]:
    """``(name, specifier, file)`` from the constraint files pip is configured with (unreadable ones skipped)."""
    out: list[tuple[str, str, str]] = []
    for p in paths:
        try:
            # the user's own pip configuration, not a probed machine file
            text = read_bounded(Path(p).expanduser(), 1024 * 1024).decode("utf-8", errors="replace")  # never a FIFO
        except OSError:
            continue
        for name, spec in parse_constraints(text).items():
            out.append((name, spec, p))
    return out


def allowed(constraints: Sequence[tuple[str, str, str]], name: str, version: str) -> tuple[str, str, str] | None:
    """The first constraint ``name==version`` breaks (``None``: allowed)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        v = Version(version)
    except InvalidVersion:
        return None
    for cname, spec, path in constraints:
        if cname != canonical_name(name) or not spec:
            continue
        try:
            if not SpecifierSet(spec).contains(v, prereleases=True):
                return cname, spec, path
        except InvalidSpecifier:
            continue
    return None
