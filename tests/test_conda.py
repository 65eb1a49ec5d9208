"""conda targets: both routes, the conda-forge specs, environment.yml, and a real conda solver on them.

The solver is py-rattler (the library pixi is built on) against a local channel of small GENERATED
package records on disk (file://; nothing is downloaded). The records copy the dependency structure of
conda-forge's real recipe, conda-forge/pytorch-cpu-feedstock recipe/meta.yaml@74dd3d46ff0c3d05053197961386b5a2018cf3d1:
CUDA builds are ``cuda{XY}_{blas}_py{py}_h…_{n+200}``, depend on ``__cuda`` and on the ``cuda-version`` their
``cuda_compiler_version`` run-exports; CPU builds are ``cpu_{blas}_py{py}_h…_{n}``; ``pytorch-gpu`` pins a
``cuda*`` pytorch. ``cuda-version`` constrains ``__cuda`` (prefix-dev/pixi docs/python/pytorch.md).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from stackdoctor.install.conda import conda_command, environment_yml, routes
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, conda_name
from stackdoctor.model.plan import Request
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve import resolve

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import new_venv, run_stackdoctor  # noqa: E402
from test_install import REPO, isolated_env  # noqa: E402


def conda_facts(driver: str | None = None, cuda: str | None = None, gpu: str | None = None, conda_pkgs: list[str] | None = None) -> Facts:
    f = Facts()
    f.platform.system, f.platform.machine, f.platform.glibc_version, f.platform.libc = "Linux", "x86_64", "2.36", "glibc"
    f.python.version, f.python.executable, f.python.env_kind, f.python.env_prefix = "3.11.7", "/opt/conda/envs/ml/bin/python", "conda", "/opt/conda/envs/ml"
    f.python.platform_tag = "manylinux_2_36_x86_64"
    f.python.tags = ["cp311-cp311-manylinux_2_36_x86_64", "cp311-cp311-manylinux_2_28_x86_64"]
    f.torch.conda_packages = conda_pkgs or []
    if driver:
        from stackdoctor.model.facts import NvidiaGpu

        f.nvidia.driver_version, f.nvidia.cuda_driver_version = driver, cuda
        f.nvidia.gpus = [NvidiaGpu(0, gpu or "NVIDIA GeForce RTX 4090", compute_capability="8.9")]
    return f


def plan_routes(f: Facts, installer: str = "pip", torch: str | None = "2.13.0"):
    m = load_matrix()
    f = reconcile(f, m)  # as install hands them on: the witnesses weighed
    plan = resolve(f, m, Request(torch=torch))
    rs = routes(plan, f, m, pip_command=["python", "-m", "pip", "install", "x"], installer=installer, platform_tag=f.facts.python.platform_tag,
                driver=f.driver("nvidia").value, packages=["torch"])
    return plan, {r.name: r for r in rs}


def test_gpu_conda_env_gets_both_routes_with_the_cuda_build_selected_by_cuda_version():
    plan, rs = plan_routes(conda_facts("575.57.08", "12.9"))
    assert plan.variant == "cu126"  # PyTorch's newest CUDA build for driver 575 on 2.13
    cf = rs["conda-forge"]
    assert cf.specs == ["pytorch=2.13.0=cuda*", "cuda-version=12.9"]
    assert cf.command == ["conda", "install", "-y", "-p", "/opt/conda/envs/ml", "-c", "conda-forge", "pytorch=2.13.0=cuda*", "cuda-version=12.9"]
    assert any("CUDA 12.9: the newest of conda-forge's CUDA builds for linux-64 (13.0, 12.9) that driver 575.57.08 runs" in r for r in cf.reasons)
    assert rs["pip-wheels"].cautions[0].startswith("conda does not see pip's torch")
    assert cf.recommended and not rs["pip-wheels"].recommended


def test_conda_pip_mix_caution_names_the_conda_packages():
    _, rs = plan_routes(conda_facts("575.57.08", "12.9", conda_pkgs=["cudatoolkit-11.8.0-h4ba93d1_13", "pytorch-2.5.1-py3.11_cuda11.8_cudnn9.1.0_0"]))
    caution = rs["pip-wheels"].cautions[1]
    assert caution.startswith("conda-pip-mix: this env already has conda's cudatoolkit, pytorch; remove them first (conda remove --force cudatoolkit pytorch)")
    assert conda_name("cuda-version-12.9-h4f385c5_3") == "cuda-version"


def test_no_conda_forge_release_yet_recommends_the_wheels_and_says_why():
    plan, rs = plan_routes(conda_facts(), torch=None)  # CPU machine, newest torch with a CPU build: 2.15.0 (announced, issue 43)
    assert plan.torch_version == "2.15.0" and plan.variant == "cpu"
    cf = rs["conda-forge"]
    assert cf.specs == ["pytorch=2.13.0=cpu_*"]
    assert cf.reasons[0].startswith("conda-forge has no pytorch 2.15.0; its newest for linux-64 is 2.13.0")
    assert rs["pip-wheels"].recommended and not cf.recommended


def test_installer_commands():
    specs = ["pytorch=2.13.0=cuda*", "cuda-version=12.9"]
    assert conda_command("micromamba", specs, channel="conda-forge", prefix="/e") == ["micromamba", "install", "-y", "-p", "/e", "-c", "conda-forge", *specs]
    assert conda_command("pixi", specs, channel="conda-forge", prefix="/e") == [
        "pixi", "add", "--channel", "conda-forge", "pytorch[version='==2.13.0', build='cuda*']", "cuda-version==12.9",
    ]


# ---------------------------------------------------------------------------- a real solver on the emitted file

rattler = pytest.importorskip("rattler", reason="py-rattler (pip install py-rattler) runs the conda solver")


def _rec(name: str, version: str, build: str, number: int, depends=(), constrains=(), subdir: str = "linux-64") -> dict:
    return {"name": name, "version": version, "build": build, "build_number": number, "depends": list(depends), "constrains": list(constrains),
            "subdir": subdir, "license": "BSD-3-Clause", "md5": "0" * 32, "sha256": "0" * 64, "size": 1, "timestamp": 1754784000000}


@pytest.fixture(scope="module")
def channel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("channel")
    linux: dict[str, dict] = {"python-3.11.7-h0_0.conda": _rec("python", "3.11.7", "h0_0", 0)}
    for cuda in ("12.9", "13.0"):
        nodot = cuda.replace(".", "")
        linux[f"pytorch-2.13.0-cuda{nodot}_generic_py311_h0_202.conda"] = _rec(
            "pytorch", "2.13.0", f"cuda{nodot}_generic_py311_h0_202", 202,
            ["python >=3.11,<3.12.0a0", "__cuda", f"cuda-version >={cuda},<{int(cuda.split('.')[0]) + 1}"], ["pytorch-gpu 2.13.0", "pytorch-cpu <0.0a0"])
    linux["pytorch-2.13.0-cpu_generic_py311_h0_2.conda"] = _rec(
        "pytorch", "2.13.0", "cpu_generic_py311_h0_2", 2, ["python >=3.11,<3.12.0a0"], ["pytorch-cpu 2.13.0", "pytorch-gpu <0.0a0"])
    linux["pytorch-gpu-2.13.0-cuda129_generic_h0_202.conda"] = _rec("pytorch-gpu", "2.13.0", "cuda129_generic_h0_202", 202, ["pytorch 2.13.0 cuda*"])
    noarch = {f"cuda-version-{c}-h0_3.conda": _rec("cuda-version", c, "h0_3", 3, [], [f"__cuda >={c}"], "noarch") for c in ("12.9", "13.0")}
    for subdir, pkgs in (("linux-64", linux), ("noarch", noarch)):
        (root / subdir).mkdir()
        (root / subdir / "repodata.json").write_text(json.dumps({"info": {"subdir": subdir}, "packages": {}, "packages.conda": pkgs}))
    return root


def solve(channel: Path, env_yml: str, cuda: str | None) -> list[str]:
    doc = yaml.safe_load(env_yml)
    specs = [rattler.MatchSpec(d, strict=False) for d in doc["dependencies"] if isinstance(d, str)]  # conda's lenient spec syntax
    virtual = [rattler.GenericVirtualPackage(rattler.PackageName("__cuda"), rattler.Version(cuda), rattler.BuildString("0"))] if cuda else []

    async def go() -> list:
        r = rattler.solve([rattler.Channel(channel.as_uri())], specs, platforms=["linux-64", "noarch"], virtual_packages=virtual)
        return await r if inspect.isawaitable(r) else r

    return sorted(f"{x.name.normalized}={x.version}={x.build}" for x in asyncio.run(go()))


def test_emitted_environment_yml_solves_to_the_planned_build(channel):
    _plan, rs = plan_routes(conda_facts("575.57.08", "12.9"))
    text = environment_yml(rs["conda-forge"], name="ml", python="3.11")
    doc = yaml.safe_load(text)
    assert doc == {"name": "ml", "channels": ["conda-forge"], "dependencies": ["python=3.11", "pytorch=2.13.0=cuda*", "cuda-version=12.9"]}
    assert solve(channel, text, "12.9") == [
        "cuda-version=12.9=h0_3", "python=3.11.7=h0_0", "pytorch=2.13.0=cuda129_generic_py311_h0_202",
    ]
    # without a CUDA driver (__cuda) the CUDA spec cannot be met: that is why the route warns on such machines
    with pytest.raises(Exception, match="(?i)cuda"):
        solve(channel, text, None)


def test_cpu_environment_yml_solves_to_the_cpu_build_even_with_a_driver(channel):
    _, rs = plan_routes(conda_facts())
    text = environment_yml(rs["conda-forge"], name=None, python="3.11")
    assert solve(channel, text, "13.0") == ["python=3.11.7=h0_0", "pytorch=2.13.0=cpu_generic_py311_h0_2"]


def test_pip_route_environment_yml_keeps_the_index_line():
    _plan, rs = plan_routes(conda_facts("575.57.08", "12.9"))
    text = environment_yml(rs["pip-wheels"], name="ml", python="3.11", pip_reqs=["torch==2.13.0+cu126"], pip_args=["--extra-index-url", "https://download.pytorch.org/whl/cu126"])
    doc = yaml.safe_load(text)
    assert doc["dependencies"] == ["python=3.11", "pip", {"pip": ["--extra-index-url https://download.pytorch.org/whl/cu126", "torch==2.13.0+cu126"]}]


# ---------------------------------------------------------------------------- the command on a conda env


@pytest.fixture
def conda_env(tmp_path):
    """A venv marked as a conda environment (a conda-meta folder with a cudatoolkit record), as the target probe sees it."""
    env = tmp_path / "envs" / "ml"
    new_venv(env)
    (env / "conda-meta").mkdir()
    (env / "conda-meta" / "cudatoolkit-11.8.0-h4ba93d1_13.json").write_text("{}")
    return env


def fake_tool(bindir: Path, name: str, log: Path) -> None:
    bindir.mkdir(parents=True, exist_ok=True)
    script = bindir / name
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" > {log}\necho 'Executing transaction: done'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def sd(args, env, cwd=REPO):
    p = run_stackdoctor([sys.executable, "-m", "stackdoctor", "install", *args], env=env, text=True, timeout=120,
                        stdin=subprocess.DEVNULL, cwd=cwd)
    assert "Traceback" not in p.stderr + p.stdout, p.stderr
    return p


def test_conda_target_shows_both_routes_and_conda_runs_the_conda_forge_one(conda_env, tmp_path):
    env = isolated_env(tmp_path)
    env.update(STACKDOCTOR_MATRIX="", STACKDOCTOR_INDEX_BASE="http://127.0.0.1:9/whl")
    python = str(conda_env / "bin" / "python")
    p = sd(["--python", python, "--torch", "2.13.0", "--offline", "--dry-run"], env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "route pip-wheels" in p.stdout and "route conda-forge (recommended): conda-forge's build: pytorch 2.13.0 (CPU)" in p.stdout
    assert "conda-pip-mix: this env already has conda's cudatoolkit" in p.stdout
    # --installer conda runs the conda-forge route with the conda on PATH
    log = tmp_path / "argv.txt"
    fake_tool(tmp_path / "bin", "conda", log)
    env["PATH"] = f"{tmp_path / 'bin'}:{env['PATH']}"
    r = sd(["--python", python, "--torch", "2.13.0", "--installer", "conda", "--offline", "--yes"], env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert log.read_text().split() == ["install", "-y", "-p", str(conda_env), "-c", "conda-forge", "pytorch=2.13.0=cpu_*"]
    assert "done: conda installed pytorch=2.13.0=cpu_*." in r.stderr
    # --emit environment.yml: a file conda accepts, for this env
    e = sd(["--python", python, "--torch", "2.13.0", "--offline", "--emit", "environment.yml"], env)
    assert e.returncode == 0, e.stderr[-2000:]
    assert yaml.safe_load(e.stdout) == {"name": "ml", "channels": ["conda-forge"], "dependencies": ["python=3.11", "pytorch=2.13.0=cpu_*"]}


def test_conda_installer_missing_is_one_sentence(conda_env, tmp_path):
    env = isolated_env(tmp_path)
    env.update(STACKDOCTOR_MATRIX="", PATH="/usr/bin:/bin")
    p = sd(["--python", str(conda_env / "bin" / "python"), "--torch", "2.13.0", "--installer", "mamba", "--offline", "--yes"], env)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("stackdoctor: ")]
    assert lines == [f"stackdoctor: mamba is not on PATH, so stackdoctor cannot run it; run it yourself: mamba install -y -p {conda_env} -c conda-forge 'pytorch=2.13.0=cpu_*'"]


def test_conda_installer_on_a_plain_venv_is_one_sentence(tmp_path):
    venv = tmp_path / "venv"
    new_venv(venv)
    env = isolated_env(tmp_path)
    env.update(STACKDOCTOR_MATRIX="")
    python = str(venv / "bin" / "python")
    p = sd(["--python", python, "--torch", "2.13.0", "--installer", "conda", "--offline", "--yes"], env)
    assert p.returncode == 2
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("stackdoctor: ")]
    assert lines == [
        f"stackdoctor: --installer conda: {python} is not in a conda environment (no conda-meta in {venv}); use --installer pip or uv, or point --python at a conda env."
    ]
