"""The doctor's front door: judge facts into findings, and select findings by code.

The rules themselves live in :mod:`stackdoctor.rules` (one declared rule per code, grouped by
layer); this module keeps the small public API the commands and tests use:
:func:`diagnose` (reconcile + judge, pure), :func:`select` (``--only`` / ``--skip``),
:func:`list_checks` and :func:`detect_lang`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from stackdoctor.model.facts import Facts
from stackdoctor.model.report import Finding, ProbeStatus
from stackdoctor.rules import catalog

__all__ = ["check_patterns", "closest_code", "detect_lang", "diagnose", "list_checks", "select"]

detect_lang = catalog.detect_lang


def diagnose(
    facts: Facts,
    matrix: Any,
    *,
    probes: Sequence[ProbeStatus] | None = None,
    lang: str = "en",
    requirements: Any = None,
) -> list[Finding]:
    """Findings for ``facts``: reconciled with ``matrix`` (a copy: ``facts`` is not changed), then judged
    by every rule. Problems first (fail, then warn), then one ``<layer>-ok`` per healthy layer."""
    from stackdoctor import rules
    from stackdoctor.reconcile import reconcile

    return rules.judge(reconcile(facts, matrix), matrix, probes=list(probes or []), lang=lang, requirements=requirements)


def matches(code: str, pattern: str) -> bool:
    """A code matches a pattern equal to it, or a prefix pattern ending in ``*`` (``thunderbolt-*``)."""
    return code == pattern or (pattern.endswith("*") and code.startswith(pattern[:-1]))


def closest_code(text: str) -> str | None:
    """The known code nearest to ``text`` (a typo: ``torch-mising`` -> ``torch-missing``), or None."""
    import difflib

    stem = text.strip().lower().rstrip("*")
    found = difflib.get_close_matches(stem, catalog.codes(), n=1, cutoff=0.6)
    return found[0] if found else None


def check_patterns(patterns: Sequence[str] | None, flag: str, lang: str = "en") -> None:
    """Refuse a pattern that matches no known code (``--only torch-mising`` would silently gate on nothing).

    :raises UsageError: one sentence naming the pattern and the closest code.
    """
    if not patterns:
        return  # (the catalog is then loaded beside the probes, not before them)
    from stackdoctor.core.errors import UsageError

    known = catalog.codes()
    for pattern in patterns or []:
        if any(matches(code, pattern) for code in known):
            continue
        close = closest_code(pattern)
        if close:
            raise UsageError(catalog.ui("unknown_pattern_close", lang, flag=flag, pattern=pattern, close=close))
        raise UsageError(catalog.ui("unknown_pattern", lang, flag=flag, pattern=pattern))


def select(findings: Iterable[Finding], only: Sequence[str] | None = None, skip: Sequence[str] | None = None) -> list[Finding]:
    """Keep the findings whose code is in ``only`` (all when None) and not in ``skip``."""
    out = []
    for f in findings:
        if only and not any(matches(f.code, p) for p in only):
            continue
        if skip and any(matches(f.code, p) for p in skip):
            continue
        out.append(f)
    return out


def list_checks(lang: str = "en") -> list[tuple[str, str, str, str]]:
    """``(code, severity, layer, title)`` for every known code, in catalogue order."""
    return [(c.code, c.severity, c.layer, catalog.title(c.code, lang)) for c in catalog.checks()]
