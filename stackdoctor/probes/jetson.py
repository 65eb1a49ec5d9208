"""Jetson probe: ``/etc/nv_tegra_release`` -> L4T release -> JetPack (and JetPack's CUDA).

Other signals kept as facts: ``/proc/device-tree/model`` (the board's name), the
``nvidia-l4t-core`` package version in ``/var/lib/dpkg/status`` (present in L4T images and
containers even where ``nv_tegra_release`` is not), and the raw first line.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from stackdoctor.facts import JetsonFacts
from stackdoctor.probes import ProbeContext, ProbeOutput

__all__ = ["JETPACK", "JetpackRow", "jetpack_for", "parse_dpkg_package_version", "parse_nv_tegra_release", "probe"]


class JetpackRow(NamedTuple):
    jetpack: str
    cuda: str | None  # JetPack's default CUDA, None where no source gives it
    source: str


_JC = "dusty-nv/jetson-containers jetson_containers/l4t_version.py@019980c7d35e04fdc65c8425b293528af5e1d28d"
_REF = "compat-facts.md §11.2"

# L4T release -> JetPack (-> CUDA). Rows from jetson-containers' NVIDIA_JETPACK table unless the
# row's source says otherwise; CUDA only where a source names it (compat-facts.md §11.2:
# 32.7.x -> 10.2 per Qengineering/PyTorch-Jetson-Nano; 36.2 -> 12.2, 36.3 -> 12.4, 36.4.x -> 12.6
# per jetson-containers get_cuda_version(); 38.x -> 13.0). Newest first.
JETPACK: dict[str, JetpackRow] = {
    "38.3.0": JetpackRow("7.1", "13.0", _REF),
    "38.2.2": JetpackRow("7.0", "13.0", _REF),
    "38.2.0": JetpackRow("7.0", "13.0", _REF),
    "38.1.0": JetpackRow("7.0 EA", "13.0", _REF),
    "36.4.7": JetpackRow("6.2.1", "12.6", _REF),
    "36.4.4": JetpackRow("6.2.1", "12.6", _REF),
    "36.4.3": JetpackRow("6.2", "12.6", _JC),
    "36.4.2": JetpackRow("6.1.1", "12.6", _JC),
    "36.4.0": JetpackRow("6.1", "12.6", _JC),
    "36.3.0": JetpackRow("6.0", "12.4", _JC),
    "36.2.0": JetpackRow("6.0 DP", "12.2", _JC),
    "36.0.0": JetpackRow("6.0 EA", None, _JC),
    "35.6.4": JetpackRow("5.1.6", None, f"{_REF} (jetson-containers PR #1676)"),
    "35.6.2": JetpackRow("5.1.5", None, f"{_REF} (jetson-containers PR #1676)"),
    "35.6.1": JetpackRow("5.1.5", None, f"{_REF} (jetson-containers PR #1676)"),
    "35.6.0": JetpackRow("5.1.4", None, f"{_REF} (jetson-containers PR #1676)"),
    "35.5.0": JetpackRow("5.1.3", None, f"{_REF} (jetson-containers PR #1676)"),
    "35.4.1": JetpackRow("5.1.2", None, _JC),
    "35.3.1": JetpackRow("5.1.1", None, _JC),
    "35.3.0": JetpackRow("5.1.1 PRE", None, _JC),
    "35.2.1": JetpackRow("5.1", None, _JC),
    "35.1.0": JetpackRow("5.0.2", None, _JC),
    "34.1.1": JetpackRow("5.0.1 DP", None, _JC),
    "34.1.0": JetpackRow("5.0 DP", None, _JC),
    "32.7.6": JetpackRow("4.6.6", "10.2", _REF),
    "32.7.5": JetpackRow("4.6.5", "10.2", _JC),
    "32.7.4": JetpackRow("4.6.4", "10.2", _JC),
    "32.7.3": JetpackRow("4.6.3", "10.2", _JC),
    "32.7.2": JetpackRow("4.6.2", "10.2", _JC),
    "32.7.1": JetpackRow("4.6.1", "10.2", _JC),
    "32.6.1": JetpackRow("4.6", None, _JC),
    "32.5.2": JetpackRow("4.5.1", None, _JC),
    "32.5.1": JetpackRow("4.5.1", None, _JC),
    "32.5.0": JetpackRow("4.5", None, _JC),
    "32.4.4": JetpackRow("4.4.1", None, _JC),
    "32.4.3": JetpackRow("4.4", None, _JC),
    "32.4.2": JetpackRow("4.4 DP", None, _JC),
    "32.3.1": JetpackRow("4.3", None, _JC),
    "32.2.3": JetpackRow("4.2.3", None, _JC),
    "32.2.1": JetpackRow("4.2.2", None, _JC),
    "32.2.0": JetpackRow("4.2.1", None, _JC),
    "32.1.0": JetpackRow("4.2", None, _JC),
    "31.1.0": JetpackRow("4.1.1", None, _JC),
    "31.0.2": JetpackRow("4.1", None, _JC),
    "31.0.1": JetpackRow("4.0", None, _JC),
    "28.4.0": JetpackRow("3.3.3", None, _JC),
    "28.2.0": JetpackRow("3.2", None, _JC),
    "28.1.0": JetpackRow("3.1", None, _JC),
    "27.1.0": JetpackRow("3.0", None, _JC),
}


def jetpack_for(l4t: str | None) -> JetpackRow | None:
    """The JetPack row of an L4T release ("32.3.1"; "32.5" is read as "32.5.0")."""
    if not l4t:
        return None
    parts = l4t.split(".")
    while len(parts) < 3:
        parts.append("0")
    return JETPACK.get(".".join(parts[:3]))


_TEGRA = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+(?:\.\d+)*)", re.IGNORECASE)
_BOARD = re.compile(r"BOARD:\s*([^,\s]+)")


def parse_nv_tegra_release(text: str) -> tuple[str | None, str | None, str | None]:
    """(L4T release, board, raw first line) from ``/etc/nv_tegra_release``.

    Sample (Jetson Nano, rt-net/JetsonNano_DT_SPI issue #9)::

        # R32 (release), REVISION: 3.1, GCID: 18186506, BOARD: t210ref, EABI: aarch64, DATE: Tue Dec 10 06:58:34 UTC 2019

    gives ("32.3.1", "t210ref", <that line>).
    """
    for line in (text or "").splitlines():
        m = _TEGRA.search(line)
        if m:
            board = _BOARD.search(line)
            return f"{int(m.group(1))}.{m.group(2)}", (board.group(1) if board else None), line.strip()
    return None, None, None


def parse_dpkg_package_version(text: str, package: str) -> str | None:
    """The ``Version:`` of ``package`` in a dpkg status file.

    Stanza shape (illustration; the version matches c32's L4T R32.3.1 date)::

        Package: nvidia-l4t-core
        Status: install ok installed
        Architecture: arm64
        Version: 32.3.1-20191209225816
    """
    for stanza in re.split(r"\n\s*\n", text or ""):
        name = re.search(r"^Package:\s*(\S+)\s*$", stanza, re.MULTILINE)
        if name and name.group(1) == package:
            ver = re.search(r"^Version:\s*(\S+)\s*$", stanza, re.MULTILINE)
            return ver.group(1) if ver else None
    return None


def _l4t_from_package(version: str | None) -> str | None:
    m = re.match(r"^(\d+\.\d+(?:\.\d+)?)", version or "")
    return m.group(1) if m else None


def gather(ctx: ProbeContext) -> JetsonFacts:
    system = ctx.system
    f = JetsonFacts()
    src = f.sources
    rel = system.read_text("/etc/nv_tegra_release")
    if rel.ok:
        f.l4t_release, f.board, f.raw = parse_nv_tegra_release(rel.text)
        if f.raw is None and rel.text.strip():
            f.raw = rel.text.strip().splitlines()[0][:300]
        if f.l4t_release:
            src["l4t_release"] = "file:/etc/nv_tegra_release"
        if f.board:
            src["board"] = "file:/etc/nv_tegra_release"
        f.is_jetson = True
        src["is_jetson"] = "file:/etc/nv_tegra_release"
    model = system.read_text("/proc/device-tree/model")
    if model.ok:
        name = model.text.replace("\x00", "").strip()
        if name:
            f.model = name
            src["model"] = "file:/proc/device-tree/model"
            if "jetson" in name.lower() and not f.is_jetson:
                f.is_jetson = True
                src["is_jetson"] = "file:/proc/device-tree/model"
    status = system.read_text("/var/lib/dpkg/status", max_bytes=16 * 1024 * 1024)
    if status.ok and "nvidia-l4t-core" in status.text:
        f.l4t_core_version = parse_dpkg_package_version(status.text, "nvidia-l4t-core")
        if f.l4t_core_version:
            src["l4t_core_version"] = "file:/var/lib/dpkg/status"
            f.is_jetson = True
            src.setdefault("is_jetson", "file:/var/lib/dpkg/status (nvidia-l4t-core)")
            if f.l4t_release is None:
                f.l4t_release = _l4t_from_package(f.l4t_core_version)
                if f.l4t_release:
                    src["l4t_release"] = "file:/var/lib/dpkg/status (nvidia-l4t-core)"
    row = jetpack_for(f.l4t_release)
    if row:
        f.jetpack = row.jetpack
        src["jetpack"] = row.source
        if row.cuda:
            f.cuda = row.cuda
            src["cuda"] = row.source
    return f


def probe(ctx: ProbeContext) -> ProbeOutput:
    return ProbeOutput(facts={"jetson": gather(ctx)})
