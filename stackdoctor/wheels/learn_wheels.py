"""What ``matrix learn`` reads from one wheel: its name (:func:`wheel_facts`), its core metadata (requirements, runtime
pins, the variant a label-less build is) and its GPU code (``libtorch_cuda.so``'s fat binary, ``libtorch_hip.so``'s
offload bundles, read by :mod:`stackdoctor.binaries.binfmt`'s static readers). Pure but for the files it is given; the index is
:mod:`stackdoctor.wheels.learn_sources`' and the learning :mod:`stackdoctor.wheels.learn`'s."""

from __future__ import annotations

import email.parser
import os
import re
import tempfile
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from stackdoctor import kinds
from stackdoctor.wheels.index import IndexFile

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System

MAX_METADATA_BYTES = 4 * 1024 * 1024  # a real torch METADATA is ~36 KB
MAX_WHEEL_BYTES = 6 * 1024 * 1024 * 1024  # the largest real torch wheels are ~3 GB (ROCm)
MAX_LIBRARY_BYTES = 4 * 1024 * 1024 * 1024
_LEGACY = {"manylinux1": "manylinux_2_5", "manylinux2010": "manylinux_2_12", "manylinux2014": "manylinux_2_17"}
GPU_LIBRARIES = kinds.gpu_libraries()  # wheel member -> its GPU code format ("cuda" | "hip"), from the kinds


# ---------------------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class CoreMetadata:
    """What a wheel's core metadata says that the matrix needs."""

    requires_python: str | None = None
    requires_dist: tuple[str, ...] = ()


@dataclass(frozen=True)
class WheelFacts:
    filename: str
    url: str
    sha256: str | None
    project: str
    version: Version  # public version
    label: str | None  # local label: "cu130", "cpu", "rocm7.2"; None: a label-less (PyPI default) build
    pythons: tuple[str, ...]  # "3.12", "3.13t"; "py3" wheels: ()
    platforms: tuple[str, ...]  # compatibility tags (legacy manylinux aliases spelled as manylinux_X_Y)
    requires_python: str | None
    metadata_sha256: str | None = None  # what the page says the PEP 658 metadata file's sha256 is


def parse_core_metadata(text: str) -> CoreMetadata:
    """``Requires-Python`` and ``Requires-Dist`` of an RFC 822 core-metadata file (PEP 566 / 643)."""
    head = text.split("\n\n", 1)[0] if "\n\n" in text else text
    msg = email.parser.HeaderParser().parsestr(head)
    return CoreMetadata(msg.get("Requires-Python"), tuple(str(v) for v in msg.get_all("Requires-Dist") or ()))


def _python_of(interpreter: str, abi: str) -> str | None:
    m = re.match(r"^cp(\d)(\d{1,2})$", interpreter)
    if not m:
        return None
    return f"{m.group(1)}.{m.group(2)}" + ("t" if abi.endswith("t") else "")


def _compat_tag(platform: str) -> str:
    for old, new in _LEGACY.items():
        if platform.startswith(old + "_"):
            return new + platform[len(old):]
    return platform


def wheel_facts(f: IndexFile) -> WheelFacts | None:
    """The facts a wheel's file name carries; None for sdists and unparsable names."""
    if not f.filename.endswith(".whl"):
        return None
    try:
        name, version, _build, tags = parse_wheel_filename(f.filename)
    except (InvalidWheelFilename, InvalidVersion):
        return None
    pythons = sorted({p for t in tags if (p := _python_of(t.interpreter, t.abi))}, key=python_key)
    plats = sorted({_compat_tag(t.platform) for t in tags if t.platform != "any"})
    # several manylinux aliases of one wheel: keep the lowest floor of each arch
    best: dict[str, str] = {}
    for p in plats:
        m = re.match(r"^manylinux_(\d+)_(\d+)_(\w+)$", p)
        if m:
            key = m.group(3)
            if key not in best or (int(m.group(1)), int(m.group(2))) < _floor(best[key]):
                best[key] = p
    plats = [p for p in plats if not p.startswith("manylinux_") or p in best.values()]
    return WheelFacts(
        f.filename, f.url, f.sha256, str(name), Version(version.public), version.local, tuple(pythons), tuple(plats), f.requires_python,
        f.metadata_sha256,
    )


def _floor(tag: str) -> tuple[int, int]:
    m = re.match(r"^manylinux_(\d+)_(\d+)_", tag)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def python_key(p: str) -> tuple[int, int, int]:
    a, _, b = p.rstrip("t").partition(".")
    return (int(a), int(b or 0), 1 if p.endswith("t") else 0)


