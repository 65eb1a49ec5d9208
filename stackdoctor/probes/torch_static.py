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

What each kind knows of its builds lives in its package and is asked through the registry
(:class:`~stackdoctor.kinds.base.Accelerator`, ``# --- torchstatic ---``): its version.py fields
(``version_py_fields``), its torch libraries and which carries the build's arch list
(``static_code``, ``torch_libraries``: for CUDA, ROCm and XPU builds decided from real wheels and
described in ``accelerators/nvidia|amd|intel/static.py``), how their GPU code is read
(``read_gpu_code``) and taken as the build's list (``take_arch_list``), its runtime wheels and their
runtime names (``runtime_wheels``, ``runtime_name``: ``nvidia-cudnn-cu13`` -> ``cudnn``; others keep
their normalised distribution names), the runtime library files whose names carry a version
(``runtime_library_names``, ``runtime_library_dirs``) and the variant its version fields say
(``static_variant``). Here, only the loop over :data:`stackdoctor.kinds.ALL`; the kinds' GPU
libraries are read in priority order, each once.

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
from dataclasses import dataclass
from typing import Any

from stackdoctor import kinds
from stackdoctor.binaries import binfmt
from stackdoctor.binaries.linkage import DEFAULT_BUDGET_S as LINK_BUDGET_S
from stackdoctor.binaries.linkage import LinkCheck, check_linkage, torch_roots
from stackdoctor.model.facts import LibraryInfo, TorchFiles
from stackdoctor.system import ReadResult, System

MAX_ARCHS = 256  # architectures reported per library
DEFAULT_BUDGET_S = 10.0  # the whole static read; what is left when it runs out is named in errors
GENERIC_VERSION_KEYS = ("__version__", "git_version", "debug")  # torch/version.py's own; each kind adds its (version_py_fields)
MAX_VERSION_PY = 256 * 1024  # a real torch/version.py is ~300 bytes
MAX_METADATA = 64 * 1024  # the headers of a METADATA file come first
GENERIC_COMPANIONS = ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")  # and each kind's Triton fork (triton_forks)
# every distribution of interest to a diagnosis (``StaticTorch.site_distributions``): torch and its kin, each kind's
# runtime wheels and other distributions it names (name prefixes), and numpy and pip themselves (exact names)
GENERIC_INTEREST = ("torch", "pytorch-", "triton")
OF_INTEREST_EXACT = ("numpy", "pip")
_SONAME = re.compile(r"^lib([A-Za-z0-9_+]+?)\.so\.(\d+(?:\.\d+)*)$")
_DLL = re.compile(r"^([A-Za-z]+?)64_(\d+)\.dll$")



def version_keys() -> tuple[str, ...]:
    """The top-level names of torch/version.py that are read: its own and every kind's version fields."""
    return tuple(dict.fromkeys(("__version__", *(f for a in kinds.ALL for f in a.version_py_fields()), "git_version", "debug")))


def companions() -> frozenset[str]:
    """torch's companions: torchvision, torchaudio and the Triton distributions (every kind's fork too)."""
    return frozenset((*GENERIC_COMPANIONS, *(d for a in kinds.ALL for d in a.triton_forks)))


def interest_prefixes() -> tuple[str, ...]:
    """The name prefixes of the distributions of interest: torch's kin and every kind's runtime wheels and others."""
    return tuple(dict.fromkeys((*GENERIC_INTEREST, *(p for a in kinds.ALL for p in (*a.runtime_wheels, *a.site_interest)))))


def runtime_library_names() -> dict[str, str]:
    """Runtime library file stems whose name carries a major version worth reporting when no metadata does -> runtime name."""
    return {stem: name for a in kinds.ALL for stem, name in a.runtime_library_names}


def code_kind(code: str) -> kinds.Accelerator | None:
    """The kind whose torch libraries carry GPU code ``code`` (LibraryInfo.kind: "cuda" ...)."""
    return next((a for a in kinds.ALL if a.static_code == code), None)


def torch_libraries(listing: Sequence[str]) -> list[tuple[str, str, bool]]:
    """(path under the torch package, GPU code, primary) of every kind's libraries, in priority order, once each."""
    out: dict[str, tuple[str, str, bool]] = {}
    for a in kinds.ALL:
        if a.static_code:
            for rel, primary in a.torch_libraries(listing):
                out.setdefault(rel, (rel, a.static_code, primary))
    return list(out.values())


@dataclass
class StaticTorch(TorchFiles):
    """What the files of the installed torch say, and the predicted load of its libraries."""

    linkage: LinkCheck | None = None  # the predicted load of torch's libraries (Linux)


# ---------------------------------------------------------------------------- pure parsers


def parse_torch_version_py(text: str) -> dict[str, Any]:
    """``torch/version.py`` -> {"__version__": "2.13.0+cpu", "cuda": None, "debug": False, ...}.

    Parsed with :mod:`ast`, never executed. Only top-level ``name = <literal>`` and
    ``name: T = <literal>`` assignments of the keys :func:`version_keys` names are taken (str,
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
    keys = version_keys()
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id not in keys:
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
    kind = next((a for a in kinds.ALL if a.runtime_wheels and dist.startswith(a.runtime_wheels)), None)
    return kind.runtime_name(dist) if kind is not None else None


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


def cap_archs(counts: dict[str, int]) -> tuple[dict[str, int], str | None]:
    """At most :data:`MAX_ARCHS` architectures, the most common first (a real build has a few dozen)."""
    if len(counts) <= MAX_ARCHS:
        return counts, None
    keep = sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_ARCHS]
    return dict(keep), f"{len(counts)} different architectures (a real build has a few dozen); only the {MAX_ARCHS} most common are reported"


def find_section(info: LibraryInfo, table: binfmt.SectionTable, names: Sequence[str]) -> binfmt.Section | None:
    """The first of ``names`` in ``table``, its name and size in ``info``; None (and why in ``info.error``) when none is there."""
    sec = table.find(*names)
    if sec is None:
        info.error = f"{info.path}: no {names[0]} section" + (f" ({table.error})" if table.error else "")
        return None
    info.section, info.section_size = sec.name, sec.size
    return sec


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
        reader = code_kind(kind)
        if reader is None:
            info.error = f"{path}: no reader for {kind} GPU code"
            return info
        reader.read_gpu_code(info, fh, table, zstd, deadline)
        return info
    finally:
        fh.close()
        info.read_ms = round((time.perf_counter() - t0) * 1000, 2)


def variant_of(st: TorchFiles) -> str:
    """The variant of the build: its local version label ("2.14.1+cu130" -> "cu130"), else what the first kind's version
    fields say (torch/version.py's), else "cpu"."""
    version = st.version or ""
    if "+" in version:
        return version.split("+", 1)[1]
    return next((v for a in kinds.ALL if (v := a.static_variant(st))), "cpu")


def _read_version_py(system: System, pkg: str, st: StaticTorch) -> None:
    """torch/version.py's fields into ``st`` (every kind's version fields among them), each sourced."""
    vpath = _join(pkg, "version.py")
    res = system.read_text(vpath, max_bytes=MAX_VERSION_PY)
    if res.ok:
        fields = parse_torch_version_py(res.text)
        if "error" in fields:
            st.errors.append(f"{vpath}: {fields['error']}")
        st.version = fields.get("__version__") if isinstance(fields.get("__version__"), str) else None
        for key in (k for k in version_keys() if k not in ("__version__", "debug")):  # every kind's version fields, git_version
            value = fields.get(key)
            setattr(st, key, value if isinstance(value, str) else None)
        st.debug = fields.get("debug") if isinstance(fields.get("debug"), bool) else None
        for key in version_keys():
            if key in fields:
                st.sources["version" if key == "__version__" else key] = vpath
    else:
        st.errors.append(f"{vpath}: {res.status}" + (f" ({res.detail})" if res.detail else ""))
        if res.status != "absent":
            st.unreadable.append(f"{vpath}: {res.detail or res.status}")


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
    _read_version_py(system, pkg, st)
    if st.version is None and "torch" in st.distributions:
        st.version = st.distributions["torch"]
        st.sources["version"] = st.sources.get("distributions.torch", "torch dist-info")
    if st.version:
        st.variant = variant_of(st)
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
    return name in companions() or rkey is not None or name in OF_INTEREST_EXACT or name.startswith(interest_prefixes())


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
    kin = companions()
    if (name in kin or name in kinds.companion_names()) and name not in st.requires and meta.ok:
        st.requires[name] = parse_requires_dist(meta.text)
        st.sources[f"requires.{name}"] = mpath
    if name in kin:
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
    for rel, kind, primary in torch_libraries(listing):
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
        owner = code_kind(kind)
        if primary and owner is not None:
            owner.take_arch_list(st, info)


def _read_runtime_libraries(system: System, pkg: str, site_dirs: Sequence[str], st: StaticTorch) -> None:
    dirs = [_join(pkg, "lib")]
    tops = dict.fromkeys(d for a in kinds.ALL for d in a.runtime_library_dirs)  # site-packages/<top>/<package>/lib
    stems = runtime_library_names()
    for site in site_dirs:
        for top in tops:
            wheels = _join(site, top)
            for sub in system.listdir(wheels):
                dirs.append(_join(wheels, sub, "lib"))
                dirs.append(_join(wheels, sub, "bin"))  # Windows wheels put DLLs in bin/
    for d in dirs:
        for fname in system.listdir(d):
            m = _SONAME.match(fname) or _DLL.match(fname)
            if not m:
                continue
            stem = m.group(1).lower()
            key = stems.get(stem)
            if key is None:
                continue
            path = _join(d, fname)
            st.runtime_libraries.setdefault(fname, path)
            if key not in st.runtime:
                st.runtime[key] = m.group(2)
                st.sources[f"runtime.{key}"] = f"{path} (file name)"
