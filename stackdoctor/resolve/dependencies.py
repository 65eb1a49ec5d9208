"""torch's dependencies in local folders: when only local folders / ``file://`` indexes remain (``--offline``,
``--no-index``, or nothing else answered), the requirements neither they nor the target environment have."""


from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stackdoctor.core.errors import IndexError_
from stackdoctor.wheels.index import (
    IndexClient,
    IndexFile,
    canonical_name,
    local_path,
    parse_page,
    project_page_url,
)
from stackdoctor.wheels.mirrors import (
    cached_wheel_metadata,
)

if TYPE_CHECKING:  # pragma: no cover

    pass
from stackdoctor.resolve.survey import LOCAL_CLIENT, Probe

# ---------------------------------------------------------------------------- dependencies in folders


def marker_environment(python_version: str | None, platform_tag: str | None, implementation: str | None = None) -> dict[str, str]:
    """A PEP 508 marker environment for the target (from its Python and platform tag)."""
    from packaging.markers import default_environment

    env: dict[str, str] = {k: str(v) for k, v in default_environment().items()}
    if python_version:
        parts = python_version.rstrip("t").split(".")
        env["python_version"] = ".".join(parts[:2])
        env["python_full_version"] = ".".join(parts[:3]) if len(parts) >= 3 else env["python_version"] + ".0"
    tag = (platform_tag or "").lower()
    if tag.startswith(("manylinux", "linux", "musllinux")):
        env.update(sys_platform="linux", platform_system="Linux", os_name="posix")
    elif tag.startswith("win"):
        env.update(sys_platform="win32", platform_system="Windows", os_name="nt")
    elif tag.startswith("macosx"):
        env.update(sys_platform="darwin", platform_system="Darwin", os_name="posix")
    m = re.search(r"(x86_64|aarch64|amd64|arm64)$", tag)
    if m:
        env["platform_machine"] = {"amd64": "AMD64"}.get(m.group(1), m.group(1))
    if implementation:
        env["implementation_name"] = implementation
    return env


def _requires(meta: Mapping[str, list[str]], environment: Mapping[str, str]) -> list[tuple[str, str]]:
    from packaging.requirements import InvalidRequirement, Requirement

    out: list[tuple[str, str]] = []
    for line in meta.get("requires-dist", []):
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None:
            try:
                if not req.marker.evaluate({**environment, "extra": ""}):
                    continue
            except Exception:
                continue
        out.append((canonical_name(req.name), str(req.specifier)))
    return out


def missing_dependencies(
    roots: Sequence[IndexFile],
    local_probes: Sequence[Probe],
    installed: Mapping[str, str],
    tags: Sequence[str],
    *,
    python_version: str | None,
    environment: Mapping[str, str],
    client: IndexClient | None = None,
    limit: int = 200,
) -> list[str]:
    """Requirements of the planned wheels (and of theirs, through the local wheels found) that neither the
    target has nor any of ``local_probes`` (folders, ``file://`` indexes) can serve: ``["sympy>=1.13.3"]``."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    from stackdoctor.wheels.index import wheel_parts

    cache: dict[str, list[IndexFile]] = {}

    def candidates(name: str) -> list[IndexFile]:
        if name in cache:
            return cache[name]
        files: list[IndexFile] = []
        for probe in local_probes:
            if probe.source.kind == "links":
                files += [f for f in probe.listed if canonical_name(f.filename.split("-", 1)[0]) == name]
            else:
                if name not in probe.files:
                    try:
                        page = (client or LOCAL_CLIENT).fetch(project_page_url(probe.source.url, name))
                        probe.files[name] = parse_page(page)
                    except (IndexError_, ValueError, RecursionError):
                        probe.files[name] = []
                files += probe.files[name]
        cache[name] = files
        return files

    def satisfied_by_installed(name: str, spec: str) -> bool:
        if name not in installed:
            return False
        try:
            return not spec or SpecifierSet(spec).contains(Version(installed[name]), prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return True

    rank = {t: i for i, t in enumerate(tags)}
    missing: list[str] = []
    seen: set[str] = set()
    todo: list[tuple[str, str]] = []
    env = dict(environment)
    for root in roots:
        meta = cached_wheel_metadata(str(local_path(root.url))) if root.url.startswith("file:") else None
        if meta:
            todo += _requires(meta, env)
    steps = 0
    while todo and steps < limit:
        steps += 1
        name, spec = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        if satisfied_by_installed(name, spec):
            continue
        best: tuple[Any, IndexFile] | None = None
        for f in candidates(name):
            parts = wheel_parts(f.filename)
            if parts is None or f.yanked:
                continue
            _n, ver, ftags = parts
            if tags and not any(t in rank for t in ftags):
                continue
            try:
                if spec and not SpecifierSet(spec).contains(ver, prereleases=True):
                    continue
            except InvalidSpecifier:
                pass
            if best is None or ver > best[0]:
                best = (ver, f)
        if best is None:
            missing.append(f"{name}{spec}")
            continue
        meta = cached_wheel_metadata(str(local_path(best[1].url))) if best[1].url.startswith("file:") else None
        if meta:
            todo += [r for r in _requires(meta, env) if r[0] not in seen]
    return missing
