"""The index the user reaches confirms an announced build (issue 43): when the install flow's locate step finds the
wheel of a build the matrix only announces (a release-day build matrix, no artifact seen), the build is learned from
that index's files (:func:`stackdoctor.learn.learn`: its file names and core metadata, the artifact's URL and sha256)
and remembered in the user's learned layer (``~/.config/stackdoctor/learned.yaml`` or ``STACKDOCTOR_LEARNED``), so the
next run plans it as known. Only what an index showed is remembered: an unreachable index confirms nothing, a wheel
listed without its sha256 is no artifact to name, and a layer this user does not own is not written."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.install.index import IndexClient
    from stackdoctor.matrix import Matrix
    from stackdoctor.plan import Plan
    from stackdoctor.resolve.availability import Sourcing

__all__ = ["remember_confirmed"]


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
    from stackdoctor.errors import StackdoctorError
    from stackdoctor.learn import learn
    from stackdoctor.resolve.survey import ProbeSource

    try:
        res = learn(ProbeSource(probe, client), versions=[str(plan.torch_version)], companions=False)
    except StackdoctorError:
        return None
    rows = [_only(r, str(plan.variant)) for r in res.rows if r.get("version") == plan.torch_version]
    rows = [r for r in rows if r is not None]
    if not rows:
        return None
    return _write(rows[0], plan, match.url, match.sha256)


def _only(row: dict[str, Any], variant: str) -> dict[str, Any] | None:
    """The learned row with only the planned build (what was confirmed); None when it was not learned."""
    vs = [v for v in row.get("variants") or [] if v.get("name") == variant]
    if not vs:
        return None
    out = dict(row)
    out["variants"] = vs
    out["builds"] = "partial"  # one index's builds: a build it does not name is unknown, never absent
    return out


def _write(row: dict[str, Any], plan: Plan, url: str, sha256: str) -> str | None:
    """Merge ``row`` into the user's learned layer (its builds merged by name with a row already there)."""
    from stackdoctor.errors import StackdoctorError
    from stackdoctor.learn import LearnResult, read_layer, write_layer
    from stackdoctor.matrix.load import _own_layer, learned_layer_path
    from stackdoctor.learn_wheels import public_url

    path = learned_layer_path()
    what = f"torch {plan.torch_version} {plan.variant}"
    if os.path.lexists(path) and not _own_layer(path, explicit=bool(os.environ.get("STACKDOCTOR_LEARNED"))):
        return f"{what}: the index confirmed the announced build ({public_url(url)}, sha256 {sha256}); {path} is not this user's own file, so it was not remembered"
    try:
        doc = read_layer(path)
        old = next((r for r in doc.get("releases") or [] if str(r.get("version")) == row["version"]), None)
        if old is not None:
            kept = [v for v in old.get("variants") or [] if v.get("name") not in {n.get("name") for n in row["variants"]}]
            row = {**old, **row, "variants": [*kept, *row["variants"]]}
        write_layer(path, doc, LearnResult(rows=[row]))
    except (StackdoctorError, OSError) as exc:
        return f"{what}: the index confirmed the announced build ({public_url(url)}, sha256 {sha256}); it could not be remembered in {path} ({exc})"
    return f"{what}: the index confirmed the announced build ({public_url(url)}, sha256 {sha256}); remembered in {path}, so the next plan knows it"
