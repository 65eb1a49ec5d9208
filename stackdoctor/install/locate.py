"""The install flow's wheels located on the user's sources: the installer's configuration, the index check
(:mod:`stackdoctor.resolve.availability`), a release the matrix lacks learned from what the sources serve."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from stackdoctor.core.errors import IndexError_, StackdoctorError, UsageError
from stackdoctor.install.options import InstallOptions, InstallOutcome
from stackdoctor.install.request import describe_machine, generic_command, make_request, resolve_plan, target_tags, windows_shell

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.view import MachineView
    from stackdoctor.resolve.availability import Sourcing, Surveyed
    from stackdoctor.wheels.index import IndexClient
    from stackdoctor.wheels.sources import InstallerConfig


# ---------------------------------------------------------------------------- locate the sources


def installer_config(opts: InstallOptions, view: MachineView) -> InstallerConfig:
    from stackdoctor.wheels.sources import read_config

    return read_config(opts.installer if opts.installer == "uv" else "pip", os.environ, prefix=view.facts.python.env_prefix, cwd=os.getcwd())


def index_client(opts: InstallOptions) -> IndexClient | None:
    from stackdoctor.wheels.index import IndexClient

    return None if opts.sources.offline else IndexClient(os.environ, timeout_s=opts.sources.index_timeout_s)


def _survey_options(opts: InstallOptions, cfg: InstallerConfig, matrix: Matrix, client: IndexClient | None, *, hypothetical: bool) -> dict[str, Any]:
    """How the sources are asked (:func:`stackdoctor.resolve.availability.survey_sources`), the same for every stage."""
    from stackdoctor.wheels.mirrors import mirror_option, resolve_mirror

    value, origin = mirror_option(opts.sources.mirror, os.environ)
    return {
        "cfg": cfg,
        "find_links": opts.sources.find_links,
        "mirror": resolve_mirror(value, matrix, origin=origin) if value else None,
        "offline": opts.sources.offline,
        "no_index": opts.sources.no_index,
        "client": client,
        "use_configured": True,  # a what-if plans from the user's own sources too (pip / uv configuration); --offline keeps them local
        "prefer_added": bool(opts.sources.index_base or opts.sources.mirror),  # named on the command line: preferred, and its failure is final
    }


def witness(matrix: Matrix, sources: Sequence[Any], versions: Sequence[str], artifacts: Sequence[str] = ()) -> tuple[Matrix, list[str]]:
    """:func:`stackdoctor.wheels.learn.witness_matrix` for ``versions`` (and the known releases ``artifacts`` whose build for
    this target the matrix lacks); what an index serves never stops the plan: a row it cannot make (an index's odd
    files) is a note, and the matrix stays as it is."""
    from stackdoctor.wheels.learn import witness_matrix

    try:
        wider, notes = witness_matrix(matrix, sources, versions=versions, artifacts=artifacts)
    except StackdoctorError as exc:
        return matrix, [f"index witness: {exc}"]
    return wider, notes


def _learned(notes: list[str]) -> tuple[list[str], list[str]]:
    """witness_matrix's notes: (what was learned, where; what failed)."""
    failed = [n for n in notes if n.startswith("index witness:")]
    return [n for n in notes if n not in failed], failed


def _adopt(opts: InstallOptions, view: MachineView, old: Plan, new: Plan, request: Request, learned: list[str], *, hypothetical: bool) -> Plan:
    """``new`` (planned from the widened matrix) in place of ``old``: where it was learned first, the warnings kept."""
    new.reasons[:0] = [n for n in learned if n not in new.reasons]
    # the old plan's warnings stay, but for a build's "announced, no artifact seen yet" (resolve.fit): the widened
    # matrix says itself whether that still holds, and an artifact just learned is the witness that it does not
    new.warnings.extend(w for w in old.warnings if w not in new.warnings and "no artifact seen yet" not in w)
    if hypothetical and new.satisfiable:
        new.machine = describe_machine(opts, view)
        new.command = generic_command(new, request, windows=windows_shell(opts, view))
    return new


def unknown_pin(torch: str | None, matrix: Matrix) -> str | None:
    """The exact torch version asked for (``--torch 2.16.0`` or ``==2.16.0``) when the matrix does not know it."""
    from packaging.version import InvalidVersion, Version

    if not torch:
        return None
    text = torch.strip().removeprefix("==").strip()
    try:
        v = Version(text)
    except InvalidVersion:
        return None
    known = {str(r.version) for r in matrix.releases} | {str(p.version) for r in matrix.releases for p in r.patches}
    return None if str(v) in known else str(v)


