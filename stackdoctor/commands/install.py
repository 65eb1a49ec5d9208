"""``stackdoctor install``: facts -> resolve -> locate the wheels on the user's sources -> show -> install -> verify.

The sources are the installer's own configuration (pip.conf / ``PIP_*``, uv.toml / ``[tool.uv]`` /
``UV_*``: :mod:`stackdoctor.sources`), ``--find-links`` and the PyTorch variant index or a ``--mirror``
(:mod:`stackdoctor.mirrors`); :mod:`stackdoctor.availability` asks them and says what the installer is
handed (never a source that did not answer). conda targets get both routes (:mod:`stackdoctor.conda`).

Exit codes: 0 done (or a dry run, or already satisfied), 1 the request cannot be met (``plan.variant`` is
None) or the install failed / was undone, 2 usage or index errors, 130 interrupted. ``--json`` always
prints one ``stackdoctor.plan/1`` document, with ``error`` set when the command stopped.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from stackdoctor import accelerators, pipeline
from stackdoctor.errors import ExitCode, IndexError_, StackdoctorError, UsageError
from stackdoctor.render.plan import format_command, localized, render_plan  # the plan's screen lives in render/

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.availability import Sourcing
    from stackdoctor.facts import Facts
    from stackdoctor.matrix import Matrix
    from stackdoctor.plan import Plan, Request
    from stackdoctor.sources import InstallerConfig

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
    remove_leftovers: bool = False
    recover: bool = False
    timeout_s: float = 3600.0
    index_timeout_s: float = 20.0

    @property
    def what_if(self) -> bool:
        """A plan for another machine (``--driver``/``--gpu``/``--gfx`` too): never carried out here."""
        return bool(self.python_version or self.platform or self.replay or self.driver or self.gpus or self.gfx)

    @property
    def conda_installer(self) -> bool:
        return self.installer in ("conda", "mamba", "micromamba", "pixi")


def register(app: typer.Typer) -> None:
    @app.command("install")
    def install(
        packages: Annotated[Optional[list[str]], typer.Argument(help="torch, torchvision, torchaudio (torch is always included).")] = None,
        torch: Annotated[Optional[str], typer.Option("--torch", help="torch version or specifier: 2.13.0, '>=2.6,<2.12'.")] = None,
        variant: Annotated[str, typer.Option("--variant", help="auto, cpu, cu126, cu130, rocm7.2, xpu, ...")] = "auto",
        python: Annotated[Optional[str], typer.Option("--python", help="Interpreter to install into (default: active venv/conda env, else this one).")] = None,
        installer: Annotated[str, typer.Option("--installer", help="pip, uv, or for conda envs conda, mamba, micromamba, pixi.")] = "pip",
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan and the command; change nothing.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON (stackdoctor.plan/1) on stdout.")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before changing the environment.")] = False,
        offline: Annotated[bool, typer.Option("--offline", help="No network: only local folders and file:// indexes serve the install.")] = False,
        no_index: Annotated[bool, typer.Option("--no-index", help="Use no package index, only find-links folders and pages (as pip's --no-index).")] = False,
        index_base: Annotated[Optional[str], typer.Option("--index-base", help="Base of the PyTorch index, download.pytorch.org/whl (or STACKDOCTOR_INDEX_BASE).")] = None,
        find_links: Annotated[Optional[list[str]], typer.Option("--find-links", help="Also take wheels from this folder or page (repeatable), as pip's --find-links.")] = None,
        mirror: Annotated[Optional[str], typer.Option("--mirror", help="A mirror of the PyTorch index: a name (aliyun, nju, sjtu) or a URL (or STACKDOCTOR_MIRROR).")] = None,
        matrix: Annotated[Optional[list[str]], typer.Option("--matrix", help="Compatibility matrix YAML layered over the embedded one.")] = None,
        emit: Annotated[Optional[str], typer.Option("--emit", help="Print for your project: requirements, uv (pyproject.toml) or environment.yml (conda).")] = None,
        python_version: Annotated[Optional[str], typer.Option("--python-version", help="What-if: resolve for this Python (3.12, 3.13t). Implies --dry-run.")] = None,
        platform: Annotated[Optional[str], typer.Option("--platform", help="What-if: wheel platform tag (manylinux_2_28_x86_64, win_amd64, macosx_14_0_arm64). Implies --dry-run.")] = None,
        replay: Annotated[Optional[str], typer.Option("--replay", help="Resolve for the machine a report describes. Implies --dry-run.")] = None,
        driver: Annotated[Optional[str], typer.Option("--driver", help="What-if NVIDIA driver version. Implies --dry-run.")] = None,
        gpu: Annotated[Optional[list[str]], typer.Option("--gpu", help="What-if GPU: a name or sm_XY (repeatable). Implies --dry-run.")] = None,
        gfx: Annotated[Optional[list[str]], typer.Option("--gfx", help="What-if AMD GPU arch gfxNNNN (repeatable). Implies --dry-run.")] = None,
        remove_leftovers: Annotated[bool, typer.Option("--remove-leftovers", help="Uninstall the previous variant's runtime packages.")] = False,
        recover: Annotated[bool, typer.Option("--recover", help="Only finish an install that was killed: put the previous torch back (or keep a complete new one), then stop.")] = False,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds the install may take.")] = 3600.0,
        index_timeout: Annotated[float, typer.Option("--index-timeout", help="Seconds for each index page.")] = 20.0,
    ) -> int:
        """Install the right torch build for this machine (or show the plan for another)."""
        opts = InstallOptions(
            packages=list(packages or []),
            torch=torch,
            variant=variant,
            python=python,
            installer=installer,
            dry_run=dry_run,
            json_out=json_out,
            yes=yes,
            offline=offline,
            no_index=no_index,
            index_base=index_base,
            find_links=list(find_links or []),
            mirror=mirror,
            matrix=list(matrix or []),
            emit=emit,
            python_version=python_version,
            platform=platform,
            replay=replay,
            driver=driver,
            gpus=list(gpu or []),
            gfx=list(gfx or []),
            remove_leftovers=remove_leftovers,
            recover=recover,
            timeout_s=timeout,
            index_timeout_s=index_timeout,
        )
        return int(run(opts))


# ---------------------------------------------------------------------------- steps


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
    from stackdoctor.index import index_base
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
        index_base=index_base(opts.index_base, os.environ, matrix),
        installer=opts.installer if opts.installer in ("pip", "uv") else "pip",
    )


def accelerator_seen(facts: Facts, variant: str | None) -> str | None:
    """The backend the verification must find usable after installing ``variant``: the accelerator
    model's answer for this machine, when the variant is a build for it ("cuda", "rocm", "xpu", "mps")."""
    from stackdoctor import accelerators

    acc = accelerators.select(facts)
    if acc is None:
        return None
    if acc.serves(variant) or (acc.name == "apple" and acc.usable(facts)) or (acc.name == "jetson" and (variant or "").startswith("cu")):
        return acc.backend
    return None


