"""The catalogue of finding codes: severity, layer and texts in English and Simplified Chinese.

Codes are public and stable (CI configs select and ignore by code): add freely, never
rename. Each code has, per language, a one-line ``title``, an ``explain`` text for
``stackdoctor explain CODE``, and the ``detail`` / ``fix`` templates the rules fill in
(``str.format`` fields named after the values they carry). The texts live in
``stackdoctor/locale/<lang>.yaml`` and are read by :mod:`stackdoctor.core.texts` (which the rules use, so
that the rules and this catalogue of their codes do not import each other); codes, commands and JSON
keys are never translated.

>>> from stackdoctor.rules.catalog import info, title
>>> info("driver-too-old").layer
'driver'
>>> title("torch-missing", "en")
'PyTorch is not installed in the target environment'
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stackdoctor.core.texts import LANGS, detect_lang, explain, layer_word, message, placeholders, sentence, sentence_key, texts, title, ui

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.model.report import Finding

__all__ = [
    "checks",
    "LANGS",
    "CheckInfo",
    "codes",
    "detect_lang",
    "explain",
    "info",
    "layer_word",
    "make_finding",
    "message",
    "placeholders",
    "sentence",
    "sentence_key",
    "texts",
    "title",
    "ui",
]


@dataclass(frozen=True)
class CheckInfo:
    """One code, as its rule declares it. ``severity`` is the worst it can take (an instance may be milder)."""

    code: str
    severity: str  # "ok" | "warn" | "fail"
    layer: str  # "probe" | "platform" | "driver" | "gpu" | "python" | "torch" | "runtime" | "toolkit" | "network" | "kernels" | "requirements" | "stackdoctor"
    group: str = ""  # the rules module that declares it ("driver", "kernels", ...)
    defers_to: tuple[str, ...] = ()


# Made by the rule registry itself when a rule raises (stackdoctor.rules.core.judge), so no rule declares it.
RULE_ERROR_INFO = CheckInfo("rule-error", "fail", "stackdoctor", "core")  # fail when the broken rule can fail
_LAYER_ORDER = ("probe", "platform", "driver", "gpu", "python", "torch", "runtime", "toolkit", "network", "kernels", "requirements", "stackdoctor")


@functools.lru_cache(maxsize=1)
def checks() -> tuple[CheckInfo, ...]:
    """Every code, derived from the rule declarations, in the order of `--list-checks` and `explain`
    (bottom of the stack first; within a layer, problems before the ``-ok`` code)."""
    from stackdoctor.rules import REGISTRY

    infos = [CheckInfo(r.code, r.severity, r.layer, r.group, r.defers_to) for r in REGISTRY.values()] + [RULE_ERROR_INFO]
    rank = {layer: i for i, layer in enumerate(_LAYER_ORDER)}
    return tuple(sorted(infos, key=lambda c: (rank.get(c.layer, len(rank)), c.severity == "ok")))


def __getattr__(name: str) -> Any:  # ``catalog.CHECKS`` stays the public name of the derived list
    if name == "CHECKS":
        return checks()
    raise AttributeError(name)


def codes() -> list[str]:
    """Every known code, in catalogue order."""
    return [c.code for c in checks()]


def info(code: str) -> CheckInfo | None:
    return next((c for c in checks() if c.code == code), None)


def make_finding(
    code: str,
    lang: str = "en",
    *,
    severity: str | None = None,
    detail: str = "",
    fix: str | None = None,
    facts: list[str] | None = None,
) -> Finding:
    """A :class:`~stackdoctor.model.report.Finding` with the catalogue's title, severity and layer."""
    from stackdoctor.model.report import Finding

    ci = info(code)
    return Finding(
        code=code,
        severity=severity or (ci.severity if ci else "warn"),
        title=title(code, lang),
        detail=detail,
        fix=fix,
        layer=ci.layer if ci else None,
        facts=list(facts or []),
    )
