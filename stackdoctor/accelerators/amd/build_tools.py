"""What a ROCm source build of torch needs on this machine beyond the generic tools: ROCm itself (``ROCM_PATH``, else
``/opt/rocm``, its ``.info/version``). Asked through the seam (:meth:`Amd.find_build_tools`) by
:func:`stackdoctor.install.buildtools.probe_build_tools`, which names no kind; files read under the sysroot; never raises."""

from __future__ import annotations

from typing import TYPE_CHECKING

from stackdoctor.accelerators.amd.probe import parse_rocm_version_file
from stackdoctor.model.toolchain import Tool

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System


def rocm_tool(system: System) -> Tool:
    env = system.getenv("ROCM_PATH")
    for base, via in ((env, "ROCM_PATH"), ("/opt/rocm", "/opt/rocm")):
        if not base or system.windows:
            continue
        r = system.read_text(f"{base.rstrip('/')}/.info/version")
        if r.ok and parse_rocm_version_file(r.text):
            return Tool("rocm", base, parse_rocm_version_file(r.text), f"{base.rstrip('/')}/.info/version ({via})")
        if system.exists(base):
            return Tool("rocm", base, None, via, f"{base}/.info/version is missing or unreadable")
    return Tool("rocm")
