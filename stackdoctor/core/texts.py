"""stackdoctor's texts in English and Simplified Chinese: ``stackdoctor/locale/<lang>.yaml``.

The interface words (``ui:``) and each finding code's ``title``, ``explain``, ``detail`` and ``fix``
templates (``codes:``), filled with ``str.format`` fields. This module knows texts only: which codes
exist, their severity and layer, is the rules' (:mod:`stackdoctor.rules`, listed by
:mod:`stackdoctor.rules.catalog`), so the rules can use their texts without an import circle.

>>> title("torch-missing", "en")
'PyTorch is not installed in the target environment'
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Mapping
from typing import Any

from stackdoctor.core import parsecache

__all__ = ["LANGS", "add_locale", "add_texts", "choose_lang", "detect_lang", "explain", "layer_word", "message", "placeholders", "sentence", "sentence_key", "texts", "title", "ui"]

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
    if _CHOSEN:  # a command's --lang: every sentence of this run in it
        return _CHOSEN[-1]
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = (env.get(name) or "").strip()
        if value:  # the first one set decides, as in setlocale(3)
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"


_CHOSEN: list[str] = []


def choose_lang(lang: str | None) -> None:
    """A command's ``--lang``: :func:`detect_lang` answers it for the rest of this run (each run is one process)."""
    if lang:
        _CHOSEN[:] = ["zh" if lang.strip().lower().startswith("zh") else "en"]


# ---------------------------------------------------------------------------- texts


@functools.cache
def texts(lang: str) -> dict[str, Any]:
    """The parsed locale file for ``lang`` (``{"ui": {...}, "codes": {code: {...}}}``)."""
    name = lang if lang in LANGS else "en"
    # one name per joinpath: Python 3.10's Traversable.joinpath takes a single child
    raw = _files("stackdoctor").joinpath("locale").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    data = _parsed(f"texts-{name}", raw)
    if not isinstance(data, dict):
        raise ValueError(f"stackdoctor/locale/{name}.yaml is not a mapping")
    data.setdefault("ui", {})
    data.setdefault("codes", {})
    data.setdefault("sentences", {})
    extras = [_load_extra(package, name) for package in _EXTRA_LOCALES] + [dict(t.get(name) or {}) for t in _EXTRA_TEXTS]
    for extra in extras:  # an accelerator plug-in's own texts: added, never replacing stackdoctor's
        for section in ("ui", "codes", "sentences"):
            for key, value in (extra.get(section) or {}).items():
                data[section].setdefault(key, value)
    return data


def _files(package: str) -> Any:
    return parsecache.package_files(package)  # importlib.resources.files without its zip reader's imports


_EXTRA_LOCALES: list[str] = []  # packages with a locale/<lang>.yaml of their own (add_locale)
_EXTRA_TEXTS: list[Mapping[str, Mapping[str, Any]]] = []  # a kind's texts as data, {"en": {...}, "zh": {...}} (add_texts)


def _parsed(kind: str, raw: str) -> Any:
    """``raw`` (a locale file's text) parsed, or what the last run parsed of the same text (issue 33: yaml is then
    not even imported)."""
    def parse() -> Any:
        import yaml  # lazy: keep start-up light

        # libyaml's loader when PyYAML has it (the same safe constructors; ~10x faster on these 50 kB files)
        return yaml.load(raw, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}

    return parsecache.kept(kind, [raw], parse, lambda kept: isinstance(kept, dict))


def _load_extra(package: str, lang: str) -> dict[str, Any]:
    try:
        raw = _files(package).joinpath("locale").joinpath(f"{lang}.yaml").read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError):
        return {}
    data = _parsed(f"texts-{package}-{lang}", raw)
    return data if isinstance(data, dict) else {}


def add_locale(package: str) -> None:
    """Merge ``<package>/locale/<lang>.yaml`` (``ui:``, ``codes:``, ``sentences:``) into the texts: an accelerator
    plug-in's findings and sentences in every language it ships (``Accelerator.locale``); a key stackdoctor
    already has keeps stackdoctor's text."""
    if package in _EXTRA_LOCALES:
        return
    _EXTRA_LOCALES.append(package)
    texts.cache_clear()
    _sentence_patterns.cache_clear()


def add_texts(extra: Mapping[str, Mapping[str, Any]]) -> None:
    """Merge a kind's own texts given as data (``Accelerator.texts()``: ``{"en": {"codes": {...}, "sentences": {...}},
    "zh": {...}}``, the locale files' form) into the texts, as :func:`add_locale` does a package's files."""
    if not extra or any(t is extra for t in _EXTRA_TEXTS):
        return
    _EXTRA_TEXTS.append(extra)
    texts.cache_clear()
    _sentence_patterns.cache_clear()


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


def layer_word(layer: str, lang: str = "en") -> str:
    """A code's layer in ``lang`` (``driver`` -> ``驱动``); the layer names themselves stay the JSON's."""
    word = texts(lang)["ui"].get("layer_" + layer) or texts("en")["ui"].get("layer_" + layer)
    return str(word) if word else layer


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


