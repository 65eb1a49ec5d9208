"""The compatibility matrix: which torch builds exist, what they run on, and where each fact came from.

The data lives in ``compat_matrix/*.yaml`` (shipped as the package ``stackdoctor.compat_matrix``;
schema in ``compat_matrix/SCHEMA.md``). :func:`load_matrix` reads the embedded files, then layers
user files over them (``--matrix FILE`` / ``STACKDOCTOR_MATRIX``): a user release or variant row
replaces the embedded one with the same version / name, or adds a new one.

Loading is strict: a malformed or invalid file raises :class:`~stackdoctor.errors.MatrixError` with
one sentence naming the file, the line and the field. Only ``yaml.safe_load`` semantics are used,
with a cap on document size and on alias resolutions (no "billion laughs").

Everything else here is pure: :func:`arch_runs`, :func:`gfx_supported`, :func:`driver_meets`,
:func:`variant_from_version` and the :class:`Matrix` look-ups do no I/O.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

from stackdoctor.errors import MatrixError
from stackdoctor.versions import at_least, dotted

__all__ = [
    "CudaRow",
    "IndexRow",
    "JetsonRow",
    "Matrix",
    "Release",
    "Variant",
    "arch_runs",
    "arch_match",
    "default_index_url",
    "driver_meets",
    "gfx_supported",
    "load_matrix",
    "parse_platform",
    "variant_from_version",
    "variant_kind",
    "MAX_DOCUMENT_BYTES",
    "MAX_ALIASES",
]

SCHEMA = "stackdoctor.matrix/1"
MAX_DOCUMENT_BYTES = 4 * 1024 * 1024
MAX_ALIASES = 200
VARIANT_KINDS = ("cpu", "cuda", "rocm", "xpu")

_VARIANT_RE = re.compile(r"^(?:(?P<cpu>cpu)|cu(?P<cu>\d{2,3})|rocm(?P<rocm>\d+\.\d+(?:\.\d+)?)|(?P<xpu>xpu))$")
_ARCH_RE = re.compile(r"^(?P<kind>sm|compute)_(?P<num>\d{2,3})(?P<suffix>[af]?)(?P<ptx>\+PTX)?$")
_GFX_RE = re.compile(r"^gfx[0-9a-f]{3,4}$")
_PY_RE = re.compile(r"^3\.\d{1,2}t?$")
_INDEX_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]*$")


# ---------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Variant:
    """One build of one release on download.pytorch.org (``whl/<name>``)."""

    name: str  # "cu126" | "cpu" | "rocm6.4" | "xpu"
    kind: str  # "cpu" | "cuda" | "rocm" | "xpu"
    cuda: str | None = None  # "12.6"
    rocm: str | None = None  # "6.4"
    platforms: tuple[str, ...] = ()  # compatibility platform tags: "manylinux_2_28_x86_64", "win_amd64", ...
    pythons: tuple[str, ...] = ()  # "3.10" ... "3.14t"
    arch_list: tuple[str, ...] = ()  # Linux x86_64 list, torch.cuda.get_arch_list() notation: "sm_90", "compute_120"
    gfx: tuple[str, ...] = ()
    source: str = ""
    unknown: tuple[str, ...] = ()  # facts about this variant the matrix does not know (never guessed)
    derived_from: str | None = None
    arch_by_platform: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    line: int | None = field(default=None, compare=False, hash=False)
    # learned from an index (``stackdoctor matrix learn``): the date; its facts are the artifacts' (source)
    learned: str | None = None
    # where the learned build is served: "pypi" (label-less default build of a PyPI-shaped index); None: <pytorch>/<name>
    index: str | None = None
    runtime: dict[str, str] = field(default_factory=dict, hash=False)  # pinned runtime wheels: "cuda-toolkit" -> "13.2.2"

    def arch_for(self, platform: str | None) -> tuple[str, ...]:
        """The arch list of the wheel for ``platform`` (a compatibility tag or a bare arch/OS family)."""
        if platform:
            if platform in self.arch_by_platform:
                return self.arch_by_platform[platform]
            fam = parse_platform(platform)
            for tag, archs in self.arch_by_platform.items():
                other = parse_platform(tag)
                if other[0] == fam[0] and other[1] == fam[1]:
                    return archs
        return self.arch_list

    def arch_known_for(self, platform: str | None) -> bool:
        """False when the matrix has no list of its own for ``platform`` (the Linux x86_64 list would only stand in)."""
        if not platform:
            return bool(self.arch_list)
        fam = parse_platform(platform)
        if any(parse_platform(t)[:2] == fam[:2] for t in self.arch_by_platform):
            return True
        if fam[0] == "linux" and fam[1] == "x86_64":
            return bool(self.arch_list)
        return False

    def arch_fallback(self, platform: str | None) -> tuple[str, tuple[str, ...]] | None:
        """Another platform's list of this same build (same release, same CUDA version), for a platform whose own
        list is unknown: ``("Linux x86_64", (...))`` or ``("win_amd64", (...))``; None when no other list is known.

        The Linux x86_64 list comes first (the build scripts derive the others from it)."""
        fam = parse_platform(platform)[:2] if platform else ("linux", "x86_64")
        if self.arch_list and fam != ("linux", "x86_64"):
            return ("Linux x86_64", self.arch_list)
        for tag, archs in self.arch_by_platform.items():
            if archs and parse_platform(tag)[:2] != fam:
                return (tag, archs)
        return None


@dataclass(frozen=True)
class PatchRow:
    version: Version
    torchvision: str | None = None
    torchaudio: str | None = None
    triton: str | None = None


@dataclass(frozen=True)
class Release:
    version: Version
    variants: tuple[Variant, ...] = ()
    torchvision: str | None = None
    torchaudio: str | None = None
    triton: str | None = None
    min_macos: str | None = None  # the wheel's macOS floor ("11.0", "14.0")
    mps_min_macos: str | None = None  # MPS needs at least this macOS (may be stricter than the wheel)
    manylinux_glibc: str | None = None  # baseline glibc of plain ``linux_*`` wheels of this release
    pythons: tuple[str, ...] = ()
    torch_only_pythons: tuple[str, ...] = ()  # Pythons with torch wheels but no torchvision/torchaudio
    # Pythons whose wheels exist only on some platforms: "3.13t" -> ("manylinux_2_17_x86_64",) (OS and arch count)
    python_platforms: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    released: str | None = None
    source: str = ""
    derived_from: str | None = None
    unknown: tuple[str, ...] = ()
    patches: tuple[PatchRow, ...] = ()  # older patch releases of the same minor (their pairings)
    line: int | None = field(default=None, compare=False, hash=False)
    requires_python: str | None = None  # the wheels' Requires-Python (">=3.11")
    triton_requirement: str | None = None  # the torch wheel's triton pin as written ("~=3.9.0")
    learned: str | None = None  # the date ``stackdoctor matrix learn`` read this row from an index
    # companions paired because their Requires-Dist range admits this torch (no release pins it exactly)
    paired_by_range: tuple[str, ...] = ()

    @property
    def minor(self) -> tuple[int, int]:
        return (self.version.major, self.version.minor)

    def variant(self, name: str) -> Variant | None:
        for v in self.variants:
            if v.name == name:
                return v
        return None

    def python_on(self, python: str, os_: str, arch: str) -> bool:
        """False when ``python`` has wheels of this release only on other platforms (``python_platforms``)."""
        allowed = self.python_platforms.get(python)
        if not allowed:
            return True
        return any(parse_platform(t)[:2] == (os_, arch) for t in allowed)

    @property
    def versions(self) -> tuple[Version, ...]:
        """This release's version and its known older patch versions, newest first."""
        return (self.version, *sorted((p.version for p in self.patches), reverse=True))


@dataclass(frozen=True)
class CudaRow:
    version: str  # "12.6"
    min_driver_linux: str | None  # toolkit (Table 3) minimum; None: unknown
    min_driver_windows: str | None
    minor_compat_floor_linux: str | None  # minor-version-compatibility floor of the major
    minor_compat_floor_windows: str | None
    source: str = ""
    derived_from: str | None = None
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class JetsonRow:
    jetpack: str  # JetPack major: "6"
    l4t: tuple[str, ...]  # L4T release prefixes this row covers: ("36.4",)
    cuda: str | None  # JetPack's CUDA: "12.6"
    variant: str | None  # plan variant name: "jetson-jp6-cu126"; None: no index known
    index_url: str | None
    torch: tuple[str, ...] = ()  # torch versions known on that index, newest first
    pythons: tuple[str, ...] = ()
    gpu_cc: tuple[str, ...] = ()
    use_pytorch_index: bool = False  # the regular download.pytorch.org aarch64 builds serve this JetPack
    note: str | None = None
    source: str = ""
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class IndexRow:
    """A package index the plans point at: ``pytorch`` (the base of ``<url>/<variant>``) or ``pypi``."""

    name: str
    url: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class GpuRow:
    name: str
    cc: str
    source: str


@dataclass(frozen=True)
class Peak:
    gpu: str
    fp32: float | None
    bf16: float | None
    fp16: float | None
    source: str
    tf32: float | None = None


@dataclass(frozen=True)
class RocmOverride:
    gfx: str
    value: str  # HSA_OVERRIDE_GFX_VERSION value: "10.3.0"
    as_gfx: str  # the gfx target the override makes it load: "gfx1030"
    source: str
    note: str | None = None


