"""The install flow: gather -> check the request -> resolve -> locate the wheels on the user's sources -> routes -> act.

:func:`install` takes an :class:`InstallOptions` and returns one :class:`InstallOutcome` (the plan, the exit code,
what happened, the installer's result, the error that stopped it); ``stackdoctor install`` renders it. The flow
prints nothing: what must be shown while it acts (the plan before the question, the installer's output, "putting
back ..." lines) goes through the :class:`Hooks` the command passes in.

The sources are the installer's own configuration (pip.conf / ``PIP_*``, uv.toml / ``[tool.uv]`` /
``UV_*``: :mod:`stackdoctor.install.sources`), ``--find-links`` and the PyTorch variant index or a ``--mirror``
(:mod:`stackdoctor.install.mirrors`); :mod:`stackdoctor.availability` asks them and says what the installer is
handed (never a source that did not answer). A torch release the matrix lacks but a source serves is learned
from its file names and core metadata (:func:`stackdoctor.learn.witness_matrix`) and planned, its reason saying
where it was learned. conda targets get both routes (:mod:`stackdoctor.install.conda`).

Exit codes: 0 done (or a dry run, or already satisfied), 1 the request cannot be met (``plan.variant`` is
None) or the install failed / was undone, 2 usage or index errors, 130 interrupted.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from stackdoctor import accelerators, pipeline
from stackdoctor.errors import ExitCode, IndexError_, StackdoctorError, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.availability import Sourcing, Surveyed
    from stackdoctor.facts import Facts
    from stackdoctor.install.index import IndexClient
    from stackdoctor.install.sources import InstallerConfig
    from stackdoctor.install.transaction import InstallResult
    from stackdoctor.matrix import Matrix
    from stackdoctor.plan import Plan, Request, Route
    from stackdoctor.system import CommandResult

KNOWN_PACKAGES = ("torch", "torchvision", "torchaudio")
PROBES = ["target", "platform", "nvidia", "rocm", "apple", "intel", "jetson"]
INSTALLERS = ("pip", "uv", "conda", "mamba", "micromamba", "pixi")
EMITS = ("requirements", "uv", "environment.yml")
_DRIVER_RE = re.compile(r"^\d{2,4}(\.\d{1,3}){0,3}$")


@dataclass
class InstallOptions:
    packages: list[str] = field(default_factory=list)
    torch: str | None = None
    variant: str = "auto"
    python: str | None = None
    installer: str = "pip"
    dry_run: bool = False
    json_out: bool = False
    yes: bool = False
    offline: bool = False
    no_index: bool = False
    index_base: str | None = None
    find_links: list[str] = field(default_factory=list)
    mirror: str | None = None
    matrix: list[str] = field(default_factory=list)
    emit: str | None = None
    python_version: str | None = None
    platform: str | None = None
    replay: str | None = None
    driver: str | None = None
    gpus: list[str] = field(default_factory=list)
    gfx: list[str] = field(default_factory=list)
    devices: dict[str, list[str]] = field(default_factory=dict)  # other kinds' what-if devices (--npu 910B): {"ascend": ["910B"]}
    remove_leftovers: bool = False
    recover: bool = False
    timeout_s: float = 3600.0
    index_timeout_s: float = 20.0
    verbose: bool = False  # -v: each step after the installer, with its time
    progress: bool = False  # a line before each step after the installer (the command sets it on a terminal)

    @property
    def what_if(self) -> bool:
        """A plan for another machine (``--driver``/``--gpu``/``--gfx`` too): never carried out here."""
        return bool(self.python_version or self.platform or self.replay or self.driver or self.gpus or self.gfx or any(self.devices.values()))

    @property
    def conda_installer(self) -> bool:
        return self.installer in ("conda", "mamba", "micromamba", "pixi")


What = Literal["planned", "unmet", "dry-run", "satisfied", "emitted", "declined", "installed", "failed", "recovered"]


@dataclass
class InstallOutcome:
    """What ``install`` did, for the command to render: the plan, the exit code and what happened.

    ``what``: ``unmet`` (no build fits), ``dry-run`` (planned, nothing changed), ``satisfied`` (the target already has
    the plan), ``emitted`` (``--emit`` text in ``emitted``), ``declined`` (the user said no), ``installed`` /
    ``failed`` (the installer ran: ``result`` for pip / uv, ``conda_result`` and ``route`` for conda), ``recovered``
    (``--recover``: ``result``); ``planned`` while the flow is still going (an error stopped it: ``error``)."""

    opts: InstallOptions
    plan: Plan | None = None
    exit_code: int = ExitCode.OK
    what: What = "planned"
    python: str = ""
    hypothetical: bool = False
    windows: bool = False  # the plan's commands are for a Windows shell (PowerShell)
    sourcing: Sourcing | None = None  # where the wheels were found (None: not checked)
    result: InstallResult | None = None
    route: Route | None = None  # the conda-forge route shown (dry run) or run (--installer conda, mamba, ...)
    conda_result: CommandResult | None = None
    emitted: str | None = None  # what --emit prints on stdout
    error: BaseException | None = None  # what stopped the flow (a StackdoctorError: one sentence; else interrupt or bug)

    @property
    def warnings(self) -> list[str]:
        return list(self.plan.warnings) if self.plan is not None else []


def _quiet(line: str, style: str = "") -> None:
    del line, style


def _no(question: str) -> bool | None:
    del question
    return None


@dataclass
class Hooks:
    """How the flow shows what must be seen while it acts; the command supplies them (the flow prints nothing)."""

    show: Callable[[InstallOutcome], None] = lambda outcome: None  # the plan is final: draw it (before any question)
    say: Callable[[str, str], None] = _quiet  # a line while acting (finishing a killed install, putting back)
    stream: Callable[[str], None] = lambda text: None  # the installer's own output
    confirm: Callable[[str], bool | None] = _no  # ask before changing the environment; None: no terminal to ask on


# ---------------------------------------------------------------------------- the entry


def keep_unprinted(outcome: InstallOutcome) -> None:
    """The outcome's last lines could not be printed (the output was closed): kept for the next install into that
    environment to say."""
    from stackdoctor.install.talk import save_unprinted, take_unprinted

    result = outcome.result
    if result is not None and result.prefix:
        kept = take_unprinted(result.prefix, remove=False)
        save_unprinted(result.prefix, [ln for ln in [result.message, *result.notes] if ln not in kept])


def install(opts: InstallOptions, hooks: Hooks | None = None) -> InstallOutcome:
    """The whole flow; every stop (an error, an interrupt) is in the returned outcome's ``error``."""
    from stackdoctor.install.sources import as_pip_takes_it

    opts = replace(opts, find_links=[as_pip_takes_it(x) for x in opts.find_links])  # m/sw, ~/wheels: the folder pip would read
    out = InstallOutcome(opts)
    try:
        out.exit_code = int(_flow(opts, hooks or Hooks(), out))
    except StackdoctorError as exc:
        out.error, out.exit_code = exc, int(exc.exit_code)
    except KeyboardInterrupt as exc:
        out.error, out.exit_code = exc, 130
    except BaseException as exc:  # noqa: BLE001 - handed back whole: the command re-raises it after its one document
        out.error, out.exit_code = exc, ExitCode.INTERNAL
    return out


