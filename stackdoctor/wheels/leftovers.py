"""Leftovers: which installed runtime packages (``nvidia-*``, ``cuda-toolkit``, ROCm's and XPU's wheels) a new torch
variant will not use. Pure, so the resolver's plan, the dry run and ``install --remove-leftovers`` give one answer."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Protocol

__all__ = ["canonical_name", "families_needed", "predict_leftovers", "runtime_family"]


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_family(name: str) -> str | None:
    """Which accelerator runtime a distribution belongs to (``None``: not a runtime package), as its kind says
    (:meth:`stackdoctor.kinds.base.Accelerator.runtime_family`).

    Real names: CUDA 12 wheels end in ``-cu12`` (``nvidia-cuda-runtime-cu12``); CUDA 13 ones drop
    the suffix (``nvidia-cuda-runtime``, ``nvidia-cublas``) or end in ``-cu13`` (``nvidia-cudnn-cu13``),
    plus ``cuda-toolkit``; ROCm: ``rocm``, ``rocm-sdk-*``, ``pytorch-triton-rocm``; XPU: ``intel-sycl-rt``,
    ``onemkl-sycl-*``, ``pytorch-triton-xpu``. ``nvidia-ml-py`` (NVML bindings) is not a runtime.
    """
    from stackdoctor import kinds

    n = canonical_name(name)
    return next((f for acc in kinds.ALL if (f := acc.runtime_family(n)) is not None), None)


def families_needed(variant: str | None) -> set[str] | None:
    """Runtime families a variant uses (its kind's answer, :meth:`Accelerator.families_for`); ``None`` when unknown
    (then nothing is called a leftover). A variant no kind serves that is a variant name (cpu) needs none."""
    if variant is None:
        return None
    from stackdoctor import kinds
    from stackdoctor.matrix import variant_kind

    acc = kinds.for_variant(variant)
    if acc is None:
        return set() if variant_kind(variant) is not None else None
    return acc.families_for(variant)


def predict_leftovers(installed: Mapping[str, str], variant: str | None) -> list[str]:
    """Before installing: runtime packages of another variant that the new one will not use."""
    need = families_needed(variant)
    if need is None:
        return []
    out = []
    for name in installed:
        fam = runtime_family(name)
        if fam is not None and fam not in need:
            out.append(canonical_name(name))
    return sorted(set(out))


TORCH_FAMILY = ("torch", "torchvision", "torchaudio")


class Installed(Protocol):
    """What the leftovers are judged from: the target's distributions (``install.backup.Snapshot`` is one)."""

    versions: dict[str, str]
    requires: dict[str, list[str]]


def leftovers(candidates: Iterable[str], snap: Installed) -> list[str]:
    """The one leftovers answer, for the dry run (``snap`` before) and for ``--remove-leftovers`` (``snap`` after):
    the predicted runtime packages of the previous variant (the plan's list) that are installed and that no other
    installed distribution requires (markers ignored: a package something may need is never called a leftover)."""
    cands = {canonical_name(c) for c in candidates}
    # what the others need, not through the torch family (the previous torch is being replaced: what it pulled in is
    # exactly what may be left over; a package that requires torch gets the new one)
    needed: set[str] = set()
    todo = [r for n in snap.versions if n not in cands and n not in TORCH_FAMILY for r in snap.requires.get(n, [])]
    while todo:
        n = todo.pop()
        if n in needed or n in TORCH_FAMILY or n not in snap.versions:
            continue
        needed.add(n)
        todo.extend(snap.requires.get(n, []))
    return sorted(n for n in cands if n in snap.versions and n not in needed)
