"""Jetson probe: ``/etc/nv_tegra_release`` -> L4T release -> JetPack (and JetPack's CUDA).

Other signals kept as facts: ``/proc/device-tree/model`` (the board's name), the
``nvidia-l4t-core`` package version in ``/var/lib/dpkg/status`` (present in L4T images and
containers even where ``nv_tegra_release`` is not), and the raw first line.
"""

from __future__ import annotations

import re

from stackdoctor.model.facts import JetsonFacts
from stackdoctor.model.probing import ProbeContext, ProbeOutput

__all__ = ["parse_dpkg_package_version", "parse_nv_tegra_release", "probe"]


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
    kernel = system.read_text("/proc/sys/kernel/osrelease", max_bytes=4096)
    if kernel.ok and kernel.text.strip().endswith("-tegra") and not f.is_jetson:
        # L4T's kernel names itself "<version>-tegra" (5.15.148-tegra): a Jetson even where the BSP's files and
        # nvidia-smi are missing (a container without the L4T mounts)
        f.is_jetson = True
        src["is_jetson"] = f"file:/proc/sys/kernel/osrelease ({kernel.text.strip()[:80]})"
    return f  # JetPack and its CUDA follow from the L4T release: stackdoctor.reconcile, from compat_matrix/jetson.yaml


def probe(ctx: ProbeContext) -> ProbeOutput:
    return ProbeOutput(facts={"jetson": gather(ctx)})
