"""The target of a resolution: this machine's facts (their reconciled view) with the request's what-if overrides, as the resolver sees them (:func:`target_from`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from stackdoctor import accelerators
from stackdoctor.facts import Facts
from stackdoctor.matrix import (
    Matrix,
    parse_platform,
)
from stackdoctor.plan import Request
from stackdoctor.versions import major_minor

# ---------------------------------------------------------------------------- the machine, as the resolver sees it


@dataclass
class Gpu:
    vendor: str  # "nvidia" | "amd" | "intel"
    index: int
    name: str | None
    cc: str | None = None  # NVIDIA "8.9"
    gfx: str | None = None  # AMD "gfx1100"
    integrated: bool = False
    uuid: str | None = None

    def label(self) -> str:
        """``GPU 0 NVIDIA GeForce RTX 4090``; without a name only ``GPU 0`` (its sm_/gfx follows where it matters)."""
        return f"GPU {self.index} {self.name}" if self.name else f"GPU {self.index}"


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
    nvidia_unlisted: int = 0  # NVIDIA GPUs on the PCI bus that no working driver lists
    notes: list[str] = field(default_factory=list)  # facts the resolver could not check

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

    def nvidia(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "nvidia"]

    def amd(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "amd"]

    def intel(self) -> list[Gpu]:
        return [g for g in self.gpus if g.vendor == "intel"]


_ARCH_ALIASES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64", "aarch64": "aarch64", "x86_64": "x86_64"}


def norm_arch(os_: str, machine: str | None) -> str:
    m = (machine or "").strip().lower()
    if os_ == "windows":
        return {"amd64": "amd64", "x86_64": "amd64", "arm64": "arm64", "aarch64": "arm64"}.get(m, m or "amd64")
    if os_ == "macos":
        return {"arm64": "arm64", "aarch64": "arm64", "x86_64": "x86_64"}.get(m, m)
    return _ARCH_ALIASES.get(m, m)


def parse_gpu_request(text: str, matrix: Matrix) -> str | None:
    t = text.strip()
    m = re.match(r"^sm_?(\d+)(\d)$", t, re.I) or re.match(r"^(\d{1,2})\.(\d)$", t)
    if m:
        return f"{int(m.group(1))}.{m.group(2)}"
    return matrix.gpu_compute_capability(t)


INTEL_XPU_RE = re.compile(
    r"\b(arc|data center gpu|max \d{4}|flex|battlemage|alchemist|core ultra|meteor lake|arrow lake|lunar lake|panther lake|dg2|bmg)\b", re.I
)


def _reconciled(facts: Facts) -> Facts:
    """``facts`` as the pipeline hands them: reconciled (every witness weighed, derived values derived once)."""
    if not facts.reconciled.done:
        raise ValueError("resolve needs reconciled facts: pass them through stackdoctor.reconcile.reconcile first")
    return facts


def target_from(facts: Facts, matrix: Matrix, request: Request) -> Target:
    """The target of a resolution: this machine's facts (their reconciled view: every witness of the GPUs
    and the driver) with the request's what-if overrides applied."""
    facts = _reconciled(facts)
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
        machine: str | None
        if fos == "macos" and facts.apple.rosetta is False and facts.apple.arch:
            machine = facts.apple.arch
        else:
            machine = p.machine
        os_, arch = fos, norm_arch(fos, machine if not arch else arch)
        floor = None
    else:
        arch = norm_arch(os_, arch)
    t = Target(os=os_, arch=arch)
    t.musl = (tag or "").startswith("musllinux") or p.libc == "musl"
    if os_ == "linux":
        t.glibc = floor if floor else (major_minor(p.glibc_version) if not request.platform else None)
    if os_ == "macos":
        t.macos = floor if (floor and request.platform) else (major_minor(facts.apple.macos_version) or floor)
    # python
    if request.python_version:
        pv = request.python_version.strip().lower().removeprefix("cp").removeprefix("python")
        ft = pv.endswith("t")
        parts = pv.rstrip("t").split(".")
        if len(parts) == 1 and len(parts[0]) >= 2 and parts[0].isdigit():  # "312" / "cp313t"
            parts = [parts[0][0], parts[0][1:]]
        t.python = ".".join(parts[:2]) + ("t" if ft else "")
    elif facts.python.version:
        mm = ".".join(facts.python.version.split(".")[:2])
        t.python = mm + ("t" if facts.python.free_threaded else "")
    t.wsl = bool(p.is_wsl) and os_ == "linux" and not request.platform
    t.windows_driver = os_ == "windows" or t.wsl
    # GPUs: what-if overrides replace the probed ones
    if request.gpus or request.gfx or request.devices:
        for kind, names in request.devices.items():  # a kind's what-if flag (--npu 910B): its devices, named
            acc = accelerators.by_name(kind)
            if acc is not None:
                t.gpus.extend(Gpu(acc.vendor, i, n.strip()) for i, n in enumerate(names))
        for i, g in enumerate(request.gpus):
            cc = parse_gpu_request(g, matrix)
            t.gpus.append(Gpu("nvidia", i, g if not re.match(r"^(sm_?\d+|\d+\.\d)$", g.strip(), re.I) else None, cc=cc))
            if cc is None:
                t.notes.append(f"--gpu {g}: unknown GPU name, its compute capability is not in the matrix")
        for i, g in enumerate(request.gfx):
            t.gpus.append(Gpu("amd", i, None, gfx=g.strip().lower()))
    else:
        # every witness joined (stackdoctor.reconcile): the tools, the kernel module, the PCI bus, torch
        view = facts.reconciled.gpus
        listed = [v for v in view if v.vendor == "nvidia" and v.witnesses != ["pci"]]
        for v in listed:
            t.gpus.append(Gpu("nvidia", v.index, v.name, cc=v.compute_capability, uuid=v.uuid))  # derived once, in reconcile
        unlisted = [v for v in view if v.vendor == "nvidia" and v.witnesses == ["pci"]]
        if not listed and unlisted and not facts.jetson.is_jetson:
            t.nvidia_unlisted = len(unlisted)
            t.notes.append(
                f"{len(unlisted)} NVIDIA GPU(s) on the PCI bus but the driver did not list them"
                + (f" (nvidia-smi: {facts.nvidia.smi_state})" if facts.nvidia.smi_state else "")
            )
        for v in view:
            if v.vendor == "amd" and v.witnesses != ["pci"]:
                t.gpus.append(Gpu("amd", v.index, v.name, gfx=(v.gfx or "").split(":", 1)[0].lower() or None, integrated=v.integrated, uuid=v.uuid))
        for i, iv in enumerate(v for v in view if v.vendor == "intel"):
            t.gpus.append(Gpu("intel", i, iv.name, integrated=iv.integrated))
        for acc in accelerators.ALL:
            if acc not in accelerators.BUILTIN:  # a plug-in kind: its GPUs as the reconciled view lists them
                t.gpus.extend(Gpu(acc.vendor, v.index, v.name, integrated=v.integrated, uuid=v.uuid) for v in acc.devices(facts))
    drv = facts.reconciled.nvidia_driver
    t.driver = request.driver or drv.value
    if not request.driver and drv.value and drv.source and drv.source.startswith(("/proc", "/sys")):
        t.notes.append(f"NVIDIA driver {drv.value}: the loaded kernel module's version ({drv.source}); no user-space tool reported one")
    if not t.driver:
        t.driver_cuda = facts.reconciled.cuda_driver_version.value
        tf = facts.torch
        if tf.cuda_available and tf.cuda and not tf.hip:
            t.driver_runs_cuda = tf.cuda
    # a what-if platform keeps the Jetson path only where a Jetson's wheels run: Linux aarch64
    t.jetson = facts.jetson.is_jetson and (not request.platform or (os_ == "linux" and arch == "aarch64"))
    t.l4t = facts.jetson.l4t_release
    t.jetpack = facts.jetson.jetpack
    return t


def is_what_if(request: Request) -> bool:
    """The request plans for another machine, so this one's installed torch is not the one replaced."""
    return bool(request.platform or request.python_version or request.gpus or request.gfx or request.driver or request.devices)
