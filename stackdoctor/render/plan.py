"""Drawing an install plan (``stackdoctor install``'s screen): the table of packages, why, warnings, rejected
variants, routes and the command, for a terminal (folded to its width) or a pipe (one line per command)."""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING, Any, Literal

from stackdoctor.shell import powershell_set, powershell_unset, word

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.plan import Plan


def render_plan(plan: Plan, python: str, *, stderr: bool, hypothetical: bool = False, windows: bool = False) -> None:
    """Draw ``plan``. On a terminal the table fits its width; elsewhere (a pipe, a CI log) nothing is folded,
    so a wheel's file name and every command stay one line a person can copy, and no line ends in spaces.
    ``windows``: the target is a Windows machine, so commands and variables are written for PowerShell."""
    from rich.text import Text

    from stackdoctor.console import make_console
    from stackdoctor.redact import safe_copy

    plan = safe_copy(plan, screen=True)  # the output boundary: credentials ****, control characters escaped
    con = make_console(stderr=stderr, soft_wrap=True)
    if con.is_terminal or con.color_system is not None:
        _draw_plan(con, plan, python, hypothetical=hypothetical, fold=True, windows=windows)
        return
    wide = make_console(stderr=stderr, soft_wrap=True, width=10_000)
    with wide.capture() as captured:
        _draw_plan(wide, plan, python, hypothetical=hypothetical, fold=False, windows=windows)
    con.print(Text("\n".join(line.rstrip() for line in captured.get().splitlines())), soft_wrap=True)


def _draw_plan(con: Any, plan: Plan, python: str, *, hypothetical: bool, fold: bool, windows: bool = False) -> None:
    from rich.table import Table
    from rich.text import Text

    overflow: Literal["fold", "ignore"] = "fold" if fold else "ignore"
    if not plan.satisfiable:
        con.print(Text(localized("No torch build fits this request."), style="bold red"))
    else:
        where = localized(f"a hypothetical machine: {plan.machine}") if hypothetical else python
        con.print(Text(localized(f"Plan for {where}: torch {plan.torch_version} ({plan.variant})"), style="bold"))
        table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        table.add_column(localized("package"))
        table.add_column(localized("version"))
        table.add_column(localized("source"), overflow=overflow, no_wrap=not fold)
        checked = any(p.wheel for p in plan.packages)
        if checked:
            table.add_column(localized("wheel"), overflow=overflow, no_wrap=not fold)
        for p in plan.packages:
            row = [Text(p.name), Text(p.requirement.split("==", 1)[1]), Text(p.source or p.index_url or "PyPI")]
            if checked:
                row.append(Text(p.wheel or "-"))
            table.add_row(*row)
        con.print(table)
    for title, items, style in (
        ("why", plan.reasons, ""),
        ("warnings", plan.warnings, "yellow"),
        ("rejected", [localized(f"{r.variant}: {r.reason}", r.reason) for r in plan.rejected], "dim"),
        ("would work instead", plan.suggestions, ""),
    ):
        if items:
            con.print(Text(localized(f"{title}:"), style="bold " + style))
            for line in items:
                con.print(Text(f"  - {localized(line)}", style=style))
    if plan.env:
        con.print(Text(localized("set before running torch:"), style="bold"))
        for k, v in plan.env.items():
            con.print(Text("  " + (powershell_set(k, v) if windows else f"export {k}={shlex.quote(v)}")))
    if plan.leftovers and not hypothetical:
        con.print(Text(localized(f"left behind by the previous variant (remove with --remove-leftovers): {', '.join(plan.leftovers)}"), style="yellow"))
    for route in plan.routes:
        mark = " (recommended)" if route.recommended else ""
        con.print(Text(localized(f"route {route.name}{mark}: {route.title}"), style="bold"))
        for line in route.reasons:
            con.print(Text(f"  + {localized(line)}"))
        for line in route.cautions:
            con.print(Text(f"  ! {localized(line)}", style="yellow"))
        if route.command:
            con.print(Text("    " + format_command(route.command, dict(route.env), windows=windows)))
    if plan.command:
        label = "command (on that machine; not run here):" if hypothetical else "command:"
        if plan.routes and not hypothetical:
            label = "command (route pip-wheels, what --yes runs; --installer conda runs the conda-forge one):"
        con.print(Text(localized(label), style="bold"))
        con.print(Text("  " + format_command(plan.command, plan.command_env, windows=windows)))


def format_command(argv: list[str], env: dict[str, str | None] | None = None, *, windows: bool = False) -> str:
    """``VAR=value ... argv`` as a shell would take it (``env -u VAR`` for an unset one).

    ``windows``: as PowerShell takes it: ``$env:VAR = "value"; `` (``Remove-Item Env:VAR; ``) before the
    command, backslashes left bare (POSIX quoting would turn ``C:\\x\\python.exe`` into a string PowerShell
    prints instead of running), and ``&`` before a quoted program."""
    if windows:
        words = [word(a, windows=True) for a in argv]
        cmd = " ".join((["&"] if words and words[0] != argv[0] else []) + words)
        pre_ps = [powershell_unset(k) if v is None else powershell_set(k, v) for k, v in (env or {}).items()]
        return "; ".join([*pre_ps, cmd])
    pre: list[str] = []
    unset = [k for k, v in (env or {}).items() if v is None]
    if unset:
        pre += ["env"] + [x for k in unset for x in ("-u", k)]
    pre += [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items() if v is not None]
    return " ".join(pre + [shlex.join(argv)])


def localized(text: str, reason: str | None = None) -> str:
    """One of the install screen's English sentences in the user's language (catalog ``sentences:``);
    with ``reason``, ``text`` is ``LABEL: reason`` and only the reason is a sentence."""
    from stackdoctor.catalog import detect_lang, sentence, ui

    lang = detect_lang(os.environ)
    if reason is not None and text.endswith(": " + reason):
        return ui("label_value", lang, label=text[: -len(reason) - 2], value=sentence(reason, lang))
    return sentence(text, lang)
