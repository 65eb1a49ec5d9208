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


def _plan(facts, matrix, request):
    """The plan as install makes it: the facts reconciled first (resolve refuses raw ones)."""
    from stackdoctor.reconcile import reconcile
    from stackdoctor.resolve import resolve

    return resolve(reconcile(facts, matrix), matrix, request)


def _row(doc, version):
    return next(r for r in doc["releases"] if r["version"] == version)


def test_skeleton_is_what_the_real_wheel_says():
    src = json.loads((FIX / (SKELETON.name + ".source.json")).read_text())
    assert src["url"].startswith("https://files.pythonhosted.org/") and len(src["sha256"]) == 64
    assert SKELETON.stat().st_size < 200_000
    from stackdoctor.wheels.learn import read_wheel_gpu_code

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


def test_learned_layer_is_a_matrix_the_commands_use(learned, monkeypatch):
    from stackdoctor.matrix import load_matrix, validate_file

    _home, out, _r, _doc = learned
    validate_file(out)
    monkeypatch.setenv("STACKDOCTOR_LEARNED", str(out))  # the user's learned layer: loaded without --matrix
    m = load_matrix()
    assert m.release("2.16.0") is not None and m.release("2.16.0").variant("cpu") is not None
    cu = m.release("2.15.0").variant("cu132")
    assert cu is not None and cu.learned and cu.arch_list == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def test_index_witness_plans_an_unknown_release(index):
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Request
    from stackdoctor.wheels.index import IndexClient, PageCache
    from stackdoctor.wheels.learn import HttpSource, witness_matrix

    m = load_matrix()
    assert m.release("2.16.0") is None
    with IndexClient({}, cache=PageCache(None)) as client:
        m2, notes = witness_matrix(m, [HttpSource(index.url, client)])
    assert any("2.16.0" in n and index.url in n for n in notes)
    plan = _plan(Facts(), m2, Request(platform="manylinux_2_28_x86_64", python_version="3.11", variant="cpu"))
    assert plan.torch_version == "2.16.0" and plan.variant == "cpu"
    assert any("learned" in r and "127.0.0.1" in r for r in plan.reasons), plan.reasons


