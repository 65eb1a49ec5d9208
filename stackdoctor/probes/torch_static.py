"""The installed torch, read from its files without importing it.

``import torch`` is slow (about 1.2 s on a CPU build, more with CUDA), and on exactly the
machines stackdoctor is for it hangs, aborts (``hipErrorNoBinaryForGpu``) or crashes. Most of
what a diagnosis needs is written in files:

- ``torch/version.py``: version, CUDA / HIP / ROCm / XPU versions, git revision, debug flag,
  parsed with :mod:`ast` (never executed) by :func:`parse_torch_version_py`;
- ``*.dist-info``: torch and its companions (torchvision, torchaudio, triton), and the
  runtime wheels (``nvidia-*``, ``cuda-toolkit``, ``rocm*``, Intel's ``intel-*`` /
  ``onemkl-*``) with their versions (:func:`parse_dist_metadata`); and every other
  distribution a diagnosis asks about (NVML bindings, CuPy, pip: ``site_distributions``);
- runtime library file names (``nvidia/cudnn/lib/libcudnn.so.9``, ``torch/lib/...``): the
  major version when no metadata says more;
- the GPU code in torch's own libraries, read by :mod:`stackdoctor.binaries.binfmt`: the CUDA fat
  binary of ``libtorch_cuda.so`` / ``torch_cuda.dll`` (``sm_XX`` cubins, ``compute_XX`` PTX),
  the clang offload bundles of ``libtorch_hip.so`` (``gfx942``...), and the SYCL images of
  ``libtorch_xpu.so``.

Which libraries (decided from real wheels): PyPI's torch 2.14.1 (cu130) has GPU code in
``libtorch_cuda.so`` (the build's arch list, the same in every translation unit, plus a few
per-file extras such as ``sm_90a``) and ``libtorch_cuda_linalg.so`` (its own, narrower list:
no ``sm_75`` in 2.14.1), and a little in ``libc10_cuda.so`` and ``libtorch_nvshmem.so``. The
arch list of the build (what ``torch.cuda.get_arch_list()`` reports) is read from the primary
library (``libtorch_cuda.so``; ``libtorch_cuda_cu.so`` for torch 1.9-1.12, which split it;
``torch_cuda.dll`` on Windows; ``libtorch_hip.so`` for ROCm): the architectures present in at
least half of its fat-binary containers. The others are reported per library.

Runtime names: an ``nvidia-*`` distribution is named without the ``nvidia-`` prefix and the
``-cuNN`` suffix (``nvidia-cudnn-cu13`` -> ``cudnn``, ``nvidia-cuda-runtime`` ->
``cuda-runtime``); ``cuda-toolkit``, ``rocm*``, ``intel-*``, ``onemkl-*`` keep their
normalised distribution names.

Everything is pure apart from file access through :class:`~stackdoctor.system.System` (so a
moved ``STACKDOCTOR_SYSROOT`` replays a captured tree); nothing here judges.
"""

from __future__ import annotations

import ast
import io
import os
import posixpath
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from stackdoctor import kinds
from stackdoctor._worker.sd_target import variant_of
from stackdoctor.binaries import binfmt
from stackdoctor.binaries.linkage import DEFAULT_BUDGET_S as LINK_BUDGET_S
from stackdoctor.binaries.linkage import LinkCheck, check_linkage, torch_roots
from stackdoctor.system import ReadResult, System

