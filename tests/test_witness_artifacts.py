"""Issue 30: the run-time witness learns a missing artifact, not only a missing release.

The shipped matrix knows torch 2.15.0's PyPI builds (CPU wheels for macOS and Windows, a CUDA build for Linux); its
``/whl/cpu`` Linux build only as announced by the release's build matrix (issue 43), no artifact seen. A 127.0.0.1 index
in the PyTorch layout (``<base>/cpu/torch/``, PEP 658 metadata files) serving a stand-in 2.15.0+cpu for this platform
makes the real CLI plan it, the reason saying where the build was learned.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from collections import Counter

import pytest
from learnserver import standin_wheel
from test_install_witness import REPO, TAG, VariantIndex, user_env

from stackdoctor.matrix import load_matrix
from stackdoctor.model.plan import Plan
from stackdoctor.resolve.availability import Offer, missing_artifacts

linux_x86_64 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"), reason="the stand-in wheel is a manylinux x86_64 one"
)


def _gpu_less() -> bool:
    from stackdoctor.system import System

    return System.from_env().which("nvidia-smi") is None


def test_a_known_release_whose_build_for_this_platform_is_missing_is_named_for_the_witness():
    m = load_matrix([], embedded=True)
    plan = Plan(torch_version="2.14.0", variant="cpu", index_url=None)
    served = [Offer("2.15.0", "cpu", None, False), Offer("2.14.1", "cu130", None, True), Offer("2.14.0", "cpu", None, False)]  # type: ignore[arg-type]
    assert missing_artifacts(served, m, plan, "manylinux_2_35_x86_64") == ["2.15.0"]
    # macOS: 2.15.0's CPU build for it is known (PyPI's wheel), so nothing is missing there
    assert missing_artifacts(served, m, plan, "macosx_14_0_arm64") == []
    # a CUDA build is not what a CPU plan lacks; an older release is no better than the plan
    assert missing_artifacts([Offer("2.15.0", "cu126", None, False)], m, plan, "manylinux_2_35_x86_64") == []  # type: ignore[arg-type]
    assert missing_artifacts([Offer("2.13.0", "cpu", None, False)], m, plan, "manylinux_2_35_x86_64") == []  # type: ignore[arg-type]


@linux_x86_64
def test_a_gpu_less_linux_machine_with_a_source_serving_2_15_0_cpu_gets_it(tmp_path):
    if not _gpu_less():
        pytest.skip("this machine has an NVIDIA driver: its plan is not the CPU one")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    standin_wheel(wheels, "torch", "2.15.0+cpu", TAG, ">=3.10")
    with VariantIndex(sorted(wheels.glob("*.whl"))) as idx:
        p = subprocess.run(
            [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, "--dry-run", "--json", "--index-base", idx.base],
            env=user_env(tmp_path), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
        )
        hits = Counter(idx.hits)
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.15.0", "cpu"), plan["reasons"]
    # 2.15.0 cpu for Linux is announced by the release's build matrix (issue 43): planned with its state said, and
    # taken from the index that serves it (install/remember.py confirms it where the index gives the wheel's sha256)
    assert any("2.15.0 cpu for Linux x86_64: announced" in w for w in plan["warnings"]), plan["warnings"]
    assert plan["packages"][0]["wheel"] == f"torch-2.15.0+cpu-{TAG}.whl"
    assert plan["index_url"] == f"{idx.base}/cpu"
    assert hits[f"/files/torch-2.15.0+cpu-{TAG}.whl"] == 0  # a dry run downloads no wheel


# ---------------------------------------------------------------------------- what-ifs use the user's sources


def _what_if(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, *args],
        env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert "Traceback" not in p.stderr + p.stdout, p.stderr[-3000:]
    return p


def test_a_what_if_asks_the_index_pip_is_configured_with(tmp_path):
    """A macOS what-if is a PyPI plan: it was checked on no source at all ("no source is configured") although
    PIP_INDEX_URL names one; it now asks that index, and --offline keeps it from asking."""
    from learnserver import LearnIndex

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    standin_wheel(wheels, "torch", "2.15.0", "cp312-cp312-macosx_14_0_arm64", ">=3.11")
    what_if = ["--platform", "macosx_14_0_arm64", "--python-version", "3.12", "--json"]
    with LearnIndex(sorted(wheels.glob("*.whl"))) as idx:
        env = user_env(tmp_path, PIP_INDEX_URL=idx.url)
        p = _what_if(what_if, env)
        asked = idx.hits["/simple/torch/"]
        q = _what_if([*what_if, "--offline"], env)
        asked_offline = idx.hits["/simple/torch/"] - asked
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.15.0", "cpu"), plan["reasons"]
    assert asked >= 1
    assert not any("no source is configured" in w for w in plan["warnings"]), plan["warnings"]
    assert plan["packages"][0]["wheel"] == "torch-2.15.0-cp312-cp312-macosx_14_0_arm64.whl", plan["packages"]
    assert q.returncode == 0, q.stderr[-3000:]
    assert asked_offline == 0


def test_a_what_if_with_find_links_sees_the_folder_offline(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    standin_wheel(wheels, "torch", "2.16.0+cpu", "cp312-cp312-manylinux_2_28_x86_64", ">=3.10")
    what_if = ["--platform", "manylinux_2_28_x86_64", "--python-version", "3.12", "--variant", "cpu", "--json", "--offline"]
    p = _what_if([*what_if, "--find-links", str(wheels)], user_env(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    plan = json.loads(p.stdout)
    assert (plan["torch_version"], plan["variant"]) == ("2.16.0", "cpu"), plan["reasons"]
    assert plan["reasons"][0] == f"torch 2.16.0: not in the matrix; learned from {wheels} (its file names and core metadata)"
    assert not any("no source is configured" in w for w in plan["warnings"]), plan["warnings"]


# ---------------------------------------------------------------------------- another source's build that runs


@linux_x86_64
def test_when_the_cpu_index_does_not_answer_pypis_build_that_runs_is_planned_with_its_size(tmp_path):
    """Issue 30: /whl/cpu does not answer, the configured PyPI does (with 2.15.0, PyPI's CUDA build, which runs on
    the CPU too): the plan was 2.14.0+cpu and the install exited 2. It now plans PyPI's build and says its size."""
    if not _gpu_less():
        pytest.skip("this machine has an NVIDIA driver: its plan is not the CPU one")
    from learnserver import LearnIndex

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel = standin_wheel(wheels, "torch", "2.15.0", TAG, ">=3.10", pad_mb=3)
    with LearnIndex(sorted(wheels.glob("*.whl"))) as idx:
        p = subprocess.run(
            [sys.executable, "-m", "stackdoctor", "install", "--python", sys.executable, "--dry-run", "--json"],
            env=user_env(tmp_path, PIP_INDEX_URL=idx.url), capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
        )
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    plan = json.loads(p.stdout)
    m = load_matrix([], embedded=True)
    name = m.pypi_default("2.15.0", "linux_x86_64").variant
    assert (plan["torch_version"], plan["variant"]) == ("2.15.0", name), plan["reasons"]
    mib = round(wheel.stat().st_size / (1024 * 1024))
    assert plan["reasons"][0] == (
        # 2.15.0 cpu: announced by its release-day build matrix, so the newest build planned (issue 43), served by no source here
        f"torch 2.15.0 cpu is the newest build for this machine, but none of the sources that answered has it; torch 2.15.0 {name} "
        f"from {idx.url} runs here instead, at a cost: the torch wheel is {mib} MiB, and its CUDA runtime wheels come on top"
    ), plan["reasons"]
    assert plan["packages"][0]["wheel"] == wheel.name and "torch==2.15.0" in plan["command"], plan["command"]
    from stackdoctor.core.texts import sentence

    zh = sentence(plan["reasons"][0], "zh")
    assert "代价" in zh and f"torch wheel 大小为 {mib} MiB" in zh, zh


