"""Project requirements: what a project's machines must have, from ``[tool.stackdoctor]``.

A project writes, in ``pyproject.toml`` (or a ``stackdoctor.toml`` holding the same keys at
top level, or any file given with ``--config``)::

    [tool.stackdoctor]
    torch = ">=2.6"                 # a PEP 440 specifier on the installed torch
    backend = "cuda"                # cuda | rocm | mps | xpu | cpu
    min_gpus = 2                    # devices torch can use
    compute_capability = ">=8.0"    # every NVIDIA GPU; a bare "8.0" means ">=8.0"
    kernels = ["matmul", "allreduce"]  # kernels that must have run and passed
    min_busbw = "20 GB/s"           # allreduce bus bandwidth: 20, "20GB/s", "160Gb/s"
    ignore = ["nvcc-mismatch"]      # finding codes to drop (fnmatch patterns allowed)
    warnings_fail = true            # warnings count as failures

:func:`discover_config` finds it from the current directory upward; :func:`requirements_findings`
turns each unmet requirement into a ``requirement-unmet`` finding (pure); :func:`apply_policy`
applies ``ignore`` and ``warnings_fail`` to the findings (pure).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stackdoctor import kinds
from stackdoctor.core.errors import ConfigError
from stackdoctor.core.units import parse_bandwidth
from stackdoctor.model.report import Finding

__all__ = [
    "BACKENDS",
    "KERNELS",
    "Requirements",
    "apply_policy",
    "discover_config",
    "load_config",
]

BACKENDS = kinds.backends()  # every accelerator kind's backend (stackdoctor.accelerators), then "cpu"
KERNELS = ("matmul", "conv", "compile", "allreduce")
CONFIG_NAMES = ("stackdoctor.toml", "pyproject.toml")
_KEYS = ("torch", "backend", "min_gpus", "compute_capability", "kernels", "min_busbw", "ignore", "warnings_fail")


@dataclass
class Requirements:
    """What the project needs. ``None`` / empty means "no requirement"."""

    torch: str | None = None  # PEP 440 specifier set: ">=2.6,<3"
    backend: str | None = None  # one of BACKENDS
    min_gpus: int | None = None
    compute_capability: str | None = None  # specifier set: ">=8.0"
    kernels: list[str] = field(default_factory=list)
    min_busbw: float | None = None  # GB/s (nccl-tests' unit)
    ignore: list[str] = field(default_factory=list)
    warnings_fail: bool = False
    source: str | None = None  # the file they came from

    def to_data(self) -> dict[str, Any]:
        """The requirement values as plain JSON data (without ``source``)."""
        return {k: getattr(self, k) if not isinstance(getattr(self, k), list) else list(getattr(self, k)) for k in _KEYS}

    @classmethod
    def from_data(cls, data: Any, source: str | None = None) -> Requirements:
        """Inverse of :meth:`to_data`; validated like a config file (``source`` names it in errors)."""
        if not isinstance(data, dict):
            raise ConfigError(f"{source or 'requirements'}: expected a table of requirements, got {type(data).__name__}.")
        return _validate(data, source or "requirements", strict=False)

    def as_report_entry(self) -> dict[str, Any]:
        """``report.requirements``: ``{"source": path, "values": {...}}``."""
        return {"source": self.source, "values": self.to_data()}

    @classmethod
    def from_report_entry(cls, entry: Any) -> Requirements | None:
        """Requirements recorded in a report (for ``--replay``); ``None`` when none were recorded."""
        if not isinstance(entry, dict) or not isinstance(entry.get("values"), dict):
            return None
        src = entry.get("source")
        return cls.from_data(entry["values"], source=src if isinstance(src, str) else None)

    @property
    def empty(self) -> bool:
        return not any(
            [self.torch, self.backend, self.min_gpus, self.compute_capability, self.kernels, self.min_busbw, self.ignore, self.warnings_fail]
        )


# ---------------------------------------------------------------------------- parsing


def _specifier(value: Any, key: str, where: str, *, bare_means_min: bool) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: `{key}` must be a version specifier string such as \">=8.0\", got {value!r}.")
    text = value.strip()
    if re.fullmatch(r"[0-9]+(\.[0-9]+)*", text):
        if not bare_means_min:
            raise ConfigError(f"{where}: `{key}` = {value!r} is a bare version; write a specifier such as \">={text}\" or \"=={text}.*\".")
        text = ">=" + text
    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        raise ConfigError(f"{where}: `{key}` = {value!r} is not a valid version specifier (e.g. \">=2.6\").") from None
    return text


def _str_list(value: Any, key: str, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: `{key}` must be a list of strings, got {value!r}.")
    return [v.strip() for v in value]


def _validate(table: dict[str, Any], where: str, *, strict: bool = True) -> Requirements:
    unknown = [k for k in table if k not in _KEYS]
    if unknown and strict:
        import difflib

        close = difflib.get_close_matches(unknown[0], list(_KEYS), n=1, cutoff=0.75)
        if close:  # min_gpu, warning_fail: the key meant
            raise ConfigError(f"{where}: unknown key `{unknown[0]}`; did you mean `{close[0]}`? (known: {', '.join(_KEYS)}).")
        raise ConfigError(f"{where}: unknown key `{unknown[0]}` (known: {', '.join(_KEYS)}).")
    r = Requirements(source=where)
    if table.get("torch") is not None:
        r.torch = _specifier(table["torch"], "torch", where, bare_means_min=False)
    if table.get("backend") is not None:
        b = table["backend"]
        if not isinstance(b, str) or b.strip().lower() not in BACKENDS:
            raise ConfigError(f"{where}: `backend` must be one of {', '.join(BACKENDS)}, got {b!r}.")
        r.backend = b.strip().lower()
    if table.get("min_gpus") is not None:
        n = table["min_gpus"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ConfigError(f"{where}: `min_gpus` must be a whole number >= 0, got {n!r}.")
        r.min_gpus = n
    if table.get("compute_capability") is not None:
        r.compute_capability = _specifier(table["compute_capability"], "compute_capability", where, bare_means_min=True)
    if table.get("kernels") is not None:
        ks = _str_list(table["kernels"], "kernels", where)
        bad = [k for k in ks if k not in KERNELS]
        if bad:
            raise ConfigError(f"{where}: `kernels` has unknown kernel {bad[0]!r} (known: {', '.join(KERNELS)}).")
        r.kernels = ks
    if table.get("min_busbw") is not None:
        try:
            r.min_busbw = parse_bandwidth(table["min_busbw"])  # the one parser: stackdoctor.core.units
        except ValueError as exc:
            raise ConfigError(f"{where}: `min_busbw`: {exc}.") from None
    if table.get("ignore") is not None:
        r.ignore = _str_list(table["ignore"], "ignore", where)
    if table.get("warnings_fail") is not None:
        w = table["warnings_fail"]
        if not isinstance(w, bool):
            raise ConfigError(f"{where}: `warnings_fail` must be true or false, got {w!r}.")
        r.warnings_fail = w
    return r


# ---------------------------------------------------------------------------- files

MAX_CONFIG_BYTES = 4 * 1024 * 1024


def _read_toml(path: Path) -> dict[str, Any]:
    from stackdoctor.system import read_bounded

    try:
        # a FIFO or /dev/zero is refused before anything is read; a project file is never megabytes
        text = read_bounded(path, MAX_CONFIG_BYTES, too_large=True).decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text.") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(f"{path}: reading TOML on Python 3.10 needs the tomli package (pip install tomli).") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc}).") from None
    return data


def _table_from(path: Path, data: dict[str, Any], *, explicit: bool) -> dict[str, Any] | None:
    """The requirements table: ``[tool.stackdoctor]`` in a pyproject, else the whole file (or its [tool.stackdoctor])."""
    tool = data.get("tool")
    if isinstance(tool, dict) and "stackdoctor" in tool:
        table = tool["stackdoctor"]
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: `tool.stackdoctor` must be a table, got {type(table).__name__}.")
        return table
    if path.name == "pyproject.toml":
        if explicit:
            raise ConfigError(f"{path}: has no [tool.stackdoctor] table.")
        return None
    return data


def load_config(path: Path, *, explicit: bool = True) -> Requirements | None:
    """Requirements from one file (``None`` for a pyproject without ``[tool.stackdoctor]`` when searching).

    :raises ConfigError: naming the file and the key.
    """
    data = _read_toml(path)
    table = _table_from(path, data, explicit=explicit)
    if table is None:
        return None
    return _validate(table, str(path))


def discover_config(cwd: Path, explicit: Path | None) -> Requirements | None:
    """``--config FILE`` if given, else the nearest ``stackdoctor.toml`` or ``pyproject.toml`` with
    ``[tool.stackdoctor]`` from ``cwd`` upward; ``None`` when there is none.

    :raises ConfigError: for a missing explicit file or any malformed file met on the way.
    """
    if explicit is not None:
        p = Path(explicit)
        if not p.exists():
            raise ConfigError(f"{p}: no such config file.")
        if p.is_dir():
            raise ConfigError(f"{p}: is a directory, not a config file.")
        return load_config(p, explicit=True)
    try:
        here = Path(cwd).resolve()
    except OSError:
        return None
    for d in (here, *here.parents):
        for name in CONFIG_NAMES:
            p = d / name
            try:
                if not p.is_file():
                    continue
            except OSError:
                continue
            found = load_config(p, explicit=False)
            if found is not None:
                return found
    return None


# ---------------------------------------------------------------------------- policy (pure)


def apply_policy(findings: list[Finding], reqs: Requirements | None, *, lang: str = "en") -> list[Finding]:
    """Drop ignored codes; with ``warnings_fail`` turn warnings into failures. Pure: returns new findings.

    (Whether a finding is met or not is the rules' business: :mod:`stackdoctor.rules.requirements`.)
    """
    from stackdoctor.core.texts import ui

    if reqs is None:
        return list(findings)
    out: list[Finding] = []
    for f in findings:
        if any(fnmatch.fnmatchcase(f.code, pat) for pat in reqs.ignore):
            continue
        if reqs.warnings_fail and f.severity == "warn":
            note = ui("warnings_fail_note", lang, source=reqs.source or "the project requirements")
            f = dataclasses.replace(f, severity="fail", detail=(f.detail or f.title) + note, facts=list(f.facts))
        out.append(f)
    return out
