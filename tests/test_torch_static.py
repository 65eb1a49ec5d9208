"""The static torch probe (issue 14): torch read from its files, never imported.

Real parts: torchvision 0.28.0's ``_C.so`` (a real ``.nv_fatbin`` built with torch 2.13.0's
cu130 arch list), bitsandbytes 0.50.2's real ROCm (``CCOB`` offload bundles) and XPU (SYCL)
libraries, both downloaded once with real pip into the test cache; the real torch 2.13.0
CPU venv; and a fake ``libcuda.so.1`` compiled here with gcc for the driver worker. The edge
cases are synthetic files built by ``tests/binfixtures.py`` from the documented layouts.
``tests/fixtures/static/README.md`` records the one-off checks against torch 2.14.1 (CUDA).
"""

from __future__ import annotations

import ctypes.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from binfixtures import (
    ARCH_SPECIFIC,
    FAMILY,
    LZ4,
    ZSTD,
    ar,
    bundle,
    cached_wheel,
    ccob,
    elf,
    extract,
    fatbin,
    fatbin_entry,
    pe,
)

from stackdoctor.accelerators.nvidia import cudriver
from stackdoctor.binaries import binfmt
from stackdoctor.matrix import load_matrix
from stackdoctor.probes.torch_static import (
    StaticTorch,
    parse_dist_info_dirname,
    parse_dist_metadata,
    parse_torch_version_py,
    read_library,
    read_static_torch,
    runtime_key,
    sort_archs,
)
from stackdoctor.system import ReadResult, System

HOST = "host-x86_64-unknown-linux-gnu-"
HIP = "hipv4-amdgcn-amd-amdhsa--"


def walk_file(path: Path, kind: str = "cuda"):
    with open(path, "rb") as fh:
        table = binfmt.read_sections(fh)
        sec = table.find(*(binfmt.CUDA_SECTIONS if kind == "cuda" else binfmt.HIP_SECTIONS))
        assert sec is not None, table
        if kind == "cuda":
            return table, binfmt.walk_fatbin(fh, sec.offset, sec.size)
        return table, binfmt.walk_offload_bundles(fh, sec.offset, sec.size)


# ---------------------------------------------------------------------------- real: torchvision 0.28.0 (cu130)


@pytest.fixture(scope="module")
def torchvision_wheel() -> Path:
    return cached_wheel("torchvision==0.28.0", "torchvision-0.28.0-cp311")


