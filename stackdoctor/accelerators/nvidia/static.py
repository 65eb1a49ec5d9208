"""What the static read of torch's files (:mod:`stackdoctor.probes.torch_static`) knows of a CUDA build.

Its GPU code is in ``libtorch_cuda.so`` (PyPI's torch 2.14.1, cu130: the build's arch list, the same in every
translation unit, plus a few per-file extras such as ``sm_90a``), ``libtorch_cuda_linalg.so`` (its own, narrower
list: no ``sm_75`` in 2.14.1), ``libtorch_cuda_cu.so`` for torch 1.9-1.12 (which split it) and ``torch_cuda.dll``
on Windows: the CUDA fat binary (``.nv_fatbin``: ``sm_XX`` cubins, ``compute_XX`` PTX). The build's arch list (what
``torch.cuda.get_arch_list()`` reports) is the architectures present in at least half of the primary library's
fat-binary containers.

Runtime names: an ``nvidia-*`` distribution is named without the ``nvidia-`` prefix and the ``-cuNN`` suffix
(``nvidia-cudnn-cu13`` -> ``cudnn``, ``nvidia-cuda-runtime`` -> ``cuda-runtime``); ``cuda-toolkit`` keeps its name.
"""

from __future__ import annotations

import re
from typing import BinaryIO

from stackdoctor.binaries import binfmt
from stackdoctor.model.facts import LibraryInfo, TorchFiles
from stackdoctor.probes.torch_static import cap_archs, find_section, majority, sort_archs

NOT_RUNTIME = ("nvidia-ml-py",)  # NVML's Python binding, not a runtime library


def runtime_name(dist: str) -> str | None:
    """``nvidia-cudnn-cu13`` -> ``cudnn``; ``cuda-toolkit`` as it is; None for NVML's binding."""
    if dist in NOT_RUNTIME:
        return None
    if dist.startswith("nvidia-"):
        return re.sub(r"-cu\d+$", "", dist[len("nvidia-") :]) or None
    return dist


def static_variant(files: TorchFiles) -> str | None:
    """``cuda = "12.8"`` -> ``cu128``."""
    return "cu" + files.cuda.replace(".", "")[:3] if files.cuda else None


def read_gpu_code(info: LibraryInfo, fh: BinaryIO, table: binfmt.SectionTable, deadline: float | None) -> None:
    """A CUDA library's fat binary: its containers, entries and the SM archs most containers carry."""
    sec = find_section(info, table, binfmt.CUDA_SECTIONS)
    if sec is None:
        return
    fat = binfmt.walk_fatbin(fh, sec.offset, sec.size, deadline)
    info.containers, info.entries, info.compressed = fat.containers, len(fat.entries), fat.compressed
    info.archs, capped = cap_archs(fat.arch_containers())
    fat.error = fat.error or capped
    main, extra = majority(info.archs, fat.containers)
    info.arch_list, info.arch_extra = sort_archs(main), sort_archs(extra)
    info.error = fat.error


def take_arch_list(files: TorchFiles, info: LibraryInfo) -> None:
    """The primary library's arch list (and its per-file extras) as the build's."""
    if not files.arch_list and info.arch_list:
        files.arch_list, files.arch_extra = info.arch_list, info.arch_extra
        files.sources["arch_list"] = f"{_where(info)} ({info.containers} fat-binary containers)"


def _where(info: LibraryInfo) -> str:
    return f"{info.path} {info.section or ''}".strip()
