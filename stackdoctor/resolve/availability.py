"""The index check with the user's sources: which source serves each planned wheel, and what the
installer is handed.

Sources are the installer's own configuration (:mod:`stackdoctor.wheels.sources`), ``--find-links``, and the
PyTorch variant index (or a ``--mirror`` of it). Every source is asked once, concurrently, with one
deadline per page. Then:

- each planned wheel is located (configured sources first, so the command needs no flag for them); a
  label-less ``torch`` on a PyPI-style index counts when it *is* the planned variant (PyPI's default
  build, :mod:`stackdoctor.wheels.mirrors`);
- an unpinned plan whose wheel no answering source has falls back to the newest release of the same
  variant that one has (and that the user's pip constraints allow);
- a source that did not answer (refused, timed out, 5xx) is not handed to pip or uv: the command
  overrides the configuration that names it (``PIP_EXTRA_INDEX_URL``/``PIP_FIND_LINKS`` in its
  environment, ``--index-url`` or ``--no-index``; uv: ``--no-config`` and the answering sources given
  explicitly), so the installer never retries it;
- when only local folders / ``file://`` indexes remain (``--offline``, ``--no-index``, or nothing else
  answered), torch's dependencies are checked there too, and the missing ones are named.

All failures are one :class:`~stackdoctor.core.errors.IndexError_` sentence (exit 2).

The parts, each in its own module: :mod:`.survey` (asking the sources, locating wheels), :mod:`.constraints`,
:mod:`.dependencies` (in local folders), :mod:`.delivery` (what the installer is handed); this module is the whole
check and what the install flow imports.
"""


from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackdoctor import kinds
from stackdoctor.core.errors import IndexError_
from stackdoctor.model.plan import PlanSource
from stackdoctor.wheels.index import (
    IndexClient,
    IndexFile,
    WheelMatch,
    canonical_name,
    describe_offer,
    local_path,
    wanted_version,
)
from stackdoctor.wheels.mirrors import (
    Mirror,
)
from stackdoctor.wheels.sources import InstallerConfig, Source, dedupe

if TYPE_CHECKING:  # pragma: no cover

    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan
from stackdoctor.resolve.constraints import allowed, parse_constraints, read_constraints
from stackdoctor.resolve.delivery import Delivery, deliver, deliver_pip, deliver_uv
from stackdoctor.resolve.dependencies import marker_environment, missing_dependencies
from stackdoctor.resolve.survey import (
    COMPANIONS,
    UV_INDEX_VARS,
    Hit,
    Offer,
    Probe,
    ProbeSource,
    SourceList,
    Surveyed,
    list_links,
    locate,
    pytorch_sources,
    source_list,
    survey,
    survey_sources,
    torch_offers,
)

