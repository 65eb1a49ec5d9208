"""The target of a resolution: this machine's facts (their reconciled view) with the request's what-if overrides, as the resolver sees them (:func:`target_from`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from stackdoctor import kinds
from stackdoctor.core.versions import major_minor
from stackdoctor.kinds.base import Accelerator, TargetDevice
from stackdoctor.matrix import (
    Matrix,
    parse_platform,
)
from stackdoctor.model.facts import Facts
from stackdoctor.model.plan import Request
from stackdoctor.model.view import MachineView, facts_of

# ---------------------------------------------------------------------------- the machine, as the resolver sees it


Gpu = TargetDevice  # one device as the resolver plans for it (the accelerator seam's type: each kind lists its own)


@dataclass
class Target:
    os: str  # "linux" | "windows" | "macos" | "unknown"
    arch: str  # "x86_64" | "aarch64" | "amd64" | "arm64"
    glibc: tuple[int, int] | None = None
    macos: tuple[int, int] | None = None
    python: str | None = None  # "3.12" / "3.13t"
    windows_driver: bool = False  # compare the driver with the Windows column (Windows or WSL2)
    wsl: bool = False
    driver: str | None = None
    driver_cuda: str | None = None  # the newest CUDA the driver runs, when its version is unknown ("10.2" from torch's message)
    driver_runs_cuda: str | None = None  # a CUDA build that initialised on this driver (torch's), when nothing else is known
    gpus: list[Gpu] = field(default_factory=list)
    jetson: bool = False
    l4t: str | None = None
    jetpack: str | None = None
    musl: bool = False
    hosts: dict[str, object] = field(default_factory=dict)  # each kind's host state its fit reads (Accelerator.fit_host), by kind
    unlisted: int = 0  # GPUs on the PCI bus that no working driver lists (the kinds' unlisted())
    unlisted_kind: str | None = None  # the kind whose GPUs they are (the first that counted any)
    notes: list[str] = field(default_factory=list)  # facts the resolver could not check

    @property
    def own_builds(self) -> bool:
        """A kind's own wheel source plans this machine (a Jetson's JetPack wheels), not the index's builds."""
        return self.jetson

    @property
    def tag(self) -> str:
        if self.os == "windows":
            return f"win_{self.arch}"
        if self.os == "macos":
            v = self.macos or (11, 0)
            return f"macosx_{v[0]}_{v[1]}_{self.arch}"
        if self.glibc:
            return f"manylinux_{self.glibc[0]}_{self.glibc[1]}_{self.arch}"
        return f"linux_{self.arch}"


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64"}


