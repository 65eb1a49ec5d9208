"""The GPU code a CUDA library of torch carries (``libtorch_cuda.so``'s fat binary), as ``matrix learn`` and install's
check write it: asked through the seam (:meth:`Nvidia.read_library_code`) by :mod:`stackdoctor.wheels.learn_wheels`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackdoctor.binaries import binfmt

SECTIONS = binfmt.CUDA_SECTIONS  # the sections its GPU code lives in (ELF name, PE name)


def read_cuda_code(fh: Any, sec: Any, label: str) -> dict[str, Any]:
    """A CUDA library's fat binary: its SASS (sm_XY) and PTX (compute_XY), the majority of its containers'."""
    from stackdoctor.probes.torch_static import majority, sort_archs

    fat = binfmt.walk_fatbin(fh, sec.offset, sec.size)
    main, _extra = majority(fat.arch_containers(), fat.containers)
    sms = [a for a in sort_archs(main) if a.startswith("sm_")]
    ptx = [a for a in sort_archs(main) if a.startswith("compute_")]
    return {"kind": "cuda", "library": label, "arch_list": sms, "ptx": ptx, "containers": fat.containers, "error": fat.error}


def installed_cuda_code(info: Any, member: str) -> dict[str, Any]:
    """An installed library's code (:func:`stackdoctor.probes.torch_static.read_library`'s LibraryInfo) in the same shape."""
    return {"kind": "cuda", "library": member, "arch_list": [a for a in info.arch_list if a.startswith("sm_")],
            "ptx": [a for a in info.arch_list if a.startswith("compute_")], "containers": info.containers, "error": info.error}


def cuda_code_into(row: dict[str, Any], code: Mapping[str, Any], plat: str) -> None:
    """CUDA's SASS + PTX as the matrix writes them (``8.0;9.0+PTX``): x86_64 Linux's as the variant's list, any other
    platform's under ``arch_by_platform`` (never borrowed from x86_64's)."""
    from stackdoctor.wheels.learn_wheels import arch_notation

    archs = arch_notation(code["arch_list"], code.get("ptx") or [])
    if plat.endswith("x86_64") and plat.startswith(("manylinux", "linux")):
        row["arch_list"] = archs
    else:
        row.setdefault("arch_by_platform", {})[plat] = archs


def cuda_code_from(row: dict[str, Any], known: Any) -> None:
    row["arch_list"] = list(known.arch_list)
    if known.arch_by_platform:
        row["arch_by_platform"] = {k: list(a) for k, a in known.arch_by_platform.items()}
