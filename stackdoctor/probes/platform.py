"""Platform probe: OS and version, kernel, CPU arch, libc, WSL, container, PCI display devices.

Sources, in the order they are read (every value's source lands in ``PlatformFacts.sources``):

Everything the OS says of itself comes from ``System.host()`` (:class:`stackdoctor.system.Host`):
live ``uname``, an injected host in tests, or a captured tree's ``/.stackdoctor/host.json``.

- system / machine: the host's. A captured tree without ``host.json`` is a Linux tree: system is
  "Linux" and machine is taken from ``/proc/version`` when it names one, else from a single
  multiarch ``/lib/<arch>-linux-gnu`` directory (else None: the live CPU is not the replayed one's).
- OS: ``/etc/os-release`` (then ``/usr/lib/os-release``); macOS ``sw_vers`` (Darwin only);
  Windows: the host's version is the build (``10.0.22631``, :func:`parse_windows_version`) and
  names the release: build 22000 and later is Windows 11 (Python before 3.12 still says "10").
- kernel: ``/proc/sys/kernel/osrelease``, then ``/proc/version``, then the host's release.
- hostname: ``/proc/sys/kernel/hostname``, then the host's node name.
- libc: the host's ``os.confstr("CS_GNU_LIBC_VERSION")``; else the ``libc-2.31.so``
  style file names of pre-2.34 glibc, else None; musl from ``/lib/ld-musl-*.so.1``.
- WSL: kernel release (WSL1 "-Microsoft", WSL2 "-microsoft-standard[-WSL2]"),
  ``/proc/sys/fs/binfmt_misc/WSLInterop``, ``/usr/lib/wsl`` (Linux only: WSL is a Linux that
  runs on Windows; native Windows is ``system == "Windows"`` and never WSL).
- container: ``/.dockerenv``, ``/run/.containerenv``, ``KUBERNETES_SERVICE_HOST``,
  ``/proc/1/cgroup`` markers; then whether ``/dev/nvidia0`` / ``/dev/nvidiactl`` were passed in.
- PCI display devices (NVIDIA / AMD) from ``/sys/bus/pci/devices`` (:mod:`stackdoctor.kinds.pci`).
- CPU count and model (``/proc/cpuinfo``), memory (``/proc/meminfo``).
"""

from __future__ import annotations

import re

from stackdoctor import kinds
from stackdoctor.kinds.pci import display_devices
from stackdoctor.model.facts import PlatformFacts
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.system import Host, System

__all__ = [
    "detect_wsl",
    "parse_cgroup_container",
    "parse_cpuinfo",
    "parse_glibc_confstr",
    "parse_libc_filename",
    "parse_meminfo_total_mib",
    "parse_os_release",
    "parse_proc_version",
    "parse_windows_version",
    "probe",
]


# ---------------------------------------------------------------------------- parsers


def parse_sw_vers(text: str) -> dict[str, str]:
    """``sw_vers`` as a dict of its ``Key:<tab>value`` lines.

    Sample (macOS Catalina, rbenv/ruby-build PR #1451)::

        ProductName:    Mac OS X
        ProductVersion: 10.15.5
        BuildVersion:   19F101
    """
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        key = key.strip()
        if sep and key and " " not in key and key.isascii() and key.isalnum():
            out[key] = value.strip()
    return out


