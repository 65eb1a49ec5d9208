"""The GPU code a HIP library of torch carries (``libtorch_hip.so``'s offload bundles), as ``matrix learn`` and install's
check write it: asked through the seam (:meth:`Amd.read_library_code`) by :mod:`stackdoctor.wheels.learn_wheels`."""

from __future__ import annotations

from typing import Any

from stackdoctor.binaries import binfmt

SECTIONS = binfmt.HIP_SECTIONS  # the sections its GPU code lives in (ELF name, PE name)


def read_hip_code(fh: Any, sec: Any, label: str) -> dict[str, Any]:
    """A HIP library's offload bundles: the gfx targets most of them carry."""
    from stackdoctor.probes.torch_static import majority, sort_gfx, zstd_decoder

    bundles = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=zstd_decoder())
    known = sum(1 for b in bundles.bundles if b.entries)
    main, _extra = majority(bundles.target_bundles(), known)
    return {"kind": "hip", "library": label, "gfx": sort_gfx(main), "containers": len(bundles.bundles), "error": bundles.error}


def installed_hip_code(info: Any, member: str) -> dict[str, Any]:
    """An installed library's code (:func:`stackdoctor.probes.torch_static.read_library`'s LibraryInfo) in the same shape."""
    return {"kind": "hip", "library": member, "gfx": list(info.arch_list), "containers": info.containers, "error": info.error}