def resolve_plan(opts: InstallOptions, facts: Facts, python: str, matrix: Matrix, torch: str | None = None) -> tuple[Plan, Request]:
    from stackdoctor.install import install_command, predict_leftovers
    from stackdoctor.resolve import resolve

    request = make_request(opts, facts, matrix, torch)
    plan = resolve(facts, matrix, request)
    if plan.satisfiable:
        plan.command = install_command(plan, python, request.installer, uv=facts.python.uv_path or "uv")
        if not plan.leftovers:
            plan.leftovers = predict_leftovers(facts.torch.distributions, plan.variant)
        if plan.leftovers and not opts.what_if:  # the same answer --remove-leftovers acts on (install.leftovers)
            from stackdoctor.install import leftovers, snapshot
            from stackdoctor.system import System

            snap = snapshot(System.from_env(), python)
            if snap.ok:
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
    from stackdoctor.index import target_tags as _tags

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


def installer_config(opts: InstallOptions, facts: Facts) -> InstallerConfig:
    from stackdoctor.sources import read_config

    return read_config(opts.installer if opts.installer == "uv" else "pip", os.environ, prefix=facts.python.env_prefix, cwd=os.getcwd())


def fit_words(opts: InstallOptions, facts: Facts, python: str, matrix: Matrix) -> Any:
    """``fit(version, variant)``: whether that build would run on this machine, in a few words."""

    def fit(version: str, variant: str) -> str:
        from dataclasses import replace

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
            return f"it installs and runs here, but on the CPU only: no NVIDIA GPU here (the plan is {auto.variant})"
        return f"it would run here, but this machine's build is {auto.variant}"

    return fit