def test_learn_bad_values_are_one_sentence(tmp_path):
    r = _cli("matrix", "learn", "--torch", "banana", "--out", str(tmp_path / "x.yaml"), home=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "banana" in r.stderr


# ---------------------------------------------------------------------------- the shipped matrix, regenerated by learn


def _shipped():
    from stackdoctor.matrix import load_matrix

    return load_matrix([], embedded=True)


def test_every_final_pypi_release_is_known():
    m = _shipped()
    versions = json.loads((FIX / "pypi-torch-releases.json").read_text())["versions"]
    assert "2.14.1" in versions and "2.15.0" in versions and len(versions) >= 28
    assert [v for v in versions if m.release(v) is None] == []
    row = m.release("2.14.1")
    assert row is not None and row.learned and "files.pythonhosted.org" in row.variants[0].source + row.variants[-1].source


def test_unpinned_plans_pick_the_newest_release_where_it_fits():
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Request

    m = _shipped()
    h100 = _plan(Facts(), m, Request(platform="manylinux_2_28_x86_64", python_version="3.12", gpus=["H100"], driver="595.45.04"))
    assert (h100.torch_version, h100.variant) == ("2.15.0", "cu132"), h100.reasons
    assert h100.command and "torch==2.15.0" in h100.command  # PyPI's default build is cu132: planned from PyPI
    win = _plan(Facts(), m, Request(platform="win_amd64", python_version="3.12"))
    assert (win.torch_version, win.variant) == ("2.15.0", "cpu"), win.reasons
    py315 = _plan(Facts(), m, Request(platform="manylinux_2_28_x86_64", python_version="3.15", gpus=["H100"], driver="595.45.04"))
    assert py315.torch_version == "2.15.0", py315.reasons
    old_driver = _plan(Facts(), m, Request(platform="manylinux_2_28_x86_64", python_version="3.12", gpus=["H100"], driver="570.86.10"))
    assert old_driver.variant != "cu132" and old_driver.torch_version != "2.15.0", old_driver.reasons  # CUDA 13 needs >= 580
    t13 = _plan(Facts(), m, Request(platform="manylinux_2_28_x86_64", python_version="3.13t", gpus=["H100"], driver="595.45.04", torch="2.12.0"))
    assert t13.torch_version == "2.12.0", t13.reasons  # 2.12.0 has cp313t wheels (only 2.12.1 dropped them)


def _h100_with(torch_version: str, variant: str):
    from stackdoctor.model.facts import Facts, NvidiaFacts, NvidiaGpu, PlatformFacts, PythonFacts, TorchFacts

    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64", libc="glibc", glibc_version="2.39")
    f.python = PythonFacts(executable="/venv/bin/python", version="3.12.3", implementation="cpython", platform_tag="manylinux_2_39_x86_64")
    f.nvidia = NvidiaFacts(driver_version="595.45.04", cuda_driver_version="13.2", smi_state="ok",
                           gpus=[NvidiaGpu(index=0, name="NVIDIA H100 80GB HBM3", compute_capability="9.0")])
    f.torch = TorchFacts(installed=True, version=f"{torch_version}+{variant}", variant=variant, cuda="13.2", cuda_available=True, imported=True)
    return f


def test_no_silent_downgrade():
    import tempfile

    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.plan import Request

    unknown = Path(tempfile.mkdtemp()) / "unknown.yaml"  # a release whose builds the matrix does not know
    unknown.write_text('releases:\n  - {version: "2.16.0", source: "test stand-in", variants: []}\n', encoding="utf-8")
    hand_kept = load_matrix([*(REPO / "compat_matrix" / n for n in ("releases.yaml", "cuda.yaml", "gpus.yaml", "indexes.yaml", "platform.yaml")), unknown],
                            embedded=False)
    assert hand_kept.release("2.16.0") is not None and not hand_kept.release("2.16.0").variants  # builds unknown there
    f = _h100_with("2.16.0", "cu132")
    keep = _plan(f, hand_kept, Request())
    assert keep.satisfied and (keep.torch_version, keep.variant) == ("2.16.0", "cu132") and keep.command == []
    assert "no downgrade" in keep.reasons[0] and "matrix learn" in keep.reasons[0]
    pinned = _plan(f, hand_kept, Request(torch="2.14.0"))
    assert pinned.reasons[0].startswith("downgrade from 2.16.0+cu132 to 2.14.0+cu132: --torch 2.14.0 asks for it"), pinned.reasons
    down = _plan(f, hand_kept, Request(variant="cpu"))
    assert down.reasons[0].startswith("downgrade from 2.16.0+cu132 to 2.15.0+cpu: --variant cpu asks for that build"), down.reasons
    up = _plan(_h100_with("2.13.0", "cu130"), _shipped(), Request(variant="cpu"))
    assert up.reasons[0] == "replaces the installed torch: 2.13.0+cu130 -> 2.15.0+cpu", up.reasons  # 2.15.0+cpu: announced


def test_a_failed_plan_is_one_honest_answer():
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Request
    from stackdoctor.resolve import request_value_error

    plan = _plan(Facts(), _shipped(), Request(platform="win_amd64", python_version="3.12", torch="2.14.0", variant="rocm7.2", gfx=["gfx1100"]))
    assert plan.variant is None and plan.command == [] and plan.error is not None and plan.error.exit_code == 1
    assert plan.error.message.startswith("No torch build fits this request: ")
    assert "amiga" in request_value_error(platform="amiga")
    assert "Python 3 only" in request_value_error(python_version="2.7")
    assert "banana" in request_value_error(torch="banana")
    assert request_value_error(torch="2.13.0", platform="win_amd64", python_version="3.13t") is None


def test_companions_fall_back_to_the_newest_release_that_has_them(tmp_path):
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Request

    layer = tmp_path / "l.yaml"
    layer.write_text('releases:\n  - {version: "2.16.0", source: "test stand-in", pythons: ["3.12"], variants: [{name: cpu, platforms: [win_amd64], source: "test stand-in"}]}\n')
    m = load_matrix([layer])
    plan = _plan(Facts(), m, Request(platform="win_amd64", python_version="3.12", packages=["torch", "torchvision", "torchaudio"]))
    assert plan.torch_version == "2.15.0", plan.reasons
    assert any("2.16.0" in r and "no torchaudio or torchvision paired" in r for r in plan.reasons), plan.reasons


def test_index_credentials_stay_out_of_what_learn_prints_and_writes(index, tmp_path):
    url = index.url.replace("http://", "http://learner:s3cr3t-token@")
    out = tmp_path / "l.yaml"
    r = _cli("matrix", "learn", "--index", url, "--out", str(out), "--torch", "2.16.0", "--no-companions", home=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "s3cr3t-token" not in r.stdout + r.stderr and "s3cr3t-token" not in out.read_text()
    assert "2.16.0" in out.read_text()


def test_no_fix_downgrades_to_reach_the_same_variant():
    """driver-minor-compat on 2.15.0+cu132 (driver 580: CUDA 13's floor, below 13.2's toolkit minimum) with a matrix that
    does not know 2.15.0's builds: its fix must not be `install --variant cu132`, which plans 2.14.0+cu132."""
    from stackdoctor.matrix import load_matrix
    from stackdoctor.reconcile import reconcile
    from stackdoctor.rules.diagnose import diagnose

    hand_kept = load_matrix([REPO / "compat_matrix" / n for n in ("releases.yaml", "cuda.yaml", "gpus.yaml", "indexes.yaml", "platform.yaml")], embedded=False)
    f = _h100_with("2.15.0", "cu132")
    f.nvidia.driver_version = "580.82.07"
    f.nvidia.cuda_driver_version = "13.0"
    out = {x.code: x for x in diagnose(reconcile(f, hand_kept), hand_kept)}
    assert "driver-minor-compat" in out, list(out)
    assert "--variant cu132" not in (out["driver-minor-compat"].fix or "")
    assert "torch-newer-than-matrix" not in out  # the matrix has a 2.15.0 row (its builds unknown): not newer than it


def test_matrix_show_json_has_every_table():
    from stackdoctor.matrix import TOP_KEYS

    data = _shipped().to_data()
    assert TOP_KEYS - {"note"} <= set(data)
    assert data["l4t_releases"] and data["intel_gpus"] and data["pypi_default"]


def test_index_witness_infers_gpu_code_from_the_nearest_build_of_the_same_cuda(tmp_path):
    from stackdoctor.model.facts import Facts
    from stackdoctor.model.plan import Request
    from stackdoctor.wheels.index import IndexClient, PageCache
    from stackdoctor.wheels.learn import HttpSource, witness_matrix

    standin = standin_wheel(tmp_path, "torch", "2.16.0+cu132", "cp312-cp312-manylinux_2_28_x86_64", ">=3.11")
    with LearnIndex([standin]) as idx, IndexClient({}, cache=PageCache(None)) as client:
        m, notes = witness_matrix(_shipped(), [HttpSource(idx.url, client)])
    cu = m.release("2.16.0").variant("cu132")
    assert cu.arch_list == m.release("2.15.0").variant("cu132").arch_list and cu.derived_from.startswith("inferred: GPU code of torch 2.15.0 cu132")
    plan = _plan(Facts(), m, Request(platform="manylinux_2_28_x86_64", python_version="3.12", gpus=["H100"], driver="595.45.04"))
    assert (plan.torch_version, plan.variant, plan.index_url) == ("2.16.0", "cu132", idx.url)
    assert any("inferred" in r and idx.url.rsplit("/", 1)[0] in r for r in plan.reasons), plan.reasons
