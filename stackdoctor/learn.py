"""``stackdoctor matrix learn``: matrix rows read from an index and its artifacts, never typed in.

A release is learned from what an index serves (PEP 503 HTML / PEP 691 JSON project pages; PyPI,
download.pytorch.org and their mirrors alike):

- the **wheel file names**: versions, local labels (``+cu130`` = the variant), Python tags (``cp313t`` =
  free-threaded 3.13), platform tags (``manylinux_2_28_x86_64`` = glibc 2.28 floor);
- the **core metadata** (PEP 658 / 714 ``<wheel>.metadata`` files; where an index has none, the wheel's own
  ``METADATA`` read by HTTP range requests, :mod:`stackdoctor.lazywheel`: the zip's directory and that member,
  ~2 MB of a 450 MB torch wheel; the whole wheel only where ranges are refused and ``--download`` allows it):
  ``Requires-Python``; the ``nvidia-*`` / ``cuda-toolkit`` pins, which say
  which CUDA a label-less (PyPI) build bundles (``cuda-toolkit[...]==13.2.2`` -> ``cu132``); the triton pin;
  and from torchvision's / torchaudio's own ``Requires-Dist: torch==X`` the companion pairing;
- with ``--gpu-code`` (or ``--download``), the **GPU code** of each (variant, platform)'s binaries
  (``libtorch_cuda.so``'s fat binary, ``libtorch_hip.so``'s offload bundles) with the same static readers
  ``check`` uses, the library member streamed by one range request and only its headers kept; an aarch64 or
  Windows wheel's list goes to ``arch_by_platform``, never borrowed from x86_64's.

What could not be learned (an artifact over a cap, an empty file, refused ranges, no GPU library) is skipped and
named in :attr:`LearnResult.missing` with why, never the end of the run; ``matrix learn`` then exits 1.

Each row's ``source`` is the artifact it was read from (its URL and sha256) and ``learned`` the date. The rows go
to a layer file (the user's ``~/.config/stackdoctor/learned.yaml``, ``--out FILE``, or the shipped
``compat_matrix/learned.yaml``), which :func:`stackdoctor.matrix.load_matrix` layers over the hand-kept rows: a
learned variant merges into the known one of the same name field by field.

Incremental: a release already in the layer is not fetched again (``--refresh`` re-reads it). Every read is
bounded: pages by the index client's size cap and deadline, metadata files by :data:`MAX_METADATA_BYTES`,
wheels by ``max_wheel_bytes``; index URLs are printed through :func:`stackdoctor.redact.redact_text`.

:func:`witness_matrix` is the run-time use: a release the matrix lacks but an index serves is learned in
memory (names and metadata only) and planned, its GPU code taken from the nearest known build of the same CUDA /
ROCm version and marked inferred. :func:`read_installed_gpu_code` reads the installed binaries afterwards.
"""

from __future__ import annotations

import datetime as dt
import email.parser
import json
import os
import re
import tempfile
import time
import urllib.parse
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from packaging.markers import InvalidMarker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from stackdoctor.errors import IndexError_, MatrixError, UsageError
from stackdoctor.index import IndexClient, IndexFile, list_project, project_page_url
from stackdoctor.lazywheel import RangesRefused

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.system import System

__all__ = [
    "CoreMetadata",
    "HttpSource",
    "LearnResult",
    "SnapshotSource",
    "learn",
    "parse_core_metadata",
    "read_installed_gpu_code",
    "variant_from_requires",
    "wheel_facts",
    "witness_matrix",
]

MAX_METADATA_BYTES = 4 * 1024 * 1024  # a real torch METADATA is ~36 KB
MAX_WHEEL_BYTES = 6 * 1024 * 1024 * 1024  # the largest real torch wheels are ~3 GB (ROCm)
MAX_LIBRARY_BYTES = 4 * 1024 * 1024 * 1024
COMPANIONS = ("torchvision", "torchaudio")
LAYER_HEADER = (
    "# Learned by `stackdoctor matrix learn` from the artifacts an index serves (file names, core metadata,\n"
    "# and with --download the GPU code of the binaries); each row's source is the artifact (URL, sha256).\n"
    "# Layered over the hand-kept rows (compat_matrix/SCHEMA.md, \"learned rows\"). Regenerate, do not edit.\n"
)
_LEGACY = {"manylinux1": "manylinux_2_5", "manylinux2010": "manylinux_2_12", "manylinux2014": "manylinux_2_17"}
_GPU_LIBS = {  # wheel member -> (kind, primary)
    "torch/lib/libtorch_cuda.so": "cuda",
    "torch/lib/torch_cuda.dll": "cuda",
    "torch/lib/libtorch_hip.so": "hip",
}


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
    pythons = sorted({p for t in tags if (p := _python_of(t.interpreter, t.abi))}, key=_py_key)
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
        f.filename, f.url, f.sha256, str(name), Version(version.public), version.local, tuple(pythons), tuple(plats), f.requires_python
    )


def _floor(tag: str) -> tuple[int, int]:
    m = re.match(r"^manylinux_(\d+)_(\d+)_", tag)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _py_key(p: str) -> tuple[int, int, int]:
    a, _, b = p.rstrip("t").partition(".")
    return (int(a), int(b or 0), 1 if p.endswith("t") else 0)


