"""Jetson probe: /etc/nv_tegra_release (real c32 line) -> L4T -> JetPack, on synthetic sysroots."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import real_fixture
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.jetson import probe as jetson
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.reconcile import reconcile
from stackdoctor.system import System

MATRIX = load_matrix([])

C32 = "c32-jetson-nano-jetbot-l4t-r32.3.1"


def ctx_for(root: Path | str) -> ProbeContext:
    return ProbeContext(system=System(sysroot=str(root), env={"PATH": os.environ.get("PATH", "")}), target=Target(sys.executable, "self"))


def c32_line() -> str:
    # The capture starts with the shell prompt line of `head -n1 /etc/nv_tegra_release`; the file is the rest.
    return real_fixture(C32, "nv_tegra_release.txt").split("\n", 1)[1]


def test_parse_nv_tegra_release_c32_real() -> None:
    l4t, board, raw = jetson.parse_nv_tegra_release(real_fixture(C32, "nv_tegra_release.txt"))
    assert l4t == "32.3.1" and board == "t210ref"
    assert raw is not None and raw.startswith("# R32 (release), REVISION: 3.1, GCID: 18186506")


def test_parse_nv_tegra_release_newer_layout() -> None:
    # Line shape documented in jetson-containers l4t_version.py (R35.3.1), plus the newer trailing lines.
    text = "# R35 (release), REVISION: 3.1, GCID: 32790763, BOARD: t186ref, EABI: aarch64, DATE: Wed Mar 15 07:54:12 UTC 2023\n# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n"
    assert jetson.parse_nv_tegra_release(text)[:2] == ("35.3.1", "t186ref")


def test_parse_dpkg_package_version_synthetic() -> None:
    status = "Package: bash\nVersion: 4.4\n\nPackage: nvidia-l4t-core\nStatus: install ok installed\nVersion: 32.3.1-20191209225816\n\n"
    assert jetson.parse_dpkg_package_version(status, "nvidia-l4t-core") == "32.3.1-20191209225816"
    assert jetson.parse_dpkg_package_version(status, "absent") is None


@pytest.mark.parametrize(
    "l4t, jetpack, cuda",
    [("32.3.1", "4.3", None), ("32.7.1", "4.6.1", "10.2"), ("36.4.3", "6.2", "12.6"), ("35.3.1", "5.1.1", None), ("32.5", "4.5", None), ("99.0.0", None, None)],
)
def test_jetpack_table_in_the_matrix(l4t: str, jetpack: str | None, cuda: str | None) -> None:
    row = MATRIX.jetpack_for(l4t)
    assert (row.jetpack if row else None) == jetpack
    assert (row.cuda if row else None) == cuda


def test_every_l4t_row_has_a_source() -> None:
    for l4t, row in MATRIX.l4t_releases.items():
        assert row.source and len(l4t.split(".")) == 3


def derived(f):
    """The jetson facts after reconcile (JetPack and CUDA follow from the L4T release and the matrix)."""
    return reconcile(Facts(jetson=f), MATRIX).facts.jetson


@settings(max_examples=150, deadline=None)
@given(st.text(), st.text())
def test_jetson_parsers_never_raise(text: str, pkg: str) -> None:
    jetson.parse_nv_tegra_release(text)
    jetson.parse_dpkg_package_version(text, pkg)
    MATRIX.jetpack_for(text)


def test_probe_synthetic_jetson_nano_root(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-jetson-nano"
    (root / "etc").mkdir(parents=True)
    (root / "etc/nv_tegra_release").write_text(c32_line())
    (root / "proc/device-tree").mkdir(parents=True)
    (root / "proc/device-tree/model").write_bytes(b"NVIDIA Jetson Nano Developer Kit\x00")  # synthetic, NUL-terminated like DT strings
    f = jetson.probe(ctx_for(root)).facts["jetson"]
    assert f.is_jetson is True and f.jetpack is None  # the probe reads; reconcile derives
    f = derived(f)
    assert (f.l4t_release, f.jetpack, f.board, f.cuda) == ("32.3.1", "4.3", "t210ref", None)
    assert f.model == "NVIDIA Jetson Nano Developer Kit"
    assert f.raw is not None and "REVISION: 3.1" in f.raw
    assert f.sources["l4t_release"] == "file:/etc/nv_tegra_release"
    assert "jetson-containers" in f.sources["jetpack"]  # the matrix row's source, carried by reconcile


def test_probe_synthetic_container_with_only_dpkg(tmp_path: Path) -> None:
    root = tmp_path / "synthetic-l4t-container"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("Package: nvidia-l4t-core\nVersion: 36.4.3-20250107174145\n\n")
    f = jetson.probe(ctx_for(root)).facts["jetson"]
    assert f.is_jetson is True and f.l4t_core_version == "36.4.3-20250107174145"
    assert (derived(f).l4t_release, derived(f).jetpack, derived(f).cuda) == ("36.4.3", "6.2", "12.6")
    assert derived(f).sources["cuda"].startswith("reconcile: compat_matrix/jetson.yaml")
    assert f.sources["l4t_release"].startswith("file:/var/lib/dpkg/status")


def test_probe_model_only(tmp_path: Path) -> None:
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/device-tree/model").write_bytes(b"NVIDIA Jetson AGX Orin Developer Kit\x00")  # synthetic
    f = jetson.probe(ctx_for(tmp_path)).facts["jetson"]
    assert f.is_jetson is True and f.sources["is_jetson"] == "file:/proc/device-tree/model"
    assert f.l4t_release is None and f.jetpack is None


@pytest.mark.parametrize("release, jetson_", [("5.15.148-tegra", True), ("4.9.253-tegra", True), ("6.8.0-49-generic", False)])
def test_probe_kernel_release_alone(tmp_path: Path, release: str, jetson_: bool) -> None:
    """An L4T kernel ("<version>-tegra") is a Jetson with no nv_tegra_release, device-tree model or dpkg record."""
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(release + "\n")
    f = jetson.probe(ctx_for(tmp_path)).facts["jetson"]
    assert f.is_jetson is jetson_
    if jetson_:
        assert f.sources["is_jetson"] == f"file:/proc/sys/kernel/osrelease ({release})"


def test_probe_raspberry_pi_model_is_not_jetson(tmp_path: Path) -> None:
    (tmp_path / "proc/device-tree").mkdir(parents=True)
    (tmp_path / "proc/device-tree/model").write_bytes(b"Raspberry Pi 4 Model B Rev 1.4\x00")  # synthetic
    f = jetson.probe(ctx_for(tmp_path)).facts["jetson"]
    assert f.is_jetson is False and f.model == "Raspberry Pi 4 Model B Rev 1.4"


def test_probe_not_a_jetson(tmp_path: Path) -> None:
    f = jetson.probe(ctx_for(tmp_path)).facts["jetson"]
    assert f.is_jetson is False and f.l4t_release is None and f.jetpack is None and f.sources == {}


def test_probe_garbage_release_file(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/nv_tegra_release").write_bytes(b"\xff\xfe not a release line\n")
    f = jetson.probe(ctx_for(tmp_path)).facts["jetson"]
    assert f.is_jetson is True and f.l4t_release is None and f.raw is not None
