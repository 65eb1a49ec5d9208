"""The index the user reaches confirms an announced build (issue 43): when the install flow's locate step finds the
wheel of a build the matrix only announces (a release-day build matrix, no artifact seen), the build is learned from
that index's files (:func:`stackdoctor.wheels.learn.learn`: its file names and core metadata, the artifact's URL and sha256)
and remembered in the user's learned layer (``~/.config/stackdoctor/learned.yaml`` or ``STACKDOCTOR_LEARNED``), so the
next run plans it as known. Only what an index showed is remembered: an unreachable index confirms nothing, a wheel
listed without its sha256 is no artifact to name, and a layer this user does not own is not written."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from stackdoctor.matrix import platform_words

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan
    from stackdoctor.resolve.availability import Sourcing
    from stackdoctor.wheels.index import IndexClient

__all__ = ["remember_absent", "remember_confirmed"]


def _announced(plan: Plan, matrix: Matrix, platform_tag: str | None) -> bool:
    from stackdoctor.matrix import parse_platform

    if not (plan.torch_version and plan.variant and platform_tag):
        return False
    row = matrix.release(plan.torch_version)
    if row is None or str(row.version) != plan.torch_version:
        return False
    os_, arch, _ = parse_platform(platform_tag)
    return row.build_state(plan.variant, os_, arch) == "announced"


def remember_confirmed(plan: Plan, sourcing: Sourcing, matrix: Matrix, platform_tag: str | None, client: IndexClient | None) -> str | None:
    """Learn and remember the planned build when the matrix only announces it and an answering source lists its wheel
    (with its sha256); the sentence that says so (None: nothing to remember, or nothing could be)."""
    if not _announced(plan, matrix, platform_tag):
        return None
    match = next((m for m in sourcing.matches if m.package == "torch"), None)
    if match is None or not match.sha256:
        return None
    probe = next((p for p in sourcing.probes if p.answered and any(f.filename == match.filename for f in p.files.get("torch") or [])), None)
    if probe is None:
        return None
    from stackdoctor.core.errors import StackdoctorError
    from stackdoctor.resolve.survey import ProbeSource
    from stackdoctor.wheels.learn import learn

    try:
        res = learn(ProbeSource(probe, client), versions=[str(plan.torch_version)], companions=False)
    except StackdoctorError:
        return None
    rows = [o for r in res.rows if r.get("version") == plan.torch_version and (o := _only(r, str(plan.variant))) is not None]
    if not rows:
        return None
    what = f"torch {plan.torch_version} {plan.variant}"
    return _write(rows[0], what, f"{what}: the index confirmed the announced build ({_public(match.url)}, sha256 {match.sha256}); remembered in {{path}}, so the next plan knows it")


def remember_absent(planned: Plan, sourcing: Sourcing, matrix: Matrix, platform_tag: str | None, index_url: str) -> str | None:
    """The planned build was only announced and the index it is planned from (``index_url``: ``<base>/<variant>``)
    answered with its full listing of torch (a project page lists every file) without a wheel of it for this platform:
    remembered as known absent there (``absent_on``), for that platform only. An index that did not answer, a
    find-links folder, or a listing with the build: nothing remembered."""
    from stackdoctor.matrix import parse_platform
    from stackdoctor.wheels.index import wheel_parts

    if not _announced(planned, matrix, platform_tag) or any(m.package == "torch" and f"=={planned.torch_version}+{planned.variant}" in m.requirement
                                                             for m in sourcing.matches):
        return None
    probe = next((p for p in sourcing.probes if p.status == "ok" and p.source.kind == "index" and p.source.url.rstrip("/") == index_url.rstrip("/")
                  and p.files.get("torch")), None)
    if probe is None:
        return None
    fam = parse_platform(str(platform_tag))[:2]
    for f in probe.files.get("torch") or []:
        parts = wheel_parts(f.filename)
        if parts is not None and str(parts[1]) == f"{planned.torch_version}+{planned.variant}" and any(
                parse_platform(t.rsplit("-", 1)[-1])[:2] == fam for t in parts[2]):
            return None  # listed: not absent (the installer's own check decides the rest)
    release = matrix.release(str(planned.torch_version))
    variant = release.variant(str(planned.variant)) if release is not None else None
    tags = [t for t in (variant.announced if variant is not None else ()) if parse_platform(t)[:2] == fam] or [str(platform_tag)]
    import datetime as dt

    from stackdoctor.wheels.learn_wheels import public_url

    today = dt.date.today().isoformat()
    page = public_url(probe.where("torch"))
    row = {"version": str(planned.torch_version), "learned": today, "source": f"{page} (its listing of torch; learned {today} by stackdoctor install)",
           "builds": "partial",
           "variants": [{"name": str(planned.variant), "source": f"{page} (listed without it; learned {today} by stackdoctor install)",
                         "learned": today, "absent_on": {public_url(index_url): tags}}]}
    what = f"torch {planned.torch_version} {planned.variant}"
    return _write(row, what, f"{what}: {public_url(index_url)} lists torch without the announced build for {platform_words(tags[0])}; "
                             "remembered as absent there, so the next plan does not plan it from that index")


def _only(row: dict[str, Any], variant: str) -> dict[str, Any] | None:
    """The learned row with only the planned build (what was confirmed); None when it was not learned."""
    vs = [v for v in row.get("variants") or [] if v.get("name") == variant]
    if not vs:
        return None
    out = dict(row)
    out["variants"] = vs
    out["builds"] = "partial"  # one index's builds: a build it does not name is unknown, never absent
    return out


def _public(url: str) -> str:
    from stackdoctor.wheels.learn_wheels import public_url

    return public_url(url)


def _write(row: dict[str, Any], what: str, done: str) -> str:
    """Merge ``row`` into the user's learned layer (its builds merged by name with a row already there, an
    ``absent_on`` added to the one it had); ``done``: the sentence when written (``{path}``: the layer)."""
    from stackdoctor.core.errors import StackdoctorError
    from stackdoctor.matrix.load import learned_layer_path, own_layer
    from stackdoctor.wheels.learn import LearnResult, read_layer, write_layer

    path = learned_layer_path()
    if os.path.lexists(path) and not own_layer(path, explicit=bool(os.environ.get("STACKDOCTOR_LEARNED"))):
        return f"{what}: {path} is not this user's own file, so what the index showed was not remembered"
    try:
        doc = read_layer(path)
        old = next((r for r in doc.get("releases") or [] if str(r.get("version")) == row["version"]), None)
        if old is not None:
            new = {v["name"]: v for v in row["variants"]}
            kept = [v for v in old.get("variants") or [] if v.get("name") not in new]
            for o in old.get("variants") or []:
                n = new.get(o.get("name"))
                if n is not None:  # an artifact seen wins over an absence; absences add up, index by index
                    absent = {u: sorted({*o.get("absent_on", {}).get(u, []), *n.get("absent_on", {}).get(u, [])})
                              for u in {**o.get("absent_on", {}), **n.get("absent_on", {})}}
                    new[o["name"]] = {**(n if n.get("platforms") else o), **({"absent_on": absent} if absent else {})}
            row = {**old, **row, "variants": [*kept, *new.values()]}
        write_layer(path, doc, LearnResult(rows=[row]))
    except (StackdoctorError, OSError) as exc:
        return f"{what}: what the index showed could not be remembered in {path} ({exc})"
    return done.replace("{path}", str(path))
