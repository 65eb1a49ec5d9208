"""conda-forge's CUDA builds of pytorch: which one the driver runs, the match specs that select it, and what the
solver needs to pick it. Pure functions, asked through the seam (:meth:`Nvidia.conda_build`, :meth:`Nvidia.conda_specs`,
:meth:`Nvidia.conda_selection`) by :mod:`stackdoctor.install.conda`, which names no kind."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import CondaInfo, CondaRelease, Matrix
    from stackdoctor.model.view import MachineView

# the conda packages of torch's CUDA stack: conda's, where a pip wheel's would be shadowed by them (conda-pip-mix)
CONDA_CUDA_LIBS = ("cudatoolkit", "cudnn", "nccl", "pytorch-cuda", "cuda-runtime", "cuda-cudart", "cuda-libraries", "libcublas")


def _cuda_tuple(text: str) -> tuple[int, int]:
    m = re.match(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def driver_cuda_ceiling(facts: MachineView, matrix: Matrix, driver: str | None) -> str | None:
    """The newest CUDA the driver runs: nvidia-smi's "CUDA Version" when probed, else from the matrix's
    driver table (the newest CUDA whose minimum the driver meets)."""
    if not driver:
        return None
    ceiling, here = facts.runtime("nvidia").value, facts.driver("nvidia").value  # this machine's driver and its CUDA level
    if ceiling and driver == here:
        return ceiling
    from stackdoctor.matrix import driver_meets

    best: str | None = None
    for version, row in matrix.cuda_versions.items():
        if driver_meets(row, driver, windows=False) == "full" and (best is None or _cuda_tuple(version) > _cuda_tuple(best)):
            best = version
    return best


def cuda_build(rel: CondaRelease, subdir: str, facts: MachineView, matrix: Matrix, driver: str | None, reasons: list[str]) -> str | None:
    """The newest of conda-forge's CUDA builds of ``rel`` that the driver runs, or None (the CPU build), said why."""
    ceiling = driver_cuda_ceiling(facts, matrix, driver)
    builds = sorted(rel.cuda.get(subdir, ()), key=_cuda_tuple, reverse=True)
    runnable = [c for c in builds if ceiling and _cuda_tuple(c) <= _cuda_tuple(ceiling)]
    if runnable:
        reasons.append(f"CUDA {runnable[0]}: the newest of conda-forge's CUDA builds for {subdir} ({', '.join(builds)}) that driver {driver} runs (CUDA <= {ceiling})")
        return runnable[0]
    if builds:
        reasons.append(f"conda-forge builds pytorch {rel.version} for CUDA {', '.join(builds)} on {subdir}; driver {driver or '?'} runs CUDA <= {ceiling or '?'}: the CPU build")
    else:
        reasons.append(f"conda-forge has no CUDA build of pytorch {rel.version} for {subdir}: the CPU build")
    return None


def cuda_specs(info: CondaInfo, rel: CondaRelease, cuda: str) -> list[str]:
    """The match specs of conda-forge's CUDA build: ``pytorch=2.13.0=cuda*`` and its selector (``cuda-version=12.9``)."""
    specs = [f"{info.package}={rel.version}={info.cuda_build or 'cuda*'}"]
    if info.cuda_selector:
        specs.append(f"{info.cuda_selector}={cuda}")
    return specs


def cuda_selection(info: CondaInfo, cuda: str, facts: MachineView, hypothetical: bool) -> tuple[list[str], dict[str, str], list[str]]:
    """(reasons, environment, cautions) of the conda-forge route for its CUDA build: the selector, and the override the
    solver needs where no CUDA driver is seen (a what-if, or a machine without one)."""
    reasons: list[str] = []
    env: dict[str, str] = {}
    cautions: list[str] = []
    if info.cuda_selector:
        reasons.append(f"the CUDA build is selected by {info.cuda_selector}={cuda} ({info.virtual_package or '__cuda'} must be present: a CUDA driver)")
        if hypothetical or not (facts.driver("nvidia").value or "").strip():
            env["CONDA_OVERRIDE_CUDA"] = cuda
            cautions.append(f"no CUDA driver is seen here: the solver needs CONDA_OVERRIDE_CUDA={cuda} to pick the CUDA build")
    return reasons, env, cautions


def cpu_only(reasons: list[str], variant: str) -> None:
    """A plan for another kind's build (ROCm, XPU): conda-forge has CUDA's and the CPU's only."""
    reasons.append(f"conda-forge builds pytorch for CPU and CUDA only (no {variant}): the CPU build")