def tag_family(tag: str) -> str:
    """``linux_x86_64`` | ``linux_aarch64`` | ``win_amd64`` | ``macos_arm64`` | ``macos_x86_64`` (pypi_default keys)."""
    if tag.startswith(("manylinux", "linux")):
        return "linux_aarch64" if tag.endswith("aarch64") else "linux_x86_64" if tag.endswith("x86_64") else "linux_" + tag.rsplit("_", 1)[-1]
    if tag.startswith("macosx"):
        return "macos_arm64" if tag.endswith("arm64") else "macos_x86_64"
    return tag


def _marker_env(tag: str, python: str | None) -> dict[str, str]:
    fam = tag_family(tag)
    system = {"linux": "Linux", "win": "Windows", "macos": "Darwin"}[fam.split("_", 1)[0]]
    machine = {"linux_x86_64": "x86_64", "linux_aarch64": "aarch64", "win_amd64": "AMD64", "macos_arm64": "arm64", "macos_x86_64": "x86_64"}.get(fam, "")
    py = (python or "3.12").rstrip("t")
    return {
        "platform_system": system,
        "sys_platform": {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}[system],
        "platform_machine": machine,
        "os_name": "nt" if system == "Windows" else "posix",
        "python_version": py,
        "python_full_version": py + ".0",
        "implementation_name": "cpython",
        "platform_python_implementation": "CPython",
        "extra": "",
    }


def _requirements(meta: CoreMetadata, tag: str, python: str | None) -> list[Requirement]:
    out = []
    env = _marker_env(tag, python)
    for text in meta.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        try:
            if req.marker is not None and not req.marker.evaluate(env):
                continue
        except (InvalidMarker, Exception):  # an unknown marker variable: the requirement does not apply here
            continue
        out.append(req)
    return out


