"""What the static read of torch's files (:mod:`stackdoctor.probes.torch_static`) knows of a ROCm build.

Its GPU code is in ``libtorch_hip.so``: clang offload bundles (``.hip_fatbin``) whose entries name the ``gfx`` targets
(``gfx942``, ``gfx90a:xnack-``); the build's list is the targets at least half of the bundles carry.
"""

from __future__ import annotations

from typing import BinaryIO

from stackdoctor.binaries import binfmt
from stackdoctor.model.facts import LibraryInfo, TorchFiles
from stackdoctor.probes.torch_static import cap_archs, find_section, majority, sort_gfx


def static_variant(files: TorchFiles) -> str | None:
    """``hip = "6.4.43482"`` -> ``rocm6.4``."""
    return "rocm" + ".".join(files.hip.split(".")[:2]) if files.hip else None


def read_gpu_code(info: LibraryInfo, fh: BinaryIO, table: binfmt.SectionTable, zstd: binfmt.ZstdDecoder | None,
                  deadline: float | None) -> None:
    """A HIP library's clang offload bundles: their entries and the gfx targets most bundles carry."""
    sec = find_section(info, table, binfmt.HIP_SECTIONS)
    if sec is None:
        return
    bundles = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=zstd, deadline=deadline)
    info.containers = len(bundles.bundles)
    info.entries = sum(len(b.entries) for b in bundles.bundles)
    info.compressed = bundles.compressed
    info.archs, capped = cap_archs(bundles.target_bundles())
    bundles.error = bundles.error or capped
    known = sum(1 for b in bundles.bundles if b.entries)
    main, extra = majority(info.archs, known)
    info.arch_list, info.arch_extra = sort_gfx(main), sort_gfx(extra)
    errs = [b.error for b in bundles.bundles if b.error]
    info.error = bundles.error or (errs[0] + (f" ({len(errs)} bundles)" if len(errs) > 1 else "") if errs else None)


def take_arch_list(files: TorchFiles, info: LibraryInfo) -> None:
    """The primary library's gfx targets as the build's."""
    if not files.gfx_list and info.arch_list:
        files.gfx_list = info.arch_list
        where = f"{info.path} {info.section or ''}".strip()
        files.sources["gfx_list"] = f"{where} ({info.containers} offload bundles)"