def parse_os_release(text: str) -> dict[str, str]:
    """``/etc/os-release`` as a dict (quotes removed, comments and junk ignored).

    Sample (Ubuntu 24.04.2, ROCm/k8s-device-plugin issue #157)::

        PRETTY_NAME="Ubuntu 24.04.2 LTS"
        NAME="Ubuntu"
        VERSION_ID="24.04"
        VERSION="24.04.2 LTS (Noble Numbat)"
        ID=ubuntu
    """
    out: dict[str, str] = {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        key = key.strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = value.replace('\\"', '"').replace("\\$", "$").replace("\\\\", "\\")
    return out


_PROC_VERSION = re.compile(r"Linux version (\S+)")
_ARCHES = ("x86_64", "aarch64", "ppc64le", "s390x", "armv7l", "riscv64")


def parse_proc_version(text: str) -> tuple[str | None, str | None]:
    """(kernel release, machine) from ``/proc/version`` or ``uname -a``; machine only when named.

    Samples::

        Linux version 5.4.72-microsoft-standard-WSL2 (oe-user@oe-host) (gcc version 8.2.0 (GCC)) #1 SMP Wed Oct 28 23:40:43 UTC 2020
        Linux JETBOT 4.9.140-tegra #1 SMP PREEMPT Mon Dec 9 22:47:42 PST 2019 aarch64 aarch64 aarch64 GNU/Linux
    """
    text = text or ""
    kernel: str | None = None
    m = _PROC_VERSION.search(text)
    if m:
        kernel = m.group(1)
    else:
        # `uname -a`: "Linux <host> <release> #..."
        for line in text.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "Linux" and "#" in line:
                kernel = parts[2]
                break
    machine = None
    for token in re.findall(r"[A-Za-z0-9_]+", text):
        if token in _ARCHES:
            machine = token
            break
    return kernel, machine


def detect_wsl(kernel_release: str | None) -> tuple[bool, int | None]:
    """(is WSL, version) from a kernel release string.

    WSL1 reports a pseudo kernel with a capitalised "Microsoft" (``4.4.0-18985-Microsoft``),
    WSL2 a real kernel with lower-case "microsoft-standard" (``4.19.67-microsoft-standard``,
    ``5.15.153.1-microsoft-standard-WSL2``) — 4U6U57/wsl-open PR #4, DMOJ/judge-server PR #874,
    microsoft/WSL issue #4555.
    """
    rel = kernel_release or ""
    if "WSL2" in rel or "microsoft-standard" in rel:
        return True, 2
    if "Microsoft" in rel:
        return True, 1
    if "microsoft" in rel.lower():
        return True, None
    return False, None


_CGROUP_MARKERS = (
    ("kubepods", "kubernetes"),
    ("libpod", "podman"),
    ("docker", "docker"),
    ("lxc", "lxc"),
    ("containerd", "containerd"),
)


def parse_cgroup_container(text: str) -> str | None:
    """The container runtime named by ``/proc/1/cgroup``, or None (cgroup v2 ``0::/`` names none).

    Shape (cgroup v1 inside Docker; illustration, not a capture)::

        12:cpuset:/docker/3f0c1a6e0d2b...
        11:memory:/docker/3f0c1a6e0d2b...
    """
    for line in (text or "").splitlines():
        path = line.split(":", 2)[-1]
        for marker, kind in _CGROUP_MARKERS:
            if marker in path:
                return kind
    return None


def parse_cpuinfo(text: str) -> tuple[str | None, int | None]:
    """(CPU model, logical CPU count) from ``/proc/cpuinfo``.

    x86 line shape (illustration)::

        processor	: 0
        model name	: AMD Ryzen 9 7950X 16-Core Processor

    ARM kernels print no "model name"; "Hardware" / "Model" are used when present.
    """
    model: str | None = None
    fallback: str | None = None
    count = 0
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        value = value.strip()
        if key == "processor":
            count += 1
        elif key == "model name" and model is None and value:
            model = value
        elif key in ("hardware", "model", "cpu model") and fallback is None and value and not value.isdigit():
            fallback = value
    return model or fallback, (count or None)


def parse_meminfo_total_mib(text: str) -> int | None:
    """``MemTotal`` of ``/proc/meminfo`` in MiB.

    Line shape (illustration)::

        MemTotal:       131899588 kB
    """
    m = re.search(r"^MemTotal:\s*(\d+)\s*kB", text or "", re.MULTILINE)
    return int(m.group(1)) // 1024 if m else None


def parse_glibc_confstr(text: str | None) -> tuple[str | None, str | None]:
    """(libc, version) from ``os.confstr("CS_GNU_LIBC_VERSION")``: ``"glibc 2.35"`` -> ("glibc", "2.35")."""
    parts = (text or "").split()
    if len(parts) == 2 and parts[0] == "glibc" and re.fullmatch(r"\d+\.\d+(\.\d+)?", parts[1]):
        return "glibc", parts[1]
    return None, None


_LIBC_FILE = re.compile(r"^libc-(\d+\.\d+(?:\.\d+)?)\.so$")


def parse_libc_filename(name: str) -> str | None:
    """glibc version from a pre-2.34 library file name: ``libc-2.31.so`` -> ``"2.31"``."""
    m = _LIBC_FILE.match((name or "").strip())
    return m.group(1) if m else None


_WINDOWS_VERSION = re.compile(r"^\s*(?:Microsoft Windows \[Version\s+)?(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?\]?\s*$")

# The first Windows 11 build. Source: CPython 3.12 Lib/platform.py (_WIN32_CLIENT_RELEASES maps
# (10, 0, 22000) to "11"); Microsoft's Windows 11 release information lists 22000 (21H2) as the first.
WINDOWS_11_FIRST_BUILD = 22000


def parse_windows_version(text: str) -> tuple[str | None, int | None, str | None]:
    """(version ``"10.0.22631"``, build ``22631``, release name ``"11"``) from ``platform.version()``
    or ``ver``; (None, None, None) for anything else.

    Samples: ``10.0.19044`` (``platform.version()``), ``Microsoft Windows [Version 10.0.19044.1645]``
    (``ver`` or a ``cmd`` banner, the recorded machine w01; the fourth number is the update revision;
    the first line that is a version counts)::

        >>> parse_windows_version("10.0.22631")
        ('10.0.22631', 22631, '11')
    """
    m = None
    for line in (text or "").splitlines()[:50]:
        m = _WINDOWS_VERSION.match(line[:200])
        if m:
            break
    if not m:
        return None, None, None
    major, minor, build = int(m.group(1)), int(m.group(2)), int(m.group(3))
    name = ("11" if build >= WINDOWS_11_FIRST_BUILD else "10") if (major, minor) == (10, 0) else None
    return f"{major}.{minor}.{build}", build, name


# ---------------------------------------------------------------------------- gathering

_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64")


def _libc_from_tree(system: System) -> tuple[str | None, str | None, str | None]:
    """(libc, glibc version, source) from file names under the sysroot."""
    dirs = list(_LIB_DIRS)
    for base in ("/lib", "/usr/lib"):
        dirs += [f"{base}/{d}" for d in system.listdir(base) if d.endswith("-linux-gnu")]
    musl = glibc = None
    for d in dirs:
        for name in system.listdir(d):
            if name.startswith("ld-musl-") and musl is None:
                musl = f"{d}/{name}"
            version = parse_libc_filename(name)
            if version and glibc is None:
                return "glibc", version, f"file:{d}/{name}"
            if name == "libc.so.6" and glibc is None:
                glibc = f"{d}/{name}"
    if glibc:
        from stackdoctor.binaries.linkage import glibc_version  # the ELF reader, only where the name says no version

        return "glibc", glibc_version(system, glibc), f"file:{glibc}"
    if musl:
        return "musl", None, f"file:{musl}"
    return None, None, None


def _read_first(system: System, *paths: str) -> tuple[str | None, str | None]:
    for p in paths:
        r = system.read_text(p)
        if r.ok and r.text.strip():
            return r.text, p
    return None, None


def gather(ctx: ProbeContext) -> PlatformFacts:
    """Platform facts of the machine ``ctx.system`` describes (live, injected or a captured tree)."""
    system = ctx.system
    host = system.host()
    f = PlatformFacts()
    src = f.sources

    f.system = host.system
    if f.system:
        src["system"] = host.label("system")
    if host.machine:
        f.machine = host.machine
        src["machine"] = host.label("machine")
    _os_release(system, f)
    if f.system == "Darwin":
        _macos_version(ctx, f)
    elif f.system == "Windows":
        _windows_version(host, f)
    pv_kernel = _kernel(system, host, f)

    # Hostname
    f.hostname = system.hostname()
    if f.hostname:
        src["hostname"] = "file:/proc/sys/kernel/hostname" if system.exists("/proc/sys/kernel/hostname") else host.label("node")
    if f.system == "Linux":
        _libc(system, host, f)
    _wsl(system, f, pv_kernel)
    _container(system, f)

    # PCI display devices
    if f.system == "Linux":
        devices = display_devices(system)
        for a in kinds.ALL:  # each kind that the platform lists the display devices of (its pci_devices_field)
            if a.pci_devices_field:
                setattr(f, a.pci_devices_field, [d for d in devices if d.vendor_id == a.pci_vendor])
                src[a.pci_devices_field] = "file:/sys/bus/pci/devices"
    _cpu_and_memory(system, host, f)
    return f


def _os_release(system: System, f: PlatformFacts) -> None:
    """The distribution's id, name and version from ``os-release``."""
    src = f.sources
    text, path = _read_first(system, "/etc/os-release", "/usr/lib/os-release")
    if text:
        rel = parse_os_release(text)
        f.os_id = rel.get("ID") or None
        f.os_name = rel.get("PRETTY_NAME") or rel.get("NAME") or None
        f.os_version = rel.get("VERSION_ID") or None
        for k in ("os_id", "os_name", "os_version"):
            if getattr(f, k):
                src[k] = f"file:{path}"


def _macos_version(ctx: ProbeContext, f: PlatformFacts) -> None:
    """macOS's product name and version from ``sw_vers``."""
    system = ctx.system
    src = f.sources
    res = system.run(["sw_vers"], timeout=ctx.timeout_s)
    if res.ok:
        sw = parse_sw_vers(res.stdout)
        if sw.get("ProductVersion"):
            f.os_id = "macos"
            f.os_version = sw["ProductVersion"]
            f.os_name = f"{sw.get('ProductName') or 'macOS'} {sw['ProductVersion']}"
            for k in ("os_id", "os_name", "os_version"):
                src[k] = "sw_vers"


def _windows_version(host: Host, f: PlatformFacts) -> None:
    """Windows's version from the host's, and its name (10 or 11 by the build for a client release)."""
    src = f.sources
    f.os_id = "windows"
    src["os_id"] = host.label("system")
    version, build, name = parse_windows_version(host.version or "")
    f.os_version = version or host.version
    if f.os_version:
        src["os_version"] = host.label("version")
    release = host.release or ""
    if name and release in ("", "10", "11"):  # a client release: the build decides 10 or 11
        f.os_name = f"Windows {name}"
        src["os_name"] = host.label("version") + f" (build {build}; 11 from build {WINDOWS_11_FIRST_BUILD})"
    else:  # "2019Server", "2022Server", or an unknown version: as the host says
        f.os_name = f"Windows {release}".strip()
        src["os_name"] = host.label("release")


def _kernel(system: System, host: Host, f: PlatformFacts) -> str | None:
    """The kernel release (and the machine of a captured tree); returns what ``/proc/version`` names as the kernel."""
    src = f.sources
    moved = system.moved
    osrelease = system.read_text("/proc/sys/kernel/osrelease")
    procver = system.read_text("/proc/version")
    pv_kernel, pv_machine = parse_proc_version(procver.text) if procver.ok else (None, None)
    if osrelease.ok and osrelease.text.strip():
        f.kernel = osrelease.text.strip().splitlines()[0]
        src["kernel"] = "file:/proc/sys/kernel/osrelease"
    elif pv_kernel:
        f.kernel = pv_kernel
        src["kernel"] = "file:/proc/version"
    elif host.release and f.system != "Windows":
        f.kernel = host.release
        src["kernel"] = host.label("release")
    if f.machine is None and pv_machine:
        f.machine = pv_machine
        src["machine"] = "file:/proc/version"
    elif f.machine is None and moved:
        # Debian-style multiarch library directories name the tree's architecture.
        for base in ("/lib", "/usr/lib"):
            arches = [d[: -len("-linux-gnu")] for d in system.listdir(base) if d.endswith("-linux-gnu")]
            arches = [a for a in arches if a in _ARCHES]
            if len(arches) == 1:
                f.machine = arches[0]
                src["machine"] = f"file:{base}/{arches[0]}-linux-gnu"
                break
    return pv_kernel


def _libc(system: System, host: Host, f: PlatformFacts) -> None:
    """Linux's C library and glibc version: the host's confstr, else the tree's files."""
    src = f.sources
    if host.libc:
        f.libc, f.glibc_version = parse_glibc_confstr(host.libc)
        if f.libc:
            src["libc"] = src["glibc_version"] = host.label("libc")
    if f.libc is None:
        libc, version, where = _libc_from_tree(system)
        f.libc, f.glibc_version = libc, version
        if libc and where:
            src["libc"] = where
            if version:
                src["glibc_version"] = where


def _wsl(system: System, f: PlatformFacts, pv_kernel: str | None) -> None:
    """WSL (a Linux on Windows; native Windows is not WSL) and its version."""
    src = f.sources
    is_wsl, wsl_version = detect_wsl(f.kernel or pv_kernel) if f.system in (None, "Linux") else (False, None)
    if is_wsl:
        src["is_wsl"] = src["kernel"] if "kernel" in src else "file:/proc/version"
    for marker in ("/proc/sys/fs/binfmt_misc/WSLInterop", "/usr/lib/wsl"):
        if not is_wsl and f.system in (None, "Linux") and system.exists(marker):
            is_wsl = True
            src["is_wsl"] = f"file:{marker}"
    f.is_wsl = is_wsl
    f.wsl_version = wsl_version
    if wsl_version:
        src["wsl_version"] = src["is_wsl"]


def _container(system: System, f: PlatformFacts) -> None:
    """The container this runs in (Docker, Podman, Kubernetes, Apptainer, or what /proc/1/cgroup says) and
    whether the NVIDIA devices (or Apptainer's bound driver libraries) are inside it."""
    src = f.sources
    container, csrc = None, None
    if system.exists("/.dockerenv"):
        container, csrc = "docker", "file:/.dockerenv"
    elif system.exists("/run/.containerenv"):
        container, csrc = "podman", "file:/run/.containerenv"
    if system.env.get("KUBERNETES_SERVICE_HOST"):
        container, csrc = "kubernetes", "env:KUBERNETES_SERVICE_HOST"
    # Apptainer / Singularity: its own variables, or the image's /.singularity.d (the host's /dev is bound in,
    # so its GPU access is the driver's libraries `--nv` binds under /.singularity.d/libs, not the device nodes)
    for var in ("APPTAINER_CONTAINER", "SINGULARITY_CONTAINER"):
        if container is None and system.env.get(var):
            container, csrc = "apptainer", f"env:{var}"
    if container is None and system.exists("/.singularity.d"):
        container, csrc = "apptainer", "file:/.singularity.d"
    if container is None:
        cg = system.read_text("/proc/1/cgroup")
        kind = parse_cgroup_container(cg.text) if cg.ok else None
        if kind:
            container, csrc = kind, "file:/proc/1/cgroup"
    f.container = container
    if container and csrc:
        src["container"] = csrc
        for a in kinds.ALL:  # whether each kind's devices were passed in (its device nodes, its bound libraries)
            asked = a.container_devices(container)
            if asked is None:
                continue
            field, nodes = asked
            found = [p for p in nodes if system.exists(p)]
            setattr(f, field, bool(found))
            src[field] = "file:" + (found[0] if found else ",".join(nodes) + " (absent)")


def _cpu_and_memory(system: System, host: Host, f: PlatformFacts) -> None:
    """The CPU model and count, and the memory total."""
    src = f.sources
    live = system.live
    cpuinfo = system.read_text("/proc/cpuinfo")
    model, count = parse_cpuinfo(cpuinfo.text) if cpuinfo.ok else (None, None)
    if model:
        f.cpu_model = model
        src["cpu_model"] = "file:/proc/cpuinfo"
    if host.cpu_count and (live or not count):
        f.cpu_count = host.cpu_count
        src["cpu_count"] = host.label("cpu_count")
    elif count:
        f.cpu_count = count
        src["cpu_count"] = "file:/proc/cpuinfo"
    meminfo = system.read_text("/proc/meminfo")
    mem = parse_meminfo_total_mib(meminfo.text) if meminfo.ok else None
    if mem is not None:
        f.memory_total_mib = mem
        src["memory_total_mib"] = "file:/proc/meminfo"


def probe(ctx: ProbeContext) -> ProbeOutput:
    """Platform facts for the report (never raises for an unreadable file or a missing tool)."""
    return ProbeOutput(facts={"platform": gather(ctx)})
