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
    from rich.cells import cell_len

    lines = [catalog.ui("list_header", lang), ""]
    rows = [(c.code, catalog.ui("sev_" + c.severity, lang), catalog.layer_word(c.layer, lang)) for c in catalog.checks()]
    widths = [max(cell_len(r[i]) for r in rows) for i in range(3)]  # columns as wide as their longest cell
    for c, row in zip(catalog.checks(), rows, strict=True):
        cells = "  ".join(cell + " " * (w - cell_len(cell)) for cell, w in zip(row, widths, strict=True))
        lines.append(f"  {cells}  {catalog.title(c.code, lang)}")
    return "\n".join(lines)


def _group_word(group: str, lang: str) -> str:
    """A rule group in ``lang``: its own word (``core``), else the layer of that name's (``driver`` -> 驱动)."""
    word = catalog.texts(lang)["ui"].get("group_" + group)
    return str(word) if word else catalog.layer_word(group, lang)


def format_code(code: str, lang: str) -> str:
    ci = catalog.info(code)
    assert ci is not None
    out = [
        catalog.ui("label_value", lang, label=code, value=catalog.title(code, lang)),
        "    ".join(
            catalog.ui("label_value", lang, label=catalog.ui(label, lang), value=value)
            for label, value in (("severity", catalog.ui("sev_" + ci.severity, lang)), ("layer", catalog.layer_word(ci.layer, lang)), ("rule_group", _group_word(ci.group, lang)))
        ),
        "",
        catalog.explain(code, lang) or "",
    ]
    fix = catalog.message(code, "fix", "default", lang)
    if fix and "{" not in fix:  # templates with fields are filled per machine by `check`
        out += ["", catalog.ui("fix_prefix", lang) + fix]  # the prefix `check` prints: "fix: " / "修复："
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