@dataclass(frozen=True)
class MirrorRow:
    """A mirror of the PyTorch wheel index (``compat_matrix/mirrors.yaml``)."""

    name: str  # "aliyun"
    url: str  # "https://mirrors.aliyun.com/pytorch-wheels"
    layout: str  # "simple" (PEP 503 copy of /whl/<variant>/) | "flat" (file listings, find-links)
    listing: str | None = None  # flat: the page of file links, "{url}/{variant}/" or "{url}/torch_stable.html"
    source: str = ""
    note: str | None = None
    derived_from: str | None = None
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class PypiDefault:
    """The variant PyPI's plain ``torch`` wheel is built for, per torch minor and platform."""

    torch: str  # "2.13"
    platform: str  # "linux_x86_64" | "linux_aarch64" | "win_amd64"
    variant: str | None  # "cu130"; None: not known
    source: str = ""
    unknown: tuple[str, ...] = ()


@dataclass(frozen=True)
class CondaRelease:
    version: str  # "2.13.0"
    cuda: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)  # conda subdir -> CUDA versions built
    platforms: tuple[str, ...] = ()  # conda subdirs with builds
    source: str = ""


@dataclass(frozen=True)
class CondaInfo:
    """conda-forge's PyTorch packages (``compat_matrix/conda.yaml``)."""

    channel: str
    package: str  # "pytorch"
    cpu_package: str | None = None  # "pytorch-cpu"
    gpu_package: str | None = None  # "pytorch-gpu"
    cuda_selector: str | None = None  # "cuda-version"
    cuda_build: str | None = None  # "cuda*"
    cpu_build: str | None = None  # "cpu_*"
    virtual_package: str | None = None  # "__cuda"
    releases: tuple[CondaRelease, ...] = ()  # newest first
    source: str = ""
    note: str | None = None


@dataclass(frozen=True)
class L4tRow:
    """An L4T release and the JetPack (and CUDA) it ships."""

    l4t: str  # "36.4.3"
    jetpack: str  # "6.2"
    cuda: str | None  # JetPack's default CUDA; None where no source gives it
    source: str


@dataclass(frozen=True)
class ApuRow:
    """An AMD gfx target known to be an integrated GPU (APU)."""

    gfx: str
    name: str
    source: str


@dataclass(frozen=True)
class IntelFamily:
    """An Intel GPU family by PCI device id: discrete or not, and whether PyTorch's XPU build targets it."""

    family: str  # "DG2"
    name: str  # "Arc A-series (Alchemist)"
    discrete: bool
    xpu: bool  # listed among the XPU build's supported GPUs
    device_ids: tuple[str, ...]  # "0x56a0", lower case
    source: str


@dataclass(frozen=True)
class Fp32Lanes:
    """FP32 fused multiply-add results per clock per SM for a compute capability (peak = SMs x lanes x 2 x clock)."""

    cc: str
    lanes: int
    source: str


@dataclass(frozen=True)
class Threshold:
    """A version a platform feature needs: ``macos.rdma_over_thunderbolt`` -> ``26.2``."""

    name: str
    min_version: str
    source: str
    note: str | None = None


@dataclass(frozen=True)
class Matrix:
    releases: tuple[Release, ...]  # newest first
    cuda_versions: dict[str, CudaRow] = field(default_factory=dict, hash=False)
    gpus: dict[str, str] = field(default_factory=dict, hash=False)  # normalised name -> cc
    gpu_rows: tuple[GpuRow, ...] = ()
    rocm_overrides: dict[str, RocmOverride] = field(default_factory=dict, hash=False)
    jetson: tuple[JetsonRow, ...] = ()
    peaks: dict[str, Peak] = field(default_factory=dict, hash=False)
    indexes: dict[str, IndexRow] = field(default_factory=dict, hash=False)
    files: tuple[str, ...] = ()
    l4t_releases: dict[str, L4tRow] = field(default_factory=dict, hash=False)
    rocm_apus: dict[str, ApuRow] = field(default_factory=dict, hash=False)
    intel_families: tuple[IntelFamily, ...] = ()
    fp32_lanes: dict[str, Fp32Lanes] = field(default_factory=dict, hash=False)
    thresholds: dict[str, Threshold] = field(default_factory=dict, hash=False)
    mirrors: tuple[MirrorRow, ...] = ()
    pypi_defaults: tuple[PypiDefault, ...] = ()
    conda: CondaInfo | None = None

    # ------------------------------------------------------------------ look-ups

    def jetpack_for(self, l4t: str | None) -> L4tRow | None:
        """The JetPack row of an L4T release ("32.3.1"; "32.5" is read as "32.5.0")."""
        if not l4t:
            return None
        parts = l4t.strip().split(".")
        while len(parts) < 3:
            parts.append("0")
        return self.l4t_releases.get(".".join(parts[:3]))

    def apu(self, gfx: str | None) -> ApuRow | None:
        """The APU row of a gfx target ("gfx1036", feature suffixes ignored), None for a discrete or unknown one."""
        if not gfx:
            return None
        return self.rocm_apus.get(gfx.split(":", 1)[0].strip().lower())

    def intel_family(self, device_id: str | None) -> IntelFamily | None:
        """The Intel GPU family of a PCI device id ("0x56a0"), None when the matrix does not list it."""
        try:
            key = f"0x{int(device_id or '', 16):04x}"
        except ValueError:
            return None
        return next((f for f in self.intel_families if key in f.device_ids), None)

    def threshold(self, name: str) -> Threshold | None:
        return self.thresholds.get(name)

    def mirror(self, name: str) -> MirrorRow | None:
        return next((m for m in self.mirrors if m.name == name.strip().lower()), None)

    def pypi_default(self, torch_version: str | Version, platform: str) -> PypiDefault | None:
        """The PyPI default-build row for a torch version ("2.13.0" -> the "2.13" row) and platform."""
        try:
            v = torch_version if isinstance(torch_version, Version) else Version(str(torch_version).split("+", 1)[0])
        except InvalidVersion:
            return None
        minor = f"{v.major}.{v.minor}"
        return next((r for r in self.pypi_defaults if r.torch == minor and r.platform == platform), None)

    def release(self, version: str | Version) -> Release | None:
        """The release row for ``version`` ("2.9.0" gives 2.9.1's row with 2.9.0's pairings); local suffix ignored."""
        try:
            v = version if isinstance(version, Version) else Version(str(version).split("+", 1)[0])
        except InvalidVersion:
            return None
        if not isinstance(version, Version) and len(str(version).split("+", 1)[0].split(".")) == 2:
            # "2.9" means the newest patch of 2.9
            for r in self.releases:
                if r.minor == (v.major, v.minor):
                    return r
            return None
        for r in self.releases:
            if r.version == v:
                return r
        for r in self.releases:
            for p in r.patches:
                if p.version == v:
                    return dataclasses.replace(
                        r,
                        version=p.version,
                        torchvision=p.torchvision,
                        torchaudio=p.torchaudio,
                        triton=p.triton,
                        patches=(),
                    )
        return None

    def variant(self, torch_version: str | Version, variant_name: str) -> Variant | None:
        r = self.release(torch_version)
        return r.variant(variant_name) if r else None

    def index_url(self, name: str = "pytorch") -> str:
        """The URL of the index ``name`` (``indexes:`` in the matrix): ``"pytorch"`` is the base that variant
        indexes hang under (``<url>/cu126``), ``"pypi"`` the default index. No trailing slash.

        :raises MatrixError: the matrix names no such index.
        """
        row = self.indexes.get(name)
        if row is None:
            raise MatrixError(f"compat matrix: no {name!r} index in indexes: (files: {', '.join(self.files) or 'none'}).")
        return row.url.rstrip("/")

    def newest_release_for(self, os_: str, arch: str) -> Release | None:
        """The newest release with any build for the platform family (``"macos"``, ``"x86_64"``), or None."""
        for r in self.releases:  # newest first
            for v in r.variants:
                if any(parse_platform(t)[:2] == (os_, arch) for t in v.platforms):
                    return r
        return None

    def paired(self, torch_version: str | Version) -> tuple[str | None, str | None]:
        """(torchvision, torchaudio) versions paired with ``torch_version``; None where unknown."""
        r = self.release(torch_version)
        return (r.torchvision, r.torchaudio) if r else (None, None)

    def gpu_compute_capability(self, name: str | None) -> str | None:
        """Compute capability of a GPU by its marketing name ("NVIDIA GeForce RTX 4090" -> "8.9"), or None."""
        if not name:
            return None
        key = normalise_gpu_name(name)
        if not key:
            return None
        if key in self.gpus:
            return self.gpus[key]
        best: str | None = None
        for k in self.gpus:
            if key.startswith(k) and (len(key) == len(k) or key[len(k)] in " -_/(") and (best is None or len(k) > len(best)):
                best = k
        return self.gpus[best] if best else None

    def cuda_row(self, cuda: str | None) -> CudaRow | None:
        if not cuda:
            return None
        if cuda in self.cuda_versions:
            return self.cuda_versions[cuda]
        mm = ".".join(cuda.split(".")[:2])
        return self.cuda_versions.get(mm)

    def rocm_override(self, gfx: str) -> RocmOverride | None:
        return self.rocm_overrides.get(gfx.split(":", 1)[0].lower())

    def jetson_row(self, l4t: str | None, jetpack: str | None = None) -> JetsonRow | None:
        """The Jetson row for an L4T release ("36.4.3") or, failing that, a JetPack version ("6.2")."""
        best: JetsonRow | None = None
        best_len = -1
        if l4t:
            for row in self.jetson:
                for prefix in row.l4t:
                    if (l4t == prefix or l4t.startswith(prefix + ".")) and len(prefix) > best_len:
                        best, best_len = row, len(prefix)
        if best is None and jetpack:
            major = jetpack.split(".", 1)[0]
            for row in self.jetson:
                if row.jetpack == major:
                    return row
        return best

    def peak(self, gpu_name: str | None) -> Peak | None:
        if not gpu_name:
            return None
        key = normalise_gpu_name(gpu_name)
        if key in self.peaks:
            return self.peaks[key]
        for k in sorted(self.peaks, key=len, reverse=True):
            # a prefix on a word boundary: "l4" must not claim "l40"
            if key.startswith(k) and not key[len(k) : len(k) + 1].isalnum():
                return self.peaks[k]
        return None

    def to_data(self, torch: str | None = None) -> dict[str, Any]:
        """Plain JSON-ready data (for ``matrix show --json``); one release when ``torch`` is given."""
        from stackdoctor.facts import to_data

        rels = self.releases
        if torch is not None:
            r = self.release(torch)
            rels = (r,) if r else ()

        def rel(r: Release) -> dict[str, Any]:
            d = {f.name: to_data(getattr(r, f.name)) for f in dataclasses.fields(r) if f.name not in ("line", "version", "patches")}
            d["version"] = str(r.version)
            d["patches"] = [
                {"version": str(p.version), "torchvision": p.torchvision, "torchaudio": p.torchaudio, "triton": p.triton}
                for p in r.patches
            ]
            for v in d["variants"]:
                v.pop("line", None)
            return d

        out: dict[str, Any] = {"schema": SCHEMA, "files": list(self.files), "releases": [rel(r) for r in rels]}
        if torch is None:
            out["cuda"] = {k: to_data(v) for k, v in self.cuda_versions.items()}
            out["gpus"] = [to_data(g) for g in self.gpu_rows]
            out["rocm_overrides"] = {k: to_data(v) for k, v in self.rocm_overrides.items()}
            out["jetson"] = [to_data(j) for j in self.jetson]
            out["peaks"] = {k: to_data(v) for k, v in self.peaks.items()}
            out["indexes"] = {k: to_data(v) for k, v in self.indexes.items()}
            out["mirrors"] = [to_data(m) for m in self.mirrors]
            out["pypi_default"] = [to_data(d) for d in self.pypi_defaults]
            out["conda"] = to_data(self.conda)
            # the smaller tables too, under their document keys: `matrix show --json` shows every table
            out["l4t_releases"] = {k: to_data(v) for k, v in self.l4t_releases.items()}
            out["rocm_apus"] = {k: to_data(v) for k, v in self.rocm_apus.items()}
            out["intel_gpus"] = [to_data(f) for f in self.intel_families]
            out["fp32_lanes_per_sm"] = {k: to_data(v) for k, v in self.fp32_lanes.items()}
            out["thresholds"] = {k: to_data(v) for k, v in self.thresholds.items()}
        return out