def _flow(opts: InstallOptions, hooks: Hooks, out: InstallOutcome) -> int:
    check_options(opts)
    if opts.recover:
        return _recover_only(opts, hooks, out)
    facts, python, matrix = gather_facts(opts)
    out.python = python
    unfinished = _unfinished(opts, facts)
    if unfinished and not (opts.dry_run or opts.emit):
        code = _finish_earlier(opts, facts, python, hooks)  # before anything is planned: the facts of a half-installed torch are no base
        if code is not None:
            out.what = "failed"
            return code
        facts, python, matrix = gather_facts(opts)
    check_request(opts, facts, matrix)
    hypothetical = opts.what_if
    out.hypothetical, out.windows = hypothetical, _windows(opts, facts)
    plan, request = resolve_plan(opts, facts, python, matrix)
    cfg = installer_config(opts, facts)
    surveyed: Surveyed | None = None
    if not plan.satisfiable and not opts.conda_installer and unknown_pin(opts.torch, matrix):
        plan, request, matrix, surveyed = witness_pin(opts, facts, python, matrix, plan, cfg, hypothetical=hypothetical)
    out.plan = plan
    from stackdoctor.source_build import offer_from_source

    offer = offer_from_source(plan, facts, matrix, request)  # no wheel of the release runs on these GPUs: building it would
    if offer:
        plan.suggestions.append(offer)
    if unfinished and (opts.dry_run or opts.emit):
        plan.warnings.append(f"an install into {facts.python.env_prefix} was stopped halfway; `stackdoctor install --python {python} --recover` finishes it.")
    if hypothetical:
        plan.machine = describe_machine(opts, facts)
        if plan.satisfiable:  # an unmet plan has no command (not an empty `pip install`)
            plan.command = generic_command(plan, request, windows=out.windows)
    if not plan.satisfiable:
        out.what = "unmet"
        hooks.show(out)
        return ExitCode.FAILED
    from stackdoctor.install.conda import is_conda_target

    conda = is_conda_target(facts) or opts.conda_installer or opts.emit == "environment.yml"
    # already satisfied: the target has exactly this plan (checked before any network access)
    repair: str | None = None
    if not hypothetical and not opts.conda_installer and installed_matches(plan, facts):
        repair = _damage(python, plan)
        if repair is None:
            return _satisfied(opts, plan, out)
        plan.warnings.append(f"the installed build is damaged ({repair}): it is reinstalled")
    sourcing: Sourcing | None = None
    try:
        if not opts.conda_installer:  # conda, mamba, micromamba and pixi install from conda-forge, not from wheel sources
            sourcing, matrix, request = check_sources(opts, out, facts, python, matrix, request, cfg, hypothetical=hypothetical, surveyed=surveyed)
    except IndexError_ as exc:
        plan = out.plan
        unchecked = getattr(exc, "reason", "") == "unchecked"
        missing = getattr(exc, "reason", "") == "missing"  # the sources answered without it: for a what-if, a word, not the end
        if not ((unchecked or (missing and hypothetical)) and (hypothetical or ((opts.dry_run or opts.emit) and opts.offline))):
            if not hypothetical:
                plan.command = []  # no command that cannot reach its wheels
            hooks.show(out)
            raise
        plan.warnings.append(f"the wheels were not checked: {exc}" if unchecked else f"on this machine's sources: {exc}")
    if sourcing is not None:
        plan = out.plan = sourcing.plan
        if hypothetical:
            plan.machine = describe_machine(opts, facts)
            plan.command = generic_command(plan, request, windows=out.windows)
        else:
            _apply_delivery(plan, sourcing, python, request.installer, facts)
        plan.warnings.extend(n for n in sourcing.notes if n not in plan.warnings)
        if not hypothetical and not opts.conda_installer and repair is None and installed_matches(plan, facts):
            repair = _damage(python, plan)
            if repair is None:
                return _satisfied(opts, plan, out)
            plan.warnings.append(f"the installed build is damaged ({repair}): it is reinstalled")
    # a plain venv asking only for --emit environment.yml: the file needs a route, the screen offers none (a venv
    # has no conda route: no "conda install -p <venv>", no "route conda-forge (recommended)")
    marker = None if hypothetical or opts.conda_installer else _externally_managed_marker(facts)
    if marker:  # PEP 668: say so before anything runs (a dry run too), with the venv to make instead
        from stackdoctor.install.transaction import externally_managed

        plan.warnings.append(externally_managed(python, refused=False))
    offered = conda and (is_conda_target(facts) or opts.conda_installer)
    if offered:
        _add_routes(opts, plan, facts, matrix, request, hypothetical)
    out.sourcing = sourcing
    hooks.show(out)
    if sourcing is not None and sourcing.needs_dependency_check and not hypothetical:
        try:
            _check_dependencies(sourcing, facts, request, python)
        except IndexError_ as e:
            if sourcing.fell_back_from is None:
                raise
            raise IndexError_(f"{sourcing.fell_back_from.rstrip('.')}; the build that stood in for it cannot be installed either: {e}") from None
    if opts.emit:
        if conda and not offered:
            _add_routes(opts, plan, facts, matrix, request, hypothetical)
        out.emitted, out.what = _emit(opts, plan, facts, request), "emitted"
        return ExitCode.OK
    if opts.conda_installer:
        if opts.installer != "pixi" and not hypothetical and not is_conda_target(facts):
            raise UsageError(
                f"--installer {opts.installer}: {python} is not in a conda environment (no conda-meta in {facts.python.env_prefix or 'its prefix'}); "
                "use --installer pip or uv, or point --python at a conda env."
            )
        return _conda_install(opts, plan, hypothetical, hooks, out)
    if opts.dry_run or hypothetical:
        out.what = "dry-run"
        return ExitCode.OK
    if sourcing is None:
        raise IndexError_("the wheels could not be checked on any source, so nothing was installed; drop --offline or add --find-links DIR.")
    return _install(opts, plan, facts, python, request, sourcing, hooks, out, repair=repair is not None)