def _family(tag: str) -> str:
    """``linux_x86_64`` | ``linux_aarch64`` | ``win_amd64`` | ``macos_arm64`` | ``macos_x86_64`` (pypi_default keys)."""
    if tag.startswith(("manylinux", "linux")):
        return "linux_aarch64" if tag.endswith("aarch64") else "linux_x86_64" if tag.endswith("x86_64") else "linux_" + tag.rsplit("_", 1)[-1]
    if tag.startswith("macosx"):
        return "macos_arm64" if tag.endswith("arm64") else "macos_x86_64"
    return tag


def _marker_env(tag: str, python: str | None) -> dict[str, str]:
    fam = _family(tag)
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


def _pin(req: Requirement) -> str | None:
    specs = list(req.specifier)
    if len(specs) == 1 and specs[0].operator in ("==", "==="):
        return specs[0].version
    return None


def runtime_pins(meta: CoreMetadata, tag: str, python: str | None = None) -> dict[str, str]:
    """Pinned runtime wheels that apply on ``tag``: ``{"cuda-toolkit": "13.2.2", "nvidia-cudnn-cu13": "9.26.0.51"}``."""
    out: dict[str, str] = {}
    for req in _requirements(meta, tag, python):
        n = req.name.lower().replace("_", "-")
        if n.startswith(("nvidia-", "cuda-toolkit", "rocm", "intel-", "onemkl-")) and n != "nvidia-ml-py":
            pin = _pin(req)
            if pin:
                out[n] = pin
    return out


def variant_from_requires(meta: CoreMetadata, tag: str, python: str | None = None) -> str | None:
    """The variant a label-less build is, from its pins: ``cuda-toolkit==13.2.2`` -> ``cu132``,
    ``nvidia-cuda-runtime-cu12==12.8.90`` -> ``cu128``; no runtime pin -> ``cpu``; None: undecidable."""
    pins = runtime_pins(meta, tag, python)
    for name in ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11"):
        if name in pins:
            parts = pins[name].split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return f"cu{parts[0]}{parts[1]}"
            return None
    if any(n.startswith("nvidia-") for n in pins):
        return None  # CUDA libraries without the runtime pin: which CUDA is not said
    if any(n.startswith("rocm") for n in pins):
        return None
    return "cpu"


def triton_pin(meta: CoreMetadata, tag: str, python: str | None = None) -> tuple[str | None, str | None]:
    """(exact version, requirement as written) of the triton the build pins on ``tag``."""
    for req in _requirements(meta, tag, python):
        n = req.name.lower().replace("_", "-")
        if n in ("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"):
            return _pin(req), f"{req.name}{req.specifier}"
    return None, None


def torch_pin(meta: CoreMetadata) -> str | None:
    """The torch version a companion wheel pins (``Requires-Dist: torch==2.15.0``), local label dropped."""
    req = torch_requirement(meta)
    pin = _pin(req) if req is not None else None
    return pin.split("+", 1)[0] if pin else None


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


def _public(url: str) -> str:
    """A URL fit for a committed source: no credentials, no query."""
    p = urllib.parse.urlsplit(url)
    host = p.hostname or ""
    netloc = host + (f":{p.port}" if p.port else "")
    return urllib.parse.urlunsplit((p.scheme, netloc, p.path, "", ""))


# ---------------------------------------------------------------------------- sources


class Source(Protocol):
    name: str  # what it is, for messages (redacted when printed)

    def files(self, project: str) -> tuple[str, list[IndexFile]]: ...

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]: ...

    def wheel(self, f: IndexFile, into: Path) -> Path | None: ...