# ---------------------------------------------------------------------------- pure helpers


# kind -> the pattern of its variants' names, for a plug-in accelerator's own build kind
# (stackdoctor.accelerators registers it: the matrix itself knows no accelerator)
PLUGIN_VARIANT_KINDS: dict[str, re.Pattern[str]] = {}


def register_variant_kind(kind: str, pattern: str) -> None:
    """Make ``kind`` a variant kind whose variants' names match ``pattern`` (a plug-in accelerator's builds)."""
    PLUGIN_VARIANT_KINDS[kind] = re.compile(pattern)


def variant_kind(name: str) -> tuple[str, str | None, str | None] | None:
    """("cuda", "13.0", None) for "cu130"; ("rocm", None, "6.2.4") for "rocm6.2.4"; None when not a variant name."""
    m = _VARIANT_RE.match(name)
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


def _cc_tuple(cc: str) -> tuple[int, int] | None:
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
_TEGRA = {(5, 3), (6, 2), (7, 2), (8, 7), (10, 1)}


def _sass_runs(code: tuple[int, int], suffix: str, dev: tuple[int, int]) -> bool:
    if code == dev:
        return True
    if suffix == "a":  # arch-specific (sm_90a): that exact GPU only
        return False
    if code == (10, 1):  # sm_101 cubins also run on Thor renamed sm_110
        return dev == (11, 0)
    if code in _TEGRA or dev in _TEGRA:
        return False
    return code[0] == dev[0] and dev[1] >= code[1]  # same major, same-or-newer minor ("f" family: the same rule)


def arch_match(arch_list: Iterable[str], cc: str) -> str | None:
    """How a GPU of capability ``cc`` runs a build with ``arch_list``: "sass", "ptx" (JIT) or None.

    A cubin ``sm_XY`` runs on ``X.Z`` for Z >= Y (same major; not on the Tegra parts 5.3/6.2/7.2/8.7, nor
    sm_100 on Thor); ``sm_XYa`` only on exactly X.Y; ``compute_XY`` (or ``+PTX``) on any newer GPU by JIT
    (``compute_XYa`` only on X.Y).
    """
    dev = _cc_tuple(cc)
    if dev is None:
        return None
    ptx = False
    for entry in arch_list:
        m = _ARCH_RE.match(entry.strip())
        if not m:
            continue
        num = m.group("num")
        code = (int(num[:-1]), int(num[-1]))
        suffix = m.group("suffix")
        if m.group("kind") == "sm":
            if _sass_runs(code, suffix, dev):
                return "sass"
            if m.group("ptx") and (code == dev if suffix == "a" else dev >= code):
                ptx = True
        elif code == dev if suffix == "a" else dev >= code:
            ptx = True
    return "ptx" if ptx else None


def arch_runs(arch_list: Iterable[str], cc: str) -> bool:
    """True when a GPU of compute capability ``cc`` ("8.9" or "sm_89") can run a build with ``arch_list``."""
    return arch_match(arch_list, cc) is not None


def gfx_supported(variant: Variant, gfx: str) -> bool:
    """True when the ROCm ``variant`` carries code objects for ``gfx`` (feature suffixes like ":xnack-" ignored)."""
    return gfx.split(":", 1)[0].lower() in variant.gfx


def driver_meets(cuda_row: CudaRow, driver: str | None, windows: bool) -> str:
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


# ---------------------------------------------------------------------------- loading


class _LDict(dict):  # type: ignore[type-arg]
    line: int = 0
    key_lines: dict[str, int]


class _LList(list):  # type: ignore[type-arg]
    line: int = 0


MAX_EXPANDED_NODES = 200_000


def _make_loader(file: str) -> Any:
    import yaml

    base = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader

    class Loader(base):  # type: ignore[valid-type,misc]
        pass

    def construct_mapping(loader: Any, node: Any) -> _LDict:
        loader.flatten_mapping(node)
        d = _LDict()
        d.line = node.start_mark.line + 1
        d.key_lines = {}
        for k_node, v_node in node.value:
            key = loader.construct_object(k_node, deep=True)
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise MatrixError(f"compat matrix {file} line {k_node.start_mark.line + 1}: a mapping key must be a plain value.")
            key = str(key)
            d[key] = loader.construct_object(v_node, deep=True)
            d.key_lines[key] = v_node.start_mark.line + 1
        return d

    def construct_sequence(loader: Any, node: Any) -> _LList:
        lst = _LList(loader.construct_object(c, deep=True) for c in node.value)
        lst.line = node.start_mark.line + 1
        return lst

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, construct_sequence)
    return Loader


def _check_expansion(node: Any, file: str) -> None:
    """Refuse alias bombs: the document's size with every alias expanded must stay small.

    Aliases make the node graph a DAG; its expanded size is computed once per distinct node (memoised),
    so a billion-laughs document is measured in microseconds, never expanded. A recursive alias is refused.
    """
    sizes: dict[int, int] = {}
    active: set[int] = set()
    aliases = 0

    def size(n: Any) -> int:
        nonlocal aliases
        key = id(n)
        if key in sizes:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise MatrixError(
                    f"compat matrix {file} line {n.start_mark.line + 1}: more than {MAX_ALIASES} YAML alias references "
                    "(refusing a possible alias bomb)."
                )
            return sizes[key]
        if key in active:
            raise MatrixError(f"compat matrix {file} line {n.start_mark.line + 1}: a YAML alias refers to itself (recursive document).")
        value = n.value
        if isinstance(value, list):
            active.add(key)
            total = 1
            for child in value:
                if isinstance(child, tuple):
                    total += size(child[0]) + size(child[1])
                else:
                    total += size(child)
                if total > MAX_EXPANDED_NODES:
                    raise MatrixError(
                        f"compat matrix {file} line {n.start_mark.line + 1}: the document expands to more than "
                        f"{MAX_EXPANDED_NODES} values through YAML aliases (refusing a possible alias bomb)."
                    )
            active.discard(key)
        else:
            total = 1
        sizes[key] = total
        return total

    size(node)


