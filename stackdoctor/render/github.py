"""GitHub Actions output: workflow-command annotations and a step-summary page.

``::error title=...::message`` for each failing finding, ``::warning`` for each warning and ``::notice`` for
what was not verified,
escaped as GitHub's runner expects (``%``, ``\\r``, ``\\n`` in the message; also ``:`` and
``,`` in property values — see actions/toolkit ``packages/core/src/command.ts``). The step
summary is the Markdown report without raw outputs, appended to ``$GITHUB_STEP_SUMMARY``.
"""

from __future__ import annotations

import re

from stackdoctor.model.report import Finding, Report
from stackdoctor.model.report import status as status_of
from stackdoctor.render.markdown import render_markdown

__all__ = ["escape_data", "escape_property", "format_annotation", "render_annotations", "render_summary"]

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_LEVEL = {"fail": "error", "warn": "warning", "not-verified": "notice"}  # what was not verified is said, never passed
MAX_MESSAGE_CHARS = 4000


def escape_data(text: str) -> str:
    """A workflow command's message (``toCommandValue`` + ``escapeData``)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value (``escapeProperty``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_annotation(f: Finding, lang: str = "en") -> str | None:
    """One ``::error``/``::warning`` line for a finding, ``::notice`` for one that says what was not verified (with
    the command that verifies it); ``None`` for an ``ok`` finding."""
    level = _LEVEL.get(status_of(f))
    if level is None:
        return None
    from stackdoctor.core.texts import ui

    message = f.detail or f.title
    if f.fix:
        message += "\n" + ui("annotation_fix", lang, fix=f.fix)
    if len(message) > MAX_MESSAGE_CHARS:
        message = message[:MAX_MESSAGE_CHARS] + " [...]"
    title = f"stackdoctor {f.code}: {f.title}"
    # terminal escapes and NULs from tool output have no place in a log annotation
    return f"::{level} title={escape_property(_CONTROL.sub('', title))}::{escape_data(_CONTROL.sub('', message))}"


def render_annotations(report: Report, lang: str = "en", strict: bool = False) -> str:
    """Every annotation line, failures first, then one plain summary line."""
    rank = {"fail": 0, "warn": 1}
    lines = [a for f in sorted(report.findings, key=lambda f: rank.get(status_of(f), 2)) if (a := format_annotation(f, lang))]
    from stackdoctor.render.markdown import format_counts

    lines.append(f"stackdoctor: {format_counts(report, lang, strict)}")
    return "\n".join(lines) + "\n"


def render_summary(report: Report, *, redacted: bool | None = True, lang: str = "en", strict: bool = False) -> str:
    """The step summary page (Markdown, no raw outputs: a summary is limited to 1 MiB)."""
    return render_markdown(report, raw=False, redacted=redacted, heading="stackdoctor check", lang=lang, strict=strict)
