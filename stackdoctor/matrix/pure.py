"""The matrix's pure helpers: variant names, platform tags, GPU names, CUDA arch lists, driver floors.

No I/O, no state but :data:`PLUGIN_VARIANT_KINDS` (a plug-in accelerator's build kind, registered at import).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from stackdoctor.core.versions import at_least, dotted


class _GfxBuild(Protocol):
    """A ROCm build's gfx list, as :class:`~stackdoctor.matrix.model.Variant` carries it (a protocol: the model
    imports this module, never the other way round)."""

    @property
    def gfx(self) -> tuple[str, ...]: ...


class _DriverColumns(Protocol):
    """A CUDA release's driver minimums, as :class:`~stackdoctor.matrix.model.CudaRow` carries them."""

    @property
    def min_driver_linux(self) -> str | None: ...
    @property
    def min_driver_windows(self) -> str | None: ...
    @property
    def minor_compat_floor_linux(self) -> str | None: ...
    @property
    def minor_compat_floor_windows(self) -> str | None: ...

VARIANT_KINDS = ("cpu", "cuda", "rocm", "xpu")

VARIANT_RE = re.compile(r"^(?:(?P<cpu>cpu)|cu(?P<cu>\d{2,3})|rocm(?P<rocm>\d+\.\d+(?:\.\d+)?)|(?P<xpu>xpu))$")
ARCH_RE = re.compile(r"^(?P<kind>sm|compute)_(?P<num>\d{2,3})(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")
GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")
PY_RE = re.compile(r"^3\.\d{1,2}t?$")
INDEX_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")

# kind -> the pattern of its variants' names, for a plug-in accelerator's own build kind
# (stackdoctor.accelerators registers it: the matrix itself knows no accelerator)
PLUGIN_VARIANT_KINDS: dict[str, re.Pattern[str]] = {}


def register_variant_kind(kind: str, pattern: str) -> None:
    """Make ``kind`` a variant kind whose variants' names match ``pattern`` (a plug-in accelerator's builds)."""
    PLUGIN_VARIANT_KINDS[kind] = re.compile(pattern)


def variant_kind(name: str) -> tuple[str, str | None, str | None] | None:
    """("cuda", "13.0", None) for "cu130"; ("rocm", None, "6.2.4") for "rocm6.2.4"; None when not a variant name."""
    m = VARIANT_RE.match(name)
    if not m:
        return next(((kind, None, None) for kind, pat in PLUGIN_VARIANT_KINDS.items() if pat.match(name)), None)
    if m.group("cpu"):
        return ("cpu", None, None)
    if m.group("xpu"):
        return ("xpu", None, None)
    if m.group("rocm"):
        return ("rocm", None, m.group("rocm"))
    digits = m.group("cu")
    return ("cuda", f"{digits[:-1]}.{digits[-1]}", None)


def variant_from_version(version: str | None) -> str | None:
    """The variant in a torch version's local part: "2.13.0+cu130" -> "cu130"; None without one (PyPI/macOS)."""
    if not version or "+" not in version:
        return None
    local = version.split("+", 1)[1].strip()
    if variant_kind(local):
        return local
    m = re.match(r"^(cu\d{2,3}|rocm\d+\.\d+(?:\.\d+)?|cpu|xpu)\b", local)
    return m.group(1) if m else local or None


def cc_tuple(cc: str) -> tuple[int, int] | None:
    cc = cc.strip().lower().removeprefix("sm_").removeprefix("sm")
    if "." in cc:
        a, _, b = cc.partition(".")
        if a.isdigit() and b.isdigit() and len(b) == 1:
            return (int(a), int(b))
        return None
    if cc.isdigit() and len(cc) in (2, 3):
        return (int(cc[:-1]), int(cc[-1]))
    return None


# Tegra / integrated parts that dGPU cubins of the same major do not reach (PyTorch's DEVICE_REQUIREMENT
# table, torch/cuda/__init__.py, compat-facts.md 6.1/6.3). 10.1 is Thor's pre-CUDA-13 name (now 11.0).
TEGRA = {(5, 3), (6, 2), (7, 2), (8, 7), (10, 1)}


def sass_runs(code: tuple[int, int], suffix: str, dev: tuple[int, int]) -> bool:
    if code == dev:
        return True
    if suffix == "a":  # arch-specific (sm_90a): that exact GPU only
        return False
    if code == (10, 1):  # sm_101 cubins also run on Thor renamed sm_110
        return dev == (11, 0)
    if code in TEGRA or dev in TEGRA:
        return False
    return code[0] == dev[0] and dev[1] >= code[1]  # same major, same-or-newer minor ("f" family: the same rule)