def pinned_version(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return specs[0].version
    return None


def runtime_pins(meta: CoreMetadata, tag: str, python: str | None = None, *, ranges: bool = False) -> dict[str, str]:
    """Pinned runtime wheels that apply on ``tag``: ``{"cuda-toolkit": "13.2.2", "nvidia-cudnn-cu13": "9.26.0.51"}``;
    ``ranges``: a range pin is kept as its specifier, as the wheel writes it (``"<=13.1.1.3,>=13.1.0.3"``)."""
    out: dict[str, str] = {}
    bundle_nothing = {n for a in kinds.ALL for n in a.not_runtime_wheels}  # (NVML's bindings)
    for req in _requirements(meta, tag, python):
        n = req.name.lower().replace("_", "-")
        if n.startswith(kinds.runtime_wheel_prefixes()) and n not in bundle_nothing:
            pin = pinned_version(req)
            if pin:
                out[n] = pin
            elif ranges and str(req.specifier):
                out[n] = str(req.specifier)
    return out


def variant_from_requires(meta: CoreMetadata, tag: str, python: str | None = None) -> str | None:
    """The variant a label-less build is, from its pins: ``cuda-toolkit==13.2.2`` -> ``cu132``,
    ``nvidia-cuda-runtime-cu12==12.8.90`` -> ``cu128``; no runtime pin -> ``cpu``; None: undecidable."""
    pins = runtime_pins(meta, tag, python)
    for a in kinds.ALL:
        variant = a.variant_from_pins(pins)
        if variant is not None:
            return variant or None  # "": its runtime is pinned, but in a form that names no release
    gpu_kinds = tuple(p for a in kinds.ALL if a.gpu_code for p in a.runtime_wheels)
    if any(n.startswith(gpu_kinds) for n in pins):
        return None  # GPU libraries without the runtime pin (CUDA's, ROCm's): which version is not said
    return "cpu"


def triton_pin(meta: CoreMetadata, tag: str, python: str | None = None) -> tuple[str | None, str | None]:
    """(exact version, requirement as written) of the triton the build pins on ``tag``."""
    for req in _requirements(meta, tag, python):
        n = req.name.lower().replace("_", "-")
        if n in ("triton", "pytorch-triton") or any(n in a.triton_packages for a in kinds.ALL):
            return pinned_version(req), f"{req.name}{req.specifier}"
    return None, None


def torch_requirement(meta: CoreMetadata) -> Requirement | None:
    """A companion wheel's requirement on torch (``torch==2.13.0``, ``torch>=2.14.0``); None when it names none."""
    for text in meta.requires_dist:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            continue
        if req.name.lower() == "torch" and not (req.marker and "extra" in str(req.marker)):
            return req
    return None


def arch_notation(arch_list: Sequence[str], ptx: Sequence[str]) -> list[str]:
    """The matrix's notation: ``sm_120`` + ``compute_120`` -> ``sm_120+PTX``; a lone ``compute_XX`` stays."""
    out = []
    ptx_set = set(ptx)
    for a in arch_list:
        num = a.split("_", 1)[1]
        out.append(f"{a}+PTX" if f"compute_{num}" in ptx_set else a)
    out.extend(p for p in ptx if f"sm_{p.split('_', 1)[1]}" not in arch_list)
    return out


def public_url(url: str) -> str:
    """A URL fit for a committed source: no credentials, no query."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    netloc = host + (f":{p.port}" if p.port else "")
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, "", ""))


def file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_wheel_metadata(path: Path) -> CoreMetadata | None:
    """The core metadata of a wheel on disk; None when it is not a readable wheel (or past a cap: issue 44)."""
    from stackdoctor.binaries import zipbound
    from stackdoctor.system import open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as fh, zipbound.open_zip(fh, str(path)) as z:
            name = next((n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None:
                return None
            return parse_core_metadata(zipbound.read_member(z, name, MAX_METADATA_BYTES, str(path)).decode("utf-8", errors="replace"))
    except zipbound.READ_ERRORS:
        return None


def read_wheel_gpu_code(path: Path) -> dict[str, Any] | None:
    """The GPU code of a torch wheel's primary library, read with :mod:`stackdoctor.binaries.binfmt` (no import):
    ``{"kind": "cuda", "library": "torch/lib/libtorch_cuda.so", "arch_list": [...], "ptx": [...], "gfx": [...]}``."""
    from stackdoctor.binaries import zipbound
    from stackdoctor.system import open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as fh, zipbound.open_zip(fh, str(path)) as z:
            names = set(z.namelist())
            member = next((m for m in GPU_LIBRARIES if m in names), None)
            if member is None:
                return None
            if z.getinfo(member).file_size > MAX_LIBRARY_BYTES:
                return {"kind": GPU_LIBRARIES[member], "library": member, "error": "library larger than the read limit"}
            with tempfile.TemporaryDirectory(prefix="sd-learn-lib-") as tmp:
                lib = Path(z.extract(member, tmp))
                return _read_library(lib, GPU_LIBRARIES[member], member)
    except zipbound.ZipRefused as exc:
        return {"kind": "unknown", "library": path.name, "error": str(exc)}
    except zipbound.READ_ERRORS as exc:
        return {"kind": "unknown", "library": path.name, "error": f"{type(exc).__name__}"}


def _read_library(lib: Path, kind: str, label: str) -> dict[str, Any]:
    with open(lib, "rb") as fh:
        return read_open_library(fh, kind, label)


def _format(kind: str) -> kinds.Accelerator:
    """The kind whose builds carry GPU code of format ``kind`` (:attr:`Accelerator.gpu_code`): what reads it."""
    found = next((a for a in kinds.ALL if a.gpu_code == kind), None)
    if found is None:
        raise KeyError(kind)
    return found


def read_open_library(fh: Any, kind: str, label: str) -> dict[str, Any]:
    """The GPU code of an open library file (a real one, or :mod:`stackdoctor.wheels.lazywheel`'s headers-only view)."""
    from stackdoctor.binaries import binfmt

    table = binfmt.read_sections(fh)
    fmt = _format(kind)
    sec = table.find(*fmt.library_code_sections)
    if sec is None:
        return {"kind": kind, "library": label, "error": f"no GPU code section ({table.error or 'none found'})"}
    return dict(fmt.read_library_code(fh, sec, label))


def read_installed_gpu_code(torch_dir: str | os.PathLike[str], *, system: System | None = None, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """The GPU code of an installed torch (``.../site-packages/torch``), for the install flow to compare with what
    the plan inferred (a mismatch is the install transaction's to roll back). None: no GPU library.

    Read through ``system`` (a live path: :attr:`System.local`) by the static readers (:mod:`stackdoctor.binaries.binfmt`,
    headers only), the walk stopped after ``timeout_s`` (then ``error`` says so and the lists are what was read).
    The shape is :func:`read_wheel_gpu_code`'s: ``{"kind": "cuda", "library", "arch_list": [sm_..], "ptx":
    [compute_..], "containers", "error"}`` or ``{"kind": "hip", "library", "gfx": [...], "containers", "error"}``."""
    from stackdoctor.probes.torch_static import read_library, zstd_decoder
    from stackdoctor.system import System as _System

    sys_ = (system or _System()).local
    base = os.fspath(torch_dir)
    for member, kind in GPU_LIBRARIES.items():
        path = os.path.join(base, *member.split("/")[1:])
        if not sys_.is_file(path):
            continue
        fmt = _format(kind)
        info = read_library(sys_, path, kind, primary=True, zstd=zstd_decoder() if fmt.library_code_zstd else None,
                            deadline=time.monotonic() + timeout_s)
        return dict(fmt.installed_library_code(info, member))
    return None