@dataclass
class HttpSource:
    """An index over HTTP(S) or ``file://`` (PEP 503 / 691 pages, PEP 658 / 714 metadata files)."""

    index_url: str
    client: IndexClient
    download: bool = False
    max_metadata_bytes: int = MAX_METADATA_BYTES
    max_wheel_bytes: int = MAX_WHEEL_BYTES
    timeout_s: float = 600.0
    name: str = ""
    why: dict[str, str] = field(default_factory=dict)  # file name -> why its metadata / GPU code was not read
    readers: list[Any] = field(default_factory=list)  # the range readers used (their byte counts)
    _last: Any = None

    def __post_init__(self) -> None:
        self.name = self.name or self.index_url

    def files(self, project: str) -> tuple[str, list[IndexFile]]:
        try:
            return list_project(self.client, self.index_url, project)
        except IndexError_ as exc:
            if getattr(exc, "reason", "") == "missing":
                return project_page_url(self.index_url, project), []
            raise

    def _get(self, url: str, cap: int, into: Path | None = None) -> bytes | Path | None:
        """GET ``url`` (bounded); None for a 404. Streams to ``into`` when given."""
        if url.startswith("file:"):
            from stackdoctor.index import local_path

            p = local_path(url)
            if not p.is_file():
                return None
            if p.stat().st_size > cap:
                raise IndexError_(f"{_public(url)} is larger than {cap // (1024 * 1024)} MiB; not read.")
            if into is not None:
                return p
            return p.read_bytes()
        import httpx

        deadline = time.monotonic() + self.timeout_s
        try:
            with self.client._client_for(url).stream("GET", url) as resp:
                if resp.status_code == 404:
                    return None
                if resp.status_code >= 400:
                    raise IndexError_(f"{_public(url)} answered HTTP {resp.status_code}.")
                length = resp.headers.get("content-length")
                if length and length.isdigit() and int(length) > cap:
                    raise IndexError_(f"{_public(url)} is {int(length) // (1024 * 1024)} MiB, larger than the {cap // (1024 * 1024)} MiB limit; not read.")
                got = 0
                buf = bytearray()
                fh = open(into, "wb") if into is not None else None  # noqa: SIM115 - closed below
                try:
                    for chunk in resp.iter_bytes():
                        got += len(chunk)
                        if got > cap:
                            raise IndexError_(f"{_public(url)} is larger than the {cap // (1024 * 1024)} MiB limit; stopped reading it.")
                        if time.monotonic() > deadline:
                            raise IndexError_(f"{_public(url)} did not arrive in {self.timeout_s:g} s; stopped reading it.")
                        if fh is not None:
                            fh.write(chunk)
                        else:
                            buf += chunk
                finally:
                    if fh is not None:
                        fh.close()
                return into if into is not None else bytes(buf)
        except httpx.HTTPError as exc:
            raise IndexError_(f"{_public(url)} could not be read: {type(exc).__name__}.") from None

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]:
        """The wheel's core metadata: the PEP 658 / 714 ``.metadata`` file where the index serves one, else the
        wheel's own ``METADATA`` read by HTTP range requests (:mod:`stackdoctor.lazywheel`), else (ranges refused,
        ``download`` on, the wheel within ``max_wheel_bytes``) from the whole wheel. None: :attr:`why` says why."""
        try:
            body = self._get(f.url + ".metadata", self.max_metadata_bytes)
        except IndexError_ as exc:
            body = None
            self.why[f.filename] = str(exc)
        if isinstance(body, bytes):
            return parse_core_metadata(body.decode("utf-8", errors="replace")), f
        if f.url.startswith("file:"):
            from stackdoctor.index import local_path

            p = local_path(f.url)
            return (_wheel_metadata(p) if p.is_file() and p.stat().st_size else self._missing(f, "an empty file, not a wheel")), f
        try:
            rw = self._ranged(f)
            if rw.size == 0:
                return self._missing(f, "0 bytes on the index: an empty file, not a wheel"), f
            name = next((n for n in rw.names() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None:
                return self._missing(f, "the wheel has no .dist-info/METADATA"), f
            data = rw.read_member(name, self.max_metadata_bytes, rw.record())
            return parse_core_metadata(data.decode("utf-8", errors="replace")), f
        except RangesRefused as exc:
            refused = str(exc)
        except IndexError_ as exc:
            return self._missing(f, str(exc)), f
        if not self.download:
            return self._missing(f, f"no core metadata file on the index and {refused.split(': ', 1)[-1].rstrip('.')}; --download reads the whole wheel"), f
        with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
            try:
                path = self.wheel(f, Path(tmp))
            except IndexError_ as exc:
                return self._missing(f, str(exc)), f
            if path is None:
                return self._missing(f, "the wheel could not be downloaded"), f
            return _wheel_metadata(path), f

    def _missing(self, f: IndexFile, why: str) -> CoreMetadata | None:
        self.why[f.filename] = why
        return None

    def _ranged(self, f: IndexFile) -> Any:
        from stackdoctor.lazywheel import RangeWheel

        if self._last is not None and self._last.url == f.url:
            return self._last
        self._last = None
        rw = RangeWheel(self.client._client_for(f.url), f.url, budget=self.max_wheel_bytes, timeout_s=self.timeout_s, public=_public(f.url))
        self._last = rw
        self.readers.append(rw)
        return rw

    def gpu_code(self, f: IndexFile) -> dict[str, Any] | None:
        """The GPU code of the wheel's primary GPU library, read by range requests (only the library member's
        bytes, only its headers kept); the whole wheel where ranges are refused and ``download`` allows it."""
        if f.url.startswith("file:"):
            from stackdoctor.index import local_path

            return read_wheel_gpu_code(local_path(f.url))
        try:
            rw = self._ranged(f)
            if rw.size == 0:
                return {"kind": "unknown", "library": f.filename, "error": "0 bytes on the index: an empty file, not a wheel"}
            names = set(rw.names())
            member = next((m for m in _GPU_LIBS if m in names), None)
            if member is None:
                return None
            return dict(rw.gpu_code(member, _GPU_LIBS[member], MAX_LIBRARY_BYTES, _read_open_library))
        except RangesRefused as exc:
            if not self.download:
                return {"kind": "unknown", "library": f.filename, "error": f"{str(exc).split(': ', 1)[-1].rstrip('.')}; --download reads the whole wheel"}
        except IndexError_ as exc:
            return {"kind": "unknown", "library": f.filename, "error": str(exc)}
        with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
            try:
                path = self.wheel(f, Path(tmp))
            except IndexError_ as exc:
                return {"kind": "unknown", "library": f.filename, "error": str(exc)}
            return read_wheel_gpu_code(path) if path else None

    @property
    def fetched(self) -> int:
        """Bytes of wheels read by range requests so far."""
        return sum(r.fetched for r in self.readers)

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        if not self.download:
            return None
        got = self._get(f.url, self.max_wheel_bytes, into / f.filename)
        return got if isinstance(got, Path) else None


@dataclass
class SnapshotSource:
    """An index read earlier (``benchmarks/pypi_via_pip.py``: file lists and core metadata, pip as transport)."""

    path: Path
    name: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    wheels: Path | None = None  # a folder of wheels downloaded earlier (by their index file names), for --download

    def __post_init__(self) -> None:
        try:
            self.data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"--snapshot {self.path}: cannot be read as an index snapshot ({exc.__class__.__name__}).") from None
        if not isinstance(self.data.get("projects"), dict):
            raise UsageError(f"--snapshot {self.path}: not an index snapshot (no projects).")
        self.name = self.name or "https://pypi.org/simple"

    def files(self, project: str) -> tuple[str, list[IndexFile]]:
        p = self.data["projects"].get(project) or {}
        files = [IndexFile(str(f["filename"]), str(f["url"]), f.get("sha256"), f.get("requires_python")) for f in p.get("files") or []]
        return str(p.get("page") or f"{self.name}/{project}/"), files

    def metadata(self, f: IndexFile) -> tuple[CoreMetadata | None, IndexFile]:
        wf = wheel_facts(f)
        if wf is None:
            return None, f
        fam = _family(wf.platforms[0]) if wf.platforms else "any"
        meta = self.data["projects"].get(wf.project, {}).get("metadata", {})
        row = meta.get(f"{wf.version}{'+' + wf.label if wf.label else ''}|{fam}") or meta.get(f"{wf.version}|any")
        if not row:
            return None, f
        used = IndexFile(str(row["filename"]), str(row["url"]), row.get("sha256"), row.get("requires_python"))
        return CoreMetadata(row.get("requires_python"), tuple(row.get("requires_dist") or ())), used

    def wheel(self, f: IndexFile, into: Path) -> Path | None:
        """The wheel from the ``wheels`` folder when it is there and its sha256 is the index's."""
        if self.wheels is None:
            return None
        p = self.wheels / f.filename
        if not p.is_file():
            return None
        if f.sha256 and _file_sha256(p) != f.sha256:
            raise IndexError_(f"{p}: its sha256 is not the index's ({f.sha256[:12]}...); not read.")
        return p


def _file_sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _wheel_metadata(path: Path) -> CoreMetadata | None:
    try:
        with zipfile.ZipFile(path) as z:
            name = next((n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")), None)
            if name is None or z.getinfo(name).file_size > MAX_METADATA_BYTES:
                return None
            return parse_core_metadata(z.read(name).decode("utf-8", errors="replace"))
    except (OSError, zipfile.BadZipFile):
        return None


def read_wheel_gpu_code(path: Path) -> dict[str, Any] | None:
    """The GPU code of a torch wheel's primary library, read with :mod:`stackdoctor.binfmt` (no import):
    ``{"kind": "cuda", "library": "torch/lib/libtorch_cuda.so", "arch_list": [...], "ptx": [...], "gfx": [...]}``."""
    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
            member = next((m for m in _GPU_LIBS if m in names), None)
            if member is None:
                return None
            if z.getinfo(member).file_size > MAX_LIBRARY_BYTES:
                return {"kind": _GPU_LIBS[member], "library": member, "error": "library larger than the read limit"}
            with tempfile.TemporaryDirectory(prefix="sd-learn-lib-") as tmp:
                lib = Path(z.extract(member, tmp))
                return _read_library(lib, _GPU_LIBS[member], member)
    except (OSError, zipfile.BadZipFile) as exc:
        return {"kind": "unknown", "library": path.name, "error": f"{type(exc).__name__}"}


def _read_library(lib: Path, kind: str, label: str) -> dict[str, Any]:
    with open(lib, "rb") as fh:
        return _read_open_library(fh, kind, label)


def _read_open_library(fh: Any, kind: str, label: str) -> dict[str, Any]:
    """The GPU code of an open library file (a real one, or :mod:`stackdoctor.lazywheel`'s headers-only view)."""
    from stackdoctor import binfmt
    from stackdoctor.probes.torch_static import majority, sort_archs, sort_gfx, zstd_decoder

    table = binfmt.read_sections(fh)
    sec = table.find(*(binfmt.CUDA_SECTIONS if kind == "cuda" else binfmt.HIP_SECTIONS))
    if sec is None:
        return {"kind": kind, "library": label, "error": f"no GPU code section ({table.error or 'none found'})"}
    if kind == "cuda":
        fat = binfmt.walk_fatbin(fh, sec.offset, sec.size)
        counts = fat.arch_containers()
        main, _extra = majority(counts, fat.containers)
        sms = [a for a in sort_archs(main) if a.startswith("sm_")]
        ptx = [a for a in sort_archs(main) if a.startswith("compute_")]
        return {"kind": "cuda", "library": label, "arch_list": sms, "ptx": ptx, "containers": fat.containers, "error": fat.error}
    bundles = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=zstd_decoder())
    known = sum(1 for b in bundles.bundles if b.entries)
    main, _extra = majority(bundles.target_bundles(), known)
    return {"kind": "hip", "library": label, "gfx": sort_gfx(main), "containers": len(bundles.bundles), "error": bundles.error}


def read_installed_gpu_code(torch_dir: str | os.PathLike[str], *, system: System | None = None, timeout_s: float = 60.0) -> dict[str, Any] | None:
    """The GPU code of an installed torch (``.../site-packages/torch``), for the install flow to compare with what
    the plan inferred (a mismatch is the install transaction's to roll back). None: no GPU library.

    Read through ``system`` (a live path: :attr:`System.local`) by the static readers (:mod:`stackdoctor.binfmt`,
    headers only), the walk stopped after ``timeout_s`` (then ``error`` says so and the lists are what was read).
    The shape is :func:`read_wheel_gpu_code`'s: ``{"kind": "cuda", "library", "arch_list": [sm_..], "ptx":
    [compute_..], "containers", "error"}`` or ``{"kind": "hip", "library", "gfx": [...], "containers", "error"}``."""
    from stackdoctor.probes.torch_static import read_library, zstd_decoder
    from stackdoctor.system import System as _System

    sys_ = (system or _System()).local
    base = os.fspath(torch_dir)
    for member, kind in _GPU_LIBS.items():
        path = os.path.join(base, *member.split("/")[1:])
        if not sys_.is_file(path):
            continue
        info = read_library(sys_, path, kind, primary=True, zstd=zstd_decoder() if kind == "hip" else None,
                            deadline=time.monotonic() + timeout_s)
        if kind == "cuda":
            return {"kind": "cuda", "library": member, "arch_list": [a for a in info.arch_list if a.startswith("sm_")],
                    "ptx": [a for a in info.arch_list if a.startswith("compute_")], "containers": info.containers, "error": info.error}
        return {"kind": "hip", "library": member, "gfx": list(info.arch_list), "containers": info.containers, "error": info.error}
    return None


# ---------------------------------------------------------------------------- learning


@dataclass
class LearnResult:
    rows: list[dict[str, Any]] = field(default_factory=list)  # release rows learned now (matrix YAML shape)
    pypi_default: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # versions already learned
    lines: list[str] = field(default_factory=list)  # what was done, one line each (URLs not yet redacted)
    errors: list[str] = field(default_factory=list)
    # what was asked for and not learned, one line each: "torch 2.15.0 cu132 manylinux_2_28_aarch64: GPU code of <wheel> (why)"
    missing: list[str] = field(default_factory=list)


def _pick(files: Sequence[WheelFacts]) -> WheelFacts:
    """The representative wheel of a group: a regular (not free-threaded) CPython, the middle one."""
    plain = [f for f in files if f.pythons and not f.pythons[0].endswith("t")] or list(files)
    plain.sort(key=lambda f: (_py_key(f.pythons[0]) if f.pythons else (0, 0, 0), f.filename))
    return plain[len(plain) // 2]


def _source_of(f: IndexFile) -> str:
    sha = f" sha256:{f.sha256}" if f.sha256 else ""
    return f"{_public(f.url)}{sha}"


def _version_ok(v: Version, since: Version) -> bool:
    return not (v.is_prerelease or v.is_devrelease) and v >= since


def learn(
    source: Source,
    *,
    existing: Mapping[str, Mapping[str, Any]] | None = None,
    since: str = "2.0",
    versions: Sequence[str] = (),
    refresh: bool = False,
    download: bool = False,
    companions: bool = True,
    today: str | None = None,
) -> LearnResult:
    """Learn the torch releases ``source`` serves (``versions``: only those). ``existing``: rows already in the
    layer, by version; those are skipped unless ``refresh``."""
    date = today or dt.date.today().isoformat()
    res = LearnResult()
    existing = existing or {}
    floor = Version(since)
    page, files = source.files("torch")
    wheels = [w for f in files if (w := wheel_facts(f)) is not None and w.project == "torch"]
    by_version: dict[Version, list[WheelFacts]] = {}
    for w in wheels:
        if _version_ok(w.version, floor):
            by_version.setdefault(w.version, []).append(w)
    wanted = {Version(v) for v in versions}
    if wanted and not wanted & set(by_version):
        res.errors.append(f"{page} serves no torch {', '.join(sorted(map(str, wanted)))}")
    todo: list[Version] = []
    for v in sorted(by_version, reverse=True):
        if wanted and v not in wanted:
            continue
        old = existing.get(str(v))
        if old and old.get("learned") and not refresh and (not download or _has_gpu_code(old)):
            res.skipped.append(str(v))
            continue
        todo.append(v)
    pairs: dict[str, dict[str, str]] = {}
    ranged_pairs: dict[str, set[str]] = {}
    comp_pythons: dict[str, dict[str, set[str]]] = {}
    if companions and todo:
        for comp in COMPANIONS:
            pairs[comp], comp_pythons[comp], ranged_pairs[comp] = _learn_companion(source, comp, {str(v) for v in todo}, floor, res)
    by_fam_default: dict[tuple[str, str], tuple[Version, str, str]] = {}
    for v in todo:
        row = _learn_release(source, page, v, by_version[v], date, download, res)
        if row is None:
            continue
        for comp in COMPANIONS:
            cv = pairs.get(comp, {}).get(str(v))
            if cv:
                row[comp] = cv
                if str(v) in ranged_pairs.get(comp, set()):
                    row.setdefault("paired_by_range", []).append(comp)
        tv = row.get("torchvision")
        if tv and comp_pythons.get("torchvision", {}).get(tv) is not None:
            have = comp_pythons["torchvision"][tv]
            only = [p for p in row.get("pythons", []) if p not in have]
            if only:
                row["torch_only_pythons"] = only
        elif companions and not tv and "torchvision" in pairs:
            row.setdefault("unknown", []).append("torchvision: no torchvision on the index pins this torch")
        srcs = row.pop("_by_plat")
        for vr in row.get("variants", []):
            if vr.get("index") == "pypi":
                for plat in vr["platforms"]:
                    key = (f"{v.major}.{v.minor}", _family(plat))
                    if key not in by_fam_default or by_fam_default[key][0] < v:
                        by_fam_default[key] = (v, vr["name"], srcs[vr["name"]][plat])
        res.rows.append(row)
    for (minor, fam), (_v, name, src) in sorted(by_fam_default.items()):
        res.pypi_default.append({"torch": minor, "platform": fam, "variant": name, "source": src})
    return res


def _why(source: Source, filename: str) -> str | None:
    why = getattr(source, "why", None)
    return why.get(filename) if isinstance(why, dict) else None


def _gpu_code_of(source: Source, f: IndexFile, res: LearnResult) -> dict[str, Any] | None:
    """The GPU code of wheel ``f``: by range reads where the source can (:meth:`HttpSource.gpu_code`), else from
    the wheel the source hands over (a snapshot's folder of downloaded wheels)."""
    reader = getattr(source, "gpu_code", None)
    if reader is not None:
        code = reader(f)
        return code if isinstance(code, dict) or code is None else None
    with tempfile.TemporaryDirectory(prefix="sd-learn-") as tmp:
        try:
            path = source.wheel(f, Path(tmp))
        except IndexError_ as exc:
            res.errors.append(str(exc))
            return None
        return read_wheel_gpu_code(path) if path else None


def _has_gpu_code(row: Mapping[str, Any]) -> bool:
    return all(vr.get("arch_list") or vr.get("gfx") or vr.get("name") in ("cpu", "xpu") for vr in row.get("variants") or [])


def _learn_companion(
    source: Source, comp: str, torch_versions: set[str], floor: Version, res: LearnResult
) -> tuple[dict[str, str], dict[str, set[str]], set[str]]:
    """torch version -> the newest ``comp`` release pinning it; ``comp`` version -> Pythons its wheels serve; the
    torch versions paired through a range (``torch>=2.14.0``) rather than an exact pin."""
    _page, files = source.files(comp)
    groups: dict[Version, list[WheelFacts]] = {}
    for f in files:
        w = wheel_facts(f)
        if w is not None and not (w.version.is_prerelease or w.version.is_devrelease):
            groups.setdefault(w.version, []).append(w)
    pairs: dict[str, str] = {}
    pythons: dict[str, set[str]] = {}
    ranged: list[tuple[str, Requirement, str]] = []
    oldest = min((Version(t) for t in torch_versions), default=floor)
    for cv in sorted(groups, reverse=True):
        if set(pairs) >= torch_versions:
            break
        ws = groups[cv]
        linux = [w for w in ws if any(p.endswith("x86_64") and p.startswith(("manylinux", "linux")) for p in w.platforms)] or ws
        w = _pick(linux)
        meta, _used = source.metadata(IndexFile(w.filename, w.url, w.sha256, w.requires_python))
        if meta is None:
            why = _why(source, w.filename)
            if why:
                res.missing.append(f"{comp} {cv}: core metadata of {w.filename} ({why}); its torch pairing is unknown")
            continue
        req = torch_requirement(meta)
        if req is None:
            continue  # no torch requirement at all: it pairs with nothing it says
        pin = _pin(req)
        pys = {p for x in ws for p in x.pythons}
        if not pys and meta.requires_python:  # py3-none wheels: Requires-Python decides
            pys = {f"3.{n}{t}" for n in range(8, 20) for t in ("", "t") if _spec_ok(meta.requires_python, f"3.{n}")}
        pythons[str(cv)] = pys
        if pin is not None:
            try:
                pv = Version(pin.split("+", 1)[0])
            except InvalidVersion:
                continue
            if pv < oldest:
                break
            hits = [str(pv)] if str(pv) in torch_versions else []
        else:  # a range (torch>=2.14.0): every learned torch it admits (after the exact pins), the newest companion first
            ranged.append((str(cv), req, w.url))
            continue
        for t in hits:
            if t not in pairs:
                pairs[t] = str(cv)
                res.lines.append(f"{comp} {cv} requires {req.name}{req.specifier}: paired with torch {t} ({_public(w.url)})")
    by_range: set[str] = set()
    for cvs, req, url in ranged:
        for t in sorted(torch_versions, key=Version, reverse=True):
            if t not in pairs and req.specifier.contains(t, prereleases=False):
                pairs[t] = cvs
                by_range.add(t)
                res.lines.append(f"{comp} {cvs} requires {req.name}{req.specifier}: paired with torch {t} ({_public(url)})")
    return pairs, pythons, by_range


def _spec_ok(spec: str, python: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec).contains(python + ".0")
    except InvalidSpecifier:
        return True


def _learn_release(
    source: Source, page: str, v: Version, ws: list[WheelFacts], date: str, download: bool, res: LearnResult
) -> dict[str, Any] | None:
    groups: dict[tuple[str | None, str], list[WheelFacts]] = {}
    for w in ws:
        for p in w.platforms:
            groups.setdefault((w.label, p), []).append(w)
    variants: dict[str, dict[str, Any]] = {}
    req_python: str | None = None
    triton: tuple[str | None, str | None] = (None, None)
    unknown: list[str] = []
    py_by_plat: dict[str, set[str]] = {}
    for (label, plat), members in sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1])):
        rep = _pick(members)
        meta, used = source.metadata(IndexFile(rep.filename, rep.url, rep.sha256, rep.requires_python))
        if meta is None:
            why = _why(source, rep.filename) or "no core metadata on the index (--download reads the wheel's own)"
            unknown.append(f"{rep.filename}: core metadata not read ({why})")
            res.missing.append(f"torch {v} {label or 'default build'} {plat}: core metadata of {rep.filename} ({why})")
            if label is None:
                continue
        name = label if label else variant_from_requires(meta, plat, rep.pythons[0] if rep.pythons else None) if meta else None
        if label and not re.match(r"^(cpu|cu\d{2,3}|rocm\d+\.\d+(\.\d+)?|xpu)$", label):
            unknown.append(f"{rep.filename}: local label +{label} is not a variant name; not learned")
            continue
        if name is None:
            unknown.append(f"{rep.filename}: which build it is (its runtime pins name no CUDA runtime)")
            continue
        if meta is not None:
            req_python = req_python or meta.requires_python
            if triton == (None, None):
                triton = triton_pin(meta, plat, rep.pythons[0] if rep.pythons else None)
        pys = {p for m in members for p in m.pythons}
        py_by_plat.setdefault(_family(plat), set()).update(pys)
        vr = variants.setdefault(name, {"name": name, "platforms": [], "pythons": set(), "learned": date})
        vr["platforms"].append(plat)
        vr["pythons"] |= pys
        if label is None:
            vr["index"] = "pypi"
        pins = runtime_pins(meta, plat) if meta else {}
        if pins:
            vr.setdefault("runtime", {}).update(pins)
        what = "file names and core metadata"
        if download and name.startswith(("cu", "rocm")):
            code = _gpu_code_of(source, used, res)
            if code is None or (not code.get("error") and not (code.get("arch_list") or code.get("gfx"))):
                res.missing.append(f"torch {v} {name} {plat}: GPU code of {used.filename} ({(code or {}).get('error') or 'no GPU library or GPU code found in it'})")
            elif code.get("error") and not (code.get("arch_list") or code.get("gfx")):
                res.missing.append(f"torch {v} {name} {plat}: GPU code of {used.filename} ({code['error']})")
            if code and not code.get("error") and (code.get("arch_list") or code.get("gfx")):
                what += f", GPU code read from {code['library']}"
                if code["kind"] == "cuda":
                    archs = arch_notation(code["arch_list"], code.get("ptx") or [])
                    if plat.endswith("x86_64") and plat.startswith(("manylinux", "linux")):
                        vr["arch_list"] = archs
                    else:
                        vr.setdefault("arch_by_platform", {})[plat] = archs
                else:
                    vr["gfx"] = code["gfx"]
            elif code and code.get("error"):
                unknown.append(f"{rep.filename}: GPU code not read ({code['error']})")
        vr.setdefault("_sources", []).append(_source_of(used))
        vr.setdefault("_what", set()).add(what)
        vr.setdefault("_by_plat", {})[plat] = f"{_source_of(used)} ({what}; learned {date} by stackdoctor matrix learn)"
    if not variants:
        res.errors.append(f"torch {v}: no build could be learned from {page}" + (f" ({unknown[0]})" if unknown else ""))
        res.missing.append(f"torch {v}: no build learned" + (f" ({'; '.join(unknown[:3])})" if unknown else ""))
        return None
    all_pys = sorted({p for s in py_by_plat.values() for p in s}, key=_py_key)
    fam_tags: dict[str, str] = {}
    for w in ws:
        for t in w.platforms:
            fam_tags.setdefault(_family(t), t)
    python_platforms = {
        p: sorted(fam_tags[f] for f, s in py_by_plat.items() if p in s) for p in all_pys if not all(p in s for s in py_by_plat.values())
    }
    out_variants = []
    by_plat: dict[str, dict[str, str]] = {}
    for vr in variants.values():
        vr["pythons"] = sorted(vr["pythons"], key=_py_key)
        what = "; ".join(sorted(vr.pop("_what"), key=len, reverse=True))
        vr["source"] = "; ".join(vr.pop("_sources")) + f" ({what}; learned {date} by stackdoctor matrix learn)"
        by_plat[vr["name"]] = vr.pop("_by_plat")
        if vr["name"].startswith("cu") and "arch_list" not in vr and "arch_by_platform" not in vr:
            vr["unknown"] = ["arch list: not read from the binaries (stackdoctor matrix learn --download reads it)"]
        out_variants.append(vr)
    macs = sorted({p for w in ws for p in w.platforms if p.startswith("macosx_") and p.endswith("arm64")})
    row: dict[str, Any] = {
        "version": str(v),
        "learned": date,
        "source": f"{_public(page)} (file names{', core metadata' if req_python else ''}; learned {date} by stackdoctor matrix learn)",
        "pythons": all_pys,
    }
    if req_python:
        row["requires_python"] = req_python
    if python_platforms:
        row["python_platforms"] = python_platforms
    if macs:
        m = re.match(r"^macosx_(\d+)_(\d+)_", macs[0])
        if m:
            row["min_macos"] = f"{m.group(1)}.{m.group(2)}"
    if triton[0]:
        row["triton"] = triton[0]
    if triton[1]:
        row["triton_requirement"] = triton[1]
    if unknown:
        row["unknown"] = unknown
    row["variants"] = out_variants
    row["_by_plat"] = by_plat
    res.lines.append(
        f"torch {v}: " + ", ".join(f"{x['name']} ({', '.join(x['platforms'])})" for x in out_variants)
        + (f"; Python {all_pys[0]}-{all_pys[-1]}" if all_pys else "")
    )
    return row


