"""``stackdoctor install``: facts -> resolve -> confirm the wheels on the index -> show -> install -> verify.

Exit codes: 0 done (or a dry run), 1 the request cannot be met (``plan.variant`` is None) or
the install failed / was undone, 2 usage or index errors, 130 interrupted.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from stackdoctor import pipeline
from stackdoctor.errors import ExitCode, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.facts import Facts
    from stackdoctor.matrix import Matrix
    from stackdoctor.plan import Plan, Request

KNOWN_PACKAGES = ("torch", "torchvision", "torchaudio")
PROBES = ["target", "platform", "nvidia", "rocm", "apple", "intel", "jetson"]


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
    index_base: str | None = None
    find_links: str | None = None
    matrix: list[str] = field(default_factory=list)
    emit: str | None = None
    python_version: str | None = None
    platform: str | None = None
    replay: str | None = None
    driver: str | None = None
    gpus: list[str] = field(default_factory=list)
    gfx: list[str] = field(default_factory=list)
    remove_leftovers: bool = False
    timeout_s: float = 3600.0
    index_timeout_s: float = 20.0

    @property
    def what_if(self) -> bool:
        return bool(self.python_version or self.platform or self.replay)


def register(app: typer.Typer) -> None:
    @app.command("install")
    def install(
        packages: Annotated[Optional[list[str]], typer.Argument(help="torch, torchvision, torchaudio (torch is always included).")] = None,
        torch: Annotated[Optional[str], typer.Option("--torch", help="torch version or specifier: 2.13.0, '>=2.6,<2.12'.")] = None,
        variant: Annotated[str, typer.Option("--variant", help="auto, cpu, cu126, cu130, rocm7.2, xpu, ...")] = "auto",
        python: Annotated[Optional[str], typer.Option("--python", help="Interpreter to install into (default: active venv/conda env, else this one).")] = None,
        installer: Annotated[str, typer.Option("--installer", help="pip or uv.")] = "pip",
        dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the plan and the command; change nothing.")] = False,
        json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON (stackdoctor.plan/1) on stdout.")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before changing the environment.")] = False,
        offline: Annotated[bool, typer.Option("--offline", help="Resolve from the compatibility matrix alone; skip the index check.")] = False,
        index_base: Annotated[Optional[str], typer.Option("--index-base", help="Mirror of download.pytorch.org/whl (or STACKDOCTOR_INDEX_BASE).")] = None,
        find_links: Annotated[Optional[str], typer.Option("--find-links", help="Install from the wheels in this directory (air-gapped).")] = None,
        matrix: Annotated[Optional[list[str]], typer.Option("--matrix", help="Compatibility matrix YAML layered over the embedded one.")] = None,
        emit: Annotated[Optional[str], typer.Option("--emit", help="Print pins for your project: requirements or uv.")] = None,
        python_version: Annotated[Optional[str], typer.Option("--python-version", help="What-if: resolve for this Python (3.12, 3.13t). Implies --dry-run.")] = None,
        platform: Annotated[Optional[str], typer.Option("--platform", help="What-if: wheel platform tag (manylinux_2_28_x86_64, win_amd64, macosx_14_0_arm64). Implies --dry-run.")] = None,
        replay: Annotated[Optional[str], typer.Option("--replay", help="Resolve for the machine a report describes. Implies --dry-run.")] = None,
        driver: Annotated[Optional[str], typer.Option("--driver", help="What-if NVIDIA driver version.")] = None,
        gpu: Annotated[Optional[list[str]], typer.Option("--gpu", help="What-if GPU: a name or sm_XY (repeatable).")] = None,
        gfx: Annotated[Optional[list[str]], typer.Option("--gfx", help="What-if AMD GPU arch gfxNNNN (repeatable).")] = None,
        remove_leftovers: Annotated[bool, typer.Option("--remove-leftovers", help="Uninstall the previous variant's runtime packages.")] = False,
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
            index_base=index_base,
            find_links=find_links,
            matrix=list(matrix or []),
            emit=emit,
            python_version=python_version,
            platform=platform,
            replay=replay,
            driver=driver,
            gpus=list(gpu or []),
            gfx=list(gfx or []),
            remove_leftovers=remove_leftovers,
            timeout_s=timeout,
            index_timeout_s=index_timeout,
        )
        return int(run(opts))


# ---------------------------------------------------------------------------- steps


def check_options(opts: InstallOptions) -> None:
    if opts.installer not in ("pip", "uv"):
        raise UsageError(f"--installer must be pip or uv, not {opts.installer!r}.")
    if opts.emit is not None and opts.emit not in ("requirements", "uv"):
        raise UsageError(f"--emit must be requirements or uv, not {opts.emit!r}.")
    if opts.emit and opts.json_out:
        raise UsageError("--emit and --json both print on stdout; choose one.")
    if opts.timeout_s <= 0 or opts.index_timeout_s <= 0:
        raise UsageError("--timeout and --index-timeout must be positive.")
    unknown = [p for p in opts.packages if p.lower() not in KNOWN_PACKAGES]
    if unknown:
        raise UsageError(
            f"stackdoctor install handles torch, torchvision and torchaudio, not {', '.join(unknown)}; install other packages with pip afterwards."
        )
    if opts.find_links and opts.offline:
        pass  # the directory check is local; --offline only skips the network


def pipeline_options(opts: InstallOptions) -> pipeline.Options:
    # install needs the target's tags and what torch build is there, not a working torch:
    # read torch/version.py instead of importing it (seconds faster, and safe on a broken torch)
    return pipeline.Options(
        python=opts.python, kernels=False, import_torch=False, replay=opts.replay, matrix_files=list(opts.matrix), probes=PROBES
    )


def gather_facts(opts: InstallOptions) -> tuple[Facts, str, Matrix]:
    """(reconciled facts, target interpreter path, matrix): probed here, or from ``--replay``."""
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


def make_request(opts: InstallOptions, facts: Facts, matrix: Matrix | None = None) -> Request:
    from stackdoctor.index import index_base
    from stackdoctor.plan import Request

    return Request(
        torch=opts.torch,
        variant=opts.variant,
        packages=wanted_packages(opts, facts),
        python_version=opts.python_version,
        platform=opts.platform,
        driver=opts.driver,
        gpus=list(opts.gpus),
        gfx=list(opts.gfx),
        index_base=index_base(opts.index_base, os.environ, matrix),
        installer=opts.installer,
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


def resolve_plan(opts: InstallOptions, facts: Facts, python: str, matrix: Matrix) -> tuple[Plan, Request]:
    from stackdoctor.install import install_command, predict_leftovers
    from stackdoctor.resolve import resolve

    request = make_request(opts, facts, matrix)
    plan = resolve(facts, matrix, request)
    if plan.satisfiable:
        plan.command = install_command(plan, python, opts.installer, find_links=opts.find_links, uv=facts.python.uv_path or "uv")
        if not plan.leftovers:
            plan.leftovers = predict_leftovers(facts.torch.distributions, plan.variant)
    return plan, request


def check_index(opts: InstallOptions, plan: Plan, facts: Facts, request: Request) -> list[Any]:
    from stackdoctor.index import python_version_of, target_tags, verify_plan

    tags = target_tags(facts, request)
    if not tags:
        plan.warnings.append("the target's wheel tags are unknown, so the index check only confirmed that the versions exist.")
    return verify_plan(
        plan,
        tags,
        python_version=python_version_of(facts, request),
        find_links=opts.find_links,
        env=os.environ,
        timeout_s=opts.index_timeout_s,
    )


# ---------------------------------------------------------------------------- rendering


def render_plan(plan: Plan, python: str, *, stderr: bool, matches: list[Any] | None = None) -> None:
    from rich.table import Table
    from rich.text import Text

    from stackdoctor.console import make_console

    con = make_console(stderr=stderr, soft_wrap=True)
    if not plan.satisfiable:
        con.print(Text("No torch build fits this request.", style="bold red"))
    else:
        con.print(Text(f"Plan for {python}: torch {plan.torch_version} ({plan.variant})", style="bold"))
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column("package")
        table.add_column("version")
        table.add_column("index", overflow="fold")
        if matches:
            table.add_column("wheel", overflow="fold")
        found = {m.package: m for m in matches or []}
        for p in plan.packages:
            row = [Text(p.name), Text(p.requirement.split("==", 1)[1]), Text(p.index_url or "PyPI")]
            if matches:
                row.append(Text(found[p.name].filename if p.name in found else "-"))
            table.add_row(*row)
        con.print(table)
    for title, items, style in (
        ("why", plan.reasons, ""),
        ("warnings", plan.warnings, "yellow"),
        ("rejected", [f"{r.variant}: {r.reason}" for r in plan.rejected], "dim"),
        ("would work instead", plan.suggestions, ""),
    ):
        if items:
            con.print(Text(f"{title}:", style="bold " + style))
            for line in items:
                con.print(Text(f"  - {line}", style=style))
    if plan.env:
        con.print(Text("set before running torch:", style="bold"))
        for k, v in plan.env.items():
            con.print(Text(f"  export {k}={shlex.quote(v)}"))
    if plan.leftovers:
        con.print(Text(f"left behind by the previous variant (remove with --remove-leftovers): {', '.join(plan.leftovers)}", style="yellow"))
    if plan.command:
        con.print(Text("command:", style="bold"))
        con.print(Text("  " + shlex.join(plan.command)))


def say(text: str, style: str = "") -> None:
    from rich.text import Text

    from stackdoctor.console import make_console

    make_console(stderr=True, soft_wrap=True).print(Text(text, style=style))


# ---------------------------------------------------------------------------- the command


def run(opts: InstallOptions) -> int:
    check_options(opts)
    facts, python, matrix = gather_facts(opts)
    plan, request = resolve_plan(opts, facts, python, matrix)
    quiet_stdout = opts.json_out or opts.emit is not None
    render_plan(plan, python, stderr=quiet_stdout)
    matches: list[Any] = []
    if plan.satisfiable and not (opts.offline and not opts.find_links):
        matches = check_index(opts, plan, facts, request)  # raises IndexError_ (exit 2): nothing changed
        where = opts.find_links or plan.index_url
        say(f"index check: {len(matches)} wheel(s) found for this target on {where}.", "green")
    elif plan.satisfiable:
        say("--offline: the wheels were not checked on the index.", "dim")
    if opts.json_out:
        sys.stdout.write(json.dumps(plan.to_data(), indent=2) + "\n")
    if not plan.satisfiable:
        return ExitCode.FAILED
    if opts.emit:
        from stackdoctor.install import emit_requirements, emit_uv

        sys.stdout.write(emit_requirements(plan, find_links=opts.find_links) if opts.emit == "requirements" else emit_uv(plan))
        return ExitCode.OK
    if opts.dry_run or opts.what_if:
        why = "" if opts.dry_run else " (--python-version, --platform and --replay only plan)"
        say(f"dry run{why}: nothing was changed.")
        return ExitCode.OK
    if not opts.yes:
        if not sys.stdin.isatty():
            raise UsageError(
                f"not changing {python}: there is no terminal to confirm on; re-run with --yes to install, or --dry-run to only see the plan."
            )
        if not typer.confirm(f"Install into {python}?", default=False, err=True):
            say("nothing was changed.")
            return ExitCode.OK
    from stackdoctor.install import execute
    from stackdoctor.system import System

    result = execute(
        plan,
        system=System.from_env(),
        python=python,
        installer=opts.installer,
        index_base=request.index_base,
        find_links=opts.find_links,
        timeout_s=opts.timeout_s,
        remove_leftovers=opts.remove_leftovers,
        accelerator=accelerator_seen(facts, plan.variant),
        say=lambda line: say(line, "yellow"),
        uv=facts.python.uv_path or "uv",
    )
    say(("done: " if result.ok else "stackdoctor: ") + result.message, "bold green" if result.ok else "bold red")
    for note in result.notes:
        say(f"  {note}", "yellow")
    if result.removed:
        say(f"removed the previous variant's packages: {', '.join(result.removed)}.")
    elif result.leftovers:
        say(f"left behind by the previous variant: {', '.join(result.leftovers)} (remove them with --remove-leftovers).", "yellow")
    return int(result.exit_code)