def test_real_torchvision_fatbin_matches_the_matrix(torchvision_wheel):
    so = extract(torchvision_wheel, "torchvision/_C.so")
    table, fat = walk_file(so)
    assert table.format == "elf64-le" and fat.error is None
    assert fat.containers == 7 and len(fat.entries) == 49  # 7 translation units x (6 cubins + 1 PTX)
    counts = fat.arch_containers()
    assert counts == {a: 7 for a in ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120")}
    assert fat.compressed == 7 and {e.compression for e in fat.entries if e.compressed} == {"zstd"}
    assert {e.arch for e in fat.entries if e.compressed} == {"compute_120"}  # only the PTX is compressed here

    info = read_library(System(), str(so), "cuda", primary=True)
    assert info.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    assert info.arch_extra == [] and info.error is None

    # the wheel bundles CUDA 13's runtime, so it pairs with torch 2.13.0's cu130 build in the matrix: the same cubins;
    # torchvision adds compute_120 PTX, which PyPI's torch 2.13.0 cu130 wheel does not carry (read from that wheel)
    with zipfile.ZipFile(torchvision_wheel) as zf:
        assert any("libcudart" in n and n.endswith(".so.13") for n in zf.namelist())
    release = load_matrix().release("2.13.0")
    assert release is not None
    variant = next(v for v in release.variants if v.name == "cu130")
    assert [a for a in info.arch_list if a.startswith("sm_")] == sort_archs(variant.arch_list) == list(variant.arch_list)


# ---------------------------------------------------------------------------- real: ROCm and XPU libraries (bitsandbytes)


@pytest.fixture(scope="module")
def bnb_wheel() -> Path:
    return cached_wheel("bitsandbytes==0.50.2", "bitsandbytes-0.50.2")


def zstd_cli_decoder():
    exe = shutil.which("zstd")
    if exe is None:
        pytest.skip("the zstd tool is not installed: the real zstd-compressed bundles cannot be opened here")

    def decode(data: bytes, max_out: int) -> bytes | None:
        res = subprocess.run([exe, "-dc"], check=False, input=data, capture_output=True, timeout=60)
        return res.stdout[:max_out] or None

    return decode


@pytest.mark.parametrize(("lib", "version", "gfx_count"), [("rocm64", 2, 14), ("rocm71", 3, 15), ("rocm714", 3, 25)])
def test_real_rocm_compressed_bundles(bnb_wheel, lib, version, gfx_count):
    path = extract(bnb_wheel, f"bitsandbytes/libbitsandbytes_{lib}.so")
    _, res = walk_file(path, "hip")
    # without a zstd decoder (Python < 3.14): the bundles and their header facts, and why no ids
    assert len(res.bundles) == 2 and res.error is None
    for b in res.bundles:
        assert b.compressed and b.version == version and b.method == "zstd"
        assert b.total_size and b.uncompressed_size and b.uncompressed_size > b.total_size
        assert b.entries == [] and "zstd" in (b.error or "")  # walk_file passes no decoder
    # with the decoder a user has (compression.zstd from 3.14, else the zstandard dependency): the ids, gfx942
    # among them, the same in both translation units
    from stackdoctor.probes.torch_static import zstd_decoder

    decoder = zstd_decoder()
    assert decoder is not None, "zstandard is a dependency below Python 3.14"
    info = read_library(System(), str(path), "hip", primary=True, zstd=decoder)
    assert info.error is None and info.containers == 2 and info.compressed == 2
    assert len(info.arch_list) == gfx_count and "gfx942" in info.arch_list and info.arch_extra == []
    assert info.arch_list[:3] == ["gfx908", "gfx90a", "gfx942"]  # natural order: gfx9xx before gfx1xxx
    assert all(n == 2 for n in info.archs.values())


@pytest.mark.parametrize("lib", ["rocm64", "rocm71", "rocm714"])
def test_zstd_tool_reads_the_same_gfx_ids(bnb_wheel, lib):
    """A second witness of the decoding: the reference `zstd` tool gives the same ids as stackdoctor's decoder."""
    from stackdoctor.probes.torch_static import zstd_decoder

    path = extract(bnb_wheel, f"bitsandbytes/libbitsandbytes_{lib}.so")
    tool = read_library(System(), str(path), "hip", primary=True, zstd=zstd_cli_decoder())
    mine = read_library(System(), str(path), "hip", primary=True, zstd=zstd_decoder())
    assert tool.error is None and tool.arch_list and (mine.arch_list, mine.archs) == (tool.arch_list, tool.archs)


def test_real_xpu_sycl_images(bnb_wheel):
    path = extract(bnb_wheel, "bitsandbytes/libbitsandbytes_xpu2026.so")
    info = read_library(System(), str(path), "xpu", primary=True)
    assert info.format == "elf64-le"
    assert info.images == ["spir64_gen (zstd)", "spir64 (zstd)"]
    assert "compressed" in (info.error or "") and info.arch_list == []


# ---------------------------------------------------------------------------- real: the torch 2.13.0 CPU venv


def test_static_facts_equal_import_torch(torch_python):
    code = textwrap.dedent(
        """
        import json, site, sys, sysconfig, torch
        sys.path.insert(0, sys.argv[1])
        import sd_target
        print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
                          "git_version": torch.version.git_version, "debug": torch.version.debug,
                          "xpu": getattr(torch.version, "xpu", None), "rocm": getattr(torch.version, "rocm", None),
                          "location": torch.__path__[0], "site_dirs": sd_target.site_dirs()}))
        """
    )
    worker_dir = str(Path(__file__).resolve().parents[1] / "stackdoctor" / "_worker")
    out = subprocess.run([torch_python, "-c", code, worker_dir], capture_output=True, text=True, timeout=120, check=True)
    real = json.loads(out.stdout.strip().splitlines()[-1])
    st = read_static_torch(System(), real["site_dirs"])
    assert st.installed and st.errors == []
    for key in ("version", "cuda", "hip", "git_version", "debug", "xpu", "rocm", "location"):
        assert getattr(st, key) == real[key], key
    assert st.version.startswith("2.13.0") and st.variant == "cpu" and st.cuda is None
    assert st.distributions["torch"] == real["version"]
    assert st.arch_list == [] and st.libraries == []  # a CPU build carries no GPU code
    assert st.sources["version"].endswith("torch/version.py")


def test_no_torch(tmp_path):
    st = read_static_torch(System(), [str(tmp_path)])
    assert st == StaticTorch()


# ---------------------------------------------------------------------------- parsers


def test_parse_version_py_layouts():
    real = (Path(__file__).parent / "fixtures" / "real" / "local-torch-2.14.1-cp311-pypi-wheel-files" / "version.py").read_text()
    assert parse_torch_version_py(real) == {
        "__version__": "2.14.1+cu130", "debug": False, "cuda": "13.0", "git_version": "5c4886908584029761b579af026dcfb627c84070",
        "hip": None, "rocm": None, "xpu": None,
    }
    old = "__version__ = '1.0.0'\ndebug = False\ncuda = '9.0.176'\ngit_version = 'abc'\n"  # torch 1.0 layout: no hip line
    assert parse_torch_version_py(old) == {"__version__": "1.0.0", "debug": False, "cuda": "9.0.176", "git_version": "abc"}
    rocm = "from typing import Optional\n__version__ = '2.5.1+rocm6.2'\ncuda: Optional[str] = None\nhip: Optional[str] = '6.2.41133-dd7f95766'\n"
    assert parse_torch_version_py(rocm) == {"__version__": "2.5.1+rocm6.2", "cuda": None, "hip": "6.2.41133-dd7f95766"}


def test_parse_version_py_never_executes():
    marker = Path("/tmp/stackdoctor-version-py-executed")
    text = f"import os\n__version__ = os.system('touch {marker}')\ncuda = '12.4'\nhip = ''.join(['6'])\n"
    assert parse_torch_version_py(text) == {"cuda": "12.4"}  # computed values are not taken
    assert not marker.exists()
    assert "error" in parse_torch_version_py("__version__ = '2.1.0\n")  # unterminated string
    assert "error" in parse_torch_version_py("x = 1\n" * 100_000)  # far too large for a version file


def test_parse_dist_metadata_and_dirnames():
    assert parse_dist_metadata("Metadata-Version: 2.1\nName: nvidia-cudnn-cu13\nVersion: 9.24.0.43\nSummary: x\n\nVersion: 1\n") == {
        "name": "nvidia-cudnn-cu13", "version": "9.24.0.43"}
    assert parse_dist_metadata("\nName: late\n") == {}  # headers end at the first blank line
    assert parse_dist_info_dirname("nvidia_cudnn_cu13-9.24.0.43.dist-info") == {"name": "nvidia-cudnn-cu13", "version": "9.24.0.43"}
    assert parse_dist_info_dirname("torch-2.13.0+cpu.dist-info") == {"name": "torch", "version": "2.13.0+cpu"}
    assert parse_dist_info_dirname("torch-1.13.1-py3.10.egg-info") == {"name": "torch", "version": "1.13.1"}
    assert parse_dist_info_dirname("torch") == {}
    assert runtime_key("nvidia-cudnn-cu13") == "cudnn" and runtime_key("nvidia-cuda-runtime-cu12") == "cuda-runtime"
    assert runtime_key("nvidia-nvjitlink") == "nvjitlink" and runtime_key("cuda-toolkit") == "cuda-toolkit"
    assert runtime_key("nvidia-ml-py") is None and runtime_key("numpy") is None


# ---------------------------------------------------------------------------- synthetic ELF / PE edge cases

CU130 = [fatbin_entry(2, sm) for sm in (75, 80, 86, 90)] + [fatbin_entry(2, sm, 0x1000011, header_size=112) for sm in (100, 120)]


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(data)
    return p


def lib_info(path: Path, kind: str = "cuda", **kw):
    return read_library(System(), str(path), kind, primary=True, **kw)


def test_synthetic_build_wide_and_per_file_archs(tmp_path):
    extra = CU130 + [fatbin_entry(2, 90, 0x11 | ARCH_SPECIFIC), fatbin_entry(2, 103, 0x1000011 | FAMILY, header_size=112)]
    data = fatbin(CU130, extra, CU130, CU130 + [fatbin_entry(1, 120, 0x11 | ZSTD, b"compressed-ptx")])
    info = lib_info(write(tmp_path, "libtorch_cuda.so", elf([(".text", b"\x90" * 32), (".nv_fatbin", data)])))
    assert info.error is None and info.containers == 4
    assert info.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert info.arch_extra == ["sm_90a", "sm_103", "compute_120"]  # in fewer than half the containers
    assert info.archs["sm_90a"] == 1 and info.compressed == 1
    with open(tmp_path / "libtorch_cuda.so", "rb") as fh:
        table = binfmt.read_sections(fh)
        sec = table.find(".nv_fatbin")
        fat = binfmt.walk_fatbin(fh, sec.offset, sec.size)
    fam = [e for e in fat.entries if e.sm == 103]
    assert fam[0].arch == "sm_103" and fam[0].family_specific  # named as cuobjdump names it


def test_ptx_only_and_compressed_entries(tmp_path):
    data = fatbin([fatbin_entry(1, 52, 0x11 | LZ4, b"lz4 data"), fatbin_entry(1, 90, 0x11 | ZSTD | ARCH_SPECIFIC, b"zstd data")])
    info = lib_info(write(tmp_path, "lib.so", elf([(".nv_fatbin", data)])))
    assert info.arch_list == ["compute_52", "compute_90a"] and info.compressed == 2 and info.entries == 2
    with open(tmp_path / "lib.so", "rb") as fh:
        sec = binfmt.read_sections(fh).find(".nv_fatbin")
        assert {e.compression for e in binfmt.walk_fatbin(fh, sec.offset, sec.size).entries} == {"lz4", "zstd"}


def test_no_section_and_not_elf(tmp_path):
    info = lib_info(write(tmp_path, "libtorch_cuda.so", elf([(".text", b"\x90" * 16)])))
    assert info.format == "elf64-le" and info.arch_list == [] and "no .nv_fatbin section" in info.error
    info = lib_info(write(tmp_path, "fake.so", b"#!/bin/sh\necho this is not a library\n"))
    assert info.format is None and "not an ELF or PE file" in info.error
    info = lib_info(write(tmp_path, "empty.so", b""))
    assert "empty" in info.error
    info = lib_info(tmp_path / "missing.so")
    assert info.error.endswith("absent")


@pytest.mark.parametrize(("bits", "endian", "fmt"), [(32, "<", "elf32-le"), (64, ">", "elf64-be"), (32, ">", "elf32-be")])
def test_32_bit_and_big_endian_elf(tmp_path, bits, endian, fmt):
    data = fatbin([fatbin_entry(2, 80), fatbin_entry(1, 80)])
    info = lib_info(write(tmp_path, "lib.so", elf([(".data", b"x" * 5), (".nv_fatbin", data)], bits=bits, endian=endian, extra_nobits=".bss")))
    assert info.format == fmt and info.arch_list == ["sm_80", "compute_80"] and info.error is None


def test_truncated_headers(tmp_path):
    whole = elf([(".nv_fatbin", fatbin(CU130, CU130))])
    for cut in (10, 40, 63, len(whole) // 2, len(whole) - 70, len(whole) - 1):
        info = lib_info(write(tmp_path, f"cut{cut}.so", whole[:cut]))
        assert info.error, cut  # every cut is reported, none raises
    # a fat binary cut inside its second container: the first is still read, and the cut is said
    data = fatbin(CU130, CU130)
    info = lib_info(write(tmp_path, "cutfat.so", elf([(".nv_fatbin", data[: len(data) - 100])])))
    assert info.containers == 2 and "truncated" in info.error and info.archs["sm_75"] == 2


def test_garbage_inside_the_section(tmp_path):
    data = fatbin(CU130) + b"\xde\xad\xbe\xef" * 8 + fatbin(CU130)
    info = lib_info(write(tmp_path, "lib.so", elf([(".nv_fatbin", data)])))
    assert info.containers == 1 and "no fat binary header" in info.error


@pytest.mark.parametrize("long_names", [False, True])
def test_pe_dll(tmp_path, long_names):
    data = fatbin(CU130)
    dll = pe([(".text", b"\xc3" * 10), (".nv_fatbin" if long_names else ".nv_fatb", data), (".nvFatBinSegment", b"\0" * 24)], long_names=long_names)
    info = lib_info(write(tmp_path, "torch_cuda.dll", dll))
    assert info.format == "pe" and info.section in (".nv_fatb", ".nv_fatbin")
    assert info.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] and info.error is None


def test_pe_edge_cases(tmp_path):
    assert "without a PE header" in lib_info(write(tmp_path, "dos.dll", b"MZ" + b"\0" * 100)).error
    dll = pe([(".nv_fatb", fatbin(CU130))])
    assert lib_info(write(tmp_path, "cut.dll", dll[:300])).error


def test_offload_bundles_plain_and_compressed(tmp_path):
    targets = ["gfx90a:xnack-", "gfx90a:xnack+", "gfx942", "gfx1100"]
    plain = bundle([(HOST, b"")] + [(HIP + t, b"\x7fELF" + t.encode() * 30) for t in targets])
    section = plain + b"\0" * (-len(plain) % 4096)
    section += ccob(plain, version=2) + b"\0" * 100
    section += ccob(plain, version=3)
    section += b"\0" * (-len(section) % 4096) + ccob(plain, version=1)
    section += b"\0" * 64 + bundle([(HOST, b""), (HIP + "gfx942", b"only")])  # a file built for fewer targets
    info = lib_info(write(tmp_path, "libtorch_hip.so", elf([(".hip_fatbin", section)])), "hip")
    assert info.containers == 5 and info.compressed == 3 and info.error is None
    assert info.arch_list == ["gfx90a:xnack+", "gfx90a:xnack-", "gfx942", "gfx1100"]
    assert info.archs["gfx942"] == 5 and info.archs["gfx1100"] == 4


def test_compressed_bundle_without_a_decoder(tmp_path):
    plain = bundle([(HOST, b""), (HIP + "gfx942", b"x")])
    fake_zstd = b"\x28\xb5\x2f\xfd" + b"opaque"
    section = ccob(plain, version=3, method=1, stream=fake_zstd) + ccob(plain, version=2, method=7, stream=b"?")
    info = lib_info(write(tmp_path, "libtorch_hip.so", elf([(".hip_fatbin", section)])), "hip", zstd=None)
    assert info.containers == 2 and info.arch_list == [] and info.compressed == 2
    assert "zstd stream" in info.error or "unknown compression" in info.error
    with open(tmp_path / "libtorch_hip.so", "rb") as fh:
        sec = binfmt.read_sections(fh).find(".hip_fatbin")
        res = binfmt.walk_offload_bundles(fh, sec.offset, sec.size)
        assert [b.method for b in res.bundles] == ["zstd", "method7"]
        # a decoder that is given: used, and a failing one is a reason, not a crash
        seen = []
        res = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=lambda d, n: seen.append(d) or plain)
        assert [e.target for e in res.bundles[0].entries] == [None, "gfx942"] and seen[0] == fake_zstd

        def broken(d, n):
            raise RuntimeError("decoder bug")

        res = binfmt.walk_offload_bundles(fh, sec.offset, sec.size, zstd=broken)
        assert "decoder bug" in res.bundles[0].error


