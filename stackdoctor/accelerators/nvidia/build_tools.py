"""What a CUDA source build of torch needs on this machine beyond the generic tools: nvcc (the toolkit probe), cuDNN's
headers and NVTX's. Asked through the seam (:meth:`Nvidia.find_build_tools`) by
:func:`stackdoctor.install.buildtools.probe_build_tools`, which names no kind; run through
:class:`~stackdoctor.system.System` (argv, no shell, a timeout; files under the sysroot); never raises."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from stackdoctor.model.toolchain import BuildTools, Tool

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System

_CUDNN_DIRS = ("/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu", "/usr/local/cuda/include")


def parse_cudnn_header(text: str) -> str | None:
    """``cudnn_version.h`` (or an old ``cudnn.h``) -> ``"9.5.1"`` from its ``CUDNN_MAJOR`` / ``MINOR`` / ``PATCHLEVEL`` defines."""
    parts = []
    for name in ("CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL"):
        m = re.search(rf"^\s*#\s*define\s+{name}\s+(\d+)\b", text or "", re.M)
        if not m:
            break
        parts.append(str(int(m.group(1))))
    return ".".join(parts) if len(parts) >= 2 else None


def _cudnn(system: System, cuda_home: str | None, extra: list[str]) -> Tool:
    osp = system.ospath
    dirs = [osp.join(h, "include") for h in ([cuda_home] if cuda_home else [])] + extra
    if not system.windows:
        dirs += list(_CUDNN_DIRS)
    for d in dict.fromkeys(dirs):
        for name in ("cudnn_version.h", "cudnn.h"):
            p = osp.join(d, name)
            r = system.read_text(p)
            if r.ok:
                v = parse_cudnn_header(r.text)
                if v:
                    return Tool("cudnn", p, v, p)
    return Tool("cudnn")


def _nvtx(system: System, cuda_home: str | None) -> Tool:
    if not cuda_home:
        return Tool("nvtx")
    osp = system.ospath
    for rel in (("include", "nvtx3", "nvToolsExt.h"), ("include", "nvtx3", "nvtx3.hpp"), ("include", "nvToolsExt.h")):
        p = osp.join(cuda_home, *rel)
        if system.is_file(p):
            return Tool("nvtx", p, None, p)
    return Tool("nvtx")


def find_cuda_tools(system: System, bt: BuildTools, *, python: str, timeout_s: float) -> None:
    """nvcc and the toolkit root it belongs to, cuDNN and NVTX, into ``bt``."""
    from stackdoctor.accelerators.nvidia.toolkit import probe as probe_cuda
    from stackdoctor.model.probing import ProbeContext, Target

    ctk = probe_cuda(ProbeContext(system=system, target=Target(python=python, selected_by="--python"), timeout_s=timeout_s)).facts["cuda_toolkit"]
    if ctk.nvcc_path:
        bt.nvcc = Tool("nvcc", ctk.nvcc_path, ctk.nvcc_version, ctk.sources.get("nvcc_version"))
        osp = system.ospath
        real = ctk.nvcc_path if system.moved else system.realpath(ctk.nvcc_path)  # /usr/local/bin/nvcc -> the toolkit's bin/nvcc
        bt.cuda_home = ctk.cuda_home or osp.dirname(osp.dirname(real))
    bt.cudnn = _cudnn(system, bt.cuda_home, [])
    bt.nvtx = _nvtx(system, bt.cuda_home)