# A pinned torch version the matrix does not know is asked of the sources (install/locate.py's witness_pin): the
# matrix is a snapshot, and a release published after it is real (unknown is not absent). Only a version that cannot
# be a release yet is refused at once, as a typo: PyTorch ships a minor release every two to three months, so a matrix
# a few months old may lack the next MINORS_AHEAD minors of its newest major (and the first minors of the next major),
# but nothing further ("2.31" when the newest known is 2.15.0, "4.0"). Older versions and unknown patches of a known
# minor (2.13.1; 1.13.1 below the matrix's range) are left to the sources too.
MINORS_AHEAD = 2


def refuse_implausible_pin(torch: str | None, matrix: Matrix) -> None:
    """Refuse ``--torch V`` (or ``==V``) beyond any release that can exist by the rule above, in one sentence with the
    nearest known releases; every other request passes (a version the sources may still serve, a specifier).

    :raises UsageError: V cannot be a torch release yet."""
    import difflib

    from packaging.version import InvalidVersion, Version

    pin = unknown_pin(torch, matrix)
    if pin is None or not matrix.releases:
        return
    try:
        v = Version(pin)
    except InvalidVersion:  # pragma: no cover - unknown_pin parsed it
        return
    newest = max(r.version for r in matrix.releases)
    if (v.major, v.minor) <= (newest.major, newest.minor + MINORS_AHEAD) or (v.major == newest.major + 1 and v.minor <= MINORS_AHEAD):
        return
    known = sorted({r.version for r in matrix.releases} | {p.version for r in matrix.releases for p in r.patches}, reverse=True)
    spelled = {str(k): str(k) for k in known} | {f"{k.major}.{k.minor}": str(k) for k in reversed(known) if k.micro == 0}
    typed = (torch or "").strip().removeprefix("==").strip()
    digits = re.sub(r"\D", "", typed)  # a dot misplaced (2.31 for 2.3.1), then digits swapped (2.31 for 2.13), then alike
    near = [spelled[k] for k in spelled if re.sub(r"\D", "", k) == digits]
    near += [spelled[k] for k in spelled if sorted(re.sub(r"\D", "", k)) == sorted(digits)]
    near += [spelled[m] for m in difflib.get_close_matches(typed, list(spelled), n=4, cutoff=0.5)]
    nearest = list(dict.fromkeys([*near, str(newest)]))[:3]
    raise UsageError(f"--torch {typed}: no torch release has this version (the newest is {newest}); the nearest releases: {', '.join(nearest)}.")


def witness_pin(
    opts: InstallOptions, view: MachineView, python: str, matrix: Matrix, plan: Plan, cfg: InstallerConfig, *, hypothetical: bool
) -> tuple[Plan, Request, Matrix, Surveyed]:
    """``--torch V`` that the matrix lacks: before refusing, ask the sources (this machine's build's: the configured
    ones, ``--find-links``, the PyTorch index or mirror) whether they serve V, and learn it from their files."""
    from stackdoctor.resolve.availability import learn_sources, survey_sources

    version = unknown_pin(opts.torch, matrix) or ""
    base, request = resolve_plan(replace(opts, torch=None), view, python, matrix)  # where this machine's build is looked for
    client = index_client(opts)
    try:
        surveyed = survey_sources(base if base.satisfiable else plan, **_survey_options(opts, cfg, matrix, client, hypothetical=hypothetical))
        sources = learn_sources(surveyed, [version], client)
        wider, notes = witness(matrix, sources, [version]) if sources else (matrix, [])
    finally:
        if client is not None:
            client.close()
    learned, failed = _learned(notes)
    if wider is matrix:
        plan.warnings.extend(n for n in [*surveyed.notes, *failed] if n not in plan.warnings)
        return plan, make_request(opts, view, matrix), matrix, surveyed
    new, request = resolve_plan(opts, view, python, wider)
    new.warnings.extend(n for n in failed if n not in new.warnings)
    return _adopt(opts, view, plan, new, request, learned, hypothetical=hypothetical), request, wider, surveyed


