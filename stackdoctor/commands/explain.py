"""``stackdoctor explain [CODE] [--lang en|zh]``: what a finding code means, for a first-time reader.

Alone it lists every code with its severity, layer and title; with a code it prints the
explanation and the usual fix. An unknown code is one sentence on stderr and exit 2.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated, Optional

import typer

from stackdoctor.core.errors import ExitCode, UsageError
from stackdoctor.model.report import code_status, status_key
from stackdoctor.rules import catalog


def format_list(lang: str, width: int = 80) -> str:
    """Every code, severity, layer and title in columns; a title that does not fit ``width`` wraps under its
    own column, or, where that column would be too narrow, on the lines below the code."""
    from rich.cells import cell_len

    from stackdoctor.render.wrap import wrap

    lines = [*wrap(catalog.ui("list_header", lang), width), ""]
    rows = [(c.code, catalog.ui(status_key(code_status(c.code, c.severity)), lang), catalog.layer_word(c.layer, lang)) for c in catalog.checks()]
    widths = [max(cell_len(r[i]) for r in rows) for i in range(3)]  # columns as wide as their longest cell
    for c, row in zip(catalog.checks(), rows, strict=True):
        cells = "  ".join(cell + " " * (w - cell_len(cell)) for cell, w in zip(row, widths, strict=True))
        lead, title = f"  {cells}  ", catalog.title(c.code, lang)
        if width - cell_len(lead) >= 24:
            lines += wrap(title, width, indent=lead, hang=" " * cell_len(lead))
        else:  # a narrow screen: the title on its own lines, indented under the code
            lines += [f"  {cells}".rstrip(), *wrap(title, width, indent="      ")]
    return "\n".join(lines)


def _group_word(group: str, lang: str) -> str:
    """A rule group in ``lang``: its own word (``core``), else the layer of that name's (``driver`` -> 驱动)."""
    word = catalog.texts(lang)["ui"].get("group_" + group)
    return str(word) if word else catalog.layer_word(group, lang)


def format_code(code: str, lang: str, width: int = 80) -> str:
    """A code's title, facts, explanation and usual fix, folded to ``width`` display cells between words."""
    from stackdoctor.render.wrap import reflow, wrap

    ci = catalog.info(code)
    assert ci is not None
    facts = [
        catalog.ui("label_value", lang, label=catalog.ui(label, lang), value=value)
        for label, value in (("severity", catalog.ui(status_key(code_status(ci.code, ci.severity)), lang)), ("layer", catalog.layer_word(ci.layer, lang)), ("rule_group", _group_word(ci.group, lang)))
    ]
    out = [*wrap(catalog.ui("label_value", lang, label=code, value=catalog.title(code, lang)), width), *_facts_lines(facts, width)]
    for para in reflow(catalog.explain(code, lang) or ""):
        out.append("")
        for lead, text in para:
            out += wrap(text, width, indent=lead, hang=" " * len(lead))
    fix = catalog.message(code, "fix", "default", lang)
    if fix and "{" not in fix:  # templates with fields are filled per machine by `check`
        prefix = catalog.ui("fix_prefix", lang)  # the prefix `check` prints: "fix: " / "修复："
        out += ["", prefix + fix]  # never folded, as check prints it: a fix is copied whole (a terminal wraps it, no newline added)
    return "\n".join(out).rstrip() + "\n"


def _facts_lines(facts: list[str], width: int) -> list[str]:
    """``severity: fail    layer: driver    rule group: core`` on one line where it fits, else one per line."""
    from rich.cells import cell_len

    one = "    ".join(facts)
    return [one] if cell_len(one) <= width else facts


def _width() -> int:
    """The screen's width: the terminal's, else ``COLUMNS``, else 80 (rich's rule)."""
    from stackdoctor.core.console import make_console

    return max(20, make_console().width)


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
            sys.stdout.write(format_list(lg, _width()) + "\n")
            return ExitCode.OK
        key = code.strip().lower()
        if catalog.info(key) is None:
            from stackdoctor.rules.diagnose import closest_code

            close = closest_code(key)
            if close:
                raise UsageError(catalog.ui("unknown_code_close", lg, code=code, close=close))
            raise UsageError(catalog.ui("unknown_code", lg, code=code))
        sys.stdout.write(format_code(key, lg, _width()))
        return ExitCode.OK
