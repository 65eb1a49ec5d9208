"""The index check with the user's sources: which source serves each planned wheel, and what the
installer is handed.

Sources are the installer's own configuration (:mod:`stackdoctor.sources`), ``--find-links``, and the
PyTorch variant index (or a ``--mirror`` of it). Every source is asked once, concurrently, with one
deadline per page. Then:

- each planned wheel is located (configured sources first, so the command needs no flag for them); a
  label-less ``torch`` on a PyPI-style index counts when it *is* the planned variant (PyPI's default
  build, :mod:`stackdoctor.mirrors`);
- an unpinned plan whose wheel no answering source has falls back to the newest release of the same
  variant that one has (and that the user's pip constraints allow);
- a source that did not answer (refused, timed out, 5xx) is not handed to pip or uv: the command
  overrides the configuration that names it (``PIP_EXTRA_INDEX_URL``/``PIP_FIND_LINKS`` in its
  environment, ``--index-url`` or ``--no-index``; uv: ``--no-config`` and the answering sources given
  explicitly), so the installer never retries it;
- when only local folders / ``file://`` indexes remain (``--offline``, ``--no-index``, or nothing else
  answered), torch's dependencies are checked there too, and the missing ones are named.

All failures are one :class:`~stackdoctor.errors.IndexError_` sentence (exit 2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackdoctor.errors import IndexError_
from stackdoctor.index import (
    IndexClient,
    IndexFile,
    WheelMatch,
    canonical_name,
    describe_offer,
    failure_reason,
    local_path,
    parse_page,
    project_page_url,
    select_wheel,
    wanted_version,
)
from stackdoctor.mirrors import (
    Mirror,
    cached_wheel_metadata,
    default_build_variant,
    parse_flat_listing,
)
from stackdoctor.plan import PlanSource
from stackdoctor.sources import InstallerConfig, Source, dedupe, is_local
from stackdoctor.system import read_bounded

if TYPE_CHECKING:  # pragma: no cover

    from stackdoctor.matrix import Matrix
    from stackdoctor.plan import Plan, PlannedPackage

COMPANIONS = ("torchvision", "torchaudio")
UV_INDEX_VARS = ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS")


# ---------------------------------------------------------------------------- survey


@dataclass
class Probe:
    """What one source answered."""

    source: Source
    status: str = "unchecked"  # ok | missing | unreachable | failing | skipped
    detail: str | None = None
    files: dict[str, list[IndexFile]] = field(default_factory=dict)  # canonical project -> files
    pages: dict[str, str] = field(default_factory=dict)  # canonical project -> page URL
    listed: list[IndexFile] = field(default_factory=list)  # links sources: every file listed

    @property
    def answered(self) -> bool:
        return self.status in ("ok", "missing")

    def where(self, project: str) -> str:
        return self.pages.get(canonical_name(project)) or self.source.url


def _probe_index(source: Source, projects: Sequence[str], client: IndexClient) -> Probe:
    probe = Probe(source)
    missing: list[str] = []
    first_404: str | None = None
    for name in projects:
        url = project_page_url(source.url, name)
        try:
            page = client.fetch(url)
        except IndexError_ as exc:
            reason = failure_reason(exc)
            if reason == "missing":
                missing.append(name)
                first_404 = first_404 or str(exc)
                continue
            probe.status, probe.detail = reason, str(exc)
            return probe
        try:
            files = parse_page(page)
        except (ValueError, RecursionError):
            probe.status, probe.detail = "failing", f"{url} is not a valid PEP 691 JSON package page."
            return probe
        if not files:
            probe.status, probe.detail = "failing", f"{url} is not a package index page (no file links in it)."
            return probe
        probe.files[canonical_name(name)] = files
        probe.pages[canonical_name(name)] = url
    probe.status = "ok" if probe.files else "missing"
    if missing and not probe.files:
        probe.detail = first_404 or f"it has no {', '.join(missing)}"
    return probe


def list_links(location: str, client: IndexClient | None) -> list[IndexFile]:
    """Files of a find-links location: a folder, a local HTML file, or a page of links (http(s) / file://).

    :raises IndexError_: with ``.reason`` ("missing", "unreachable", "failing").
    """
    from stackdoctor.index import _index_error, read_local_page

    if is_local(location):
        path = local_path(location)
        if path.is_dir():
            try:
                # the user's own folder, not a probed machine path: read directly
                names = sorted(os.listdir(path))
            except OSError as exc:
                raise _index_error("failing", f"{location} cannot be read: {exc.strerror or exc}.") from None
            return [IndexFile(n, (path / n).resolve().as_uri()) for n in names if parse_flat_listing(f'<a href="{n}">{n}</a>', path.resolve().as_uri() + "/")]
        if not path.exists():
            raise _index_error("missing", f"{location}: no such folder.")
        page = read_local_page(path.resolve().as_uri())
        return parse_flat_listing(page.text, page.url)
    if client is None:
        raise _index_error("skipped", f"{location} is a URL and the network is off.")
    page = client.fetch(location)
    return parse_flat_listing(page.text, page.url)


def _probe_links(source: Source, projects: Sequence[str], client: IndexClient | None) -> Probe:
    probe = Probe(source)
    try:
        files = list_links(source.url, client)
    except IndexError_ as exc:
        probe.status, probe.detail = failure_reason(exc), str(exc)
        return probe
    wanted = {canonical_name(p) for p in projects}
    probe.listed = files
    for f in files:
        name = canonical_name(f.filename.split("-", 1)[0])
        if name in wanted:
            probe.files.setdefault(name, []).append(f)
            probe.pages[name] = source.url
    probe.status = "ok" if probe.files else "missing"
    if not probe.files:
        probe.detail = f"it has no {', '.join(projects)}" if files else "it lists no package files"
    return probe


def survey(
    sources: Sequence[Source],
    projects: Sequence[str],
    *,
    client: IndexClient | None,
    offline: bool = False,
    no_index: bool = False,
    max_workers: int = 8,
) -> list[Probe]:
    """Ask every source about ``projects`` at once; one :class:`Probe` per source, in order."""

    def one(source: Source) -> Probe:
        if no_index and source.kind == "index":
            return Probe(source, "skipped", "--no-index: indexes are not used")
        if offline and not source.local:
            return Probe(source, "skipped", "--offline: the network is not used")
        if source.kind == "links":
            return _probe_links(source, projects, None if offline else client)
        if client is None:
            if source.local:  # a file:// index is read from disk, with or without a network
                return _probe_index(source, projects, _LOCAL)  # type: ignore[arg-type]
            return Probe(source, "skipped", "the network is not used")
        return _probe_index(source, projects, client)

    if not sources:
        return []
    with ThreadPoolExecutor(max_workers=min(max_workers, len(sources))) as pool:
        return list(pool.map(one, sources))


# ---------------------------------------------------------------------------- locating wheels


@dataclass
class Hit:
    probe: Probe
    file: IndexFile
    plain: bool = False  # a label-less build standing for the planned variant (PyPI's default build)
    how: str | None = None


def _order(probes: Sequence[Probe], prefer_added: bool = False) -> list[Probe]:
    """Configured sources first (the installer uses them unasked), find-links before indexes as pip
    lists candidates; then the sources stackdoctor would add. ``prefer_added``: the user named the
    PyTorch index or a mirror on the command line, so it comes first."""
    rank = {"links": 0, "default": 1, "extra": 2}
    first = 1 if prefer_added else 0
    return sorted(
        (p for p in probes if p.answered),
        key=lambda p: (first if p.source.configured else 1 - first, rank.get(p.source.role, 3) if p.source.configured else 0),
    )


def locate(
    pkg: PlannedPackage,
    probes: Sequence[Probe],
    tags: Sequence[str],
    *,
    python_version: str | None,
    matrix: Matrix,
    platform_tag: str | None,
    torch_version: str | None,
    allow_plain: bool = True,
    prefer_added: bool = False,
) -> Hit | None:
    """The source and wheel that serve one planned package (``None``: no answering source has it)."""
    want = wanted_version(pkg.version, pkg.variant)
    name = canonical_name(pkg.name)
    for probe in _order(probes, prefer_added):
        files = probe.files.get(name) or []
        hit = select_wheel(files, pkg.name, want, tags, python_version=python_version)
        if hit is not None:
            return Hit(probe, hit)
    if not (allow_plain and pkg.variant):
        return None
    for probe in _order(probes, prefer_added):
        files = probe.files.get(name) or []
        hit = select_wheel(files, pkg.name, pkg.version, tags, python_version=python_version)
        if hit is None:
            continue
        ref = hit if name == "torch" else None
        if ref is None:  # a companion: PyPI's build of it goes with PyPI's torch build
            t = select_wheel(probe.files.get("torch") or [], "torch", torch_version or "", tags, python_version=python_version)
            if t is None:
                continue
            ref = t
        build = default_build_variant(ref, torch_version or pkg.version, platform_tag, matrix)
        if build.variant == pkg.variant:
            return Hit(probe, hit, plain=True, how=build.how)
    return None


@dataclass
class Offer:
    version: str  # public version
    variant: str | None
    probe: Probe
    plain: bool
    how: str | None = None


def torch_offers(
    probes: Sequence[Probe], tags: Sequence[str], *, python_version: str | None, matrix: Matrix, platform_tag: str | None
) -> list[Offer]:
    """Every torch build the answering sources have for the target's tags, newest first."""
    from packaging.version import InvalidVersion, Version

    from stackdoctor.index import _wheel_parts

    out: dict[tuple[str, str | None], Offer] = {}
    rank = {t: i for i, t in enumerate(tags)}
    for probe in _order(probes):
        for f in probe.files.get("torch") or []:
            parts = _wheel_parts(f.filename)
            if parts is None or f.yanked:
                continue
            _name, ver, ftags = parts
            if tags and not any(t in rank for t in ftags):
                continue
            if select_wheel([f], "torch", str(ver), tags, python_version=python_version) is None:
                continue
            public = ver.public
            key: tuple[str, str | None]
            if ver.local:
                key = (public, str(ver.local))
                out.setdefault(key, Offer(public, str(ver.local), probe, False))
            else:
                build = default_build_variant(f, public, platform_tag, matrix)
                key = (public, build.variant)
                out.setdefault(key, Offer(public, build.variant, probe, True, build.how))

    def sort_key(o: Offer) -> Any:
        try:
            return Version(o.version)
        except InvalidVersion:
            return Version("0")

    return sorted(out.values(), key=sort_key, reverse=True)


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

    from stackdoctor.index import _wheel_parts

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
                        page = (client or _LOCAL).fetch(project_page_url(probe.source.url, name))
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
            parts = _wheel_parts(f.filename)
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


class _LocalOnly:
    """A stand-in client for file:// pages (the dependency check never uses the network)."""

    def fetch(self, url: str) -> Any:
        from stackdoctor.index import _index_error, read_local_page

        if not url.startswith("file:"):
            raise _index_error("skipped", f"{url} is not local.")
        return read_local_page(url)


_LOCAL = _LocalOnly()


# ---------------------------------------------------------------------------- what the installer is handed


@dataclass
class Delivery:
    """Arguments and environment that point the installer at exactly the sources that answered."""

    args: list[str] = field(default_factory=list)
    env: dict[str, str | None] = field(default_factory=dict)
    used: list[Source] = field(default_factory=list)
    dropped: list[Probe] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _kept(probes: Sequence[Probe], source: Source) -> bool:
    p = next((q for q in probes if q.source is source), None)
    return p is None or p.answered


def _secrets_to_env(d: Delivery, options: dict[str, tuple[str, list[str], str]]) -> None:
    """Credentialed URLs leave the installer's argv (``ps`` and /proc/<pid>/cmdline show it to every local
    user) for its environment: each option whose values carry credentials becomes its variable, holding what
    the installer would have combined (``before``: the configured values the option adds to).

    ``options``: option -> (variable, configured values it adds to, separator)."""
    from stackdoctor.redact import has_credentials

    for option, (var, before, sep) in options.items():
        values = [d.args[i + 1] for i in range(len(d.args) - 1) if d.args[i] == option]
        if not any(has_credentials(v) for v in values):
            continue
        keep: list[str] = []
        skip = False
        for i, a in enumerate(d.args):
            if skip:
                skip = False
                continue
            if a == option and i + 1 < len(d.args):
                skip = True
                continue
            keep.append(a)
        d.args = keep
        d.env[var] = sep.join(dict.fromkeys([*before, *values]))


def deliver_pip(cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    """pip: configured sources that did not answer are overridden, the added ones are passed."""
    d = Delivery()
    configured = [s for s in cfg.sources if s.configured]
    dropped = [p for p in probes if p.source.configured and p.status in ("unreachable", "failing", "skipped")]
    d.dropped = dropped
    dropped_src = {id(p.source) for p in dropped}
    default = cfg.default_index()
    extras = [s for s in configured if s.role == "extra"]
    links = [s for s in configured if s.kind == "links"]
    kept_extras = [s for s in extras if id(s) not in dropped_src]
    kept_links = [s for s in links if id(s) not in dropped_src]
    add_index = [s for s in added if s.kind == "index"]
    add_links = [s for s in added if s.kind == "links"]
    default_kept = default is not None and id(default) not in dropped_src and not no_index
    index_left: list[Source] = []
    if no_index or cfg.no_index:
        d.args.append("--no-index")
    else:
        pypi_unconfigured = default is not None and default.origin.startswith("pip's default")
        index_arg: Source | None = None
        extra_args = list(add_index)
        if add_index and pypi_unconfigured and (not default_kept or not (extras or links)):
            # PyPI is not configured (or did not answer): the PyTorch index serves torch and its
            # dependencies, as PyTorch's own install commands assume
            index_arg = extra_args.pop(0)
        if default is not None and not default_kept and index_arg is None:
            if kept_extras:
                index_arg = kept_extras[0]
            elif extra_args:
                index_arg = extra_args.pop(0)
        if index_arg is not None:
            d.args += ["--index-url", index_arg.url]
        elif default is not None and not default_kept:
            d.args.append("--no-index")
        for s in extra_args:
            d.args += ["--extra-index-url", s.url]
        head = [index_arg] if index_arg is not None else ([default] if default_kept and default is not None else [])
        index_left = head + kept_extras + extra_args
    if len(kept_extras) != len(extras) and not (no_index or cfg.no_index):
        d.env["PIP_EXTRA_INDEX_URL"] = " ".join(s.url for s in kept_extras) or " "
    if len(kept_links) != len(links):
        d.env["PIP_FIND_LINKS"] = " ".join(s.url for s in kept_links) or " "
    for s in add_links:
        d.args += ["--find-links", s.url]
    _secrets_to_env(d, {"--index-url": ("PIP_INDEX_URL", [], " "), "--extra-index-url": ("PIP_EXTRA_INDEX_URL", [s.url for s in kept_extras], " "),
                        "--find-links": ("PIP_FIND_LINKS", [s.url for s in kept_links], " ")})
    d.used = dedupe(index_left + kept_links + list(add_links))
    for p in dropped:
        d.notes.append(f"{p.source.url} ({p.source.origin}) is left out of the install command: {p.detail or p.status}")
    return d


def deliver_uv(cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    """uv: when a configured source did not answer, ``--no-config`` and the answering ones explicitly."""
    d = Delivery()
    dropped = [p for p in probes if p.source.configured and p.status in ("unreachable", "failing", "skipped")]
    d.dropped = dropped
    dropped_src = {id(p.source) for p in dropped}
    configured = [s for s in cfg.sources if s.configured]
    add_index = [s for s in added if s.kind == "index"]
    add_links = [s for s in added if s.kind == "links"]
    if dropped:
        d.args.append("--no-config")
        for var in UV_INDEX_VARS:
            d.env[var] = None
        kept = [s for s in configured if id(s) not in dropped_src and not (s.explicit and s.kind == "index")]
        default = next((s for s in kept if s.role == "default"), None)
        for s in add_index:
            d.args += ["--index", s.url]
        for s in kept:
            if s.kind == "index" and s.role != "default":
                d.args += ["--index", s.url]
        if default is not None:
            d.args += ["--default-index", default.url]
        elif not add_index and not any(s.kind == "index" for s in kept):
            d.args.append("--no-index")
        for s in kept:
            if s.kind == "links":
                d.args += ["--find-links", s.url]
        used = kept + list(add_index)
    else:
        for s in add_index:
            d.args += ["--index", s.url]
        used = [s for s in configured if not (s.explicit and s.kind == "index")] + list(add_index)
    if no_index or cfg.no_index:
        if "--no-index" not in d.args:
            d.args.append("--no-index")
        used = [s for s in used if s.kind == "links"]
    for s in add_links:
        d.args += ["--find-links", s.url]
    _secrets_to_env(d, {"--index": ("UV_INDEX", [], " "), "--default-index": ("UV_DEFAULT_INDEX", [], " "), "--find-links": ("UV_FIND_LINKS", [], ",")})
    d.used = dedupe(used + list(add_links))
    for p in dropped:
        d.notes.append(f"{p.source.url} ({p.source.origin}) is left out of the install command: {p.detail or p.status}")
    return d


def deliver(installer: str, cfg: InstallerConfig, probes: Sequence[Probe], added: Sequence[Source], *, no_index: bool, offline: bool) -> Delivery:
    fn = deliver_uv if installer == "uv" else deliver_pip
    return fn(cfg, probes, added, no_index=no_index, offline=offline)


# ---------------------------------------------------------------------------- the whole check


@dataclass
class Sourcing:
    plan: Plan
    matches: list[WheelMatch]
    probes: list[Probe]
    delivery: Delivery
    notes: list[str] = field(default_factory=list)  # warnings to show (unreachable sources, PyPI default builds)
    needs_dependency_check: bool = False
    roots: list[IndexFile] = field(default_factory=list)
    # the planned build's own not-found sentence where another build stands in for it (_other_build): said too
    # when the stand-in cannot be installed either, so a broken source of the user's is still named
    fell_back_from: str | None = None


def pytorch_sources(plan: Plan, mirror: Mirror | None) -> list[Source]:
    """The PyTorch variant index for the plan (or the mirror's form of it); none for PyPI plans (macOS)."""
    from stackdoctor.install import is_pypi

    if plan.variant is None or is_pypi(plan.index_url):
        return []
    if mirror is not None:
        return mirror.sources(plan.variant)
    return [Source(str(plan.index_url), "index", "pytorch", f"PyTorch index for {plan.variant}", configured=False)]


@dataclass
class SourceList:
    """The sources a plan's wheels are looked for on, in order: the installer's configuration, ``--find-links``,
    and the PyTorch variant index for the plan (or the mirror's form of it) where the configuration lacks it."""

    configured: list[Source]
    cli_links: list[Source]
    extra: list[Source]

    @property
    def all(self) -> list[Source]:
        return dedupe(self.configured + self.cli_links + self.extra)


def source_list(plan: Plan, cfg: InstallerConfig, *, find_links: Sequence[str] = (), mirror: Mirror | None = None, use_configured: bool = True) -> SourceList:
    configured = [s for s in cfg.sources] if use_configured else []
    cli_links = [Source(fl, "links", "links", "--find-links", configured=False) for fl in find_links]
    extra = pytorch_sources(plan, mirror)
    known = {(s.kind, s.url.rstrip("/")) for s in configured}
    return SourceList(configured, cli_links, [s for s in extra if (s.kind, s.url.rstrip("/")) not in known])


@dataclass
class Surveyed:
    """What every source of a :class:`SourceList` answered about the planned projects."""

    sources: SourceList
    probes: list[Probe]
    named: list[Source]  # named on the command line: their failure is the answer
    projects: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # the sources that did not answer

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.sources.all]

    @property
    def named_failure(self) -> Probe | None:
        return next((p for p in self.probes if p.status in ("unreachable", "failing") and any(p.source is s for s in self.named)), None)


def survey_sources(
    plan: Plan,
    *,
    cfg: InstallerConfig,
    find_links: Sequence[str] = (),
    mirror: Mirror | None = None,
    offline: bool = False,
    no_index: bool = False,
    client: IndexClient | None = None,
    use_configured: bool = True,
    prefer_added: bool = False,
    reuse: Surveyed | None = None,
) -> Surveyed:
    """Ask the plan's sources (:func:`source_list`) about its projects (torch alone for a plan without packages);
    ``reuse``: an earlier survey, kept when it asked the same sources about the same projects."""
    sources = source_list(plan, cfg, find_links=find_links, mirror=mirror, use_configured=use_configured)
    projects = [p.name for p in plan.packages] or ["torch"]
    if reuse is not None and reuse.urls == [s.url for s in sources.all] and reuse.projects == projects:
        return reuse
    probes = survey(sources.all, projects, client=client, offline=offline or cfg.offline, no_index=no_index or cfg.no_index)
    named = sources.cli_links + (sources.extra if prefer_added and not any(p.answered and p.source.role == "links" and p.files.get("torch") for p in probes) else [])  # a dead --mirror beside a folder with torch: a warning, the folder used
    notes = [
        f"{p.source.url} did not answer ({p.detail}); it is skipped, not retried"
        for p in probes
        if p.status in ("unreachable", "failing")
    ]
    return Surveyed(sources, probes, named, projects, notes)


@dataclass
class ProbeSource:
    """A surveyed source as :mod:`stackdoctor.learn` reads it (its protocol ``Source``): the files it listed (not
    asked again), their core metadata (the PEP 658 ``.metadata`` file; a local wheel's own ``METADATA``), never a
    wheel. A find-links location serves no index of its own: a build learned there keeps its variant's index."""

    probe: Probe
    client: IndexClient | None
    name: str = ""
    index_url: str | None = None
    serves_index: bool = True

    def __post_init__(self) -> None:
        self.name = self.name or self.probe.source.url
        self.serves_index = self.probe.source.kind == "index"
        self.index_url = self.probe.source.url if self.serves_index else None

    def files(self, project: str) -> tuple[str, list[IndexFile]]:
        return self.probe.where(project), list(self.probe.files.get(canonical_name(project)) or [])

    def metadata(self, f: IndexFile) -> tuple[Any, IndexFile]:
        from stackdoctor.learn import HttpSource, _wheel_metadata, parse_core_metadata

        if f.url.startswith("file:"):
            path = local_path(f.url)
            sidecar = path.with_name(path.name + ".metadata")
            try:
                if sidecar.is_file():
                    return parse_core_metadata(read_bounded(sidecar, 4 * 1024 * 1024).decode("utf-8", errors="replace")), f
                return (_wheel_metadata(path) if path.is_file() else None), f
            except (OSError, ValueError):
                return None, f
        if self.client is None:
            return None, f
        return HttpSource(self.probe.source.url, self.client).metadata(f)

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        del f, into
        return None


def newer_offers(offers: Sequence[Offer], matrix: Matrix) -> list[str]:
    """The torch versions the sources serve that are newer than every release the matrix knows."""
    from packaging.version import InvalidVersion, Version

    newest = matrix.releases[0].version if matrix.releases else Version("0")
    out: list[str] = []
    for o in offers:
        try:
            v = Version(o.version)
        except InvalidVersion:
            continue
        if v > newest and not (v.is_prerelease or v.is_devrelease) and o.version not in out:
            out.append(o.version)
    return out


def missing_artifacts(offers: Sequence[Offer], matrix: Matrix, plan: Plan, platform_tag: str | None) -> list[str]:
    """The releases the matrix knows, newer than the plan's, of which a source serves a build of the plan's kind
    (CPU, CUDA, ...) for the target's platform that the matrix lacks: a missing (release, variant, platform) the
    run-time witness learns (2.15.0's ``/whl/cpu`` Linux build, where the matrix has only its macOS and Windows ones)."""
    from packaging.version import InvalidVersion, Version

    from stackdoctor.matrix import parse_platform, variant_kind

    if not plan.torch_version or not plan.variant or not platform_tag:
        return []
    kind = variant_kind(plan.variant)
    fam = parse_platform(platform_tag)[:2]
    try:
        planned = Version(plan.torch_version)
    except InvalidVersion:
        return []
    out: list[str] = []
    for o in offers:
        try:
            v = Version(o.version)
        except InvalidVersion:
            continue
        row = matrix.release(v)
        if v <= planned or row is None or not row.variants or row.version != v or o.version in out:
            continue
        ok = variant_kind(o.variant or "")
        if ok is None or kind is None or ok[0] != kind[0]:
            continue
        have = row.variant(o.variant or "")
        if have is None or not any(parse_platform(t)[:2] == fam for t in have.platforms):
            out.append(o.version)
    return out


def learn_sources(surveyed: Surveyed, versions: Sequence[str], client: IndexClient | None) -> list[ProbeSource]:
    """The answering sources that list a torch wheel of one of ``versions``, as :mod:`stackdoctor.learn` reads them."""
    from stackdoctor.index import _wheel_parts

    want = set(versions)
    out = []
    for p in surveyed.probes:
        if not p.answered:
            continue
        listed = {str(parts[1].public) for f in p.files.get("torch") or [] if (parts := _wheel_parts(f.filename)) is not None}
        if listed & want:
            out.append(ProbeSource(p, client))
    return out


def _fmt_versions(offers: Iterable[Offer]) -> str:
    seen: list[str] = []
    for o in offers:
        label = f"{o.version}+{o.variant}" if (o.variant and not o.plain) else o.version
        if label not in seen:
            seen.append(label)
    return ", ".join(seen[:4]) + (" ..." if len(seen) > 4 else "")


def check(
    plan: Plan,
    *,
    cfg: InstallerConfig,
    matrix: Matrix,
    tags: Sequence[str],
    python_version: str | None,
    platform_tag: str | None,
    find_links: Sequence[str] = (),
    mirror: Mirror | None = None,
    offline: bool = False,
    no_index: bool = False,
    pinned: bool = False,
    client: IndexClient | None = None,
    constraints: Sequence[tuple[str, str, str]] = (),
    reresolve: Callable[[str], Plan] | None = None,
    fit: Callable[[str, str], str] | None = None,
    use_configured: bool = True,
    prefer_added: bool = False,
    surveyed: Surveyed | None = None,
) -> Sourcing:
    """Locate every planned wheel on the user's sources (plus ``find_links`` and the PyTorch index or
    ``mirror``), fall back to the newest served release when unpinned, and say what to hand the installer.

    ``reresolve(version)`` re-plans for another torch version; ``fit(version, variant)`` says in a few
    words whether a build would run on this machine. ``surveyed``: the sources already asked for this plan
    (:func:`survey_sources`), not asked again. Raises :class:`IndexError_` (one sentence).
    """
    surveyed = survey_sources(
        plan, cfg=cfg, find_links=find_links, mirror=mirror, offline=offline, no_index=no_index, client=client,
        use_configured=use_configured, prefer_added=prefer_added, reuse=surveyed,
    )
    p = surveyed.named_failure
    if p is not None:  # the user named it on the command line: its failure is the answer, not a skipped source
        raise IndexError_(p.detail or f"{p.source.url} did not answer.")
    probes, cli_links, named = surveyed.probes, surveyed.sources.cli_links, surveyed.named
    notes = list(surveyed.notes)

    def find_all(current: Plan) -> tuple[list[WheelMatch], list[Hit], list[str]]:
        matches: list[WheelMatch] = []
        hits: list[Hit] = []
        misses: list[str] = []
        for pkg in current.packages:
            hit = locate(
                pkg, probes, tags, python_version=python_version, matrix=matrix, platform_tag=platform_tag,
                torch_version=current.torch_version, prefer_added=prefer_added,
            )
            if hit is None:
                misses.append(pkg.name)
                continue
            req = f"{pkg.name}=={pkg.version}" if hit.plain else f"{pkg.name}=={wanted_version(pkg.version, pkg.variant)}"
            matches.append(WheelMatch(pkg.name, req, hit.file.filename, hit.file.url, hit.file.sha256, hit.probe.where(pkg.name)))
            hits.append(hit)
        return matches, hits, misses

    matches, hits, misses = find_all(plan)
    original = plan
    fell_back = False
    offers = torch_offers(probes, tags, python_version=python_version, matrix=matrix, platform_tag=platform_tag)
    broken = allowed(constraints, "torch", plan.torch_version or "") if plan.torch_version else None
    if (misses or broken) and not pinned and reresolve is not None and plan.variant:
        for offer in offers:
            if offer.variant != plan.variant or offer.version == plan.torch_version or allowed(constraints, "torch", offer.version):
                continue
            candidate = reresolve(offer.version)
            if not candidate.satisfiable or candidate.variant != plan.variant:
                continue
            m2, h2, miss2 = find_all(candidate)
            if miss2:
                continue
            why = (
                f"the constraint torch{broken[1]} ({broken[2]})" if broken else "none of the sources that answered has it"
            )
            candidate.reasons = [
                f"torch {plan.torch_version} {plan.variant} is the newest build for this machine, but {why}; torch {offer.version} "
                f"is the newest {plan.variant} build they serve ({offer.probe.source.url})"
            ] + [
                r.replace("; the newest requested release with a CPU build for it", "").replace("the newest requested release and ", "the ")
                for r in candidate.reasons
            ]
            plan, matches, hits, misses, broken = candidate, m2, h2, [], None
            fell_back = True
            break
    fell_back_from: str | None = None
    if misses and not broken and not pinned and reresolve is not None and plan.variant:
        other = _other_build(plan, offers, reresolve, find_all, client)
        if other is not None:
            fell_back_from = _not_found_sentence(plan, misses[0], probes, offers, tags, fit, mirror, named)
            plan, matches, hits, misses = other
            fell_back = True
    if broken and pinned:
        raise IndexError_(
            f"torch {plan.torch_version} conflicts with the constraint torch{broken[1]} in {broken[2]} (pip's `constraint` setting, "
            f"{cfg.origins.get('constraint', 'pip configuration')}); pick a torch within it with --torch."
        )
    if misses:
        note = _default_build_note(offers, original, fit)
        if note:
            plan.warnings.append(note)
        exc = IndexError_(_not_found_sentence(plan, misses[0], probes, offers, tags, fit, mirror, named))
        exc.reason = "missing" if any(p.answered for p in probes) else "unchecked"  # type: ignore[attr-defined]
        raise exc
    if fell_back or not hits:
        note = _default_build_note(offers, original, fit)
        if note:
            notes.append(note)
    for hit in hits:
        if hit.plain:
            notes.append(f"{hit.file.filename} on {hit.probe.source.url} has no local label: it is PyPI's {plan.variant} build ({hit.how})")
    answered_cli = [p.source for p in probes if p.source in cli_links and p.answered]
    added = dedupe(answered_cli + [h.probe.source for h in hits if not h.probe.source.configured])
    delivery = deliver(cfg.installer, cfg, probes, added, no_index=no_index, offline=offline)
    result = Sourcing(plan, matches, probes, delivery, notes, fell_back_from=fell_back_from)
    network_left = [s for s in delivery.used if not s.local]
    result.needs_dependency_check = not network_left
    result.roots = [h.file for h in hits]
    # the plan records where each wheel comes from
    for pkg, hit in zip([p for p in plan.packages if p.name not in misses], hits, strict=False):
        pkg.source = hit.probe.where(pkg.name)
        pkg.wheel = hit.file.filename
        pkg.index_url = hit.probe.source.url if hit.probe.source.kind == "index" else None
        if hit.plain:
            pkg.variant = None
    plan.sources = [
        PlanSource(
            p.source.url, p.source.kind, p.source.role, p.source.origin, p.source.configured, p.status, p.detail,
            used=any(s is p.source for s in delivery.used),
        )
        for p in probes
    ]
    return result


def _other_build(
    plan: Plan, offers: Sequence[Offer], reresolve: Callable[[str], Plan], find_all: Callable[[Plan], tuple[list[WheelMatch], list[Hit], list[str]]],
    client: IndexClient | None,
) -> tuple[Plan, list[WheelMatch], list[Hit], list[str]] | None:
    """No answering source has the planned build, nor another release of it: the newest build of another variant
    that a source serves and that the resolver says runs here (PyPI's CUDA build on a machine whose CPU index did
    not answer), with what it costs (the torch wheel's size, its runtime wheels on top)."""
    for offer in offers:
        if offer.variant is None or offer.variant == plan.variant:
            continue
        candidate = reresolve(offer.version)
        if not candidate.satisfiable or candidate.variant != offer.variant:
            continue
        m2, h2, miss2 = find_all(candidate)
        if miss2 or not h2:
            continue
        size = wheel_size(h2[0].file, client)
        cost = f"the torch wheel is {size / (1024 * 1024):.0f} MiB" if size is not None else "the torch wheel's size is unknown"
        candidate.reasons.insert(
            0,
            f"torch {plan.torch_version} {plan.variant} is the newest build for this machine, but none of the sources that answered has it; "
            f"torch {offer.version} {offer.variant} from {offer.probe.source.url} runs here instead, at a cost: {cost}"
            + (", and its CUDA runtime wheels come on top" if offer.variant.startswith("cu") else ""),
        )
        if size is not None:
            candidate.warnings.append(f"the plan's torch wheel ({h2[0].file.filename}) is {size / (1024 * 1024):.0f} MiB to download")
        return candidate, m2, h2, []
    return None


def wheel_size(f: IndexFile, client: IndexClient | None) -> int | None:
    """A wheel's size in bytes: the index's word (PEP 700), a local file's, else a one-byte range request's
    ``Content-Range`` total; None where none answers."""
    if f.size is not None:
        return f.size
    if f.url.startswith("file:"):
        p = local_path(f.url)
        return p.stat().st_size if p.is_file() else None
    if client is None:
        return None
    import httpx

    try:
        with client._client_for(f.url).stream("GET", f.url, headers={"Range": "bytes=0-0", "Accept-Encoding": "identity"}) as resp:
            total = resp.headers.get("content-range", "").rpartition("/")[2]
            if resp.status_code == 206 and total.isdigit():
                return int(total)
            length = resp.headers.get("content-length", "")
            return int(length) if resp.status_code == 200 and length.isdigit() else None
    except httpx.HTTPError:
        return None


def _default_build_note(offers: Sequence[Offer], plan: Plan, fit: Callable[[str, str], str] | None) -> str | None:
    """When a source (a PyPI mirror) has torch only as PyPI's label-less default build: which variant that
    build is, and whether it fits this machine."""
    from packaging.version import InvalidVersion, Version

    plain = [o for o in offers if o.plain and o.variant != plan.variant]
    if not plain:
        return None
    try:
        ceiling = Version(plan.torch_version or "0")
        near = [o for o in plain if o.variant and Version(o.version) <= Version(f"{ceiling.major}.{ceiling.minor}.999")]
    except InvalidVersion:
        near = []
    offer = (near or [o for o in plain if o.variant] or plain)[0]
    if offer.variant is None:
        return f"{offer.probe.source.url} has torch {offer.version} only as PyPI's default build, whose variant is {offer.how}"
    fits = fit(offer.version, offer.variant) if fit else None
    return (
        f"{offer.probe.source.url} has torch {offer.version} only as PyPI's default build, which is {offer.variant} ({offer.how})"
        + (f": {fits}" if fits else "")
    )


def _not_found_sentence(
    plan: Plan, name: str, probes: Sequence[Probe], offers: Sequence[Offer], tags: Sequence[str],
    fit: Callable[[str, str], str] | None, mirror: Mirror | None, named: Sequence[Source] = (),
) -> str:
    pkg = next(p for p in plan.packages if p.name == name)
    wv = wanted_version(pkg.version, pkg.variant)
    want = f"{pkg.name} {wv}"
    answered = [p for p in probes if p.answered]
    silent = [p for p in probes if p.status in ("unreachable", "failing")]
    shown = tags[0] if tags else "any tag"
    # a source the user named, or the only one that answered, that lists the package: say what it has instead
    for p in [q for q in answered if any(q.source is s for s in named)] + (answered if len(answered) == 1 and not silent else []):
        files = p.files.get(canonical_name(name))
        if files:
            return f"{want} has no wheel for this target ({shown}) on {p.where(name)}: {describe_offer(files, pkg.name, wv)}."
        if any(p.source is s for s in named) and p.detail and p.source.kind == "index":
            return p.detail if p.detail.endswith(".") else p.detail + "."
    parts: list[str] = []
    if name == "torch" and offers:
        parts.append(f"they have torch {_fmt_versions(offers)}")
    elif answered:
        parts.append(f"{', '.join(p.source.url for p in answered[:3])} answered without it")
    if silent:
        detail = (silent[0].detail or silent[0].status).rstrip(".")
        parts.append(f"{', '.join(p.source.url for p in silent[:2])} did not answer ({detail})")
    skipped = [p for p in probes if p.status == "skipped"]
    if skipped and not answered and not silent:
        parts.append(f"{skipped[0].detail}")
    hint = "add a source with --find-links DIR or --mirror NAME" if mirror is None else "check the mirror, or add --find-links DIR"
    if not answered and not silent and not skipped:
        return f"{want} cannot be looked for: no source is configured; {hint}."
    return f"{want} ({shown}) is on none of the sources: {'; '.join(parts)}; {hint}."