def check_sources(
    opts: InstallOptions, out: InstallOutcome, view: MachineView, python: str, matrix: Matrix, request: Request, cfg: InstallerConfig, *,
    hypothetical: bool, surveyed: Surveyed | None = None, fit_for: Callable[[Matrix], Callable[[str, str], str]] | None = None,
) -> tuple[Sourcing, Matrix, Request]:
    """Locate the plan's wheels (:func:`stackdoctor.resolve.availability.check`). Unpinned, a torch release newer than the
    matrix's newest that a source serves is learned from its files (:func:`stackdoctor.wheels.learn.witness_matrix`) and
    planned when it fits; ``out.plan`` is the plan so far; ``surveyed``: the sources already asked; ``fit_for(matrix)``: how the sources' words say whether a build fits this machine (:func:`stackdoctor.install.flow.fit_words`). Returns the sourcing, and the matrix and request it used."""
    from stackdoctor.resolve.availability import check, learn_sources, missing_artifacts, newer_offers, read_constraints, survey_sources, torch_offers
    from stackdoctor.wheels.index import python_version_of

    assert out.plan is not None
    plan = out.plan
    tags = target_tags(view, request)
    platform_tag = request.platform or view.facts.python.platform_tag
    client = index_client(opts)
    try:
        how = _survey_options(opts, cfg, matrix, client, hypothetical=hypothetical)
        surveyed = survey_sources(plan, reuse=surveyed, **how)  # the pinned witness's survey, when it asked the same
        if not opts.torch and surveyed.named_failure is None:
            pyv = python_version_of(view.facts, request)
            offers = torch_offers(surveyed.probes, tags, python_version=pyv, matrix=matrix, platform_tag=platform_tag)
            newer = newer_offers(offers, matrix)
            lacking = missing_artifacts(offers, matrix, plan, platform_tag)  # known releases whose build for this target the matrix lacks
            sources = learn_sources(surveyed, newer + lacking, client) if newer or lacking else []
            if sources:
                wider, notes = witness(matrix, sources, newer, lacking)
                learned, failed = _learned(notes)
                plan.warnings.extend(n for n in failed if n not in plan.warnings)
                if wider is not matrix:
                    new, new_request = resolve_plan(opts, view, python, wider)
                    if new.satisfiable and new.torch_version in newer + lacking:  # it fits this machine: planned
                        plan = out.plan = _adopt(opts, view, plan, new, new_request, learned, hypothetical=hypothetical)
                        matrix, request = wider, new_request
                        how = _survey_options(opts, cfg, matrix, client, hypothetical=hypothetical)
        if not tags:
            plan.warnings.append("the target's wheel tags are unknown, so the index check only confirmed that the versions exist.")
        sourcing = check(
            plan,
            matrix=matrix,
            tags=tags,
            python_version=python_version_of(view.facts, request),
            platform_tag=platform_tag,
            # a companion added to a torch that is there: never another torch instead; to none: never another variant
            pinned=bool(opts.torch) or hypothetical or (request.keep_torch and view.facts.torch.installed),
            keep_variant=request.keep_torch,
            constraints=read_constraints(cfg.constraints) if not hypothetical else [],
            reresolve=lambda v, variant=None: resolve_plan(replace(opts, variant=variant) if variant else opts, view, python, matrix, torch=v)[0],
            fit=fit_for(matrix) if fit_for is not None else None,
            surveyed=surveyed,
            **how,
        )
        if not opts.sources.offline:  # an announced build whose wheel an index showed: remembered as known (issue 43)
            from stackdoctor.install.remember import remember_absent, remember_confirmed
            from stackdoctor.resolve.packages import variant_index_url

            said = remember_confirmed(sourcing.plan, sourcing, matrix, platform_tag, client) or (
                remember_absent(plan, sourcing, matrix, platform_tag, variant_index_url(matrix, request, plan.variant)) if plan.variant else None)
            if said:
                sourcing.plan.reasons.append(said)
        return sourcing, matrix, request
    finally:
        if client is not None:
            client.close()


def apply_delivery(plan: Plan, sourcing: Sourcing, python: str, installer: str, view: MachineView) -> None:
    from stackdoctor.install.argv import install_command

    plan.command = install_command(plan, python, installer, uv=view.facts.python.uv_path or "uv", source_args=sourcing.delivery.args)
    plan.command_env = dict(sourcing.delivery.env)


def check_dependencies(sourcing: Sourcing, view: MachineView, request: Request, python: str) -> None:
    from stackdoctor.install.backup import snapshot
    from stackdoctor.resolve.availability import marker_environment, missing_dependencies
    from stackdoctor.system import System
    from stackdoctor.wheels.index import python_version_of

    local = [p for p in sourcing.probes if p.answered and p.source.local and any(s is p.source for s in sourcing.delivery.used)]
    tags = target_tags(view, request)
    env = marker_environment(python_version_of(view.facts, request), request.platform or view.facts.python.platform_tag, view.facts.python.implementation)
    pyv = python_version_of(view.facts, request)
    missing = missing_dependencies(sourcing.roots, local, {}, tags, python_version=pyv, environment=env)
    if missing:  # what the target already has may cover them: ask it only now
        snap = snapshot(System.from_env(), python)
        installed = dict(snap.versions) if snap.ok else {}
        missing = missing_dependencies(sourcing.roots, local, installed, tags, python_version=pyv, environment=env)
    if missing:
        where = ", ".join(p.source.url for p in local) or "the local sources"
        raise IndexError_(
            f"{', '.join(missing[:8])}{' ...' if len(missing) > 8 else ''} (needed by {sourcing.plan.packages[0].requirement}) "
            f"{'is' if len(missing) == 1 else 'are'} in none of {where}, and no index can serve {'it' if len(missing) == 1 else 'them'}"
            " (--offline, --no-index, or every index unreachable); add the wheels to the folder, or allow an index."
        )


