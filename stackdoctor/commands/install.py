"""``stackdoctor install``: the flags -> :class:`~stackdoctor.install.flow.InstallOptions` -> the install flow
(:func:`stackdoctor.install.flow.install`: facts -> resolve -> locate the wheels on the user's sources -> routes ->
act) -> its one outcome, rendered (:mod:`stackdoctor.render.plans`) -> the exit code.

Exit codes: 0 done (or a dry run, or already satisfied), 1 the request cannot be met (``plan.variant`` is
None) or the install failed / was undone, 2 usage or index errors, 130 interrupted. ``--json`` always
prints one ``stackdoctor.plan/1`` document, with ``error`` set when the command stopped.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from stackdoctor.commands import LANG_HELP, WHAT_IF_DEVICES, WHAT_IF_VALUES, InstallCommand, use_lang
from stackdoctor.core.errors import StackdoctorError
from stackdoctor.render.plans import format_command, localized, plan_json, render_outcome, render_planned, say, write_err

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.install.flow import Hooks, InstallOptions, InstallOutcome
    from stackdoctor.install.from_source import FromSourceOptions

# The install flow (resolve, indexes, accelerators, the matrix) is imported when `install` runs, not when the
# command is registered: every other command (`check`, `--version`) starts without it (issue 33).

__all__ = ["InstallOptions", "format_command", "register", "run"]


def _variant_help() -> str:
    """``--variant``'s help: auto, cpu and the kinds' index variants (:attr:`Accelerator.variant_examples`)."""
    from stackdoctor import kinds

    return f"{', '.join(['auto', 'cpu', *kinds.variant_examples()])}, ..."


def _step_help() -> str:
    """``--step``'s help: every step of a source build, the kinds' own among them (:func:`stackdoctor.kinds.source_build_steps`)."""
    from stackdoctor import kinds

    return f"--from-source: run only this step (repeatable): {', '.join(kinds.source_build_steps())}."


def register(app: typer.Typer) -> None:
    @app.command("install", cls=InstallCommand)
    def install(
        ctx: typer.Context,
        packages: Annotated[Optional[list[str]], typer.Argument(help="torch, torchvision, torchaudio (torch is always included).")] = None,
        torch: Annotated[Optional[str], typer.Option("--torch", help="torch version or specifier: 2.13.0, '>=2.6,<2.12'.")] = None,
        variant: Annotated[str, typer.Option("--variant", help=_variant_help())] = "auto",
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
        # the help of --driver, --gfx and --ptx is their kind's (Accelerator.option_help), and each kind's what-if values
        # of its host (--rocm-userspace) follow --gfx (Accelerator.what_if_values): InstallCommand adds them
        driver: Annotated[Optional[str], typer.Option("--driver", help="")] = None,
        gpu: Annotated[Optional[list[str]], typer.Option("--gpu", help="What-if GPU: a name or sm_XY (repeatable). Implies --dry-run.")] = None,
        gfx: Annotated[Optional[list[str]], typer.Option("--gfx", help="")] = None,
        remove_leftovers: Annotated[bool, typer.Option("--remove-leftovers", help="Uninstall the previous variant's runtime packages.")] = False,
        recover: Annotated[bool, typer.Option("--recover", help="Only finish an install that was killed: put the previous torch back (or keep a complete new one), then stop.")] = False,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds the install may take.")] = 3600.0,
        index_timeout: Annotated[float, typer.Option("--index-timeout", help="Seconds for each index page.")] = 20.0,
        from_source: Annotated[bool, typer.Option("--from-source", help="Build torch from source: the prerequisites, environment and commands PyTorch's README asks for (--emit build-env writes the environment).")] = False,
        ptx: Annotated[bool, typer.Option("--ptx", help="")] = False,
        source_dir: Annotated[str, typer.Option("--source-dir", help="--from-source: the folder the source is cloned into.")] = "pytorch",
        source_url: Annotated[Optional[str], typer.Option("--source-url", help="--from-source: clone from this URL or path (a mirror) instead of GitHub.")] = None,
        step: Annotated[Optional[list[str]], typer.Option("--step", help=_step_help())] = None,
        build_log: Annotated[Optional[str], typer.Option("--build-log", help="--from-source: the log file (default: stackdoctor-build-<time>.log here).")] = None,
        lang: Annotated[Optional[str], typer.Option("--lang", help=LANG_HELP)] = None,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say each step after the installer, with its time.")] = False,
    ) -> int:
        """Install the right torch build for this machine (or show the plan for another)."""
        use_lang(lang)
        if from_source:
            from stackdoctor.install.from_source import FromSourceOptions

            return int(run_from_source(FromSourceOptions(
                torch=torch, python=python, matrix=list(matrix or []), replay=replay, gpus=list(gpu or []), gfx=list(gfx or []),
                platform=platform, python_version=python_version, ptx=ptx, source_dir=source_dir, source_url=source_url,
                steps=list(step or []), dry_run=dry_run, yes=yes, json_out=json_out, emit=emit, log=build_log, timeout_s=timeout if timeout != 3600.0 else 4 * 3600.0,
            )))
        from stackdoctor.install.options import InstallOptions, MachineOptions, SourceOptions

        opts = InstallOptions(
            packages=list(packages or []), torch=torch, variant=variant, python=python, installer=installer, dry_run=dry_run,
            json_out=json_out, yes=yes, emit=emit, remove_leftovers=remove_leftovers, recover=recover, timeout_s=timeout,
            verbose=verbose, progress=_on_terminal(),
            machine=MachineOptions(python_version=python_version, platform=platform, replay=replay, driver=driver, gpus=list(gpu or []),
                                   gfx=list(gfx or []), devices=dict(ctx.meta.get(WHAT_IF_DEVICES) or {}),
                                   values={k: dict(v) for k, v in (ctx.meta.get(WHAT_IF_VALUES) or {}).items()}),
            sources=SourceOptions(offline=offline, no_index=no_index, index_base=index_base, find_links=list(find_links or []),
                                  mirror=mirror, matrix=list(matrix or []), index_timeout_s=index_timeout),
        )
        return int(run(opts))


def _on_terminal() -> bool:
    """Whether the install screen is a terminal (the steps after the installer are then said as they start)."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):
        return False