MAX_ARCHS = 256  # architectures reported per library
DEFAULT_BUDGET_S = 10.0  # the whole static read; what is left when it runs out is named in errors
VERSION_KEYS = ("__version__", "cuda", "hip", "rocm", "xpu", "git_version", "debug")
MAX_VERSION_PY = 256 * 1024  # a real torch/version.py is ~300 bytes
MAX_METADATA = 64 * 1024  # the headers of a METADATA file come first
COMPANIONS = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu")
RUNTIME_PREFIXES = ("nvidia-", "cuda-toolkit", "rocm", "intel-", "onemkl-")
NOT_RUNTIME = ("nvidia-ml-py",)  # NVML's Python binding, not a runtime library
# every distribution of interest to a diagnosis (``StaticTorch.site_distributions``): torch and its kin,
# runtime wheels, NVML bindings, CuPy, Intel's (name prefixes), and numpy and pip themselves (exact names)
OF_INTEREST = ("torch", "pytorch-", "triton", "nvidia-", "cuda-", "rocm", "intel-", "onemkl-", "pynvml", "cupy")
OF_INTEREST_EXACT = ("numpy", "pip")
# runtime libraries whose file name carries a major version worth reporting when no metadata does
RUNTIME_LIBS = {
    "cudnn": "cudnn",
    "nccl": "nccl",
    "cublas": "cublas",
    "cudart": "cuda-runtime",
    "nvrtc": "cuda-nvrtc",
    "nvjitlink": "nvjitlink",
    "cusparselt": "cusparselt",
    "amdhip64": "hip",
    "miopen": "miopen",
    "rccl": "rccl",
    "rocblas": "rocblas",
}
_SONAME = re.compile(r"^lib([A-Za-z0-9_+]+?)\.so\.(\d+(?:\.\d+)*)$")
_DLL = re.compile(r"^([A-Za-z]+?)64_(\d+)\.dll$")

# (path under the torch package, kind, primary): primary libraries carry the build's arch list
TORCH_LIBRARIES: tuple[tuple[str, str, bool], ...] = (
    ("lib/libtorch_cuda.so", "cuda", True),
    ("lib/libtorch_cuda_cu.so", "cuda", True),  # torch 1.9-1.12
    ("lib/libtorch_cuda_cpp.so", "cuda", False),
    ("lib/libtorch_cuda_linalg.so", "cuda", False),
    ("lib/torch_cuda.dll", "cuda", True),
    ("lib/torch_cuda_cu.dll", "cuda", True),
    ("lib/torch_cuda_cpp.dll", "cuda", False),
    ("lib/libtorch_hip.so", "hip", True),
    ("lib/libtorch_xpu.so", "xpu", True),
    ("lib/torch_xpu.dll", "xpu", True),
)


@dataclass
class LibraryInfo:
    """The GPU code one of torch's libraries carries."""

    path: str
    kind: str  # "cuda" | "hip" | "xpu"
    primary: bool = False  # carries the build's arch list
    format: str | None = None  # "elf64-le" | "pe" | ...
    section: str | None = None  # ".nv_fatbin" | ".hip_fatbin" | "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen" ...
    section_size: int | None = None
    containers: int = 0  # fat-binary containers / offload bundles (about one per translation unit)
    entries: int = 0  # cubins + PTX / bundle entries (host entries included)
    compressed: int = 0  # compressed entries (CUDA) / compressed bundles (HIP)
    archs: dict[str, int] = field(default_factory=dict)  # arch -> containers that carry it
    arch_list: list[str] = field(default_factory=list)  # in at least half the containers
    arch_extra: list[str] = field(default_factory=list)  # in fewer (per-file extras: sm_90a ...)
    images: list[str] = field(default_factory=list)  # xpu: "spir64_gen (zstd)", "spir64" ...
    error: str | None = None
    read_ms: float | None = None


