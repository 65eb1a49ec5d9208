"""cuda_toolkit probe: nvcc --version parsing on real outputs, and every nvcc reachable on a fake machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.nvidia import toolkit as cuda_toolkit
from stackdoctor.accelerators.nvidia.toolkit import parse_nvcc_version, parse_version_json
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.system import System

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
NVCC_13 = REAL / "local-nvcc-13.0-linux"
NVCC_11 = REAL / "pytorch-builder-580-nvcc-11.1"


def derived(case: Path) -> dict:
    block = (case / "source.md").read_text(encoding="utf-8").split("```yaml", 1)[1].split("```", 1)[0]
    return yaml.safe_load(block)


@pytest.mark.parametrize("case", [NVCC_13, NVCC_11], ids=lambda p: p.name)
def test_parse_real_nvcc_outputs(case):
    want = derived(case)
    assert parse_nvcc_version((case / "nvcc_version.txt").read_text()) == (want["nvcc_version"], want["nvcc_build"])


def test_parse_build_line_only_and_garbage():
    assert parse_nvcc_version("Build cuda_13.0.r13.0/compiler.36424714_0\n") == ("13.0", None)
    assert parse_nvcc_version("") == (None, None)
    assert parse_nvcc_version("nvcc fatal : something") == (None, None)


def test_parse_version_json():
    # the shape quoted in failures.md B2 (https://github.com/ROCm/HIPIFY/issues/2143)
    assert parse_version_json(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0.2"}})) == "13.0.2"
    assert parse_version_json("{") is None
    assert parse_version_json("[]") is None
    assert parse_version_json(json.dumps({"cuda": {"version": 12}})) is None


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsers_never_raise(text):
    parse_nvcc_version(text)
    parse_version_json(text)


def make_nvcc(path: Path, stdout: str, sleep: int = 0) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.parent / ".nvcc.out"
    data.write_text(stdout)
    # absolute paths: the probe may run with a PATH that has no coreutils
    cat, sleep_bin = shutil.which("cat"), shutil.which("sleep")
    path.write_text(f"#!/bin/sh\n{cat} {data}\n" + (f"{sleep_bin} {sleep}\n" if sleep else ""))
    path.chmod(0o755)


def release(v: str, build: str) -> str:
    return f"nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release {v}, {build}\nBuild cuda_{v}.r{v}/compiler.0_0\n"


def ctx_for(root: Path, env: dict, timeout: float = 10.0) -> ProbeContext:
    return ProbeContext(System(sysroot=str(root), env=env, timeout_s=timeout), Target(sys.executable, "self"), timeout_s=timeout, live_driver=False)


def test_every_nvcc_found_path_first_then_cuda_home(fake_bin, tmp_path):
    fake_bin("nvcc", stdout=(NVCC_13 / "nvcc_version.txt").read_text())
    root = tmp_path / "root"
    make_nvcc(root / "usr/local/cuda-12.4/bin/nvcc", release("12.4", "V12.4.131"))
    (root / "usr/local/cuda-12.4/version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.4.1"}}))
    os.symlink("cuda-12.4", root / "usr/local/cuda")  # same toolkit: listed once
    make_nvcc(root / "opt/cuda-12.1/bin/nvcc", release("12.1", "V12.1.105"))
    env = {**os.environ, "CUDA_HOME": "/opt/cuda-12.1"}
    out = cuda_toolkit.probe(ctx_for(root, env))
    f = out.facts["cuda_toolkit"]
    assert out.status == "ok"
    assert (f.nvcc_version, f.nvcc_path) == ("13.0", str(fake_bin.dir / "nvcc"))  # PATH wins
    assert f.cuda_home == "/opt/cuda-12.1" and f.sources["cuda_home"] == "env:CUDA_HOME"
    got = [(t.path, t.nvcc_version, t.nvcc_build, t.version_json, t.found_via) for t in f.toolkits]
    assert got == [
        (str(fake_bin.dir / "nvcc"), "13.0", "V13.0.88", None, "PATH"),
        ("/opt/cuda-12.1/bin/nvcc", "12.1", "V12.1.105", None, "CUDA_HOME"),
        ("/usr/local/cuda/bin/nvcc", "12.4", "V12.4.131", "12.4.1", "/usr/local/cuda*"),
    ]


def test_cuda_home_used_when_path_has_none(tmp_path):
    root = tmp_path / "root"
    make_nvcc(root / "opt/cuda/bin/nvcc", release("12.8", "V12.8.93"))
    make_nvcc(root / "usr/local/cuda-11.8/bin/nvcc", release("11.8", "V11.8.89"))
    empty = tmp_path / "empty"
    empty.mkdir()
    f = cuda_toolkit.probe(ctx_for(root, {"PATH": str(empty), "CUDA_PATH": "/opt/cuda"})).facts["cuda_toolkit"]
    assert (f.nvcc_version, f.nvcc_path, f.sources["nvcc_path"]) == ("12.8", "/opt/cuda/bin/nvcc", "CUDA_PATH")
    assert [t.nvcc_version for t in f.toolkits] == ["12.8", "11.8"]


def test_cuda_path_nvcc_exe(tmp_path):
    root = tmp_path / "root"
    make_nvcc(root / "cuda/v12.6/bin/nvcc.exe", release("12.6", "V12.6.85"))
    empty = tmp_path / "empty"
    empty.mkdir()
    f = cuda_toolkit.probe(ctx_for(root, {"PATH": str(empty), "CUDA_PATH": "/cuda/v12.6"})).facts["cuda_toolkit"]
    assert (f.nvcc_version, f.nvcc_path) == ("12.6", "/cuda/v12.6/bin/nvcc.exe")


def test_no_nvcc_anywhere_is_a_plain_fact(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = cuda_toolkit.probe(ctx_for(tmp_path / "root", {"PATH": str(empty)}))
    f = out.facts["cuda_toolkit"]
    assert out.status == "ok" and out.error is None
    assert f.nvcc_version is None and f.nvcc_path is None and f.toolkits == []


def test_hanging_nvcc_times_out(tmp_path):
    root = tmp_path / "root"
    make_nvcc(root / "usr/local/cuda-12.4/bin/nvcc", "partial\n", sleep=600)
    empty = tmp_path / "empty"
    empty.mkdir()
    start = time.monotonic()
    out = cuda_toolkit.probe(ctx_for(root, {"PATH": str(empty)}, timeout=1.0))
    assert time.monotonic() - start < 10
    assert out.status == "timeout" and out.error == "/usr/local/cuda-12.4/bin/nvcc did not answer in 1 s"
    assert out.facts["cuda_toolkit"].toolkits[0].nvcc_version is None


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc on this machine")
def test_real_nvcc_on_this_machine():
    real = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, timeout=60).stdout
    f = cuda_toolkit.probe(ProbeContext(System.from_env(), Target(sys.executable, "self"))).facts["cuda_toolkit"]
    assert f.nvcc_path == shutil.which("nvcc")
    assert f.nvcc_version == parse_nvcc_version(real)[0] and f.nvcc_version is not None


def _counting_nvcc(path: Path, stdout: str, count: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = path.parent / ".nvcc.out"
    data.write_text(stdout)
    path.write_text(f"#!/bin/sh\necho run >> {count}\n{shutil.which('cat')} {data}\n")
    path.chmod(0o755)


@pytest.mark.posix
@pytest.mark.parametrize("extra, runs", [("", 1), ("export NVCC_APPEND_FLAGS=-g\n", 2)], ids=["exec-only wrapper", "wrapper doing more"])
def test_a_wrapper_and_the_nvcc_it_runs_are_asked_once(tmp_path, extra, runs):
    """/usr/local/bin/nvcc as some CUDA images ship it, ``exec /usr/local/cuda-13.0/bin/nvcc "$@"``, and
    /usr/local/cuda/bin/nvcc are one program: both listed, one ``--version`` (issue 33). A wrapper that does
    anything else is asked on its own."""
    root, count, bindir = tmp_path / "root", tmp_path / "count", tmp_path / "bin"
    real = root / "usr/local/cuda-12.4/bin/nvcc"
    _counting_nvcc(real, release("12.4", "V12.4.131"), count)
    os.symlink("cuda-12.4", root / "usr/local/cuda")
    bindir.mkdir()
    (bindir / "nvcc").write_text(f'#!/bin/sh\n# CUDA image wrapper\n{extra}exec {real} "$@"\n')
    (bindir / "nvcc").chmod(0o755)
    f = cuda_toolkit.probe(ctx_for(root, {"PATH": f"{bindir}{os.pathsep}/usr/bin:/bin"})).facts["cuda_toolkit"]
    got = [(t.path, t.nvcc_version, t.nvcc_build, t.found_via) for t in f.toolkits]
    assert got == [(str(bindir / "nvcc"), "12.4", "V12.4.131", "PATH"), ("/usr/local/cuda/bin/nvcc", "12.4", "V12.4.131", "/usr/local/cuda*")]
    assert count.read_text().count("run") == runs


@pytest.mark.parametrize("text, want", [
    ('#!/bin/sh\nexec /usr/local/cuda-13.0/bin/nvcc "$@"\n', "/usr/local/cuda-13.0/bin/nvcc"),
    ('#!/usr/bin/env bash\n\n# x\nexec "/opt/cuda x/bin/nvcc" "$@"\n', "/opt/cuda x/bin/nvcc"),
    ('#!/bin/sh\nexec nvcc "$@"\n', None),  # not an absolute path: PATH decides
    ('#!/bin/sh\nexec /a/nvcc "$@" -g\n', None),
    ('#!/bin/sh\nexec /a/nvcc $@\n', None),
    ('#!/bin/sh\nexec $(cat /x) "$@"\n', None),
    ('#!/usr/bin/python3\nexec /a/nvcc "$@"\n', None),
    ('\x7fELF\x02\x01', None),
])
def test_wrapped_program(tmp_path, text, want):
    p = tmp_path / "nvcc"
    p.write_text(text)
    assert cuda_toolkit.wrapped_program(System(env={}), str(p)) == want