def _parse_yaml(text: str, file: str) -> Any:
    import yaml

    if len(text) > MAX_DOCUMENT_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_DOCUMENT_BYTES:
        raise MatrixError(f"compat matrix {file} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.")
    loader = _make_loader(file)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_expansion(node, file)
        return loader.construct_document(node)
    except MatrixError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        problem = (exc.problem or exc.context or "invalid YAML").strip().rstrip(".")
        raise MatrixError(f"compat matrix {file} line {line}: malformed YAML ({problem}).") from None
    except yaml.YAMLError as exc:
        raise MatrixError(f"compat matrix {file} line 1: malformed YAML ({str(exc).splitlines()[0] if str(exc) else 'error'}).") from None
    except RecursionError:
        raise MatrixError(f"compat matrix {file} line 1: YAML nested too deeply.") from None
    finally:
        loader.dispose()


class _Ctx:
    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, line: int | None, where: str, what: str) -> MatrixError:
        return MatrixError(f"compat matrix {self.file} line {line or 1}: {where}: {what}.")

    def line_of(self, d: Any, key: str | None = None) -> int:
        if isinstance(d, _LDict):
            if key is not None and key in d.key_lines:
                return d.key_lines[key]
            return d.line
        return getattr(d, "line", 1) or 1

    def mapping(self, value: Any, where: str, line: int) -> _LDict:
        if not isinstance(value, dict):
            raise self.fail(line, where, f"expected a mapping, got {_tname(value)}")
        return value  # type: ignore[return-value]

    def seq(self, value: Any, where: str, line: int) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(line, where, f"expected a list, got {_tname(value)}")
        return value

    def text(self, d: _LDict, key: str, where: str, *, required: bool = False) -> str | None:
        if key not in d or d[key] is None:
            if required:
                raise self.fail(self.line_of(d), f"{where}.{key}", "missing (every row needs it)")
            return None
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"expected a string, got {_tname(v)}")
        s = str(v).strip()
        if required and not s:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", "must not be empty")
        return s

    def strings(self, d: _LDict, key: str, where: str) -> tuple[str, ...]:
        if key not in d or d[key] is None:
            return ()
        v = d[key]
        if not isinstance(v, list):
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"expected a list, got {_tname(v)}")
        out = []
        for i, item in enumerate(v):
            if isinstance(item, bool) or not isinstance(item, (str, int, float)):
                raise self.fail(self.line_of(d, key), f"{where}.{key}[{i}]", f"expected a string, got {_tname(item)}")
            out.append(str(item).strip())
        return tuple(out)

    def version(self, d: _LDict, key: str, where: str) -> Version:
        s = self.text(d, key, where, required=True)
        assert s is not None
        try:
            v = Version(s)
        except InvalidVersion:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"unparsable version {s!r}") from None
        if v.local:
            raise self.fail(self.line_of(d, key), f"{where}.{key}", f"version {s!r} must not carry a local suffix (the variant says that)")
        return v


def _tname(v: Any) -> str:
    if v is None:
        return "nothing"
    return {dict: "a mapping", _LDict: "a mapping", list: "a list", _LList: "a list", str: "a string", bool: "true/false"}.get(
        type(v), type(v).__name__
    )


_RELEASE_KEYS = {
    "version", "variants", "torchvision", "torchaudio", "triton", "min_macos", "mps_min_macos", "manylinux_glibc", "pythons",
    "torch_only_pythons", "python_platforms", "released", "source", "derived_from", "unknown", "patches", "note",
    "requires_python", "triton_requirement", "learned", "paired_by_range",
}
_VARIANT_KEYS = {
    "name", "kind", "platforms", "pythons", "arch_list", "arch_by_platform", "gfx", "source", "derived_from", "unknown", "note",
    "learned", "index", "runtime",
}
_TOP_KEYS = {
    "schema", "releases", "cuda", "gpus", "rocm_overrides", "jetson", "peaks", "indexes", "note",
    "l4t_releases", "rocm_apus", "intel_gpus", "fp32_lanes_per_sm", "thresholds",
    "mirrors", "pypi_default", "conda",
}


def _check_keys(ctx: _Ctx, d: _LDict, allowed: set[str], where: str) -> None:
    for k in d:
        if k not in allowed:
            raise ctx.fail(ctx.line_of(d, k), f"{where}.{k}", f"unknown field (expected one of {', '.join(sorted(allowed))})")


def _pythons(ctx: _Ctx, d: _LDict, key: str, where: str) -> tuple[str, ...]:
    vals = ctx.strings(d, key, where)
    for p in vals:
        if not _PY_RE.match(p):
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable Python version {p!r} (expected like \"3.12\" or \"3.13t\")")
    return vals


def _arch_list(ctx: _Ctx, values: Sequence[str], line: int, where: str) -> tuple[str, ...]:
    out: list[str] = []
    for a in values:
        m = _ARCH_RE.match(a)
        if not m:
            raise ctx.fail(line, where, f"unparsable CUDA arch {a!r} (expected like \"sm_90\", \"sm_120+PTX\" or \"compute_90\")")
        base = f"{m.group('kind')}_{m.group('num')}{m.group('suffix')}"
        out.append(base)
        if m.group("ptx"):
            out.append(f"compute_{m.group('num')}{m.group('suffix')}")
    return tuple(out)


def _variant(ctx: _Ctx, raw: Any, where: str, line: int, rel_pythons: tuple[str, ...], rel_source: str) -> Variant:
    d = ctx.mapping(raw, where, line)
    _check_keys(ctx, d, _VARIANT_KEYS, where)
    name = ctx.text(d, "name", where, required=True)
    assert name is not None
    kind = variant_kind(name)
    if kind is None:
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name", f"unknown variant kind {name!r} (expected cpu, cuXYZ, rocmX.Y[.Z] or xpu)")
    declared = ctx.text(d, "kind", where)
    if declared is not None and declared != kind[0]:
        if declared not in (*VARIANT_KINDS, *PLUGIN_VARIANT_KINDS):
            raise ctx.fail(ctx.line_of(d, "kind"), f"{where}.kind", f"unknown variant kind {declared!r} (expected {', '.join((*VARIANT_KINDS, *PLUGIN_VARIANT_KINDS))})")
        raise ctx.fail(ctx.line_of(d, "kind"), f"{where}.kind", f"{declared!r} does not match the name {name!r}")
    source = ctx.text(d, "source", f"{where}", required=True)
    assert source is not None
    platforms = ctx.strings(d, "platforms", where)
    for p in platforms:
        if parse_platform(p)[0] == "unknown":
            raise ctx.fail(ctx.line_of(d, "platforms"), f"{where}.platforms", f"unknown platform tag {p!r}")
    arch = _arch_list(ctx, ctx.strings(d, "arch_list", where), ctx.line_of(d, "arch_list"), f"{where}.arch_list")
    by_platform: dict[str, tuple[str, ...]] = {}
    if d.get("arch_by_platform") is not None:
        bp = ctx.mapping(d["arch_by_platform"], f"{where}.arch_by_platform", ctx.line_of(d, "arch_by_platform"))
        for tag in bp:
            if parse_platform(tag)[0] == "unknown":
                raise ctx.fail(ctx.line_of(bp, tag), f"{where}.arch_by_platform", f"unknown platform tag {tag!r}")
            by_platform[tag] = _arch_list(ctx, ctx.strings(bp, tag, f"{where}.arch_by_platform"), ctx.line_of(bp, tag), f"{where}.arch_by_platform.{tag}")
    gfx = tuple(g.lower() for g in ctx.strings(d, "gfx", where))
    for g in gfx:
        if not _GFX_RE.match(g):
            raise ctx.fail(ctx.line_of(d, "gfx"), f"{where}.gfx", f"unparsable gfx target {g!r}")
    if kind[0] != "cuda" and (arch or by_platform):
        raise ctx.fail(ctx.line_of(d, "arch_list"), f"{where}.arch_list", f"only CUDA variants carry a CUDA arch list, not {name!r}")
    if kind[0] != "rocm" and gfx:
        raise ctx.fail(ctx.line_of(d, "gfx"), f"{where}.gfx", f"only ROCm variants carry a gfx list, not {name!r}")
    pythons = _pythons(ctx, d, "pythons", where) or rel_pythons
    index = ctx.text(d, "index", where)
    if index is not None and index != "pypi" and not re.match(r"^(https?|file)://\S+$", index):
        raise ctx.fail(ctx.line_of(d, "index"), f"{where}.index", f"must be \"pypi\" (a label-less build of a PyPI-shaped index) or the URL of the index that serves it, not {index!r}")
    runtime: dict[str, str] = {}
    if d.get("runtime") is not None:
        rm = ctx.mapping(d["runtime"], f"{where}.runtime", ctx.line_of(d, "runtime"))
        for dist in rm:
            runtime[str(dist)] = ctx.text(rm, dist, f"{where}.runtime") or ""
    return Variant(
        name=name,
        kind=kind[0],
        cuda=kind[1],
        rocm=kind[2],
        platforms=platforms,
        pythons=pythons,
        arch_list=arch,
        gfx=gfx,
        source=source,
        unknown=ctx.strings(d, "unknown", where),
        derived_from=ctx.text(d, "derived_from", where),
        arch_by_platform=by_platform,
        line=d.line,
        learned=ctx.text(d, "learned", where),
        index=index,
        runtime=runtime,
    )