# ---------------------------------------------------------------------------- the request


def check_options(opts: InstallOptions) -> None:
    """Input errors that need no facts: one sentence each, exit 2."""
    if opts.installer not in INSTALLERS:
        raise UsageError(f"--installer must be one of {', '.join(INSTALLERS)}, not {opts.installer!r}.")
    if opts.emit is not None and opts.emit not in EMITS:
        raise UsageError(f"--emit must be requirements, uv or environment.yml, not {opts.emit!r}.")
    if opts.emit and opts.json_out:
        raise UsageError("--emit and --json both print on stdout; choose one.")
    if opts.timeout_s <= 0 or opts.index_timeout_s <= 0:
        raise UsageError("--timeout and --index-timeout must be positive.")
    unknown = [p for p in opts.packages if p.lower() not in KNOWN_PACKAGES]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0].lower(), sorted(KNOWN_PACKAGES), n=1, cutoff=0.75)
        if close:  # a typo of a family member (torchvison): name the one meant
            raise UsageError(f"stackdoctor install handles torch, torchvision and torchaudio, not {', '.join(unknown)}; did you mean {close[0]}?")
        raise UsageError(
            f"stackdoctor install handles torch, torchvision and torchaudio, not {', '.join(unknown)}; install other packages with pip afterwards."
        )
    if opts.driver is not None and not _DRIVER_RE.match(opts.driver.strip()):
        raise UsageError(f"--driver {opts.driver} is not an NVIDIA driver version (expected like 550.54.14 or 580).")
    if opts.mirror and opts.index_base:
        raise UsageError("--mirror and --index-base both name the PyTorch index; give one.")
    from stackdoctor.resolve import request_value_error

    bad = request_value_error(opts.torch, opts.platform, opts.python_version)
    if bad:
        raise UsageError(bad)


def check_request(opts: InstallOptions, facts: Facts, matrix: Matrix) -> None:
    """Input errors that need the facts or the matrix."""
    if opts.variant != "auto" and not opts.variant.startswith("jetson-"):
        known = published_variants(matrix)
        if opts.variant not in known:
            raise UsageError(f"no torch release publishes {opts.variant} (known variants: {', '.join(known)}).")
    if opts.gpus and not opts.driver and not facts.nvidia.driver_version and (opts.variant == "auto" or opts.variant.startswith("cu")):
        raise UsageError(f"--gpu {opts.gpus[0]}: this machine has no NVIDIA driver to assume; add --driver VERSION to plan a CUDA build.")


