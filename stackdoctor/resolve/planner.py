"""Building the plan: the resolver's stages (target, candidates, the GPU build, the CPU build, nothing at all); a platform with a path of its own is its kind's (:meth:`Accelerator.plan_target`: a Jetson's wheel source, macOS's default build)."""

from __future__ import annotations

from packaging.version import Version

from stackdoctor import kinds
from stackdoctor.core.versions import release as release_tuple
from stackdoctor.matrix import (
    OS_WORDS,
    Matrix,
    Release,
    variant_kind,
)
from stackdoctor.model.plan import Plan, PlanError, Rejected, Request
from stackdoctor.model.view import MachineView, facts_of
from stackdoctor.resolve.candidates import english_sentence, newer_than, release_candidates
from stackdoctor.resolve.installed import mind_installed
from stackdoctor.resolve.machine import Gpu, Target, target_from
from stackdoctor.resolve.packages import finish, paired_companions, with_companion
from stackdoctor.resolve.variant_fit import (
    Fit,
    Reject,
    best_gpu_fit,
    cpu_fits,
    fit_variant,
    gpu_subsets,
    gpu_summary,
    kind_name,
    kind_version,
    platform_tag_for,
    python_fits,
    unfit_gpus,
)


def _fallback_suggestions(
    t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], cands: list[tuple[Release, Version]]
) -> list[str]:
    """What would make a GPU build possible: a driver upgrade, or another torch release."""
    out: list[str] = []
    newest = cands[0] if cands else None
    if newest:
        out.extend(_driver_suggestion(t, matrix, request, kind, gpus, newest))
    # another release (ignoring the pin) that runs on these GPUs with this driver
    for r in matrix.releases:
        if any(r.version == c[0].version for c in cands[:1]):
            continue
        best, _ = best_gpu_fit(r, r.version, t, matrix, Request(**{**request.__dict__, "torch": None, "variant": "auto"}), kind, gpus, None)
        if best is not None:
            out.append(f"torch {r.version} {best.variant.name} supports this GPU with this driver (--torch {r.version})")
            break
    return out


def _driver_suggestion(t: Target, matrix: Matrix, request: Request, kind: str, gpus: list[Gpu], newest: tuple[Release, Version]) -> list[str]:
    """The driver that would run a ``kind`` build of ``newest`` on these GPUs (the build needing the oldest driver)."""
    needed: list[tuple[tuple[int, ...], tuple[int, ...], str, str, str]] = []
    for v in newest[0].variants:
        if v.kind != kind:
            continue
        try:
            fit_variant(newest[0], newest[1], v, t, matrix, request, gpus)
        except Reject as rej:
            # would it fit with that driver (the minor-version-compatibility floor first: the oldest that runs it)?
            for drv in (d for d in (rej.driver_floor, rej.driver_needed) if d):
                t2 = Target(**{**t.__dict__, "driver": drv})
                try:
                    fit_variant(newest[0], newest[1], v, t2, matrix, request, gpus)
                except Reject:
                    continue
                needed.append((release_tuple(drv), kind_version(v), drv, v.name, rej.driver_needed or drv))
                break
    if not needed:
        return []
    needed.sort()
    _, _, drv, name, full = needed[0]
    if drv != full:
        return [f"upgrade the driver to >= {drv} (torch {newest[1]} {name} then runs on this GPU, through {kinds.build_label(kind)} minor-version compatibility; "
                f">= {full} for all of it)"]
    return [f"upgrade the driver to >= {drv} (torch {newest[1]} {name} then runs on this GPU)"]


# the order a user can act in on what holds a build back: the driver first, then the Python, the platform, the GPU
_BLOCKER_ORDER = {"driver": 0, "python": 1, "platform": 2, "device": 3, "unknown": 4, "newer": 5}


def _acting_order(rejected: list[Rejected]) -> list[Rejected]:
    """Each release's rejections (newest release first, as found) in the order a user can act on them."""
    releases = list(dict.fromkeys(r.torch for r in rejected))
    return sorted(rejected, key=lambda r: (releases.index(r.torch), _BLOCKER_ORDER.get(r.blocker or "", 6)))


