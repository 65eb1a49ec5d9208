"""stackdoctor's texts in English and Simplified Chinese: ``stackdoctor/locale/<lang>.yaml``.

The interface words (``ui:``) and each finding code's ``title``, ``explain``, ``detail`` and ``fix``
templates (``codes:``), filled with ``str.format`` fields. This module knows texts only: which codes
exist, their severity and layer, is the rules' (:mod:`stackdoctor.rules`, listed by
:mod:`stackdoctor.catalog`), so the rules can use their texts without an import circle.

>>> title("torch-missing", "en")
'PyTorch is not installed in the target environment'
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from importlib import resources
from typing import Any

__all__ = ["LANGS", "detect_lang", "explain", "message", "placeholders", "texts", "title", "ui"]

LANGS = ("en", "zh")


# ---------------------------------------------------------------------------- language


def detect_lang(env: Mapping[str, str], explicit: str | None = None) -> str:
    """``"zh"`` or ``"en"``: ``explicit`` (``--lang``) first, then POSIX precedence LC_ALL > LC_MESSAGES > LANG.

    >>> detect_lang({"LANG": "zh_CN.UTF-8"}, None)
    'zh'
    >>> detect_lang({"LC_ALL": "C", "LANG": "zh_CN.UTF-8"}, None)
    'en'
    """
    if explicit:
        low = explicit.strip().lower()
        return "zh" if low.startswith("zh") else "en"
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(name) or "").strip()
        if value:  # the first one set decides, as in setlocale(3)
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


# ---------------------------------------------------------------------------- texts


@functools.cache
def texts(lang: str) -> dict[str, Any]:
    """The parsed locale file for ``lang`` (``{"ui": {...}, "codes": {code: {...}}}``)."""
    import yaml  # lazy: keep start-up light

    name = lang if lang in LANGS else "en"
    # one name per joinpath: Python 3.10's Traversable.joinpath takes a single child
    raw = resources.files("stackdoctor").joinpath("locale").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    # libyaml's loader when PyYAML has it (the same safe constructors; ~10x faster on these 50 kB files)
    data = yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    if not isinstance(data, dict):
        raise ValueError(f"stackdoctor/locale/{name}.yaml is not a mapping")
    data.setdefault("ui", {})
    data.setdefault("codes", {})
    return data


def _entry(code: str, lang: str) -> dict[str, Any]:
    entry = texts(lang)["codes"].get(code)
    if isinstance(entry, dict):
        return entry
    return texts("en")["codes"].get(code) or {}


def title(code: str, lang: str = "en") -> str:
    return str(_entry(code, lang).get("title") or code)


def explain(code: str, lang: str = "en") -> str | None:
    text = _entry(code, lang).get("explain")
    return str(text).rstrip() if text else None


def ui(key: str, lang: str = "en", /, **values: Any) -> str:
    """A user-interface sentence (``explain`` command, headings)."""
    template = texts(lang)["ui"].get(key) or texts("en")["ui"].get(key) or key
    return _fill(str(template), values)


class _Keep(dict):  # a missing field stays visible instead of raising
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _fill(template: str, values: Mapping[str, Any]) -> str:
    try:
        return string.Formatter().vformat(template, (), _Keep({k: ("" if v is None else v) for k, v in values.items()}))
    except (ValueError, IndexError):  # a malformed template must never crash a diagnosis
        return template


def message(code: str, kind: str, key: str = "default", lang: str = "en", /, **values: Any) -> str:
    """The ``detail`` or ``fix`` template ``key`` of ``code`` in ``lang``, filled with ``values``.

    Falls back to English, then to the ``default`` template.
    """
    for lg in dict.fromkeys((lang if lang in LANGS else "en", "en")):
        group = (texts(lg)["codes"].get(code) or {}).get(kind)
        if isinstance(group, dict) and key in group:
            return _fill(str(group[key]), values)
    if key != "default":
        return message(code, kind, "default", lang, **values)
    return ""


def placeholders(template: str) -> set[str]:
    """The ``{field}`` names a template uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}