def published_variants(matrix: Matrix) -> list[str]:
    """Every variant some release in the matrix publishes: cpu, cuXYZ (newest first), rocm, xpu."""
    from stackdoctor.matrix import variant_kind

    names = {v.name for r in matrix.releases for v in r.variants}

    def key(n: str) -> tuple[int, tuple[int, ...]]:
        kind = variant_kind(n)
        order = {"cpu": 0, "cuda": 1, "rocm": 2, "xpu": 3}.get(kind[0] if kind else "", 4)
        return (order, tuple(-int(x) for x in re.findall(r"\d+", n)))

    return sorted(names, key=key)


def _windows(opts: InstallOptions, facts: Facts) -> bool:
    """Whether the plan's commands are for a Windows shell (PowerShell): the planned machine is Windows,
    this one or a replayed one, or a what-if's ``--platform win_*``."""
    if opts.platform:
        return opts.platform.lower().startswith("win")
    return facts.platform.system == "Windows"


# ---------------------------------------------------------------------------- gather


def pipeline_options(opts: InstallOptions) -> pipeline.Options:
    # install needs the target's tags and what torch build is there, not a working torch:
    # read torch/version.py instead of importing it (seconds faster, and safe on a broken torch)
    return pipeline.Options(
        python=opts.python, kernels=False, import_torch=False, replay=opts.replay, matrix_files=list(opts.matrix),
        probes=[*PROBES, *(subject for subject, _ in accelerators.probes())],  # and each plug-in accelerator's own
    )


def gather_facts(opts: InstallOptions) -> tuple[Facts, str, Matrix]:
    """(reconciled facts, target interpreter path, matrix): probed here, or from ``--replay``."""
    if opts.python and not opts.replay:
        from stackdoctor.engine import validate_python

        validate_python(opts.python)  # a folder, a missing path, not Python 3: one sentence, exit 2 (as check, kernels, report)
    popts = pipeline_options(opts)
    matrix = pipeline.load_matrix(popts)
    report = pipeline.gather(popts)
    from stackdoctor.reconcile import reconcile

    facts = reconcile(report.facts, matrix)
    if opts.replay:
        return facts, facts.python.executable or "python", matrix
    if opts.python and facts.python.error and not facts.python.version:
        raise UsageError(f"--python {opts.python}: {facts.python.error}.")
    from stackdoctor.engine import select_target

    return facts, select_target(opts.python, os.environ).python, matrix


def wanted_packages(opts: InstallOptions, facts: Facts) -> list[str]:
    """torch, plus torchvision / torchaudio when named or already installed in the target."""
    named = {p.lower() for p in opts.packages}
    have = {k.lower() for k in facts.torch.distributions}
    if facts.torch.torchvision_version:
        have.add("torchvision")
    if facts.torch.torchaudio_version:
        have.add("torchaudio")
    return [p for p in KNOWN_PACKAGES if p == "torch" or p in named or (p in have and not opts.what_if)]


def make_request(opts: InstallOptions, facts: Facts, matrix: Matrix | None = None, torch: str | None = None) -> Request:
    from stackdoctor.install.index import index_base
    from stackdoctor.plan import Request

    return Request(
        torch=torch or opts.torch,
        variant=opts.variant,
        packages=wanted_packages(opts, facts),
        python_version=opts.python_version,
        platform=opts.platform,
        driver=opts.driver,
        gpus=list(opts.gpus),
        gfx=list(opts.gfx),
        devices={k: list(v) for k, v in opts.devices.items() if v},
        index_base=index_base(opts.index_base, os.environ, matrix),
        installer=opts.installer if opts.installer in ("pip", "uv") else "pip",
    )


def accelerator_seen(facts: Facts, variant: str | None) -> str | None:
    """The backend the verification must find usable after installing ``variant``: the accelerator
    model's answer for this machine, when the variant is a build for it ("cuda", "rocm", "xpu", "mps")."""
    acc = accelerators.select(facts)
    if acc is None:
        return None
    beside = bool(acc.companions) and acc.builds(variant)  # a kind served by a CPU build with its companion beside it (Ascend)
    if acc.serves(variant) or beside or (acc.name == "apple" and acc.usable(facts)) or (acc.name == "jetson" and (variant or "").startswith("cu")):
        return acc.backend
    return None


# ---------------------------------------------------------------------------- resolve


def resolve_plan(opts: InstallOptions, facts: Facts, python: str, matrix: Matrix, torch: str | None = None) -> tuple[Plan, Request]:
    """The plan for the request, with its command and the leftovers (the resolver's, from :func:`stackdoctor.install.leftovers.predict_leftovers`,
    the one prediction; on this machine narrowed by the target's packages as ``--remove-leftovers`` will be)."""
    from stackdoctor.install.argv import install_command
    from stackdoctor.resolve import resolve

    request = make_request(opts, facts, matrix, torch)
    plan = resolve(facts, matrix, request)
    if plan.satisfiable:
        plan.command = install_command(plan, python, request.installer, uv=facts.python.uv_path or "uv")
        if plan.leftovers and not opts.what_if:  # the same answer --remove-leftovers acts on (install.leftovers)
            from stackdoctor.install import backup
            from stackdoctor.install.leftovers import leftovers
            from stackdoctor.system import System

            if (snap := backup.snapshot(System.from_env(), python)).ok:
                plan.leftovers = leftovers(plan.leftovers, snap)
    return plan, request


