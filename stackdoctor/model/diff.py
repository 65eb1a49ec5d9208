"""What differs between two reports: two machines, or one machine on two days. Pure.

:func:`diff_reports` flattens the stack-defining facts of each report into ``key -> value``
(``nvidia.driver_version``, ``torch.variant``, ``nvidia.gpus[0].name``, ``installed_distributions.triton``,
``environment.CUDA_VISIBLE_DEVICES``, ``findings.driver-too-old``, ...) and lists the keys whose
values differ. Volatile or identifying fields never count: ``created_at``, durations, raw tool
outputs, probe timings, kernel timings, host names, UUIDs, serials, paths of interpreters.

The JSON document is ``stackdoctor.diff/2``. Version 1 named the installed Python distributions
``torch.distributions.<name>`` and the conda packages ``torch.conda_packages.<name>``, which read like
torch modules; version 2 names them after what they are: ``installed_distributions.<name>`` (the
target environment's installed distributions of interest, with their versions) and
``conda_packages.<name>``. Every other key is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stackdoctor.model.report import Report
from stackdoctor.model.view import MachineView

__all__ = ["DIFF_SCHEMA", "Difference", "diff_reports", "flatten_report"]

DIFF_SCHEMA = "stackdoctor.diff/2"  # /2: installed_distributions.* and conda_packages.* (were torch.distributions.* / torch.conda_packages.*)

# (subject, fields) compared as plain values; lists compare whole.
_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("platform", ("system", "machine", "os_id", "os_name", "os_version", "kernel", "libc", "glibc_version", "is_wsl", "wsl_version",
                  "container", "container_nvidia_devices", "cpu_model", "cpu_count", "memory_total_mib")),
    ("python", ("version", "implementation", "free_threaded", "abiflags", "platform_tag", "env_kind", "pip_version", "uv_version", "error")),
    ("nvidia", ("driver_version", "cuda_driver_version", "kernel_module_version", "kernel_module_flavor", "nvml_version", "smi_state",
                "smi_version", "nvml_state")),
    ("cuda_toolkit", ("nvcc_version",)),
    ("rocm", ("version", "hip_version", "kfd_present", "kfd_accessible", "amdgpu_loaded", "amdgpu_version", "hsa_override_gfx_version")),
    ("apple", ("is_macos", "macos_version", "chip", "arch", "rosetta")),
    ("jetson", ("is_jetson", "l4t_release", "jetpack", "model", "cuda")),
    ("thunderbolt", ("present", "bridge_enabled", "rdma_state")),
    ("torch", ("installed", "version", "variant", "cuda", "hip", "debug", "cuda_available", "device_count", "arch_list", "cudnn_version",
               "nccl_version", "mps_built", "mps_available", "xpu_available", "distributed_available", "distributed_backends",
               "torchvision_version", "torchaudio_version", "triton_version", "numpy_version", "import_error_kind", "imported",
               "git_version", "arch_list_files", "runtime_versions")),
)
_NVIDIA_GPU = ("name", "compute_capability", "memory_total_mib", "pcie_gen", "pcie_width", "pcie_gen_max", "pcie_width_max", "power_limit_w",
               "mig_mode", "persistence_mode", "driver_model", "sm_count")
_ROCM_GPU = ("name", "gfx", "integrated", "compute_units", "memory_total_mib")
_TORCH_DEVICE = ("name", "capability", "total_memory_mib", "kind")
# environment variables whose values are paths of this machine, not choices about the stack
_ENV_VOLATILE = frozenset({"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER",
                           "CONDA_DEFAULT_ENV", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK"})


@dataclass(frozen=True)
class Difference:
    key: str  # "nvidia.driver_version"
    a: Any  # value in the first report (None: absent there)
    b: Any

    @property
    def section(self) -> str:
        return self.key.split(".", 1)[0].split("[", 1)[0]

    def to_data(self) -> dict[str, Any]:
        return {"key": self.key, "a": self.a, "b": self.b}


def _plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _flatten_plain(out: dict[str, Any], key: str, value: Any) -> None:
    """Plain data as ``key.field`` / ``key[i].field`` leaves (a list of scalars stays one value)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "sources":
                _flatten_plain(out, f"{key}.{k}", v)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        out[f"{key}_count"] = len(value)
        for i, v in enumerate(value):
            _flatten_plain(out, f"{key}[{i}]", v)
    else:
        out[key] = _plain(value)