def nothing_suggestions(t: Target, matrix: Matrix, request: Request, cands: list[tuple[Release, Version]]) -> list[str]:
    """The nearest requests that would install anything at all (another torch, another Python)."""
    out: list[str] = []
    relaxed = Request(**{**request.__dict__, "torch": None})
    for r in matrix.releases:
        if cands and r.version == cands[0][0].version:
            continue
        for v in r.variants:
            if v.kind != kinds.CPU:
                continue
            try:
                fit_variant(r, r.version, v, t, matrix, relaxed, [])
            except Reject:
                continue
            out.append(f"torch {r.version} is the newest release with a build for this platform and Python (--torch {r.version})")
            break
        if out:
            break
    if cands and t.python:
        rel = cands[0][0]
        cpu = rel.variant("cpu")
        if cpu is not None:
            for py in sorted(cpu.pythons, key=lambda s: release_tuple(s), reverse=True):
                if py.endswith("t") != t.python.endswith("t") or py in rel.torch_only_pythons or not rel.python_on(py, t.os, t.arch):
                    continue
                t2 = Target(**{**t.__dict__, "python": py})
                try:
                    platform_tag_for(rel, cpu, t2)
                except Reject:
                    break
                out.append(f"Python {py} (torch {cands[0][1]} has wheels for {', '.join(cpu.pythons)}; --python-version {py})")
                break
    return out


def resolve(view: MachineView, matrix: Matrix, request: Request) -> Plan:
    """The install plan for ``request`` on the machine ``view`` shows (:func:`stackdoctor.reconcile.reconcile`),
    from ``matrix``. Pure. Raw facts are refused (:class:`~stackdoctor.model.view.NotAView`): the type is the guard.

    One honest answer either way: a plan that cannot be met has no command and its ``error`` says why in one
    sentence (exit 1, README "Exit codes"); a plan against the installed torch says what it replaces, and
    never downgrades silently (:func:`mind_installed`)."""
    facts_of(view)  # the guard: raw facts are refused
    plan = _resolve(view, matrix, request)
    if not plan.satisfiable:
        plan.packages, plan.command = [], []
        if plan.error is None:
            plan.error = PlanError("unmet", _unmet_sentence(plan), 1)
        return plan
    mind_installed(view, matrix, request, plan)
    return plan


def _unmet_sentence(plan: Plan) -> str:
    why = plan.reasons[0] if plan.reasons else "no torch build fits this request"
    s = f"No torch build fits this request: {why}"
    if plan.suggestions:
        s += f" (would work instead: {plan.suggestions[0]})"
    return s.rstrip(".") + "."


def _resolve(view: MachineView, matrix: Matrix, request: Request) -> Plan:
    """The stages: the target, the releases the request allows, then the platform's own path (a Jetson's wheel
    source, macOS's default build) or the devices' (a GPU build of the kind that serves them, else a CPU build)."""
    plan = Plan(torch_version=None, variant=None, index_url=None)
    t = target_from(view, matrix, request)
    plan.warnings.extend(t.notes)
    if not _platform_known(t, plan):
        return plan
    cands = _releases(matrix, request, plan)
    if not cands:
        return plan
    own = next((a for a in kinds.ALL if a.plans_target(t)), None)  # a path of its own: a Jetson's wheel source, macOS's default build
    if own is not None:
        return own.plan_target(view, matrix, request, t, cands, plan)
    return _resolve_devices(view, matrix, request, t, cands, plan)


Candidates = list[tuple[Release, Version]]


def _platform_known(t: Target, plan: Plan) -> bool:
    if t.os == "unknown" or not t.arch:
        plan.reasons.append("the target platform is unknown (no OS / architecture facts), so no wheel can be chosen")
        plan.suggestions.append("name the target with --platform TAG (e.g. manylinux_2_28_x86_64, win_amd64, macosx_14_0_arm64)")
        return False
    if not t.python:
        plan.warnings.append("the target's Python version is unknown: Python compatibility was not checked (--python-version X.Y)")
    return True


