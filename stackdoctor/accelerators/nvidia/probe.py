"""NVIDIA driver and GPUs: every source, each value with where it came from.

Order (all are gathered; disagreement between them is a finding for the engine, not here):

1. NVML in a child process (:mod:`stackdoctor.accelerators.nvidia.nvml`), only when ``ctx.live_driver``
   (on Windows, pynvml loads ``nvml.dll``; the driver model WDDM/TCC/MCDM comes with it).
2. ``nvidia-smi --query-gpu=... --format=csv,noheader,nounits`` (retried without ``compute_cap``
   when an old driver rejects it), then ``nvidia-smi -L`` and the plain ``nvidia-smi`` table —
   unless the first call already showed a driver failure, a hang or no tool (bounded time).
3. ``/proc/driver/nvidia/version`` and ``/sys/module/nvidia/version`` (the loaded kernel module), and
   ``/proc/driver/nvidia/gpus/*/information`` (its GPUs: model, bus location, UUID), kept apart in
   ``proc_gpus``: a witness of its own that needs neither nvidia-smi nor NVML.
4. ``libcuda.so*`` locations (WSL's ``/usr/lib/wsl/lib`` shadowing a distro copy).
5. The driver library itself: ``cuDriverGetVersion`` in a child process of stackdoctor's own
   interpreter (:mod:`stackdoctor.accelerators.nvidia.cudriver`, no ``cuInit``), like NVML only on the live
   machine and only where a ``libcuda.so`` / ``nvcuda.dll`` is found; its answer is another
   witness of the driver's CUDA level (``observed["cuda_driver_version"]["cuDriverGetVersion"]``).

Where nvidia-smi is: ``PATH`` first (what a user typing ``nvidia-smi`` gets), then on Windows
``%SystemRoot%\\System32\\nvidia-smi.exe`` (DCH drivers install it there; collect_env looks there
since pytorch/pytorch PR #49021) and ``%ProgramFiles%\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe``
(older standard drivers, not on PATH; the recorded machine w01 ran it from there). On Windows the
table's ``TCC/WDDM`` / ``Driver-Model`` column gives each GPU's driver model.

Failure outputs are facts (``smi_state``/``smi_message``/``smi_exit_code``, ``nvml_state``/``nvml_error``):
a missing tool is a plain fact (probe ``ok``); a hung one makes the probe ``timeout``.
The parsers are pure and never raise on arbitrary text.
"""

from __future__ import annotations

import ntpath
import re
import sys
import threading
from dataclasses import dataclass, field

from stackdoctor.accelerators.nvidia.cudriver import DriverCuda, query_driver_cuda
from stackdoctor.accelerators.nvidia.gpu_join import merge_gpus, observe
from stackdoctor.accelerators.nvidia.libraries import DRIVER_LIBRARY_DIRS, NVML_LIBRARY, libcuda_paths, libcuda_present, nvml_dirs, nvml_present
from stackdoctor.accelerators.nvidia.nvml import NvmlResult, query_nvml
from stackdoctor.model.facts import NvidiaFacts, NvidiaGpu, NvidiaProcGpu
from stackdoctor.model.probing import ProbeContext, ProbeOutput
from stackdoctor.system import CommandResult, System

__all__ = [
    "QUERY_FIELDS",
    "SmiFailure",
    "SmiTable",
    "find_smi",
    "parse_proc_driver_version",
    "parse_proc_gpu_information",
    "parse_smi_failure",
    "parse_smi_list",
    "parse_smi_query",
    "parse_smi_query_driver",
    "parse_smi_table",
    "parse_sys_module_version",
    "probe",
]

QUERY_FIELDS: tuple[str, ...] = (
    "index",
    "name",
    "uuid",
    "compute_cap",
    "memory.total",
    "pci.bus_id",
    "driver_version",
    "pcie.link.gen.current",
    "pcie.link.width.current",
    "power.limit",
    "mig.mode.current",
    "persistence_mode",
)
SRC_QUERY = "nvidia-smi --query-gpu"
SRC_LIST = "nvidia-smi -L"
SRC_TABLE = "nvidia-smi"
SRC_PROC = "/proc/driver/nvidia/version"
SRC_SYS = "/sys/module/nvidia/version"
SRC_CUDRIVER = "cuDriverGetVersion"  # the driver library asked directly (stackdoctor.accelerators.nvidia.cudriver)
PROC_GPUS = "/proc/driver/nvidia/gpus"