def test_corrupt_bundles(tmp_path):
    good = bundle([(HOST, b""), (HIP + "gfx942", b"x")])
    cases = {
        "huge-count": b"__CLANG_OFFLOAD_BUNDLE__" + (2**63).to_bytes(8, "little") + b"\0" * 100,
        "cut-id": good[:40],
        "bad-zlib": ccob(good, stream=b"not zlib at all"),
        "ccob-v9": b"CCOB" + (9).to_bytes(2, "little") + b"\0" * 40,
        "junk-then-bundle": b"junk" * 10 + good,
    }
    for name, data in cases.items():
        info = lib_info(write(tmp_path, f"{name}.so", elf([(".hip_fatbin", data)])), "hip")
        if name == "junk-then-bundle":
            assert info.arch_list == ["gfx942"], name  # resynchronised on the next magic
        else:
            assert info.error, name


def test_sycl_images(tmp_path):
    archive = ar([("pad_0", b"        "), ("64.12.60.7", b"\x7fELF" * 3), ("pad_1", b"        "), ("20.1.4", b"\x7fELF1"), ("generic_ir", b"x")])
    so = elf([("__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen", archive), ("__CLANG_OFFLOAD_BUNDLE__sycl-spir64", b"\x03\x02\x23\x07spirv")])
    info = lib_info(write(tmp_path, "libtorch_xpu.so", so), "xpu")
    assert info.images == ["spir64_gen", "spir64"] and info.error is None
    assert info.arch_list == ["20.1.4", "64.12.60.7", "generic_ir"]  # raw ocloc member names, not translated
    assert "no SYCL" in lib_info(write(tmp_path, "plain.so", elf([(".text", b"")])), "xpu").error
    # in a torch tree: libtorch_xpu.so and torch-xpu-ops' separate kernel libraries
    make_site(tmp_path, "/x", version_py="__version__ = '2.9.0+xpu'\nxpu = '20250101'\n",
              libs={"libtorch_xpu.so": so, "libtorch-xpu-ops-sycl-unary_binary_kernels.so": so})
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/x"])
    assert st.variant == "xpu" and st.xpu == "20250101" and st.errors == []
    assert [(lib.kind, lib.primary, lib.arch_list[:1]) for lib in st.libraries] == [("xpu", True, ["20.1.4"]), ("xpu", False, ["20.1.4"])]