def arch_match(arch_list: Iterable[str], cc: str) -> str | None:
    """How a GPU of capability ``cc`` runs a build with ``arch_list``: "sass", "ptx" (JIT) or None.

    A cubin ``sm_XY`` runs on ``X.Z`` for Z >= Y (same major; not on the Tegra parts 5.3/6.2/7.2/8.7, nor
    sm_100 on Thor); ``sm_XYa`` only on exactly X.Y; ``compute_XY`` (or ``+PTX``) on any newer GPU by JIT
    (``compute_XYa`` only on X.Y).
    """
    dev = cc_tuple(cc)
    if dev is None:
        return None
    ptx = False
    for entry in arch_list:
        m = ARCH_RE.match(entry.strip())
        if not m:
            continue
        num = m.group("num")
        code = (int(num[:-1]), int(num[-1]))
        suffix = m.group("suffix")
        if m.group("kind") == "sm":
            if sass_runs(code, suffix, dev):
                return "sass"
            if m.group("ptx") and (code == dev if suffix == "a" else dev >= code):
                ptx = True
        elif code == dev if suffix == "a" else dev >= code:
            ptx = True
    return "ptx" if ptx else None


def arch_runs(arch_list: Iterable[str], cc: str) -> bool:
    """True when a GPU of compute capability ``cc`` ("8.9" or "sm_89") can run a build with ``arch_list``."""
    return arch_match(arch_list, cc) is not None


def gfx_supported(variant: _GfxBuild, gfx: str) -> bool:
    """True when the ROCm ``variant`` carries code objects for ``gfx`` (feature suffixes like ":xnack-" ignored)."""
    return gfx.split(":", 1)[0].lower() in variant.gfx


def driver_meets(cuda_row: _DriverColumns, driver: str | None, windows: bool) -> str:
    """"full" when ``driver`` meets the toolkit minimum, "minor-compat" when only the major's
    minor-version-compatibility floor is met, "no" otherwise (or when the driver is unknown).

    Where the toolkit minimum is unknown (Windows, CUDA 13.x) the floor is the documented requirement
    and meeting it counts as "full".
    """
    if not driver or dotted(driver) is None:
        return "no"
    minimum = cuda_row.min_driver_windows if windows else cuda_row.min_driver_linux
    floor = cuda_row.minor_compat_floor_windows if windows else cuda_row.minor_compat_floor_linux
    if minimum is not None and at_least(driver, minimum):
        return "full"
    if floor is not None and at_least(driver, floor):
        return "full" if minimum is None else "minor-compat"
    return "no"


OS_WORDS = {"linux": "Linux", "windows": "Windows", "macos": "macOS"}  # an OS of parse_platform in a sentence


def platform_words(tag: str) -> str:
    """``manylinux_2_28_aarch64`` -> ``Linux aarch64``."""
    os_, arch, _ = parse_platform(tag)
    return f"{OS_WORDS.get(os_, os_)} {arch}"


def parse_platform(tag: str) -> tuple[str, str, tuple[int, int] | None]:
    """(os, arch, floor) of a wheel platform tag: ("linux", "x86_64", (2, 28)), ("macos", "arm64", (14, 0)),
    ("windows", "amd64", None). A plain ``linux_*`` tag has floor None (the release's glibc baseline applies)."""
    t = tag.strip().lower()
    m = re.match(r"^manylinux_(\d+)_(\d+)_(\w+)$", t)
    if m:
        return ("linux", m.group(3), (int(m.group(1)), int(m.group(2))))
    m = re.match(r"^manylinux(1|2010|2014)_(\w+)$", t)
    if m:
        floor = {"1": (2, 5), "2010": (2, 12), "2014": (2, 17)}[m.group(1)]
        return ("linux", m.group(2), floor)
    m = re.match(r"^musllinux_(\d+)_(\d+)_(\w+)$", t)
    if m:
        return ("musllinux", m.group(3), (int(m.group(1)), int(m.group(2))))
    m = re.match(r"^linux_(\w+)$", t)
    if m:
        return ("linux", m.group(1), None)
    m = re.match(r"^macosx_(\d+)_(\d+)_(\w+)$", t)
    if m:
        return ("macos", m.group(3), (int(m.group(1)), int(m.group(2))))
    if t in ("win_amd64", "win32", "win_arm64"):
        return ("windows", {"win_amd64": "amd64", "win32": "x86", "win_arm64": "arm64"}[t], None)
    return ("unknown", t, None)


def normalise_gpu_name(name: str) -> str:
    """"NVIDIA GeForce RTX 4090" -> "rtx 4090"; "Tesla V100-SXM2-32GB" -> "v100-sxm2-32gb"."""
    n = name.strip().lower().replace("...", " ").replace("\u2026", " ")
    n = re.sub(r"\(.*?\)", " ", n)
    for word in ("nvidia", "geforce", "tesla", "quadro"):
        n = re.sub(rf"\b{word}\b", " ", n)
    return re.sub(r"\s+", " ", n).strip()

