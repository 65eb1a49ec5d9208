"""The catalogue of finding codes: severity, layer and texts in English and Simplified Chinese.

Codes are public and stable (CI configs select and ignore by code): add freely, never
rename. Each code has, per language, a one-line ``title``, an ``explain`` text for
``stackdoctor explain CODE``, and the ``detail`` / ``fix`` templates the rules fill in
(``str.format`` fields named after the values they carry). The texts live in
``stackdoctor/locale/<lang>.yaml``; codes, commands and JSON keys are never translated.

>>> from stackdoctor.catalog import info, title
>>> info("driver-too-old").layer
'driver'
>>> title("torch-missing", "en")
'PyTorch is not installed in the target environment'
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

__all__ = [
    "CHECKS",
    "LANGS",
    "CheckInfo",
    "codes",
    "detect_lang",
    "explain",
    "info",
    "make_finding",
    "message",
    "placeholders",
    "texts",
    "title",
    "ui",
]

LANGS = ("en", "zh")


@dataclass(frozen=True)
class CheckInfo:
    """One code. ``severity`` is the worst it can take (an instance may be milder)."""

    code: str
    severity: str  # "ok" | "warn" | "fail"
    layer: str  # "python" | "torch" | "runtime" | "toolkit" | "driver" | "gpu" | "platform" | "network" | "probe" | "kernels" | "requirements"
    emitted_by: str = "diagnose"  # "diagnose" | "kernels" | "config"


def _c(code: str, severity: str, layer: str, emitted_by: str = "diagnose") -> CheckInfo:
    return CheckInfo(code, severity, layer, emitted_by)


# Order: the order of `--list-checks` and `explain` (bottom of the stack first).
CHECKS: tuple[CheckInfo, ...] = (
    # platform
    _c("probe-failed", "fail", "probe"),
    _c("probe-timeout", "fail", "probe"),
    _c("glibc-too-old", "fail", "platform"),
    _c("container-no-gpu", "fail", "platform"),
    _c("platform-ok", "ok", "platform"),
    # driver
    _c("driver-missing", "fail", "driver"),
    _c("driver-library-mismatch", "fail", "driver"),
    _c("driver-too-old", "fail", "driver"),
    _c("driver-minor-compat", "warn", "driver"),
    _c("wsl-driver", "fail", "driver"),
    _c("amdgpu-not-loaded", "fail", "driver"),
    _c("rocm-kfd-permission", "fail", "driver"),
    _c("source-conflict", "warn", "driver"),
    _c("driver-ok", "ok", "driver"),
    # gpu
    _c("gpu-lost", "fail", "gpu"),
    _c("gpu-arch-unsupported", "fail", "gpu"),
    _c("rocm-gfx-unsupported", "fail", "gpu"),
    _c("gpu-ecc-errors", "fail", "gpu"),
    _c("gpu-throttled", "warn", "gpu"),
    _c("gpu-persistence-off", "warn", "gpu"),
    _c("gpu-ok", "ok", "gpu"),
    # python
    _c("python-unsupported", "fail", "python"),
    _c("pynvml-deprecated", "warn", "python"),
    _c("python-ok", "ok", "python"),
    # torch
    _c("torch-missing", "warn", "torch"),
    _c("torch-import-failed", "fail", "torch"),
    _c("torch-cpu-only", "fail", "torch"),
    _c("torch-backend-mismatch", "fail", "torch"),
    _c("torchvision-mismatch", "fail", "torch"),
    _c("torchaudio-mismatch", "fail", "torch"),
    _c("jetson-wrong-wheel", "fail", "torch"),
    _c("macos-x86-torch-too-new", "warn", "torch"),
    _c("conda-pip-mix", "warn", "torch"),
    _c("torch-ok", "ok", "torch"),
    # runtime (what torch sees when it runs)
    _c("cuda-unavailable", "fail", "runtime"),
    _c("cuda-visible-devices-hides-all", "fail", "runtime"),
    _c("mps-unavailable", "fail", "runtime"),
    _c("lib-path-shadowing", "fail", "runtime"),
    _c("runtime-ok", "ok", "runtime"),
    # toolkit (only for building extensions)
    _c("nvcc-mismatch", "warn", "toolkit"),
    _c("toolkit-ok", "ok", "toolkit"),
    # network (Thunderbolt)
    _c("thunderbolt-bridge-loop", "warn", "network"),
    _c("thunderbolt-rdma-disabled", "warn", "network"),
    _c("thunderbolt-link-slow", "warn", "network"),
    _c("thunderbolt-link-local-ip", "warn", "network"),
    _c("network-ok", "ok", "network"),
    # emitted elsewhere (kernel runner, collectives, project requirements)
    _c("kernel-failed", "fail", "kernels", "kernels"),
    _c("kernel-wrong-result", "fail", "kernels", "kernels"),
    _c("kernel-slow", "warn", "kernels", "kernels"),
    _c("allreduce-failed", "fail", "network", "kernels"),
    _c("allreduce-timeout", "fail", "network", "kernels"),
    _c("allreduce-slow", "fail", "network", "kernels"),  # fail when a --min-busbw gate was asked for
    _c("requirement-unmet", "fail", "requirements", "config"),
    _c("requirements-ok", "ok", "requirements", "config"),
)

_BY_CODE: dict[str, CheckInfo] = {c.code: c for c in CHECKS}


def codes() -> list[str]:
    """Every known code, in catalogue order."""
    return [c.code for c in CHECKS]


def info(code: str) -> CheckInfo | None:
    return _BY_CODE.get(code)


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


@functools.lru_cache(maxsize=None)
def texts(lang: str) -> dict[str, Any]:
    """The parsed locale file for ``lang`` (``{"ui": {...}, "codes": {code: {...}}}``)."""
    import yaml  # lazy: keep start-up light

    name = lang if lang in LANGS else "en"
    raw = resources.files("stackdoctor").joinpath("locale", f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(raw) or {}
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


def ui(key: str, lang: str = "en", **values: Any) -> str:
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


def message(code: str, kind: str, key: str = "default", lang: str = "en", **values: Any) -> str:
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


def make_finding(
    code: str,
    lang: str = "en",
    *,
    severity: str | None = None,
    detail: str = "",
    fix: str | None = None,
    facts: list[str] | None = None,
) -> Any:
    """A :class:`~stackdoctor.report.Finding` with the catalogue's title, severity and layer."""
    from stackdoctor.report import Finding

    ci = _BY_CODE.get(code)
    return Finding(
        code=code,
        severity=severity or (ci.severity if ci else "warn"),
        title=title(code, lang),
        detail=detail,
        fix=fix,
        layer=ci.layer if ci else None,
        facts=list(facts or []),
    )