def _release(ctx: _Ctx, raw: Any, where: str, line: int) -> Release:
    d = ctx.mapping(raw, where, line)
    _check_keys(ctx, d, _RELEASE_KEYS, where)
    version = ctx.version(d, "version", where)
    where = f"releases[{version}]"
    source = ctx.text(d, "source", where, required=True)
    assert source is not None
    pythons = _pythons(ctx, d, "pythons", where)
    variants: list[Variant] = []
    if d.get("variants") is not None:
        vs = ctx.seq(d["variants"], f"{where}.variants", ctx.line_of(d, "variants"))
        seen: set[str] = set()
        for i, vraw in enumerate(vs):
            v = _variant(ctx, vraw, f"{where}.variants[{i}]", ctx.line_of(vraw) if isinstance(vraw, dict) else ctx.line_of(d, "variants"), pythons, source)
            if v.name in seen:
                raise ctx.fail(v.line, f"{where}.variants[{i}].name", f"variant {v.name!r} listed twice")
            seen.add(v.name)
            variants.append(v)
    patches: list[PatchRow] = []
    if d.get("patches") is not None:
        pm = ctx.mapping(d["patches"], f"{where}.patches", ctx.line_of(d, "patches"))
        for pv, prow in pm.items():
            pl = ctx.line_of(pm, pv)
            try:
                pver = Version(pv)
            except InvalidVersion:
                raise ctx.fail(pl, f"{where}.patches", f"unparsable version {pv!r}") from None
            pd = ctx.mapping(prow, f"{where}.patches.{pv}", pl)
            _check_keys(ctx, pd, {"torchvision", "torchaudio", "triton", "source"}, f"{where}.patches.{pv}")
            patches.append(
                PatchRow(
                    pver,
                    ctx.text(pd, "torchvision", f"{where}.patches.{pv}"),
                    ctx.text(pd, "torchaudio", f"{where}.patches.{pv}"),
                    ctx.text(pd, "triton", f"{where}.patches.{pv}"),
                )
            )
    python_platforms: dict[str, tuple[str, ...]] = {}
    if d.get("python_platforms") is not None:
        pp = ctx.mapping(d["python_platforms"], f"{where}.python_platforms", ctx.line_of(d, "python_platforms"))
        for py in pp:
            if not _PY_RE.match(py):
                raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms", f"unparsable Python version {py!r} (expected like \"3.13t\")")
            tags = ctx.strings(pp, py, f"{where}.python_platforms")
            if not tags:
                raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms.{py}", "expected a non-empty list of platform tags")
            for tag in tags:
                if parse_platform(tag)[0] == "unknown":
                    raise ctx.fail(ctx.line_of(pp, py), f"{where}.python_platforms.{py}", f"unknown platform tag {tag!r}")
            python_platforms[py] = tags
    for key in ("min_macos", "mps_min_macos", "manylinux_glibc"):
        val = ctx.text(d, key, where)
        if val is not None and not re.match(r"^\d+(\.\d+)*$", val):
            raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable version {val!r}")
    for key in ("torchvision", "torchaudio", "triton"):
        val = ctx.text(d, key, where)
        if val is not None:
            try:
                Version(val)
            except InvalidVersion:
                raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable version {val!r}") from None
    return Release(
        version=version,
        variants=tuple(variants),
        torchvision=ctx.text(d, "torchvision", where),
        torchaudio=ctx.text(d, "torchaudio", where),
        triton=ctx.text(d, "triton", where),
        min_macos=ctx.text(d, "min_macos", where),
        mps_min_macos=ctx.text(d, "mps_min_macos", where),
        manylinux_glibc=ctx.text(d, "manylinux_glibc", where),
        pythons=pythons,
        torch_only_pythons=_pythons(ctx, d, "torch_only_pythons", where),
        python_platforms=python_platforms,
        released=ctx.text(d, "released", where),
        source=source,
        derived_from=ctx.text(d, "derived_from", where),
        unknown=ctx.strings(d, "unknown", where),
        patches=tuple(patches),
        line=d.line,
        requires_python=ctx.text(d, "requires_python", where),
        triton_requirement=ctx.text(d, "triton_requirement", where),
        learned=ctx.text(d, "learned", where),
        paired_by_range=ctx.strings(d, "paired_by_range", where),
    )


def _driver(ctx: _Ctx, d: _LDict, key: str, where: str) -> str | None:
    v = ctx.text(d, key, where)
    if v is not None and dotted(v) is None:
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"unparsable driver version {v!r}")
    return v


class _Parsed:
    def __init__(self) -> None:
        self.releases: list[Release] = []
        self.cuda: dict[str, CudaRow] = {}
        self.gpu_rows: list[GpuRow] = []
        self.overrides: dict[str, RocmOverride] = {}
        self.jetson: list[JetsonRow] = []
        self.peaks: dict[str, Peak] = {}
        self.mirrors: list[MirrorRow] = []
        self.pypi_defaults: list[PypiDefault] = []
        self.conda: CondaInfo | None = None
        self.l4t: dict[str, L4tRow] = {}
        self.apus: dict[str, ApuRow] = {}
        self.intel: list[IntelFamily] = []
        self.lanes: dict[str, Fp32Lanes] = {}
        self.thresholds: dict[str, Threshold] = {}
        self.indexes: dict[str, IndexRow] = {}


def _parse_extras(ctx: _Ctx, top: _LDict, out: _Parsed) -> None:
    """The smaller tables: L4T -> JetPack, APU gfx targets, Intel GPU families, FP32 lanes, version thresholds."""
    if top.get("l4t_releases") is not None:
        for i, raw in enumerate(ctx.seq(top["l4t_releases"], "l4t_releases", ctx.line_of(top, "l4t_releases"))):
            where = f"l4t_releases[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "l4t_releases"))
            _check_keys(ctx, d, {"l4t", "jetpack", "cuda", "source", "note"}, where)
            l4t = ctx.text(d, "l4t", where, required=True) or ""
            if not re.match(r"^\d+\.\d+\.\d+$", l4t):
                raise ctx.fail(ctx.line_of(d, "l4t"), f"{where}.l4t", f"unparsable L4T release {l4t!r} (expected like \"36.4.3\")")
            cuda = ctx.text(d, "cuda", where)
            if cuda is not None and not re.match(r"^\d+\.\d+$", cuda):
                raise ctx.fail(ctx.line_of(d, "cuda"), f"{where}.cuda", f"unparsable CUDA version {cuda!r}")
            out.l4t[l4t] = L4tRow(l4t, ctx.text(d, "jetpack", where, required=True) or "", cuda, ctx.text(d, "source", where, required=True) or "")
    if top.get("rocm_apus") is not None:
        am = ctx.mapping(top["rocm_apus"], "rocm_apus", ctx.line_of(top, "rocm_apus"))
        for gfx, raw in am.items():
            where = f"rocm_apus.{gfx}"
            if not _GFX_RE.match(gfx):
                raise ctx.fail(ctx.line_of(am, gfx), where, f"unparsable gfx target {gfx!r}")
            d = ctx.mapping(raw, where, ctx.line_of(am, gfx))
            _check_keys(ctx, d, {"name", "source", "note"}, where)
            out.apus[gfx] = ApuRow(gfx, ctx.text(d, "name", where, required=True) or "", ctx.text(d, "source", where, required=True) or "")
    if top.get("intel_gpus") is not None:
        for i, raw in enumerate(ctx.seq(top["intel_gpus"], "intel_gpus", ctx.line_of(top, "intel_gpus"))):
            where = f"intel_gpus[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "intel_gpus"))
            _check_keys(ctx, d, {"family", "name", "discrete", "xpu", "device_ids", "source", "note"}, where)
            flags = {}
            for key in ("discrete", "xpu"):
                v = d.get(key)
                if not isinstance(v, bool):
                    raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", "expected true or false")
                flags[key] = v
            ids = []
            for did in ctx.strings(d, "device_ids", where):
                try:
                    ids.append(f"0x{int(did, 16):04x}")
                except ValueError:
                    raise ctx.fail(ctx.line_of(d, "device_ids"), f"{where}.device_ids", f"unparsable PCI device id {did!r}") from None
            out.intel.append(
                IntelFamily(
                    ctx.text(d, "family", where, required=True) or "",
                    ctx.text(d, "name", where, required=True) or "",
                    flags["discrete"],
                    flags["xpu"],
                    tuple(ids),
                    ctx.text(d, "source", where, required=True) or "",
                )
            )
    if top.get("fp32_lanes_per_sm") is not None:
        lm = ctx.mapping(top["fp32_lanes_per_sm"], "fp32_lanes_per_sm", ctx.line_of(top, "fp32_lanes_per_sm"))
        for cc, raw in lm.items():
            where = f"fp32_lanes_per_sm.{cc}"
            if _cc_tuple(cc) is None or "." not in cc:
                raise ctx.fail(ctx.line_of(lm, cc), where, f"unparsable compute capability {cc!r} (expected like \"8.9\")")
            d = ctx.mapping(raw, where, ctx.line_of(lm, cc))
            _check_keys(ctx, d, {"lanes", "source", "note"}, where)
            lanes = d.get("lanes")
            if isinstance(lanes, bool) or not isinstance(lanes, int) or lanes <= 0:
                raise ctx.fail(ctx.line_of(d, "lanes"), f"{where}.lanes", f"expected a positive whole number, got {_tname(lanes)}")
            out.lanes[cc] = Fp32Lanes(cc, lanes, ctx.text(d, "source", where, required=True) or "")
    if top.get("thresholds") is not None:
        tm = ctx.mapping(top["thresholds"], "thresholds", ctx.line_of(top, "thresholds"))
        for name, raw in tm.items():
            where = f"thresholds.{name}"
            d = ctx.mapping(raw, where, ctx.line_of(tm, name))
            _check_keys(ctx, d, {"min_version", "source", "note"}, where)
            mv = ctx.text(d, "min_version", where, required=True) or ""
            if not re.match(r"^\d+(\.\d+)*$", mv):
                raise ctx.fail(ctx.line_of(d, "min_version"), f"{where}.min_version", f"unparsable version {mv!r}")
            out.thresholds[name] = Threshold(name, mv, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where))


