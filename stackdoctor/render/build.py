"""The screen and the JSON document of ``stackdoctor install --from-source`` (``stackdoctor.build-plan/1``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from stackdoctor.core.shell import powershell_set, word
from stackdoctor.render.plans import localized

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.core.errors import StackdoctorError
    from stackdoctor.resolve.source_build import BuildPlan

_MARK = {"ok": "ok", "missing": "MISSING", "unknown": "?"}


def build_json(plan: BuildPlan | None, exc: StackdoctorError | None = None) -> str:
    """One ``stackdoctor.build-plan/1`` document (a usage error before any plan: the empty plan with its ``error``)."""
    from stackdoctor.core.redact import safe_copy
    from stackdoctor.resolve.source_build import BUILD_PLAN_SCHEMA

    data: dict[str, Any]
    if plan is None:
        data = {"schema": BUILD_PLAN_SCHEMA, "torch_version": None, "tag": None, "accelerator": "cpu", "os": "linux", "shell": "posix",
                "source_url": "", "source_dir": "", "python": "", "prerequisites": [], "env": {}, "env_reasons": {}, "commands": [],
                "warnings": [], "machine": None, "log": None, "ran": [], "error": None}
    else:
        data = safe_copy(plan).to_data()
    if exc is not None:
        data["error"] = str(exc)
    return json.dumps(data, indent=2) + "\n"


def render_build(plan: BuildPlan) -> None:
    """The plan on stderr: prerequisites, environment, commands (and, after a run, what ran and the log)."""
    from rich.table import Table
    from rich.text import Text

    from stackdoctor.core.console import make_console
    from stackdoctor.core.redact import safe_copy

    plan = safe_copy(plan, screen=True)
    con = make_console(stderr=True, soft_wrap=True)
    where = localized(f"a hypothetical machine: {plan.machine}") if plan.machine else plan.python
    con.print(Text(localized(f"Source build of torch {plan.torch_version} ({plan.accelerator}) for {where}"), style="bold"))
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("prerequisite", "needed", "found", "status"):
        table.add_column(localized(col))
    for p in plan.prerequisites:
        found = " ".join(x for x in (p.found, f"({p.path})" if p.path else None) if x) or "-"
        style = {"ok": "green", "missing": "bold red"}.get(p.status, "yellow")
        table.add_row(Text(p.name), Text(localized(p.needed)), Text(found), Text(localized(_MARK.get(p.status, p.status)), style=style))
    con.print(table)
    fixes = [p for p in plan.prerequisites if p.status == "missing" and p.fix]
    if fixes:
        con.print(Text(localized("to fix first:"), style="bold red"))
        for p in fixes:
            con.print(Text(f"  - {p.name}: {localized(p.fix or '')}"))
    if plan.warnings:
        con.print(Text(localized("warnings:"), style="bold yellow"))
        for w in plan.warnings:
            con.print(Text(f"  - {localized(w)}", style="yellow"))
    con.print(Text(localized("environment:"), style="bold"))
    for k, v in plan.env.items():
        line = powershell_set(k, v) if plan.shell == "powershell" else f"export {k}={word(v)}"
        why = plan.env_reasons.get(k)
        con.print(Text(f"  {line}" + (f"   # {localized(why)}" if why else "")))
    con.print(Text(localized("commands:"), style="bold"))
    for c in plan.commands:
        prefix = f"  ({c.cwd}) " if c.cwd != "." else "  "
        con.print(Text(prefix + c.line))
    _result(con, plan)


def render_result(plan: BuildPlan) -> None:
    """After a run: the steps that finished, the log, and what stopped it."""
    from stackdoctor.core.console import make_console
    from stackdoctor.core.redact import safe_copy

    _result(make_console(stderr=True, soft_wrap=True), safe_copy(plan, screen=True))


def _result(con: Any, plan: BuildPlan) -> None:
    from rich.text import Text

    if plan.ran:
        con.print(Text(localized(f"ran: {', '.join(plan.ran)}"), style="green"))
    if plan.log:
        con.print(Text(localized(f"log: {plan.log}")))
    if plan.error:
        con.print(Text(localized(plan.error), style="bold red"))