def _confirm(question: str) -> bool | None:
    """Ask on the terminal (None: there is none to ask on)."""
    if not sys.stdin.isatty():
        return None
    return bool(typer.confirm(localized(question), default=False, err=True))


def hooks() -> Hooks:
    """What the install flow shows, says and asks through: the screen's renderers and the terminal."""
    from stackdoctor.install.flow import Hooks

    return Hooks(show=render_planned, say=say, stream=write_err, confirm=_confirm, keep_aside=True)


def run(opts: InstallOptions) -> int:
    """The command; with ``--json`` exactly one ``stackdoctor.plan/1`` document on stdout, on every path."""
    from stackdoctor.install.flow import install
    from stackdoctor.install.journal import dispose_aside, hook, release_signals

    try:
        outcome = install(opts, hooks())
        exc = outcome.error
        if exc is None:
            _render_or_keep(outcome)
        if opts.json_out and (isinstance(exc, StackdoctorError) or (exc is None and not opts.recover) or (exc is not None and outcome.plan is not None)):
            _print_json(outcome, exc if isinstance(exc, StackdoctorError) else None)
        if outcome.result is not None and outcome.result.set_aside:  # the replaced torch's backup, after `done:` (issues 29, 44)
            hook("done")
            dispose_aside(outcome.result.set_aside)  # a large one by a detached child: off the user's wait
    finally:
        release_signals()  # a committed install ignored signals since its commit point (its exit code stays its outcome's)
    if exc is not None:
        raise exc
    return outcome.exit_code


def _render_or_keep(outcome: InstallOutcome) -> None:
    """The last lines; when the output is closed (the pipe's reader died with the same Ctrl-C: ``| tee``, ``| grep``),
    they are kept for the next install into that environment to say, and the exit code stays the outcome's."""
    try:
        render_outcome(outcome)
    except (Exception, SystemExit):  # noqa: BLE001 - EPIPE, EIO, rich's SystemExit on a broken pipe
        from stackdoctor.install.flow import keep_unprinted

        keep_unprinted(outcome)


def _print_json(outcome: InstallOutcome, exc: StackdoctorError | None) -> None:
    try:
        sys.stdout.write(plan_json(outcome.plan, exc))
        sys.stdout.flush()
    except (OSError, ValueError):
        pass


def run_from_source(opts: FromSourceOptions) -> int:
    """``--from-source``: the build plan (and, without ``--dry-run``, the build); ``--json`` one ``stackdoctor.build-plan/1``."""
    from stackdoctor.install.from_source import run as run_from_source
    from stackdoctor.render.build import build_json, render_build, render_result

    try:
        outcome = run_from_source(opts, say, write_err, show=render_build, confirm=_confirm)
    except StackdoctorError as exc:
        if opts.json_out:
            sys.stdout.write(build_json(None, exc))
        raise
    if outcome.emitted is not None:
        sys.stdout.write(outcome.emitted)
        return outcome.exit_code
    if outcome.plan is not None:
        if outcome.what == "dry-run":
            render_build(outcome.plan)
        elif outcome.what != "declined":
            render_result(outcome.plan)
        if opts.json_out:
            sys.stdout.write(build_json(outcome.plan))
    return outcome.exit_code
