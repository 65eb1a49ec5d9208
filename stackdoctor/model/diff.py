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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from stackdoctor.model.facts import Facts
from stackdoctor.model.report import NOT_VERIFIED_STATUS, Report, status

__all__ = ["DIFF_SCHEMA", "SECTION_PLACES", "Compares", "Difference", "diff_reports", "flatten_report"]

DIFF_SCHEMA = "stackdoctor.diff/2"  # /2: installed_distributions.* and conda_packages.* (were torch.distributions.* / torch.conda_packages.*)

# (subject, fields) compared as plain values; lists compare whole. The accelerator kinds' own facts (their subjects,
# their torch answers) are each kind's to say (:class:`Compares`, ``Accelerator.compared``).
_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("platform", ("system", "machine", "os_id", "os_name", "os_version", "kernel", "libc", "glibc_version", "is_wsl", "wsl_version",
                  "container", "cpu_model", "cpu_count", "memory_total_mib")),
    ("python", ("version", "implementation", "free_threaded", "abiflags", "platform_tag", "env_kind", "pip_version", "uv_version", "error")),
    ("thunderbolt", ("present", "bridge_enabled", "rdma_state")),
    ("torch", ("installed", "version", "variant", "debug", "device_count", "arch_list", "cudnn_version",
               "nccl_version", "distributed_available", "distributed_backends",
               "torchvision_version", "torchaudio_version", "triton_version", "numpy_version", "import_error_kind", "imported",
               "git_version", "arch_list_files", "runtime_versions")),
)
# Every machine's sections by their place in the stack order of the differences (lowest first); a kind's sections
# take the places between them that it says (``Accelerator.diff_sections``: its devices first, its toolkit after the
# conda packages, its platform after the platform); a section nobody placed (a plug-in's subject) comes last.
SECTION_PLACES = {"torch": 20, "installed_distributions": 30, "conda_packages": 40, "python": 60, "platform": 70, "thunderbolt": 110,
                  "kernels": 120, "environment": 130, "findings": 140}
_UNPLACED = 150
_TORCH_DEVICE = ("name", "capability", "total_memory_mib", "kind")
# environment variables whose values are paths of this machine, not choices about the stack
_ENV_VOLATILE = frozenset({"PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_EXE", "CONDA_PYTHON_EXE", "CONDA_SHLVL", "CONDA_PROMPT_MODIFIER",
                           "CONDA_DEFAULT_ENV", "MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK"})


class Compares(Protocol):
    """What an accelerator kind (``stackdoctor.kinds.Accelerator``) brings to a diff; the caller passes every kind."""

    def compared(self, facts: Facts) -> dict[str, Any]:
        """Its facts' compared values, key -> value."""
        ...

    def diff_sections(self) -> dict[str, int]:
        """Its keys' sections and their places (:data:`SECTION_PLACES`)."""
        ...


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


def _flatten_facts(f: Facts, kinds: Sequence[Compares]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for subject, fields in _FIELDS:
        obj = getattr(f, subject)
        for name in fields:
            out[f"{subject}.{name}"] = _plain(getattr(obj, name))
    for kind in kinds:
        out.update({key: _plain(value) for key, value in kind.compared(f).items()})
    for d in f.torch.devices:
        for name in _TORCH_DEVICE:
            out[f"torch.devices[{d.kind}:{d.index}].{name}"] = getattr(d, name)
    for dist, ver in f.torch.distributions.items():  # the target environment's installed distributions, not torch modules
        out[f"installed_distributions.{dist}"] = ver
    for pkg in f.torch.conda_packages:
        out[f"conda_packages.{pkg}"] = True
    for r in f.kernels.results:
        out[f"kernels.{r.kernel}[{r.device}{'/' + r.dtype if r.dtype else ''}].ok"] = r.ok
    if f.kernels.error:
        out["kernels.error"] = f.kernels.error
    for subject, data in sorted(f.plugins.items()):  # a plug-in accelerator's own facts (stackdoctor.accelerators)
        _flatten_plain(out, subject, data)
    for name, value in f.environment.items():
        if name not in _ENV_VOLATILE:
            out[f"environment.{name}"] = value
    return out


def flatten_report(report: Report, kinds: Sequence[Compares]) -> dict[str, Any]:
    """The compared values of one report, ``key -> value`` (``kinds``: every accelerator kind, ``stackdoctor.kinds.ALL``)."""
    out = _flatten_facts(report.facts, kinds)  # the stable keys reconcile wrote from the view
    worst: dict[str, str] = {}
    # a finding as every output shows it (model.report.status): a statement of what was not verified is
    # "not-verified", never "ok" (issue 42), so a diff never says a layer passed that nothing checked
    rank = {"ok": 0, NOT_VERIFIED_STATUS: 1, "warn": 2, "fail": 3}
    for fd in report.findings:
        prev, shown = worst.get(fd.code), status(fd)
        if prev is None or rank.get(shown, 0) > rank.get(prev, 0):
            worst[fd.code] = shown
    for code, sev in worst.items():
        out[f"findings.{code}"] = sev
    return out


def diff_reports(a: Report, b: Report, kinds: Sequence[Compares]) -> list[Difference]:
    """Every compared key whose value differs between ``a`` and ``b`` (absent = ``None``), stack order. ``kinds``: every
    accelerator kind (``stackdoctor.kinds.ALL``), whose facts each compares its own way."""
    fa, fb = flatten_report(a, kinds), flatten_report(b, kinds)
    places = {**SECTION_PLACES, **{s: n for kind in kinds for s, n in kind.diff_sections().items()}}

    def order(key: str) -> tuple[int, str]:
        return places.get(key.split(".", 1)[0].split("[", 1)[0], _UNPLACED), key

    out: list[Difference] = []
    for key in sorted(set(fa) | set(fb), key=order):
        va, vb = fa.get(key), fb.get(key)
        if va != vb:
            out.append(Difference(key, va, vb))
    return out
