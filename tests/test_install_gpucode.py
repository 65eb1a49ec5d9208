"""After installing a CUDA build, the GPU code is read from the installed binaries before the install is called done.

The new torch is a STAND-IN wheel (not PyTorch): its ``torch/lib/libtorch_cuda.so`` is the real ELF skeleton of
PyPI's torch 2.15.0 cu132 ``libtorch_cuda.so`` (tests/fixtures/learn: every fat-binary container and entry header of
the real library, the cubins dropped; arch list sm_75 sm_80 sm_86 sm_90 sm_100 sm_120, no PTX), and its
``torch.cuda`` says a GPU is there and computes (1+1)*4 = 8, so the import check passes as on a real GPU. Real pip
installs it from a local folder (``--no-index --find-links``) into a real venv holding a stand-in torch 2.13.0+cpu.
The machine's GPUs come from real recordings replayed by a fake ``nvidia-smi`` (tests/fakesmi.py): the lent H200
(sm_90, served: committed, the note says what was read) and a V100 (sm_70, which those binaries cannot run: the
install is rolled back through the transaction, every file of the previous torch intact).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import FIXTURES
from fakesmi import fake_nvidia_smi
from helpers import copy_venv, machine_env, run_sd, venv_bin
from test_install import isolated_env

from stackdoctor.install import result as install_result
from stackdoctor.install import transaction
from stackdoctor.install import verify as install_verify
from stackdoctor.model.plan import Plan, PlannedPackage
from stackdoctor.system import System

pytestmark = [pytest.mark.posix, pytest.mark.skipif(sys.platform == "win32", reason="stand-in venvs with POSIX layouts")]

SKELETON = FIXTURES / "learn" / "torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl"
H200 = FIXTURES / "real" / "d01-h200-driver580-open-kernel-module-lent-device"
V100 = FIXTURES / "real" / "c05-v100sxm2-32gb-driver525-linux"
OLD, NEW = "2.13.0+cpu", "2.15.0"
ARCHS = "sm_75 sm_80 sm_86 sm_90 sm_100 sm_120 (no PTX)"
LIB = "torch/lib/libtorch_cuda.so"

CUDA_STANDIN = '''"""STAND-IN torch.cuda for stackdoctor tests - not PyTorch: says a GPU is there."""
def is_available():
    return True

def device_count():
    return 1

def get_device_name(index=0):
    return {name!r}
'''

TORCH_STANDIN = '''"""STAND-IN torch {version} for stackdoctor tests - not PyTorch."""
STACKDOCTOR_FAKE_TORCH = True
__version__ = {version!r}
from . import version, cuda


class _T:
    def __init__(self, values):
        self.values = list(values)

    def __add__(self, other):
        return _T(a + b for a, b in zip(self.values, other.values))

    def sum(self):
        return _T([sum(self.values)])

    def item(self):
        return float(self.values[0])


def ones(n, device=None):
    return _T([1.0] * n)
'''


def wheel(folder: Path, version: str, files: dict[str, bytes]) -> Path:
    """A valid py3-none-any wheel (METADATA, WHEEL, RECORD with every sha256) holding ``files``."""
    dist = f"torch-{version}.dist-info"
    files = dict(files)
    files[f"{dist}/METADATA"] = (f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n"
                                 "Summary: STAND-IN torch for stackdoctor tests, not PyTorch\n").encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: stackdoctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    rows = [f"{p},sha256={base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b'=').decode()},{len(d)}" for p, d in files.items()]
    files[f"{dist}/RECORD"] = ("\n".join([*rows, f"{dist}/RECORD,,"]) + "\n").encode()
    path = folder / f"torch-{version}-py3-none-any.whl"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for p, d in files.items():
            z.writestr(p, d)
    path.write_bytes(buf.getvalue())
    return path


def standin(version: str, *, cuda: str | None, device: str = "NVIDIA H200", library: bool = True) -> dict[str, bytes]:
    files = {
        "torch/__init__.py": TORCH_STANDIN.format(version=version).encode(),
        "torch/version.py": f"__version__ = {version!r}\ncuda = {cuda!r}\nhip = None\n".encode(),
        "torch/cuda/__init__.py": (CUDA_STANDIN.format(name=device) if cuda else "def is_available():\n    return False\n").encode(),
    }
    for i in range(20):
        files[f"torch/part/m{i}.py"] = f"# stand-in torch {version}, file {i}\n".encode()
    if library:
        with zipfile.ZipFile(SKELETON) as z:
            files[LIB] = z.read(LIB)  # the real library's ELF skeleton, byte for byte
    return files


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gpucode-wheels")
    wheel(d, OLD, standin(OLD, cuda=None))
    wheel(d, NEW, standin(NEW, cuda="13.2"))
    return d


@pytest.fixture(scope="module")
def seeded(wheels, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("gpucode-seed")
    venv = d / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    import pip

    shutil.copytree(Path(pip.__file__).parent, next(venv.glob("lib/python*/site-packages")) / "pip")
    subprocess.run([str(venv_bin(venv)), "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels), f"torch=={OLD}"],
                   check=True, env=isolated_env(d))
    return venv


@pytest.fixture
def venv(seeded, tmp_path) -> Path:
    dst = tmp_path / "venv"
    copy_venv(seeded, dst)
    return dst


FILES = """
import csv, hashlib, json, os, importlib.metadata as m
out = {}
for d in m.distributions():
    if (d.metadata["Name"] or "").lower() != "torch":
        continue
    site = str(d.locate_file(""))
    for row in csv.reader((d.read_text("RECORD") or "").splitlines()):
        p = os.path.normpath(os.path.join(site, row[0]))
        out[row[0]] = hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.isfile(p) else None
