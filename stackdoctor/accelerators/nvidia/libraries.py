"""Where the NVIDIA driver's user-space libraries are: ``libcuda.so*`` (WSL's beside a distro copy, a CUDA
toolkit's forward-compatibility one) and ``libnvidia-ml.so*``, so that asking NVML or the driver library is
worth a child process only where one could load."""

from __future__ import annotations

import ntpath
import os

from stackdoctor.model.facts import NvidiaFacts
from stackdoctor.model.probing import ProbeContext

# Directories searched for libcuda.so* (WSL ships its own in /usr/lib/wsl/lib; a distro copy shadowing it breaks CUDA).
LIBCUDA_DIRS: tuple[str, ...] = (
    "/usr/lib/wsl/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
)

# Where the driver installer and the distributions' packages put the user-space driver libraries, and where
# the NVIDIA container toolkit mounts them into a container. Not /usr/local/cuda*/compat: the forward-
# compatibility libcuda there is another version on purpose (580.95.05 beside driver 580.159.04 on the H200).
DRIVER_LIBRARY_DIRS: tuple[str, ...] = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/lib/nvidia",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
)

def libcuda_paths(ctx: ProbeContext) -> list[str]:
    dirs = list(LIBCUDA_DIRS)
    for entry in ctx.system.listdir("/usr/local"):
        if entry.startswith("cuda"):
            dirs.append(f"/usr/local/{entry}/compat")
    found: list[str] = []
    for d in dirs:
        for name in ctx.system.listdir(d):
            if name.startswith("libcuda.so"):
                found.append(f"{d}/{name}")
    return found


NVML_LIBRARY = "libnvidia-ml.so"


def nvml_dirs(ctx: ProbeContext) -> list[str]:
    extra = [d for d in (ctx.system.getenv("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    return list(dict.fromkeys([*LIBCUDA_DIRS, *DRIVER_LIBRARY_DIRS, *extra, "/run/opengl-driver/lib"]))


def nvml_present(ctx: ProbeContext) -> bool:
    """Whether asking NVML is worth a child process (as the driver child is gated on libcuda): a
    ``libnvidia-ml.so*`` where the binding's ``dlopen("libnvidia-ml.so.1")`` could find it, or a ``pynvml``
    binding on ``PYTHONPATH`` (it may bring its own way to NVML; the NVML fault tests stand one in there).
    Windows: always (nvml.dll is found by the binding itself)."""
    if ctx.system.windows:
        return True
    for d in nvml_dirs(ctx):
        if any(name.startswith(NVML_LIBRARY) for name in ctx.system.listdir(d)):
            return True
    for d in (ctx.system.getenv("PYTHONPATH") or "").split(os.pathsep):
        if d and any(name in ("pynvml.py", "pynvml") for name in ctx.system.local.listdir(d)):
            return True
    return False


def libcuda_present(ctx: ProbeContext, facts: NvidiaFacts) -> bool:
    """Whether the driver library is on this machine (so asking it is worth a child process)."""
    if ctx.system.windows:
        root = ctx.system.getenv("SystemRoot") or "C:\\Windows"
        return ctx.system.is_file(ntpath.join(root, "System32", "nvcuda.dll"))
    if facts.libcuda_paths:
        return True
    extra = [d for d in (ctx.system.getenv("LD_LIBRARY_PATH") or "").split(":") if d.startswith("/")]
    for d in [*extra, "/usr/lib", "/usr/lib/nvidia", "/run/opengl-driver/lib"]:
        if any(name.startswith("libcuda.so") for name in ctx.system.listdir(d)):
            return True
    return False
