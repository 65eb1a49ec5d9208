"""What the static read of torch's files (:mod:`stackdoctor.probes.torch_static`) knows of an XPU build.

Its GPU code is in ``libtorch_xpu.so`` (``torch_xpu.dll``): SYCL offload images, whose ahead-of-time device members
name the targets; torch-xpu-ops can build its SYCL kernels into separate libraries (BUILD_SEPARATE_OPS /
BUILD_SPLIT_KERNEL_LIB: ``torch-xpu-ops-sycl-*.so``; ``torch_xpu_ops_sycl_*.dll`` on Windows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import BinaryIO

from stackdoctor.binaries import binfmt
from stackdoctor.model.facts import LibraryInfo, TorchFiles

MAX_IMAGES = 64


def sycl_kernel_libraries(listing: Sequence[str]) -> tuple[tuple[str, bool], ...]:
    """The separate SYCL kernel libraries in torch/lib."""
    return tuple((f"lib/{n}", False) for n in listing if "xpu-ops-sycl" in n or "xpu_ops_sycl" in n)


def static_variant(files: TorchFiles) -> str | None:
    return "xpu" if files.xpu else None


def read_gpu_code(info: LibraryInfo, fh: BinaryIO, table: binfmt.SectionTable, deadline: float | None) -> None:
    """An XPU library's SYCL offload images (at most 64): their targets and AOT device members."""
    path = info.path
    images = [binfmt.read_sycl_image(fh, s, deadline) for s in table.with_prefix(binfmt.SYCL_SECTION_PREFIX)[:MAX_IMAGES]]
    info.images = [img.target + (f" ({img.compression})" if img.compression else "") for img in images]
    info.section_size = sum(img.size for img in images) or None
    members = sorted({m for img in images for m in img.members})
    info.archs = {m: 1 for m in members}
    info.arch_list = members
    if not images:
        info.error = f"{path}: no SYCL offload image"
    elif any(img.error for img in images):
        info.error = f"{path}: " + next(img.error for img in images if img.error)
    elif any(img.compression for img in images):
        info.error = "the AOT device targets are inside a compressed SYCL image; not read"
