"""``stackdoctor matrix learn`` against a real index on 127.0.0.1 serving real artifacts (tests/learnserver.py):
the real torch 2.13.0+cpu wheel, the real torchvision 0.28.0 wheel, the committed skeleton of PyPI's torch 2.15.0
CUDA wheel, and a stand-in torch 2.16.0+cpu that no matrix knows. The learned rows must say what the wheels say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from learnserver import LearnIndex, standin_wheel

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "learn"
SKELETON = FIX / "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
TORCH_CPU = "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
TORCHVISION = "torchvision-0.28.0-cp311-cp311-manylinux_2_28_x86_64.whl"


def _real(name: str, requirement: str, cache: Path) -> Path:
    """A real wheel from pip's configured sources (find-links folders first; else ``pip download`` into a cache)."""
    for folder in [*os.environ.get("PIP_FIND_LINKS", "").split(), "/opt/wheels", "/opt/pypi-more/files", str(cache)]:
        p = Path(folder) / name
        if p.is_file():
            return p
    cache.mkdir(parents=True, exist_ok=True)
    r = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64",
                        "--python-version", "3.11", "-d", str(cache), requirement], capture_output=True, text=True, timeout=600)
    p = cache / name
    if not p.is_file():
        pytest.skip(f"the real wheel {name} is not in pip's sources here: {r.stderr[-300:]}")
    return p


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    cache = Path.home() / ".cache" / "stackdoctor-tests" / "wheels"
    tmp = tmp_path_factory.mktemp("learnidx")
    standin = standin_wheel(tmp, "torch", "2.16.0+cpu", "cp311-cp311-manylinux_2_28_x86_64", ">=3.11")
    wheels = [_real(TORCH_CPU, "torch==2.13.0+cpu", cache), _real(TORCHVISION, "torchvision==0.28.0", cache), SKELETON, standin]
    with LearnIndex(wheels) as idx:
        yield idx


def _cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STACKDOCTOR_", "XDG_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / "cache"), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def learned(index, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    out = home / "learned.yaml"
    r = _cli("matrix", "learn", "--index", index.url, "--out", str(out), "--download", home=home)
    assert r.returncode == 0, r.stdout + r.stderr
    return home, out, r, yaml.safe_load(out.read_text())


def _row(doc, version):
    return next(r for r in doc["releases"] if r["version"] == version)


def test_skeleton_is_what_the_real_wheel_says():
    src = json.loads((FIX / (SKELETON.name + ".source.json")).read_text())
    assert src["url"].startswith("https://files.pythonhosted.org/") and len(src["sha256"]) == 64
    assert SKELETON.stat().st_size < 200_000
    from stackdoctor.learn import read_wheel_gpu_code

    code = read_wheel_gpu_code(SKELETON)
    assert code is not None and code["arch_list"] == src["libtorch_cuda.so"]["arch_list"] and code["ptx"] == src["libtorch_cuda.so"]["ptx"]


def test_learned_rows_equal_the_wheels(learned, index):
    _home, _out, r, doc = learned
    row = _row(doc, "2.15.0")
    assert row["requires_python"] == ">=3.11"
    assert row["pythons"] == ["3.12"]
    assert row["triton_requirement"] == "triton~=3.9.0"
    (cu,) = row["variants"]
    assert cu["name"] == "cu132" and cu["index"] == "pypi" and cu["platforms"] == ["manylinux_2_28_x86_64"]
    assert cu["arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]  # no +PTX: the real binary has none
    assert cu["runtime"]["cuda-toolkit"] == "13.2.2" and cu["runtime"]["nvidia-cudnn-cu13"] == "9.26.0.51" and cu["runtime"]["nvidia-nccl-cu13"] == "2.30.7"
    assert SKELETON.name in cu["source"] and index.sha[SKELETON.name] in cu["source"] and "libtorch_cuda.so" in cu["source"]
    cpu13 = _row(doc, "2.13.0")
    assert cpu13["torchvision"] == "0.28.0"  # torchvision 0.28.0's own Requires-Dist: torch==2.13.0
    (v,) = cpu13["variants"]
    assert v["name"] == "cpu" and v["pythons"] == ["3.11"] and "index" not in v  # a +cpu label: the variant index serves it
    assert index.sha[TORCH_CPU] in v["source"]
    assert index.hits[f"/files/{TORCH_CPU}"] == 0  # its metadata file was enough: the 190 MB wheel was not fetched
    assert "127.0.0.1" not in r.stdout or "learned" in r.stdout


def test_learn_is_incremental(learned, index):
    home, out, _r, _doc = learned
    before = sum(n for p, n in index.hits.items() if p.endswith(".metadata")) + index.hits[f"/files/{SKELETON.name}"]
    r = _cli("matrix", "learn", "--index", index.url, "--out", str(out), "--download", home=home)
    assert r.returncode == 0, r.stderr
    assert "already learned" in r.stdout and "2.15.0" in r.stdout
    after = sum(n for p, n in index.hits.items() if p.endswith(".metadata")) + index.hits[f"/files/{SKELETON.name}"]
    assert after == before


def test_learned_layer_is_a_matrix_the_commands_use(learned):
    home, out, _r, _doc = learned
    r = _cli("matrix", "show", "--torch", "2.16.0", "--matrix", str(out), home=home)
    assert r.returncode == 0, r.stderr
    r = _cli("matrix", "validate", str(out), home=home)
    assert r.returncode == 0, r.stderr


def test_index_witness_plans_an_unknown_release(index):
    from stackdoctor.facts import Facts
    from stackdoctor.index import IndexClient, PageCache
    from stackdoctor.learn import HttpSource, witness_matrix
    from stackdoctor.matrix import load_matrix
    from stackdoctor.plan import Request
    from stackdoctor.resolve import resolve

    m = load_matrix()
    assert m.release("2.16.0") is None
    with IndexClient({}, cache=PageCache(None)) as client:
        m2, notes = witness_matrix(m, [HttpSource(index.url, client)])
    assert any("2.16.0" in n and index.url in n for n in notes)
    plan = resolve(Facts(), m2, Request(platform="manylinux_2_28_x86_64", python_version="3.11", variant="cpu"))
    assert plan.torch_version == "2.16.0" and plan.variant == "cpu"
    assert any("learned" in r and "127.0.0.1" in r for r in plan.reasons), plan.reasons


def test_learn_bad_values_are_one_sentence(tmp_path):
    r = _cli("matrix", "learn", "--torch", "banana", "--out", str(tmp_path / "x.yaml"), home=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "banana" in r.stderr
