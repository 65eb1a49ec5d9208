"""The install flow: gather -> check the request -> resolve -> locate the wheels on the user's sources -> routes -> act.

:func:`install` takes an :class:`InstallOptions` and returns one :class:`InstallOutcome` (the plan, the exit code,
what happened, the installer's result, the error that stopped it); ``stackdoctor install`` renders it. The flow
prints nothing: what must be shown while it acts (the plan before the question, the installer's output, "putting
back ..." lines) goes through the :class:`Hooks` the command passes in.

The sources are the installer's own configuration (pip.conf / ``PIP_*``, uv.toml / ``[tool.uv]`` /
``UV_*``: :mod:`stackdoctor.wheels.sources`), ``--find-links`` and the PyTorch variant index or a ``--mirror``
(:mod:`stackdoctor.wheels.mirrors`); :mod:`stackdoctor.resolve.availability` asks them and says what the installer is
handed (never a source that did not answer). A torch release the matrix lacks but a source serves is learned
from its file names and core metadata (:func:`stackdoctor.wheels.learn.witness_matrix`) and planned, its reason saying
where it was learned. conda targets get both routes (:mod:`stackdoctor.install.conda`).

Exit codes: 0 done (or a dry run, or already satisfied), 1 the request cannot be met (``plan.variant`` is
None) or the install failed / was undone, 2 usage or index errors, 130 interrupted.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from stackdoctor.core.errors import ExitCode, IndexError_, StackdoctorError, UsageError
from stackdoctor.install.locate import apply_delivery, check_dependencies, check_sources, installer_config, refuse_implausible_pin, unknown_pin, witness_pin
from stackdoctor.install.options import Hooks, InstallOptions, InstallOutcome
from stackdoctor.install.request import (
    accelerator_seen,
    check_options,
    describe_machine,
    gather_view,
    generic_command,
    installed_matches,
    published_variants,
    resolve_plan,
    windows_shell,
)

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.view import MachineView
    from stackdoctor.resolve.availability import Sourcing, Surveyed
    from stackdoctor.wheels.sources import InstallerConfig


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
    from stackdoctor.wheels.sources import as_pip_takes_it

    opts = replace(opts, sources=replace(opts.sources, find_links=[as_pip_takes_it(x) for x in opts.sources.find_links]))  # m/sw, ~/wheels: the folder pip would read
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
    return _Flow(opts, hooks, out).run()


@dataclass
class _Flow:
    """One install's way through the flow: gather -> plan -> locate the wheels -> act; each step a method, the state
    they share its fields."""

    opts: InstallOptions
    hooks: Hooks
    out: InstallOutcome
    view: MachineView = field(init=False)
    python: str = field(init=False)
    matrix: Matrix = field(init=False)
    request: Request = field(init=False)
    unfinished: bool = False
    repair: str | None = None
    sourcing: Sourcing | None = None

    @property
    def hypothetical(self) -> bool:
        return self.opts.what_if

    @property
    def plan(self) -> Plan:
        assert self.out.plan is not None
        return self.out.plan

    def run(self) -> int:
        code = self._gather()
        if code is not None:
            return code
        cfg, surveyed = self._plan()
        if not self.plan.satisfiable:
            self.out.what = "unmet"
            self.hooks.show(self.out)
            return ExitCode.FAILED
        if self._satisfied_here():
            return self._already()
        self._locate(cfg, surveyed)
        if self.sourcing is not None and self._delivered():
            return self._already()
        return self._act()

    def _already(self) -> int:
        """The target has the plan already: shown as such, and ``--emit`` prints its file as for any plan (all three
        kinds: a teammate's machine may lack the build this one has)."""
        opts = self.opts
        code = _satisfied(opts, self.plan, self.out, self.hooks)
        if opts.emit and not opts.json_out:
            self.out.emitted = self._emit_file(self.plan, routes_known=False)
        return code

    def _emit_file(self, plan: Plan, *, routes_known: bool) -> str:
        """``--emit``'s file, for a plan to carry out or one the target has already: the one way it is written
        (``environment.yml`` needs the conda routes, made here unless the screen made them)."""
        if self.opts.emit == "environment.yml" and not routes_known:
            _add_routes(self.opts, plan, self.view, self.matrix, self.request, self.hypothetical)
        return _emit(self.opts, plan, self.view, self.request, self.matrix)

    def _gather(self) -> int | None:
        """The machine's view (again after finishing a killed install: a half-installed torch is no base), the request checked."""
        opts = self.opts
        self.view, self.python, self.matrix = gather_view(opts)
        self.out.python = self.python
        self.unfinished = _unfinished(opts, self.view)
        if not (self.hypothetical or opts.dry_run or opts.emit):
            _sweep_backups(self.view.facts.python.env_prefix, self.hooks)  # "already satisfied" too: no backup outlives `done:`
        if self.unfinished and not (opts.dry_run or opts.emit):
            code = _finish_earlier(opts, self.view, self.python, self.hooks)  # before anything is planned
            if code is not None:
                self.out.what = "failed"
                return code
            self.view, self.python, self.matrix = gather_view(opts)
        check_request(opts, self.view, self.matrix)
        self.out.hypothetical, self.out.windows = self.hypothetical, windows_shell(opts, self.view)
        return None

    def _plan(self) -> tuple[InstallerConfig, Surveyed | None]:
        """The resolver's plan (a pin the matrix lacks: learned from the sources), with its offers and warnings."""
        opts, view, python = self.opts, self.view, self.python
        plan, self.request = resolve_plan(opts, view, python, self.matrix)
        cfg = installer_config(opts, view)
        surveyed: Surveyed | None = None
        if not plan.satisfiable and not opts.conda_installer and unknown_pin(opts.torch, self.matrix):
            plan, self.request, self.matrix, surveyed = witness_pin(opts, view, python, self.matrix, plan, cfg, hypothetical=self.hypothetical)
        self.out.plan = plan
        from stackdoctor.resolve.source_build import offer_from_source

        offer = offer_from_source(plan, view, self.matrix, self.request)  # no wheel of the release runs on these GPUs: building it would
        if offer:
            plan.suggestions.append(offer)
        if self.unfinished and (opts.dry_run or opts.emit):
            from stackdoctor.core.shell import format_command

            again = format_command(["stackdoctor", "install", "--python", python, "--recover"], windows=self.out.windows)
            plan.warnings.append(f"an install into {view.facts.python.env_prefix} was stopped halfway; `{again}` finishes it.")
        if self.hypothetical:
            plan.machine = describe_machine(opts, view)
            if plan.satisfiable:  # an unmet plan has no command (not an empty `pip install`)
                plan.command = generic_command(plan, self.request, windows=self.out.windows)
        return cfg, surveyed

    def _satisfied_here(self) -> bool:
        """The target has exactly this plan, undamaged (checked before any network access); damaged: a repair."""
        if self.hypothetical or self.opts.conda_installer or self.repair is not None or not installed_matches(self.plan, self.view):
            return False
        quick = self.opts.dry_run or self.opts.emit is not None  # nothing is changed, so nothing is repaired: sizes say enough
        self.repair = _damage(self.python, self.plan, sizes_only=quick)
        self.out.checked = "sizes" if quick else "sha256"
        if self.repair is None:
            return True
        self.plan.warnings.append(f"the installed build is damaged ({self.repair}): it is reinstalled")
        return False

    def _locate(self, cfg: InstallerConfig, surveyed: Surveyed | None) -> None:
        """The wheels on the user's sources (conda, mamba, micromamba and pixi install from conda-forge instead)."""
        opts, hypothetical = self.opts, self.hypothetical
        if opts.conda_installer:
            return
        try:
            self.sourcing, self.matrix, self.request = check_sources(
                opts, self.out, self.view, self.python, self.matrix, self.request, cfg, hypothetical=hypothetical, surveyed=surveyed,
                fit_for=None if hypothetical else lambda m: fit_words(opts, self.view, self.python, m),
            )
        except IndexError_ as exc:
            plan = self.plan
            unchecked = getattr(exc, "reason", "") == "unchecked"
            missing = getattr(exc, "reason", "") == "missing"  # the sources answered without it: for a what-if, a word, not the end
            if not ((unchecked or (missing and hypothetical)) and (hypothetical or ((opts.dry_run or opts.emit) and opts.sources.offline))):
                if not hypothetical:
                    plan.command = []  # no command that cannot reach its wheels
                self.hooks.show(self.out)
                raise
            plan.warnings.append(f"the wheels were not checked: {exc}" if unchecked else f"on this machine's sources: {exc}")

    def _delivered(self) -> bool:
        """The plan as the sources deliver it; True when the target already has that one."""
        sourcing = self.sourcing
        assert sourcing is not None
        plan = self.out.plan = sourcing.plan
        if self.hypothetical:
            plan.machine = describe_machine(self.opts, self.view)
            plan.command = generic_command(plan, self.request, windows=self.out.windows)
        else:
            apply_delivery(plan, sourcing, self.python, self.request.installer, self.view)
        plan.warnings.extend(n for n in sourcing.notes if n not in plan.warnings)
        return self._satisfied_here()

    def _act(self) -> int:
        """Show the final plan, then: --emit, the conda route, the dry run, or the install."""
        opts, plan, view, hypothetical = self.opts, self.plan, self.view, self.hypothetical
        from stackdoctor.install.conda import is_conda_target

        conda = is_conda_target(view.facts) or opts.conda_installer or opts.emit == "environment.yml"
        # a plain venv asking only for --emit environment.yml: the file needs a route, the screen offers none (a venv
        # has no conda route: no "conda install -p <venv>", no "route conda-forge (recommended)")
        marker = None if hypothetical or opts.conda_installer else _externally_managed_marker(view)
        if marker:  # PEP 668: say so before anything runs (a dry run too), with the venv to make instead
            from stackdoctor.install.result import externally_managed

            plan.warnings.append(externally_managed(self.python, refused=False))
        offered = conda and (is_conda_target(view.facts) or opts.conda_installer)
        if offered:
            _add_routes(opts, plan, view, self.matrix, self.request, hypothetical)
        self.out.sourcing = self.sourcing
        self.hooks.show(self.out)
        self._check_dependencies()
        if opts.emit:
            self.out.emitted, self.out.what = self._emit_file(plan, routes_known=offered), "emitted"
            return ExitCode.OK
        if opts.conda_installer:
            if opts.installer != "pixi" and not hypothetical and not is_conda_target(view.facts):
                raise UsageError(
                    f"--installer {opts.installer}: {self.python} is not in a conda environment (no conda-meta in {view.facts.python.env_prefix or 'its prefix'}); "
                    "use --installer pip or uv, or point --python at a conda env."
                )
            return _conda_install(opts, plan, hypothetical, self.hooks, self.out)
        if opts.dry_run or hypothetical:
            self.out.what = "dry-run"
            return ExitCode.OK
        if self.sourcing is None:
            raise IndexError_("the wheels could not be checked on any source, so nothing was installed; drop --offline or add --find-links DIR.")
        return _install(opts, plan, view, self.python, self.request, self.sourcing, self.hooks, self.out, repair=self.repair is not None)

    def _check_dependencies(self) -> None:
        sourcing = self.sourcing
        if sourcing is None or not sourcing.needs_dependency_check or self.hypothetical:
            return
        try:
            check_dependencies(sourcing, self.view, self.request, self.python)
        except IndexError_ as e:
            if sourcing.fell_back_from is None:
                raise
            raise IndexError_(f"{sourcing.fell_back_from.rstrip('.')}; the build that stood in for it cannot be installed either: {e}") from None


# ---------------------------------------------------------------------------- the request, and how a build fits


def check_request(opts: InstallOptions, view: MachineView, matrix: Matrix) -> None:
    """Input errors that need the facts or the matrix."""
    from stackdoctor import kinds
    from stackdoctor.model.plan import Request

    asked = Request(gpus=list(opts.machine.gpus), gfx=list(opts.machine.gfx), devices={k: list(v) for k, v in opts.machine.devices.items() if v})
    for acc in kinds.ALL:  # a what-if naming a device nobody makes (--gpu sm_999): one sentence, exit 2
        kind_err = acc.flag_error(asked, matrix)
        if kind_err:
            raise UsageError(kind_err)
    from stackdoctor.resolve.machine import flag_kind

    refuse_implausible_pin(opts.torch, matrix)  # "2.31": a typo, not a release the sources might serve
    own = kinds.for_variant(opts.variant)
    if opts.variant != "auto" and (own is None or own.index_builds):  # a kind's own wheel source (JetPack's) is not the index's
        known = published_variants(matrix)
        if opts.variant not in known:
            raise UsageError(f"no torch release publishes {opts.variant} (known variants: {', '.join(known)}).")
    owner = flag_kind("--gpu")  # --gpu's devices (sm_XY) are planned against a driver of their kind, which --driver names
    unclaimed = [g for g in opts.machine.gpus if not any(a.gpu_name(g) for a in kinds.ALL)]  # the names no other kind claims
    if owner is not None and unclaimed and not opts.machine.driver and not view.driver(owner.name).value and (opts.variant == "auto" or owner.serves(opts.variant)):
        kind_err = owner.no_driver_error(unclaimed[0])
        raise UsageError(kind_err)


def fit_words(opts: InstallOptions, view: MachineView, python: str, matrix: Matrix) -> Callable[[str, str], str]:
    """``fit(version, variant)``: whether that build would run on this machine, in a few words."""

    def fit(version: str, variant: str) -> str:
        from packaging.version import InvalidVersion, Version

        from stackdoctor import kinds

        if matrix.release(version) is None:
            try:
                v = Version(version)
                version = f"{v.major}.{v.minor}"  # a patch the matrix lacks: judge by its minor's row
            except InvalidVersion:
                pass

        auto, _ = resolve_plan(opts, view, python, matrix, torch=version)
        if auto.variant == variant:
            return "it fits this machine"
        forced, _ = resolve_plan(replace(opts, variant=variant), view, python, matrix, torch=version)
        if not forced.satisfiable:
            why = forced.rejected[0].reason if forced.rejected else (forced.reasons[-1] if forced.reasons else "")
            return f"it does not run on this machine ({why})"
        acc = kinds.for_variant(variant)
        if acc is not None and acc.separate_runtime_wheels and not view.driven(acc.vendor):  # a wheel that brings its runtime (CUDA's) installs and runs on the CPU without its GPU
            if auto.variant is None:  # no build fits this machine at all: say so, never "the plan is None"
                return f"it installs and runs here, but on the CPU only: no {acc.vendor_label} GPU here (no build fits this machine)"
            return f"it installs and runs here, but on the CPU only: no {acc.vendor_label} GPU here (the plan is {auto.variant})"
        return f"it would run here, but this machine's build is {auto.variant}"

    return fit


# ---------------------------------------------------------------------------- routes, emit


def _externally_managed_marker(view: MachineView) -> str | None:
    """The target's PEP 668 ``EXTERNALLY-MANAGED`` file (``<prefix>/lib/pythonX.Y/``, where a system Python's stdlib
    is), when the target is a system Python outside any venv; None otherwise."""
    py = view.facts.python
    if py.env_kind != "system" or not py.env_prefix or not py.version or os.name == "nt":
        return None
    major_minor = ".".join(py.version.split(".")[:2])
    path = os.path.join(py.env_prefix, "lib", f"python{major_minor}", "EXTERNALLY-MANAGED")
    return path if os.path.isfile(path) else None


def _add_routes(opts: InstallOptions, plan: Plan, view: MachineView, matrix: Matrix, request: Request, hypothetical: bool) -> None:
    from stackdoctor.install.conda import routes
    from stackdoctor.resolve.machine import flag_kind

    owner = flag_kind("--driver")  # the driver conda's builds are chosen by

    plan.routes = routes(
        plan,
        view,
        matrix,
        pip_command=plan.command,
        installer=opts.installer,
        platform_tag=request.platform or view.facts.python.platform_tag,
        driver=request.driver or (view.driver(owner.name).value if owner is not None else None),
        packages=request.packages,
        hypothetical=hypothetical,
    )


def _emit(opts: InstallOptions, plan: Plan, view: MachineView, request: Request, matrix: Matrix) -> str:
    from stackdoctor.install.conda import environment_yml, index_args
    from stackdoctor.install.emit import emit_requirements, emit_uv
    if opts.emit == "requirements":
        return emit_requirements(plan, find_links=opts.sources.find_links[0] if opts.sources.find_links else None, public_index=_public_index(plan, request, matrix))
    if opts.emit == "uv":
        return emit_uv(plan)
    route = next((r for r in plan.routes if r.name == "conda-forge" and (r.recommended or opts.conda_installer)), None)
    route = route or next((r for r in plan.routes if r.recommended), None) or (plan.routes[0] if plan.routes else None)
    if route is None:
        raise UsageError("--emit environment.yml: no route was planned for this target.")
    py = request.python_version or (".".join(view.facts.python.version.split(".")[:2]) if view.facts.python.version else None)
    name = os.path.basename(view.facts.python.env_prefix.rstrip("/")) if (view.facts.python.env_prefix and view.facts.python.env_kind == "conda") else None
    pip_args = index_args(plan.command)
    if not pip_args and plan.index_url and plan.variant and not (plan.index_url or "").startswith("https://pypi.org"):
        pip_args = ["--extra-index-url", plan.index_url]
    return environment_yml(route, name=name, python=py.rstrip("t") if py else None, pip_reqs=[p.requirement for p in plan.packages], pip_args=pip_args)


def _public_index(plan: Plan, request: Request, matrix: Matrix) -> str | None:
    """PyTorch's own index for the plan's variant (not a mirror, not a folder): what a teammate's pip can reach."""
    from stackdoctor.resolve.packages import variant_index_url

    return variant_index_url(matrix, replace(request, index_base=None), plan.variant) if plan.variant else None


def _satisfied(opts: InstallOptions, plan: Plan, out: InstallOutcome, hooks: Hooks) -> int:
    """The target already has the plan: the plan is shown (what is installed, and that it is this one), nothing is run."""
    plan.satisfied = True
    plan.command = []
    plan.command_env = {}
    out.plan, out.what = plan, "satisfied"
    hooks.show(out)
    return ExitCode.OK


# ---------------------------------------------------------------------------- act


def _conda_install(opts: InstallOptions, plan: Plan, hypothetical: bool, hooks: Hooks, out: InstallOutcome) -> int:
    from stackdoctor.core.shell import format_command
    from stackdoctor.install.conda import require_tool

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
    opts: InstallOptions, plan: Plan, view: MachineView, python: str, request: Request, sourcing: Sourcing, hooks: Hooks, out: InstallOutcome,
    *, repair: bool = False,
) -> int:
    if not opts.yes:
        answer = hooks.confirm(f"Install into {python}?")
        if answer is None:
            raise UsageError(f"not changing {python}: there is no terminal to confirm on; re-run with --yes to install, or --dry-run to only see the plan.")
        if not answer:
            out.what = "declined"
            return ExitCode.OK
    from stackdoctor.install.transaction import InstallSettings, execute
    from stackdoctor.system import System

    settings = InstallSettings(
        installer=request.installer,
        timeout_s=opts.timeout_s,
        remove_leftovers=opts.remove_leftovers,
        accelerator=accelerator_seen(view, plan.variant),
        say=lambda line: hooks.say(line, "yellow"),
        stream=hooks.stream,
        uv=view.facts.python.uv_path or "uv",
        source_args=sourcing.delivery.args,
        env=sourcing.delivery.env or None,
        offline=opts.sources.offline or opts.sources.no_index,
        user_find_links=opts.sources.find_links,
        reinstall=repair,
        gpu_targets=view.gpus,
        facts=view.facts,
        progress=opts.progress,
        verbose=opts.verbose,
        keep_aside=hooks.keep_aside,
    )
    result = execute(plan, system=System.from_env(), python=python, settings=settings)
    out.result = result
    out.what = "installed" if result.ok else "failed"
    return int(result.exit_code)