def describe_machine(opts: InstallOptions, facts: Facts) -> str:
    """The hypothetical machine a what-if plan is for, in a few words."""
    parts: list[str] = []
    if opts.replay:
        parts.append(f"the machine in {opts.replay}")
    if opts.driver:
        parts.append(f"NVIDIA driver {opts.driver}")
    if opts.gpus:
        parts.append(f"GPU {', '.join(opts.gpus)}")
    if opts.gfx:
        parts.append(f"AMD {', '.join(opts.gfx)}")
    for kind, names in opts.devices.items():
        acc = accelerators.by_name(kind)
        if names and acc is not None:
            parts.append(f"{acc.label} {', '.join(names)}")
    if opts.python_version:
        parts.append(f"Python {opts.python_version}")
    if opts.platform:
        parts.append(opts.platform)
    kept = []
    if not opts.replay:
        if not opts.python_version and facts.python.version:
            kept.append(f"Python {'.'.join(facts.python.version.split('.')[:2])}")
        if not opts.platform and facts.python.platform_tag:
            kept.append(facts.python.platform_tag)
    return ", ".join(parts) + (f" (otherwise this machine: {', '.join(kept)})" if kept else "")


def target_tags(facts: Facts, request: Request) -> list[str]:
    from stackdoctor.install.index import target_tags as _tags

    return _tags(facts, request)


def installed_matches(plan: Plan, facts: Facts) -> bool:
    """The target already has exactly the planned torch build and companions (read from their metadata)."""
    from packaging.version import InvalidVersion, Version

    have = {k.lower(): v for k, v in facts.torch.distributions.items()}
    if facts.torch.version:
        have.setdefault("torch", facts.torch.version)
    if facts.torch.torchvision_version:
        have.setdefault("torchvision", facts.torch.torchvision_version)
    if facts.torch.torchaudio_version:
        have.setdefault("torchaudio", facts.torch.torchaudio_version)
    if not plan.packages:
        return False
    for p in plan.packages:
        got = have.get(p.name)
        if not got:
            return False
        want = p.requirement.split("==", 1)[1]
        try:
            if Version(got) != Version(want):
                return False
        except InvalidVersion:
            return False
    return True


def generic_command(plan: Plan, request: Request, *, windows: bool = False) -> list[str]:
    """The install command for another machine: its own python, the PyTorch index, none of this machine's paths.
    Its python is ``python3``, or ``python`` on Windows (where python.org's installer has no ``python3``)."""
    from stackdoctor.install.argv import install_command

    return install_command(plan, "python" if windows else "python3", request.installer, uv="uv")


# ---------------------------------------------------------------------------- locate the sources


def installer_config(opts: InstallOptions, facts: Facts) -> InstallerConfig:
    from stackdoctor.install.sources import read_config

    return read_config(opts.installer if opts.installer == "uv" else "pip", os.environ, prefix=facts.python.env_prefix, cwd=os.getcwd())


def fit_words(opts: InstallOptions, facts: Facts, python: str, matrix: Matrix) -> Callable[[str, str], str]:
    """``fit(version, variant)``: whether that build would run on this machine, in a few words."""

    def fit(version: str, variant: str) -> str:
        from packaging.version import InvalidVersion, Version

        if matrix.release(version) is None:
            try:
                v = Version(version)
                version = f"{v.major}.{v.minor}"  # a patch the matrix lacks: judge by its minor's row
            except InvalidVersion:
                pass

        auto, _ = resolve_plan(opts, facts, python, matrix, torch=version)
        if auto.variant == variant:
            return "it fits this machine"
        forced, _ = resolve_plan(replace(opts, variant=variant), facts, python, matrix, torch=version)
        if not forced.satisfiable:
            why = forced.rejected[0].reason if forced.rejected else (forced.reasons[-1] if forced.reasons else "")
            return f"it does not run on this machine ({why})"
        if variant.startswith("cu") and not facts.nvidia.gpus:
            if auto.variant is None:  # no build fits this machine at all: say so, never "the plan is None"
                return "it installs and runs here, but on the CPU only: no NVIDIA GPU here (no build fits this machine)"
            return f"it installs and runs here, but on the CPU only: no NVIDIA GPU here (the plan is {auto.variant})"
        return f"it would run here, but this machine's build is {auto.variant}"

    return fit


def _client(opts: InstallOptions) -> IndexClient | None:
    from stackdoctor.install.index import IndexClient

    return None if opts.offline else IndexClient(os.environ, timeout_s=opts.index_timeout_s)