def _releases(matrix: Matrix, request: Request, plan: Plan) -> Candidates:
    """The releases the request allows whose builds the matrix knows, with the companions asked for and the variant
    named; none (the plan saying why) when nothing is left."""
    cands, err = release_candidates(matrix, request)
    if err:
        plan.reasons.append(err)
        plan.suggestions.append(f"torch {matrix.releases[0].version} is the newest release the matrix knows" if matrix.releases else "load a matrix")
        return []
    own = kinds.for_variant(request.variant)
    if request.variant != "auto" and variant_kind(request.variant) is None and (own is None or own.index_builds):
        plan.reasons.append(english_sentence("nc_r_not_variant", variant=request.variant))  # the variants' forms: the locale's
        return []
    unknown_builds = [(r, v) for r, v in cands if not r.variants]
    if unknown_builds:
        plan.warnings.append(
            f"torch {', '.join(str(v) for _, v in unknown_builds)}: the matrix does not know its builds yet; not considered "
            "(a --matrix file can add them)"
        )
    cands = [(r, v) for r, v in cands if r.variants]
    if not cands:
        plan.reasons.append("no torch release in the request has builds the matrix knows")
        return []
    cands = _with_companions_known(matrix, request, cands, plan)
    return _publishing(matrix, request, cands, plan) if cands else []


def _with_companions_known(matrix: Matrix, request: Request, cands: Candidates, plan: Plan) -> Candidates:
    """Unpinned, with torchvision / torchaudio asked for: the releases whose pairing the matrix knows, naming what is missing."""
    comps = [p for p in request.packages if p in ("torchvision", "torchaudio")]
    if not comps or request.torch:
        return cands

    def missing(v: Version) -> list[str]:
        tv, ta = matrix.paired(v)
        return [c for c in comps if {"torchvision": tv, "torchaudio": ta}[c] is None]

    with_all = [(r, v) for r, v in cands if not missing(v)]
    if with_all and with_all[0][1] != cands[0][1]:
        newer = [(r, v) for r, v in cands if v > with_all[0][1]]
        gone = sorted({c for _, v in newer for c in missing(v)})
        plan.reasons.append(
            f"torch {', '.join(str(v) for _, v in newer[:3])}{' ...' if len(newer) > 3 else ''}: no {' or '.join(gone)} paired with it is known; "
            f"torch {with_all[0][1]} is the newest release with {' and '.join(comps)} (install torch alone for a newer one)"
        )
        return with_all
    if not with_all:
        gone = sorted({c for _, v in cands for c in missing(v)})
        plan.reasons.append(f"no torch release in the matrix has a known {' and '.join(gone)} pairing")
        return []
    return cands


def _publishing(matrix: Matrix, request: Request, cands: Candidates, plan: Plan) -> Candidates:
    """With ``--variant``: the releases that publish it; none, saying which release newest does."""
    own = kinds.for_variant(request.variant)
    if request.variant == "auto" or (own is not None and not own.index_builds):  # a kind's own wheel source (JetPack's)
        return cands
    publishing = [(r, v) for r, v in cands if r.variant(request.variant) is not None]
    if not publishing:
        rel, ver = cands[0]
        if not rel.builds_listed:  # no source lists its builds: the build is unknown, never "not published"
            plan.reasons.append(
                f"torch {ver}: no {request.variant} build of it is known (unknown: no source lists all its builds; "
                f"the matrix knows {', '.join(v.name for v in rel.variants)})"
            )
        else:
            plan.reasons.append(
                f"torch {ver if len(cands) == 1 else _some(cands)} "
                f"publishes no {request.variant} build (torch {ver} has {', '.join(v.name for v in rel.variants)})"
            )
        newest = next((r for r in matrix.releases if r.variant(request.variant) is not None), None)
        if newest is not None:
            plan.suggestions.append(f"torch {newest.version} is the newest release with a {request.variant} build (--torch {newest.version})")
    return publishing


def _some(cands: Candidates) -> str:
    """``2.9.1, 2.9.0, 2.8.0 ...``: the first three releases, and that there are more."""
    return ", ".join(str(v) for _, v in cands[:3]) + (" ..." if len(cands) > 3 else "")