def _parse_document(data: Any, file: str) -> _Parsed:
    ctx = _Ctx(file)
    out = _Parsed()
    if data is None:
        return out
    top = ctx.mapping(data, "the document", 1)
    _check_keys(ctx, top, _TOP_KEYS, "top level")
    schema = ctx.text(top, "schema", "top level")
    if schema is not None and schema != SCHEMA:
        raise ctx.fail(ctx.line_of(top, "schema"), "schema", f"unsupported schema {schema!r} (this stackdoctor reads {SCHEMA})")
    if top.get("releases") is not None:
        for i, raw in enumerate(ctx.seq(top["releases"], "releases", ctx.line_of(top, "releases"))):
            out.releases.append(_release(ctx, raw, f"releases[{i}]", ctx.line_of(raw) if isinstance(raw, dict) else ctx.line_of(top, "releases")))
    if top.get("cuda") is not None:
        cm = ctx.mapping(top["cuda"], "cuda", ctx.line_of(top, "cuda"))
        for ver, raw in cm.items():
            where = f"cuda.{ver}"
            if not re.match(r"^\d+\.\d+$", ver):
                raise ctx.fail(ctx.line_of(cm, ver), where, f"unparsable CUDA version {ver!r} (expected like \"12.6\")")
            d = ctx.mapping(raw, where, ctx.line_of(cm, ver))
            _check_keys(
                ctx, d,
                {"min_driver_linux", "min_driver_windows", "minor_compat_floor_linux", "minor_compat_floor_windows", "source", "derived_from", "unknown", "note"},
                where,
            )
            src = ctx.text(d, "source", where, required=True)
            out.cuda[ver] = CudaRow(
                version=ver,
                min_driver_linux=_driver(ctx, d, "min_driver_linux", where),
                min_driver_windows=_driver(ctx, d, "min_driver_windows", where),
                minor_compat_floor_linux=_driver(ctx, d, "minor_compat_floor_linux", where),
                minor_compat_floor_windows=_driver(ctx, d, "minor_compat_floor_windows", where),
                source=src or "",
                derived_from=ctx.text(d, "derived_from", where),
                unknown=ctx.strings(d, "unknown", where),
            )
    if top.get("gpus") is not None:
        for i, raw in enumerate(ctx.seq(top["gpus"], "gpus", ctx.line_of(top, "gpus"))):
            where = f"gpus[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "gpus"))
            _check_keys(ctx, d, {"cc", "names", "source", "note"}, where)
            cc = ctx.text(d, "cc", where, required=True)
            assert cc is not None
            if _cc_tuple(cc) is None or "." not in cc:
                raise ctx.fail(ctx.line_of(d, "cc"), f"{where}.cc", f"unparsable compute capability {cc!r} (expected like \"8.9\")")
            src = ctx.text(d, "source", where, required=True) or ""
            for n in ctx.strings(d, "names", where):
                out.gpu_rows.append(GpuRow(n, cc, src))
    if top.get("rocm_overrides") is not None:
        om = ctx.mapping(top["rocm_overrides"], "rocm_overrides", ctx.line_of(top, "rocm_overrides"))
        for gfx, raw in om.items():
            where = f"rocm_overrides.{gfx}"
            if not _GFX_RE.match(gfx):
                raise ctx.fail(ctx.line_of(om, gfx), where, f"unparsable gfx target {gfx!r}")
            d = ctx.mapping(raw, where, ctx.line_of(om, gfx))
            _check_keys(ctx, d, {"value", "as_gfx", "source", "note"}, where)
            value = ctx.text(d, "value", where, required=True) or ""
            if not re.match(r"^\d+\.\d+\.\d+$", value):
                raise ctx.fail(ctx.line_of(d, "value"), f"{where}.value", f"unparsable override {value!r} (expected like \"10.3.0\")")
            as_gfx = ctx.text(d, "as_gfx", where, required=True) or ""
            out.overrides[gfx] = RocmOverride(gfx, value, as_gfx, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where))
    if top.get("jetson") is not None:
        for i, raw in enumerate(ctx.seq(top["jetson"], "jetson", ctx.line_of(top, "jetson"))):
            where = f"jetson[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "jetson"))
            _check_keys(
                ctx, d,
                {"jetpack", "l4t", "cuda", "variant", "index_url", "torch", "pythons", "gpu_cc", "use_pytorch_index", "note", "source", "unknown"},
                where,
            )
            upi = d.get("use_pytorch_index", False)
            if not isinstance(upi, bool):
                raise ctx.fail(ctx.line_of(d, "use_pytorch_index"), f"{where}.use_pytorch_index", "expected true or false")
            torch_versions = ctx.strings(d, "torch", where)
            for tv in torch_versions:
                try:
                    Version(tv)
                except InvalidVersion:
                    raise ctx.fail(ctx.line_of(d, "torch"), f"{where}.torch", f"unparsable version {tv!r}") from None
            out.jetson.append(
                JetsonRow(
                    jetpack=ctx.text(d, "jetpack", where, required=True) or "",
                    l4t=ctx.strings(d, "l4t", where),
                    cuda=ctx.text(d, "cuda", where),
                    variant=ctx.text(d, "variant", where),
                    index_url=ctx.text(d, "index_url", where),
                    torch=torch_versions,
                    pythons=_pythons(ctx, d, "pythons", where),
                    gpu_cc=ctx.strings(d, "gpu_cc", where),
                    use_pytorch_index=upi,
                    note=ctx.text(d, "note", where),
                    source=ctx.text(d, "source", where, required=True) or "",
                    unknown=ctx.strings(d, "unknown", where),
                )
            )
    if top.get("peaks") is not None:
        for i, raw in enumerate(ctx.seq(top["peaks"], "peaks", ctx.line_of(top, "peaks"))):
            where = f"peaks[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "peaks"))
            _check_keys(ctx, d, {"gpu", "fp32", "tf32", "bf16", "fp16", "source", "note"}, where)
            gpu = ctx.text(d, "gpu", where, required=True) or ""
            nums: dict[str, float | None] = {}
            for k in ("fp32", "tf32", "bf16", "fp16"):
                v = d.get(k)
                if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))):
                    raise ctx.fail(ctx.line_of(d, k), f"{where}.{k}", f"expected a number of TFLOP/s, got {_tname(v)}")
                nums[k] = float(v) if v is not None else None
            out.peaks[normalise_gpu_name(gpu)] = Peak(
                gpu, nums["fp32"], nums["bf16"], nums["fp16"], ctx.text(d, "source", where, required=True) or "", tf32=nums["tf32"]
            )
    if top.get("indexes") is not None:
        im = ctx.mapping(top["indexes"], "indexes", ctx.line_of(top, "indexes"))
        for name, raw in im.items():
            where = f"indexes.{name}"
            if not _INDEX_NAME_RE.match(name):
                raise ctx.fail(ctx.line_of(im, name), where, f"unparsable index name {name!r} (expected like \"pytorch\")")
            d = ctx.mapping(raw, where, ctx.line_of(im, name))
            _check_keys(ctx, d, {"url", "source", "note"}, where)
            url = ctx.text(d, "url", where, required=True) or ""
            if not re.match(r"^https?://[^\s/]+(/\S*)?$", url):
                raise ctx.fail(ctx.line_of(d, "url"), f"{where}.url", f"expected an http(s) URL, got {url!r}")
            out.indexes[name] = IndexRow(name, url.rstrip("/"), ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where))
    _parse_extras(ctx, top, out)
    _parse_sources_tables(ctx, top, out)
    return out


def _merge_variant(base: Variant, over: Variant) -> Variant:
    """A learned variant over a known one of the same name: what the artifacts say wins field by field (their
    arch list, Pythons, runtime pins), platforms add up, and both sources are kept (the known one still
    answers for the platforms the learned index does not serve)."""
    # a platform family the known row has keeps the known tag: its glibc / macOS floor is sourced, while a wheel's
    # tag can claim less (PyPI's torch 2.6.0 is tagged manylinux1 but needs glibc 2.28)
    fams = {parse_platform(t)[:2] for t in base.platforms}
    platforms = base.platforms + tuple(t for t in dict.fromkeys(over.platforms) if parse_platform(t)[:2] not in fams)
    by_platform = {**base.arch_by_platform, **over.arch_by_platform}
    arch = over.arch_list or base.arch_list
    source = over.source if over.source == base.source else f"{over.source}; {base.source}"
    return dataclasses.replace(
        base,
        platforms=platforms,
        pythons=tuple(dict.fromkeys(base.pythons + over.pythons)) if over.pythons else base.pythons,
        arch_list=arch,
        arch_by_platform=by_platform,
        gfx=over.gfx or base.gfx,
        source=source,
        unknown=tuple(u for u in base.unknown if not (over.arch_list and any(w in u.lower() for w in ("not verified", "unverified", "arch list")))) + tuple(
            u for u in over.unknown if u not in base.unknown and not (base.arch_list and "arch list" in u)
        ),
        derived_from=over.derived_from or base.derived_from,
        learned=over.learned,
        index=None,  # the known build's index serves it; the learned index is one more witness
        runtime={**base.runtime, **over.runtime},
    )