def _survey_options(opts: InstallOptions, cfg: InstallerConfig, matrix: Matrix, client: IndexClient | None, *, hypothetical: bool) -> dict[str, Any]:
    """How the sources are asked (:func:`stackdoctor.availability.survey_sources`), the same for every stage."""
    from stackdoctor.install.mirrors import mirror_option, resolve_mirror

    value, origin = mirror_option(opts.mirror, os.environ)
    return {
        "cfg": cfg,
        "find_links": opts.find_links,
        "mirror": resolve_mirror(value, matrix, origin=origin) if value else None,
        "offline": opts.offline,
        "no_index": opts.no_index,
        "client": client,
        "use_configured": True,  # a what-if plans from the user's own sources too (pip / uv configuration); --offline keeps them local
        "prefer_added": bool(opts.index_base or opts.mirror),  # named on the command line: preferred, and its failure is final
    }


def witness(matrix: Matrix, sources: Sequence[Any], versions: Sequence[str], artifacts: Sequence[str] = ()) -> tuple[Matrix, list[str]]:
    """:func:`stackdoctor.learn.witness_matrix` for ``versions`` (and the known releases ``artifacts`` whose build for
    this target the matrix lacks); what an index serves never stops the plan: a row it cannot make (an index's odd
    files) is a note, and the matrix stays as it is."""
    from stackdoctor.learn import witness_matrix

    try:
        wider, notes = witness_matrix(matrix, sources, versions=versions, artifacts=artifacts)
    except StackdoctorError as exc:
        return matrix, [f"index witness: {exc}"]
    return wider, notes


def _learned(notes: list[str]) -> tuple[list[str], list[str]]:
    """witness_matrix's notes: (what was learned, where; what failed)."""
    failed = [n for n in notes if n.startswith("index witness:")]
    return [n for n in notes if n not in failed], failed


def _adopt(opts: InstallOptions, facts: Facts, old: Plan, new: Plan, request: Request, learned: list[str], *, hypothetical: bool) -> Plan:
    """``new`` (planned from the widened matrix) in place of ``old``: where it was learned first, the warnings kept."""
    new.reasons[:0] = [n for n in learned if n not in new.reasons]
    new.warnings.extend(w for w in old.warnings if w not in new.warnings)
    if hypothetical and new.satisfiable:
        new.machine = describe_machine(opts, facts)
        new.command = generic_command(new, request, windows=_windows(opts, facts))
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


def witness_pin(
    opts: InstallOptions, facts: Facts, python: str, matrix: Matrix, plan: Plan, cfg: InstallerConfig, *, hypothetical: bool
) -> tuple[Plan, Request, Matrix, Surveyed]:
    """``--torch V`` that the matrix lacks: before refusing, ask the sources (this machine's build's: the configured
    ones, ``--find-links``, the PyTorch index or mirror) whether they serve V, and learn it from their files."""
    from stackdoctor.availability import learn_sources, survey_sources

    version = unknown_pin(opts.torch, matrix) or ""
    base, request = resolve_plan(replace(opts, torch=None), facts, python, matrix)  # where this machine's build is looked for
    client = _client(opts)
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
        return plan, make_request(opts, facts, matrix), matrix, surveyed
    new, request = resolve_plan(opts, facts, python, wider)
    new.warnings.extend(n for n in failed if n not in new.warnings)
    return _adopt(opts, facts, plan, new, request, learned, hypothetical=hypothetical), request, wider, surveyed


def check_sources(
    opts: InstallOptions, out: InstallOutcome, facts: Facts, python: str, matrix: Matrix, request: Request, cfg: InstallerConfig, *,
    hypothetical: bool, surveyed: Surveyed | None = None,
) -> tuple[Sourcing, Matrix, Request]:
    """Locate the plan's wheels (:func:`stackdoctor.availability.check`). Unpinned, a torch release newer than the
    matrix's newest that a source serves is learned from its files (:func:`stackdoctor.learn.witness_matrix`) and
    planned when it fits; ``out.plan`` is the plan so far; ``surveyed``: the sources already asked. Returns the sourcing, and the matrix and request it used."""
    from stackdoctor.availability import check, learn_sources, missing_artifacts, newer_offers, read_constraints, survey_sources, torch_offers
    from stackdoctor.install.index import python_version_of

    assert out.plan is not None
    plan = out.plan
    tags = target_tags(facts, request)
    platform_tag = request.platform or facts.python.platform_tag
    client = _client(opts)
    try:
        how = _survey_options(opts, cfg, matrix, client, hypothetical=hypothetical)
        surveyed = survey_sources(plan, reuse=surveyed, **how)  # the pinned witness's survey, when it asked the same
        if not opts.torch and surveyed.named_failure is None:
            pyv = python_version_of(facts, request)
            offers = torch_offers(surveyed.probes, tags, python_version=pyv, matrix=matrix, platform_tag=platform_tag)
            newer = newer_offers(offers, matrix)
            lacking = missing_artifacts(offers, matrix, plan, platform_tag)  # known releases whose build for this target the matrix lacks
            sources = learn_sources(surveyed, newer + lacking, client) if newer or lacking else []
            if sources:
                wider, notes = witness(matrix, sources, newer, lacking)
                learned, failed = _learned(notes)
                plan.warnings.extend(n for n in failed if n not in plan.warnings)
                if wider is not matrix:
                    new, new_request = resolve_plan(opts, facts, python, wider)
                    if new.satisfiable and new.torch_version in newer + lacking:  # it fits this machine: planned
                        plan = out.plan = _adopt(opts, facts, plan, new, new_request, learned, hypothetical=hypothetical)
                        matrix, request = wider, new_request
                        how = _survey_options(opts, cfg, matrix, client, hypothetical=hypothetical)
        if not tags:
            plan.warnings.append("the target's wheel tags are unknown, so the index check only confirmed that the versions exist.")
        sourcing = check(
            plan,
            matrix=matrix,
            tags=tags,
            python_version=python_version_of(facts, request),
            platform_tag=platform_tag,
            pinned=bool(opts.torch) or hypothetical,
            constraints=read_constraints(cfg.constraints) if not hypothetical else [],
            reresolve=lambda v: resolve_plan(opts, facts, python, matrix, torch=v)[0],
            fit=None if hypothetical else fit_words(opts, facts, python, matrix),
            surveyed=surveyed,
            **how,
        )
        return sourcing, matrix, request
    finally:
        if client is not None:
            client.close()