def test_open_binary_refuses_what_is_not_a_file(tmp_path):
    system = System(sysroot=str(tmp_path))
    (tmp_path / "lib").mkdir()
    os.mkfifo(tmp_path / "lib" / "libtorch_cuda.so")  # a FIFO must not block the probe
    res = system.open_binary("/lib/libtorch_cuda.so")
    assert isinstance(res, ReadResult) and res.status == "error" and "regular" in res.detail
    assert system.open_binary("/lib").status == "error"  # type: ignore[union-attr]
    assert system.open_binary("/nope/x.so").status == "absent"  # type: ignore[union-attr]
    (tmp_path / "ok.so").write_bytes(b"\x7fELF")
    fh = system.open_binary("/ok.so")
    assert not isinstance(fh, ReadResult)
    with fh:
        assert fh.read() == b"\x7fELF"


# ---------------------------------------------------------------------------- the whole probe on a captured tree


def make_site(root: Path, site: str = "/venv/lib/python3.11/site-packages", version_py: str | None = None, libs: dict[str, bytes] | None = None, dists: bool = True) -> Path:
    sp = root / site.lstrip("/")
    pkg = sp / "torch"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise SystemExit('never imported')\n")
    (pkg / "version.py").write_text(version_py or (Path(__file__).parent / "fixtures" / "real" / "local-torch-2.14.1-cp311-pypi-wheel-files" / "version.py").read_text())
    for name, data in (libs or {}).items():
        (pkg / "lib" / name).write_bytes(data)
    for dist, ver in (("torch", "2.14.1"), ("torchvision", "0.29.1"), ("triton", "3.8.0"), ("nvidia_cudnn_cu13", "9.24.0.43"),
                      ("nvidia_nccl_cu13", "2.30.7"), ("cuda_toolkit", "13.0.3"), ("nvidia_ml_py", "13.580.82"), ("numpy", "2.4.1")):
        if not dists:
            break
        d = sp / f"{dist}-{ver}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.4\nName: {dist.replace('_', '-')}\nVersion: {ver}\n\nlong description\n")
    (sp / "nvidia" / "cudnn" / "lib").mkdir(parents=True)
    (sp / "nvidia" / "cudnn" / "lib" / "libcudnn.so.9").write_bytes(b"")
    (sp / "nvidia" / "cu13" / "lib").mkdir(parents=True)
    (sp / "nvidia" / "cu13" / "lib" / "libcublas.so.13").write_bytes(b"")
    (sp / "nvidia" / "cu13" / "lib" / "libnvJitLink.so.13").write_bytes(b"")
    return sp


