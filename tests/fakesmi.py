"""A fake ``nvidia-smi`` that answers each argument list the way the real one did on a recorded machine.

A machine is a folder of real recordings (``tests/fixtures/real/<case>/``, each with its ``source.md``):

- ``nvidia-smi.txt``   the plain table (``nvidia-smi`` with no arguments);
- ``nvidia-smi-L.txt`` ``nvidia-smi -L``;
- ``nvidia-smi-q.txt`` ``nvidia-smi -q`` (the long form);
- ``nvidia-smi-query*.csv`` recorded ``--query-gpu=...`` answers, each with its header line
  (``--format=csv``), in whatever field order the person asked for;
- ``nvidia-smi-query-rejected.txt`` what an old driver printed when asked for a field it does not know.

Every argument list stackdoctor sends gets its own answer (stackdoctor/accelerators/nvidia/probe.py: the query for
:data:`QUERY_FIELDS` and its fallback without ``compute_cap``, ``-L``, the table). No public recording asks
for exactly stackdoctor's twelve fields, so that answer is composed, per GPU, from the machine's own recordings
in the query's documented format (``--format=csv,noheader,nounits``: values without units, power with two
decimals, ``Enabled``/``Disabled`` for modes): a recorded query first, then ``-L`` (index, name, UUID), then
the table (index, full name, bus id, persistence mode, total memory, power limit, MIG mode, driver version).
A field that no recording of the machine shows is answered ``[N/A]`` (nvidia-smi's own word for a value it
cannot give), so nothing is invented. An argument list with no recording is an error (exit 2) that says so.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from conftest import write_fake_tool

from stackdoctor.accelerators.nvidia.probe import QUERY_FIELDS

QUERY_FORMAT = "--format=csv,noheader,nounits"
NA = "[N/A]"
_VERSION = r"\d+(?:\.\d+)+"


def _strip_prompt(text: str) -> str:
    """A recording may start with the shell prompt line the person pasted (``$ nvidia-smi``)."""
    first, _, rest = text.partition("\n")
    return rest if re.match(r"^\S*[$#%>] ", first) or first.startswith("$ ") else text


def _unitless(value: str) -> str:
    v = value.strip()
    m = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*(?:MiB|W|MHz|%|C)", v)
    return m.group(1) if m else v


def from_query_csv(text: str) -> dict[int, dict[str, str]]:
    """A recorded ``--format=csv`` answer (header line first) -> {index: {field: value without units}}.

    Rows are matched to GPUs by their ``index`` column, else by their order."""
    rows = list(csv.reader(io.StringIO(_strip_prompt(text)), skipinitialspace=True))
    if not rows:
        return {}
    fields = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in rows[0]]
    out: dict[int, dict[str, str]] = {}
    for n, row in enumerate(r for r in rows[1:] if len(r) == len(fields)):
        values = {f: _unitless(v) for f, v in zip(fields, row, strict=True)}
        index = int(values["index"]) if values.get("index", "").isdigit() else n
        values["index"] = str(index)
        out[index] = values
    return out


_LIST = re.compile(r"^GPU (\d+): (.+?)(?: \(UUID: (\S+)\))?$")


def from_list(text: str) -> dict[int, dict[str, str]]:
    """``nvidia-smi -L`` -> {index: {index, name, uuid}}."""
    out: dict[int, dict[str, str]] = {}
    for line in _strip_prompt(text).splitlines():
        m = _LIST.match(line.strip())
        if m:
            index, name, uuid = m.groups()
            out[int(index)] = {"index": index, "name": name.strip(), **({"uuid": uuid} if uuid else {})}
    return out


def from_table(text: str) -> tuple[str | None, dict[int, dict[str, str]]]:
    """The plain table -> (driver version, {index: fields the table shows in full}).

    Row 1 of a GPU: ``|   0  NVIDIA GeForce RTX 4070   Off | 00000000:2D:00.0  On |  N/A |``;
    row 2: ``| 30%  35C  P8  9W / 200W |  430MiB / 12282MiB |  0%  Default |``; row 3 (wide layouts with a
    ``MIG M.`` header): the MIG mode in its last cell. A name cut short with ``...`` is not used."""
    text = _strip_prompt(text)
    m = re.search(r"(?:Driver|KMD) Version:\s*(" + _VERSION + ")", text)
    driver = m.group(1) if m else None
    has_mig = "MIG M." in text
    lines = text.splitlines()
    out: dict[int, dict[str, str]] = {}
    for i, line in enumerate(lines):
        cells = line.split("|")
        if len(cells) < 4 or cells[0].strip():
            continue
        first = re.match(r"^\s*(\d+)\s+(.+?)\s+(On|Off)\s*$", cells[1])
        bus = re.match(r"^\s*([0-9A-Fa-f]{8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\b", cells[2])
        if not first or not bus:
            continue
        index, name, persistence = first.groups()
        gpu = {"index": index, "pci.bus_id": bus.group(1), "persistence_mode": "Enabled" if persistence == "On" else "Disabled"}
        if not name.endswith("..."):
            gpu["name"] = name
        if driver:
            gpu["driver_version"] = driver
        if i + 1 < len(lines):
            row2 = lines[i + 1].split("|")
            if len(row2) >= 4:
                power = re.search(r"/\s*(\d+(?:\.\d+)?)W\s*$", row2[1])
                if power:
                    gpu["power.limit"] = f"{float(power.group(1)):.2f}"
                mem = re.search(r"/\s*(\d+)MiB\s*$", row2[2])
                if mem:
                    gpu["memory.total"] = mem.group(1)
        if has_mig and i + 2 < len(lines):
            row3 = lines[i + 2].split("|")
            if len(row3) >= 4 and not row3[1].strip() and row3[3].strip() in ("N/A", "Enabled", "Disabled"):
                gpu["mig.mode.current"] = NA if row3[3].strip() == "N/A" else row3[3].strip()
        out[int(index)] = gpu
    return driver, out


class RecordedMachine:
    """The recordings of one machine and the per-GPU field values they show."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.case = folder.name

        def read(name: str) -> str | None:
            p = folder / name
            return p.read_text(encoding="utf-8") if p.is_file() else None

        self.table = read("nvidia-smi.txt")
        self.list = read("nvidia-smi-L.txt")
        self.long = read("nvidia-smi-q.txt")
        self.rejected = read("nvidia-smi-query-rejected.txt")
        self.gpus: dict[int, dict[str, str]] = {}
        sources: list[dict[int, dict[str, str]]] = [from_query_csv(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("nvidia-smi-query*.csv"))]
        if self.list:
            sources.append(from_list(self.list))
        if self.table:
            sources.append(from_table(self.table)[1])
        driver = from_table(self.table)[0] if self.table else None
        for src in sources:  # earlier sources win
            for index, fields in src.items():
                have = self.gpus.setdefault(index, {})
                for k, v in fields.items():
                    have.setdefault(k, v)
        if driver:
            for g in self.gpus.values():
                g.setdefault("driver_version", driver)

    def query(self, fields: tuple[str, ...]) -> tuple[str, int, str]:
        """(stdout, exit code, stderr) of ``--query-gpu=FIELDS --format=csv,noheader,nounits``."""
        if self.rejected and "compute_cap" in fields:
            return _strip_prompt(self.rejected), 2, ""
        if not self.gpus:
            return "", 2, f"fake nvidia-smi: no recording of {self.case} answers --query-gpu\n"
        lines = [", ".join(g.get(f, NA) for f in fields) for _, g in sorted(self.gpus.items())]
        return "\n".join(lines) + "\n", 0, ""

    def answers(self) -> dict[str, tuple[str, int, str]]:
        """Argument string (as ``"$*"`` spells it) -> (stdout, exit code, stderr)."""
        out: dict[str, tuple[str, int, str]] = {}
        for fields in (QUERY_FIELDS, tuple(f for f in QUERY_FIELDS if f != "compute_cap")):
            out[f"--query-gpu={','.join(fields)} {QUERY_FORMAT}"] = self.query(fields)
        if self.table is not None:
            out[""] = (_strip_prompt(self.table), 0, "")
        if self.list is not None:
            out["-L"] = (_strip_prompt(self.list), 0, "")
        if self.long is not None:
            out["-q"] = (_strip_prompt(self.long), 0, "")
        return out


def fake_nvidia_smi(bindir: Path, folder: Path) -> Path:
    """Put a fake ``nvidia-smi`` replaying the recorded machine ``folder`` into ``bindir``."""
    return write_fake_tool(bindir, "nvidia-smi", answers=RecordedMachine(folder).answers())