def _resolve_devices(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: Candidates, plan: Plan) -> Plan:
    """The kind that serves the target's devices (:func:`accelerators.serving`) plans its GPU build; none fits, or
    none is served: a CPU build (with the companion a kind pairs with it), else PyPI's default build, else nothing."""
    gpus = list(t.gpus)
    acc = kinds.serving(gpus, t)
    kind: str = acc.build_kind if acc is not None else kinds.CPU
    if acc is not None:
        gpus, why_not = acc.select_devices(gpus, plan.warnings)
        if why_not:
            plan.reasons.append(why_not)
            kind = kinds.CPU
    explicit = request.variant != "auto"
    if explicit:
        vk = variant_kind(request.variant)
        kind = vk[0] if vk else kind
    companion: dict[str, kinds.Companion] = {}
    beside = _companion_kind(request, kind, gpus)
    if beside is not None:
        cands, companion = paired_companions(view, request, t, beside, cands, plan)
        if not cands:
            return plan
    if kind != kinds.CPU:
        planned = _gpu_build(view, matrix, request, t, cands, plan, kind, gpus)
        if planned is not None:
            return with_companion(view, request, planned, companion.get(planned.torch_version or "")) if companion else planned
        if explicit:
            plan.reasons.append(f"--variant {request.variant} does not fit this machine")
            return plan
    return _cpu_build(view, matrix, request, t, cands, plan, kind, gpus, companion)


def _companion_kind(request: Request, kind: str, gpus: list[Gpu]) -> kinds.Accelerator | None:
    """The kind whose companion package is planned beside torch: one of the devices' kinds that declares one, when the
    build planned is torch's CPU build (Ascend's torch-npu) or that kind's own build (a plug-in's), asked for or not."""
    acc = kinds.companion_kind({g.vendor for g in gpus})
    if acc is None or kind not in (kinds.CPU, acc.build_kind):
        return None
    return acc if request.variant in ("auto", kinds.CPU) or acc.serves(request.variant) else None


def _gpu_build(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: Candidates, plan: Plan, kind: str, gpus: list[Gpu]) -> Plan | None:
    """The newest release with a ``kind`` build that runs on every GPU, else on the largest group of them (hiding the
    rest); None when no release has one (the plan saying so, with what would make one possible)."""
    acc = kinds.for_build(kind)
    rejected_all: list[Rejected] = []
    for subset in gpu_subsets(gpus) if acc is not None and acc.mixed_subsets and gpus else [gpus]:
        rejected_here: list[Rejected] = []
        for rel, ver in cands:
            best, _ = best_gpu_fit(rel, ver, t, matrix, request, kind, subset, rejected_here)
            if best is None:
                continue
            plan.rejected.extend(_acting_order(rejected_here if subset is gpus else rejected_all + rejected_here))
            _gpu_reasons(request, t, cands, plan, kind, acc, ver, best, subset, gpus)
            if ver != cands[0][1] and any(r.blocker == "driver" and r.torch == str(cands[0][1]) for r in plan.rejected):
                plan.suggestions.extend(_driver_suggestion(t, matrix, request, kind, subset, cands[0]))
            return finish(view, matrix, request, best, plan)
        if subset is gpus:
            rejected_all = rejected_here
    # no GPU build anywhere in the request
    plan.rejected.extend(_acting_order(rejected_all))
    if gpus or t.driver:
        plan.reasons.append(
            f"no {kind_name(kind)} build of torch {cands[0][1] if len(cands) == 1 else _some(cands)} "
            f"runs on {gpu_summary(gpus) if gpus else 'this machine'}" + (f" with driver {t.driver}" if t.driver else "")
        )
    plan.suggestions.extend(_fallback_suggestions(t, matrix, request, kind, gpus, cands))
    return None


def _gpu_reasons(request: Request, t: Target, cands: Candidates, plan: Plan, kind: str, acc: kinds.Accelerator | None,
                 ver: Version, best: Fit, subset: list[Gpu], gpus: list[Gpu]) -> None:
    """Why this GPU build: the newest that runs on ``subset``; the newer releases it beats; the GPUs it leaves out."""
    what = gpu_summary(subset) if subset else "this machine"
    chosen = acc.chosen_reason(ver, best.variant.name, what, bool(request.torch), t) if acc is not None else None
    plan.reasons.append(chosen or f"torch {ver} {best.variant.name}: the newest {'requested ' if request.torch else ''}release and {kind_name(kind)} build for {what}")
    newer = newer_than(ver, cands)
    if newer:
        unknown = any(r.blocker == "unknown" and r.torch in {str(v) for _, v in newer} for r in plan.rejected)
        plan.reasons.append(
            f"an older release with a GPU build beats a CPU build of torch {newer[0][1]}: no {kind_name(kind)} build of "
            f"{', '.join(str(v) for _, v in newer)} {'is known to run' if unknown else 'runs'} here" + (" (see rejected)" if plan.rejected else "")
        )
    left = [g for g in gpus if g not in subset]
    if left and acc is not None:
        env = acc.hide_env(subset)
        best.env.update(env)
        var = acc.hide_var or "HIP_VISIBLE_DEVICES"
        plan.warnings.append(
            f"no {kind_name(kind)} build runs on every GPU: {gpu_summary(left)} would be left out"
            + (" (an integrated GPU)" if all(g.integrated for g in left) else "")
            + f"; hide it with {var}={env[var]}"
        )