def check_sources(
    opts: InstallOptions, plan: Plan, facts: Facts, python: str, matrix: Matrix, request: Request, cfg: InstallerConfig, *, hypothetical: bool
) -> Sourcing:
    from stackdoctor.availability import check, read_constraints
    from stackdoctor.index import IndexClient, python_version_of
    from stackdoctor.mirrors import mirror_option, resolve_mirror

    value, origin = mirror_option(opts.mirror, os.environ)
    mirror = resolve_mirror(value, matrix, origin=origin) if value else None
    tags = target_tags(facts, request)
    if not tags:
        plan.warnings.append("the target's wheel tags are unknown, so the index check only confirmed that the versions exist.")
    platform_tag = request.platform or facts.python.platform_tag
    offline = opts.offline
    client = None if offline else IndexClient(os.environ, timeout_s=opts.index_timeout_s)
    try:
        return check(
            plan,
            cfg=cfg,
            matrix=matrix,
            tags=tags,
            python_version=python_version_of(facts, request),
            platform_tag=platform_tag,
            find_links=opts.find_links,
            mirror=mirror,
            offline=offline,
            no_index=opts.no_index,
            pinned=bool(opts.torch) or hypothetical,
            client=client,
            constraints=read_constraints(cfg.constraints) if not hypothetical else [],
            reresolve=lambda v: resolve_plan(opts, facts, python, matrix, torch=v)[0],
            fit=None if hypothetical else fit_words(opts, facts, python, matrix),
            use_configured=not hypothetical,
            prefer_added=bool(opts.index_base or opts.mirror),  # named on the command line: preferred, and its failure is final
        )
    finally:
        if client is not None:
            client.close()


def say(text: str, style: str = "") -> None:
    from rich.text import Text

    from stackdoctor.console import make_console

    make_console(stderr=True, soft_wrap=True).print(Text(localized(text), style=style))


# ---------------------------------------------------------------------------- the command


@dataclass
class _State:
    plan: Plan | None = None


def run(opts: InstallOptions) -> int:
    """The command; with ``--json`` exactly one ``stackdoctor.plan/1`` document on stdout, on every path."""
    state = _State()
    try:
        code = _run(opts, state)
    except StackdoctorError as exc:
        if opts.json_out:
            _print_json(state.plan, exc)
        raise
    except BaseException:
        if opts.json_out and state.plan is not None:
            _print_json(state.plan)
        raise
    if opts.json_out and not opts.recover:
        _print_json(state.plan)
    return code


