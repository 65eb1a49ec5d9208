"""The compatibility matrix: shipped data loads and is sourced; the loader refuses bad files in one sentence;
the pure helpers (arch_runs, driver_meets, GPU names, variant names) follow NVIDIA's / PyTorch's rules."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stackdoctor.core.errors import MatrixError
from stackdoctor.matrix import (
    arch_match,
    arch_runs,
    driver_meets,
    gfx_supported,
    load_matrix,
    parse_platform,
    validate_file,
    variant_from_version,
    variant_kind,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def m():
    return load_matrix()


# ---------------------------------------------------------------------------- the shipped data


def test_shipped_files_load_and_validate_one_by_one():
    files = sorted((REPO / "compat_matrix").glob("*.yaml"))
    assert {f.name for f in files} >= {"releases.yaml", "cuda.yaml", "gpus.yaml", "rocm.yaml", "jetson.yaml"}
    for f in files:
        validate_file(f)  # raises on any problem


def test_releases_cover_2_0_to_2_15_newest_first(m):
    versions = [r.version for r in m.releases]
    assert versions == sorted(versions, reverse=True)
    minors = {(v.major, v.minor) for v in versions}
    assert {(2, n) for n in range(0, 16)} <= minors


def test_every_row_has_a_source(m):
    for r in m.releases:
        assert r.source.strip(), r.version
        for v in r.variants:
            assert v.source.strip(), (r.version, v.name)
            assert variant_kind(v.name) is not None
    for ver, row in m.cuda_versions.items():
        assert row.source.strip(), ver
    for g in m.gpu_rows:
        assert g.source.strip(), g.name
    for o in m.rocm_overrides.values():
        assert o.source.strip(), o.gfx
    for j in m.jetson:
        assert j.source.strip(), j.jetpack


def test_unknowns_are_marked_not_guessed(m):
    r215 = m.release("2.15.0")
    # PyPI's builds are learned from the wheels (compat_matrix/learned.yaml); download.pytorch.org's are announced by the
    # nightly build matrix (partial: a build it does not name is unknown, not absent)
    assert r215 is not None and {"cpu", "cu130", "cu132", "xpu"} <= {v.name for v in r215.variants} and r215.learned
    assert not r215.builds_listed and any("release/2.15 build matrix" in u for u in r215.unknown)
    assert r215.build_state("cpu", "linux", "x86_64") == "announced" and r215.build_state("cpu", "windows", "amd64") == "known"
    assert r215.build_state("cu132", "linux", "x86_64") == "known" and r215.build_state("cu132", "windows", "amd64") == "announced"
    assert r215.build_state("cu126", "windows", "amd64") == "unknown"
    r2141 = m.release("2.14.1")
    assert r2141.builds_listed and r2141.build_state("rocm7.2", "windows", "amd64") == "absent"
    assert r2141.build_state("cu130", "linux", "x86_64") == "known" and r2141.build_state("cu132", "linux", "x86_64") == "announced"
    r214 = m.release("2.14.0")
    # its wheels pin triton~=3.8.0: no exact triton is claimed, the requirement is kept as written
    assert r214.triton is None and r214.triton_requirement == "triton~=3.8.0"
    assert r214.torchaudio == "2.11.0" and "torchaudio" in (r214.derived_from or "")
    assert m.cuda_versions["13.0"].min_driver_windows is None and m.cuda_versions["13.0"].unknown
    rocm714 = m.variant("2.14.0", "rocm7.14")
    assert rocm714.gfx == () and rocm714.unknown


def test_last_macos_x86_64_release_is_2_2_2(m):
    with_x86_mac = [r.version for r in m.releases for v in r.variants for p in v.platforms if p.startswith("macosx") and p.endswith("x86_64")]
    assert max(with_x86_mac) == m.release("2.2.2").version
    assert m.newest_release_for("macos", "x86_64").version == max(with_x86_mac)
    assert m.newest_release_for("macos", "ppc64le") is None


def test_index_urls_are_data_with_a_source(m):
    from stackdoctor.matrix import default_index_url

    assert m.index_url() == default_index_url() == "https://download.pytorch.org/whl"
    assert m.index_url("pypi") == default_index_url("pypi") == "https://pypi.org/simple"
    assert all(row.source.strip() for row in m.indexes.values())
    with pytest.raises(MatrixError, match="no 'conda' index"):
        m.index_url("conda")


def test_issue_12_corrections_are_in_the_data(m):
    """Each correction issue 12 asked for, as data (the sources are in the rows)."""
    def gfx(version, name):
        return set(m.variant(version, name).gfx)

    # wheels gained gfx1102 (pytorch#147761) and gfx1200/gfx1201 (#148562) after 2.6.0 shipped
    assert not {"gfx1102", "gfx1200", "gfx1201"} & gfx("2.6.0", "rocm6.2.4") and "gfx1101" in gfx("2.6.0", "rocm6.2.4")
    assert "gfx1101" not in gfx("2.5.1", "rocm6.1")  # pytorch#141667 came after 2.5.1
    for version, name in [("2.10.0", "rocm7.0"), ("2.10.0", "rocm7.1"), ("2.11.0", "rocm7.1"), ("2.12.1", "rocm7.1"), ("2.13.0", "rocm7.1")]:
        assert {"gfx1150", "gfx1151"} <= gfx(version, name), (version, name)  # pytorch#167299
    rocm_sources = [v.source for r in m.releases for v in r.variants if v.kind == "rocm" and "astral-sh/uv" in v.source]
    assert rocm_sources and all("backend.rs" in s and "accelerator.rs" not in s for s in rocm_sources)
    # CUDA 11.7: the GA row of Table 3 (515.48.07 / 516.31 is 11.7 Update 1)
    assert (m.cuda_versions["11.7"].min_driver_linux, m.cuda_versions["11.7"].min_driver_windows) == ("515.43.04", "516.01")
    # 2.6.0's 3.13t wheels: Linux x86_64 only
    r26 = m.release("2.6.0")
    assert r26.python_on("3.13t", "linux", "x86_64") and not r26.python_on("3.13t", "windows", "amd64")
    assert not r26.python_on("3.13t", "linux", "aarch64") and r26.python_on("3.13", "windows", "amd64")
    # GPU names
    for name, cc in [("NVIDIA GeForce GTX 1650", "7.5"), ("NVIDIA GeForce GTX 1660 Ti", "7.5"), ("NVIDIA GeForce GTX 1660 SUPER", "7.5"),
                     ("NVIDIA GeForce GTX 1660", "7.5"), ("NVIDIA A10G", "8.6")]:
        assert m.gpu_compute_capability(name) == cc, name


def test_windows_arch_lists_are_read_or_marked_unknown(m):
    """A CUDA build published for Windows has a Windows list of its own, or says in unknown: that it has none;
    where the builder release branch was read (2.0-2.5) the list carries sm_61 and the source names the script."""
    for r in m.releases:
        for v in r.variants:
            if v.kind != "cuda" or "win_amd64" not in v.platforms:
                continue
            if "win_amd64" in v.arch_by_platform:
                assert "Windows" in v.source or "windows/" in v.source, (r.version, v.name)
            else:
                assert any("Windows arch list" in u for u in v.unknown), (r.version, v.name)
    for version in ("2.0.1", "2.1.2", "2.2.2", "2.3.1", "2.4.1", "2.5.1"):
        for v in m.release(version).variants:
            if v.kind == "cuda":
                assert "sm_61" in v.arch_for("win_amd64") and f"windows/cuda{v.name[2:]}.bat@" in v.source, (version, v.name)
    for version in ("2.12.1", "2.13.0", "2.14.0"):
        assert "sm_61" in m.variant(version, "cu126").arch_for("win_amd64")
    assert not m.variant("2.7.1", "cu118").arch_known_for("win_amd64")
    assert m.variant("2.7.1", "cu118").arch_fallback("win_amd64") == ("Linux x86_64", m.variant("2.7.1", "cu118").arch_list)


def test_load_only_the_given_files(tmp_path, monkeypatch):
    a = _write(tmp_path, "a.yaml", 'releases:\n  - {version: "9.0.0", source: "test", variants: []}\n')
    monkeypatch.setenv("STACKDOCTOR_MATRIX", str(_write(tmp_path, "env.yaml", 'releases:\n  - {version: "9.1.0", source: "test"}\n')))
    only = load_matrix([a], embedded=False)
    assert [str(r.version) for r in only.releases] == ["9.0.0"] and only.files == (str(a),)
    assert only.cuda_versions == {} and only.indexes == {}
    assert load_matrix([], embedded=False).releases == ()
    assert "9.1.0" in {str(r.version) for r in load_matrix().releases}  # the default still reads the variable


def test_sourced_facts_from_the_reference_sheet(m):
    # torchvision minor = torch minor + 15 where a torchvision pins its torch exactly; torchaudio stopped following
    # torch after 2.11; torchvision 0.29.1/0.29.2 require torch>=2.14.0, the newest that 2.14.1 and 2.15.0 can pair with
    for r in m.releases:
        if r.torchvision and "torchvision" not in r.paired_by_range:
            assert int(r.torchvision.split(".")[1]) == r.version.minor + 15, r.version
    assert m.paired("2.15.0") == ("0.29.2", "2.11.1") and m.release("2.15.0").paired_by_range == ("torchvision", "torchaudio")
    assert m.paired("2.11.0") == ("0.26.0", "2.11.0")
    assert m.paired("2.12.1") == ("0.27.1", "2.11.0")
    assert m.paired("2.12.0") == ("0.27.0", "2.11.0")
    assert m.paired("2.9.0") == ("0.24.0", "2.9.0")
    # pytorch#188914 reported compute_120 PTX in 2.13.0's cu130 wheels; PyPI's 2.13.0 wheel, read, has none
    cu130 = m.variant("2.13.0", "cu130")
    assert "compute_120" not in cu130.arch_list and "sha256:796633c4" in cu130.source and cu130.learned
    assert "compute_120" not in m.variant("2.12.1", "cu130").arch_list
    assert "compute_120" not in m.variant("2.11.0", "cu130").arch_list
    # Volta: in 2.10 cu128, dropped from cu128 in 2.11; only cu126 keeps Maxwell/Pascal
    assert "sm_70" in m.variant("2.10.0", "cu128").arch_list
    assert "sm_70" not in m.variant("2.11.0", "cu128").arch_list
    assert m.variant("2.14.0", "cu126").arch_list[0] == "sm_50"
    # sm_110 (Thor) only on aarch64 CUDA 13 builds
    cu130 = m.variant("2.14.0", "cu130")
    assert "sm_110" in cu130.arch_for("manylinux_2_28_aarch64") and "sm_110" not in cu130.arch_list
    assert m.release("2.6.0").manylinux_glibc == "2.17" and m.release("2.7.1").manylinux_glibc == "2.28"
    assert m.release("2.12.1").min_macos == "14.0" and m.release("2.11.0").min_macos == "11.0"
    assert m.cuda_versions["12.6"].minor_compat_floor_linux == "525.60.13"
    assert m.cuda_versions["12.6"].minor_compat_floor_windows == "528.33"
    assert m.cuda_versions["13.0"].min_driver_linux == "580.65.06"
    assert m.rocm_override("gfx1031").value == "10.3.0"
    assert m.rocm_override("gfx1103") is None  # 11.0.0 is "actively wrong" on the 780M: not listed


def test_release_lookup_by_patch_minor_and_local_version(m):
    assert str(m.release("2.9").version) == "2.9.1"
    assert str(m.release("2.9.0").version) == "2.9.0" and m.release("2.9.0").torchvision == "0.24.0"
    assert str(m.release("2.13.0+cu130").version) == "2.13.0"
    assert m.release("2.16.0") is None and m.release("not-a-version") is None
    assert m.variant("2.13.0", "cu130").cuda == "13.0"
    assert m.variant("2.13.0", "cu999") is None


# ---------------------------------------------------------------------------- pure helpers


@pytest.mark.parametrize(
    "archs, cc, expected",
    [
        pytest.param(["sm_60", "sm_70"], "6.1", "sass", id="pascal-61-runs-sm60-cubin"),
        pytest.param(["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], "6.1", None, id="gtx1080-not-on-cu130"),
        pytest.param(["sm_80", "sm_86"], "8.9", "sass", id="ada-runs-sm86"),
        pytest.param(["sm_80", "sm_86"], "8.0", "sass", id="a100-runs-sm80"),
        pytest.param(["sm_86"], "8.0", None, id="no-lower-minor"),
        pytest.param(["sm_80", "sm_86", "sm_90"], "8.7", None, id="orin-tegra-not-reached-by-dgpu-cubins"),
        pytest.param(["sm_87"], "8.7", "sass", id="orin-exact"),
        pytest.param(["sm_87"], "8.9", None, id="tegra-cubin-not-on-dgpu"),
        pytest.param(["sm_90"], "10.0", None, id="no-cross-major"),
        pytest.param(["sm_90", "compute_90"], "10.0", "ptx", id="ptx-jit-to-newer-major"),
        pytest.param(["sm_120+PTX"], "12.1", "sass", id="plus-ptx-shorthand"),
        pytest.param(["compute_120"], "12.1", "ptx", id="ptx-only"),
        pytest.param(["compute_120"], "10.0", None, id="ptx-not-to-older"),
        pytest.param(["sm_90a"], "9.0", "sass", id="arch-specific-exact"),
        pytest.param(["sm_90a"], "10.0", None, id="arch-specific-not-portable"),
        pytest.param(["compute_90a"], "10.0", None, id="arch-specific-ptx-not-portable"),
        pytest.param(["sm_100f"], "10.3", "sass", id="family-target-later-member"),
        pytest.param(["sm_100"], "11.0", None, id="sm100-not-on-thor"),
        pytest.param(["sm_101"], "11.0", "sass", id="thor-renamed-sm101-to-sm110"),
        pytest.param(["sm_110"], "11.0", "sass", id="thor-sm110"),
        pytest.param(["sm_37", "sm_50"], "3.5", None, id="kepler-35-has-no-build"),
        pytest.param(["sm_37", "compute_37"], "3.7", "sass", id="k80"),
        pytest.param(["sm_60"], "sm_61", "sass", id="cc-as-sm-string"),
        pytest.param(["sm_60"], "garbage", None, id="unparsable-cc"),
    ],
)
def test_arch_runs(archs, cc, expected):
    assert arch_match(archs, cc) == expected
    assert arch_runs(archs, cc) is (expected is not None)


@pytest.mark.parametrize(
    "cuda, driver, windows, expected",
    [
        pytest.param("12.6", "560.35.03", False, "full", id="linux-full"),
        pytest.param("12.6", "535.104.05", False, "minor-compat", id="linux-535-on-12.6"),
        pytest.param("12.6", "525.60.13", False, "minor-compat", id="exact-floor"),
        pytest.param("12.6", "525.60.12", False, "no", id="below-floor"),
        pytest.param("12.6", "470.57.02", False, "no", id="r470-no-cuda12"),
        pytest.param("13.0", "570.124.06", False, "no", id="570-no-cuda13"),
        pytest.param("13.0", "580.65.06", False, "full", id="580-ga"),
        pytest.param("13.2", "580.95.05", False, "minor-compat", id="13.2-on-580"),
        pytest.param("13.0", "580.88", True, "full", id="windows-13-floor-is-the-documented-minimum"),
        pytest.param("12.6", "551.88", True, "minor-compat", id="windows-column-551"),
        pytest.param("12.6", "560.76", True, "full", id="windows-full"),
        pytest.param("12.6", "551.88", False, "minor-compat", id="same-number-linux-column"),
        pytest.param("12.6", None, False, "no", id="unknown-driver"),
        pytest.param("12.6", "N/A", False, "no", id="unparsable-driver"),
        pytest.param("11.8", "470.57.02", False, "minor-compat", id="cu118-on-r470"),
    ],
)
def test_driver_meets(m, cuda, driver, windows, expected):
    assert driver_meets(m.cuda_versions[cuda], driver, windows) == expected


@pytest.mark.parametrize(
    "name, cc",
    [
        ("NVIDIA GeForce RTX 4090", "8.9"),
        ("GeForce RTX 4090", "8.9"),
        ("Tesla V100-SXM2-32GB", "7.0"),
        ("Tesla V100-SXM2...", "7.0"),  # nvidia-smi's truncated table name
        ("Tesla K80", "3.7"),
        ("NVIDIA GeForce GTX 1080", "6.1"),
        ("NVIDIA GeForce GTX 1080 Ti", "6.1"),
        ("NVIDIA GeForce RTX 5090 ...", "12.0"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"),
        ("NVIDIA A100-SXM4-80GB", "8.0"),  # not 8.6: GA100 vs GA10x
        ("NVIDIA B200", "10.0"),  # not 12.0: data-center Blackwell
        ("NVIDIA H100 80GB HBM3", "9.0"),
        ("Quadro RTX 6000", "7.5"),
        ("NVIDIA RTX 6000 Ada Generation", "8.9"),
        ("NVIDIA GB10", "12.1"),
        ("Some Unknown GPU", None),
        ("", None),
    ],
)
def test_gpu_compute_capability(m, name, cc):
    assert m.gpu_compute_capability(name) == cc


@pytest.mark.parametrize(
    "version, variant",
    [("2.13.0+cu130", "cu130"), ("2.6.0+rocm6.2.4", "rocm6.2.4"), ("2.5.1+cpu", "cpu"), ("2.8.0+xpu", "xpu"), ("2.12.0", None), (None, None)],
)
def test_variant_from_version(version, variant):
    assert variant_from_version(version) == variant


def test_variant_kind_and_platform_parsing():
    assert variant_kind("cu130") == ("cuda", "13.0", None)
    assert variant_kind("cu118") == ("cuda", "11.8", None)
    assert variant_kind("rocm7.14") == ("rocm", None, "7.14")
    assert variant_kind("cuda13") is None
    assert parse_platform("manylinux_2_28_x86_64") == ("linux", "x86_64", (2, 28))
    assert parse_platform("manylinux2014_aarch64") == ("linux", "aarch64", (2, 17))
    assert parse_platform("macosx_14_0_arm64") == ("macos", "arm64", (14, 0))
    assert parse_platform("win_amd64") == ("windows", "amd64", None)


def test_gfx_supported(m):
    v = m.variant("2.14.0", "rocm7.2")
    assert gfx_supported(v, "gfx1100")
    assert gfx_supported(v, "gfx90a:sramecc+:xnack-")
    assert not gfx_supported(v, "gfx1031")


# ---------------------------------------------------------------------------- layering user files


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_user_file_overrides_a_variant_and_adds_a_release(tmp_path):
    p = _write(
        tmp_path,
        "mirror.yaml",
        """\
        schema: stackdoctor.matrix/1
        releases:
          - version: "2.13.0"
            source: "internal: verified against our mirror"
            variants:
              - name: cu132
                platforms: [manylinux_2_28_x86_64]
                arch_list: [sm_75, sm_80, sm_86, sm_90, sm_100, sm_120+PTX]
                source: "internal wheel check"
          - version: "2.16.0"
            source: "internal"
            pythons: ["3.12"]
            variants:
              - {name: cu134, platforms: [manylinux_2_28_x86_64], arch_list: [sm_120], source: "internal"}
        """,
    )
    m = load_matrix([p])
    assert str(m.releases[0].version) == "2.16.0"
    cu132 = m.variant("2.13.0", "cu132")
    assert "compute_120" in cu132.arch_list and cu132.source == "internal wheel check"
    assert m.variant("2.13.0", "cu126") is not None  # the other embedded variants stay
    assert m.release("2.13.0").torchvision == "0.28.0"  # fields not given stay
    assert str(p) in m.files
    assert load_matrix().variant("2.13.0", "cu132").source != "internal wheel check"  # the embedded cache is untouched


def test_stackdoctor_matrix_env_is_read(tmp_path, monkeypatch):
    a = _write(tmp_path, "a.yaml", 'cuda:\n  "13.4": {min_driver_linux: "600.1", source: "x"}\n')
    b = _write(tmp_path, "b.yaml", 'gpus:\n  - {cc: "10.7", names: [Rubin Test], source: "y"}\n')
    monkeypatch.setenv("STACKDOCTOR_MATRIX", os.pathsep.join([str(a), str(b)]))
    m = load_matrix()
    assert m.cuda_versions["13.4"].min_driver_linux == "600.1"
    assert m.gpu_compute_capability("NVIDIA Rubin Test") == "10.7"


# ---------------------------------------------------------------------------- invalid files: one sentence, file and line


BAD = [
    pytest.param('indexes:\n  pytorch: {url: "ftp://x", source: s}\n', 2, "indexes.pytorch.url: expected an http(s) URL", id="index-url"),
    pytest.param('indexes:\n  pytorch: {url: "https://x/whl"}\n', 2, "indexes.pytorch.source: missing", id="index-source"),
    pytest.param('indexes:\n  PyTorch: {url: "https://x/whl", source: s}\n', 2, "unparsable index name 'PyTorch'", id="index-name"),
    pytest.param(
        'releases:\n  - version: "2.99.0"\n    source: s\n    python_platforms: {"3.13t": [linux_nowhere-x]}\n',
        4,
        "unknown platform tag 'linux_nowhere-x'",
        id="python-platforms-tag",
    ),
    pytest.param("releases: [\n  {version: 2.1\n", 3, "malformed YAML", id="malformed"),
    pytest.param(
        'releases:\n  - version: "2.99.0"\n    source: s\n    variants:\n      - name: cuda13\n        source: s\n',
        5,
        "unknown variant kind 'cuda13'",
        id="unknown-variant-kind",
    ),
    pytest.param('releases:\n  - version: "two.point.one"\n    source: s\n', 2, "unparsable version 'two.point.one'", id="unparsable-version"),
    pytest.param('releases:\n  - version: "2.99.0"\n    variants: []\n', 2, "releases[2.99.0].source: missing", id="missing-source"),
    pytest.param(
        'releases:\n  - version: "2.99.0"\n    source: s\n    variants:\n      - {name: cu130, platforms: [x]}\n',
        5,
        "source: missing",
        id="variant-missing-source",
    ),
    pytest.param('cuda:\n  "13.0": {min_driver_linux: "five-eighty", source: s}\n', 2, "unparsable driver version", id="bad-driver"),
    pytest.param('releases:\n  - version: "2.99.0"\n    source: s\n    pythons: [3.12]\n    sorce: typo\n', 5, "unknown field", id="typo-field"),
    pytest.param(
        'releases:\n  - version: "2.99.0"\n    source: s\n    variants:\n      - {name: cu130, source: s, arch_list: [sm_9x]}\n',
        5,
        "unparsable CUDA arch",
        id="bad-arch",
    ),
    pytest.param("- just\n- a list\n", 1, "expected a mapping", id="not-a-mapping"),
    pytest.param('schema: stackdoctor.matrix/9\n', 1, "unsupported schema", id="wrong-schema"),
    pytest.param("a: &a [*a]\n", 1, "refers to itself", id="recursive-alias"),
]


@pytest.mark.parametrize("text, line, fragment", BAD)
def test_invalid_file_one_sentence_with_file_and_line(tmp_path, text, line, fragment):
    p = tmp_path / "user.yaml"
    p.write_text(text, encoding="utf-8")
    with pytest.raises(MatrixError) as ei:
        load_matrix([p])
    msg = str(ei.value)
    assert msg.startswith(f"compat matrix {p} line {line}: "), msg
    assert fragment in msg
    assert "\n" not in msg and msg.endswith(".") and msg.count(". ") == 0


def test_alias_bomb_is_refused_quickly(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(MatrixError, match=r"alias bomb") as ei:
        load_matrix([p])
    assert str(p) in str(ei.value) and re.search(r" line \d+: ", str(ei.value))


def test_oversized_and_unreadable_files(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (5 * 1024 * 1024) + "\n", encoding="utf-8")
    with pytest.raises(MatrixError, match="larger than"):
        load_matrix([big])
    with pytest.raises(MatrixError, match="cannot read the compat matrix .*missing.yaml: no such file") as ei:
        load_matrix([tmp_path / "missing.yaml"])
    assert "line 1" not in str(ei.value)


# ---------------------------------------------------------------------------- the CLI


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = dict(os.environ)
    e.pop("STACKDOCTOR_MATRIX", None)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], capture_output=True, text=True, timeout=60, env=e, cwd=REPO)


def test_cli_validate_exit_codes(tmp_path):
    good = _write(tmp_path, "good.yaml", 'releases:\n  - version: "2.16.0"\n    source: s\n    variants: [{name: cpu, platforms: [win_amd64], source: s}]\n')
    bad = _write(tmp_path, "bad.yaml", 'releases:\n  - version: "2.16.0"\n    source: s\n    variants: [{name: cu1x, source: s}]\n')
    ok = _cli("matrix", "validate", str(good))
    assert ok.returncode == 0, ok.stderr
    assert "valid" in ok.stdout
    no = _cli("matrix", "validate", str(bad))
    assert no.returncode == 2
    assert no.stderr.strip().count("\n") == 0
    assert f"{bad} line 4" in no.stderr and "unknown variant kind 'cu1x'" in no.stderr


def test_cli_show_json_and_one_release():
    import json

    out = _cli("matrix", "show", "--torch", "2.13.0", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [r["version"] for r in data["releases"]] == ["2.13.0"]
    names = [v["name"] for v in data["releases"][0]["variants"]]
    assert {"cpu", "cu126", "cu130", "cu132", "rocm7.2", "xpu"} <= set(names)
    text = _cli("matrix", "show")
    assert text.returncode == 0 and "torch 2.0.1" in text.stdout and "13.0" in text.stdout
    missing = _cli("matrix", "show", "--torch", "9.9")
    assert missing.returncode == 2 and "not in the compatibility matrix" in missing.stderr


@pytest.mark.parametrize(
    "name,row",
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200 NVL"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40", "L40"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla V100-SXM2-32GB", "V100-SXM2"),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_peak_lookup_on_word_boundary(name, row):
    from stackdoctor.matrix import load_matrix

    peak = load_matrix().peak(name)
    assert (peak.gpu if peak else None) == row
    if peak:
        assert peak.source.startswith("https://")
