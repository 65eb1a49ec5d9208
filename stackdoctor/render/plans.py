"""Drawing an install plan (``stackdoctor install``'s screen): the table of packages, why, warnings, rejected
variants, routes and the command, for a terminal (folded to its width) or a pipe (one line per command)."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any, Literal

from rich.cells import cell_len

from stackdoctor.core.shell import export as shell_export
from stackdoctor.core.shell import format_command

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.core.errors import StackdoctorError
    from stackdoctor.install.flow import InstallOutcome
    from stackdoctor.model.plan import Plan


def say(text: str, style: str = "") -> None:
    """One of the install screen's lines on stderr, in the user's language: one line, whatever a path or a
    value in it holds (a newline or an ESC in a venv's path is shown as ``\\n``, ``\\x1b``)."""
    from rich.text import Text

    from stackdoctor.core.console import make_console
    from stackdoctor.core.redact import escape_controls

    try:
        make_console(stderr=True, soft_wrap=True).print(Text(escape_controls(localized(text)), style=style))
    except SystemExit:  # rich's answer to a broken pipe: an OSError here, which the install's transaction keeps in its log
        raise BrokenPipeError(32, "Broken pipe") from None


def write_err(text: str) -> None:
    """An installer's own output, as it comes (a closed stderr is ignored: it must not stop an install)."""
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def render_planned(outcome: InstallOutcome) -> None:
    """The plan, once it is final (before any question): on stderr when stdout carries ``--json`` / ``--emit``;
    then where the wheels were found."""
    opts = outcome.opts
    if outcome.plan is None:
        return
    quiet_stdout = opts.json_out or opts.emit is not None
    render_plan(outcome.plan, outcome.python, stderr=quiet_stdout, hypothetical=outcome.hypothetical, windows=outcome.windows,
                removing=opts.remove_leftovers)
    if outcome.sourcing is not None:
        where = sorted({m.source for m in outcome.sourcing.matches})
        say(f"index check: {len(outcome.sourcing.matches)} wheel(s) found for this target on {', '.join(where)}.", "green")


def render_outcome(outcome: InstallOutcome) -> None:
    """What happened, after the flow: the last lines on stderr and ``--emit``'s text on stdout."""
    opts, plan, what = outcome.opts, outcome.plan, outcome.what
    result = outcome.result
    if what == "recovered" and result is not None:
        say(("done: " if result.ok else "stackdoctor: ") + result.message, "bold green" if result.ok else "bold red")
        for note in result.notes:
            say(f"  {note}", "yellow")
        return
    if what == "satisfied" and plan is not None:
        reqs = ", ".join(p.requirement.replace("==", " ") for p in plan.packages)
        if outcome.checked == "sizes":
            say(f"already satisfied: {outcome.python} has {reqs}, the planned build, complete by its RECORD's file sizes (a dry run; `stackdoctor install` also checks every file's sha256 and the import); nothing was changed.", "green")
        else:
            say(f"already satisfied: {outcome.python} has {reqs}, the planned build, complete (every file's sha256 checked) and importing; nothing was changed.", "green")
    if outcome.emitted is not None:
        sys.stdout.write(outcome.emitted)
    route = outcome.route
    if what == "dry-run":
        if route is not None:
            say(f"dry run: run this with {opts.installer}:", "bold")
            say("  " + format_command(route.command, dict(route.env), windows=outcome.windows))
        else:
            why = "" if opts.dry_run else " (--python-version, --platform, --replay, --driver, --gpu and --gfx only plan)"
            say(f"dry run{why}: nothing was changed.")
    elif what == "declined":
        say("nothing was changed.")
    elif outcome.conda_result is not None and route is not None:
        if outcome.conda_result.ok:
            say(f"done: {opts.installer} installed {' '.join(route.specs)}.", "bold green")
        else:
            from stackdoctor.install.result import failure_line

            say(f"stackdoctor: {opts.installer} failed ({failure_line(outcome.conda_result)}).", "bold red")
    elif what in ("installed", "failed") and result is not None:
        say(("done: " if result.ok else "stackdoctor: ") + result.message, "bold green" if result.ok else "bold red")
        for note in result.notes:
            say(f"  {note}", "yellow")
        if result.removed:
            say(f"removed the previous variant's packages: {', '.join(result.removed)}.")
        elif result.leftovers:
            say(f"left behind by the previous variant: {', '.join(result.leftovers)} (remove them with --remove-leftovers).", "yellow")


def plan_json(plan: Plan | None, exc: StackdoctorError | None = None) -> str:
    """The one ``stackdoctor.plan/1`` document (``error`` set when ``exc`` stopped the command), redacted."""
    from stackdoctor.core.errors import IndexError_, MatrixError, UsageError
    from stackdoctor.core.redact import safe_data
    from stackdoctor.model.plan import Plan, PlanError

    if plan is None:
        plan = Plan(torch_version=None, variant=None, index_url=None)
    if exc is not None:
        kind = "matrix" if isinstance(exc, MatrixError) else "usage" if isinstance(exc, UsageError) else "index" if isinstance(exc, IndexError_) else "unmet"
        plan.error = PlanError(kind, str(exc), int(exc.exit_code))
    return json.dumps(safe_data(plan.to_data()), indent=2) + "\n"


def render_plan(plan: Plan, python: str, *, stderr: bool, hypothetical: bool = False, windows: bool = False, removing: bool = False) -> None:
    """Draw ``plan``. On a terminal the table fits its width; elsewhere (a pipe, a CI log) nothing is folded,
    so a wheel's file name and every command stay one line a person can copy, and no line ends in spaces.
    ``windows``: the target is a Windows machine, so commands and variables are written for PowerShell."""
    from rich.text import Text

    from stackdoctor.core.console import make_console
    from stackdoctor.core.redact import safe_copy

    plan = safe_copy(plan, screen=True)  # the output boundary: credentials ****, control characters escaped
    python = safe_copy(python, screen=True)
    con = make_console(stderr=stderr, soft_wrap=True)
    if con.is_terminal or con.color_system is not None:
        _draw_plan(con, plan, python, hypothetical=hypothetical, fold=True, windows=windows, removing=removing)
        return
    wide = make_console(stderr=stderr, soft_wrap=True, width=10_000)
    with wide.capture() as captured:
        _draw_plan(wide, plan, python, hypothetical=hypothetical, fold=False, windows=windows, removing=removing)
    con.print(Text("\n".join(line.rstrip() for line in captured.get().splitlines())), soft_wrap=True)


def _item(con: Any, line: str, style: str, fold: bool, lead: str = "  - ") -> None:
    """One why/warning line (or the plan's title, ``lead`` ""): on a terminal folded between words to its width
    under a hanging indent (a URL wider than the screen is the one thing cut); in a pipe one line, whole, for a
    log to copy."""
    from rich.text import Text

    from stackdoctor.render.wrap import wrap

    if not fold:
        con.print(Text(lead + line, style=style))
        return
    for row in wrap(line, max(20, con.width), indent=lead, hang="    "):
        con.print(Text(row, style=style), soft_wrap=True)


def _draw_plan(con: Any, plan: Plan, python: str, *, hypothetical: bool, fold: bool, windows: bool = False, removing: bool = False) -> None:
    """The plan on screen, one section after another: the build and its packages, why (and what was rejected),
    the environment to set, the leftovers, the conda routes, the command."""
    _draw_packages(con, plan, python, hypothetical=hypothetical, fold=fold)
    _draw_lists(con, plan, fold)
    _draw_env(con, plan, windows)
    if plan.leftovers and not hypothetical and removing:  # --remove-leftovers given: they go, not "remove with" it
        _item(con, localized(f"removed after the install (--remove-leftovers): {', '.join(plan.leftovers)}"), "yellow", fold, lead="")
    elif plan.leftovers and not hypothetical:
        _item(con, localized(f"left behind by the previous variant (remove with --remove-leftovers): {', '.join(plan.leftovers)}"), "yellow", fold, lead="")
    _draw_routes(con, plan, windows)
    _draw_command(con, plan, hypothetical, windows)


def _draw_packages(con: Any, plan: Plan, python: str, *, hypothetical: bool, fold: bool) -> None:
    from rich.table import Table
    from rich.text import Text

    if not plan.satisfiable:
        con.print(Text(localized("No torch build fits this request."), style="bold red"))
        return
    overflow: Literal["fold", "ignore"] = "fold" if fold else "ignore"
    where = localized(f"a hypothetical machine: {plan.machine}") if hypothetical else python
    _item(con, localized(f"Plan for {where}: torch {plan.torch_version} ({plan.variant})"), "bold", fold, lead="")
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column(localized("package"))
    table.add_column(localized("version"))
    table.add_column(localized("source"), overflow=overflow, no_wrap=not fold)
    rows = [(p.name, p.requirement.split("==", 1)[1], p.source or p.index_url or "PyPI", p.wheel) for p in plan.packages]
    checked = any(w for *_, w in rows)
    below = fold and checked and _too_wide(con, rows)  # a terminal too narrow for the wheel column: each wheel under the table
    if checked and not below:
        table.add_column(localized("wheel"), overflow=overflow, no_wrap=not fold)
    avail = con.width - max(cell_len(x) for x in [localized("package"), *(r[0] for r in rows)]) - max(cell_len(x) for x in [localized("version"), *(r[1] for r in rows)]) - 4
    for name, version, source, wheel in rows:
        shown = "\n".join(_folded(source, max(avail, 12), "/")) if fold else source  # a URL folds after a /, never inside a name
        row = [Text(name), Text(version), Text(shown)]
        if checked and not below:
            row.append(Text(wheel or "-"))
        table.add_row(*row)
    con.print(table)
    if below:
        for name, _, _, wheel in rows:
            if wheel:
                con.print(Text("\n".join(_folded(localized(f"wheel ({name}): {wheel}"), con.width, "-", hang="  "))))


def _too_wide(con: Any, rows: list[tuple[str, str, str, str | None]]) -> bool:
    """Whether the package table with its wheel column is wider than the terminal."""
    widths = [max(cell_len(str(r[k] or "")) for r in rows) for k in range(4)]
    return sum(widths) + 2 * 3 > con.width


def _folded(text: str, width: int, after: str, hang: str = "") -> list[str]:
    """``text`` in lines of ``width`` cells, broken after an ``after`` character (``/`` in a URL, ``-`` in a wheel's
    name) or a space, never inside a name (:func:`stackdoctor.render.wrap.wrap`)."""
    from stackdoctor.render.wrap import wrap

    spaced = text.replace(after, after + "\x00 ")
    return [ln.replace("\x00 ", "").replace("\x00", "") for ln in wrap(spaced, width, hang=hang)]


def _draw_lists(con: Any, plan: Plan, fold: bool) -> None:
    from rich.text import Text

    for title, items, style in (
        ("why", plan.reasons, ""),
        ("warnings", plan.warnings, "yellow"),
        ("rejected", [localized(f"{r.variant}: {r.reason}", r.reason) for r in plan.rejected], "dim"),
        ("would work instead", plan.suggestions, ""),
    ):
        if items:
            con.print(Text(localized(f"{title}:"), style="bold " + style))
            for line in items:
                _item(con, localized(line), style, fold)


def _draw_env(con: Any, plan: Plan, windows: bool) -> None:
    from rich.text import Text

    if plan.env:
        con.print(Text(localized("set before running torch:"), style="bold"))
        for k, v in plan.env.items():
            con.print(Text("  " + (shell_export({k: v}, windows=windows))))


def _draw_routes(con: Any, plan: Plan, windows: bool) -> None:
    from rich.text import Text

    for route in plan.routes:
        mark = " (recommended)" if route.recommended else ""
        con.print(Text(localized(f"route {route.name}{mark}: {localized(route.title)}"), style="bold"))
        for line in route.reasons:
            con.print(Text(f"  + {localized(line)}"))
        for line in route.cautions:
            con.print(Text(f"  ! {localized(line)}", style="yellow"))
        if route.command:
            con.print(Text("    " + format_command(route.command, dict(route.env), windows=windows)))


def _draw_command(con: Any, plan: Plan, hypothetical: bool, windows: bool) -> None:
    from rich.text import Text

    if plan.satisfied:
        con.print(Text(localized("command: none, the target already has this build."), style="bold green"))
        return
    if not plan.command:
        return
    label = "command (on that machine; not run here):" if hypothetical else "command:"
    if plan.routes and not hypothetical:
        label = "command (route pip-wheels, what --yes runs; --installer conda runs the conda-forge one):"
    con.print(Text(localized(label), style="bold"))
    con.print(Text("  " + format_command(plan.command, plan.command_env, windows=windows)))


def localized(text: str, reason: str | None = None) -> str:
    """One of the install screen's English sentences in the user's language (catalog ``sentences:``);
    with ``reason``, ``text`` is ``LABEL: reason`` and only the reason is a sentence."""
    from stackdoctor.core.texts import detect_lang, sentence, ui

    lang = detect_lang(os.environ)
    if reason is not None and text.endswith(": " + reason):
        return ui("label_value", lang, label=text[: -len(reason) - 2], value=sentence(reason, lang))
    return sentence(text, lang)
