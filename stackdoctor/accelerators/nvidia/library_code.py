"""The GPU code a CUDA library of torch carries (``libtorch_cuda.so``'s fat binary), as ``matrix learn`` and install's
check write it: asked through the seam (:meth:`Nvidia.read_library_code`) by :mod:`stackdoctor.wheels.learn_wheels`."""

from __future__ import annotations

from typing import Any

SECTIONS_NAME = "CUDA_SECTIONS"  # stackdoctor.binaries.binfmt's sections of a fat binary


def read_cuda_code(fh: Any, sec: Any, label: str) -> dict[str, Any]:
    """A CUDA library's fat binary: its SASS (sm_XY) and PTX (compute_XY), the majority of its containers'."""
    from stackdoctor.binaries import binfmt
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