@dataclass
class StaticTorch:
    """What the files of the installed torch say; every value's source is in ``sources``."""

    installed: bool = False
    location: str | None = None  # the torch package directory
    version: str | None = None  # "2.14.1+cu130"
    variant: str | None = None  # "cu130" | "cpu" | "rocm7.2" | "xpu"
    cuda: str | None = None  # torch.version.cuda
    hip: str | None = None
    rocm: str | None = None
    xpu: str | None = None
    git_version: str | None = None
    debug: bool | None = None
    arch_list: list[str] = field(default_factory=list)  # torch.cuda.get_arch_list() notation, sorted
    arch_extra: list[str] = field(default_factory=list)  # per-file extra archs of the primary library
    gfx_list: list[str] = field(default_factory=list)  # ROCm targets ("gfx942", "gfx90a:xnack-"), sorted
    libraries: list[LibraryInfo] = field(default_factory=list)
    runtime: dict[str, str] = field(default_factory=dict)  # "cudnn" -> "9.24.0.43", "nccl" -> "2.30.7"
    runtime_libraries: dict[str, str] = field(default_factory=dict)  # "libcudnn.so.9" -> its path
    runtime_bytes: dict[str, int] = field(default_factory=dict)  # "nvidia-cublas-cu12" -> bytes installed (its RECORD's sizes)
    distributions: dict[str, str] = field(default_factory=dict)  # "torch" -> "2.14.1" (dist-info)
    # every distribution of interest (OF_INTEREST, numpy, pip), normalised name -> version, the first in import order
    site_distributions: dict[str, str] = field(default_factory=dict)
    # what torch, its companions and torch-npu require (their METADATA's Requires-Dist lines, as written)
    requires: dict[str, list[str]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    # files that are there but could not be read ("path: why"): a FIFO, mode 000, 0 bytes, truncated, not ELF
    unreadable: list[str] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)  # "2.13.0 (.../torch-2.13.0.dist-info)" when torch is installed twice
    linkage: LinkCheck | None = None  # the predicted load of torch's libraries (Linux)
    sources: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------- pure parsers


def parse_torch_version_py(text: str) -> dict[str, Any]:
    """``torch/version.py`` -> {"__version__": "2.13.0+cpu", "cuda": None, "debug": False, ...}.

    Parsed with :mod:`ast`, never executed. Only top-level ``name = <literal>`` and
    ``name: T = <literal>`` assignments of the keys in :data:`VERSION_KEYS` are taken (str,
    bool or None); a key that is absent (older torch has no ``rocm`` / ``xpu``) is left out.
    On text that does not parse the result is ``{"error": "..."}``. Never raises.

    >>> parse_torch_version_py("__version__ = '1.13.1+cu117'\\ndebug = False\\ncuda = '11.7'\\nhip = None\\n")
    {'__version__': '1.13.1+cu117', 'debug': False, 'cuda': '11.7', 'hip': None}
    """
    if len(text) > MAX_VERSION_PY:
        return {"error": f"version.py is {len(text)} characters; not a torch version file"}
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        return {"error": f"version.py does not parse: {type(exc).__name__}"}
    out: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id not in VERSION_KEYS:
            continue
        if isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, (str, bool))):
            out[target.id] = value.value
    return out


def parse_dist_metadata(text: str) -> dict[str, str]:
    """The ``Name`` and ``Version`` headers of a ``METADATA`` / ``PKG-INFO`` file (first of each).

    >>> parse_dist_metadata("Metadata-Version: 2.1\\nName: nvidia-cudnn-cu13\\nVersion: 9.24.0.43\\n\\nbody")
    {'name': 'nvidia-cudnn-cu13', 'version': '9.24.0.43'}
    """
    out: dict[str, str] = {}
    for line in text[:MAX_METADATA].splitlines():
        if not line.strip():
            break  # the headers end at the first blank line
        key, sep, value = line.partition(":")
        key = key.strip().lower()
        if sep and key in ("name", "version") and key not in out and value.strip():
            out[key] = value.strip()
        if len(out) == 2:
            break
    return out


def parse_requires_dist(text: str, limit: int = 256) -> list[str]:
    """The ``Requires-Dist`` headers of a ``METADATA`` file, as written (at most ``limit``).

    >>> parse_requires_dist("Name: torchvision\nRequires-Dist: numpy\nRequires-Dist: torch (==2.1.0)\n\nbody")
    ['numpy', 'torch (==2.1.0)']
    """
    out: list[str] = []
    for line in text[:MAX_METADATA].splitlines():
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "requires-dist" and value.strip():
            out.append(value.strip())
            if len(out) >= limit:
                break
    return out