site = [p for p in __import__("sys").path if p.endswith("site-packages")][0]
out["@extra"] = sorted(os.path.join(dp, f) for dp, dn, fn in os.walk(os.path.join(site, "torch")) for f in fn
                       if "__pycache__" not in dp and os.path.relpath(os.path.join(dp, f), site) not in out)
out["@left"] = sorted(e for e in os.listdir(site) if e.startswith("~")) + sorted(
    e for e in os.listdir(os.path.dirname(os.path.dirname(os.path.dirname(site)))) if e.startswith(".stackdoctor"))
print(json.dumps(out))
"""


def torch_files(venv: Path) -> dict:
    """sha256 of every file torch's RECORD lists, the files under torch/ it does not list, and stackdoctor's or pip's leftovers."""
    return json.loads(subprocess.run([str(venv_bin(venv)), "-I", "-c", FILES], capture_output=True, text=True, check=True).stdout)


def version_of(venv: Path) -> str:
    code = "import torch; print(torch.__version__)"
    return subprocess.run([str(venv_bin(venv)), "-I", "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def machine(tmp_path: Path, case: Path) -> dict[str, str]:
    bindir = tmp_path / "bin"
    fake_nvidia_smi(bindir, case)
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\n')
    env = machine_env(bindir, root)
    env.update({k: v for k, v in isolated_env(tmp_path).items() if k.startswith(("PIP_", "UV_", "XDG_"))})
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def gpus_of(case: Path, tmp_path: Path, monkeypatch) -> list:
    """The machine's GPUs as install sees them: the real NVIDIA probe on the recording, reconciled."""
    from stackdoctor import pipeline

    for k, v in machine(tmp_path, case).items():
        monkeypatch.setenv(k, v)
    facts = pipeline.probe_facts(pipeline.Options(kernels=False, import_torch=False, probes=["platform", "nvidia"]))
    return facts.reconciled.gpus


def plan_215() -> Plan:
    return Plan(NEW, "cu132", "https://pypi.org/simple", [PlannedPackage("torch", NEW, None, "https://pypi.org/simple")])


def execute(venv: Path, wheels: Path, gpus: list, tmp_path: Path, said: list[str] | None = None) -> install_result.InstallResult:
    system = System(env=isolated_env(tmp_path))
    return transaction.execute(plan_215(), system=system, python=str(venv_bin(venv)), settings=transaction.InstallSettings(source_args=["--no-index", "--find-links", str(wheels)], offline=True, user_find_links=[str(wheels)], accelerator="cuda", gpu_targets=gpus, stream=lambda t: None, say=said.append if said is not None else lambda line: None))


# ---------------------------------------------------------------------------- the CLI, end to end


@pytest.mark.headline("install")
def test_cli_install_on_an_h200_reads_the_installed_gpu_code_and_commits(venv, wheels, tmp_path):
    env = machine(tmp_path, H200)
    run = run_sd(["install", "--yes", "--python", str(venv_bin(venv)), "--torch", NEW, "--no-index", "--find-links", str(wheels)], env=env)
    out = run.stdout + run.stderr
    assert run.rc == 0, out
    assert version_of(venv) == NEW
    assert f"GPU code read from the installed {LIB}: {ARCHS}; it runs on GPU 0 NVIDIA H200 (sm_90)" in out, out
    assert "the plan had" not in out  # the binaries hold what the matrix's row for 2.15.0 cu132 lists
    assert torch_files(venv)["@left"] == []


# ---------------------------------------------------------------------------- the transaction


def test_h200_commit_records_what_was_read(venv, wheels, tmp_path, monkeypatch):
    gpus = gpus_of(H200, tmp_path, monkeypatch)
    assert [(g.name, g.compute_capability) for g in gpus] == [("NVIDIA H200", "9.0")]
    r = execute(venv, wheels, gpus, tmp_path)
    assert r.ok and r.exit_code == 0 and r.state == "new", r.message
    assert version_of(venv) == NEW
    assert r.gpu_code is not None and r.gpu_code["verdict"] == "runs"
    assert r.gpu_code["read"]["arch_list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] and r.gpu_code["read"]["ptx"] == []
    assert r.gpu_code["gpus"] == [{"gpu": "GPU 0 NVIDIA H200", "arch": "sm_90", "runs": "sass"}]
    assert r.gpu_code["planned"]["list"] == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    note = f"GPU code read from the installed {LIB}: {ARCHS}; it runs on GPU 0 NVIDIA H200 (sm_90)."
    assert note in r.notes
    from stackdoctor.core.texts import sentence

    assert sentence(note, "zh") == f"已从安装的 {LIB} 读出 GPU 代码：{ARCHS}；它能在 GPU 0 NVIDIA H200 (sm_90) 上运行。"


def test_v100_is_rolled_back_every_file_of_the_previous_torch_intact(venv, wheels, tmp_path, monkeypatch):
    gpus = gpus_of(V100, tmp_path, monkeypatch)
    assert [g.compute_capability for g in gpus] == ["7.0"]
    before = torch_files(venv)
    said: list[str] = []
    r = execute(venv, wheels, gpus, tmp_path, said)
    assert not r.ok and r.exit_code == 1 and r.state == "old", r.message
    assert r.restored is True and r.restored_from == "backup"
    name = gpus[0].name
    assert r.message.startswith(f"the installed torch {NEW} cannot run on GPU 0 {name} (sm_70): its GPU code, read from {LIB}, is {ARCHS} "
                                "(no code for sm_70 and no PTX at or below it); "), r.message
    assert r.message.endswith("the previous torch 2.13.0+cpu was put back from its own files and imports."), r.message
    assert len(said) == 1 and "putting back the previous torch 2.13.0+cpu" in said[0]
    assert r.gpu_code is not None and r.gpu_code["verdict"] == "cannot-run"
    assert r.gpu_code["gpus"] == [{"gpu": f"GPU 0 {name}", "arch": "sm_70", "runs": None}]
    after = torch_files(venv)
    assert after == before and after["@extra"] == [] and after["@left"] == []  # every file as it was, nothing of 2.15.0 left
    assert version_of(venv) == OLD


def test_a_read_that_fails_is_a_note_not_a_silent_ok(venv, tmp_path, monkeypatch):
    """A CUDA build whose libtorch_cuda.so is not there: committed (the import and the GPU check passed), and the
    note says the GPU code was not read."""
    bare = tmp_path / "bare-wheels"
    bare.mkdir()
    wheel(bare, NEW, standin(NEW, cuda="13.2", library=False))
    gpus = gpus_of(H200, tmp_path, monkeypatch)
    r = execute(venv, bare, gpus, tmp_path)
    assert r.ok and r.state == "new", r.message
    assert r.gpu_code is not None and r.gpu_code["verdict"] == "unread" and r.gpu_code["read"] is None
    (note,) = [n for n in r.notes if "GPU code" in n]
    assert note.startswith("the GPU code of the installed torch was not read: ") and note.endswith("/torch has no libtorch_cuda.so."), note


def test_gpu_check_is_pure_over_its_inputs(tmp_path):
    """check_gpu_code on the unpacked skeleton: PTX forward compatibility and the plan's hidden GPUs come from the
    matrix's arch rules, not a second copy."""
    from stackdoctor.model.facts import GpuView

    with zipfile.ZipFile(SKELETON) as z:
        z.extract(LIB, tmp_path)
    init = tmp_path / "torch" / "__init__.py"
    init.write_text("")
    v = install_verify.Verification(imported=True, version=NEW, location=str(init))
    h200 = GpuView("nvidia", 0, "NVIDIA H200", compute_capability="9.0", uuid="GPU-a", witnesses=["nvidia-smi"])
    v100 = GpuView("nvidia", 1, "Tesla V100-SXM2-32GB", compute_capability="7.0", uuid="GPU-b", witnesses=["nvidia-smi"])
    ada = GpuView("nvidia", 2, "NVIDIA L4", compute_capability="8.9", uuid="GPU-c", witnesses=["nvidia-smi"])
    system = System()
    plan = plan_215()
    both = install_verify.check_gpu_code(plan, v, [h200, v100], system)
    assert both is not None and both.cannot_run and "GPU 1 Tesla V100-SXM2-32GB (sm_70)" in both.sentence and "H200" not in both.sentence
    plan.env["CUDA_VISIBLE_DEVICES"] = "GPU-a"  # the plan hides the V100: only the H200 runs torch
    hidden = install_verify.check_gpu_code(plan, v, [h200, v100], system)
    assert hidden is not None and not hidden.cannot_run and hidden.data["gpus"] == [{"gpu": "GPU 0 NVIDIA H200", "arch": "sm_90", "runs": "sass"}]
    l4 = install_verify.check_gpu_code(plan_215(), v, [ada], system)
    assert l4 is not None and not l4.cannot_run and l4.data["gpus"][0]["runs"] == "sass"  # sm_86 cubins run on 8.9
    assert install_verify.check_gpu_code(Plan(NEW, "cpu", None), v, [v100], system) is None  # not a GPU build: nothing read
    assert install_verify.check_gpu_code(plan_215(), v, [], system) is None  # no NVIDIA GPU here: nothing to judge


def test_binaries_that_differ_from_the_inferred_list_but_serve_the_gpu_are_a_note(venv, wheels, tmp_path, monkeypatch):
    """A layer infers 2.15.0 cu132's GPU code from a neighbour (sm_80 sm_90 sm_100 sm_120, marked inferred): the
    binaries read differ but run on the H200, so the install is committed and the note says both lists."""
    gpus = gpus_of(H200, tmp_path, monkeypatch)
    layer = tmp_path / "inferred.yaml"
    layer.write_text(
        "releases:\n- version: 2.15.0\n  source: a stand-in layer for this test\n  variants:\n  - name: cu132\n"
        "    arch_list: [sm_80, sm_90, sm_100, sm_120]\n    derived_from: 'inferred: GPU code of torch 2.14.1 cu132'\n"
        "    source: a stand-in layer for this test\n")
    monkeypatch.setenv("STACKDOCTOR_MATRIX", str(layer))
    r = execute(venv, wheels, gpus, tmp_path)
    assert r.ok and r.state == "new", r.message
    assert f"GPU code read from the installed {LIB}: {ARCHS}; it runs on GPU 0 NVIDIA H200 (sm_90); the plan had sm_80 sm_90 sm_100 sm_120 (inferred: GPU code of torch 2.14.1 cu132)." in r.notes, r.notes
    assert r.gpu_code is not None and r.gpu_code["planned"] == {"list": ["sm_80", "sm_90", "sm_100", "sm_120"], "derived_from": "inferred: GPU code of torch 2.14.1 cu132"}


def test_ptx_forward_compatibility_and_rocm_gfx_with_the_plans_override(tmp_path):
    """Synthetic libraries (tests/binfixtures.py's documented layouts, not PyTorch's): a CUDA build of sm_80 cubins
    plus compute_80 PTX runs on sm_90 by JIT and not on sm_75; a ROCm build for gfx90a/gfx942/gfx1100 does not run
    on a gfx1030 GPU, unless the plan's HSA_OVERRIDE_GFX_VERSION=11.0.0 makes it load the gfx1100 code."""
    from binfixtures import bundle, elf, fatbin, fatbin_entry

    from stackdoctor.model.facts import GpuView

    cuda = tmp_path / "cu" / "torch"
    (cuda / "lib").mkdir(parents=True)
    (cuda / "lib" / "libtorch_cuda.so").write_bytes(elf([(".nv_fatbin", fatbin([fatbin_entry(2, 80), fatbin_entry(1, 80)]))]))
    (cuda / "__init__.py").write_text("")
    v = install_verify.Verification(imported=True, version="2.9.0", location=str(cuda / "__init__.py"))
    system = System()
    plan = Plan("2.9.0", "cu126", None)
    h100 = GpuView("nvidia", 0, "NVIDIA H100", compute_capability="9.0", witnesses=["nvidia-smi"])
    t4 = GpuView("nvidia", 0, "Tesla T4", compute_capability="7.5", witnesses=["nvidia-smi"])
    jit = install_verify.check_gpu_code(plan, v, [h100], system)
    assert jit is not None and not jit.cannot_run and jit.data["gpus"][0]["runs"] == "ptx", jit.sentence
    assert "sm_80 compute_80;" in jit.sentence
    old = install_verify.check_gpu_code(plan, v, [t4], system)
    assert old is not None and old.cannot_run and "(no code for sm_75 and no PTX at or below it)" in old.sentence

    hip = tmp_path / "rocm" / "torch"
    (hip / "lib").mkdir(parents=True)
    host, amd = "host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--"
    code = bundle([(host, b"")] + [(amd + t, b"\x7fELF" + t.encode() * 30) for t in ("gfx90a", "gfx942", "gfx1100")])
    (hip / "lib" / "libtorch_hip.so").write_bytes(elf([(".hip_fatbin", code)]))
    (hip / "__init__.py").write_text("")
    v = install_verify.Verification(imported=True, version="2.9.0", location=str(hip / "__init__.py"))
    rx6800 = GpuView("amd", 0, "AMD Radeon RX 6800", gfx="gfx1030", witnesses=["rocminfo"])
    rocm = Plan("2.9.0", "rocm6.4", None)
    no = install_verify.check_gpu_code(rocm, v, [rx6800], system)
    assert no is not None and no.cannot_run and "GPU 0 AMD Radeon RX 6800 (gfx1030)" in no.sentence and "gfx90a gfx942 gfx1100" in no.sentence
    assert "no PTX" not in no.sentence
    rocm.env["HSA_OVERRIDE_GFX_VERSION"] = "11.0.0"
    yes = install_verify.check_gpu_code(rocm, v, [rx6800], system)
    assert yes is not None and not yes.cannot_run and yes.data["gpus"] == [{"gpu": "GPU 0 AMD Radeon RX 6800", "arch": "gfx1100", "runs": "code object"}]
    assert install_verify.check_gpu_code(Plan("2.9.0", "rocm6.4", None), v, [h100], system) is None  # an NVIDIA GPU does not run a ROCm build's code
