"""The matrix's rows and the :class:`Matrix` itself (look-ups, ``to_data``); pure, no I/O.

Each table's rows are declared in :mod:`stackdoctor.matrix.tables`; the :class:`Matrix` keeps every table's
layered value in ``tables`` (by YAML key) and the well-known ones under their own typed fields too.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from packaging.version import InvalidVersion, Version

from stackdoctor.core.errors import MatrixError
from stackdoctor.matrix.pure import normalise_gpu_name, parse_platform

if TYPE_CHECKING:
    from stackdoctor.matrix.table import Table

SCHEMA = "stackdoctor.matrix/1"


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
    # platform tags a release-day source (the release's build matrix) announces and no artifact has confirmed yet
    announced: tuple[str, ...] = ()
    announced_by: str | None = None  # the release-day source that announces them
    # index URL -> platform tags whose build that index's full listing of torch did not show (learned at run time):
    # known absent there, for those platforms only (another index, or another platform, stays as it was)
    absent_on: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False)

    def state_on(self, platform: str) -> str:
        """``"known"`` (an artifact or a sourced build list serves it) or ``"announced"`` (only a release-day source says
        it will be built) for one of this variant's ``platforms``."""
        fam = parse_platform(platform)[:2]
        return "announced" if any(parse_platform(t)[:2] == fam for t in self.announced) else "known"

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

        The Linux x86_64 list comes first (the build scripts derive the others from it). Only a platform of the
        same CPU architecture borrows one: an aarch64 wheel is built with its own, shorter list (sm_80 and newer
        where x86_64 starts at sm_75), so another architecture's list never stands in for it (None)."""
        fam = parse_platform(platform)[:2] if platform else ("linux", "x86_64")
        if _cpu_arch(fam[1]) != "x86_64":
            return None
        if self.arch_list and fam != ("linux", "x86_64"):
            return ("Linux x86_64", self.arch_list)
        for tag, archs in self.arch_by_platform.items():
            if archs and parse_platform(tag)[:2] != fam:
                return (tag, archs)
        return None


def _cpu_arch(arch: str) -> str:
    """One name per CPU architecture: ``amd64`` (Windows) is ``x86_64``, ``arm64`` (macOS, Windows) is ``aarch64``."""
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


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
    # a source lists every build of the release (a build matrix): a build it does not list is known absent; False (only
    # learned rows, or ``variants: []``): a build not listed is unknown, never "not published"
    builds_listed: bool = False

    def build_state(self, name: str, os_: str, arch: str) -> str:
        """What the matrix knows of build ``name`` for ``os_``/``arch``: ``"known"`` (an artifact or a sourced list),
        ``"announced"`` (a release-day source, no artifact yet), ``"absent"`` (a source that lists the release's builds
        does not list it) or ``"unknown"``."""
        v = self.variant(name)
        if v is not None:
            for tag in v.platforms:
                tos, tarch, _floor = parse_platform(tag)
                if tos == os_ and _cpu_arch(tarch) == _cpu_arch(arch):
                    return v.state_on(tag)
        return "absent" if self.builds_listed else "unknown"

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
    """Every table after layering. The typed fields are the tables code reads by name (filled from the
    declarations' ``attr``); ``tables`` holds every declared table's value by its YAML key, so a table needs no
    field of its own to be layered and shown (:meth:`table`)."""

    releases: tuple[Release, ...]  # newest first
    cuda_versions: dict[str, CudaRow] = field(default_factory=dict, hash=False)
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
    # every table's layered value by YAML key, and the declarations it was built with (for to_data)
    tables: dict[str, Any] = field(default_factory=dict, hash=False, compare=False, repr=False)
    registry: tuple[Table[Any], ...] = field(default=(), hash=False, compare=False, repr=False)

    @functools.cached_property
    def gpus(self) -> dict[str, str]:
        """Normalised GPU name -> compute capability (from ``gpu_rows``)."""
        return {normalise_gpu_name(g.name): g.cc for g in self.gpu_rows}

    def table(self, key: str) -> Any:
        """The layered value of the table ``key`` (its YAML key: ``"l4t_releases"``), None when not declared."""
        return self.tables.get(key)

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

    def platform_arch_list(self, version: Version, name: str, platform: str) -> tuple[Version, tuple[str, ...]] | None:
        """The nearest other release's own arch list of build ``name`` for ``platform``'s OS and CPU architecture
        (``(2.14.0, ("sm_80", ...))``), for a build whose list for that platform is unknown; None when no release
        has one. Nearest by release order; on a tie the older (a build configuration carried forward)."""
        fam = parse_platform(platform)[:2]
        here = next((i for i, r in enumerate(self.releases) if version in r.versions), None)
        best: tuple[int, int, Version, tuple[str, ...]] | None = None
        for i, r in enumerate(self.releases):
            v = r.variant(name)
            if i == here or v is None or not v.arch_known_for(platform):
                continue
            archs = v.arch_for(platform)
            if not archs or not any(parse_platform(t)[:2] == fam for t in v.platforms):
                continue
            dist = abs(i - here) if here is not None else i
            key = (dist, -i, r.version, archs)
            if best is None or key[:2] < best[:2]:
                best = key
        return (best[2], best[3]) if best else None

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
        """Plain JSON-ready data (for ``matrix show --json``): every declared table under its YAML key; only the
        one release (and no other table) when ``torch`` is given."""
        out: dict[str, Any] = {"schema": SCHEMA, "files": list(self.files)}
        for t in self.registry:
            value = self.tables.get(t.key)
            if t.key == "releases" and torch is not None:
                r = self.release(torch)
                value = (r,) if r else ()
            elif torch is not None:
                continue
            out[t.key] = t.data(value)
        return out
