"""Intel probe: Intel display devices from a synthetic /sys/bus/pci tree; discrete ids from the kernel's pciids.h."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.intel import probe as intel
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.reconcile import reconcile
from stackdoctor.system import System


def ctx_for(root: Path | str) -> ProbeContext:
    return ProbeContext(system=System(sysroot=str(root), env={"PATH": os.environ.get("PATH", "")}), target=Target(sys.executable, "self"))


def add_pci(root: Path, addr: str, vendor: str, device: str, cls: str, driver: str | None = None) -> None:
    base = root / "sys/bus/pci/devices" / addr
    base.mkdir(parents=True)
    (base / "vendor").write_text(vendor + "\n")
    (base / "device").write_text(device + "\n")
    (base / "class").write_text(cls + "\n")
    if driver:
        (root / "sys/bus/pci/drivers" / driver).mkdir(parents=True, exist_ok=True)
        os.symlink(f"../../../bus/pci/drivers/{driver}", base / "driver")


def test_families_from_pciids_in_the_matrix() -> None:
    m = load_matrix([])
    assert m.intel_family("0x56a0").family == "DG2"  # Arc A770 class (INTEL_DG2_G10_D_IDS)
    assert m.intel_family("0xE20B").family == "BMG"
    assert m.intel_family("0x0bd5").family == "PVC"
    assert m.intel_family("0x4905").family == "DG1"
    assert m.intel_family("0x9a49") is None  # Tiger Lake GT2, integrated, not listed (INTEL_TGL_GT2_IDS)
    assert m.intel_family("garbage") is None and m.intel_family(None) is None
    seen: set[str] = set()
    for fam in m.intel_families:
        assert fam.source and not (set(fam.device_ids) & seen)
        seen |= set(fam.device_ids)


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_intel_family_never_raises(text: str) -> None:
    load_matrix([]).intel_family(text)


def test_probe_synthetic_igpu_plus_arc(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-intel"
    add_pci(root, "0000:00:02.0", "0x8086", "0x9a49", "0x030000", "i915")
    add_pci(root, "0000:03:00.0", "0x8086", "0x56a0", "0x030000", "xe")
    add_pci(root, "0000:00:1f.3", "0x8086", "0x51c8", "0x040380", "snd_hda_intel")  # audio: not display
    add_pci(root, "0000:01:00.0", "0x10de", "0x2684", "0x030000", "nvidia")  # not Intel
    f = intel.probe(ctx_for(root)).facts["intel"]
    assert [(g.address, g.device_id, g.driver, g.discrete, g.name) for g in f.gpus] == [
        ("0000:00:02.0", "0x9a49", "i915", None, None),
        ("0000:03:00.0", "0x56a0", "xe", None, None),
    ]  # the probe reads; what the id means follows from the matrix in reconcile
    assert f.sources["gpus"] == "file:/sys/bus/pci/devices"
    r = reconcile(Facts(intel=f), load_matrix([])).facts.intel
    assert [(g.discrete, g.name, g.xpu) for g in r.gpus] == [(None, None, None), (True, "Arc A-series (Alchemist)", True)]
    assert "intel.yaml" in r.sources["name"]


def test_probe_no_pci_tree(tmp_path: Path) -> None:
    out = intel.probe(ctx_for(tmp_path))
    assert out.status == "ok" and out.facts["intel"].gpus == []
