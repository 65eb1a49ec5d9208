"""Which torch_npu to plan beside a torch release, for the resolver (through :meth:`Ascend.companion`). Pure.

A torch_npu release pins one torch release (its wheel's ``Requires-Dist``, ``torch_npu.yaml``) and needs a CANN at least
as new as Ascend's table says. For torch X the candidates are the table's releases pinning X with a wheel for the
target's platform and Python, newest first; ``strict`` keeps only those whose CANN is known and (on this machine, when
its CANN was found) met — the resolver then moves on to an older torch before it plans a torch_npu this CANN cannot
load; without ``strict`` (nothing fit) the newest candidate is planned with a warning saying what to upgrade.
"""

from __future__ import annotations

import re
from typing import Any

from stackdoctor.accelerators.ascend.cann import cann_key
from stackdoctor.core.shell import format_command
from stackdoctor.kinds.base import Companion

__all__ = ["PYPI", "companion"]

PYPI = "https://pypi.org/simple/"
CANN_DOWNLOAD = "https://www.hiascend.com/cann/download"


def _fits(row: dict[str, Any], os: str, arch: str, python: str | None) -> bool:
    if os != "linux":
        return False
    if python and python not in [str(p) for p in row.get("pythons") or []]:
        return False
    return any(str(p).endswith(f"_{arch}") for p in row.get("platforms") or [])


def _pin(row: dict[str, Any], arch: str) -> str:
    pins = row.get("requires_dist") or {}
    return str(pins.get(arch) or next(iter(pins.values()), "?")) if isinstance(pins, dict) else str(pins)


def _wheel(row: dict[str, Any], arch: str) -> dict[str, Any]:
    return next((w for w in row.get("wheels") or [] if str(w.get("file", "")).endswith(f"_{arch}.whl")), {})


def _cann_words(row: dict[str, Any], cann: dict[str, Any], hypothetical: bool) -> tuple[list[str], list[str], bool]:
    """(reasons, warnings, met) about the CANN the release needs and the one the machine has."""
    need, version = row.get("cann"), row.get("version")
    if not need:
        return [], [f"torch-npu {version}: the CANN it needs is unknown ({row.get('cann_source')}); check Ascend's table before installing"], False
    said = f"torch-npu {version} needs CANN {need} or newer ({row.get('cann_source')})"
    if hypothetical:
        return [said], [f"the target machine's CANN is not known to this what-if: it needs CANN {need} or newer ({CANN_DOWNLOAD})"], True
    have = cann.get("version")
    if not cann:
        return [said], [f"no CANN is installed on this machine: torch-npu {version} needs CANN {need} or newer ({CANN_DOWNLOAD})"], False
    if not have or cann_key(str(have)) < cann_key(str(need)):
        return [said], [f"this machine has CANN {have or '?'} ({cann.get('info_file')}): torch-npu {version} needs CANN {need} or newer; "
                        f"upgrade CANN ({CANN_DOWNLOAD})"], False
    return [f"{said}; this machine has CANN {have} ({cann.get('info_file')}), which meets it"], [], True


def _cann_floor(row: dict[str, Any], fitting: list[dict[str, Any]], cann: dict[str, Any], hypothetical: bool) -> tuple[list[str], list[str], bool] | None:
    """A release Ascend's table does not list (a newer ``.postN``): the CANN an older release of the same torch needs is
    a floor for it (a post release is not built for an older CANN than its line's), said as such; None without one."""
    from packaging.version import InvalidVersion, Version

    try:
        mine = Version(str(row.get("version")))
        older = next((r for r in fitting if r.get("cann") and Version(str(r.get("version"))) < mine), None)
    except InvalidVersion:
        return None
    if older is None:
        return None
    reasons, warnings, met = _cann_words(older, cann, hypothetical)
    floor = (f"torch-npu {row['version']}: Ascend's table does not list it ({row.get('cann_source')}); torch-npu {older['version']} of the "
             f"same torch needs CANN {older['cann']} or newer, so it needs at least that (unknown whether more)")
    return [floor], [*warnings, f"torch-npu {row['version']}: the CANN it needs is known only as a floor (CANN {older['cann']}); "
                                "check Ascend's table before installing"], met


def _paired(row: dict[str, Any], own: dict[str, Any], torch: str, arch: str, cann: dict[str, Any], hypothetical: bool,
            reasons: list[str], warnings: list[str]) -> Companion:
    """The torch_npu of ``row`` beside torch ``torch``: why (its pin, from its wheel's METADATA), and what to do first."""
    w = _wheel(row, arch)
    pin = re.sub(r"\s+", "", _pin(row, arch)).replace("(", "").replace(")", "")
    reasons.insert(0, f"torch {torch} cpu: the Huawei Ascend NPU runs torch's CPU build with torch-npu beside it")
    reasons.insert(1, f"torch-npu {row['version']} pins {pin} (its wheel's METADATA: {w.get('url') or row.get('source')}"
                      + (f", sha256 {str(w['sha256'])[:12]}…" if w.get("sha256") else "") + ")")
    env = (own.get("env") or {}) if not hypothetical else {}
    if not hypothetical and cann and not env.get("active") and cann.get("set_env"):
        warnings.append(f"CANN's environment is not active here: run `{format_command(['source', cann['set_env']])}` before `import torch` (or add it to ~/.bashrc)")
    return Companion("torch-npu", str(row["version"]), PYPI, tuple(reasons), tuple(warnings))


def companion(rows: list[dict[str, Any]], own: dict[str, Any], torch: str, *, os: str, arch: str, python: str | None,
              hypothetical: bool, strict: bool) -> Companion | str:
    """The torch_npu to plan beside torch ``torch`` (see the module's text), or why there is none."""
    pairing = [r for r in rows if str(r.get("torch")) == torch]
    if not pairing:
        return f"torch {torch}: no torch-npu release pins it (torch_npu.yaml: {', '.join(sorted({str(r.get('torch')) for r in rows}, reverse=True)[:6])}, ...)"
    fitting = [r for r in pairing if _fits(r, os, arch, python)]
    if not fitting:
        return f"torch {torch}: no torch-npu {', '.join(str(r.get('version')) for r in pairing[:3])} wheel for {os} {arch} and Python {python or '?'}"
    cann = {} if hypothetical else (own.get("cann") or {})
    for row in fitting:  # newest first, as the table lists them (a .postN before its release)
        reasons, warnings, met = _cann_words(row, cann, hypothetical)
        if not row.get("cann"):
            reasons, warnings, met = _cann_floor(row, fitting, cann, hypothetical) or (reasons, warnings, met)
        if strict and not met:
            continue
        return _paired(row, own, torch, arch, cann, hypothetical, reasons, warnings)
    if hypothetical or not cann:
        return f"torch {torch}: no torch-npu release for it has a known CANN requirement"
    return f"torch {torch}: no torch-npu release for it runs on CANN {cann.get('version') or '?'}"