def test_read_static_torch_on_a_captured_tree(tmp_path):
    site = "/venv/lib/python3.11/site-packages"
    cuda = elf([(".nv_fatbin", fatbin(CU130, CU130 + [fatbin_entry(2, 90, 0x11 | ARCH_SPECIFIC)], CU130))])
    linalg = elf([(".nv_fatbin", fatbin(CU130[1:]))])
    make_site(tmp_path, site, libs={"libtorch_cuda.so": cuda, "libtorch_cuda_linalg.so": linalg, "libc10.so": b"\x7fELF"})
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/nonexistent", site])
    assert st.installed and st.location == f"{site}/torch" and st.errors == []
    assert (st.version, st.variant, st.cuda, st.hip, st.debug) == ("2.14.1+cu130", "cu130", "13.0", None, False)
    assert st.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] and st.arch_extra == ["sm_90a"]
    assert [(lib.path.rsplit("/", 1)[-1], lib.primary) for lib in st.libraries] == [("libtorch_cuda.so", True), ("libtorch_cuda_linalg.so", False)]
    assert st.libraries[1].arch_list == ["sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert st.distributions == {"torch": "2.14.1", "torchvision": "0.29.1", "triton": "3.8.0"}
    assert st.runtime == {"cudnn": "9.24.0.43", "nccl": "2.30.7", "cuda-toolkit": "13.0.3", "cublas": "13", "nvjitlink": "13"}
    assert st.sources["runtime.cudnn"].endswith("nvidia_cudnn_cu13-9.24.0.43.dist-info/METADATA")
    assert st.sources["runtime.cublas"] == f"{site}/nvidia/cu13/lib/libcublas.so.13 (file name)"
    assert st.sources["arch_list"].startswith(f"{site}/torch/lib/libtorch_cuda.so .nv_fatbin (3 ")
    assert set(st.runtime_libraries) == {"libcudnn.so.9", "libcublas.so.13", "libnvJitLink.so.13"}


def test_import_order_and_broken_installs(tmp_path):
    make_site(tmp_path, "/a")
    make_site(tmp_path, "/b", version_py="__version__ = '2.0.0'\n", dists=False)
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/b", "/a"])
    assert st.version == "2.0.0" and st.location == "/b/torch"  # the first site dir wins, as for import
    assert st.distributions["torch"] == "2.14.1"  # /b has no dist-info; /a's is the only one
    assert not any("more than one torch distribution" in e for e in st.errors)
    (tmp_path / "b" / "torch-2.0.0.dist-info").mkdir()  # now torch is installed twice: /b shadows /a
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/b", "/a"])
    assert st.distributions["torch"] == "2.0.0"
    assert any("more than one torch distribution" in e and "/b/" in e and "/a/" in e for e in st.errors)
    # version.py unreadable: the dist-info version stands in, and the reason is kept
    (tmp_path / "a" / "torch" / "version.py").unlink()
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/a"])
    assert st.version == "2.14.1" and st.sources["version"].endswith("METADATA") and any("version.py: absent" in e for e in st.errors)
    # a dist-info without the package (a half-removed torch)
    shutil.rmtree(tmp_path / "a" / "torch")
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/a"])
    assert st.installed and st.location is None and st.errors


def test_hip_and_broken_library_in_the_tree(tmp_path):
    hip = elf([(".hip_fatbin", bundle([(HOST, b""), (HIP + "gfx942", b"a"), (HIP + "gfx1100", b"b")]))])
    make_site(tmp_path, "/s", version_py="__version__ = '2.9.0+rocm6.4'\nhip = '6.4.43482'\ncuda = None\n",
              libs={"libtorch_hip.so": hip, "libtorch_cuda.so": b"not a library at all"})
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/s"])
    assert st.variant == "rocm6.4" and st.gfx_list == ["gfx942", "gfx1100"] and st.arch_list == []
    assert any("libtorch_cuda.so: not an ELF or PE file" in e for e in st.errors)


def test_a_rocm_torch_with_compressed_bundles_names_its_gfx_list(tmp_path, bnb_wheel):
    """Recent ROCm builds compress their code bundles with zstd. The static read decodes them with what the user's
    Python has (compression.zstd, else the zstandard dependency): a real compressed library (bitsandbytes' ROCm 7.1
    build) as a torch's libtorch_hip.so gives its gfx list, not "inside a zstd stream"."""
    real = extract(bnb_wheel, "bitsandbytes/libbitsandbytes_rocm71.so").read_bytes()
    make_site(tmp_path, "/s", version_py="__version__ = '2.10.0+rocm7.1'\nhip = '7.1.25424'\ncuda = None\n", libs={"libtorch_hip.so": real})
    st = read_static_torch(System(sysroot=str(tmp_path)), ["/s"])
    assert st.variant == "rocm7.1" and len(st.gfx_list) == 15 and "gfx942" in st.gfx_list, (st.gfx_list, st.errors)
    assert not any("zstd" in e for e in st.errors), st.errors


# ---------------------------------------------------------------------------- the driver worker


def test_driver_library_absent_is_a_clean_fact():
    if ctypes.util.find_library("cuda"):
        pytest.skip("this machine has a libcuda; the absent case needs one without")
    out = cudriver.query_driver_cuda(System(), sys.executable, timeout=30)
    assert out.not_found and out.version is None and "libcuda.so.1" in out.error
    version, error = cudriver.driver_cuda_version(System(), sys.executable, timeout=30)
    assert version is None and error.startswith("no NVIDIA driver library")


FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <unistd.h>
#include <signal.h>
int cuDriverGetVersion(int *v) { const char *e = getenv("FAKE_CUDA_VERSION_RC");
    if (e) return atoi(e); *v = atoi(getenv("FAKE_CUDA_VERSION") ? getenv("FAKE_CUDA_VERSION") : "12040"); return 0; }
int cuInit(unsigned int flags) { const char *m = getenv("FAKE_CUINIT");
    if (m && m[0] == 'h') { for (;;) pause(); }
    if (m && m[0] == 'c') { raise(SIGSEGV); }
    return m ? atoi(m) : 0; }
int cuGetErrorName(int rc, const char **s) { *s = rc == 100 ? "CUDA_ERROR_NO_DEVICE" : rc == 35 ? "CUDA_ERROR_INSUFFICIENT_DRIVER" : "CUDA_ERROR_UNKNOWN"; return 0; }
"""


@pytest.fixture(scope="module")
def fake_libcuda(tmp_path_factory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("no C compiler to build the fake libcuda.so.1")
    d = tmp_path_factory.mktemp("fakecuda")
    (d / "cuda.c").write_text(FAKE_LIBCUDA)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(d / "libcuda.so.1"), str(d / "cuda.c")], check=True, capture_output=True)
    return d


def run_fake(libdir: Path, timeout: float = 30, **env: str) -> cudriver.DriverCuda:
    system = System(env={**os.environ, "LD_LIBRARY_PATH": str(libdir), **env})
    return cudriver.query_driver_cuda(system, sys.executable, timeout=timeout)


def test_fake_driver_versions(fake_libcuda):
    out = run_fake(fake_libcuda, FAKE_CUINIT="100")
    assert (out.version, out.version_int, out.init_rc, out.init_error) == ("12.4", 12040, 100, "CUDA_ERROR_NO_DEVICE")
    assert out.path == str(fake_libcuda / "libcuda.so.1") and not out.not_found and out.error is None
    out = run_fake(fake_libcuda, FAKE_CUDA_VERSION="13020")
    assert (out.version, out.init_rc, out.init_error) == ("13.2", 0, None)
    assert cudriver.driver_cuda_version(System(env={**os.environ, "LD_LIBRARY_PATH": str(fake_libcuda)}), sys.executable) == ("12.4", None)
    out = run_fake(fake_libcuda, FAKE_CUDA_VERSION_RC="35")
    assert out.version is None and "CUDA_ERROR_INSUFFICIENT_DRIVER" in out.error


def test_fake_driver_that_hangs_or_crashes_in_cuinit(fake_libcuda):
    out = run_fake(fake_libcuda, timeout=3, FAKE_CUINIT="hang")
    assert out.version == "12.4" and "did not answer in 3 s" in out.init_error  # the version came before cuInit
    out = run_fake(fake_libcuda, FAKE_CUINIT="crash")
    assert out.version == "12.4" and "SIGSEGV" in out.init_error


def test_parse_cudriver_output_edges():
    assert cudriver.parse_cudriver_output("").error == "the driver worker printed no result"
    line = '@@stackdoctor@@ {"section": "cudriver", "library": "libcuda.so.1", "version_rc": 0, "version": -5}'
    assert cudriver.parse_cudriver_output(line).error.startswith("cuDriverGetVersion returned an implausible")
    assert cudriver.cuda_version_string(11080) == "11.8" and cudriver.cuda_version_string(True) is None


# ---------------------------------------------------------------------------- opt-in: the real CUDA torch wheel

CUDA_WHEEL = os.environ.get("STACKDOCTOR_TEST_CUDA_TORCH_WHEEL")  # e.g. /opt/pypi-more/files/torch-2.14.1-cp311-...whl


@pytest.mark.skipif(not CUDA_WHEEL, reason="opt-in (550 MB wheel): set STACKDOCTOR_TEST_CUDA_TORCH_WHEEL to torch 2.14.1's cp311 manylinux wheel")
def test_real_torch_2_14_1_libtorch_cuda(tmp_path):
    """The lists recorded in tests/fixtures/static/README.md (torch._C._cuda_getArchFlags() and cuobjdump 13.4)."""
    with zipfile.ZipFile(str(CUDA_WHEEL)) as zf:
        zf.extract("torch/lib/libtorch_cuda.so", tmp_path)
    info = read_library(System(), str(tmp_path / "torch/lib/libtorch_cuda.so"), "cuda", primary=True)
    assert info.error is None and (info.containers, info.entries, info.compressed) == (475, 2975, 2975)
    assert " ".join(info.arch_list) == "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"  # torch._C._cuda_getArchFlags()
    assert info.archs == {"sm_75": 475, "sm_80": 475, "sm_86": 475, "sm_90": 475, "sm_100": 475, "sm_120": 475,
                          "sm_89": 1, "sm_90a": 4, "sm_100a": 59, "sm_103": 59, "sm_120a": 1, "sm_121a": 1}


def test_nvidia_probe_asks_the_driver_library_as_one_more_witness(fake_libcuda, tmp_path):
    """The NVIDIA probe runs the driver worker (live machine only, like NVML) where a libcuda is found, and
    records its answer beside the others; reconcile names it among the witnesses of the driver's CUDA level."""
    from stackdoctor.accelerators.nvidia import probe as nvidia
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.probing import ProbeContext, Target
    from stackdoctor.reconcile import reconcile

    empty = tmp_path / "bin"
    empty.mkdir()  # no nvidia-smi
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_libcuda), "PATH": str(empty), "FAKE_CUDA_VERSION": "12080", "FAKE_CUINIT": "hang"}
    out = nvidia.probe(ProbeContext(System(env=env), Target(sys.executable, "self"), timeout_s=10))
    n = out.facts["nvidia"]
    assert n.observed["cuda_driver_version"]["cuDriverGetVersion"] == "12.8"
    # the probe asks the version only: cuInit starts every GPU (seconds on a big machine); the worker skips it when told
    only = cudriver.query_driver_cuda(System(env={**env, "FAKE_CUINIT": "100"}), sys.executable, 10, init=False)
    assert only.version == "12.8" and only.init_rc is None
    assert cudriver.query_driver_cuda(System(env={**env, "FAKE_CUINIT": "100"}), sys.executable, 10).init_rc == 100
    f = Facts()
    f.nvidia = n
    weighed = reconcile(f, load_matrix())
    if n.nvml_state != "ok":  # no NVML here: the driver library is the only witness, so reconcile keeps its value
        assert (weighed.runtime("nvidia").value, weighed.runtime("nvidia").source) == ("12.8", "cuDriverGetVersion")
    seen = weighed.runtime("nvidia")
    assert seen.witnesses["cuDriverGetVersion"] == "12.8"
    # not on a replayed machine (live_driver is False under a moved sysroot), and not without a libcuda
    assert "cuda_driver_version" not in nvidia.probe(ProbeContext(System(env=env), Target(sys.executable, "self"), live_driver=False)).facts["nvidia"].observed
    bare = {**env, "LD_LIBRARY_PATH": str(tmp_path)}
    if not ctypes.util.find_library("cuda"):
        assert "cuda_driver_version" not in nvidia.probe(ProbeContext(System(env=bare), Target(sys.executable, "self"))).facts["nvidia"].observed
