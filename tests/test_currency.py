"""Issue 43: unknown is not absent. A build is known (an artifact, a sourced build list), announced (a release-day
build matrix, no artifact yet), known absent (a source that lists the release's builds does not name it) or unknown;
plans, reasons, suggestions and the JSON say which, an unknown build is never "not published" nor a reason for a
source build, and a rejection names the blocker a user can act on first (the driver before the GPU).

The what-ifs run on the shipped matrix (its 2.15.0 and 2.14.1 rows: PyPI's wheels learned, download.pytorch.org's
builds announced by pytorch/test-infra's build matrix), so their expectations are computed from it where they can be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackdoctor.core.texts import sentence
from stackdoctor.matrix import load_matrix
from stackdoctor.model.plan import Plan, Request
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve import resolve as _resolve
from stackdoctor.resolve.source_build import offer_from_source

HERE = Path(__file__).resolve().parent
MACHINES = HERE / "fixtures" / "machines"


@pytest.fixture(scope="module")
def shipped():
    return load_matrix([], embedded=True)


def _plan(matrix, request: Request) -> tuple[Plan, str]:
    from stackdoctor.model.facts import Facts, from_data

    facts = from_data(Facts, json.loads((MACHINES / "no-gpu-linux.json").read_text(encoding="utf-8"))["facts"])
    view = reconcile(facts, matrix)
    plan = _resolve(view, matrix, request)
    offer = offer_from_source(plan, view, matrix, request)
    words = [*plan.reasons, *plan.warnings, *plan.suggestions, *(r.reason for r in plan.rejected), offer or ""]
    return plan, "\n".join(words)


def _newest_with(matrix, kind: str, os_: str, arch: str) -> str:
    """The newest release whose ``kind`` build the matrix knows or announces for that platform."""
    for r in matrix.releases:
        for v in r.variants:
            if v.kind == kind and r.build_state(v.name, os_, arch) in ("known", "announced"):
                return str(r.version)
    raise AssertionError(f"no {kind} build for {os_} {arch}")


def test_a_cpu_runner_unpinned_is_planned_the_newest_cpu_build_with_its_state_said(shipped):
    newest = _newest_with(shipped, "cpu", "linux", "x86_64")
    assert newest == str(shipped.releases[0].version)  # the newest release has a CPU build (announced), not 2.14.0
    plan, words = _plan(shipped, Request(platform="manylinux_2_28_x86_64", python_version="3.12"))
    assert (plan.torch_version, plan.variant) == (newest, "cpu"), words
    state = shipped.release(newest).build_state("cpu", "linux", "x86_64")
    assert state == "announced"
    said = next(w for w in plan.warnings if f"torch {newest} cpu for Linux x86_64: announced (pytorch/test-infra" in w)
    assert "已公布" in sentence(said, "zh")


def test_windows_rtx_4070_is_told_nothing_is_unpublished_nor_offered_a_source_build(shipped):
    plan, words = _plan(shipped, Request(platform="win_amd64", python_version="3.12", gpus=["RTX 4070"], driver="580"))
    assert plan.satisfiable and plan.variant and plan.variant.startswith("cu"), words
    assert "not published" not in words and "--from-source" not in words, words
    assert plan.torch_version == str(shipped.releases[0].version), words
    assert any("announced (" in w for w in plan.warnings), words


@pytest.mark.parametrize("gpu, driver", [("RTX 5090", "575"), ("H100", "550")])
def test_an_old_driver_is_named_as_the_blocker_not_the_gpu(shipped, gpu, driver):
    plan, words = _plan(shipped, Request(platform="manylinux_2_28_x86_64", python_version="3.12", gpus=[gpu], driver=driver))
    newest = str(shipped.releases[0].version)
    assert "--from-source" not in words and "no published build" not in words, words
    assert any(s.startswith("upgrade the driver to >= 580 (torch " + newest) for s in plan.suggestions), words
    mine = [r for r in plan.rejected if r.torch == newest]
    assert mine and mine[0].blocker == "driver", words
    # the driver comes first among each release's rejections, the GPU's arch after it
    for release in {r.torch for r in plan.rejected}:
        order = [r.blocker for r in plan.rejected if r.torch == release]
        assert order == sorted(order, key=["driver", "python", "platform", "device", "unknown", "newer"].index), (release, order)
    zh = sentence(next(s for s in plan.suggestions if s.startswith("upgrade the driver")), "zh")
    assert "将驱动升级到" in zh


_LAYER = '''schema: stackdoctor.matrix/1
releases:
- version: "7.9.0"
  source: "test: one index's files only"
  learned: "2026-12-01"
  pythons: ["3.12"]
  variants:
    - {name: cu130, platforms: [manylinux_2_28_x86_64], arch_list: [sm_75, sm_80, sm_86, sm_89, sm_90, sm_120], learned: "2026-12-01", source: "test artifact"}
- version: "7.8.0"
  source: "test: the release's build matrix"
  pythons: ["3.12"]
  variants:
    - {name: cpu, platforms: [manylinux_2_28_x86_64, win_amd64], source: "test"}
    - {name: cu130, platforms: [manylinux_2_28_x86_64], arch_list: [sm_75, sm_80, sm_86, sm_89, sm_90, sm_120], source: "test"}
'''


def test_unknown_and_absent_are_two_states_in_reasons_and_json(tmp_path):
    """A learned-only release names what one index served: its Windows build is unknown (blocker "unknown", no source
    build); a release whose build list is sourced and lacks it: "not published" (known absent)."""
    layer = tmp_path / "m.yaml"
    layer.write_text(_LAYER, encoding="utf-8")
    mm = load_matrix([layer, HERE / "fixtures" / "matrix" / "platform.yaml", HERE.parent / "compat_matrix" / "cuda.yaml"], embedded=False)
    assert mm.release("7.9.0").build_state("cu130", "windows", "amd64") == "unknown"
    assert mm.release("7.8.0").build_state("cu130", "windows", "amd64") == "absent"
    plan, words = _plan(mm, Request(platform="win_amd64", python_version="3.12", gpus=["RTX 4070"], driver="580.65.06"))
    by = {r.torch: r for r in plan.rejected}
    assert by["7.9.0"].blocker == "unknown" and "unknown (no source lists torch 7.9.0's builds for it" in by["7.9.0"].reason
    assert by["7.8.0"].reason == "torch 7.8.0: cu130 is not published for Windows amd64" and by["7.8.0"].blocker == "platform"
    assert "--from-source" not in words
    data = plan.to_data()
    assert {r["blocker"] for r in data["rejected"]} == {"unknown", "platform"}


def test_the_cli_what_if_says_the_states_in_its_json(tmp_path):
    """The what-if as a user runs it: a clean HOME, --offline; the plan JSON carries each rejection's blocker and
    validates against the shipped schema (tests/test_schemas.py checks the schema is the generator's)."""
    import jsonschema

    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run(
        [sys.executable, "-m", "stackdoctor", "install", "--offline", "--json", "--platform", "manylinux_2_28_x86_64",
         "--python-version", "3.12", "--gpu", "RTX 5090", "--driver", "575"],
        capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    schema = json.loads((HERE.parent / "stackdoctor" / "schemas" / "plan.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(data, schema)
    assert data["rejected"][0]["blocker"] == "driver"
    assert not any("--from-source" in s for s in data["suggestions"]), data["suggestions"]


def test_a_gpu_nobody_makes_is_one_sentence_and_exit_2(tmp_path):
    """``--gpu sm_999 --driver 580`` was planned "by PTX JIT"; now one sentence (in both languages) and exit 2."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    for lang, words in (("en", "no NVIDIA GPU with compute capability 99.9 is known"), ("zh", "不存在已知计算能力为 99.9 的 NVIDIA GPU")):
        out = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--offline", "--gpu", "sm_999", "--driver", "580", "--lang", lang],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
        assert out.returncode == 2 and out.stdout == "", (out.stdout, out.stderr)
        assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr, out.stderr


def test_a_real_compute_capability_still_plans(shipped):
    plan, words = _plan(shipped, Request(platform="manylinux_2_28_x86_64", python_version="3.12", gpus=["sm_120"], driver="580.65.06"))
    assert plan.satisfiable and plan.variant and plan.variant.startswith("cu"), words
    from stackdoctor.accelerators.nvidia.fit import impossible_cc

    assert impossible_cc("sm_120", shipped) is None and impossible_cc("RTX 4090", shipped) is None and impossible_cc("sm_999", shipped)


def test_a_910b_gets_the_newest_post_release_of_its_torch_npu():
    """torch_npu.yaml lists every final and .postN release PyPI serves (benchmarks/torch_npu_rows.py, upload dates from
    PyPI's JSON); the newest post release of the torch planned is planned, its CANN need said as a floor where
    Ascend's table does not list it."""
    import yaml
    from packaging.version import Version

    table = yaml.safe_load((HERE.parent / "stackdoctor" / "accelerators" / "ascend" / "torch_npu.yaml").read_text(encoding="utf-8"))
    rows = table["releases"]
    versions = [Version(str(r["version"])) for r in rows]
    assert versions == sorted(versions, reverse=True) and len(versions) == len(set(versions))
    assert all(r.get("uploaded") and r.get("wheels") for r in rows)
    plan, words = _plan(load_matrix(), Request(platform="manylinux_2_28_aarch64", python_version="3.11", devices={"ascend": ["910B"]}))
    npu = next(p for p in plan.packages if p.name == "torch-npu")
    newest = max((Version(str(r["version"])) for r in rows if str(r["torch"]) == plan.torch_version), default=None)
    assert newest is not None and newest.post and Version(npu.version) == newest, words
    assert f"torch-npu {npu.version}: the CANN it needs is known only as a floor" in words


def test_matrix_show_says_each_glibc_floor_and_which_builds_are_only_announced(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "stackdoctor", "matrix", "show", "--lang", "en"], capture_output=True, text=True, timeout=120,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "glibc >= ?" not in out.stdout
    assert "glibc >= 2.28 (the wheels' tags)" in out.stdout  # 2.15.0: its row names none, its manylinux_2_28 wheels do
    assert "(announced, no artifact seen: win_amd64)" in out.stdout
    assert "torch 2.12.0 (" not in out.stdout  # a patch row is not dated by the newer patch's release day


@pytest.mark.parametrize("gpu, variant_kind", [("Arc B580", "xpu"), ("Radeon RX 7900 XTX", "rocm")])
def test_gpu_names_intel_and_amd_devices_through_the_seam(tmp_path, gpu, variant_kind):
    """``--gpu "Arc B580"`` was "this machine has no NVIDIA driver to assume"; a kind claims the names of its devices
    (Accelerator.gpu_name) and the what-if plans its build."""
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-m", "stackdoctor", "install", "--offline", "--json", "--gpu", gpu, "--platform", "manylinux_2_28_x86_64",
                          "--python-version", "3.12"], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["variant"].startswith(variant_kind), plan
    assert "NVIDIA driver" not in out.stderr