# a driver release (three digits or more: 390.157, 550.90.07), not a soname such as Tegra's and WSL's libcuda.so.1.1
_DRIVER_LIBRARY = re.compile(r"^(libcuda|libnvidia-ml)\.so\.(\d{3,}\.\d+(?:\.\d+)?)$")

_VERSION = r"\d+(?:\.\d+)+"
_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_NOT_A_VALUE = {"", "[n/a]", "n/a", "[not supported]", "[unknown error]", "[insufficient permissions]", "[gpu is lost]", "[gpu requires reset]", "err!"}


# ---------------------------------------------------------------------------- parsers

MAX_LINE = 1000  # real lines are < 200 characters; the cap keeps every parser linear on hostile input


def _lines(text: str) -> list[str]:
    return [ln[:MAX_LINE] for ln in text.splitlines()]


def _value(cell: str) -> str | None:
    cell = cell.strip()
    return None if cell.lower() in _NOT_A_VALUE or cell.startswith("[") else cell


def _to_int(cell: str | None) -> int | None:
    if cell is None:
        return None
    m = re.fullmatch(r"\s*(\d+)(?:\.0+)?\s*(?:MiB)?\s*", cell)
    return int(m.group(1)) if m else None


def _to_float(cell: str | None) -> float | None:
    if cell is None:
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*W?\s*", cell)
    return float(m.group(1)) if m else None


def _mode(cell: str | None) -> str | None:
    if cell is None:
        return None
    low = cell.strip().lower()
    if low in ("enabled", "on"):
        return "Enabled"
    if low in ("disabled", "off"):
        return "Disabled"
    return None