# ---------------------------------------------------------------------------- a killed install


def _unfinished(opts: InstallOptions, view: MachineView) -> bool:
    from stackdoctor.install.journal import journal_dir

    prefix = view.facts.python.env_prefix
    return bool(prefix and not opts.what_if and os.path.isdir(journal_dir(prefix)))


def _sweep_backups(prefix: str | None, hooks: Hooks) -> None:
    """A committed install's backup that its run had no time to remove (stopped right after `done:`): removed, and said."""
    from stackdoctor.install.journal import sweep_aside, swept_words

    for line in swept_words(sweep_aside(prefix)) if prefix and os.path.isdir(prefix) else []:
        try:
            hooks.say("stackdoctor: " + line, "yellow")
        except OSError:
            pass


def _finish_earlier(opts: InstallOptions, view: MachineView, python: str, hooks: Hooks) -> int | None:
    """Finish a killed install's journal; None when it is finished (then planning goes on)."""
    from stackdoctor.install.transaction import InstallSettings, execute_recovery
    from stackdoctor.system import System

    result = execute_recovery(System.from_env(), python, InstallSettings(
        uv=view.facts.python.uv_path or "uv", offline=opts.sources.offline or opts.sources.no_index, user_find_links=opts.sources.find_links,
        stream=hooks.stream, say=lambda line: hooks.say(line, "yellow"),
    ))
    try:  # a closed output (the pipe's reader died with the Ctrl-C) must not stop the install that follows
        hooks.say(("" if result.ok else "stackdoctor: ") + result.message, "yellow" if result.ok else "bold red")
        for note in result.notes:
            hooks.say(f"  {note}", "yellow")
    except OSError:
        from stackdoctor.install.talk import save_unprinted

        save_unprinted(result.prefix or "", [result.message, *result.notes])
    return None if result.ok else int(result.exit_code)


def _recover_only(opts: InstallOptions, hooks: Hooks, out: InstallOutcome) -> int:
    from stackdoctor.install.transaction import InstallSettings, execute_recovery
    from stackdoctor.pipeline.engine import select_target, validate_python
    from stackdoctor.system import System

    if opts.python:
        validate_python(opts.python)
    python = out.python = select_target(opts.python, os.environ).python
    out.result = execute_recovery(System.from_env(), python, InstallSettings(
        offline=opts.sources.offline or opts.sources.no_index, user_find_links=opts.sources.find_links, stream=hooks.stream, say=lambda line: hooks.say(line, "yellow"),
    ))
    out.what = "recovered"
    return int(out.result.exit_code)


def _damage(python: str, plan: Plan, *, sizes_only: bool = False) -> str | None:
    """Why the installed build the plan names is not really there (a RECORD file missing or changed, torch not
    importing), or None: complete per RECORD and importing (``sizes_only``: each file's size, no import)."""
    from stackdoctor.install.verify import intact
    from stackdoctor.system import System

    return intact(System.from_env(), python, [p.name for p in plan.packages], sizes_only=sizes_only)


__all__ = ["Hooks", "InstallOptions", "InstallOutcome", "install"]

