"""ROCm probe: version, GPUs (gfx arch, marketing name), /dev/kfd access, amdgpu, HSA/HIP env.

Sources (all gathered; disagreement between them is itself a fact for diagnosis):

- version: ``/opt/rocm/.info/version``, ``/opt/rocm-*/.info/version``, ``amd-smi version``
  ("ROCm version: 6.4.0"); ``hipconfig --version`` gives the HIP version.
- GPUs: ``rocminfo`` agents (CPU agents skipped), ``rocm_agent_enumerator`` (one gfx per
  line, ``gfx000`` = CPU before ROCm 6), ``rocm-smi --showhw`` (DID, BUS, KFD's "GFX VER"),
  ``rocm-smi --showproductname``, ``amd-smi list`` and ``amd-smi static --asic --bus`` (market name,
  ``TARGET_GRAPHICS_VERSION``, device id, BDF). HSA tools report the ISA after
  ``HSA_OVERRIDE_GFX_VERSION``; rocm-smi and amd-smi read KFD directly, so both are kept.
- The kernel's own view, without any tool: the KFD topology,
  ``/sys/class/kfd/kfd/topology/nodes/*/properties`` (``gfx_target_version``, vendor and device ids,
  ``simd_count`` > 0 for a GPU, PCI location), kept apart in ``kfd_nodes``.
- Tools are looked up on PATH, then in ``$ROCM_PATH/bin``, ``/opt/rocm/bin`` and
  ``/opt/rocm-*/bin`` inside the sysroot.
- ``/dev/kfd``: present, openable read-write by this user (``System.access``), and rocminfo's
  "Unable to open /dev/kfd read-write: <reason>" line as ``kfd_error``.
- ``/sys/module/amdgpu``: the amdgpu kernel driver is loaded; ``/sys/module/amdgpu/version`` (what ``modinfo amdgpu``
  prints as ``version:``) the version AMD's packaged driver (amdgpu-dkms) declares: ``6.10.5``; the kernel's in-tree
  amdgpu declares none, so the file is absent. rocminfo reads the same file ("ROCk module version 6.7.0 is loaded").
- env: ``HSA_OVERRIDE_GFX_VERSION``, ``HIP_VISIBLE_DEVICES``, ``ROCR_VISIBLE_DEVICES``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from stackdoctor.model.facts import KfdNode, RocmFacts, RocmGpu, normalise_smi_gfx
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.system import CommandResult, System

__all__ = [
    "KFD_NODES",
    "RocminfoAgent",
    "RocminfoReport",
    "kfd_gfx",
    "kfd_node",
    "normalise_smi_gfx",
    "parse_amd_smi_list",
    "parse_amd_smi_static",
    "parse_amd_smi_version",
    "parse_hipconfig_version",
    "parse_kfd_properties",
    "parse_rocm_agent_enumerator",
    "parse_rocm_smi_kv",
    "parse_rocm_smi_showhw",
    "parse_rocm_version_file",
    "parse_rocminfo",
    "probe",
]

# ---------------------------------------------------------------------------- parsers

_VERSION = re.compile(r"(\d+\.\d+(?:\.\d+)?)")


def parse_rocm_version_file(text: str) -> str | None:
    """``${ROCM_PATH}/.info/version`` -> "6.3.3" (build suffix dropped).

    The file holds ``major.minor.patch-build`` (ROCm/tensorflow-upstream PR #1504's reader splits the
    patch at "-"; DeepSpeed PR #5815 and ROCm/TransformerEngine PR #368 read the same file).
    Shape (illustration, not a capture)::

        6.3.3-74
    """
    for line in (text or "").splitlines():
        m = re.match(r"^\s*(\d+\.\d+(?:\.\d+)?)", line)
        if m:
            return m.group(1)
    return None


def parse_hipconfig_version(text: str) -> str | None:
    """``hipconfig --version`` -> the HIP version, build suffix dropped.

    Samples: ``6.0.32830-d62f6a171`` (ROCm 6.0, CHIP-SPV/chipStar issue #818) -> "6.0.32830";
    ``7.2.53211-9999`` (Ubuntu's hipcc-rocm, ROCm/llvm-project issue #3291) -> "7.2.53211".
    hipconfig prints no newline and may print warnings first; the last version-looking token wins.
    """
    found = None
    for m in re.finditer(r"(?<![\w.])(\d+\.\d+\.\d+)(?:-[0-9A-Za-z.]+)?", text or ""):
        found = m.group(1)
    return found


def parse_amd_smi_version(text: str) -> dict[str, str]:
    """``amd-smi version`` as a dict of its ``Key: value`` fields split on ``|``.

    Sample (ROCm/k8s-device-plugin issue #157)::

        AMDSMI Tool: 25.3.0+ede62f2 | AMDSMI Library version: 25.3.0 | ROCm version: 6.4.0 | amdgpu version: ... | amd_hsmp version: N/A
    """
    out: dict[str, str] = {}
    for line in (text or "").splitlines():
        for part in line.split("|"):
            key, sep, value = part.partition(":")
            if sep and key.strip():
                out[key.strip()] = value.strip()
    return out


_GFX = re.compile(r"^gfx[0-9a-f]{3,5}$")


def parse_rocm_agent_enumerator(text: str) -> list[str]:
    """gfx names of the GPU agents, one per line; ``gfx000`` (the CPU before ROCm 6) skipped.

    Shell prompts and ``# comments`` in a pasted capture are ignored. Sample (c27)::

        gfx000
        gfx1102
        gfx1102
    """
    out: list[str] = []
    for line in (text or "").splitlines():
        token = line.split("#", 1)[0].strip()
        if _GFX.match(token) and token != "gfx000":
            out.append(token)
    return out


@dataclass
class RocminfoAgent:
    name: str | None = None  # "gfx942" for GPUs, the CPU model for CPUs
    marketing_name: str | None = None
    uuid: str | None = None
    device_type: str | None = None  # "GPU" | "CPU" | other (e.g. an NPU) | None when not shown
    compute_units: int | None = None
    chip_id: str | None = None  # "0x74a1"
    node: int | None = None

    @property
    def is_gpu(self) -> bool:
        if self.device_type is not None:
            return self.device_type.upper() == "GPU"
        return bool(self.name and _GFX.match(self.name) and self.name != "gfx000")


@dataclass
class RocminfoReport:
    module_loaded: bool | None = None  # "ROCk module is loaded" / "... is NOT loaded"
    module_version: str | None = None  # "ROCk module version 6.7.0 is loaded"
    kfd_error: str | None = None  # "Unable to open /dev/kfd read-write: Permission denied"
    agents: list[RocminfoAgent] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # other diagnostic lines before the attributes

    @property
    def gpus(self) -> list[RocminfoAgent]:
        return [a for a in self.agents if a.is_gpu]


_AGENT = re.compile(r"^\s*Agent\s+\d+\s*$")
_FIELD = re.compile(r"^(\s*)([A-Za-z][A-Za-z .()]*?):\s*(.*?)\s*$")


def _int_prefix(value: str) -> int | None:
    m = re.match(r"^\s*(\d+)", value)
    return int(m.group(1)) if m else None


def parse_rocminfo(text: str) -> RocminfoReport:
    """``rocminfo`` output: module state, /dev/kfd failure, and its HSA agents.

    Agent blocks start at ``Agent N``; a capture without banners (a grep, or a partial paste)
    is read as one block. Only an agent's own fields count (the first ``Name:`` of a block;
    the ``ISA Info`` section's ``Name: amdgcn-amd-amdhsa--gfx1102`` is not a name). Sample
    (c30, one MI300X agent, partial)::

          Name:                    gfx942
          Uuid:                    GPU-8af705259683161c
          Marketing Name:          AMD Instinct MI300X
          Device Type:             GPU
          Chip ID:                 29857(0x74a1)

    Failure sample (ROCm/ROCm-docker issue #116)::

        ROCk module is loaded
        Unable to open /dev/kfd read-write: Permission denied
        Failed to get user name to check for video group membership
    """
    rep = RocminfoReport()
    blocks: list[list[str]] = [[]]
    seen_agent = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if _rocminfo_status_line(rep, line.strip(), seen_agent):
            continue
        if _AGENT.match(line):
            seen_agent = True
            blocks.append([])
            continue
        blocks[-1].append(line)
    if seen_agent:
        blocks = blocks[1:]
    for block in blocks:
        agent = _rocminfo_agent(block)
        if agent is not None:
            rep.agents.append(agent)
    return rep


def _rocminfo_status_line(rep: RocminfoReport, s: str, seen_agent: bool) -> bool:
    """A line about the module, /dev/kfd or a failure before the first agent, kept in ``rep``; False for others."""
    m = re.match(r"^ROCk module(?: version (\S+))? is (NOT )?loaded", s)
    if m:
        rep.module_loaded = m.group(2) is None
        rep.module_version = m.group(1)
        return True
    if s.startswith("Unable to open /dev/kfd"):
        rep.kfd_error = s
        return True
    if not seen_agent and (
        s.startswith(("hsa api call failure", "Call returned", "Failed to get user name")) or s.endswith("group")
    ) and ":" not in s.split(" ", 1)[0]:
        rep.messages.append(s)
        return True
    return False


# an agent's own fields, each kept the first time it is seen: RocminfoAgent attribute and how its value is read
_AGENT_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "Name": ("name", lambda v: v or None),
    "Marketing Name": ("marketing_name", lambda v: v or None),
    "Uuid": ("uuid", lambda v: v or None),
    "Device Type": ("device_type", lambda v: v or None),
    "Compute Unit": ("compute_units", lambda v: _int_prefix(v)),
    "Node": ("node", lambda v: _int_prefix(v)),
    "Chip ID": ("chip_id", lambda v: _chip_id(v)),
}


def _chip_id(value: str) -> str | None:
    """``29857(0x74a1)`` -> ``0x74a1``; the value as it is when it has no hexadecimal form."""
    hx = re.search(r"\((0x[0-9a-fA-F]+)\)", value)
    return hx.group(1).lower() if hx else (value or None)


def _rocminfo_agent(block: list[str]) -> RocminfoAgent | None:
    """One agent block's own fields (those at the indent of its first ``Name:`` that is not an ISA's); None when
    the block has no named agent."""
    agent = RocminfoAgent()
    got = False
    base_indent: int | None = None
    for line in block:
        fm = _FIELD.match(line)
        if not fm:
            continue
        indent, key, value = len(fm.group(1)), fm.group(2).strip(), fm.group(3)
        if key == "Name" and base_indent is None and not value.startswith("amdgcn-"):
            base_indent = indent
        if base_indent is None or indent != base_indent:
            continue
        got = True
        spec = _AGENT_FIELDS.get(key)
        if spec is not None and getattr(agent, spec[0]) is None:
            setattr(agent, spec[0], spec[1](value))
    return agent if got and agent.name else None


def parse_rocm_smi_showhw(text: str) -> list[dict[str, str]]:
    """``rocm-smi --showhw`` table rows keyed by header (``GPU``, ``DID``, ``GFX VER``, ``BUS`` ...).

    Headers are separated by two or more spaces (``GFX VER``, ``PARTITION ID`` hold one);
    values by whitespace. Sample (c27)::

        GPU  NODE  DID     GUID   GFX VER   GFX RAS  SDMA RAS  UMC RAS  VBIOS              BUS           PARTITION ID
        0    1     0x7480  3799   gfx11002  N/A      N/A       N/A      113-APM7076OC-100  0000:03:00.0  0
    """
    header: list[str] | None = None
    rows: list[dict[str, str]] = []
    for line in (text or "").splitlines():
        s = line.strip()
        if header is None:
            if s.startswith("GPU") and "DID" in s:
                header = re.split(r"\s{2,}", s)
            continue
        if not s or s.startswith("="):
            if rows:
                break
            continue
        values = s.split()
        if not values or not values[0].isdigit():
            continue
        rows.append(dict(zip(header, values, strict=False)))  # a short row leaves the last columns out
    return rows


_SMI_KV = re.compile(r"^GPU\[(\d+)\]\s*:\s*([^:]+?):\s*(.*?)\s*$")


def parse_rocm_smi_kv(text: str) -> dict[int, dict[str, str]]:
    """``rocm-smi`` ``GPU[i] : Key: value`` lines (``--showproductname``, ``-a``) per GPU index.

    Sample (``rocm-smi --showallinfo``, ROCm/legacy-rocm-build issue #4043)::

        GPU[0]		: Device Name: 		AMD Instinct MI300X OAM
        GPU[0]		: Device ID: 		0x74a1
    """
    out: dict[int, dict[str, str]] = {}
    for line in (text or "").splitlines():
        m = _SMI_KV.match(line.strip())
        if m:
            out.setdefault(int(m.group(1)), {}).setdefault(m.group(2).strip(), m.group(3))
    return out


def parse_amd_smi_list(text: str) -> dict[int, dict[str, str]]:
    """``amd-smi list``: ``GPU: N`` blocks of indented ``KEY: value`` lines, per GPU index.

    Shape (the same block layout ``amd-smi partition`` prints, ROCm/legacy-rocm-build issue #4477)::

        GPU: 0
            BDF: 0000:05:00.0
            UUID: abff74a1-0000-1000-80d1-3c23a9580558
    """
    out: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in (text or "").splitlines():
        m = re.match(r"^GPU:\s*(\d+)\s*$", line.strip())
        if m and not line.startswith((" ", "\t")):
            current = out.setdefault(int(m.group(1)), {})
            continue
        if current is None:
            continue
        key, sep, value = line.strip().partition(":")
        if sep and key and line.startswith((" ", "\t")):
            current.setdefault(key.strip(), value.strip())
        elif line.strip() and not line.startswith((" ", "\t")):
            current = None
    return out


def parse_amd_smi_static(text: str) -> dict[int, dict[str, str]]:
    """``amd-smi static``: ``GPU: N`` blocks of indented sections (``ASIC:``, ``BUS:``, ...) of ``KEY: value``
    lines, per GPU index, keys as ``SECTION.KEY``.

    Real sample (``amd-smi static --bus --ifwi --asic ...`` on an MI350X, ROCm/rocm-systems PR 2987)::

        GPU: 0
            ASIC:
                MARKET_NAME: AMD Instinct MI350X
                DEVICE_ID: 0x75a0
                TARGET_GRAPHICS_VERSION: gfx950
            BUS:
                BDF: 0000:05:00.0

    -> ``{0: {"ASIC.MARKET_NAME": "AMD Instinct MI350X", "ASIC.DEVICE_ID": "0x75a0",
    "ASIC.TARGET_GRAPHICS_VERSION": "gfx950", "BUS.BDF": "0000:05:00.0"}}``. Deeper levels (lists of
    cache or VRAM entries) keep the innermost section name.
    """
    out: dict[int, dict[str, str]] = {}
    current: dict[str, str] | None = None
    section_indent = -1
    section = ""
    for raw in (text or "").splitlines()[:20000]:
        line = raw[:1000].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" \t"))
        m = re.match(r"^GPU:\s*(\d{1,4})\s*$", line.strip())
        if m and indent == 0:
            current = out.setdefault(int(m.group(1)), {})
            section, section_indent = "", -1
            continue
        if indent == 0:
            current = None
            continue
        if current is None:
            continue
        key, sep, value = line.strip().partition(":")
        if not sep or not key or " " in key.strip():
            continue
        key, value = key.strip(), value.strip()
        if not value:
            section, section_indent = key, indent
            continue
        if section and indent <= section_indent:
            section, section_indent = "", -1
        current.setdefault(f"{section}.{key}" if section else key, value)
    return out


def parse_kfd_properties(text: str) -> dict[str, int]:
    """A KFD topology node's ``properties`` file: one ``name value`` pair per line, values integers.

    Real sample (``/sys/class/kfd/kfd/topology/nodes/1/properties`` of a gfx1151 APU, lemonade-sdk/lemonade
    PR 419)::

        cpu_cores_count 0
        simd_count 64
        gfx_target_version 110501
        vendor_id 4098
        device_id 5510
        location_id 49664
        domain 0
        drm_render_minor 128

    Lines that are not a lower-case name and a decimal integer (a shell prompt, a paste's noise) are skipped.
    """
    out: dict[str, int] = {}
    for line in (text or "").splitlines()[:400]:
        m = re.fullmatch(r"\s*([a-z][a-z0-9_]{0,63})\s+(\d{1,20})\s*", line[:200])
        if m and m.group(1) not in out:
            out[m.group(1)] = int(m.group(2))
    return out


def kfd_gfx(version: int | None) -> str | None:
    """KFD's ``gfx_target_version`` as the LLVM target it names: 100301 -> "gfx1031", 90010 -> "gfx90a".

    The kernel encodes major * 10000 + minor * 100 + stepping (amdgpu ``kfd_device.c``: Navy Flounder,
    the RX 6700 XT, is 100301; MI300X 90402); the LLVM name writes minor and stepping as one hex digit
    each. 0 (a CPU node) and values outside that shape are None.
    """
    if not version or version < 10000:
        return None
    major, minor, stepping = version // 10000, (version // 100) % 100, version % 100
    if minor > 15 or stepping > 15 or major > 99:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def kfd_node(node: int, props: dict[str, int]) -> KfdNode | None:
    """A GPU node from its parsed ``properties`` (None for a CPU node: ``simd_count`` 0 or absent)."""
    simd = props.get("simd_count")
    if not simd:
        return None
    gtv = props.get("gfx_target_version")
    loc, domain = props.get("location_id"), props.get("domain")
    bus_id = None
    if loc is not None and 0 < loc < 1 << 16:
        bus_id = f"{domain or 0:04x}:{loc >> 8:02x}:{(loc & 0xFF) >> 3:02x}.{loc & 0x7}"
    vendor, device = props.get("vendor_id"), props.get("device_id")
    return KfdNode(
        node=node,
        gfx_target_version=gtv,
        gfx=kfd_gfx(gtv),
        vendor_id=f"0x{vendor:04x}" if vendor else None,
        device_id=f"0x{device:04x}" if device else None,
        simd_count=simd,
        bus_id=bus_id,
        drm_render_minor=props.get("drm_render_minor"),
        local_mem_size=props.get("local_mem_size"),
    )


KFD_NODES = "/sys/class/kfd/kfd/topology/nodes"


def _kfd_nodes(system: System) -> list[KfdNode]:
    nodes: list[KfdNode] = []
    for entry in sorted(system.listdir(KFD_NODES), key=lambda e: (len(e), e))[:256]:
        if not entry.isdigit():
            continue
        path = f"{KFD_NODES}/{entry}/properties"
        r = system.read_text(path)
        if not r.ok:
            continue
        n = kfd_node(int(entry), parse_kfd_properties(r.text))
        if n is not None:
            n.source = path
            nodes.append(n)
    return nodes


# ---------------------------------------------------------------------------- gathering


def _tool(system: System, name: str) -> str | None:
    """The tool on PATH, else ``<root>/bin/<name>`` for each ROCm root inside the sysroot."""
    found = system.which(name)
    if found:
        return found
    for base in _rocm_roots(system):
        p = f"{base}/bin/{name}"
        if system.is_executable(p):
            return str(system.path(p))
    return None


def _rocm_roots(system: System) -> list[str]:
    """``$ROCM_PATH``, ``/opt/rocm``, then ``/opt/rocm-*`` (newest name last), as machine paths."""
    roots: list[str] = []
    env_root = (system.env.get("ROCM_PATH") or "").rstrip("/")
    if env_root.startswith("/"):
        roots.append(env_root)
    roots.append("/opt/rocm")
    roots += [f"/opt/{d}" for d in system.listdir("/opt") if d.startswith("rocm-")]
    return list(dict.fromkeys(roots))


_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("hipconfig", "--version"),
    ("amd-smi", "version"),
    ("rocminfo",),
    ("rocm_agent_enumerator",),
    ("rocm-smi", "--showhw"),
    ("rocm-smi", "--showproductname"),
    ("amd-smi", "list"),
    ("amd-smi", "static", "--asic", "--bus"),
)


def _run_all(ctx: ProbeContext, facts: RocmFacts) -> dict[tuple[str, ...], CommandResult]:
    """Run the ROCm tools that exist, concurrently (each bounded by the tool timeout)."""
    todo: list[tuple[tuple[str, ...], str]] = []
    for argv in _COMMANDS:
        exe = _tool(ctx.system, argv[0])
        if exe is not None:
            todo.append((argv, exe))
    out: dict[tuple[str, ...], CommandResult] = {}
    if not todo:
        return out
    with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="rocm-tool") as pool:
        futures = {argv: pool.submit(ctx.system.run, [exe, *argv[1:]], timeout=ctx.timeout_s) for argv, exe in todo}
        for argv, fut in futures.items():
            res = fut.result()
            out[argv] = res
            if not res.ok:
                msg = res.describe_failure()
                if msg:
                    facts.tool_errors[" ".join(argv)] = msg
    return out


def gather(ctx: ProbeContext) -> RocmFacts:
    system = ctx.system
    f = RocmFacts()
    _version_files(system, f)
    results = _run_all(ctx, f)
    _tool_versions(f, results)
    report, gpus = _hsa_gpus(f, results)
    _rocm_smi_gpus(f, gpus, results)
    _amd_smi_gpus(f, gpus, results)
    f.gpus = gpus  # which are integrated (APUs) follows from the gfx target: stackdoctor.reconcile

    # the kernel's own view: KFD topology (no tool needed)
    f.kfd_nodes = _kfd_nodes(system)
    if f.kfd_nodes:
        f.sources["kfd_nodes"] = f"file:{KFD_NODES}/*/properties"
    _kfd_and_driver(system, f, report)
    _amdgpu_version(system, f, report)
    _environment(system, f)
    return f


def _version_files(system: System, f: RocmFacts) -> None:
    """The release each ROCm root's ``.info/version`` names (every one kept; the first is the provisional value)."""
    src = f.sources
    for base in _rocm_roots(system):
        r = system.read_text(f"{base}/.info/version")
        if r.ok:
            v = parse_rocm_version_file(r.text)
            if v:
                f.observed.setdefault("version", {})[f"file:{base}/.info/version"] = v
            if v and f.version is None:
                f.version = v
                src["version"] = f"file:{base}/.info/version"


def _tool_versions(f: RocmFacts, results: dict[tuple[str, ...], CommandResult]) -> None:
    """HIP's version from ``hipconfig``, the ROCm release from ``amd-smi version``."""
    src = f.sources
    hip = results.get(("hipconfig", "--version"))
    if hip is not None and hip.ok:
        f.hip_version = parse_hipconfig_version(hip.stdout)
        if f.hip_version:
            src["hip_version"] = "hipconfig --version"
            f.observed.setdefault("hip_version", {})["hipconfig --version"] = f.hip_version
    amdsmi_ver = results.get(("amd-smi", "version"))
    if amdsmi_ver is not None and amdsmi_ver.ok:
        v = parse_amd_smi_version(amdsmi_ver.stdout).get("ROCm version")
        if v and _VERSION.match(v):
            f.observed.setdefault("version", {})["amd-smi version"] = _VERSION.match(v).group(1)  # type: ignore[union-attr]
            if f.version is None:
                f.version = _VERSION.match(v).group(1)  # type: ignore[union-attr]
                src["version"] = "amd-smi version"


def _hsa_gpus(f: RocmFacts, results: dict[tuple[str, ...], CommandResult]) -> tuple[RocminfoReport, list[RocmGpu]]:
    """The GPUs HSA shows (rocminfo's agents, rocm_agent_enumerator's targets) and rocminfo's report."""
    src = f.sources
    info = results.get(("rocminfo",))
    report = parse_rocminfo((info.stdout + "\n" + info.stderr) if info is not None else "")
    if report.kfd_error:
        f.kfd_error = report.kfd_error
        src["kfd_error"] = "rocminfo"
        if info is not None and info.status == "ok" and info.signal is None and info.returncode:
            # rocminfo's last line ("Failed to get user name ...", "root is member of render group")
            # is a follow-up; the /dev/kfd line is why it failed, so the error quotes that one
            f.tool_errors["rocminfo"] = f"rocminfo exited with code {info.returncode}: {report.kfd_error}"
    enum = results.get(("rocm_agent_enumerator",))
    enum_gfx = parse_rocm_agent_enumerator(enum.stdout) if enum is not None and enum.ok else []
    gpus: list[RocmGpu] = []
    for i, agent in enumerate(report.gpus):
        g = RocmGpu(index=i, name=agent.marketing_name, gfx=agent.name, uuid=agent.uuid, compute_units=agent.compute_units, node=agent.node)
        g.sources.update({k: "rocminfo" for k in ("name", "gfx", "uuid", "node") if getattr(g, k) is not None})
        gpus.append(g)
    if gpus:
        src["gpus"] = "rocminfo"
    for i, gfx in enumerate(enum_gfx):
        if i >= len(gpus):
            gpus.append(RocmGpu(index=i, gfx=gfx, sources={"gfx": "rocm_agent_enumerator"}))
            src.setdefault("gpus", "rocm_agent_enumerator")
        elif gpus[i].gfx is None:
            gpus[i].gfx = gfx
            gpus[i].sources["gfx"] = "rocm_agent_enumerator"
    return report, gpus


def _rocm_smi_gpus(f: RocmFacts, gpus: list[RocmGpu], results: dict[tuple[str, ...], CommandResult]) -> None:
    """rocm-smi's hardware view straight from KFD (``--showhw``) and its product names."""
    src = f.sources
    hw = results.get(("rocm-smi", "--showhw"))
    rows = parse_rocm_smi_showhw(hw.stdout) if hw is not None and hw.stdout else []
    for row in rows:
        idx = int(row.get("GPU", "-1"))
        if idx < 0:
            continue
        while len(gpus) <= idx:
            gpus.append(RocmGpu(index=len(gpus)))
            src.setdefault("gpus", "rocm-smi --showhw")
        g = gpus[idx]
        _fill(g, "device_id", _na(row.get("DID")), "rocm-smi --showhw")
        _fill(g, "bus_id", _na(row.get("BUS")), "rocm-smi --showhw")
        g.smi_gfx_version = _na(row.get("GFX VER"))
        _fill(g, "gfx", normalise_smi_gfx(g.smi_gfx_version), "rocm-smi --showhw")
        node = _na(row.get("NODE"))
        _fill(g, "node", int(node) if node and node.isdigit() else None, "rocm-smi --showhw")
    names = results.get(("rocm-smi", "--showproductname"))
    for idx, kv in (parse_rocm_smi_kv(names.stdout) if names is not None and names.stdout else {}).items():
        if idx < len(gpus):
            _fill(gpus[idx], "name", _na(kv.get("Card series") or kv.get("Device Name")), "rocm-smi --showproductname")


def _amd_smi_gpus(f: RocmFacts, gpus: list[RocmGpu], results: dict[tuple[str, ...], CommandResult]) -> None:
    """amd-smi's ``list`` (bus, UUID, node) and ``static`` (market name, device id, target, compute units)."""
    src = f.sources
    amdlist = results.get(("amd-smi", "list"))
    for idx, kv in (parse_amd_smi_list(amdlist.stdout) if amdlist is not None and amdlist.ok else {}).items():
        while len(gpus) <= idx:
            gpus.append(RocmGpu(index=len(gpus)))
            src.setdefault("gpus", "amd-smi list")
        g = gpus[idx]
        _fill(g, "bus_id", _na(kv.get("BDF")), "amd-smi list")
        _fill(g, "uuid", _na(kv.get("UUID")), "amd-smi list")
        node = _na(kv.get("NODE_ID"))
        _fill(g, "node", int(node) if node and node.isdigit() else None, "amd-smi list")
    static = results.get(("amd-smi", "static", "--asic", "--bus"))
    for idx, kv in (parse_amd_smi_static(static.stdout) if static is not None and static.ok else {}).items():
        while len(gpus) <= idx:
            gpus.append(RocmGpu(index=len(gpus)))
            src.setdefault("gpus", "amd-smi static")
        g = gpus[idx]
        _fill(g, "name", _na(kv.get("ASIC.MARKET_NAME")), "amd-smi static")
        _fill(g, "device_id", _na(kv.get("ASIC.DEVICE_ID")), "amd-smi static")
        _fill(g, "bus_id", _na(kv.get("BUS.BDF")), "amd-smi static")
        target = _na(kv.get("ASIC.TARGET_GRAPHICS_VERSION"))
        _fill(g, "gfx", target if target and _GFX.match(target.lower()) else None, "amd-smi static")
        cu = _na(kv.get("ASIC.NUM_COMPUTE_UNITS"))
        _fill(g, "compute_units", int(cu) if cu and cu.isdigit() else None, "amd-smi static")


def _kfd_and_driver(system: System, f: RocmFacts, report: RocminfoReport) -> None:
    """/dev/kfd (there, and openable) and whether the amdgpu kernel driver is loaded."""
    src = f.sources
    f.kfd_present = system.exists("/dev/kfd")
    src["kfd_present"] = "file:/dev/kfd"
    if f.kfd_present:
        ok, why = system.access("/dev/kfd")
        f.kfd_accessible = ok
        src["kfd_accessible"] = "open(/dev/kfd, O_RDWR)"
        if not ok and f.kfd_error is None:
            f.kfd_error = f"Unable to open /dev/kfd read-write: {why}"
            src["kfd_error"] = "open(/dev/kfd, O_RDWR)"
    f.amdgpu_loaded = system.exists("/sys/module/amdgpu")
    src["amdgpu_loaded"] = "file:/sys/module/amdgpu"
    if report.module_loaded is not None and not f.amdgpu_loaded and not system.exists("/sys/module"):
        # rocminfo checked the live module list; keep its answer when the tree lacks /sys/module.
        f.amdgpu_loaded = report.module_loaded
        src["amdgpu_loaded"] = "rocminfo (ROCk module line)"
    if f.kfd_nodes and not f.amdgpu_loaded and not system.exists("/sys/module"):
        # a tree without /sys/module: the KFD topology exists only while amdgpu (which carries KFD) is loaded
        f.amdgpu_loaded = True
        src["amdgpu_loaded"] = "file:/sys/class/kfd (KFD topology)"


def _amdgpu_version(system: System, f: RocmFacts, report: RocminfoReport) -> None:
    """The loaded amdgpu's own version (amdgpu-dkms declares one; the in-tree driver none): its /sys file, rocminfo's line."""
    seen: dict[str, str] = {}
    r = system.read_text("/sys/module/amdgpu/version")
    if r.ok and _MODULE_VERSION.match(r.text.strip()):
        seen["file:/sys/module/amdgpu/version"] = r.text.strip()
    if report.module_version and _MODULE_VERSION.match(report.module_version):
        seen["rocminfo (ROCk module line)"] = report.module_version
    if seen:
        f.observed["amdgpu_version"] = seen
        f.sources["amdgpu_version"], f.amdgpu_version = next(iter(seen.items()))


_MODULE_VERSION = re.compile(r"^\d+(\.\d+){1,4}$")


def _environment(system: System, f: RocmFacts) -> None:
    """The variables that change which GPUs ROCm shows and which target it assumes."""
    src = f.sources
    env = system.env
    f.hsa_override_gfx_version = env.get("HSA_OVERRIDE_GFX_VERSION")
    f.hip_visible_devices = env.get("HIP_VISIBLE_DEVICES")
    f.rocr_visible_devices = env.get("ROCR_VISIBLE_DEVICES")
    for key, name in (
        ("hsa_override_gfx_version", "HSA_OVERRIDE_GFX_VERSION"),
        ("hip_visible_devices", "HIP_VISIBLE_DEVICES"),
        ("rocr_visible_devices", "ROCR_VISIBLE_DEVICES"),
    ):
        if getattr(f, key) is not None:
            src[key] = f"env:{name}"


def _fill(g: RocmGpu, name: str, value: object, source: str) -> None:
    """Set ``g.<name>`` from ``source`` unless an earlier tool gave it; the source goes beside it."""
    if value is None or getattr(g, name) is not None:
        return
    setattr(g, name, value)
    g.sources[name] = source


def _na(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    return None if not value or value.upper() in ("N/A", "NA", "UNKNOWN") else value


def probe(ctx: ProbeContext) -> ProbeOutput:
    return ProbeOutput(facts={"rocm": gather(ctx)})
