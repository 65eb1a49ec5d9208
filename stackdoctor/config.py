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

from stackdoctor.errors import ConfigError
from stackdoctor.facts import Facts
from stackdoctor.report import Finding

__all__ = [
    "BACKENDS",
    "KERNELS",
    "Requirements",
    "apply_policy",
    "discover_config",
    "load_config",
    "parse_bandwidth",
    "requirements_findings",
]

BACKENDS = ("cuda", "rocm", "mps", "xpu", "cpu")
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


_BW_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?:([kKMGT])(i?)([Bb])(?:\s*/\s*s|ps)?)?\s*$")
_PREFIX = {"k": 1e-6, "K": 1e-6, "M": 1e-3, "G": 1.0, "T": 1e3}
_BIPREFIX = {"k": 2**10 / 1e9, "K": 2**10 / 1e9, "M": 2**20 / 1e9, "G": 2**30 / 1e9, "T": 2**40 / 1e9}


def parse_bandwidth(value: Any) -> float:
    """A bandwidth in GB/s (decimal gigabytes, as nccl-tests reports busbw).

    ``20`` / ``"20"`` / ``"20 GB/s"`` -> 20.0; ``"160Gb/s"`` (bits) -> 20.0; ``"500 MB/s"`` -> 0.5;
    ``"1 GiB/s"`` -> 1.073741824.

    :raises ValueError: when the text is not a bandwidth.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a bandwidth")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a bandwidth")
    m = _BW_RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a bandwidth (write e.g. \"20 GB/s\" or \"160Gb/s\")")
    number = float(m.group(1))
    prefix, binary, unit = m.group(2), m.group(3), m.group(4)
    if prefix is None:
        return number
    scale = (_BIPREFIX if binary else _PREFIX)[prefix]
    if unit == "b":
        scale /= 8.0
    return number * scale


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
            r.min_busbw = parse_bandwidth(table["min_busbw"])
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


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
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


# ---------------------------------------------------------------------------- judging (pure)


def _unmet(requirement: str, found: str, fix: str, reqs: Requirements, facts_keys: list[str]) -> Finding:
    src = reqs.source or "the project requirements"
    return Finding(
        code="requirement-unmet",
        severity="fail",
        title=f"Project requirement not met: {requirement}",
        detail=f"{src} requires {requirement}; found {found}.",
        fix=fix,
        layer="requirements",
        facts=facts_keys,
    )


def _public(version: str) -> str:
    return version.split("+", 1)[0]


def _backend_state(facts: Facts, backend: str) -> tuple[bool, str]:
    """Whether torch can use ``backend``, and a phrase saying what was found."""
    t = facts.torch
    if backend == "cpu":
        return True, "CPU"
    if not t.installed:
        why = f" ({t.import_error})" if t.import_error else ""
        return False, f"torch is not importable in the target{why}"
    name = f"torch {t.version or '?'}"
    if backend in ("cuda", "rocm"):
        want_hip = backend == "rocm"
        built = bool(t.hip) if want_hip else bool(t.cuda) and not t.hip
        if not built:
            other = f"a ROCm {t.hip} build" if t.hip else (f"a CUDA {t.cuda} build" if t.cuda else "a CPU-only build")
            return False, f"{name} is {other}"
        if t.cuda_available:
            return True, f"{name} with {backend.upper()} available"
        err = f": {t.cuda_error}" if t.cuda_error else ""
        return False, f"{name} is a {backend.upper()} build but torch.cuda.is_available() is False{err}"
    if backend == "mps":
        if t.mps_available:
            return True, f"{name} with MPS available"
        return False, f"{name} without MPS (built: {t.mps_built}, available: {t.mps_available})"
    if backend == "xpu":
        if t.xpu_available:
            return True, f"{name} with XPU available"
        err = f": {t.xpu_error}" if t.xpu_error else ""
        return False, f"{name} without XPU{err}"
    return False, f"unknown backend {backend!r}"


def _usable_gpus(facts: Facts, backend: str | None) -> tuple[int, str]:
    t = facts.torch
    driver = len(facts.nvidia.gpus) + len([g for g in facts.rocm.gpus if not g.integrated])
    if t.installed and t.cuda_available and backend in (None, "cuda", "rocm"):
        n = t.device_count if t.device_count is not None else len([d for d in t.devices if d.kind == "cuda"])
        return n, f"{n} GPU(s) usable by torch"
    if t.installed and t.xpu_available and backend in (None, "xpu"):
        n = len([d for d in t.devices if d.kind == "xpu"]) or 1
        return n, f"{n} XPU device(s) usable by torch"
    if t.installed and t.mps_available and backend in (None, "mps"):
        return 1, "1 MPS device usable by torch"
    seen = f" (the driver lists {driver})" if driver else ""
    return 0, f"no GPU usable by torch{seen}"


def _capabilities(facts: Facts) -> list[tuple[str, str]]:
    """(device label, "major.minor") for every NVIDIA GPU, from the driver, else from torch."""
    out = [(f"GPU {g.index} {g.name or ''}".strip(), g.compute_capability) for g in facts.nvidia.gpus if g.compute_capability]
    if not out:
        out = [
            (f"cuda:{d.index} {d.name or ''}".strip(), d.capability)
            for d in facts.torch.devices
            if d.kind == "cuda" and d.capability and re.fullmatch(r"[0-9]+\.[0-9]+", d.capability)
        ]
    return [(label, cap) for label, cap in out if cap]


def _kernel_state(facts: Facts, kernel: str) -> tuple[bool, str]:
    k = facts.kernels
    results = [r for r in k.results if r.kernel == kernel]
    if kernel == "allreduce" and not results and isinstance(k.allreduce, dict) and k.allreduce:
        ok = k.allreduce.get("ok")
        if ok is True:
            return True, "allreduce passed"
        err = k.allreduce.get("error")
        return False, f"allreduce did not pass{': ' + str(err) if err else ''}"
    if not results:
        if not k.ran:
            return False, "kernels did not run" + (f" ({k.error})" if k.error else "")
        return False, f"no {kernel} result in the kernel run"
    bad = [r for r in results if not r.ok]
    if bad:
        r = bad[0]
        return False, f"{kernel} failed on {r.device}" + (f" ({r.dtype})" if r.dtype else "") + (f": {r.error}" if r.error else "")
    return True, f"{kernel} passed on {', '.join(sorted({r.device for r in results}))}"


def _busbw_values(obj: Any) -> list[float]:
    """Every number under a key containing ``busbw`` (GB/s), anywhere in ``obj``."""
    out: list[float] = []
    if isinstance(obj, dict):
        for key, v in obj.items():
            if "busbw" in str(key).lower() and isinstance(v, (int, float)) and not isinstance(v, bool):
                out.append(float(v))
            else:
                out.extend(_busbw_values(v))
    elif isinstance(obj, list):
        for v in obj:
            out.extend(_busbw_values(v))
    return out


def best_busbw(facts: Facts) -> float | None:
    """The best allreduce bus bandwidth measured (GB/s), or ``None`` when allreduce did not run."""
    vals = _busbw_values(facts.kernels.allreduce or {})
    for r in facts.kernels.results:
        if r.kernel == "allreduce":
            vals.extend(_busbw_values(r.extra))
    return max(vals) if vals else None


def requirements_findings(facts: Facts, reqs: Requirements | None) -> list[Finding]:
    """One ``requirement-unmet`` (fail) finding per unmet requirement, else one ``requirements-ok``. Pure."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if reqs is None or reqs.empty:
        return []
    out: list[Finding] = []
    met: list[str] = []
    t = facts.torch
    install_fix = "stackdoctor install"
    if reqs.torch:
        label = f"torch {reqs.torch}"
        if not t.installed or not t.version:
            out.append(_unmet(label, "no torch in the target environment", f'stackdoctor install "torch{reqs.torch}"', reqs, ["torch.installed"]))
        else:
            try:
                ok = SpecifierSet(reqs.torch, prereleases=True).contains(Version(_public(t.version)), prereleases=True)
            except InvalidVersion:
                ok = False
            if ok:
                met.append(f"torch {t.version} ({reqs.torch})")
            else:
                out.append(_unmet(label, f"torch {t.version}", f'stackdoctor install "torch{reqs.torch}"', reqs, ["torch.version"]))
    if reqs.backend:
        ok, found = _backend_state(facts, reqs.backend)
        if ok:
            met.append(f"backend {reqs.backend}")
        else:
            fix = f"stackdoctor install --backend {reqs.backend}" if reqs.backend != "cpu" else install_fix
            out.append(_unmet(f"backend {reqs.backend}", found, fix, reqs, ["torch.variant", "torch.cuda_available"]))
    if reqs.min_gpus is not None and reqs.min_gpus > 0:
        n, found = _usable_gpus(facts, reqs.backend)
        if n >= reqs.min_gpus:
            met.append(f"{n} GPU(s) (min {reqs.min_gpus})")
        else:
            out.append(
                _unmet(
                    f"at least {reqs.min_gpus} GPU(s)",
                    found,
                    "run this job on a machine with enough GPUs, or check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and `stackdoctor check` for why torch sees fewer",
                    reqs,
                    ["torch.device_count", "nvidia.gpus"],
                )
            )
    if reqs.compute_capability:
        caps = _capabilities(facts)
        spec = SpecifierSet(reqs.compute_capability)
        label = f"compute capability {reqs.compute_capability}"
        if not caps:
            out.append(_unmet(label, "no NVIDIA GPU with a known compute capability", "run this job on a machine with a suitable NVIDIA GPU", reqs, ["nvidia.gpus"]))
        else:
            bad = [(lbl, c) for lbl, c in caps if not _cap_ok(spec, c)]
            if bad:
                found = ", ".join(f"{lbl} with {c}" for lbl, c in bad)
                out.append(_unmet(label, found, "run this job on GPUs that meet the requirement, or hide the others with CUDA_VISIBLE_DEVICES", reqs, ["nvidia.gpus.compute_capability"]))
            else:
                met.append(f"compute capability {', '.join(sorted({c for _, c in caps}))} ({reqs.compute_capability})")
    for kernel in reqs.kernels:
        ok, found = _kernel_state(facts, kernel)
        if ok:
            met.append(found)
        else:
            out.append(_unmet(f"kernel {kernel} passes", found, f"stackdoctor kernels {kernel}", reqs, ["kernels.results"]))
    if reqs.min_busbw is not None:
        bw = best_busbw(facts)
        label = f"allreduce busbw >= {reqs.min_busbw:g} GB/s"
        if bw is None:
            out.append(_unmet(label, "no allreduce measurement in this report", f"stackdoctor kernels allreduce --min-busbw {reqs.min_busbw:g}", reqs, ["kernels.allreduce"]))
        elif bw < reqs.min_busbw:
            out.append(_unmet(label, f"{bw:g} GB/s", "check the interconnect (NCCL_DEBUG=INFO, link speed, NCCL_P2P/IB settings) and re-run `stackdoctor kernels allreduce`", reqs, ["kernels.allreduce"]))
        else:
            met.append(f"allreduce busbw {bw:g} GB/s")
    if not out and met:
        out.append(
            Finding(
                code="requirements-ok",
                severity="ok",
                title="Project requirements met",
                detail=f"{reqs.source or 'the project requirements'}: " + "; ".join(met) + ".",
                layer="requirements",
            )
        )
    return out


def _cap_ok(spec: Any, cap: str) -> bool:
    from packaging.version import InvalidVersion, Version

    try:
        return bool(spec.contains(Version(cap), prereleases=True))
    except InvalidVersion:
        return False


def apply_policy(findings: list[Finding], reqs: Requirements | None) -> list[Finding]:
    """Drop ignored codes; with ``warnings_fail`` turn warnings into failures. Pure: returns new findings."""
    if reqs is None:
        return list(findings)
    out: list[Finding] = []
    for f in findings:
        if any(fnmatch.fnmatchcase(f.code, pat) for pat in reqs.ignore):
            continue
        if reqs.warnings_fail and f.severity == "warn":
            note = f" (a failure here: warnings_fail = true in {reqs.source or 'the project requirements'})"
            f = dataclasses.replace(f, severity="fail", detail=(f.detail or f.title) + note, facts=list(f.facts))
        out.append(f)
    return out
