"""Issue 43: the index the user reaches confirms an announced build at run time, remembered in the user's learned layer.

The shipped matrix announces torch 2.15.0's CPU build for Linux x86_64 (pytorch/test-infra's release-day build matrix,
no artifact seen). A real index on 127.0.0.1 (tests/indexserver.py, PyTorch's layout, files on a second host, their
sha256 on the page) serves a synthetic 2.15.0+cpu wheel: the first plan says the build is announced and that the index
confirmed it, the learned layer then holds the artifact (URL + sha256), and the second plan knows it (no "announced").
An unreachable index confirms nothing: no layer is written."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from indexserver import IndexServer, WheelSpec, _torch_files, build_wheel

REPO = Path(__file__).resolve().parent.parent
PY = f"cp{sys.version_info.major}{sys.version_info.minor}"
TAG = f"{PY}-{PY}-manylinux_2_28_x86_64"

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"), reason="the synthetic wheel is a manylinux x86_64 one"
)


def _gpu_less() -> bool:
    from stackdoctor.system import System

    return System.from_env().which("nvidia-smi") is None and not os.path.exists("/dev/kfd")


@pytest.fixture(scope="module")
def server():
    srv = IndexServer(PY)
    spec = WheelSpec("torch", "2.15.0+cpu", TAG, [], _torch_files("2.15.0+cpu"), ["cpu"])
    srv.state.specs.append(spec)
    srv.state.wheels[spec.filename] = build_wheel(spec)
    srv.start()
    yield srv
    srv.stop()


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "VIRTUAL_ENV", "CONDA_", "STACKDOCTOR_", "XDG_"))}
    env.update(HOME=str(tmp), PIP_CONFIG_FILE=os.devnull, PIP_INDEX_URL="http://127.0.0.1:9/pypi", UV_NO_CONFIG="1", STACKDOCTOR_MATRIX="",
               STACKDOCTOR_CACHE_DIR=str(tmp / "sd-cache"), XDG_CONFIG_HOME=str(tmp / "config"), NO_PROXY="127.0.0.1", no_proxy="127.0.0.1")
    return env


def _plan(index_base: str, env: dict[str, str]) -> dict:
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, "--dry-run", "--json", "--index-base", index_base],
        env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def _announced(plan: dict) -> list[str]:
    return [w for w in plan["warnings"] if w.startswith("torch 2.15.0 cpu for Linux x86_64: announced (")]


def test_the_index_confirms_an_announced_build_and_the_next_plan_knows_it(tmp_path, server):
    if not _gpu_less():
        pytest.skip("this machine has a GPU driver: its plan is not the CPU one")
    env = _env(tmp_path)
    layer = tmp_path / "config" / "stackdoctor" / "learned.yaml"  # the default learned layer (XDG_CONFIG_HOME)
    first = _plan(server.base("ok"), env)
    assert (first["torch_version"], first["variant"]) == ("2.15.0", "cpu"), first["reasons"]
    assert _announced(first), first["warnings"]  # planned while only announced, and said so
    wheel = f"torch-2.15.0+cpu-{TAG}.whl"
    sha = __import__("hashlib").sha256(server.state.wheels[wheel]).hexdigest()
    said = next(r for r in first["reasons"] if "the index confirmed the announced build" in r)
    assert sha in said and str(layer) in said, said
    # the layer holds the artifact: the file's URL on the index's file host and its sha256, for this platform only
    doc = yaml.safe_load(layer.read_text(encoding="utf-8"))
    (row,) = doc["releases"]
    (v,) = row["variants"]
    assert (row["version"], v["name"], v["platforms"], row["builds"]) == ("2.15.0", "cpu", ["manylinux_2_28_x86_64"], "partial")
    assert v["source"].startswith(f"{server.state.files_base}/") and f"sha256:{sha}" in v["source"], v["source"]
    assert layer.stat().st_mode & 0o022 == 0  # only this user may write it (load_matrix's owner check reads it)
    # the second run plans it as known: no "announced" warning, the reason names the artifact
    second = _plan(server.base("ok"), env)
    assert (second["torch_version"], second["variant"]) == ("2.15.0", "cpu")
    assert not _announced(second), second["warnings"]
    assert any(f"sha256:{sha}" in r for r in second["reasons"]), second["reasons"]
    assert not any("the index confirmed the announced build" in r for r in second["reasons"])  # nothing left to confirm


def test_an_index_listing_torch_without_the_build_records_it_absent_there(tmp_path):
    if not _gpu_less():
        pytest.skip("this machine has a GPU driver: its plan is not the CPU one")
    srv = IndexServer(PY).start()  # the catalogue alone: torch 2.13.0 and 2.12.0, no 2.15.0
    try:
        env = _env(tmp_path)
        first = _plan(srv.base("ok"), env)
        second = _plan(srv.base("ok"), env)
        other = _plan(srv.base("html"), env)  # another index (its own URL): the absence recorded for the first says nothing of it
    finally:
        srv.stop()
    index = f"{srv.base('ok')}/cpu"
    said = next(r for r in first["reasons"] if "lists torch without the announced build" in r)
    assert said.startswith("torch 2.15.0 cpu: " + index), said
    doc = yaml.safe_load((tmp_path / "config" / "stackdoctor" / "learned.yaml").read_text(encoding="utf-8"))
    row = next(r for r in doc["releases"] if r["version"] == "2.15.0")
    (v,) = row["variants"]
    # index by index: the other index lacked it too, and its own run recorded that under its own URL
    assert v["absent_on"] == {index: ["manylinux_2_28_x86_64"], f"{srv.base('html')}/cpu": ["manylinux_2_28_x86_64"]}, v
    assert not v.get("platforms") and row["builds"] == "partial", v
    # the next plan knows it is absent there: the newest build it plans from that index is 2.14.1's (announced too)
    assert "torch 2.14.1 cpu is the newest build for this machine" in second["reasons"][0], second["reasons"]
    assert "torch 2.15.0 cpu is the newest build for this machine" in other["reasons"][0], other["reasons"]  # not absent there (yet)
    # the resolver, on the matrix with that layer: known absent on that index, for that platform; another index still plans it
    from stackdoctor.kinds.base import Unfit
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.plan import Request
    from stackdoctor.resolve.variant_fit import absent_here

    m = load_matrix([str(tmp_path / "config" / "stackdoctor" / "learned.yaml")])
    rel = m.release("2.15.0")
    with pytest.raises(Unfit, match="known absent there") as why:
        absent_here(rel, rel.variant("cpu"), "manylinux_2_28_x86_64", m, Request(index_base=srv.base("ok")))
    assert why.value.reason == f"torch 2.15.0 cpu for Linux x86_64: {index} lists torch without this build (known absent there)"
    assert why.value.blocker == "unknown"  # absent on one index: never a reason for a source build
    absent_here(rel, rel.variant("cpu"), "win_amd64", m, Request(index_base=srv.base("ok")))  # another platform: as it was
    absent_here(rel, rel.variant("cpu"), "manylinux_2_28_x86_64", m, Request(index_base="http://127.0.0.1:9/whl"))  # another index


def test_an_unreachable_index_confirms_nothing(tmp_path):
    if not _gpu_less():
        pytest.skip("this machine has a GPU driver: its plan is not the CPU one")
    env = _env(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, "--dry-run", "--json", "--index-base", "http://127.0.0.1:9/whl"],
        env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert not (tmp_path / "config" / "stackdoctor" / "learned.yaml").exists()
    assert "the index confirmed" not in p.stdout


def test_the_sentences_are_in_chinese():
    from stackdoctor.core.texts import sentence

    zh = sentence("torch 2.15.0 cpu: the index confirmed the announced build (http://127.0.0.1:1/f.whl, sha256 ab12); "
                  "remembered in /home/u/.config/stackdoctor/learned.yaml, so the next plan knows it", "zh")
    assert "索引证实了这个已公布的构建" in zh and "remembered" not in zh, zh
    zh = sentence("torch 2.15.0 cpu for Linux x86_64: http://127.0.0.1:1/whl/cpu lists torch without this build (known absent there)", "zh")
    assert "已知在该索引上不存在" in zh and "known" not in zh, zh