def _apply_delivery(plan: Plan, sourcing: Sourcing, python: str, installer: str, facts: Facts) -> None:
    from stackdoctor.install.argv import install_command

    plan.command = install_command(plan, python, installer, uv=facts.python.uv_path or "uv", source_args=sourcing.delivery.args)
    plan.command_env = dict(sourcing.delivery.env)


def _check_dependencies(sourcing: Sourcing, facts: Facts, request: Request, python: str) -> None:
    from stackdoctor.availability import marker_environment, missing_dependencies
    from stackdoctor.install.backup import snapshot
    from stackdoctor.install.index import python_version_of
    from stackdoctor.system import System

    local = [p for p in sourcing.probes if p.answered and p.source.local and any(s is p.source for s in sourcing.delivery.used)]
    tags = target_tags(facts, request)
    env = marker_environment(python_version_of(facts, request), request.platform or facts.python.platform_tag, facts.python.implementation)
    pyv = python_version_of(facts, request)
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


# ---------------------------------------------------------------------------- routes, emit


def _externally_managed_marker(facts: Facts) -> str | None:
    """The target's PEP 668 ``EXTERNALLY-MANAGED`` file (``<prefix>/lib/pythonX.Y/``, where a system Python's stdlib
    is), when the target is a system Python outside any venv; None otherwise."""
    py = facts.python
    if py.env_kind != "system" or not py.env_prefix or not py.version or os.name == "nt":
        return None
    major_minor = ".".join(py.version.split(".")[:2])
    path = os.path.join(py.env_prefix, "lib", f"python{major_minor}", "EXTERNALLY-MANAGED")
    return path if os.path.isfile(path) else None


def _add_routes(opts: InstallOptions, plan: Plan, facts: Facts, matrix: Matrix, request: Request, hypothetical: bool) -> None:
    from stackdoctor.install.conda import routes

    plan.routes = routes(
        plan,
        facts,
        matrix,
        pip_command=plan.command,
        installer=opts.installer,
        platform_tag=request.platform or facts.python.platform_tag,
        driver=request.driver or facts.nvidia.driver_version,
        packages=request.packages,
        hypothetical=hypothetical,
    )


def _emit(opts: InstallOptions, plan: Plan, facts: Facts, request: Request) -> str:
    from stackdoctor.install.conda import environment_yml, index_args
    from stackdoctor.install.emit import emit_requirements, emit_uv

    if opts.emit == "requirements":
        return emit_requirements(plan, find_links=opts.find_links[0] if opts.find_links else None)
    if opts.emit == "uv":
        return emit_uv(plan)
    route = next((r for r in plan.routes if r.name == "conda-forge" and (r.recommended or opts.conda_installer)), None)
    route = route or next((r for r in plan.routes if r.recommended), None) or (plan.routes[0] if plan.routes else None)
    if route is None:
        raise UsageError("--emit environment.yml: no route was planned for this target.")
    py = request.python_version or (".".join(facts.python.version.split(".")[:2]) if facts.python.version else None)
    name = os.path.basename(facts.python.env_prefix.rstrip("/")) if (facts.python.env_prefix and facts.python.env_kind == "conda") else None
    pip_args = index_args(plan.command)
    if not pip_args and plan.index_url and plan.variant and not (plan.index_url or "").startswith("https://pypi.org"):
        pip_args = ["--extra-index-url", plan.index_url]
    return environment_yml(route, name=name, python=py.rstrip("t") if py else None, pip_reqs=[p.requirement for p in plan.packages], pip_args=pip_args)


def _satisfied(opts: InstallOptions, plan: Plan, out: InstallOutcome) -> int:
    from stackdoctor.install.emit import emit_requirements, emit_uv

    plan.satisfied = True
    plan.command = []
    plan.command_env = {}
    out.plan, out.what = plan, "satisfied"
    if opts.emit and not opts.json_out:
        out.emitted = emit_requirements(plan) if opts.emit == "requirements" else emit_uv(plan) if opts.emit == "uv" else None
    return ExitCode.OK


# ---------------------------------------------------------------------------- act


