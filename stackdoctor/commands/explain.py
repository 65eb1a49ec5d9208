"""``stackdoctor explain [CODE] [--lang en|zh]``: what a finding code means, for a first-time reader.

Alone it lists every code with its severity, layer and title; with a code it prints the
explanation and the usual fix. An unknown code is one sentence on stderr and exit 2.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from stackdoctor import catalog
from stackdoctor.errors import ExitCode, UsageError


def format_list(lang: str) -> str:
    lines = [catalog.ui("list_header", lang), ""]
    width = max(len(c.code) for c in catalog.checks())
    for c in catalog.checks():
        lines.append(f"  {c.code:<{width}}  {c.severity:<4}  {c.layer:<8}  {catalog.title(c.code, lang)}")
    return "\n".join(lines)


def format_code(code: str, lang: str) -> str:
    ci = catalog.info(code)
    assert ci is not None
    out = [
        f"{code}: {catalog.title(code, lang)}",
        f"{catalog.ui('severity', lang)}: {ci.severity}    {catalog.ui('layer', lang)}: {ci.layer}    {catalog.ui('rule_group', lang)}: {ci.group}",
        "",
        catalog.explain(code, lang) or "",
    ]
    fix = catalog.message(code, "fix", "default", lang)
    if fix and "{" not in fix:  # templates with fields are filled per machine by `check`
        out += ["", f"{catalog.ui('fix', lang)}: {fix}"]
    return "\n".join(out).rstrip() + "\n"


def register(app: typer.Typer) -> None:
    @app.command("explain")
    def explain(
        code: Annotated[Optional[str], typer.Argument(help="A finding code, e.g. driver-too-old (omit to list all).")] = None,
        lang: Annotated[Optional[str], typer.Option("--lang", help="en | zh (default from LC_ALL / LC_MESSAGES / LANG).")] = None,
    ) -> int:
        """Explain a finding code (driver vs toolkit vs the runtime in the wheel, and the fix)."""
        if lang is not None and lang not in catalog.LANGS:
            raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
        lg = catalog.detect_lang(os.environ, lang)
        if code is None:
            sys.stdout.write(format_list(lg) + "\n")
            return ExitCode.OK
        key = code.strip().lower()
        if catalog.info(key) is None:
            from stackdoctor.diagnose import closest_code

            close = closest_code(key)
            if close:
                raise UsageError(catalog.ui("unknown_code_close", lg, code=code, close=close))
            raise UsageError(catalog.ui("unknown_code", lg, code=code))
        sys.stdout.write(format_code(key, lg))
        return ExitCode.OK