def _merge_release(base: Release, over: Release) -> Release:
    """A user release row over an embedded one: given fields replace, variants merge by name (a learned
    variant merges into the known one field by field: :func:`_merge_variant`)."""
    overs = {v.name: v for v in over.variants}
    # the known variants keep their order (a learned one merged in place), new ones follow
    variants = tuple(
        (_merge_variant(v, overs[v.name]) if overs[v.name].learned else overs[v.name]) if v.name in overs else v for v in base.variants
    ) + tuple(v for v in over.variants if v.name not in {b.name for b in base.variants})
    if over.learned and base.source and base.source != over.source:
        over = dataclasses.replace(over, source=f"{over.source}; {base.source}")
    unknown = over.unknown or base.unknown
    if over.learned:  # what the artifacts now say is no longer unknown
        said = [k for k, given in (("triton", over.triton or over.triton_requirement), ("torchvision", over.torchvision),
                                   ("torchaudio", over.torchaudio), ("pythons", over.pythons), ("3.", over.pythons)) if given]
        unknown = tuple(dict.fromkeys(over.unknown + tuple(u for u in base.unknown if not any(u.lower().startswith(k) for k in said))))
    # a pairing a companion's range implies yields to a hand-kept one (an exact pin or a release's own word)
    tv = base.torchvision if "torchvision" in over.paired_by_range and base.torchvision else over.torchvision or base.torchvision
    ta = base.torchaudio if "torchaudio" in over.paired_by_range and base.torchaudio else over.torchaudio or base.torchaudio
    return Release(
        version=over.version,
        variants=variants,
        torchvision=tv,
        torchaudio=ta,
        triton=over.triton or base.triton,
        min_macos=over.min_macos or base.min_macos,
        mps_min_macos=over.mps_min_macos or base.mps_min_macos,
        manylinux_glibc=over.manylinux_glibc or base.manylinux_glibc,
        pythons=over.pythons or base.pythons,
        torch_only_pythons=over.torch_only_pythons or base.torch_only_pythons,
        python_platforms=over.python_platforms or base.python_platforms,
        released=over.released or base.released,
        source=over.source,
        derived_from=over.derived_from or base.derived_from,
        unknown=unknown,
        patches=over.patches or base.patches,
        line=over.line,
        requires_python=over.requires_python or base.requires_python,
        triton_requirement=over.triton_requirement or base.triton_requirement,
        learned=over.learned or base.learned,
        paired_by_range=tuple(c for c in over.paired_by_range if not getattr(base, c)),
    )


def _patch_base(releases: dict[Version, Release], version: Version) -> Release | None:
    """The row a patch version lives in (``patches:`` of a newer row of its minor), as that version's own row."""
    for r in releases.values():
        for p in r.patches:
            if p.version == version:
                return dataclasses.replace(r, version=p.version, torchvision=p.torchvision, torchaudio=p.torchaudio, triton=p.triton, patches=())
    return None


def _build(parts: Sequence[tuple[str, _Parsed]]) -> Matrix:
    releases: dict[Version, Release] = {}
    cuda: dict[str, CudaRow] = {}
    gpu_rows: dict[str, GpuRow] = {}
    overrides: dict[str, RocmOverride] = {}
    jetson: dict[str, JetsonRow] = {}
    peaks: dict[str, Peak] = {}
    mirrors: dict[str, MirrorRow] = {}
    pypi_defaults: dict[tuple[str, str], PypiDefault] = {}
    conda: CondaInfo | None = None
    l4t: dict[str, L4tRow] = {}
    apus: dict[str, ApuRow] = {}
    intel: dict[str, IntelFamily] = {}
    lanes: dict[str, Fp32Lanes] = {}
    thresholds: dict[str, Threshold] = {}
    indexes: dict[str, IndexRow] = {}
    for _file, p in parts:
        l4t.update(p.l4t)
        apus.update(p.apus)
        intel.update({f.family: f for f in p.intel})
        lanes.update(p.lanes)
        thresholds.update(p.thresholds)
        for r in p.releases:
            base = releases.get(r.version) or (_patch_base(releases, r.version) if r.learned else None)
            releases[r.version] = _merge_release(base, r) if base is not None else r
        cuda.update(p.cuda)
        for g in p.gpu_rows:
            gpu_rows[normalise_gpu_name(g.name)] = g
        overrides.update(p.overrides)
        for j in p.jetson:
            jetson[f"{j.jetpack}|{','.join(j.l4t)}"] = j
        peaks.update(p.peaks)
        indexes.update(p.indexes)
        mirrors.update({m.name: m for m in p.mirrors})
        pypi_defaults.update({(d.torch, d.platform): d for d in p.pypi_defaults})
        if p.conda is not None:
            conda = _merge_conda(conda, p.conda)
    rels = tuple(sorted(releases.values(), key=lambda r: r.version, reverse=True))
    return Matrix(
        releases=rels,
        cuda_versions=cuda,
        gpus={k: g.cc for k, g in gpu_rows.items()},
        gpu_rows=tuple(gpu_rows.values()),
        rocm_overrides=overrides,
        jetson=tuple(jetson.values()),
        peaks=peaks,
        indexes=indexes,
        files=tuple(f for f, _ in parts),
        l4t_releases=l4t,
        rocm_apus=apus,
        intel_families=tuple(intel.values()),
        fp32_lanes=lanes,
        thresholds=thresholds,
        mirrors=tuple(mirrors.values()),
        pypi_defaults=tuple(pypi_defaults.values()),
        conda=conda,
    )


def parse_matrix_text(text: str, file: str) -> _Parsed:
    """Parse and validate one matrix document (raises :class:`MatrixError`)."""
    return _parse_document(_parse_yaml(text, file), file)


def _read_user_file(path: str | Path) -> str:
    from stackdoctor.system import TooLarge, read_bounded

    p = Path(path)
    try:
        if p.stat().st_size > MAX_DOCUMENT_BYTES:
            raise MatrixError(f"compat matrix {p} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.")
        # a FIFO or /dev/zero is refused before anything is read (NotRegularFile: an OSError with its reason)
        return read_bounded(p, MAX_DOCUMENT_BYTES, too_large=True).decode("utf-8")
    except TooLarge:
        raise MatrixError(f"compat matrix {p} line 1: the file is larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB.") from None
    except MatrixError:
        raise
    except UnicodeDecodeError:
        raise MatrixError(f"compat matrix {p} line 1: the file is not UTF-8 text.") from None
    except FileNotFoundError:
        raise MatrixError(f"cannot read the compat matrix {p}: no such file.") from None
    except IsADirectoryError:
        raise MatrixError(f"cannot read the compat matrix {p}: it is a folder, not a YAML file.") from None
    except PermissionError:
        raise MatrixError(f"cannot read the compat matrix {p}: permission denied.") from None
    except OSError as exc:
        raise MatrixError(f"cannot read the compat matrix {p}: {(exc.strerror or str(exc)).lower()}.") from None


@functools.lru_cache(maxsize=1)
def _embedded() -> tuple[tuple[str, _Parsed], ...]:
    from importlib import resources

    try:
        base: Any = resources.files("stackdoctor.compat_matrix")
    except ModuleNotFoundError:
        # run from a source checkout (``python -m stackdoctor`` in a clone): the data sits beside the package
        base = Path(__file__).resolve().parent.parent / "compat_matrix"
    parts = []
    # learned*.yaml (written by ``stackdoctor matrix learn --shipped``) last: it layers over the hand-kept rows
    for entry in sorted(base.iterdir(), key=lambda e: (e.name.startswith("learned"), e.name)):
        if entry.name.endswith(".yaml") and entry.is_file():
            name = f"compat_matrix/{entry.name}"
            parts.append((name, parse_matrix_text(entry.read_text(encoding="utf-8"), name)))
    return tuple(parts)


@functools.lru_cache(maxsize=1)
def _embedded_matrix() -> Matrix:
    return _build(_embedded())


def user_matrix_paths(extra: Sequence[str | Path] = (), env: dict[str, str] | None = None) -> list[str]:
    """``--matrix`` files, then ``STACKDOCTOR_MATRIX`` (os.pathsep-separated) when no ``--matrix`` was given."""
    paths = [str(p) for p in extra if str(p)]
    if not paths:
        raw = (os.environ if env is None else env).get("STACKDOCTOR_MATRIX", "")
        paths = [p for p in raw.split(os.pathsep) if p.strip()]
    return paths