def _conda_install(opts: InstallOptions, plan: Plan, hypothetical: bool, hooks: Hooks, out: InstallOutcome) -> int:
    from stackdoctor.install.conda import require_tool
    from stackdoctor.render.plan import format_command

    route = next((r for r in plan.routes if r.name == "conda-forge"), None)
    if route is None:
        raise UsageError(f"--installer {opts.installer}: conda-forge has no pytorch build for this target; use --installer pip.")
    out.route = route
    if opts.dry_run or hypothetical:
        out.what = "dry-run"
        return ExitCode.OK
    require_tool(opts.installer, route.command, os.environ)
    if not opts.yes:
        answer = hooks.confirm(f"Run {format_command(route.command, dict(route.env), windows=out.windows)}?")
        if answer is None:
            raise UsageError(
                f"not changing the environment: there is no terminal to confirm on; re-run with --yes to run {opts.installer}, or --dry-run to only see the command."
            )
        if not answer:
            out.what = "declined"
            return ExitCode.OK
    from stackdoctor.system import System

    res = System.from_env().run_streaming(route.command, timeout=opts.timeout_s, env=dict(route.env) or None, on_stdout=hooks.stream, on_stderr=hooks.stream)
    out.conda_result = res
    out.what = "installed" if res.ok else "failed"
    if res.ok:
        return ExitCode.OK
    return 130 if res.status == "interrupted" else ExitCode.FAILED


def _install(
    opts: InstallOptions, plan: Plan, facts: Facts, python: str, request: Request, sourcing: Sourcing, hooks: Hooks, out: InstallOutcome,
    *, repair: bool = False,
) -> int:
    if not opts.yes:
        answer = hooks.confirm(f"Install into {python}?")
        if answer is None:
            raise UsageError(f"not changing {python}: there is no terminal to confirm on; re-run with --yes to install, or --dry-run to only see the plan.")
        if not answer:
            out.what = "declined"
            return ExitCode.OK
    from stackdoctor.install.transaction import execute
    from stackdoctor.system import System

    result = execute(
        plan,
        system=System.from_env(),
        python=python,
        installer=request.installer,
        index_base=request.index_base,
        timeout_s=opts.timeout_s,
        remove_leftovers=opts.remove_leftovers,
        accelerator=accelerator_seen(facts, plan.variant),
        say=lambda line: hooks.say(line, "yellow"),
        stream=hooks.stream,
        uv=facts.python.uv_path or "uv",
        source_args=sourcing.delivery.args,
        env=sourcing.delivery.env or None,
        offline=opts.offline or opts.no_index,
        user_find_links=opts.find_links,
        reinstall=repair,
        gpu_targets=facts.reconciled.gpus,
        facts=facts,
        progress=opts.progress,
        verbose=opts.verbose,
    )
    out.result = result
    out.what = "installed" if result.ok else "failed"
    return int(result.exit_code)


# ---------------------------------------------------------------------------- a killed install


def _unfinished(opts: InstallOptions, facts: Facts) -> bool:
    from stackdoctor.install.journal import journal_dir

    prefix = facts.python.env_prefix
    return bool(prefix and not opts.what_if and os.path.isdir(journal_dir(prefix)))


def _finish_earlier(opts: InstallOptions, facts: Facts, python: str, hooks: Hooks) -> int | None:
    """Finish a killed install's journal; None when it is finished (then planning goes on)."""
    from stackdoctor.install.transaction import execute_recovery
    from stackdoctor.system import System

    result = execute_recovery(
        System.from_env(), python, uv=facts.python.uv_path or "uv", offline=opts.offline or opts.no_index, find_links=opts.find_links,
        stream=hooks.stream, say=lambda line: hooks.say(line, "yellow"),
    )
    try:  # a closed output (the pipe's reader died with the Ctrl-C) must not stop the install that follows
        hooks.say(("" if result.ok else "stackdoctor: ") + result.message, "yellow" if result.ok else "bold red")
        for note in result.notes:
            hooks.say(f"  {note}", "yellow")
    except OSError:
        from stackdoctor.install.talk import save_unprinted

        save_unprinted(result.prefix or "", [result.message, *result.notes])
    return None if result.ok else int(result.exit_code)


def _recover_only(opts: InstallOptions, hooks: Hooks, out: InstallOutcome) -> int:
    from stackdoctor.engine import select_target, validate_python
    from stackdoctor.install.transaction import execute_recovery
    from stackdoctor.system import System

    if opts.python:
        validate_python(opts.python)
    python = out.python = select_target(opts.python, os.environ).python
    out.result = execute_recovery(
        System.from_env(), python, offline=opts.offline or opts.no_index, find_links=opts.find_links,
        stream=hooks.stream, say=lambda line: hooks.say(line, "yellow"),
    )
    out.what = "recovered"
    return int(out.result.exit_code)


def _damage(python: str, plan: Plan) -> str | None:
    """Why the installed build the plan names is not really there (a RECORD file missing or changed, torch not
    importing), or None: complete per RECORD and importing."""
    from stackdoctor.install.verify import intact
    from stackdoctor.system import System

    return intact(System.from_env(), python, [p.name for p in plan.packages])


__all__ = ["Hooks", "InstallOptions", "InstallOutcome", "install"]

