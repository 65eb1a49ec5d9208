"""NVML (nvidia-ml-py, imported as ``pynvml``) queried in a child process.

NVML can hang or crash inside a broken driver, so it never runs in stackdoctor's process
(conda's pattern): :func:`query_nvml` starts ``sys.executable stackdoctor/_worker/sd_nvml.py`` through
:meth:`System.run` with the per-tool timeout; the child prints one JSON document and
:func:`parse_nvml_output` turns it into :class:`NvmlResult`.

The child has one choke point for NVML calls (nvitop's ``nvmlQuery`` idea): every call is
caught on its own; ``NVMLError_FunctionNotFound`` / ``NVMLError_NotSupported`` (and a
binding too old to have the function) leave that field ``None`` silently; any other error
leaves it ``None`` and is recorded in the GPU's ``errors``; an error on one GPU keeps
the others.

Init errors map to states (nvidia-ml-py class names; codes from NVML's ``nvmlReturn_t``):
``LibraryNotFound`` (12) -> ``absent``; ``DriverNotLoaded`` (9) -> ``no-driver``;
``LibRmVersionMismatch`` (18) -> ``lib-mismatch``; any other -> ``error`` with the message.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from typing import Any

from stackdoctor._worker import worker_path
from stackdoctor.model.facts import NvidiaGpu
from stackdoctor.system import System

__all__ = ["NvmlResult", "cuda_version_from_int", "parse_nvml_output", "query_nvml", "throttle_reason_names"]

# nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (nvidia-ml-py 13.615.71, pynvml.py), named after
# nvidia-smi's ``clocks_event_reasons.*`` query fields, shortened.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "applications_clocks_setting"),
    (0x0004, "sw_power_cap"),
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "sw_thermal"),
    (0x0040, "hw_thermal"),
    (0x0080, "hw_power_brake"),
    (0x0100, "display_clock_setting"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)

# nvmlDriverModel_t (nvidia-ml-py: NVML_DRIVER_WDDM = 0, NVML_DRIVER_WDM = 1, NVML_DRIVER_MCDM = 2); nvidia-smi
# calls WDM "TCC", and so does NvidiaGpu.driver_model.
DRIVER_MODELS = {0: "WDDM", 1: "TCC", 2: "MCDM"}

INIT_STATES = {
    "NVMLError_LibraryNotFound": "absent",
    "NVMLError_DriverNotLoaded": "no-driver",
    "NVMLError_LibRmVersionMismatch": "lib-mismatch",
}


@dataclass
class NvmlResult:
    """What NVML said, as facts. ``state``: ok | absent | no-driver | lib-mismatch | error | timeout | skipped."""

    state: str
    error: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    cuda_driver_version_fn: str | None = None
    nvml_version: str | None = None
    device_count: int | None = None
    gpus: list[NvidiaGpu] = field(default_factory=list)
    system_errors: dict[str, str] = field(default_factory=dict)


def cuda_version_from_int(value: Any) -> str | None:
    """NVML / cuDriverGetVersion integer -> "major.minor": ``12040`` -> ``"12.4"``, ``9020`` -> ``"9.2"``.

    (1000 * major + 10 * minor, per nvmlSystemGetCudaDriverVersion's documentation.)
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def throttle_reason_names(mask: Any) -> list[str]:
    """Clocks-event (throttle) reason bitmask -> names, e.g. ``0x28`` -> ``["hw_slowdown", "sw_thermal"]``.

    Command line equivalent: ``nvidia-smi --query-gpu=clocks_event_reasons.active``. Unknown bits
    are kept as hex (``"0x800"``) so nothing is silently dropped.
    """
    if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
        return []
    names = [name for bit, name in THROTTLE_REASONS if mask & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    rest = mask & ~known
    bit = 1
    while rest:
        if rest & bit:
            names.append(hex(bit))
            rest &= ~bit
        bit <<= 1
    return names


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _str(v: Any) -> str | None:
    return v.strip() or None if isinstance(v, str) else None


def _enabled(v: Any) -> str | None:
    iv = _int(v)
    if iv is None:
        return None
    return "Enabled" if iv else "Disabled"


def _gpu_from(d: dict[str, Any], position: int) -> NvidiaGpu:
    idx = _int(d.get("index"))
    gpu = NvidiaGpu(index=idx if idx is not None else position)
    gpu.name = _str(d.get("name"))
    gpu.uuid = _str(d.get("uuid"))
    gpu.compute_capability = _str(d.get("compute_capability"))
    mem = _int(d.get("memory_total_bytes"))
    gpu.memory_total_mib = mem // (1024 * 1024) if mem is not None else None
    gpu.bus_id = _str(d.get("bus_id"))
    gpu.pcie_gen = _int(d.get("pcie_gen"))
    gpu.pcie_width = _int(d.get("pcie_width"))
    gpu.pcie_gen_max = _int(d.get("pcie_gen_max"))
    gpu.pcie_width_max = _int(d.get("pcie_width_max"))
    mw = _int(d.get("power_limit_mw"))
    gpu.power_limit_w = mw / 1000.0 if mw is not None else None
    gpu.mig_mode = _enabled(d.get("mig_mode"))
    gpu.persistence_mode = _enabled(d.get("persistence_mode"))
    gpu.serial = _str(d.get("serial"))
    gpu.max_sm_clock_mhz = _int(d.get("max_sm_clock_mhz"))
    gpu.ecc_uncorrected = _int(d.get("ecc_uncorrected"))
    pending = _int(d.get("retired_pages_pending"))
    gpu.retired_pages_pending = bool(pending) if pending is not None else None
    gpu.throttle_reasons = throttle_reason_names(d.get("throttle_mask"))
    model = _int(d.get("driver_model"))
    gpu.driver_model = DRIVER_MODELS.get(model) if model is not None else None
    errs = d.get("errors")
    if isinstance(errs, dict):
        gpu.errors = {str(k): str(v) for k, v in errs.items()}
    for name in (
        "name", "uuid", "compute_capability", "memory_total_mib", "bus_id", "pcie_gen", "pcie_width",
        "pcie_gen_max", "pcie_width_max", "power_limit_w", "mig_mode", "persistence_mode", "serial",
        "max_sm_clock_mhz", "ecc_uncorrected", "retired_pages_pending", "driver_model",
    ):
        if getattr(gpu, name) is not None:
            gpu.sources[name] = "nvml"
    if gpu.throttle_reasons or d.get("throttle_mask") == 0:
        gpu.sources["throttle_reasons"] = "nvml"
    return gpu


def parse_nvml_output(text: str) -> NvmlResult:
    """The child's stdout -> :class:`NvmlResult`; never raises.

    The child prints one JSON document on its last non-empty line, e.g.::

        {"state": "ok", "error": null, "error_class": null, "device_count": 1,
         "system": {"driver_version": "550.54.14", "nvml_version": "12.550.54.14",
                    "cuda_driver_version": 12040, "cuda_driver_version_fn": "nvmlSystemGetCudaDriverVersion_v2", "errors": {}},
         "gpus": [{"index": 0, "name": "NVIDIA GeForce RTX 4070", "compute_capability": "8.9",
                   "memory_total_bytes": 12878610432, "throttle_mask": 1, "errors": {}, ...}]}
    """
    doc: Any = None
    for line in reversed(text.splitlines() if isinstance(text, str) else []):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                doc = None
            break
    if not isinstance(doc, dict):
        return NvmlResult(state="error", error="NVML child printed no result")
    state = st if isinstance(st := doc.get("state"), str) else "error"
    res = NvmlResult(state=state, error=_str(doc.get("error")))
    sysd: dict[str, Any] = sd if isinstance(sd := doc.get("system"), dict) else {}
    res.driver_version = _str(sysd.get("driver_version"))
    res.nvml_version = _str(sysd.get("nvml_version"))
    res.cuda_driver_version = cuda_version_from_int(sysd.get("cuda_driver_version"))
    res.cuda_driver_version_fn = _str(sysd.get("cuda_driver_version_fn"))
    if isinstance(sysd.get("errors"), dict):
        res.system_errors = {str(k): str(v) for k, v in sysd["errors"].items()}
    res.device_count = _int(doc.get("device_count"))
    gpus: list[Any] = gl if isinstance(gl := doc.get("gpus"), list) else []
    res.gpus = [_gpu_from(g, i) for i, g in enumerate(gpus) if isinstance(g, dict)]
    return res


def query_nvml(system: System, timeout: float, python: str | None = None) -> NvmlResult:
    """Ask NVML in a child process (``python sd_nvml.py``, default this interpreter); never raises, never waits past ``timeout``.

    Command line equivalent: ``nvidia-smi --query-gpu=driver_version,name,uuid,compute_cap,... --format=csv``.
    """
    res = system.run([python or sys.executable, str(worker_path("sd_nvml.py"))], timeout=timeout, parse_env=False)
    if res.status == "timeout":
        return NvmlResult(state="timeout", error=f"NVML did not answer in {timeout:g} s")
    tail = (res.stderr.strip().splitlines() or [""])[-1][:200]
    if res.signal is not None:
        return NvmlResult(state="error", error=res.describe_failure().replace(res.tool, "NVML child", 1) + (f" ({tail})" if tail else ""))
    if res.status != "ok":
        return NvmlResult(state="error", error=f"NVML child could not be run: {res.detail or res.status}")
    out = parse_nvml_output(res.stdout)
    if res.returncode and out.error == "NVML child printed no result":
        return NvmlResult(state="error", error=f"NVML child exited with code {res.returncode}" + (f": {tail}" if tail else ""))
    return out