def norm_arch(os_: str, machine: str | None) -> str:
    m = (machine or "").strip().lower()
    if os_ == "windows":
        return {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(m, m or "amd64")
    if os_ == "macos":
        return {"arm64": "arm64", "aarch64": "arm64", "x86_64": "x86_64"}.get(m, m)
    return _ARCH_ALIASES.get(m, m)


def flag_kind(flag: str) -> Accelerator | None:
    """The kind whose devices or driver one of install's built-in what-if flags names (:attr:`Accelerator.what_if_flags`:
    ``--gpu`` and ``--driver`` are NVIDIA's, ``--gfx`` AMD's)."""
    return next((a for a in kinds.ALL if flag in a.what_if_flags), None)


def parse_gpu_request(text: str, matrix: Matrix) -> str | None:
    """``--gpu sm_90`` / ``9.0`` / a GPU name -> its compute capability: the answer of the kind ``--gpu`` belongs to
    (NVIDIA's, through the seam)."""
    owner = flag_kind("--gpu")  # a kind claims a name it owns
    return owner.what_if_arch(text, matrix) if owner is not None else None


def target_from(view: MachineView, matrix: Matrix, request: Request) -> Target:
    """The target of a resolution: this machine's view (every witness of the GPUs and the driver weighed,
    :func:`stackdoctor.reconcile.reconcile`) with the request's what-if overrides applied.

    :raises NotAView: ``view`` is raw facts (the type is the guard)."""
    facts = facts_of(view)
    t = _platform(facts, request)
    t.python = _python(facts, request)
    t.wsl = bool(facts.platform.is_wsl) and t.os == "linux" and not request.platform
    t.windows_driver = t.os == "windows" or t.wsl
    if request.gpus or request.gfx or request.devices:  # what-if overrides replace the probed devices
        _what_if_devices(t, matrix, request)
    else:
        _devices(t, facts)
    _driver(t, view, request)
    _hosts(t, view, request)
    # a what-if platform keeps the Jetson path only where a Jetson's wheels run: Linux aarch64
    t.jetson = facts.jetson.is_jetson and (not request.platform or (t.os == "linux" and t.arch == "aarch64"))
    t.l4t = facts.jetson.l4t_release
    t.jetpack = facts.jetson.jetpack
    return t


def _platform(facts: Facts, request: Request) -> Target:
    """OS, architecture and libc of the target: the what-if platform tag, else the target Python's, else the OS's facts."""
    p = facts.platform
    tag = request.platform or facts.python.platform_tag
    os_, arch, floor = ("unknown", "", None)
    if tag:
        os_, arch, floor = parse_platform(tag)
    if os_ in ("unknown", "musllinux") or not tag:
        sysname = (p.system or "").lower()
        fos = {"linux": "linux", "darwin": "macos", "windows": "windows"}.get(sysname, "unknown")
        if os_ == "musllinux":
            fos = "linux"
        native = next((m for a in kinds.ALL if (m := a.host_machine(facts))), None)  # the Mac's own CPU, outside Rosetta
        machine = native if fos == "macos" and native else p.machine
        os_, arch = fos, norm_arch(fos, machine if not arch else arch)
        floor = None
    else:
        arch = norm_arch(os_, arch)
    t = Target(os=os_, arch=arch)
    t.musl = (tag or "").startswith("musllinux") or p.libc == "musl"
    if os_ == "linux":
        t.glibc = floor if floor else (major_minor(p.glibc_version) if not request.platform else None)
    if os_ == "macos":
        release = next((r for a in kinds.ALL if (r := a.os_release(facts))), None)
        t.macos = floor if (floor and request.platform) else (major_minor(release) or floor)
    return t


def _python(facts: Facts, request: Request) -> str | None:
    """The target's Python as wheels name it: "3.12", "3.13t" (free-threaded); the what-if's first."""
    if request.python_version:
        pv = request.python_version.strip().lower().removeprefix("cp").removeprefix("python")
        ft = pv.endswith("t")
        parts = pv.rstrip("t").split(".")
        if len(parts) == 1 and len(parts[0]) >= 2 and parts[0].isdigit():  # "312" / "cp313t"
            parts = [parts[0][0], parts[0][1:]]
        return ".".join(parts[:2]) + ("t" if ft else "")
    if facts.python.version:
        mm = ".".join(facts.python.version.split(".")[:2])
        return mm + ("t" if facts.python.free_threaded else "")
    return None


def _what_if_devices(t: Target, matrix: Matrix, request: Request) -> None:
    """The devices the what-if flags name: a kind's own flag (--npu 910B), then the built-in ones (--gpu, --gfx)."""
    for kind, names in request.devices.items():
        acc = kinds.by_name(kind)
        if acc is not None:
            t.gpus.extend(acc.named_devices(names))
    # a --gpu name another kind claims ("Arc B580": Intel's, "Radeon RX 7900 XTX": AMD's) is that kind's device
    claimed = {acc.name: [g for g in request.gpus if acc.gpu_name(g)] for acc in kinds.ALL}
    taken = {g for names in claimed.values() for g in names}
    rest = dataclasses.replace(request, gpus=[g for g in request.gpus if g not in taken])
    for acc in kinds.ALL:
        devices, notes = acc.flag_devices(rest, matrix)
        t.gpus.extend(devices)
        t.notes.extend(notes)
        if claimed[acc.name]:
            t.gpus.extend(acc.named_devices(claimed[acc.name]))


def _devices(t: Target, facts: Facts) -> None:
    """Every kind's devices on this machine (every witness joined, stackdoctor.reconcile: the tools, the kernel
    module, the PCI bus, torch), in priority order, and the ones only the PCI bus shows."""
    for acc in kinds.ALL:
        t.gpus.extend(acc.target_devices(facts))
        unlisted, note = acc.unlisted(facts)
        t.unlisted += unlisted
        if unlisted and t.unlisted_kind is None:
            t.unlisted_kind = acc.name
        if note:
            t.notes.append(note)


def _driver(t: Target, view: MachineView, request: Request) -> None:
    """The driver the CUDA builds are judged against: the what-if's, else the reconciled one; where no version is
    known, the CUDA level it runs and the CUDA build torch initialised on it."""
    drv = view.driver("nvidia")
    t.driver = request.driver or drv.value
    if not request.driver and drv.value and drv.source and drv.source.startswith(("/proc", "/sys")):
        t.notes.append(f"NVIDIA driver {drv.value}: the loaded kernel module's version ({drv.source}); no user-space tool reported one")
    if not t.driver:
        t.driver_cuda = view.runtime("nvidia").value
        owner = flag_kind("--driver")  # the kind whose driver --driver names (NVIDIA's): what its installed build ran on it
        t.driver_runs_cuda = owner.initialised_runtime(view.facts.torch) if owner is not None else None


def _hosts(t: Target, view: MachineView, request: Request) -> None:
    """Each kind's host state its fit reads (:meth:`Accelerator.fit_host`: AMD's ROCm user space and kernel driver),
    from its what-if values, else this machine's view (a what-if machine's host is not this one's)."""
    what_if = is_what_if(request)
    for acc in kinds.ALL:
        host = acc.fit_host(view, request.values.get(acc.name, {}), what_if)
        if host is not None:
            t.hosts[acc.name] = host


def is_what_if(request: Request) -> bool:
    """The request plans for another machine, so this one's installed torch is not the one replaced."""
    return bool(request.platform or request.python_version or request.gpus or request.gfx or request.driver or request.devices or any(request.values.values()))