__all__ = ["COMPANIONS", "Delivery", "Hit", "Offer", "Probe", "ProbeSource", "SourceList", "Sourcing", "Surveyed", "UV_INDEX_VARS", "allowed", "check", "deliver", "deliver_pip", "deliver_uv", "learn_sources", "list_links", "locate", "marker_environment", "missing_artifacts", "missing_dependencies", "newer_offers", "parse_constraints", "pytorch_sources", "read_constraints", "source_list", "survey", "survey_sources", "torch_offers", "wheel_size"]


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
    (CPU, CUDA, ...) for the target's platform that the matrix lacks or only knows as announced (no artifact seen): a
    missing (release, variant, platform) the run-time witness learns (2.15.0's ``/whl/cpu`` Linux build, where the
    matrix has PyPI's macOS and Windows wheels and a release-day announcement of the Linux one). The planned build
    itself, when only announced, is confirmed by the index the plan uses (:mod:`stackdoctor.install.remember`)."""
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
        if v < planned or row is None or not row.variants or row.version != v or o.version in out:
            continue
        ok = variant_kind(o.variant or "")
        if ok is None or kind is None or ok[0] != kind[0]:
            continue
        have = row.variant(o.variant or "")
        # an artifact is what is missing: no build for the platform, or one only a release-day source announces
        # (the planned release too: a source serving the announced build is its witness, read as any other)
        seen = have is not None and any(parse_platform(t)[:2] == fam and have.state_on(t) != "announced" for t in have.platforms)
        if not seen and v > planned:
            out.append(o.version)
    return out


def learn_sources(surveyed: Surveyed, versions: Sequence[str], client: IndexClient | None) -> list[ProbeSource]:
    """The answering sources that list a torch wheel of one of ``versions``, as :mod:`stackdoctor.wheels.learn` reads them."""
    from stackdoctor.wheels.index import wheel_parts

    want = set(versions)
    out = []
    for p in surveyed.probes:
        if not p.answered:
            continue
        listed = {str(parts[1].public) for f in p.files.get("torch") or [] if (parts := wheel_parts(f.filename)) is not None}
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
    keep_variant: bool = False,
    client: IndexClient | None = None,
    constraints: Sequence[tuple[str, str, str]] = (),
    reresolve: Callable[..., Plan] | None = None,
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
    probes, named = surveyed.probes, surveyed.named
    notes = list(surveyed.notes)
    find_all = _Finder(probes, tags, python_version, matrix, platform_tag, prefer_added)
    matches, hits, misses = find_all(plan)
    original = plan
    fell_back = False
    offers = torch_offers(probes, tags, python_version=python_version, matrix=matrix, platform_tag=platform_tag)
    broken = allowed(constraints, "torch", plan.torch_version or "") if plan.torch_version else None
    fell_back_from: str | None = None
    if not pinned and reresolve is not None and plan.variant:
        plan, matches, hits, misses, broken, fell_back, fell_back_from = _fall_back(
            plan, matches, hits, misses, broken, offers, constraints, reresolve, find_all, client, keep_variant,
            lambda p, miss: _not_found_sentence(p, miss, probes, offers, tags, fit, mirror, named))
    if broken and pinned:
        raise IndexError_(
            f"torch {plan.torch_version} conflicts with the constraint torch{broken[1]} in {broken[2]} (pip's `constraint` setting, "
            f"{cfg.origins.get('constraint', 'pip configuration')}); pick a torch within it with --torch."
        )
    if misses:
        raise _missing(plan, original, misses[0], probes, offers, tags, fit, mirror, named)
    notes += _found_notes(plan, original, offers, hits, fit, fell_back)
    answered_cli = [p.source for p in probes if p.source in surveyed.sources.cli_links and p.answered]
    added = dedupe(answered_cli + [h.probe.source for h in hits if not h.probe.source.configured])
    delivery = deliver(cfg.installer, cfg, probes, added, no_index=no_index, offline=offline)
    result = Sourcing(plan, matches, probes, delivery, notes, fell_back_from=fell_back_from)
    result.needs_dependency_check = not [s for s in delivery.used if not s.local]
    result.roots = [h.file for h in hits]
    _record(plan, hits, misses, probes, delivery)
    return result


def _fall_back(
    plan: Plan, matches: list[WheelMatch], hits: list[Hit], misses: list[str], broken: tuple[str, str, str] | None, offers: Sequence[Offer],
    constraints: Sequence[tuple[str, str, str]], reresolve: Callable[..., Plan], find_all: _Finder, client: IndexClient | None,
    keep_variant: bool, not_found: Callable[[Plan, str], str],
) -> tuple[Plan, list[WheelMatch], list[Hit], list[str], tuple[str, str, str] | None, bool, str | None]:
    """Unpinned, a planned wheel missing: the newest served release of the same variant, else (not when a companion is
    being added: ``keep_variant``) another build; returns the plan, its finds, and the sentence for the one it replaced."""
    fell_back, fell_back_from = False, None
    if misses or broken:
        same = _same_variant(plan, offers, constraints, broken, reresolve, find_all)
        if same is not None:
            plan, matches, hits, misses = same
            broken, fell_back = None, True
    # a companion added (keep_variant) is never served by another variant of torch: its absence is said instead
    other = _other_build(plan, offers, reresolve, find_all, client) if misses and not broken and not keep_variant else None
    if other is not None:
        fell_back_from = not_found(plan, misses[0])
        plan, matches, hits, misses = other
        fell_back = True
    return plan, matches, hits, misses, broken, fell_back, fell_back_from


def _missing(plan: Plan, original: Plan, name: str, probes: Sequence[Probe], offers: Sequence[Offer], tags: Sequence[str],
             fit: Callable[[str, str], str] | None, mirror: Mirror | None, named: Sequence[Source]) -> IndexError_:
    """The error for a planned wheel no source has (its ``reason``: "missing" where a source answered, else
    "unchecked"); the plan warns of PyPI's default build where a source has only that."""
    note = _default_build_note(offers, original, fit)
    if note:
        plan.warnings.append(note)
    exc = IndexError_(_not_found_sentence(plan, name, probes, offers, tags, fit, mirror, named))
    exc.reason = "missing" if any(p.answered for p in probes) else "unchecked"  # type: ignore[attr-defined]
    return exc


def _found_notes(plan: Plan, original: Plan, offers: Sequence[Offer], hits: Sequence[Hit], fit: Callable[[str, str], str] | None,
                 fell_back: bool) -> list[str]:
    """What the screen says of the wheels found: PyPI's default build where it stands in or is all a source has,
    and each label-less wheel that is the planned build."""
    notes: list[str] = []
    if fell_back or not hits:
        note = _default_build_note(offers, original, fit)
        if note:
            notes.append(note)
    for hit in hits:
        if hit.plain:
            notes.append(f"{hit.file.filename} on {hit.probe.source.url} has no local label: it is PyPI's {plan.variant} build ({hit.how})")
    return notes


Found = tuple[list[WheelMatch], list[Hit], list[str]]  # the planned wheels found, where, and the packages not found


@dataclass
class _Finder:
    """Locates every package of a plan on the surveyed sources (:func:`locate`)."""

    probes: Sequence[Probe]
    tags: Sequence[str]
    python_version: str | None
    matrix: Matrix
    platform_tag: str | None
    prefer_added: bool

    def __call__(self, current: Plan) -> Found:
        matches: list[WheelMatch] = []
        hits: list[Hit] = []
        misses: list[str] = []
        for pkg in current.packages:
            hit = locate(
                pkg, self.probes, self.tags, python_version=self.python_version, matrix=self.matrix, platform_tag=self.platform_tag,
                torch_version=current.torch_version, prefer_added=self.prefer_added,
            )
            if hit is None:
                misses.append(pkg.name)
                continue
            req = f"{pkg.name}=={pkg.version}" if hit.plain else f"{pkg.name}=={wanted_version(pkg.version, pkg.variant)}"
            matches.append(WheelMatch(pkg.name, req, hit.file.filename, hit.file.url, hit.file.sha256, hit.probe.where(pkg.name)))
            hits.append(hit)
        return matches, hits, misses


def _same_variant(
    plan: Plan, offers: Sequence[Offer], constraints: Sequence[tuple[str, str, str]], broken: tuple[str, str, str] | None,
    reresolve: Callable[..., Plan], find_all: Callable[[Plan], Found],
) -> tuple[Plan, list[WheelMatch], list[Hit], list[str]] | None:
    """Unpinned, the planned wheel missing (or outside the user's constraints): the newest release of the same
    variant that a source serves and the constraints allow, re-planned, saying why."""
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
        return candidate, m2, h2, []
    return None


def _record(plan: Plan, hits: Sequence[Hit], misses: Sequence[str], probes: Sequence[Probe], delivery: Delivery) -> None:
    """The plan records where each wheel comes from, and every source asked with what it answered."""
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


def _other_build(
    plan: Plan, offers: Sequence[Offer], reresolve: Callable[..., Plan], find_all: Callable[[Plan], tuple[list[WheelMatch], list[Hit], list[str]]],
    client: IndexClient | None,
) -> tuple[Plan, list[WheelMatch], list[Hit], list[str]] | None:
    """No answering source has the planned build, nor another release of it: the newest build of another variant
    that a source serves and that the resolver says runs here (PyPI's CUDA build on a machine whose CPU index did
    not answer), with what it costs (the torch wheel's size, its runtime wheels on top)."""
    for offer in offers:
        if offer.variant is None or offer.variant == plan.variant:
            continue
        candidate = reresolve(offer.version)
        if candidate.satisfiable and candidate.variant == plan.variant:
            # the planned build again (one only announced, say, that no answering source serves): the offered variant
            # asked for by name, so the resolver says whether it runs here
            candidate = reresolve(offer.version, offer.variant)
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
            + (", and its CUDA runtime wheels come on top" if _separate_runtime(offer.variant) else ""),
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
    said = _what_a_named_source_has(pkg.name, wv, want, shown, answered, silent, named)
    home = _home(pkg.index_url or plan.index_url, answered)
    if said is not None:
        return said if home is None else f"{said.rstrip('.')}; it is published on {home}."
    skipped = [p for p in probes if p.status == "skipped"]
    parts = _where_looked(name, offers, answered, silent, skipped)
    if home and parts:
        parts.append(f"it is published on {home}")  # where the build lives, when no source asked was that index
    hint = "add a source with --find-links DIR or --mirror NAME" if mirror is None else "check the mirror, or add --find-links DIR"
    if not answered and not silent and not skipped:
        return f"{want} cannot be looked for: no source is configured; {hint}."
    return f"{want} ({shown}) is on none of the sources: {'; '.join(parts)}; {hint}."


def _home(home: str | None, answered: Sequence[Probe]) -> str | None:
    """The index that publishes the build, when no source asked was that index (its answer is the word then)."""
    if home and any(p.source.url.rstrip("/") == home.rstrip("/") for p in answered):
        return None
    return home


def _where_looked(name: str, offers: Sequence[Offer], answered: Sequence[Probe], silent: Sequence[Probe], skipped: Sequence[Probe]) -> list[str]:
    """What each source said of the missing package, for the not-found sentence."""
    parts: list[str] = []
    if name == "torch" and offers:
        parts.append(f"they have torch {_fmt_versions(offers)}")
    elif answered:
        parts.append(f"{', '.join(p.source.url for p in answered[:3])} answered without it")
    if silent:
        detail = (silent[0].detail or silent[0].status).rstrip(".")
        parts.append(f"{', '.join(p.source.url for p in silent[:2])} did not answer ({detail})")
    if skipped and not answered and not silent:
        parts.append(f"{skipped[0].detail}")
    return parts


def _what_a_named_source_has(name: str, wv: str, want: str, shown: str, answered: list[Probe], silent: list[Probe],
                             named: Sequence[Source]) -> str | None:
    """A source the user named, or the only one that answered, that lists the package: what it has instead."""
    for p in [q for q in answered if any(q.source is s for s in named)] + (answered if len(answered) == 1 and not silent else []):
        files = p.files.get(canonical_name(name))
        if files:
            return f"{want} has no wheel for this target ({shown}) on {p.where(name)}: {describe_offer(files, name, wv)}."
        if any(p.source is s for s in named) and p.detail and p.source.kind == "index":
            return p.detail if p.detail.endswith(".") else p.detail + "."
    return None


def _separate_runtime(variant: str | None) -> bool:
    """A build whose runtime libraries come as wheels of their own (a CUDA build's nvidia-* wheels), not in its size."""
    acc = kinds.for_variant(variant)
    return acc is not None and acc.separate_runtime_wheels