# ---------------------------------------------------------------------------- the installed torch in a what-if


@linux_x86_64
def test_a_what_if_on_a_real_venv_with_a_newer_torch_says_downgrade(tmp_path):
    """Issue 30, on a real venv: it holds a stand-in torch 2.16.0+cu132 (installed by pip from a folder); the
    what-if ``--gpu sm_90 --driver 600`` plans an older release and says "downgrade" with the installed version."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    py_tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    standin_wheel(wheels, "torch", "2.16.0+cu132", f"{py_tag}-{py_tag}-manylinux_2_28_x86_64", ">=3.10")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    env = user_env(tmp_path)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-index", "--find-links", str(wheels), "torch==2.16.0+cu132"],
        check=True, capture_output=True, timeout=300, env=env,
    )
    p = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--python", str(venv / "bin" / "python"), "--gpu", "sm_90", "--driver", "600", "--offline", "--json"],
        env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, cwd=REPO,
    )
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    plan = json.loads(p.stdout)
    new_full = f"{plan['torch_version']}+{plan['variant']}"
    assert plan["reasons"][0].startswith(f"downgrade from 2.16.0+cu132 to {new_full}: "), plan["reasons"]
    assert f"this plan downgrades torch from 2.16.0+cu132 to {new_full}" in plan["warnings"]