def parse_dist_info_dirname(text: str) -> dict[str, str]:
    """``nvidia_cudnn_cu13-9.24.0.43.dist-info`` -> {"name": "nvidia-cudnn-cu13", "version": "9.24.0.43"}.

    Empty for anything that is not a ``.dist-info`` / ``.egg-info`` directory name.
    """
    base = text.strip()
    for suffix in (".dist-info", ".egg-info"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
            break
    else:
        return {}
    name, sep, version = base.partition("-")
    if not name or "/" in base or "\n" in base:
        return {}
    out = {"name": normalize_name(name)}
    version = version.split("-", 1)[0]  # egg-info: name-version-pyX.Y
    if sep and version:
        out["version"] = version
    return out


def normalize_name(name: str) -> str:
    """PEP 503 normalisation: lower case, runs of ``-_.`` -> ``-``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def runtime_key(dist: str) -> str | None:
    """The runtime name of a normalised distribution name, or None when it is not a runtime wheel."""
    if dist in NOT_RUNTIME or not dist.startswith(RUNTIME_PREFIXES):
        return None
    if dist.startswith("nvidia-"):
        return re.sub(r"-cu\d+$", "", dist[len("nvidia-") :]) or None
    return dist


def sort_archs(archs: Sequence[str]) -> list[str]:
    """CUDA archs in ``torch.cuda.get_arch_list()`` order: by number, ``sm_`` before ``compute_``."""

    def key(a: str) -> tuple[int, int, str]:
        m = re.match(r"(sm|compute)_(\d+)(.*)$", a)
        if not m:
            return (1 << 30, 2, a)
        return (int(m.group(2)), 0 if m.group(1) == "sm" else 1, m.group(3))

    return sorted(set(archs), key=key)


def sort_gfx(targets: Sequence[str]) -> list[str]:
    """gfx targets in a natural order (gfx900 < gfx90a < gfx942 < gfx1030 < gfx1100)."""
    return sorted(set(targets), key=lambda t: (len(t.split(":")[0]), t))


def majority(counts: dict[str, int], total: int) -> tuple[list[str], list[str]]:
    """(in at least half of ``total`` containers, the rest): one pass, linear in the number of archs."""
    main: list[str] = []
    rest: list[str] = []
    for a, n in counts.items():
        (main if total and n * 2 >= total else rest).append(a)
    return main, rest


def _cap_archs(counts: dict[str, int]) -> tuple[dict[str, int], str | None]:
    """At most :data:`MAX_ARCHS` architectures, the most common first (a real build has a few dozen)."""
    if len(counts) <= MAX_ARCHS:
        return counts, None
    keep = sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_ARCHS]
    return dict(keep), f"{len(counts)} different architectures (a real build has a few dozen); only the {MAX_ARCHS} most common are reported"


# ---------------------------------------------------------------------------- zstd


def stdlib_zstd() -> binfmt.ZstdDecoder | None:
    """A zstd prefix decoder from the standard library (``compression.zstd``, Python 3.14+), or None."""
    try:
        from compression import zstd as _z  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None

    def decode(data: bytes, max_out: int) -> bytes | None:
        try:
            return bytes(_z.ZstdDecompressor().decompress(data, max_length=max_out))
        except Exception:  # a corrupt stream: the reader says the ids could not be read
            return None

    return decode


def package_zstd() -> binfmt.ZstdDecoder | None:
    """A zstd prefix decoder from the ``zstandard`` package (a dependency before Python 3.14), or None.
    Only ``max_out`` bytes are decompressed: the bundle header is at the start of the stream."""
    try:
        import zstandard
    except ImportError:
        return None

    def decode(data: bytes, max_out: int) -> bytes | None:
        try:
            with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)) as reader:
                return reader.read(max_out) or None
        except Exception:  # zstandard.ZstdError on a corrupt stream; the reader says the ids could not be read
            return None

    return decode


def zstd_decoder() -> binfmt.ZstdDecoder | None:
    """The standard library's zstd (3.14+), else the ``zstandard`` package's, else None (then a compressed
    ROCm bundle's gfx ids are reported as unreadable, never guessed)."""
    return stdlib_zstd() or package_zstd()


# ---------------------------------------------------------------------------- files


def _join(*parts: str) -> str:
    return posixpath.join(*parts) if parts[0].startswith("/") else os.path.join(*parts)


def read_library(system: System, path: str, kind: str, primary: bool = False, zstd: binfmt.ZstdDecoder | None = None,
                 deadline: float | None = None) -> LibraryInfo:
    """The GPU code of one library (``path`` is a machine path, read under the sysroot). Past ``deadline``
    (``time.monotonic()``) the walk stops and says so, keeping what it read."""
    info = LibraryInfo(path=path, kind=kind, primary=primary)
    t0 = time.perf_counter()
    fh = system.open_binary(path)
    if isinstance(fh, ReadResult):
        info.error = f"{path}: {fh.status}" + (f" ({fh.detail})" if fh.detail else "")
        return info
    try:
        table = binfmt.read_sections(fh)
        info.format = table.format
        if table.format is None:
            info.error = f"{path}: {table.error}"
            return info
        if kind == "xpu":
            _read_sycl(info, fh, table, path, deadline)
            return info
        names = binfmt.CUDA_SECTIONS if kind == "cuda" else binfmt.HIP_SECTIONS
        sec = table.find(*names)
        if sec is None:
            info.error = f"{path}: no {names[0]} section" + (f" ({table.error})" if table.error else "")
            return info
        info.section, info.section_size = sec.name, sec.size
        if kind == "cuda":
            _read_fatbin(info, fh, sec, deadline)
        else:
            _read_bundles(info, fh, sec, zstd, deadline)
        return info
    finally:
        fh.close()
        info.read_ms = round((time.perf_counter() - t0) * 1000, 2)


def _read_sycl(info: LibraryInfo, fh: BinaryIO, table: binfmt.SectionTable, path: str, deadline: float | None) -> None:
    """An XPU library's SYCL offload images (at most 64): their targets and AOT device members."""
    images = [binfmt.read_sycl_image(fh, s, deadline) for s in table.with_prefix(binfmt.SYCL_SECTION_PREFIX)[:64]]
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


def _read_fatbin(info: LibraryInfo, fh: BinaryIO, sec: binfmt.Section, deadline: float | None) -> None:
    """A CUDA library's fat binary: its containers, entries and the SM archs most containers carry."""
    fat = binfmt.walk_fatbin(fh, sec.offset, sec.size, deadline)
    info.containers, info.entries, info.compressed = fat.containers, len(fat.entries), fat.compressed
    info.archs, capped = _cap_archs(fat.arch_containers())
    fat.error = fat.error or capped
    main, extra = majority(info.archs, fat.containers)
    info.arch_list, info.arch_extra = sort_archs(main), sort_archs(extra)
    info.error = fat.error


def _read_bundles(info: LibraryInfo, fh: BinaryIO, sec: binfmt.Section, zstd: binfmt.ZstdDecoder | None, deadline: float | None) -> None:
    """A HIP library's clang offload bundles: their entries and the gfx targets most bundles carry."""
    bundles = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=zstd, deadline=deadline)
    info.containers = len(bundles.bundles)
    info.entries = sum(len(b.entries) for b in bundles.bundles)
    info.compressed = bundles.compressed
    info.archs, capped = _cap_archs(bundles.target_bundles())
    bundles.error = bundles.error or capped
    known = sum(1 for b in bundles.bundles if b.entries)
    main, extra = majority(info.archs, known)
    info.arch_list, info.arch_extra = sort_gfx(main), sort_gfx(extra)
    errs = [b.error for b in bundles.bundles if b.error]
    info.error = bundles.error or (errs[0] + (f" ({len(errs)} bundles)" if len(errs) > 1 else "") if errs else None)


def _find_torch(system: System, site_dirs: Sequence[str]) -> tuple[str | None, str | None]:
    """(torch package dir, the site dir it is in): the first site dir, in order, that has torch/__init__.py."""
    for site in site_dirs:
        pkg = _join(site, "torch")
        if system.exists(_join(pkg, "__init__.py")):
            return pkg, site
    return None, None


def read_static_torch(
    system: System,
    site_dirs: Sequence[str],
    *,
    zstd: binfmt.ZstdDecoder | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    env: Mapping[str, str] | None = None,
    interpreter: str | None = None,
    linkage: bool = True,
) -> StaticTorch:
    """The installed torch in ``site_dirs`` (import order: the first torch found wins), without importing it.

    ``zstd`` decodes zstd-compressed ROCm offload bundles; by default the standard
    library's (Python 3.14+) when there is one. The whole read runs within ``budget_s`` seconds:
    what is left unread when it runs out is named in ``errors`` and ``unreadable``. ``linkage``:
    predict what loading torch's libraries does (:mod:`stackdoctor.binaries.linkage`; ``env`` gives
    ``LD_LIBRARY_PATH``, ``interpreter`` the target Python whose RPATH and libraries apply). Never raises.
    """
    st = StaticTorch()
    deadline = time.monotonic() + budget_s
    decoder = zstd if zstd is not None else zstd_decoder()
    # one entry per directory: purelib, platlib and site.getsitepackages() often name the same one
    # (and lib64 is often a link to lib), which would make one torch look installed three times
    unique: dict[str, str] = {}
    for s in site_dirs:
        if isinstance(s, str) and s:
            unique.setdefault(system.realpath(s), s)
    site_dirs = list(unique.values())
    _read_distributions(system, site_dirs, st)
    pkg, _site = _find_torch(system, site_dirs)
    if pkg is None:
        st.installed = "torch" in st.distributions
        if st.installed:
            st.errors.append("a torch distribution is installed but no torch package directory was found")
        return st
    st.installed, st.location = True, pkg
    st.sources["location"] = _join(pkg, "__init__.py")
    vpath = _join(pkg, "version.py")
    res = system.read_text(vpath, max_bytes=MAX_VERSION_PY)
    if res.ok:
        fields = parse_torch_version_py(res.text)
        if "error" in fields:
            st.errors.append(f"{vpath}: {fields['error']}")
        st.version = fields.get("__version__") if isinstance(fields.get("__version__"), str) else None
        for key in ("cuda", "hip", "rocm", "xpu", "git_version"):
            value = fields.get(key)
            setattr(st, key, value if isinstance(value, str) else None)
        st.debug = fields.get("debug") if isinstance(fields.get("debug"), bool) else None
        for key, name in (("__version__", "version"), ("cuda", "cuda"), ("hip", "hip"), ("rocm", "rocm"), ("xpu", "xpu"), ("git_version", "git_version"), ("debug", "debug")):
            if key in fields:
                st.sources[name] = vpath
    else:
        st.errors.append(f"{vpath}: {res.status}" + (f" ({res.detail})" if res.detail else ""))
        if res.status != "absent":
            st.unreadable.append(f"{vpath}: {res.detail or res.status}")
    if st.version is None and "torch" in st.distributions:
        st.version = st.distributions["torch"]
        st.sources["version"] = st.sources.get("distributions.torch", "torch dist-info")
    if st.version:
        st.variant = variant_of(st.version, st.cuda, st.hip, st.xpu)
        st.sources["variant"] = st.sources.get("version", "")
    _read_libraries(system, pkg, st, decoder, deadline)
    _read_runtime_libraries(system, pkg, site_dirs, st)
    # glibc's loader only: macOS (Mach-O, dyld) and Windows (PE) libraries are not predicted
    roots = torch_roots(system, pkg) if linkage and system.host().system in ("Linux", None) else []
    if roots:
        left = max(0.5, min(LINK_BUDGET_S, deadline - time.monotonic()))
        st.linkage = check_linkage(system, roots, env=env or {}, interpreter=interpreter, site_dirs=site_dirs, wheel_dirs=site_dirs, budget_s=left)
    return st


MAX_RECORD = 4 * 1024 * 1024  # a runtime wheel's RECORD lists tens to a few thousand files


def parse_record_bytes(text: str) -> int:
    """The installed size of a distribution: the sum of the size column of its ``RECORD`` (path,hash,size).

    >>> parse_record_bytes("nvidia/cublas/lib/libcublas.so.12,sha256=x,1048576\nnvidia_cublas_cu12-12.6.4.1.dist-info/RECORD,,\n")
    1048576
    """
    total = 0
    for line in text.splitlines():
        size = line.rsplit(",", 1)[-1].strip() if "," in line else ""
        if size.isdigit():
            total += int(size)
    return total


def record_bytes(system: System, path: str) -> int | None:
    """Bytes the files of one installed distribution take, from its ``RECORD``; None when unreadable."""
    res = system.read_text(path, max_bytes=MAX_RECORD)
    return parse_record_bytes(res.text) if res.ok else None


def _read_distributions(system: System, site_dirs: Sequence[str], st: StaticTorch) -> None:
    seen_torch: list[str] = []
    for site in site_dirs:
        for entry in system.listdir(site):
            _read_distribution(system, site, entry, st, seen_torch)
    if len(seen_torch) > 1:
        st.errors.append("more than one torch distribution is installed: " + ", ".join(seen_torch))
        st.duplicates = list(seen_torch)


def _of_interest(name: str, rkey: str | None) -> bool:
    """torch's companions, the runtime libraries' distributions and the others the report names."""
    return name in COMPANIONS or rkey is not None or name in OF_INTEREST_EXACT or name.startswith(OF_INTEREST)


def _read_distribution(system: System, site: str, entry: str, st: StaticTorch, seen_torch: list[str]) -> None:
    """One ``*.dist-info`` / ``*.egg-info`` folder of ``site`` into ``st``, when it names a distribution of interest
    (every torch found is added to ``seen_torch``)."""
    parsed = parse_dist_info_dirname(entry)
    name = parsed.get("name")
    if not name:
        return
    rkey = runtime_key(name)
    if not _of_interest(name, rkey):
        return
    meta_name = "METADATA" if entry.endswith(".dist-info") else "PKG-INFO"
    mpath = _join(site, entry, meta_name)
    meta = system.read_text(mpath, max_bytes=MAX_METADATA)
    fields = parse_dist_metadata(meta.text) if meta.ok else {}
    if not meta.ok and meta.status != "absent":  # a FIFO, mode 000: the directory name still says the version
        st.errors.append(f"{mpath}: {meta.status} ({meta.detail or meta.status})")
        st.unreadable.append(f"{mpath}: {meta.detail or meta.status}")
    version = fields.get("version") or parsed.get("version")
    source = mpath if fields.get("version") else _join(site, entry)
    if not version:
        return
    name = normalize_name(fields.get("name") or name)
    if name not in st.site_distributions:
        st.site_distributions[name] = version
        st.sources[f"site_distributions.{name}"] = source
    if name == "torch":
        seen_torch.append(f"{version} ({_join(site, entry)})")
    if (name in COMPANIONS or name in kinds.companion_names()) and name not in st.requires and meta.ok:
        st.requires[name] = parse_requires_dist(meta.text)
        st.sources[f"requires.{name}"] = mpath
    if name in COMPANIONS:
        if name not in st.distributions:  # the first in import order wins
            st.distributions[name] = version
            st.sources[f"distributions.{name}"] = source
    elif rkey is not None:
        _read_runtime(system, site, entry, name, rkey, version, source, st)


def _read_runtime(system: System, site: str, entry: str, name: str, rkey: str, version: str, source: str, st: StaticTorch) -> None:
    """A runtime library's distribution (``nvidia-cublas-cu12``...): its version by runtime key and its size on disk."""
    if entry.endswith(".dist-info") and name not in st.runtime_bytes:
        size = record_bytes(system, _join(site, entry, "RECORD"))
        if size is not None:
            st.runtime_bytes[name] = size
            st.sources[f"runtime_bytes.{name}"] = _join(site, entry, "RECORD")
    key = runtime_key(name) or rkey
    if key not in st.runtime:
        st.runtime[key] = version
        st.sources[f"runtime.{key}"] = source


# errors that say what stackdoctor does not decode, not that a file is broken
_NOT_BROKEN = ("compressed SYCL image", "zstd stream and no zstd decoder")


def _read_libraries(system: System, pkg: str, st: StaticTorch, decoder: binfmt.ZstdDecoder | None, deadline: float | None = None) -> None:
    libdir = _join(pkg, "lib")
    listing = system.listdir(libdir)
    if not listing and system.exists(libdir):
        ok, why = system.access(libdir, os.R_OK)
        if not ok:  # mode 000: an empty listing is not "no GPU libraries"
            st.errors.append(f"{libdir}: cannot be listed ({why})")
            st.unreadable.append(f"{libdir}: cannot be listed ({why})")
    present = set(listing)
    # torch-xpu-ops can build its SYCL kernels into separate libraries (BUILD_SEPARATE_OPS /
    # BUILD_SPLIT_KERNEL_LIB: torch-xpu-ops-sycl-*.so; torch_xpu_ops_sycl_*.dll on Windows)
    xpu_ops = tuple((f"lib/{n}", "xpu", False) for n in listing if "xpu-ops-sycl" in n or "xpu_ops_sycl" in n)
    for rel, kind, primary in TORCH_LIBRARIES + xpu_ops:
        if posixpath.basename(rel) not in present:
            continue
        path = _join(pkg, *rel.split("/"))
        if deadline is not None and time.monotonic() > deadline:
            st.errors.append(f"{path}: not read (the time budget of the static read ran out)")
            st.unreadable.append(f"{path}: not read (the time budget of the static read ran out)")
            continue
        info = read_library(system, path, kind, primary, decoder, deadline)
        st.libraries.append(info)
        if info.error:
            said = info.error if info.error.startswith(info.path) else f"{info.path}: {info.error}"
            st.errors.append(said)
            if not any(n in info.error for n in _NOT_BROKEN):
                st.unreadable.append(said)
        if not primary:
            continue
        where = f"{info.path} {info.section or ''}".strip()
        if kind == "cuda" and not st.arch_list and info.arch_list:
            st.arch_list, st.arch_extra = info.arch_list, info.arch_extra
            st.sources["arch_list"] = f"{where} ({info.containers} fat-binary containers)"
        elif kind == "hip" and not st.gfx_list and info.arch_list:
            st.gfx_list = info.arch_list
            st.sources["gfx_list"] = f"{where} ({info.containers} offload bundles)"


def _read_runtime_libraries(system: System, pkg: str, site_dirs: Sequence[str], st: StaticTorch) -> None:
    dirs = [_join(pkg, "lib")]
    for site in site_dirs:
        nv = _join(site, "nvidia")
        for sub in system.listdir(nv):
            dirs.append(_join(nv, sub, "lib"))
            dirs.append(_join(nv, sub, "bin"))  # Windows wheels put DLLs in bin/
    for d in dirs:
        for fname in system.listdir(d):
            m = _SONAME.match(fname) or _DLL.match(fname)
            if not m:
                continue
            stem = m.group(1).lower()
            key = RUNTIME_LIBS.get(stem)
            if key is None:
                continue
            path = _join(d, fname)
            st.runtime_libraries.setdefault(fname, path)
            if key not in st.runtime:
                st.runtime[key] = m.group(2)
                st.sources[f"runtime.{key}"] = f"{path} (file name)"
