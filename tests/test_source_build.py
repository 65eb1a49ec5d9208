"""install --from-source: the build plan (stackdoctor/resolve/source_build.py) on recorded machines and recorded tool outputs.

Machines are tests/fixtures/machines/*.json (issue 3's cases); tool outputs are tests/fixtures/buildtools/ (each
with its public source in SOURCE.md there). Pure: no tool runs here except the CLI what-if at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import check_document, run_sd

from stackdoctor import pipeline
from stackdoctor.accelerators.nvidia import arch_list
from stackdoctor.accelerators.nvidia.build_tools import parse_cudnn_header
from stackdoctor.install import buildtools as bt
from stackdoctor.model.facts import Facts, from_data
from stackdoctor.model.toolchain import BuildTools, Tool
from stackdoctor.reconcile import reconcile
from stackdoctor.resolve.source_build import BuildRequest, build_plan, env_file, max_jobs, offer_from_source

FIX = Path(__file__).parent / "fixtures"
GB = 1000**3


@pytest.fixture(scope="module")
def matrix():
    return pipeline.load_matrix(pipeline.Options())


def machine(name: str, matrix, **python) -> Facts:
    data = json.loads((FIX / "machines" / f"{name}.json").read_text())
    facts = from_data(Facts, data["facts"])
    for k, v in python.items():
        setattr(facts.python, k, v)
    return reconcile(facts, matrix)


def recorded(name: str) -> str:
    return (FIX / "buildtools" / name).read_text(encoding="utf-8")


def tools(*, gcc: str = "gcc-12.2.0-debian12-local.txt", nvcc: str | None = None, cudnn: str | None = None, nvtx: bool = False,
          disk_gb: float = 80, mem_gb: float = 23.7, cpus: int = 16, rocm: str | None = None, rocm_path: str = "/opt/rocm") -> BuildTools:
    t = BuildTools()
    t.compilers = [Tool("gcc", "/usr/bin/gcc", bt.parse_gcc_version(recorded(gcc)), "gcc --version")]
    t.cmake = Tool("cmake", "/usr/bin/cmake", bt.parse_cmake_version(recorded("cmake-3.25.1-local.txt")), "cmake --version")
    t.ninja = Tool("ninja", "/usr/bin/ninja", bt.parse_ninja_version(recorded("ninja-1.11.1-local.txt")), "ninja --version")
    t.git = Tool("git", "/usr/bin/git", bt.parse_git_version(recorded("git-2.39.5-local.txt")), "git --version")
    if nvcc:
        t.nvcc = Tool("nvcc", "/usr/local/cuda-12.8/bin/nvcc", nvcc, "/usr/local/cuda-12.8/bin/nvcc --version (PATH)")
        t.cuda_home = "/usr/local/cuda-12.8"
    if cudnn:
        t.cudnn = Tool("cudnn", "/usr/include/cudnn_version.h", cudnn, "/usr/include/cudnn_version.h")
    if nvtx:
        t.nvtx = Tool("nvtx", "/usr/local/cuda-12.8/include/nvtx3/nvToolsExt.h", None, "/usr/local/cuda-12.8/include/nvtx3/nvToolsExt.h")
    if rocm:
        t.rocm = Tool("rocm", rocm_path, rocm, f"{rocm_path}/.info/version")
    t.free_disk_bytes, t.disk_path = int(disk_gb * GB), "/home/u"
    t.memory_available_bytes, t.memory_witness, t.cpus = int(mem_gb * GB), "/proc/meminfo MemAvailable", cpus
    return t


def prereq(plan, name):
    return next(p for p in plan.prerequisites if p.name == name)


# ---------------------------------------------------------------------------- parsers on recorded outputs


@pytest.mark.parametrize(("name", "want"), [
    ("gcc-9.2.1-ubuntu18.04.txt", "9.2.1"),
    ("gcc-11.4.0-ubuntu22.04.txt", "11.4.0"),
    ("gcc-14.2.1-arch-de.txt", "14.2.1"),  # the date after it is no version
    ("gcc-12.2.0-debian12-local.txt", "12.2.0"),
])
def test_gcc_versions_from_recorded_outputs(name, want):
    assert bt.parse_gcc_version(recorded(name)) == want


def test_other_tools_from_recorded_outputs():
    assert bt.parse_clang_version(recorded("clang-10.0.1-ubuntu.txt")) == "10.0.1"
    assert bt.parse_gcc_version(recorded("clang-10.0.1-ubuntu.txt")) is None  # macOS's gcc is clang: not a gcc version
    assert bt.parse_msvc_version(recorded("cl-19.27.29111.txt")) == "19.27.29111"
    assert bt.parse_cmake_version(recorded("cmake-3.25.1-local.txt")) == "3.25.1"
    assert bt.parse_ninja_version(recorded("ninja-1.11.1-local.txt")) == "1.11.1"
    assert bt.parse_git_version(recorded("git-2.39.5-local.txt")) == "2.39.5"
    assert parse_cudnn_header("#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 5\n#define CUDNN_PATCHLEVEL 1\n") == "9.5.1"
    assert parse_cudnn_header("#define CUDNN_MAJOR 8\n") is None
    assert bt.parse_meminfo("MemTotal: 100 kB\nMemAvailable:   23702388 kB\n") == 23702388 * 1024


def test_arch_list_and_jobs():
    assert arch_list(["8.6", "6.1", "8.6"]) == "6.1;8.6"
    assert arch_list(["6.1", "8.6"], ptx=True) == "6.1;8.6+PTX"
    assert max_jobs(int(23.7 * GB), "4.5", 16) == 5
    assert max_jobs(int(23.7 * GB), "4.5", 2) == 2  # never more jobs than CPUs
    assert max_jobs(int(2 * GB), "4.5", 16) == 1


# ---------------------------------------------------------------------------- plans


def test_pascal_gtx1080_plans_sm61_with_nvcc_and_cudnn_found(matrix):
    facts = machine("gtx1080-driver580", matrix, env_kind="venv", env_prefix="/home/u/venv", pip_version="25.2")
    plan = build_plan(facts.facts, matrix, BuildRequest(torch="2.13.0"), tools(nvcc="12.8", cudnn="9.5.1", nvtx=True), "/home/u/venv/bin/python")
    assert plan.accelerator == "cuda" and plan.tag == "v2.13.0"
    assert plan.env["TORCH_CUDA_ARCH_LIST"] == "6.1"
    assert plan.env["USE_CUDA"] == "1" and plan.env["USE_ROCM"] == "0" and plan.env["USE_XPU"] == "0"
    assert plan.env["CUDA_HOME"] == "/usr/local/cuda-12.8"
    assert plan.env["CMAKE_PREFIX_PATH"] == "/home/u/venv"
    assert plan.env["MAX_JOBS"] == "5"
    assert prereq(plan, "nvcc").status == "ok" and "CUDA 12.8" in prereq(plan, "nvcc").found
    assert prereq(plan, "cudnn").status == "ok" and prereq(plan, "cudnn").found == "9.5.1"
    assert plan.ready, [(p.name, p.fix) for p in plan.prerequisites if p.status == "missing"]
    lines = [c.line for c in plan.commands]
    assert lines[0] == "git clone --branch v2.13.0 https://github.com/pytorch/pytorch pytorch"
    assert lines[1:3] == ["git submodule sync", "git submodule update --init --recursive"]
    assert lines[-1] == "/home/u/venv/bin/python -m pip install --no-build-isolation -v -e ."
    assert [c.step for c in plan.commands] == ["clone", "submodules", "submodules", "deps", "mkl", "build"]


def test_pascal_without_nvcc_or_cudnn_says_what_to_install(matrix):
    facts = machine("gtx1080-driver580", matrix, env_kind="venv", env_prefix="/home/u/venv", pip_version="25.2")
    plan = build_plan(facts.facts, matrix, BuildRequest(), tools(), "python")
    nvcc, cudnn = prereq(plan, "nvcc"), prereq(plan, "cudnn")
    assert nvcc.status == "missing" and "https://pytorch.org/get-started/locally" in nvcc.fix
    assert cudnn.status == "missing" and "9.0" in cudnn.needed and "support-matrix" in cudnn.fix
    assert not plan.ready and plan.blocking(["build"], ["deps"]).name == "nvcc"  # cmake 3.25.1 comes from the deps step
    assert plan.blocking(["clone"]) is None  # cloning needs no toolkit


def test_cudnn_older_than_the_readme_asks_is_missing(matrix):
    facts = machine("gtx1080-driver580", matrix)
    plan = build_plan(facts.facts, matrix, BuildRequest(), tools(nvcc="12.8", cudnn="8.9.7", nvtx=True), "python")
    assert prereq(plan, "cudnn").status == "missing"


def test_nvcc_newer_than_the_driver_runs_is_missing(matrix):
    data = json.loads((FIX / "machines" / "rtx3090-driver535.json").read_text())["facts"]
    data["nvidia"]["cuda_driver_version"] = "12.2"  # nvidia-smi's "CUDA Version: 12.2" of a 535 driver
    facts = reconcile(from_data(Facts, data), matrix)
    plan = build_plan(facts.facts, matrix, BuildRequest(), tools(nvcc="12.8", cudnn="9.5.1", nvtx=True), "python")
    p = prereq(plan, "nvcc")
    assert p.status == "missing" and "would not run here" in p.fix


def test_rocm_gfx_plans_pytorch_rocm_arch_and_the_amd_step(matrix):
    facts = machine("amd-gfx1100", matrix)
    plan = build_plan(facts.facts, matrix, BuildRequest(), tools(rocm="6.3.3", rocm_path="/opt/rocm-6.3.3"), "python")
    assert plan.accelerator == "rocm"
    assert plan.env["PYTORCH_ROCM_ARCH"] == "gfx1100" and plan.env["USE_ROCM"] == "1" and plan.env["USE_CUDA"] == "0"
    assert plan.env["ROCM_PATH"] == "/opt/rocm-6.3.3"
    assert prereq(plan, "rocm").status == "ok"
    steps = [c.step for c in plan.commands]
    assert steps.index("amd") == steps.index("build") - 1
    assert plan.commands[steps.index("amd")].argv[1:] == ["tools/amd_build/build_amd.py"]


def test_gfx_what_if(matrix):
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(gfx=["gfx90a", "gfx942"]), tools(), "python")
    assert plan.env["PYTORCH_ROCM_ARCH"] == "gfx90a;gfx942" and prereq(plan, "rocm").status == "missing"


def test_cpu_only_machine_builds_without_cuda(matrix):
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(), tools(), "python")
    assert plan.accelerator == "cpu"
    assert (plan.env["USE_CUDA"], plan.env["USE_ROCM"], plan.env["USE_XPU"]) == ("0", "0", "0")
    assert "TORCH_CUDA_ARCH_LIST" not in plan.env and not any(p.name in ("nvcc", "cudnn") for p in plan.prerequisites)


def test_gcc_older_than_11_3_is_missing_with_its_fix(matrix):
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(), tools(gcc="gcc-9.2.1-ubuntu18.04.txt"), "python")
    c = prereq(plan, "compiler")
    assert c.status == "missing" and c.found == "gcc 9.2.1" and "11.3.0" in c.fix
    assert plan.blocking(["build"], ["deps"]).name == "compiler"
    ok = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(), tools(gcc="gcc-11.4.0-ubuntu22.04.txt"), "python")
    assert prereq(ok, "compiler").status == "ok"


def test_too_little_disk_is_missing(matrix):
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(), tools(disk_gb=6.2), "python")
    d = prereq(plan, "disk")
    assert d.status == "missing" and "6.2 GB free" in d.found and "--source-dir" in d.fix
    assert plan.blocking(["clone"]).name == "disk"


def test_venv_and_conda_prefixes(matrix):
    venv = build_plan(machine("no-gpu-linux", matrix, env_kind="venv", env_prefix="/home/u/.venv").facts, matrix, BuildRequest(), tools(), "python")
    conda = build_plan(machine("no-gpu-linux", matrix, env_kind="conda", env_prefix="/opt/conda/envs/b").facts, matrix, BuildRequest(), tools(), "python")
    system = build_plan(machine("no-gpu-linux", matrix, env_kind="system").facts, matrix, BuildRequest(), tools(), "python")
    assert venv.env["CMAKE_PREFIX_PATH"] == "/home/u/.venv" and "virtual" in venv.env_reasons["CMAKE_PREFIX_PATH"]
    assert conda.env["CMAKE_PREFIX_PATH"] == "/opt/conda/envs/b" and "conda" in conda.env_reasons["CMAKE_PREFIX_PATH"]
    assert "CMAKE_PREFIX_PATH" not in system.env and any("CMAKE_PREFIX_PATH" in w for w in system.warnings)


def test_windows_plan_quotes_for_powershell(matrix):
    facts = machine("windows-gtx1070-driver551", matrix, env_kind="conda", env_prefix="C:\\Users\\Ana Lee\\miniconda3\\envs\\b")
    cl = BuildTools(compilers=[Tool("cl", "C:\\VS\\cl.exe", "19.27.29111", "cl")])
    plan = build_plan(facts.facts, matrix, BuildRequest(source_dir="C:\\src\\py torch"), cl, "C:\\Users\\Ana Lee\\python.exe")
    assert plan.shell == "powershell" and plan.os == "windows"
    assert plan.env["CMAKE_PREFIX_PATH"] == "C:\\Users\\Ana Lee\\miniconda3\\envs\\b\\Library"
    assert plan.commands[0].line.endswith("'C:\\src\\py torch'")
    assert plan.commands[-1].line == "& 'C:\\Users\\Ana Lee\\python.exe' -m pip install --no-build-isolation -v -e ."
    assert prereq(plan, "compiler").status == "ok" and any("vcvarsall" in w for w in plan.warnings)
    text = env_file(plan)
    assert '$env:CMAKE_PREFIX_PATH = "C:\\Users\\Ana Lee\\miniconda3\\envs\\b\\Library"' in text and "export" not in text
    assert "$env:TORCH_CUDA_ARCH_LIST = \"6.1\"" in text


def test_posix_env_file_is_sourceable(matrix, tmp_path):
    import subprocess

    facts = machine("gtx1080-driver580", matrix, env_kind="venv", env_prefix="/home/u/my venv")
    plan = build_plan(facts.facts, matrix, BuildRequest(ptx=True), tools(nvcc="12.8"), "python")
    f = tmp_path / "build-env.sh"
    f.write_text(env_file(plan))
    out = subprocess.run(["sh", "-c", f'. "{f}" && printf "%s|%s" "$TORCH_CUDA_ARCH_LIST" "$CMAKE_PREFIX_PATH"'], capture_output=True, text=True, check=True)
    assert out.stdout == "6.1+PTX|/home/u/my venv"


def test_plan_document_validates(matrix):
    facts = machine("gtx1080-driver580", matrix)
    data = build_plan(facts.facts, matrix, BuildRequest(), tools(nvcc="12.8"), "python").to_data()
    assert data["schema"] == "stackdoctor.build-plan/1"
    assert check_document(json.loads(json.dumps(data))) is True
    data["prerequisites"][0]["status"] = "fine"
    with pytest.raises(Exception, match="fine"):
        check_document(data)


def test_install_offers_a_source_build_for_a_kepler_gpu(matrix):
    from stackdoctor.model.plan import Request
    from stackdoctor.resolve import resolve

    facts = machine("k80-driver470", matrix)
    request = Request()
    plan = resolve(facts, matrix, request)
    line = offer_from_source(plan, facts, matrix, request)
    newest = str(matrix.releases[0].version)
    assert line is not None and f"--from-source --torch {newest}" in line and "sm_37" in line
    h200 = machine("d01-h200-driver580-torch211-cu130", matrix)
    assert offer_from_source(resolve(h200, matrix, request), h200, matrix, request) is None  # its wheels run: nothing offered


def test_cli_what_if_json_and_emit(tmp_path):
    env = {"HOME": str(tmp_path), "NO_COLOR": "1"}
    res = run_sd(["install", "--from-source", "--gpu", "GeForce GTX 1080", "--torch", "2.13.0", "--json"], env=env)
    assert res.rc == 0, res.stderr
    doc = res.json()
    assert doc["schema"] == "stackdoctor.build-plan/1" and doc["env"]["TORCH_CUDA_ARCH_LIST"] == "6.1" and doc["tag"] == "v2.13.0"
    emitted = run_sd(["install", "--from-source", "--gfx", "gfx1100", "--emit", "build-env"], env=env)
    assert emitted.rc == 0 and "export PYTORCH_ROCM_ARCH=gfx1100\n" in emitted.stdout
    bad = run_sd(["install", "--from-source", "--step", "bake"], env=env)
    assert bad.rc == 2 and "--step must be one of" in bad.stderr


def test_an_existing_checkout_checks_the_tag_out_instead_of_cloning(matrix):
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(torch="2.13.0", checkout=True), tools(), "python")
    assert plan.commands[0].argv == ["git", "checkout", "v2.13.0"] and plan.commands[0].cwd == "pytorch"


def test_an_old_cmake_blocks_the_build_unless_the_deps_step_runs_first(matrix):
    t = tools()
    t.cmake = Tool("cmake", "/usr/bin/cmake", "3.22.1", "cmake --version")
    plan = build_plan(machine("no-gpu-linux", matrix).facts, matrix, BuildRequest(), t, "python")
    c = prereq(plan, "cmake")
    assert c.status == "missing" and "3.27" in c.needed and c.provided_by == "deps"
    assert plan.blocking(["build"]).name == "cmake"
    assert plan.blocking(["build"], ["deps"]) is None  # pip install --group dev brought cmake >= 3.27


def test_the_plan_screen_speaks_chinese(tmp_path):
    env = {"HOME": str(tmp_path), "NO_COLOR": "1", "LANG": "zh_CN.UTF-8"}
    res = run_sd(["install", "--from-source", "--gfx", "gfx1100", "--dry-run"], env=env)
    assert res.rc == 0, res.stderr
    assert "从源码构建 torch" in res.stderr and "环境变量：" in res.stderr and "这些 AMD GPU 的 gfx 架构" in res.stderr