# ---------------------------------------------------------------------------- the layer file


def read_layer(path: Path) -> dict[str, Any]:
    """The layer document at ``path`` (``{}`` when absent); validated as a matrix file."""
    import yaml

    from stackdoctor.matrix import parse_matrix_text

    if not path.exists():
        return {}
    text = path.read_text(encoding="utf-8")
    parse_matrix_text(text, str(path))
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise MatrixError(f"compat matrix {path} line 1: not a mapping.")
    return data


def write_layer(path: Path, doc: dict[str, Any], result: LearnResult) -> dict[str, Any]:
    """Merge ``result`` into the layer ``doc`` and write it atomically (validated first)."""
    import yaml

    from stackdoctor.matrix import parse_matrix_text

    rows = {str(r["version"]): r for r in doc.get("releases") or []}
    for r in result.rows:
        rows[r["version"]] = r
    defaults = {(d["torch"], d["platform"]): d for d in doc.get("pypi_default") or []}
    for d in result.pypi_default:
        defaults[(d["torch"], d["platform"])] = d
    out: dict[str, Any] = {"schema": "stackdoctor.matrix/1"}
    out["releases"] = [rows[k] for k in sorted(rows, key=Version, reverse=True)]
    if defaults:
        out["pypi_default"] = [defaults[k] for k in sorted(defaults, key=lambda k: (Version(k[0]), k[1]), reverse=True)]
    text = LAYER_HEADER + yaml.safe_dump(out, sort_keys=False, width=1000, allow_unicode=True)
    parse_matrix_text(text, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return out


# ---------------------------------------------------------------------------- run time: the index as a witness


def witness_matrix(
    matrix: Any, sources: Iterable[Source], *, newer_only: bool = True, versions: Sequence[str] = (), artifacts: Sequence[str] = ()
) -> tuple[Any, list[str]]:
    """``matrix`` plus the torch releases ``sources`` serve that it lacks (names and metadata only, nothing
    downloaded), and one note per release learned. A learned CUDA / ROCm build without a read arch list gets the
    list of the nearest known build of the same CUDA / ROCm version, marked inferred in its ``derived_from``
    (the resolver's reasons carry it). Index failures leave the matrix as it is (a note says so, starting
    ``index witness:``). ``versions``: only those (``newer_only`` does not apply to them). A source whose
    ``serves_index`` is false (a find-links page or folder) is no index: its builds keep their variant's index.
    ``artifacts``: releases the matrix knows but whose build for the target a source serves and the matrix lacks
    (a missing (release, variant, platform)): learned too, and merged into the known row variant by variant."""
    from stackdoctor.matrix import _build, parse_matrix_text

    notes: list[str] = []
    newest = matrix.releases[0].version if matrix.releases else Version("0")
    known = {str(r.version) for r in matrix.releases} | {str(p.version) for r in matrix.releases for p in r.patches}
    rows: list[dict[str, Any]] = []
    for src in sources:
        try:
            _page, files = src.files("torch")
        except IndexError_ as exc:
            notes.append(f"index witness: {exc}")
            continue
        vs = {w.version for f in files if (w := wheel_facts(f)) is not None and w.project == "torch" and _version_ok(w.version, Version("2.0"))}
        only = {Version(v) for v in versions}
        also = {Version(v) for v in artifacts}
        new = sorted(v for v in vs if (str(v) not in known and (v in only if only else (not newer_only or v > newest))) or v in also)
        if not new:
            continue
        try:
            res = learn(src, versions=[str(v) for v in new], companions=True)
        except IndexError_ as exc:
            notes.append(f"index witness: {exc}")
            continue
        for row in res.rows:
            for vr in row["variants"]:
                _infer_gpu_code(matrix, row["version"], vr)
                if vr.get("index") != "pypi" and getattr(src, "serves_index", True):
                    vr["index"] = getattr(src, "index_url", None) or src.name
            rows.append(row)
            if row["version"] in known:  # a build of a known release: say which builds were learned
                builds = ", ".join(f"{vr['name']} ({', '.join(vr['platforms'])})" for vr in row["variants"])
                notes.append(f"torch {row['version']} {builds}: a build the matrix lacks; learned from {_public(src.name)} (its file names and core metadata)")
            else:
                notes.append(f"torch {row['version']}: not in the matrix; learned from {_public(src.name)} (its file names and core metadata)")
            known.add(row["version"])
    if not rows:
        return matrix, notes
    import yaml

    text = yaml.safe_dump({"schema": "stackdoctor.matrix/1", "releases": rows}, sort_keys=False)
    parsed = parse_matrix_text(text, "index witness")
    base = [(f, _parsed_of(matrix)) for f in ("matrix",)]
    return _build([*base, ("index witness", parsed)]), notes


def _parsed_of(matrix: Any) -> Any:
    """A :class:`Matrix` as a parsed layer (so :func:`_build` can layer witness rows over it): every declared table's rows."""
    from stackdoctor.matrix import TABLES, _Parsed

    return _Parsed({t.key: t.rows(matrix.table(t.key)) for t in TABLES}, layered=True)


def _infer_gpu_code(matrix: Any, version: str, vr: dict[str, Any]) -> None:
    name = vr["name"]
    if not name.startswith(("cu", "rocm")) or vr.get("arch_list") or vr.get("gfx"):
        return
    for r in matrix.releases:  # newest first: the nearest older release with that build
        known = r.variant(name)
        if known is None or not (known.arch_list or known.gfx):
            continue
        if name.startswith("cu"):
            vr["arch_list"] = list(known.arch_list)
            if known.arch_by_platform:
                vr["arch_by_platform"] = {k: list(a) for k, a in known.arch_by_platform.items()}
        else:
            vr["gfx"] = list(known.gfx)
        vr["derived_from"] = f"inferred: GPU code of torch {r.version} {name} (the nearest known build of the same {'CUDA' if name.startswith('cu') else 'ROCm'} version); read from the installed binaries after installing"
        vr["unknown"] = [u for u in vr.get("unknown", []) if "arch list" not in u]
        return