# ---------------------------------------------------------------------------- stackdoctor's own sentences


@functools.cache
def _sentence_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each English ``sentences:`` template as an anchored pattern with one group per ``{field}``, most
    specific first (the most literal text), so ``cannot write {path}: it is a directory.`` wins over
    ``cannot write {path}: {reason}.``."""
    out: list[tuple[int, str, re.Pattern[str]]] = []
    for key, template in (texts("en").get("sentences") or {}).items():
        parts, seen, literal = [], set(), 0
        for text, name, _, _ in string.Formatter().parse(str(template)):
            parts.append(re.escape(text))
            literal += len(text)
            if name:
                parts.append(f"(?P={name})" if name in seen else f"(?P<{name}>.+?)")
                seen.add(name)
        out.append((literal, str(key), re.compile("".join(parts), re.DOTALL)))
    out.sort(key=lambda x: -x[0])
    return tuple((key, pattern) for _, key, pattern in out)


def sentence_key(text: str) -> tuple[str, dict[str, str]] | None:
    """The ``sentences:`` key whose English template ``text`` was written from, with its field values
    (the most specific template when several match)."""
    for key, pattern in _sentence_patterns():
        m = pattern.fullmatch(text)
        if m:
            return key, m.groupdict()
    return None


def _matches(text: str) -> list[tuple[str, dict[str, str]]]:
    return [(key, m.groupdict()) for key, pattern in _sentence_patterns() if (m := pattern.fullmatch(text))]


def sentence(text: str, lang: str = "en", _depth: int = 0, /) -> str:
    """``text``, a sentence stackdoctor wrote in English (an error, a line of the install screen, a reason a
    worker gave), in ``lang``.

    Code writes its sentences in English from the templates under ``sentences:`` in en.yaml (so logs, JSON
    ``error`` fields and tests read one language); the edge that shows them to a person calls this, which
    finds the template the sentence was written from and fills the same key's template in ``lang`` with the
    same values. A sentence no template matches is shown as written (tests/test_catalog.py keeps every
    literal error message of the package covered).

    >>> sentence("--python /nope: no such file.", "zh")
    '--python /nope：文件不存在。'
    """
    if lang == "en" or lang not in LANGS or not text:
        return text
    # A sentence can parse more than one way ("the wheels were not checked: {error}" holds another sentence):
    # the reading that leaves the fewest English letters wins; among equals, the most specific template.
    # among readings that leave as many, the one with fewer English clause marks (": ", "; ") left in a Chinese sentence
    best, best_left = text, (_letters(text), _marks(text))
    for key, values in _matches(text):
        template = (texts(lang).get("sentences") or {}).get(key)
        if not template:
            continue
        if _depth < 3:  # a field that is itself one of these sentences (click's reason inside "Invalid value for ...")
            values = {k: _inner(v, lang, _depth + 1) if k in _SENTENCE_FIELDS else v for k, v in values.items()}
        out = _fill(str(template), values)
        left = (_letters(out), _marks(out))
        if left < best_left or best is text:
            best, best_left = out, left
    return best


def _letters(text: str) -> int:
    return sum(1 for c in text if c.isascii() and c.isalpha())


def _marks(text: str) -> int:
    return text.count(": ") + text.count("; ")


# The fields whose value is itself a sentence stackdoctor wrote (a reason, an error, clauses joined by "; ");
# every other field is a value (a path, a version, a machine) and is shown as it came.
# (issue 46: "how" a default build's variant is known, the "tags" a wheel was looked for, the "archs" a build carries,
# what a source "offer"s instead, a kind's "label", a "source" a row cites: each is written from a template where it is
# words, and shown as it came otherwise)
_SENTENCE_FIELDS = frozenset({"message", "reason", "error", "detail", "parts", "fits", "why", "told", "machine", "cost",
                              "how", "tags", "archs", "label", "source", "offer"})


def _inner(value: str, lang: str, depth: int) -> str:
    """A field's value in ``lang``: as one sentence, or as clauses joined by "; " (or parts listed with ", ", as a
    what-if machine's), whichever leaves fewer English letters."""
    best = sentence(value, lang, depth)
    for sep, key in (("; ", "clause_sep"), (", ", "list_sep")):
        if sep in value:
            pieces = _split_outside_brackets(value, sep)
            said = [sentence(part, lang, depth) for part in pieces]
            parts = ui(key, lang).join(said)
            if _letters(parts) < _letters(best) or (_letters(parts) == _letters(best) and said != pieces):
                best = parts
    return best


def _split_outside_brackets(value: str, sep: str) -> list[str]:
    """``value`` split at ``sep`` where no bracket is open: a clause's own "(detail; hint)" stays one clause."""
    pieces, depth, start, i = [], 0, 0, 0
    while i < len(value):
        c = value[i]
        if c in "([":
            depth += 1
        elif c in ")]" and depth:
            depth -= 1
        elif depth == 0 and value.startswith(sep, i):
            pieces.append(value[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    pieces.append(value[start:])
    return pieces


def placeholders(template: str) -> set[str]:
    """The ``{field}`` names a template uses."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}