def _print_json(plan: Plan | None, exc: StackdoctorError | None = None) -> None:
    from stackdoctor.errors import MatrixError
    from stackdoctor.plan import Plan, PlanError

    if plan is None:
        plan = Plan(torch_version=None, variant=None, index_url=None)
    if exc is not None:
        kind = "matrix" if isinstance(exc, MatrixError) else "usage" if isinstance(exc, UsageError) else "index" if isinstance(exc, IndexError_) else "unmet"
        plan.error = PlanError(kind, str(exc), int(exc.exit_code))
    try:
        from stackdoctor.redact import safe_data

        sys.stdout.write(json.dumps(safe_data(plan.to_data()), indent=2) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def _windows(opts: InstallOptions, facts: Facts) -> bool:
    """Whether the plan's commands are for a Windows shell (PowerShell): the planned machine is Windows,
    this one or a replayed one, or a what-if's ``--platform win_*``."""
    if opts.platform:
        return opts.platform.lower().startswith("win")
    return facts.platform.system == "Windows"


def _run(opts: InstallOptions, state: _State) -> int:
    check_options(opts)
    if opts.recover:
        return _recover_only(opts)
    facts, python, matrix = gather_facts(opts)
    unfinished = _unfinished(opts, facts)
    if unfinished and not (opts.dry_run or opts.emit):
        code = _finish_earlier(opts, facts, python)  # before anything is planned: the facts of a half-installed torch are no base
        if code is not None:
            return code
        facts, python, matrix = gather_facts(opts)
    check_request(opts, facts, matrix)
    hypothetical = opts.what_if
    plan, request = resolve_plan(opts, facts, python, matrix)
    state.plan = plan
    if unfinished and (opts.dry_run or opts.emit):
        plan.warnings.append(f"an install into {facts.python.env_prefix} was stopped halfway; `stackdoctor install --python {python} --recover` finishes it.")
    if hypothetical:
        plan.machine = describe_machine(opts, facts)
        if plan.satisfiable:  # an unmet plan has no command (not an empty `pip install`)
            plan.command = generic_command(plan, request, windows=_windows(opts, facts))
    quiet_stdout = opts.json_out or opts.emit is not None
    if not plan.satisfiable:
        render_plan(plan, python, stderr=quiet_stdout, hypothetical=hypothetical, windows=_windows(opts, facts))
        return ExitCode.FAILED
    from stackdoctor.conda import is_conda_target

    conda = is_conda_target(facts) or opts.conda_installer or opts.emit == "environment.yml"
    # already satisfied: the target has exactly this plan (checked before any network access)
    repair: str | None = None
    if not hypothetical and not opts.conda_installer and installed_matches(plan, facts):
        repair = _damage(python, plan)
        if repair is None:
            return _satisfied(opts, plan, python)
        plan.warnings.append(f"the installed build is damaged ({repair}): it is reinstalled")
    cfg = installer_config(opts, facts)
    sourcing: Sourcing | None = None
    try:
        if not opts.conda_installer:  # conda, mamba, micromamba and pixi install from conda-forge, not from wheel sources
            sourcing = check_sources(opts, plan, facts, python, matrix, request, cfg, hypothetical=hypothetical)
    except IndexError_ as exc:
        unchecked = getattr(exc, "reason", "") == "unchecked"
        if not (unchecked and (hypothetical or ((opts.dry_run or opts.emit) and opts.offline))):
            if not hypothetical:
                plan.command = []  # no command that cannot reach its wheels
            render_plan(plan, python, stderr=quiet_stdout, hypothetical=hypothetical, windows=_windows(opts, facts))
            raise
        plan.warnings.append(f"the wheels were not checked: {exc}")
    if sourcing is not None:
        plan = sourcing.plan
        state.plan = plan
        if hypothetical:
            plan.machine = describe_machine(opts, facts)
            plan.command = generic_command(plan, request, windows=_windows(opts, facts))
        else:
            _apply_delivery(plan, sourcing, python, request.installer, facts)
        plan.warnings.extend(n for n in sourcing.notes if n not in plan.warnings)
        if not hypothetical and not opts.conda_installer and repair is None and installed_matches(plan, facts):
            repair = _damage(python, plan)
            if repair is None:
                return _satisfied(opts, plan, python)
            plan.warnings.append(f"the installed build is damaged ({repair}): it is reinstalled")
    if conda:
        _add_routes(opts, plan, facts, matrix, request, hypothetical)
    render_plan(plan, python, stderr=quiet_stdout, hypothetical=hypothetical, windows=_windows(opts, facts))
    if sourcing is not None:
        found = [m for m in sourcing.matches]
        where = sorted({m.source for m in found})
        say(f"index check: {len(found)} wheel(s) found for this target on {', '.join(where)}.", "green")
        if sourcing.needs_dependency_check and not hypothetical:
            _check_dependencies(sourcing, facts, request, python)
    if opts.emit:
        return _emit(opts, plan, facts, request)
    if opts.conda_installer:
        if opts.installer != "pixi" and not hypothetical and not is_conda_target(facts):
            raise UsageError(
                f"--installer {opts.installer}: {python} is not in a conda environment (no conda-meta in {facts.python.env_prefix or 'its prefix'}); "
                "use --installer pip or uv, or point --python at a conda env."
            )
        return _conda_install(opts, plan, hypothetical, windows=_windows(opts, facts))
    if opts.dry_run or hypothetical:
        why = "" if opts.dry_run else " (--python-version, --platform, --replay, --driver, --gpu and --gfx only plan)"
        say(f"dry run{why}: nothing was changed.")
        return ExitCode.OK
    if sourcing is None:
        raise IndexError_("the wheels could not be checked on any source, so nothing was installed; drop --offline or add --find-links DIR.")
    return _install(opts, plan, facts, python, request, sourcing, repair=repair is not None)


def _unfinished(opts: InstallOptions, facts: Facts) -> bool:
    from stackdoctor.transaction import journal_dir

    prefix = facts.python.env_prefix
    return bool(prefix and not opts.what_if and os.path.isdir(journal_dir(prefix)))


def _finish_earlier(opts: InstallOptions, facts: Facts, python: str) -> int | None:
    """Finish a killed install's journal; None when it is finished (then planning goes on)."""
    from stackdoctor.install import InstallResult, execute_recovery
    from stackdoctor.system import System

    result: InstallResult = execute_recovery(
        System.from_env(), python, uv=facts.python.uv_path or "uv", offline=opts.offline or opts.no_index, find_links=opts.find_links,
        say=lambda line: say(line, "yellow"),
    )
    say(("" if result.ok else "stackdoctor: ") + result.message, "yellow" if result.ok else "bold red")
    for note in result.notes:
        say(f"  {note}", "yellow")
    return None if result.ok else int(result.exit_code)


def _recover_only(opts: InstallOptions) -> int:
    from stackdoctor.engine import select_target, validate_python
    from stackdoctor.install import execute_recovery
    from stackdoctor.system import System

    if opts.python:
        validate_python(opts.python)
    python = select_target(opts.python, os.environ).python
    result = execute_recovery(System.from_env(), python, offline=opts.offline or opts.no_index, find_links=opts.find_links, say=lambda line: say(line, "yellow"))
    say(("done: " if result.ok else "stackdoctor: ") + result.message, "bold green" if result.ok else "bold red")
    for note in result.notes:
        say(f"  {note}", "yellow")
    return int(result.exit_code)


def _damage(python: str, plan: Plan) -> str | None:
    """Why the installed build the plan names is not really there (a RECORD file missing or changed, torch not
    importing), or None: complete per RECORD and importing."""
    from stackdoctor.install import intact
    from stackdoctor.system import System

    return intact(System.from_env(), python, [p.name for p in plan.packages])


def generic_command(plan: Plan, request: Request, *, windows: bool = False) -> list[str]:
    """The install command for another machine: its own python, the PyTorch index, none of this machine's paths.
    Its python is ``python3``, or ``python`` on Windows (where python.org's installer has no ``python3``)."""
    from stackdoctor.install import install_command

    return install_command(plan, "python" if windows else "python3", request.installer, uv="uv")


def _apply_delivery(plan: Plan, sourcing: Sourcing, python: str, installer: str, facts: Facts) -> None:
    from stackdoctor.install import install_command

    plan.command = install_command(plan, python, installer, uv=facts.python.uv_path or "uv", source_args=sourcing.delivery.args)
    plan.command_env = dict(sourcing.delivery.env)


def _satisfied(opts: InstallOptions, plan: Plan, python: str) -> int:
    plan.satisfied = True
    plan.command = []
    plan.command_env = {}
    reqs = ", ".join(p.requirement.replace("==", " ") for p in plan.packages)
    say(f"already satisfied: {python} has {reqs}, the planned build, complete (every file's sha256 checked) and importing; nothing was changed.", "green")
    if opts.emit and not opts.json_out:
        return _emit_only(opts, plan)
    return ExitCode.OK


def _emit_only(opts: InstallOptions, plan: Plan) -> int:
    from stackdoctor.install import emit_requirements, emit_uv

    if opts.emit == "requirements":
        sys.stdout.write(emit_requirements(plan))
    elif opts.emit == "uv":
        sys.stdout.write(emit_uv(plan))
    return ExitCode.OK


def _check_dependencies(sourcing: Sourcing, facts: Facts, request: Request, python: str) -> None:
    from stackdoctor.availability import marker_environment, missing_dependencies
    from stackdoctor.index import python_version_of
    from stackdoctor.install import snapshot
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


def _add_routes(opts: InstallOptions, plan: Plan, facts: Facts, matrix: Matrix, request: Request, hypothetical: bool) -> None:
    from stackdoctor.conda import routes

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


def _emit(opts: InstallOptions, plan: Plan, facts: Facts, request: Request) -> int:
    from stackdoctor.conda import environment_yml, index_args
    from stackdoctor.install import emit_requirements, emit_uv

    if opts.emit == "requirements":
        sys.stdout.write(emit_requirements(plan, find_links=opts.find_links[0] if opts.find_links else None))
    elif opts.emit == "uv":
        sys.stdout.write(emit_uv(plan))
    else:
        route = next((r for r in plan.routes if r.name == "conda-forge" and (r.recommended or opts.conda_installer)), None)
        route = route or next((r for r in plan.routes if r.recommended), None) or (plan.routes[0] if plan.routes else None)
        if route is None:
            raise UsageError("--emit environment.yml: no route was planned for this target.")
        py = request.python_version or (".".join(facts.python.version.split(".")[:2]) if facts.python.version else None)
        name = os.path.basename(facts.python.env_prefix.rstrip("/")) if (facts.python.env_prefix and facts.python.env_kind == "conda") else None
        pip_args = index_args(plan.command)
        if not pip_args and plan.index_url and plan.variant and not (plan.index_url or "").startswith("https://pypi.org"):
            pip_args = ["--extra-index-url", plan.index_url]
        sys.stdout.write(environment_yml(route, name=name, python=py.rstrip("t") if py else None, pip_reqs=[p.requirement for p in plan.packages], pip_args=pip_args))
    return ExitCode.OK


def _conda_install(opts: InstallOptions, plan: Plan, hypothetical: bool, *, windows: bool = False) -> int:
    from stackdoctor.conda import require_tool

    route = next((r for r in plan.routes if r.name == "conda-forge"), None)
    if route is None:
        raise UsageError(f"--installer {opts.installer}: conda-forge has no pytorch build for this target; use --installer pip.")
    if opts.dry_run or hypothetical:
        say(f"dry run: run this with {opts.installer}:", "bold")
        say("  " + format_command(route.command, dict(route.env), windows=windows))
        return ExitCode.OK
    require_tool(opts.installer, route.command, os.environ)
    if not opts.yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"not changing the environment: there is no terminal to confirm on; re-run with --yes to run {opts.installer}, or --dry-run to only see the command."
            )
        if not typer.confirm(localized(f"Run {format_command(route.command, dict(route.env), windows=windows)}?"), default=False, err=True):
            say("nothing was changed.")
            return ExitCode.OK
    from stackdoctor.system import System

    res = System.from_env().run_streaming(route.command, timeout=opts.timeout_s, env=dict(route.env) or None, on_stdout=_write_err, on_stderr=_write_err)
    if res.ok:
        say(f"done: {opts.installer} installed {' '.join(route.specs)}.", "bold green")
        return ExitCode.OK
    from stackdoctor.install import failure_line

    say(f"stackdoctor: {opts.installer} failed ({failure_line(res)}).", "bold red")
    return 130 if res.status == "interrupted" else ExitCode.FAILED