def _flatten_facts(f: MachineView) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for subject, fields in _FIELDS:
        obj = getattr(f.facts, subject)
        for name in fields:
            out[f"{subject}.{name}"] = _plain(getattr(obj, name))
    out["nvidia.gpu_count"] = len(f.facts.nvidia.gpus)
    for g in f.facts.nvidia.gpus:
        for name in _NVIDIA_GPU:
            out[f"nvidia.gpus[{g.index}].{name}"] = getattr(g, name)
    out["rocm.gpu_count"] = len(f.facts.rocm.gpus)
    for rg in f.facts.rocm.gpus:
        for name in _ROCM_GPU:
            out[f"rocm.gpus[{rg.index}].{name}"] = getattr(rg, name)
    for d in f.facts.torch.devices:
        for name in _TORCH_DEVICE:
            out[f"torch.devices[{d.kind}:{d.index}].{name}"] = getattr(d, name)
    for dist, ver in f.facts.torch.distributions.items():  # the target environment's installed distributions, not torch modules
        out[f"installed_distributions.{dist}"] = ver
    for pkg in f.facts.torch.conda_packages:
        out[f"conda_packages.{pkg}"] = True
    for tk in f.facts.cuda_toolkit.toolkits:
        out[f"cuda_toolkit.toolkits.{tk.nvcc_version or tk.version_json or '?'}"] = True
    for ig in f.facts.intel.gpus:
        out[f"intel.gpus[{ig.address}].name"] = ig.name or ig.device_id
    for r in f.facts.kernels.results:
        out[f"kernels.{r.kernel}[{r.device}{'/' + r.dtype if r.dtype else ''}].ok"] = r.ok
    if f.facts.kernels.error:
        out["kernels.error"] = f.facts.kernels.error
    for subject, data in sorted(f.facts.plugins.items()):  # a plug-in accelerator's own facts (stackdoctor.accelerators)
        _flatten_plain(out, subject, data)
    for name, value in f.facts.environment.items():
        if name not in _ENV_VOLATILE:
            out[f"environment.{name}"] = value
    return out


def flatten_report(report: Report) -> dict[str, Any]:
    """The compared values of one report, ``key -> value``."""
    out = _flatten_facts(report.view)  # the stable keys reconcile wrote from the view, read through it
    worst: dict[str, str] = {}
    rank = {"ok": 0, "warn": 1, "fail": 2}
    for fd in report.findings:
        prev = worst.get(fd.code)
        if prev is None or rank.get(fd.severity, 0) > rank.get(prev, 0):
            worst[fd.code] = fd.severity
    for code, sev in worst.items():
        out[f"findings.{code}"] = sev
    return out


def _order(key: str) -> tuple[int, str]:
    sections = ("nvidia", "rocm", "torch", "installed_distributions", "conda_packages", "cuda_toolkit", "python", "platform", "apple", "jetson", "intel", "thunderbolt", "kernels",
                "environment", "findings")
    head = key.split(".", 1)[0].split("[", 1)[0]
    return (sections.index(head) if head in sections else len(sections), key)


def diff_reports(a: Report, b: Report) -> list[Difference]:
    """Every compared key whose value differs between ``a`` and ``b`` (absent = ``None``), stack order."""
    fa, fb = flatten_report(a), flatten_report(b)
    out: list[Difference] = []
    for key in sorted(set(fa) | set(fb), key=_order):
        va, vb = fa.get(key), fb.get(key)
        if va != vb:
            out.append(Difference(key, va, vb))
    return out