def parse_smi_query(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> list[NvidiaGpu]:
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` -> one :class:`NvidiaGpu` per row.

    A row (fields :data:`QUERY_FIELDS`, R550; synthetic sample)::

        0, NVIDIA GeForce RTX 4070, GPU-5c3b0e1f-..., 8.9, 12282, 00000000:2D:00.0, 550.40.07, 4, 16, 200.00, [N/A], Disabled

    Values such as ``[N/A]`` / ``[Not Supported]`` become ``None``. The driver version of each row is
    kept in ``sources`` only through :func:`parse_smi_query_driver`. Lines that do not have the
    expected number of cells (error text on stdout) are skipped.
    """
    gpus: list[NvidiaGpu] = []
    if not isinstance(text, str):
        return gpus
    for line in _lines(text):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields):
            continue
        row = dict(zip(fields, cells, strict=True))
        index = _to_int(row.get("index"))
        if index is None:
            continue
        gpu = NvidiaGpu(index=index)
        gpu.name = _value(row.get("name", ""))
        gpu.uuid = _value(row.get("uuid", ""))
        cc = _value(row.get("compute_cap", ""))
        gpu.compute_capability = cc if cc and re.fullmatch(r"\d+\.\d+", cc) else None
        gpu.memory_total_mib = _to_int(_value(row.get("memory.total", "")))
        bus = _value(row.get("pci.bus_id", ""))
        gpu.bus_id = bus if bus and re.fullmatch(_BUS_ID, bus) else None
        gpu.pcie_gen = _to_int(_value(row.get("pcie.link.gen.current", "")))
        gpu.pcie_width = _to_int(_value(row.get("pcie.link.width.current", "")))
        gpu.power_limit_w = _to_float(_value(row.get("power.limit", "")))
        gpu.mig_mode = _mode(_value(row.get("mig.mode.current", "")))
        gpu.persistence_mode = _mode(_value(row.get("persistence_mode", "")))
        for name in ("name", "uuid", "compute_capability", "memory_total_mib", "bus_id", "pcie_gen", "pcie_width", "power_limit_w", "mig_mode", "persistence_mode"):
            if getattr(gpu, name) is not None:
                gpu.sources[name] = SRC_QUERY
        gpus.append(gpu)
    return gpus


def parse_smi_query_driver(text: str, fields: tuple[str, ...] = QUERY_FIELDS) -> str | None:
    """The ``driver_version`` column of a ``--query-gpu`` answer (first row that has one), e.g. ``"550.40.07"``."""
    if "driver_version" not in fields or not isinstance(text, str):
        return None
    pos = fields.index("driver_version")
    for line in _lines(text):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) == len(fields) and re.fullmatch(_VERSION, cells[pos]):
            return cells[pos]
    return None


_LIST_RE = re.compile(r"(?:^|\s)GPU (\d+): ")


def parse_smi_list(text: str) -> list[NvidiaGpu]:
    """``nvidia-smi -L`` -> GPUs with index, full name and UUID. MIG lines (indented ``MIG ...``) are skipped.

    Sample (the format quoted in https://github.com/akash-network/provider-configs/pull/12)::

        GPU 0: Quadro RTX 4000 (UUID: GPU-c7b57be0-...)

    collect_env's copy without the UUID (``GPU 0: NVIDIA GeForce RTX 4070 Laptop GPU``) parses too.
    """
    gpus: list[NvidiaGpu] = []
    if not isinstance(text, str):
        return gpus
    for line in _lines(text):
        if line.lstrip().startswith("MIG "):
            continue
        m = _LIST_RE.search(line)
        if not m:
            continue
        rest, uuid = line[m.end():].rstrip(), None
        if rest.endswith(")") and " (UUID: " in rest:
            rest, uuid = rest[:-1].rsplit(" (UUID: ", 1)
        gpu = NvidiaGpu(index=int(m.group(1)), name=rest.strip() or None, uuid=(uuid or "").strip() or None)
        for name in ("name", "uuid"):
            if getattr(gpu, name) is not None:
                gpu.sources[name] = SRC_LIST
        gpus.append(gpu)
    return gpus


@dataclass
class SmiTable:
    """What the plain ``nvidia-smi`` table says."""

    smi_version: str | None = None  # the tool's own version (banner "NVIDIA-SMI x")
    driver_version: str | None = None  # "Driver Version" / "KMD Version"
    cuda_version: str | None = None  # "CUDA Version" / "CUDA UMD Version": "12.4"; None when ERR!/N/A/absent
    cuda_raw: str | None = None  # the cell as printed: "12.4", "ERR!", "N/A"; None when the banner has no CUDA field
    driver_label: str | None = None  # "Driver Version" | "KMD Version"
    gpus: list[NvidiaGpu] = field(default_factory=list)


_BANNER_SMI = re.compile(r"NVIDIA-SMI\s+(" + _VERSION + ")")
_BANNER_DRIVER = re.compile(r"((?:Driver|KMD) Version):\s*(" + _VERSION + ")")
_BANNER_CUDA = re.compile(r"CUDA (?:UMD )?Version:\s*(\d+\.\d+|N/A|ERR!)")
_ROW_MODES = ("On", "Off", "WDDM", "TCC", "MCDM", "N/A", "ERR!")
_LAST_CELL = ("Enabled", "Disabled", "N/A", "ERR!")


def _row1(line: str) -> NvidiaGpu | None:
    """``|   0  NVIDIA GeForce RTX 4070        Off |   00000000:2D:00.0  On |  N/A |`` -> a GPU, else None."""
    cells = line.split("|")
    if len(cells) < 3 or cells[0].strip():
        return None
    words, bus = cells[1].split(), cells[2].split()
    if len(words) < 2 or not words[0].isdigit() or words[-1] not in _ROW_MODES or not bus:
        return None
    if not re.fullmatch(_BUS_ID, bus[0]):
        return None
    gpu = NvidiaGpu(index=int(words[0]))
    name = cells[1].strip()[len(words[0]):].strip()
    gpu.name = name[: len(name) - len(words[-1])].strip() or None
    if words[-1] in ("WDDM", "TCC", "MCDM"):
        gpu.driver_model = words[-1]
    else:
        gpu.persistence_mode = _mode(words[-1])
    gpu.bus_id = bus[0]
    return gpu


def _total(cell: str, unit: str) -> str | None:
    """``"  430MiB /  12282MiB "`` -> ``"12282"`` (the part after the slash, without its unit)."""
    if "/" not in cell:
        return None
    last = cell.rsplit("/", 1)[1].strip()
    if last.endswith(unit) and re.fullmatch(r"\d+", last[: -len(unit)].strip()):
        return last[: -len(unit)].strip()
    return None


def parse_smi_table(text: str) -> SmiTable:
    """The plain ``nvidia-smi`` screen -> versions and GPUs, for every known layout; never raises.

    Handles the pre-2020 79-column box, the 2020-2024 layouts, R550+/R580 (``|---`` vs ``+---``), the R610
    ``KMD Version`` / ``CUDA UMD Version`` banner, and Windows (``TCC/WDDM`` / ``Driver-Model`` column,
    where the row shows ``WDDM``/``TCC`` in place of ``On``/``Off``). Real sample (c14, driver 550.40.07)::

        | NVIDIA-SMI 550.40.07              Driver Version: 550.40.07      CUDA Version: 12.4     |
        |-----------------------------------------+------------------------+----------------------+
        | GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
        ...
        |   0  NVIDIA GeForce RTX 4070        Off |   00000000:2D:00.0  On |                  N/A |
        |  0%   36C    P5             17W /  200W |     430MiB /  12282MiB |      1%      Default |
        |                                         |                        |                  N/A |

    Names in this table may be truncated (``NVIDIA GeForce ...``); prefer ``-L`` / ``--query-gpu`` names.
    """
    table = SmiTable()
    if not isinstance(text, str):
        return table
    current: NvidiaGpu | None = None
    stage = 0  # rows seen for the current GPU
    for raw in _lines(text):
        line = raw.rstrip()
        _read_banner(table, line)
        if "Processes:" in line:
            break
        gpu = _row1(line) if line.startswith("|") else None
        if gpu is not None:
            current = gpu
            table.gpus.append(current)
            stage = 1
            continue
        if current is None or not line.startswith("|"):
            if line.startswith("+"):
                current = None
            continue
        stage = _read_gpu_row(current, line.split("|")[1:-1], stage)
    for gpu in table.gpus:
        for name in ("name", "bus_id", "persistence_mode", "driver_model", "memory_total_mib", "power_limit_w", "mig_mode"):
            if getattr(gpu, name) is not None:
                gpu.sources[name] = SRC_TABLE
    return table


def _read_banner(table: SmiTable, line: str) -> None:
    """The banner's nvidia-smi, driver and CUDA versions, each the first one seen."""
    if table.smi_version is None and (m := _BANNER_SMI.search(line)):
        table.smi_version = m.group(1)
    if table.driver_version is None and (m := _BANNER_DRIVER.search(line)):
        table.driver_label, table.driver_version = m.group(1), m.group(2)
    if table.cuda_raw is None and (m := _BANNER_CUDA.search(line)):
        table.cuda_raw = m.group(1)
        table.cuda_version = m.group(1) if re.fullmatch(r"\d+\.\d+", m.group(1)) else None


def _read_gpu_row(gpu: NvidiaGpu, cells: list[str], stage: int) -> int:
    """The second row of a GPU's box (memory and power totals) or its third (the MIG mode alone in the last cell);
    returns the stage after this row."""
    if stage == 1:
        for cell in cells:
            mem = _total(cell, "MiB")
            if mem is not None:
                gpu.memory_total_mib = int(mem)
            elif (watts := _total(cell, "W")) is not None:
                gpu.power_limit_w = float(watts)
        return 2
    if stage == 2:
        if cells and all(not c.strip() for c in cells[:-1]) and cells[-1].strip() in _LAST_CELL:
            gpu.mig_mode = _mode(cells[-1].strip())
        return 3
    return stage


@dataclass
class SmiFailure:
    """nvidia-smi answered with a failure text. ``state``: no-driver | lib-mismatch | no-devices | error."""

    state: str
    message: str  # the verbatim line
    nvml_library_version: str | None = None  # "570.124" from "NVML library version: 570.124"


_FAILURES: tuple[tuple[str, str], ...] = (
    ("couldn't communicate with the NVIDIA driver", "no-driver"),
    ("Driver/library version mismatch", "lib-mismatch"),
    ("Driver Not Loaded", "no-driver"),
    ("No devices were found", "no-devices"),
    ("No supported GPUs were found", "no-devices"),
    ("Unable to determine the number of GPUs", "no-devices"),
    ("Failed to initialize NVML", "error"),
)


def parse_smi_failure(text: str) -> SmiFailure | None:
    """nvidia-smi's failure text -> :class:`SmiFailure`, or ``None`` when the text shows no known failure.

    Real sample (c18, https://github.com/tinygrad/open-gpu-kernel-modules/issues/47, exit code 18)::

        Failed to initialize NVML: Driver/library version mismatch
        NVML library version: 570.124

    Also: ``NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest
    NVIDIA driver is installed and running.`` (no-driver) and ``No devices were found`` (no-devices).
    """
    if not isinstance(text, str):
        return None
    lines = [ln.strip() for ln in _lines(text)]
    for needle, state in _FAILURES:
        for ln in lines:
            if needle.lower() in ln.lower():
                lib = re.search(r"NVML library version:\s*(" + _VERSION + ")", text)
                return SmiFailure(state, ln, lib.group(1) if lib else None)
    return None


_PROC_RE = re.compile(r"NVRM version:\s*(.*?Kernel Module(?: for \S+)?)\s+(" + _VERSION + r")\b")


def parse_proc_driver_version(text: str) -> tuple[str | None, str | None]:
    """``/proc/driver/nvidia/version`` -> (kernel module version, flavour ``"open"``/``"proprietary"``).

    Real sample (c40, open module 565.57.01, https://github.com/nix-community/nixGL/issues/186)::

        NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  (dvs-builder@U16-A24-9-2)  Thu Oct 10 12:15:00 UTC 2024
        GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)

    The proprietary module prints ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  375.74  <date>`` (uv's sample).
    """
    if not isinstance(text, str):
        return None, None
    m = _PROC_RE.search("\n".join(_lines(text)[:5]))
    if not m:
        return None, None
    flavor = "open" if "Open Kernel Module" in m.group(1) else "proprietary"
    return m.group(2), flavor


_PROC_INFO_KEY = re.compile(r"^\s*([A-Za-z][A-Za-z ]{0,40}?)\s*:\s*(.*?)\s*$")


def parse_proc_gpu_information(text: str) -> NvidiaProcGpu | None:
    """``/proc/driver/nvidia/gpus/<bus>/information`` -> :class:`NvidiaProcGpu`, or None when it names no GPU.

    ``Key: value`` lines, padded with spaces or tabs. Real sample (NVIDIA L4, canonical/snapd PR 14893)::

        Model: \t\t NVIDIA L4
        IRQ:   \t\t 16
        GPU UUID: \t GPU-3291dfa4-fcc4-0110-615b-c894a0d7c689
        Video BIOS: \t 95.04.65.00.13
        Bus Type: \t PCIe
        ...
        Bus Location: \t 0000:70:00.0
        Device Minor: \t 0
        GPU Excluded:\t No

    Older drivers print ``Blacklisted:`` for ``GPU Excluded:`` and may omit ``Device Minor`` (GTX 650,
    canonical/lxd issue 3950); before the GPU is initialised the UUID and BIOS are question marks
    (``GPU-????????-????-...``), which are not values.
    """
    if not isinstance(text, str):
        return None
    kv: dict[str, str] = {}
    for line in _lines(text)[:200]:
        m = _PROC_INFO_KEY.match(line)
        if m and m.group(1).strip() not in kv:
            kv[m.group(1).strip()] = m.group(2)
    name = kv.get("Model") or None
    bus = kv.get("Bus Location", "")
    bus_id = bus if re.fullmatch(_BUS_ID, bus) else None
    if name is None and bus_id is None:
        return None
    uuid = kv.get("GPU UUID", "")
    minor = kv.get("Device Minor", "")
    bios = kv.get("Video BIOS", "")
    excluded = (kv.get("GPU Excluded") or kv.get("Blacklisted") or "").lower()
    return NvidiaProcGpu(
        bus_id=bus_id,
        name=name,
        uuid=uuid if re.fullmatch(r"GPU-[0-9A-Fa-f-]{8,64}", uuid) else None,
        device_minor=int(minor) if re.fullmatch(r"\d{1,6}", minor) else None,
        video_bios=bios if bios and "?" not in bios else None,
        excluded={"yes": True, "no": False}.get(excluded),
    )


def parse_sys_module_version(text: str) -> str | None:
    """``/sys/module/nvidia/version`` -> the loaded module's version: ``"550.144.03\\n"`` -> ``"550.144.03"``."""
    if not isinstance(text, str):
        return None
    m = re.fullmatch(r"\s*(" + _VERSION + r")\s*", text)
    return m.group(1) if m else None


# ---------------------------------------------------------------------------- probe


WINDOWS_SMI: tuple[tuple[str, str, str], ...] = (
    # (environment variable, its default, the path under it)
    ("SystemRoot", "C:\\Windows", "System32\\nvidia-smi.exe"),
    ("ProgramFiles", "C:\\Program Files", "NVIDIA Corporation\\NVSMI\\nvidia-smi.exe"),
)


def find_smi(system: System) -> tuple[str, str] | None:
    """(path as the machine names it, path to run) of nvidia-smi: on PATH, else (Windows) where the
    driver installs it, looked up under the sysroot (``C:\\...`` is ``<root>/C/...``); None when absent."""
    found = system.which("nvidia-smi")
    if found:
        return found, found
    if not system.windows:
        return None
    for var, default, rel in WINDOWS_SMI:
        shown = ntpath.join(system.getenv(var) or default, rel)
        if system.is_file(shown):
            return shown, str(system.path(shown))
    return None


def _smi_path(system: System, facts: NvidiaFacts) -> str | None:
    """Where nvidia-smi is (recorded in ``facts.smi_path``); None, with ``smi_state`` said, when there is none to run."""
    where = find_smi(system)
    if where is None:
        blocked = system.unrunnable("nvidia-smi")
        if blocked is None:
            facts.smi_state = "absent"
            return None
        # installed but not executable: a tool that cannot run, not a machine without one
        facts.smi_path = blocked
        facts.smi_state = "error"
        facts.smi_message = f"nvidia-smi could not be run: {blocked} is not executable"
        return None
    facts.smi_path, path = where
    return path


def _query_smi(ctx: ProbeContext, path: str) -> tuple[CommandResult, tuple[str, ...]]:
    """``nvidia-smi --query-gpu`` with every field, again without ``compute_cap`` when an old driver rejects it."""

    def query(fields: tuple[str, ...]) -> CommandResult:
        return ctx.system.run([path, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], timeout=ctx.timeout_s)

    fields = QUERY_FIELDS
    first = query(fields)
    said = first.stdout + first.stderr
    if first.status == "ok" and "not a valid field to query" in said and "compute_cap" in said:
        fields = tuple(f for f in QUERY_FIELDS if f != "compute_cap")
        first = query(fields)
    return first, fields


def _read_query(facts: NvidiaFacts, first: CommandResult, fields: tuple[str, ...]) -> tuple[bool, str | None]:
    """The query form's answer into ``facts``: (whether the other forms are worth running, a timeout message)."""
    if first.status == "timeout":
        # keep what it printed before it hung
        merge_gpus(facts, parse_smi_query(first.stdout, fields))
        observe(facts, "driver_version", SRC_QUERY, parse_smi_query_driver(first.stdout, fields))
        facts.smi_state = "timeout"
        facts.smi_message = first.describe_failure()
        return False, facts.smi_message
    if first.status != "ok":
        facts.smi_state = "error"
        facts.smi_message = first.describe_failure()
        return False, None
    failure = parse_smi_failure(first.stdout + "\n" + first.stderr)
    if failure is not None:
        facts.smi_state = failure.state
        facts.smi_message = failure.message
        facts.smi_exit_code = first.returncode
        observe(facts, "nvml_version", "nvidia-smi (NVML library version line)", failure.nvml_library_version)
        return False, None  # the driver failed: the other forms would fail the same way
    gpus = parse_smi_query(first.stdout, fields)
    observe(facts, "driver_version", SRC_QUERY, parse_smi_query_driver(first.stdout, fields))
    merge_gpus(facts, gpus)
    if first.returncode:
        facts.smi_state = "error"
        facts.smi_exit_code = first.returncode
        facts.smi_message = first.describe_failure()
    return True, None


def _list_and_table(ctx: ProbeContext, path: str) -> dict[str, CommandResult]:
    """``nvidia-smi -L`` and the plain table: independent, so run side by side (each bounded by the timeout)."""
    results: dict[str, CommandResult] = {}

    def go(key: str, argv: list[str]) -> None:
        results[key] = ctx.system.run(argv, timeout=ctx.timeout_s)

    threads = [
        threading.Thread(target=go, args=("list", [path, "-L"]), daemon=True),
        threading.Thread(target=go, args=("table", [path]), daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(ctx.timeout_s + 5)
    return results


def _read_table(facts: NvidiaFacts, tres: CommandResult) -> None:
    """The plain table's banner (nvidia-smi, driver and CUDA versions) and GPU rows into ``facts``."""
    table = parse_smi_table(tres.stdout)
    facts.smi_version = table.smi_version
    if table.smi_version:
        facts.sources["smi_version"] = SRC_TABLE
    observe(facts, "driver_version", SRC_TABLE, table.driver_version)
    observe(facts, "cuda_driver_version", SRC_TABLE, table.cuda_version)
    if table.cuda_raw is not None:
        facts.observed.setdefault("cuda_driver_version_raw", {})[SRC_TABLE] = table.cuda_raw
    if table.cuda_raw in ("ERR!", "N/A") and facts.smi_state in (None, "ok"):
        facts.smi_state = "cuda-err"
        facts.smi_message = f"CUDA Version: {table.cuda_raw}"
    merge_gpus(facts, table.gpus)
    if facts.smi_state is None and tres.returncode and (fail := parse_smi_failure(tres.stdout + "\n" + tres.stderr)):
        facts.smi_state, facts.smi_message, facts.smi_exit_code = fail.state, fail.message, tres.returncode


def _settle_state(facts: NvidiaFacts) -> None:
    """``smi_state`` once every form answered without hanging: ``ok`` unless something above said otherwise."""
    if facts.smi_state is None and not facts.gpus and not facts.observed.get("driver_version") and not facts.smi_version:
        # it ran and exited 0 three times, yet printed nothing that reads as nvidia-smi: not "ok"
        facts.smi_state = "error"
        facts.smi_message = "nvidia-smi answered, but with nothing stackdoctor recognises as nvidia-smi output"
    if facts.smi_state is None:
        facts.smi_state = "ok"


def _run_smi(ctx: ProbeContext, facts: NvidiaFacts) -> str | None:
    """nvidia-smi in its three forms; returns a timeout message, else None."""
    path = _smi_path(ctx.system, facts)
    if path is None:
        return None
    first, fields = _query_smi(ctx, path)
    go_on, hung = _read_query(facts, first, fields)
    if not go_on:
        return hung
    results = _list_and_table(ctx, path)
    timeouts: list[str] = []
    lres = results.get("list")
    if lres is not None:
        if lres.status == "timeout":
            timeouts.append(lres.describe_failure())
        merge_gpus(facts, parse_smi_list(lres.stdout))
    tres = results.get("table")
    if tres is not None:
        if tres.status == "timeout":
            timeouts.append(tres.describe_failure())
        _read_table(facts, tres)
    if timeouts:
        facts.smi_state = "timeout"
        facts.smi_message = "; ".join(timeouts)
        return "; ".join(timeouts)
    _settle_state(facts)
    return None


def _kernel_module(ctx: ProbeContext, facts: NvidiaFacts) -> None:
    """The loaded kernel module's version as each file says it (reconcile keeps one: /proc's, else /sys's)."""
    proc = ctx.system.read_text(SRC_PROC)
    if proc.ok:
        version, flavor = parse_proc_driver_version(proc.text)
        observe(facts, "kernel_module_version", SRC_PROC, version)
        if flavor:
            facts.kernel_module_flavor = flavor
            facts.sources["kernel_module_flavor"] = SRC_PROC
    sysv = ctx.system.read_text(SRC_SYS)
    if sysv.ok:
        observe(facts, "kernel_module_version", SRC_SYS, parse_sys_module_version(sysv.text))


def _proc_gpus(ctx: ProbeContext) -> list[NvidiaProcGpu]:
    """Every ``/proc/driver/nvidia/gpus/<bus>/information`` the kernel module shows, in bus order."""
    out: list[NvidiaProcGpu] = []
    for entry in sorted(ctx.system.listdir(PROC_GPUS))[:64]:
        path = f"{PROC_GPUS}/{entry}/information"
        r = ctx.system.read_text(path)
        if not r.ok:
            continue
        gpu = parse_proc_gpu_information(r.text)
        if gpu is None:
            continue
        if gpu.bus_id is None and re.fullmatch(_BUS_ID, entry):
            gpu.bus_id = entry
        gpu.source = path
        out.append(gpu)
    return out


def parse_driver_library_name(name: str) -> tuple[str, str] | None:
    """``("libcuda", "550.90.07")`` from the file name ``libcuda.so.550.90.07`` (or ``libnvidia-ml.so.X``):
    the user-space driver names its libraries by its version. None for the links ``libcuda.so`` /
    ``libcuda.so.1`` and for anything else."""
    m = _DRIVER_LIBRARY.match(name.strip())
    return (m.group(1), m.group(2)) if m else None


def _driver_libraries(ctx: ProbeContext, facts: NvidiaFacts) -> None:
    """The user-space driver's version from its libraries' file names, one witness per file."""
    for d in DRIVER_LIBRARY_DIRS:
        for name in sorted(ctx.system.listdir(d)):
            hit = parse_driver_library_name(name)
            if hit:
                observe(facts, "driver_library_version", f"file:{d}/{name}", hit[1])


def _cudriver(ctx: ProbeContext, box: list[DriverCuda]) -> None:
    box.append(query_driver_cuda(ctx.system, sys.executable, ctx.timeout_s, init=False))


def _apply_cudriver(facts: NvidiaFacts, out: DriverCuda) -> None:
    observe(facts, "cuda_driver_version", SRC_CUDRIVER, out.version)


def _apply_nvml(facts: NvidiaFacts, nv: NvmlResult) -> None:
    facts.nvml_state = nv.state
    facts.nvml_error = nv.error
    if nv.state != "ok":
        return
    observe(facts, "driver_version", "nvml", nv.driver_version)
    observe(facts, "cuda_driver_version", "nvml", nv.cuda_driver_version)
    observe(facts, "nvml_version", "nvml", nv.nvml_version)
    merge_gpus(facts, nv.gpus)


def probe(ctx: ProbeContext) -> ProbeOutput:
    """Gather every NVIDIA source into :class:`NvidiaFacts`; never raises."""
    facts = NvidiaFacts()
    nvml_box: list[NvmlResult] = []
    nvml_thread: threading.Thread | None = None
    if ctx.live_driver and nvml_present(ctx):
        nvml_thread = threading.Thread(target=lambda: nvml_box.append(query_nvml(ctx.system, ctx.timeout_s)), daemon=True)
        nvml_thread.start()
    elif ctx.live_driver:  # no NVML library anywhere the binding would look: its answer is known without a child
        facts.nvml_state, facts.nvml_error = "absent", f"LibraryNotFound (no {NVML_LIBRARY}* in {', '.join(nvml_dirs(ctx)[:4])}, ...; NVML not asked)"
    else:
        facts.nvml_state = "skipped"
    # Files first (cheap), while NVML's child starts. A kernel module and libcuda.so are Linux's.
    if not ctx.system.windows:
        _kernel_module(ctx, facts)
        facts.proc_gpus = _proc_gpus(ctx)
        facts.libcuda_paths = libcuda_paths(ctx)
        _driver_libraries(ctx, facts)
    # the driver library's own answer, on the live machine only (like NVML), where there is one
    cud_box: list[DriverCuda] = []
    cud_thread: threading.Thread | None = None
    if ctx.live_driver and libcuda_present(ctx, facts):
        cud_thread = threading.Thread(target=_cudriver, args=(ctx, cud_box), daemon=True)
        cud_thread.start()
    smi_facts = NvidiaFacts()
    timeout = _run_smi(ctx, smi_facts)
    errors: list[str] = [timeout] if timeout else []
    if nvml_thread is not None:
        nvml_thread.join(ctx.timeout_s + 5)
        nv = nvml_box[0] if nvml_box else NvmlResult(state="timeout", error=f"NVML did not answer in {ctx.timeout_s:g} s")
        _apply_nvml(facts, nv)  # NVML first: it is the stable interface
        if nv.state == "timeout" and nv.error:
            errors.insert(0, nv.error)
    # then nvidia-smi's view (kept in observed; fills what NVML lacked)
    for name in ("driver_version", "cuda_driver_version", "nvml_version"):
        for src, value in smi_facts.observed.get(name, {}).items():
            observe(facts, name, src, value)
    for key, by_src in smi_facts.observed.items():
        if key not in ("driver_version", "cuda_driver_version", "nvml_version"):
            facts.observed.setdefault(key, {}).update(by_src)
    merge_gpus(facts, smi_facts.gpus)
    if cud_thread is not None:
        cud_thread.join(ctx.timeout_s + 5)
        if cud_box:
            _apply_cudriver(facts, cud_box[0])
    for name in ("smi_state", "smi_path", "smi_exit_code", "smi_message", "smi_version"):
        setattr(facts, name, getattr(smi_facts, name))
    if smi_facts.smi_version:
        facts.sources["smi_version"] = SRC_TABLE
    status = "timeout" if errors else "ok"
    return ProbeOutput(facts={"nvidia": facts}, status=status, error="; ".join(errors) or None)
