"""Mirrors of the PyTorch index, PyPI's default build, and their rows in the matrix (stackdoctor/wheels/mirrors.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackdoctor.accelerators.nvidia.pins import parse_cuda_requirement
from stackdoctor.core.errors import MatrixError, UsageError
from stackdoctor.matrix import load_matrix, validate_file
from stackdoctor.wheels.index import IndexFile
from stackdoctor.wheels.mirrors import (
    default_build_variant,
    parse_flat_listing,
    parse_wheel_metadata,
    pypi_platform,
    resolve_mirror,
)

FIX = Path(__file__).resolve().parent / "fixtures" / "mirrors"


def test_sjtu_mirror_intel_listing():
    page = (FIX / "sjtu-mirror-intel-cu121.html").read_text()
    files = parse_flat_listing(page, "https://mirror.sjtu.edu.cn/pytorch-wheels/cu121/?mirror_intel_list")
    assert [f.filename for f in files] == [
        "torch-2.1.0+cu121-cp310-cp310-linux_x86_64.whl",
        "torch-2.1.0+cu121-cp311-cp311-linux_x86_64.whl",
        "torchvision-0.16.0+cu121-cp310-cp310-linux_x86_64.whl",
    ]  # the "..", folder and stylesheet links are dropped
    assert files[0].url == "https://mirror.sjtu.edu.cn/pytorch-wheels/cu121/torch-2.1.0+cu121-cp310-cp310-linux_x86_64.whl"


def test_flat_autoindex_with_escaped_plus():
    page = (FIX / "flat-autoindex-cu121.html").read_text()
    files = parse_flat_listing(page, "https://mirrors.aliyun.com/pytorch-wheels/cu121/")
    assert [f.filename for f in files][:2] == ["torch-2.1.0+cu121-cp310-cp310-linux_x86_64.whl", "torch-2.1.0+cu121-cp310-cp310-win_amd64.whl"]
    assert all(f.url.startswith("https://mirrors.aliyun.com/pytorch-wheels/cu121/torch") for f in files)
    assert len(files) == 3


@pytest.mark.parametrize("text", ["", "<a href='x'>", "<<<>>>\x00", "<a href=\"../\">../</a>" * 50, "<base href=':::'><a href='a-1.0-py3-none-any.whl'>"])
def test_parse_flat_listing_never_raises(text):
    assert isinstance(parse_flat_listing(text, "http://h/x/"), list)


def test_pypi_default_build_is_read_from_the_real_wheel_metadata():
    meta = parse_wheel_metadata((FIX / "torch-2.14.1-METADATA.txt").read_text())
    assert meta["version"] == ["2.14.1"]
    assert parse_cuda_requirement(meta["requires-dist"]) == "cu130"  # cuda-toolkit[...]==13.0.3
    assert parse_cuda_requirement(["nvidia-cuda-runtime-cu12==12.8.90; platform_system == 'Linux'"]) == "cu128"
    assert parse_cuda_requirement(["nvidia-cuda-runtime==13.0.96"]) == "cu130"
    assert parse_cuda_requirement(["filelock", "sympy>=1.13.3"]) is None


def test_default_build_variant_from_the_matrix_and_unknown_rows(tmp_path):
    m = load_matrix()
    remote = IndexFile("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl", "https://pypi.org/files/torch-2.13.0.whl")
    b = default_build_variant(remote, "2.13.0", "manylinux_2_28_x86_64", m)
    assert b.variant == "cu130" and "pypi_default 2.13 linux_x86_64" in b.how
    assert default_build_variant(remote, "2.13.0", "win_amd64", m).variant == "cpu"
    # learned from the 2.9.1 wheel's own pins (nvidia-cuda-runtime-cu12==12.8.90)
    assert default_build_variant(remote, "2.9.1", "manylinux_2_28_x86_64", m).variant == "cu128"
    layer = tmp_path / "unknown.yaml"
    layer.write_text('pypi_default:\n  - {torch: "2.9", platform: linux_x86_64, variant: null, source: "test", unknown: ["test: conflicting sources"]}\n')
    unknown = default_build_variant(remote, "2.9.1", "manylinux_2_28_x86_64", load_matrix([layer]))
    assert unknown.variant is None and "conflicting sources" in unknown.how
    assert pypi_platform("manylinux_2_28_aarch64") == "linux_aarch64" and pypi_platform("macosx_14_0_arm64") == "macos_arm64"


def test_resolve_mirror_by_name_url_and_unknown():
    m = load_matrix()
    aliyun = resolve_mirror("aliyun", m)
    assert aliyun.layout == "flat" and aliyun.listing_url("cu126") == "https://mirrors.aliyun.com/pytorch-wheels/cu126/"
    assert [s.kind for s in aliyun.sources("cpu")] == ["links"]
    nju = resolve_mirror("nju", m)
    assert nju.sources("cu128")[0].url == "https://mirrors.nju.edu.cn/pytorch/whl/cu128" and nju.sources("cu128")[0].kind == "index"
    sjtu = resolve_mirror("sjtu", m)
    assert sjtu.listing_url("cu121") == "https://mirror.sjtu.edu.cn/pytorch-wheels/torch_stable.html"
    custom = resolve_mirror("https://mirror.corp/pytorch/whl/", m)
    assert custom.layout == "auto" and [s.kind for s in custom.sources("cpu")] == ["index", "links"]
    assert resolve_mirror("https://mirrors.aliyun.com/pytorch-wheels", m).name == "aliyun"
    with pytest.raises(UsageError, match=r"^--mirror tuna: not a mirror the compatibility matrix knows \(known: aliyun, sjtu, nju\); give its URL instead\.$"):
        resolve_mirror("tuna", m)


def test_every_embedded_mirror_and_conda_row_is_sourced():
    m = load_matrix()
    assert {r.name for r in m.mirrors} == {"aliyun", "sjtu", "nju"}
    assert all(r.source for r in m.mirrors) and all(r.source for r in m.pypi_defaults)
    assert m.conda is not None and m.conda.releases[0].version == "2.13.0" and m.conda.releases[0].cuda["linux-64"] == ("12.9", "13.0")


@pytest.mark.parametrize(
    "text, message",
    [
        ("mirrors:\n  - {name: x, url: 'ftp://x', layout: flat, source: s}\n", "line 2: mirrors[0].url: not an http(s):// or file:// URL: 'ftp://x'."),
        ("mirrors:\n  - {name: x, url: 'https://x', layout: tree, source: s}\n", "line 2: mirrors[0].layout: must be simple or flat, not 'tree'."),
        ("mirrors:\n  - {name: x, url: 'https://x', layout: flat}\n", "line 2: mirrors[0].source: missing (every row needs it)."),
        ("pypi_default:\n  - {torch: '2.13', platform: linux_x86_64, variant: null, source: s}\n", "line 2: pypi_default[0].unknown: a row without a variant must say what is unknown."),
        ("pypi_default:\n  - {torch: '2.13', platform: linux_x86_64, variant: cu9x, source: s}\n", "line 2: pypi_default[0].variant: not a variant name (cpu, cuXYZ, rocmX.Y, xpu): 'cu9x'."),
        ("conda:\n  channel: c\n  package: p\n  source: s\n  releases:\n    - {version: '2.13.0', cuda: {linux-65: ['12.9']}, source: s}\n",
         "line 6: conda.releases[0].cuda.linux-65: not a conda platform (linux-64, linux-aarch64, osx-arm64, win-64, ...)."),
    ],
)
def test_invalid_rows_are_one_sentence_with_file_and_line(tmp_path, text, message):
    f = tmp_path / "user.yaml"
    f.write_text(text)
    with pytest.raises(MatrixError) as exc:
        validate_file(f)
    assert str(exc.value) == f"compat matrix {f} {message}"


# ---------------------------------------------------------------------------- every parser is total

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from stackdoctor.resolve.availability import parse_constraints  # noqa: E402
from stackdoctor.wheels.sources import parse_pip_conf, parse_uv_toml  # noqa: E402

PARSERS = [
    lambda t: parse_flat_listing(t, "http://h/p/"),
    parse_wheel_metadata,
    lambda t: parse_cuda_requirement(t.splitlines()),
    parse_constraints,
    parse_pip_conf,
    parse_uv_toml,
    lambda t: parse_uv_toml(t, pyproject=True),
]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=2000) | st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace")))
def test_source_parsers_never_raise(text):
    for parse in PARSERS:
        parse(text)


def test_constraints_file_lines():
    text = "# cap\ntorch<=2.14.1\ntorchvision <= 0.29.1  # ok\n-r other.txt\nfoo @ https://x/foo.whl\nbar[extra]>=1; python_version<'3.12'\nTorch!=2.14.0\n"
    assert parse_constraints(text) == {"torch": "<=2.14.1,!=2.14.0", "torchvision": "<=0.29.1", "bar": ">=1"}


def test_metadata_read_from_the_central_directory_matches_zipfile(tmp_path):
    """The fast METADATA reader (central directory + one member) agrees with zipfile on real-format wheels
    (the generated ones, stored and deflated), and gives way to zipfile on anything else."""
    import sys
    import zipfile

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from indexserver import build_wheel, catalogue

    from stackdoctor.wheels.mirrors import _metadata_from_central_directory, local_wheel_metadata

    for spec in catalogue()[:6]:
        path = tmp_path / spec.filename
        path.write_bytes(build_wheel(spec))
        with zipfile.ZipFile(path) as zf:
            name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            assert _metadata_from_central_directory(path) == zf.read(name).decode()
        assert local_wheel_metadata(path)["name"] == [spec.name]
    junk = tmp_path / "junk.whl"
    junk.write_bytes(b"PK\x05\x06" + b"\xff" * 40)
    assert _metadata_from_central_directory(junk) is None and local_wheel_metadata(junk) is None