def _cpu_build(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: Candidates, plan: Plan, kind: str, gpus: list[Gpu],
               companion: dict[str, kinds.Companion]) -> Plan:
    """The newest release with a CPU build for this platform and Python (beside the companion a kind pairs with it)."""
    cpu_rejects: list[str] = []
    for _rel, ver, fit in cpu_fits(cands, t, matrix, request, cpu_rejects):
        if str(ver) not in companion:  # else the companion's own reasons say why this build (with_companion)
            _cpu_reason(request, t, plan, kind, gpus, ver)
        if plan.suggestions:
            plan.reasons.append("to get a GPU build: " + "; or ".join(plan.suggestions))
        return with_companion(view, request, finish(view, matrix, request, fit, plan), companion.get(str(ver)))
    planned = _pypi_default_build(view, matrix, request, t, cands, plan, gpus, cpu_rejects)
    if planned is not None:
        return planned
    # nothing at all
    plan.torch_version = None
    plan.reasons.extend(cpu_rejects[:3] or ["no build of the requested torch fits this platform and Python"])
    plan.suggestions = [s for s in plan.suggestions if "driver" not in s]
    plan.suggestions.extend(nothing_suggestions(t, matrix, request, cands))
    plan.packages, plan.command = [], []
    return plan


def _cpu_reason(request: Request, t: Target, plan: Plan, kind: str, gpus: list[Gpu], ver: Version) -> None:
    unlisted = kinds.by_name(t.unlisted_kind)
    if kind == kinds.CPU and t.unlisted and not t.driver and unlisted is not None:
        reason, fix = unlisted.unlisted_reason(t.unlisted)
        plan.reasons.append(f"torch {ver} cpu: {reason}")
        plan.suggestions.append(fix)
    elif kind == kinds.CPU and not gpus and not t.driver:
        plan.reasons.append(f"torch {ver} cpu: no GPU found on this machine; the newest {'requested ' if request.torch else ''}release with a CPU build for it")
    else:
        plan.reasons.append(f"torch {ver} cpu: no GPU build fits{' (see rejected)' if plan.rejected else ''}; a CPU build is what works here")


def _pypi_default_build(view: MachineView, matrix: Matrix, request: Request, t: Target, cands: Candidates, plan: Plan, gpus: list[Gpu],
                        cpu_rejects: list[str]) -> Plan | None:
    """No CPU build: PyPI's default build (a GPU build, learned from its wheels) runs on the CPU too, as `pip install
    torch` does, unless it would see a GPU here it has no code for."""
    for rel, ver in cands:
        for v in rel.variants:
            if v.index != "pypi" or v.kind == kinds.CPU or (request.variant != "auto" and v.name != request.variant):
                continue
            try:
                platform_tag_for(rel, v, t)
                python_fits(rel, v, t, request.packages)
            except Reject:
                continue
            unfit = unfit_gpus(rel, ver, v, t, matrix, request, gpus)
            if unfit:
                cpu_rejects.insert(0, f"torch {ver}: no CPU build of it is known for {OS_WORDS.get(t.os, t.os)} {t.arch}, and PyPI's default build ({v.name}) {unfit}")
                continue
            where = {"torch": str(ver), "variant": v.name, "os": OS_WORDS.get(t.os, t.os), "arch": t.arch}  # whose libraries: the locale's
            plan.reasons.append(english_sentence("plan_pypi_cpu_as_well_python", **where, python=t.python) if t.python
                                else english_sentence("plan_pypi_cpu_as_well", **where))
            return finish(view, matrix, request, Fit(rel, ver, v), plan)
    return None