def learned_layer_path(env: dict[str, str] | None = None) -> Path:
    """The user's learned layer (``stackdoctor matrix learn`` writes it; :func:`load_matrix` layers it over the
    embedded matrix, under ``--matrix`` files): ``STACKDOCTOR_LEARNED``, else
    ``$XDG_CONFIG_HOME/stackdoctor/learned.yaml`` (``~/.config/stackdoctor/learned.yaml``)."""
    e = os.environ if env is None else env
    if e.get("STACKDOCTOR_LEARNED"):
        return Path(e["STACKDOCTOR_LEARNED"]).expanduser()
    base = Path(e["XDG_CONFIG_HOME"]).expanduser() if e.get("XDG_CONFIG_HOME") else Path(e.get("HOME") or "~").expanduser() / ".config"
    return base / "stackdoctor" / "learned.yaml"


def load_matrix(extra: Sequence[str | Path] = (), *, embedded: bool = True) -> Matrix:
    """The embedded matrix with user files layered over it (later files win).

    ``extra`` are ``--matrix`` files; without them ``STACKDOCTOR_MATRIX`` is read. With ``embedded=False`` the
    matrix is ``extra`` alone, layered in order, and ``STACKDOCTOR_MATRIX`` is not read (tests use this to run
    the resolver against a frozen matrix of their own).

    :raises MatrixError: a file is unreadable, malformed or invalid (one sentence: file, line, field).
    """
    if not embedded:
        return _build([(str(p), parse_matrix_text(_read_user_file(p), str(p))) for p in extra])
    paths = user_matrix_paths(extra)
    learned = learned_layer_path()
    try:
        have_learned = learned.is_file()
    except OSError:  # a home folder this user cannot read (another user's HOME under sudo -u): no learned layer
        have_learned = False
    if have_learned:
        paths = [str(learned), *paths]
    if not paths:
        return _embedded_matrix()
    parts = list(_embedded())
    for p in paths:
        parts.append((str(p), parse_matrix_text(_read_user_file(p), str(p))))
    return _build(parts)


def default_index_url(name: str = "pytorch") -> str:
    """``index_url(name)`` of the embedded matrix: the default where no matrix is at hand (a ``--matrix`` file
    can move it; code that holds a :class:`Matrix` asks it instead)."""
    return _embedded_matrix().index_url(name)


def validate_file(path: str | Path) -> _Parsed:
    """Validate one user matrix file on its own (``stackdoctor matrix validate``)."""
    return parse_matrix_text(_read_user_file(path), str(path))


# ---------------------------------------------------------------------------- mirrors, PyPI defaults, conda

_MIRROR_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PYPI_PLATFORMS = ("linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64")
_CONDA_SUBDIR_RE = re.compile(r"^(linux|osx|win)-(64|aarch64|arm64|ppc64le)$")


def _url(ctx: _Ctx, d: _LDict, key: str, where: str, *, required: bool = False) -> str | None:
    v = ctx.text(d, key, where, required=required)
    if v is not None and not re.match(r"^(https?|file)://\S+$", v):
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"not an http(s):// or file:// URL: {v!r}")
    return v.rstrip("/") if v else v


def _parse_sources_tables(ctx: _Ctx, top: _LDict, out: _Parsed) -> None:
    """``mirrors``, ``pypi_default`` and ``conda`` (compat_matrix/mirrors.yaml, conda.yaml)."""
    if top.get("mirrors") is not None:
        for i, raw in enumerate(ctx.seq(top["mirrors"], "mirrors", ctx.line_of(top, "mirrors"))):
            where = f"mirrors[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "mirrors"))
            _check_keys(ctx, d, {"name", "url", "layout", "listing", "source", "note", "derived_from", "unknown"}, where)
            name = (ctx.text(d, "name", where, required=True) or "").lower()
            if not _MIRROR_NAME_RE.match(name):
                raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name", f"not a mirror name (lower-case letters, digits, '.', '-', '_'): {name!r}")
            url = _url(ctx, d, "url", where, required=True) or ""
            layout = ctx.text(d, "layout", where, required=True) or ""
            if layout not in ("simple", "flat"):
                raise ctx.fail(ctx.line_of(d, "layout"), f"{where}.layout", f"must be simple or flat, not {layout!r}")
            listing = ctx.text(d, "listing", where)
            if layout == "flat" and not listing:
                listing = "{url}/{variant}/"
            if listing is not None and "{url}" not in listing:
                raise ctx.fail(ctx.line_of(d, "listing"), f"{where}.listing", "must start from {url} (e.g. \"{url}/{variant}/\")")
            out.mirrors.append(
                MirrorRow(
                    name, url, layout, listing, ctx.text(d, "source", where, required=True) or "", ctx.text(d, "note", where),
                    ctx.text(d, "derived_from", where), ctx.strings(d, "unknown", where),
                )
            )
    if top.get("pypi_default") is not None:
        for i, raw in enumerate(ctx.seq(top["pypi_default"], "pypi_default", ctx.line_of(top, "pypi_default"))):
            where = f"pypi_default[{i}]"
            d = ctx.mapping(raw, where, ctx.line_of(top, "pypi_default"))
            _check_keys(ctx, d, {"torch", "platform", "variant", "source", "unknown"}, where)
            torch = ctx.text(d, "torch", where, required=True) or ""
            if not re.match(r"^\d+\.\d+$", torch):
                raise ctx.fail(ctx.line_of(d, "torch"), f"{where}.torch", f"expected a torch minor like \"2.13\", got {torch!r}")
            platform = ctx.text(d, "platform", where, required=True) or ""
            if platform not in _PYPI_PLATFORMS:
                raise ctx.fail(ctx.line_of(d, "platform"), f"{where}.platform", f"must be one of {', '.join(_PYPI_PLATFORMS)}, not {platform!r}")
            variant = ctx.text(d, "variant", where)
            if variant is not None and not _VARIANT_RE.match(variant):
                raise ctx.fail(ctx.line_of(d, "variant"), f"{where}.variant", f"not a variant name (cpu, cuXYZ, rocmX.Y, xpu): {variant!r}")
            unknown = ctx.strings(d, "unknown", where)
            if variant is None and not unknown:
                raise ctx.fail(ctx.line_of(d), f"{where}.unknown", "a row without a variant must say what is unknown")
            out.pypi_defaults.append(PypiDefault(torch, platform, variant, ctx.text(d, "source", where, required=True) or "", unknown))
    if top.get("conda") is not None:
        where = "conda"
        d = ctx.mapping(top["conda"], where, ctx.line_of(top, "conda"))
        _check_keys(
            ctx, d,
            {"channel", "package", "cpu_package", "gpu_package", "cuda_selector", "cuda_build", "cpu_build", "virtual_package", "releases", "source", "note"},
            where,
        )
        releases: list[CondaRelease] = []
        if d.get("releases") is not None:
            for i, raw in enumerate(ctx.seq(d["releases"], f"{where}.releases", ctx.line_of(d, "releases"))):
                w = f"{where}.releases[{i}]"
                r = ctx.mapping(raw, w, ctx.line_of(d, "releases"))
                _check_keys(ctx, r, {"version", "cuda", "platforms", "source"}, w)
                version = ctx.version(r, "version", w)
                cuda: dict[str, tuple[str, ...]] = {}
                if r.get("cuda") is not None:
                    cm = ctx.mapping(r["cuda"], f"{w}.cuda", ctx.line_of(r, "cuda"))
                    for subdir in cm:
                        if not _CONDA_SUBDIR_RE.match(str(subdir)):
                            raise ctx.fail(ctx.line_of(cm, subdir), f"{w}.cuda.{subdir}", "not a conda platform (linux-64, linux-aarch64, osx-arm64, win-64, ...)")
                        vals = ctx.strings(cm, subdir, f"{w}.cuda")
                        for c in vals:
                            if not re.match(r"^\d+\.\d+$", c):
                                raise ctx.fail(ctx.line_of(cm, subdir), f"{w}.cuda.{subdir}", f"unparsable CUDA version {c!r} (expected like \"12.9\")")
                        cuda[str(subdir)] = vals
                platforms = ctx.strings(r, "platforms", w)
                for pl in platforms:
                    if not _CONDA_SUBDIR_RE.match(pl):
                        raise ctx.fail(ctx.line_of(r, "platforms"), f"{w}.platforms", f"not a conda platform: {pl!r}")
                releases.append(CondaRelease(str(version), cuda, platforms, ctx.text(r, "source", w, required=True) or ""))
        releases.sort(key=lambda r: Version(r.version), reverse=True)
        out.conda = CondaInfo(
            channel=ctx.text(d, "channel", where, required=True) or "",
            package=ctx.text(d, "package", where, required=True) or "",
            cpu_package=ctx.text(d, "cpu_package", where),
            gpu_package=ctx.text(d, "gpu_package", where),
            cuda_selector=ctx.text(d, "cuda_selector", where),
            cuda_build=ctx.text(d, "cuda_build", where),
            cpu_build=ctx.text(d, "cpu_build", where),
            virtual_package=ctx.text(d, "virtual_package", where),
            releases=tuple(releases),
            source=ctx.text(d, "source", where, required=True) or "",
            note=ctx.text(d, "note", where),
        )


def _merge_conda(base: CondaInfo | None, over: CondaInfo) -> CondaInfo:
    """A user ``conda`` table over the embedded one: given fields replace, releases merge by version."""
    if base is None:
        return over
    versions = {r.version for r in over.releases}
    rels = tuple(sorted(over.releases + tuple(r for r in base.releases if r.version not in versions), key=lambda r: Version(r.version), reverse=True))
    return dataclasses.replace(over, releases=rels)
