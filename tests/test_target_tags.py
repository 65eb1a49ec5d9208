"""The target worker's wheel tags (stackdoctor/_worker/sd_tags.py) are packaging's: the whole ``sys_tags()`` list
on every interpreter at hand, and each platform's function for versions and architectures this machine is not."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import packaging
import pytest
from packaging import _manylinux, _musllinux, tags

WORKER = Path(__file__).resolve().parents[1] / "stackdoctor" / "_worker"


def _load():
    spec = importlib.util.spec_from_file_location("_test_sd_tags", WORKER / "sd_tags.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


sd_tags = _load()


def _interpreters() -> list[str]:
    found = [sys.executable, os.environ.get("STACKDOCTOR_TEST_TORCH_PYTHON") or "", shutil.which("python3") or "", "/usr/bin/python3"]
    return [p for p in dict.fromkeys(found) if p and os.path.exists(p)]


SNIPPET = """
import json, sys
sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2])
import sd_tags
from packaging import tags
print(json.dumps({"mine": sd_tags.sys_tags(), "packaging": [str(t) for t in tags.sys_tags()]}))
"""


@pytest.mark.parametrize("python", _interpreters())
def test_sys_tags_equal_packaging_on_each_interpreter(python):
    site = str(Path(packaging.__file__).resolve().parents[1])  # stackdoctor's own packaging, the reference
    out = subprocess.run([python, "-I", "-c", SNIPPET, str(WORKER), site], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["mine"] == got["packaging"]
    assert len(got["mine"]) > 10


def test_sys_tags_in_process():
    assert sd_tags.sys_tags() == [str(t) for t in tags.sys_tags()]


def test_the_worker_reports_the_tags_without_packaging(tmp_path):
    """A target without packaging (a --without-pip venv) gets the same list packaging gives there."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["STACKDOCTOR_IMPORT_TORCH"] = "0"
    out = subprocess.run([py, str(WORKER / "sd_target.py")], capture_output=True, text=True, env=env, timeout=60)
    line = next(ln for ln in out.stdout.splitlines() if '"section": "python"' in ln)
    data = json.loads(line.split("@@stackdoctor@@ ", 1)[1])
    assert "tags_error" not in data
    assert data["tags"] == [str(t) for t in tags.sys_tags()]  # same interpreter build as this one


@pytest.mark.parametrize("version", [(10, 3), (10, 4), (10, 9), (10, 15), (10, 16), (11, 0), (12, 3), (15, 1)])
@pytest.mark.parametrize("arch", ["x86_64", "arm64", "i386", "ppc", "ppc64", "intel"])
def test_mac_platforms(version, arch):
    assert sd_tags.mac_platforms(version, arch) == list(tags.mac_platforms(version, arch))


@pytest.mark.parametrize("version", [(11, 4), (12, 0), (13, 2), (17, 5)])
@pytest.mark.parametrize("multiarch", ["arm64_iphoneos", "x86_64-iphonesimulator"])
def test_ios_platforms(version, multiarch):
    assert sd_tags.ios_platforms(version, multiarch) == list(tags.ios_platforms(version, multiarch))


@pytest.mark.parametrize("api", [16, 21, 35])
@pytest.mark.parametrize("abi", ["arm64_v8a", "x86-64", "armeabi.v7a"])
def test_android_platforms(api, abi):
    assert sd_tags.android_platforms(api, abi) == list(tags.android_platforms(api, abi))


@pytest.mark.parametrize("glibc", [(2, 5), (2, 17), (2, 28), (2, 39), (3, 1), (-1, -1)])
@pytest.mark.parametrize("archs", [["x86_64"], ["aarch64"], ["ppc64le"], ["s390x"], ["riscv64"], ["i686"], ["armv8l", "armv7l"], ["mips"]])
def test_manylinux_platforms(monkeypatch, glibc, archs):
    monkeypatch.setattr(_manylinux, "_get_glibc_version", lambda: _manylinux._GLibCVersion(*glibc))
    assert sd_tags.manylinux_platforms(archs, glibc) == list(_manylinux.platform_tags(archs))


@pytest.mark.parametrize("musl", [None, (1, 1), (1, 2)])
def test_musllinux_platforms(monkeypatch, musl):
    monkeypatch.setattr(_musllinux, "_get_musl_version", lambda exe: None if musl is None else _musllinux._MuslVersion(*musl))
    for archs in (["x86_64"], ["armv8l", "armv7l"]):
        assert sd_tags.musllinux_platforms(archs, musl) == list(_musllinux.platform_tags(archs))


@pytest.mark.parametrize("text", ["musl libc (x86_64)\nVersion 1.2.4\nDynamic Program Loader\n", "musl libc\n", "glibc\nVersion 2.3\n", "\n musl libc (aarch64)\n\n Version 1.1.24\n", ""])
def test_musl_version_text(text):
    want = _musllinux._parse_musl_version(text)
    assert sd_tags.parse_musl_version(text) == (None if want is None else tuple(want))


def test_musl_version_of_a_glibc_interpreter_is_none():
    assert sd_tags.musl_version(sys.executable) is None
    assert sd_tags.musl_version("/nonexistent/python") is None


@pytest.mark.parametrize("version", [(3,), (3, 2), (3, 8), (3, 11), (3, 13), (3, 15)])
def test_cpython_and_compatible_tags(version):
    plats = ["linux_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"]
    assert sd_tags.cpython_tags(version, plats) == [str(t) for t in tags.cpython_tags(version, platforms=plats)]
    assert sd_tags.compatible_tags(version, "cp311", plats) == [str(t) for t in tags.compatible_tags(version, "cp311", plats)]
    assert sd_tags.compatible_tags(version, None, plats) == [str(t) for t in tags.compatible_tags(version, None, plats)]


def test_generic_tags_and_32_bit_linux():
    plats = ["linux_x86_64"]
    assert sd_tags.generic_tags(plats) == [str(t) for t in tags.generic_tags(platforms=plats)]
    assert sd_tags.linux_platforms("linux_x86_64", True, (2, 17), None)[:1] == ["linux_i686"]
    assert sd_tags.linux_platforms("freebsd_14_amd64", False, (2, 17), None) == ["freebsd_14_amd64"]