def _write_err(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _install(opts: InstallOptions, plan: Plan, facts: Facts, python: str, request: Request, sourcing: Sourcing, *, repair: bool = False) -> int:
    if not opts.yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"not changing {python}: there is no terminal to confirm on; re-run with --yes to install, or --dry-run to only see the plan."
            )
        if not typer.confirm(localized(f"Install into {python}?"), default=False, err=True):
            say("nothing was changed.")
            return ExitCode.OK
    from stackdoctor.install import execute
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
        say=lambda line: say(line, "yellow"),
        uv=facts.python.uv_path or "uv",
        source_args=sourcing.delivery.args,
        env=sourcing.delivery.env or None,
        offline=opts.offline or opts.no_index,
        user_find_links=opts.find_links,
        reinstall=repair,
        gpu_targets=facts.reconciled.gpus,
    )
    say(("done: " if result.ok else "stackdoctor: ") + result.message, "bold green" if result.ok else "bold red")
    for note in result.notes:
        say(f"  {note}", "yellow")
    if result.removed:
        say(f"removed the previous variant's packages: {', '.join(result.removed)}.")
    elif result.leftovers:
        say(f"left behind by the previous variant: {', '.join(result.leftovers)} (remove them with --remove-leftovers).", "yellow")
    return int(result.exit_code)
