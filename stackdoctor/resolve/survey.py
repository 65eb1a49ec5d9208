"""Asking the sources: each source the installer would use (its configuration, ``--find-links``, the PyTorch variant index
or a mirror of it) asked once about the planned projects, concurrently; where each planned wheel is; what torch
releases they serve."""


from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackdoctor.core.errors import IndexError_
from stackdoctor.system import read_bounded
from stackdoctor.wheels.index import (
    IndexClient,
    IndexFile,
    canonical_name,
    failure_reason,
    local_path,
    parse_page,
    project_page_url,
    select_wheel,
    wanted_version,
)
from stackdoctor.wheels.mirrors import (
    Mirror,
    default_build_variant,
    parse_flat_listing,
)
from stackdoctor.wheels.sources import InstallerConfig, Source, dedupe, is_local

if TYPE_CHECKING:  # pragma: no cover

    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan, PlannedPackage


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
    from stackdoctor.wheels.index import index_error, read_local_page

    if is_local(location):
        path = local_path(location)
        if path.is_dir():
            try:
                # the user's own folder, not a probed machine path: read directly
                names = sorted(os.listdir(path))
            except OSError as exc:
                raise index_error("failing", f"{location} cannot be read: {exc.strerror or exc}.") from None
            return [IndexFile(n, (path / n).resolve().as_uri()) for n in names if parse_flat_listing(f'<a href="{n}">{n}</a>', path.resolve().as_uri() + "/")]
        if not path.exists():
            raise index_error("missing", f"{location}: no such folder.")
        page = read_local_page(path.resolve().as_uri())
        return parse_flat_listing(page.text, page.url)
    if client is None:
        raise index_error("skipped", f"{location} is a URL and the network is off.")
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
                return _probe_index(source, projects, LOCAL_CLIENT)  # type: ignore[arg-type]
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

    from stackdoctor.wheels.index import wheel_parts

    out: dict[tuple[str, str | None], Offer] = {}
    rank = {t: i for i, t in enumerate(tags)}
    for probe in _order(probes):
        for f in probe.files.get("torch") or []:
            parts = wheel_parts(f.filename)
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


class _LocalOnly:
    """A stand-in client for file:// pages (the dependency check never uses the network)."""

    def fetch(self, url: str) -> Any:
        from stackdoctor.wheels.index import index_error, read_local_page

        if not url.startswith("file:"):
            raise index_error("skipped", f"{url} is not local.")
        return read_local_page(url)


LOCAL_CLIENT = _LocalOnly()


def pytorch_sources(plan: Plan, mirror: Mirror | None) -> list[Source]:
    """The PyTorch variant index for the plan (or the mirror's form of it); none for PyPI plans (macOS)."""
    from stackdoctor.wheels.sources import is_pypi

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
    # a remote --mirror that does not answer beside a folder with torch: a warning, the folder used; a mirror that is a
    # local path stays named (a path that is no listing is the user's input to fix: one sentence, exit 2)
    local_mirror = any(s.url.startswith("file:") for s in sources.extra)
    folder_has_torch = any(p.answered and p.source.role == "links" and p.files.get("torch") for p in probes)
    named = sources.cli_links + (sources.extra if prefer_added and (local_mirror or not folder_has_torch) else [])
    notes = [
        f"{p.source.url} did not answer ({p.detail}); it is skipped, not retried"
        for p in probes
        if p.status in ("unreachable", "failing")
    ]
    return Surveyed(sources, probes, named, projects, notes)


@dataclass
class ProbeSource:
    """A surveyed source as :mod:`stackdoctor.wheels.learn` reads it (its protocol ``Source``): the files it listed (not
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
        from stackdoctor.wheels.learn import HttpSource, parse_core_metadata, read_wheel_metadata

        if f.url.startswith("file:"):
            path = local_path(f.url)
            sidecar = path.with_name(path.name + ".metadata")
            try:
                if sidecar.is_file():
                    return parse_core_metadata(read_bounded(sidecar, 4 * 1024 * 1024).decode("utf-8", errors="replace")), f
                return (read_wheel_metadata(path) if path.is_file() else None), f
            except (OSError, ValueError):
                return None, f
        if self.client is None:
            return None, f
        return HttpSource(self.probe.source.url, self.client).metadata(f)

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        del f, into
        return None
