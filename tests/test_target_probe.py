"""The target probe: Python and torch facts from the target interpreter, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stackdoctor._worker import parse_sections
from stackdoctor.model.facts import TorchFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.probes.target import probe
from stackdoctor.system import System


def run_probe(python: str, *, torch_timeout: float = 60.0, kernels: bool = False, env: dict | None = None):
    system = System.from_env(env=env or dict(os.environ))
    return probe(ProbeContext(system, Target(python, "--python"), torch_timeout_s=torch_timeout, kernels=kernels))


def make_fake_torch_env(tmp_path: Path, init_body: str, *, version_py: str | None = None, libs: dict[str, bytes] | None = None,
                        dist_version: str | None = None) -> str:
    """A real venv whose ``torch`` package does what ``init_body`` says when imported; with
    ``version_py``, ``libs`` (``torch/lib/<name>`` files) and ``dist_version`` (a ``torch-*.dist-info``)
    it also has the files the static probe reads."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(p for p in (*venv.glob("lib/python3*/site-packages"), venv / "Lib" / "site-packages") if p.is_dir())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(textwrap.dedent(init_body))
    if version_py is not None:
        (site / "torch" / "version.py").write_text(version_py)
    if libs:
        (site / "torch" / "lib").mkdir()
        for name, data in libs.items():
            (site / "torch" / "lib" / name).write_bytes(data)
    if dist_version is not None:
        d = site / f"torch-{dist_version}.dist-info"
        d.mkdir()
        (d / "METADATA").write_text(f"Metadata-Version: 2.4\nName: torch\nVersion: {dist_version}\n\n")
    from helpers import venv_bin

    return str(venv_bin(venv))


# torch/version.py of PyPI's torch 2.14.1 (CUDA 13.0), verbatim (tests/fixtures/static/README.md)
VERSION_2_14_1 = (Path(__file__).parent / "fixtures" / "real" / "local-torch-2.14.1-cp311-pypi-wheel-files" / "version.py").read_text()


def libtorch_cuda(*sms: int, containers: int = 3) -> bytes:
    """A synthetic ``libtorch_cuda.so``: an ELF whose ``.nv_fatbin`` holds ``containers`` fat-binary
    containers with a cubin for each ``sm`` (the layout of tests/binfixtures.py, from the documented format)."""
    from binfixtures import elf, fatbin, fatbin_entry

    one = [fatbin_entry(2, sm) for sm in sms]
    return elf([(".text", b"\x90" * 16), (".nv_fatbin", fatbin(*([one] * containers)))])


# A torch that reports itself as 2.13.0+cu130 and fails CUDA initialisation with the warning a real
# cu130 wheel prints on a driver that only runs CUDA 12.4 (found version 12040).
FAKE_CU130_TORCH_OLD_DRIVER = """
import warnings
__version__ = "2.13.0+cu130"
class version:
    cuda = "13.0"; hip = None; debug = False
class _Cuda:
    @staticmethod
    def is_available():
        warnings.warn("CUDA initialization: The NVIDIA driver on your system is too old (found version 12040). Please update your GPU driver.")
        return False
    @staticmethod
    def device_count():
        return 0
    @staticmethod
    def get_arch_list():
        return ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
cuda = _Cuda()
"""


def test_parse_sections_ignores_noise():
    out = 'warning: x\n@@stackdoctor@@ {"section": "python", "version": "3.12.1"}\n@@stackdoctor@@ {broken\n'
    assert parse_sections(out) == {"python": {"section": "python", "version": "3.12.1"}}
    assert parse_sections("") == {}


@pytest.mark.headline("torch")
@pytest.mark.slow
def test_real_torch_cpu(torch_python):
    out = run_probe(torch_python)
    assert out.status == "ok", out.error
    py, torch = out.facts["python"], out.facts["torch"]
    assert py.version == "3.11.7" or py.version.startswith("3.")
    assert py.env_kind == "venv" and py.selected_by == "--python"
    assert any(t.startswith("cp3") and "manylinux" in t for t in py.tags)
    assert torch.installed and torch.version == "2.13.0+cpu" and torch.variant == "cpu"
    assert torch.cuda is None and torch.cuda_available is False
    assert "gloo" in torch.distributed_backends
    assert torch.distributions.get("torch") == "2.13.0+cpu"


def test_python_without_torch(plain_python):
    out = run_probe(plain_python)
    assert out.status == "ok"
    torch = out.facts["torch"]
    assert torch.installed is False and torch.import_error is None
    # no packaging in that venv: stackdoctor lends its own, so tags are still known
    assert out.facts["python"].tags


def test_missing_interpreter(tmp_path):
    out = run_probe(str(tmp_path / "nope" / "python"))
    assert out.status == "error" and "does not exist" in out.error


@pytest.mark.posix
def test_not_python(tmp_path):
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho hello\n")
    fake.chmod(0o755)
    out = run_probe(str(fake))
    assert out.status == "error" and "not a Python interpreter" in out.error


@pytest.mark.posix
def test_python2_is_named(tmp_path):
    fake = tmp_path / "python2"
    fake.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "Python 2.7.18" >&2; exit 0; fi\n'
        'echo \'  File "sd_target.py", line 40\' >&2\n'
        "echo 'SyntaxError: invalid syntax' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    out = run_probe(str(fake))
    assert out.status == "error" and "Python 2.7.18" in out.error


def test_import_torch_raises(tmp_path):
    py = make_fake_torch_env(tmp_path, "raise OSError('libcudnn.so.9: cannot open shared object file')\n")
    out = run_probe(py)
    torch = out.facts["torch"]
    assert torch.installed and torch.import_error_kind == "exception"
    assert "libcudnn.so.9" in torch.import_error
    assert out.facts["python"].version  # the other facts survive


def test_import_torch_hangs_is_bounded(tmp_path):
    py = make_fake_torch_env(tmp_path, "import time\ntime.sleep(600)\n")
    start = time.monotonic()
    out = run_probe(py, torch_timeout=2)
    assert time.monotonic() - start < 10
    assert out.status == "timeout"
    assert out.facts["torch"].import_error_kind == "timeout"
    assert out.facts["python"].version


@pytest.mark.posix
def test_import_torch_segfaults(tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    out = run_probe(py)
    torch = out.facts["torch"]
    assert torch.import_error_kind == "crash" and "SIGSEGV" in torch.import_error
    assert out.facts["python"].version


def test_cuda_init_failure_is_quoted(tmp_path):
    py = make_fake_torch_env(tmp_path, FAKE_CU130_TORCH_OLD_DRIVER)
    out = run_probe(py)
    torch = out.facts["torch"]
    assert torch.version == "2.13.0+cu130" and torch.variant == "cu130" and torch.cuda == "13.0"
    assert torch.cuda_available is False
    assert "driver on your system is too old" in torch.cuda_error
    assert torch.arch_list[-1] == "sm_120"


@pytest.mark.slow
def test_static_mode_reads_version_without_importing(torch_python):
    system = System.from_env()
    out = probe(ProbeContext(system, Target(torch_python, "--python"), import_torch=False))
    torch = out.facts["torch"]
    assert torch.installed and torch.version == "2.13.0+cpu" and torch.variant == "cpu"
    assert torch.cuda_available is None  # not imported, so not known
    assert torch.imported is False and torch.import_error is None
    assert torch.sources["version"].endswith("torch/version.py") and "not imported" in torch.sources["*"]


@pytest.mark.posix
def test_static_mode_does_not_run_torch_init(tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    site = Path(py).parents[1] / "lib"
    vfile = next(site.glob("python3*/site-packages")) / "torch" / "version.py"
    vfile.write_text("__version__ = '2.12.0+cu126'\ncuda: Optional[str] = '12.6'\nhip: Optional[str] = None\n")
    out = probe(ProbeContext(System.from_env(), Target(py, "--python"), import_torch=False))
    torch = out.facts["torch"]
    assert out.status == "ok" and torch.version == "2.12.0+cu126" and torch.variant == "cu126" and torch.cuda == "12.6"


# ---------------------------------------------------------------------------- torch read from its files (issue 14)


def test_merge_static_without_import_takes_the_files_and_names_them():
    from stackdoctor.probes.target import merge_static
    from stackdoctor.probes.torch_static import StaticTorch

    st = StaticTorch(installed=True, location="/s/torch", version="2.14.1+cu130", variant="cu130", cuda="13.0", git_version="5c48",
                     debug=False, arch_list=["sm_75", "sm_120"], arch_extra=["sm_90a"], runtime={"cudnn": "9.24.0.43"},
                     runtime_libraries={"libcudnn.so.9": "/s/nvidia/cudnn/lib/libcudnn.so.9"}, errors=["x: absent"],
                     sources={"version": "/s/torch/version.py", "cuda": "/s/torch/version.py", "arch_list": "/s/torch/lib/libtorch_cuda.so .nv_fatbin (3 fat-binary containers)",
                              "runtime.cudnn": "/s/nvidia_cudnn_cu13-9.24.0.43.dist-info/METADATA", "location": "/s/torch/__init__.py"})
    child = TorchFacts(installed=True, distributions={"torch": "2.14.1"}, sources={"*": "py (importlib.metadata; torch not imported)"})
    t = merge_static(child, st, imported=False)
    assert (t.installed, t.imported, t.version, t.variant, t.cuda, t.git_version) == (True, False, "2.14.1+cu130", "cu130", "13.0", "5c48")
    assert t.arch_list == t.arch_list_files == ["sm_75", "sm_120"] and t.arch_extra == ["sm_90a"] and t.arch_list_torch == []
    assert t.runtime_versions == {"cudnn": "9.24.0.43"} and t.static_errors == ["x: absent"] and t.location == "/s/torch"
    assert t.sources["version"] == "/s/torch/version.py" and t.sources["arch_list"].startswith("/s/torch/lib/libtorch_cuda.so")
    assert t.sources["runtime_versions.cudnn"].endswith("METADATA") and t.sources["*"].endswith("torch not imported)")
    assert t.cuda_available is None and child.imported is None  # pure: the input is unchanged


def test_merge_static_keeps_the_imports_values_and_the_files_list_beside():
    from stackdoctor.probes.target import merge_static
    from stackdoctor.probes.torch_static import StaticTorch

    st = StaticTorch(installed=True, version="2.14.1+cu130", cuda="13.0", arch_list=["sm_80"], sources={"arch_list": "lib .nv_fatbin"})
    child = TorchFacts(installed=True, version="2.14.1+cu130", cuda="13.0", cuda_available=True, arch_list=["sm_75", "sm_80"],
                       arch_list_torch=["sm_75", "sm_80"], sources={"*": "py (import torch)", "arch_list": "torch.cuda.get_arch_list()"})
    t = merge_static(child, st, imported=True)
    assert t.imported is True and t.arch_list == t.arch_list_torch == ["sm_75", "sm_80"] and t.arch_list_files == ["sm_80"]
    assert t.sources["arch_list"] == "torch.cuda.get_arch_list()" and t.sources["arch_list_files"] == "lib .nv_fatbin"
    # the import failed: the files give what it could not
    failed = TorchFacts(installed=True, import_error="the target interpreter died while importing torch (killed by SIGABRT)", import_error_kind="crash")
    t = merge_static(failed, st, imported=False)
    assert t.imported is False and t.version == "2.14.1+cu130" and t.arch_list == ["sm_80"] and t.import_error_kind == "crash"
    # no torch at all: nothing imported, nothing read
    assert merge_static(TorchFacts(), StaticTorch(), imported=False).imported is None


@pytest.mark.slow
def test_real_torch_cpu_both_paths_agree(torch_python):
    read = probe(ProbeContext(System.from_env(), Target(torch_python, "--python"), import_torch=False)).facts["torch"]
    imported = run_probe(torch_python).facts["torch"]
    assert (read.imported, imported.imported) == (False, True)
    for key in ("installed", "version", "variant", "cuda", "hip", "debug", "git_version", "location", "distributions", "torchvision_version", "arch_list"):
        assert getattr(read, key) == getattr(imported, key), key
    assert read.git_version and read.location.endswith("torch") and read.static_errors == []
    assert read.sources["git_version"].endswith("torch/version.py") and "import torch" in imported.sources["*"]
    assert read.cuda_available is None and imported.cuda_available is False  # only the import starts the runtime


MARKER_INIT = "import pathlib\npathlib.Path({marker!r}).write_text('imported')\n"


def test_static_mode_never_runs_torch_init(tmp_path):
    marker = tmp_path / "torch-was-imported"
    py = make_fake_torch_env(tmp_path, MARKER_INIT.format(marker=str(marker)), version_py=VERSION_2_14_1,
                             libs={"libtorch_cuda.so": libtorch_cuda(75, 80, 86, 90, 100, 120)}, dist_version="2.14.1")
    out = probe(ProbeContext(System.from_env(), Target(py, "--python"), import_torch=False))
    t = out.facts["torch"]
    assert not marker.exists()
    assert out.status == "ok" and t.imported is False and t.version == "2.14.1+cu130" and t.cuda == "13.0"
    assert t.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"] and "libtorch_cuda.so" in t.sources["arch_list"]
    out = probe(ProbeContext(System.from_env(), Target(py, "--python"), import_torch=True))
    assert marker.exists() and out.facts["torch"].imported is True  # the marker does say when torch is imported


@pytest.mark.posix
def test_import_abort_keeps_version_and_arch_list_from_the_files(tmp_path):
    py = make_fake_torch_env(tmp_path, "import os\nos.abort()\n", version_py=VERSION_2_14_1,
                             libs={"libtorch_cuda.so": libtorch_cuda(90, 100, 120)})
    out = run_probe(py)
    t = out.facts["torch"]
    assert t.import_error_kind == "crash" and "SIGABRT" in t.import_error and t.imported is False and t.installed
    assert (t.version, t.variant, t.cuda, t.git_version) == ("2.14.1+cu130", "cu130", "13.0", "5c4886908584029761b579af026dcfb627c84070")
    assert t.arch_list == t.arch_list_files == ["sm_90", "sm_100", "sm_120"]
    assert t.sources["version"].endswith("torch/version.py") and "libtorch_cuda.so .nv_fatbin" in t.sources["arch_list"]
    assert out.facts["python"].version


def test_import_hang_keeps_the_static_facts(tmp_path):
    py = make_fake_torch_env(tmp_path, "import time\ntime.sleep(600)\n", version_py=VERSION_2_14_1, libs={"libtorch_cuda.so": libtorch_cuda(80)})
    out = run_probe(py, torch_timeout=3)
    t = out.facts["torch"]
    assert out.status == "timeout" and t.import_error_kind == "timeout"
    assert t.version == "2.14.1+cu130" and t.arch_list == ["sm_80"]


def test_torch_on_pythonpath_is_read_where_import_would_load_it(tmp_path):
    """Not in site-packages: the child says where ``import torch`` would find it, without importing it."""
    py = make_fake_torch_env(tmp_path, "raise SystemExit('never imported')\n")
    src = tmp_path / "src"
    (src / "torch").mkdir(parents=True)
    (src / "torch" / "__init__.py").write_text("raise SystemExit('never imported')\n")
    (src / "torch" / "version.py").write_text("__version__ = '2.16.0a0+git1234'\ncuda = None\nhip = None\n")
    out = probe(ProbeContext(System.from_env(env={**os.environ, "PYTHONPATH": str(src)}), Target(py, "--python"), import_torch=False))
    t = out.facts["torch"]
    assert t.location == str(src / "torch") and t.version == "2.16.0a0+git1234"


def test_torch_reports_its_arch_flags_when_get_arch_list_is_empty(tmp_path):
    """``torch.cuda.get_arch_list()`` is [] while no GPU is usable; ``_cuda_getArchFlags()`` still has the build's list."""
    init = FAKE_CU130_TORCH_OLD_DRIVER.replace('return ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]', "return []") + (
        "class _C:\n    @staticmethod\n    def _cuda_getArchFlags():\n        return 'sm_75 sm_80 sm_86 sm_90 sm_100 sm_120'\n"
    )
    py = make_fake_torch_env(tmp_path, init, version_py=VERSION_2_14_1, libs={"libtorch_cuda.so": libtorch_cuda(75, 80, 86, 90, 100, 120)})
    t = run_probe(py).facts["torch"]
    assert t.imported is True and t.cuda_available is False
    assert t.arch_list_torch == t.arch_list == ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]
    assert t.sources["arch_list_torch"] == "torch._C._cuda_getArchFlags()"
    assert t.arch_list_files == t.arch_list_torch  # the two witnesses agree


def test_shipped_schema_is_the_generators_output():
    import json

    from stackdoctor._schema import report_schema

    shipped = json.loads((Path(__file__).resolve().parents[1] / "stackdoctor" / "schemas" / "report.schema.json").read_text())
    assert shipped == report_schema(), "regenerate: python -m stackdoctor._schema > stackdoctor/schemas/report.schema.json"


def test_a_pyenv_shim_is_asked_through_the_program_it_runs(tmp_path):
    """pyenv's shims are bash scripts that take tenths of a second: the uv behind one is found as `pyenv exec`
    finds it (PYENV_VERSION, else .python-version up from the folder, else $PYENV_ROOT/version)."""
    from stackdoctor.probes.target import pyenv_shim_target
    from stackdoctor.system import System

    root = tmp_path / "pyenv"
    (root / "shims").mkdir(parents=True)
    (root / "libexec").mkdir()
    shim = root / "shims" / "uv"
    shim.write_text(f'#!/usr/bin/env bash\nset -e\nprogram="${{0##*/}}"\nexport PYENV_ROOT="{root}"\nexec "{root}/libexec/pyenv" exec "$program" "$@"\n')
    for v in ("3.11.7", "3.12.1"):
        (root / "versions" / v / "bin").mkdir(parents=True)
        (root / "versions" / v / "bin" / "uv").write_text("#!/bin/sh\n")
        (root / "versions" / v / "bin" / "uv").chmod(0o755)
    (root / "version").write_text("3.11.7\n")
    project = tmp_path / "project" / "sub"
    project.mkdir(parents=True)
    assert pyenv_shim_target(System(env={}), str(shim), cwd=str(project)) == str(root / "versions" / "3.11.7" / "bin" / "uv")
    (tmp_path / "project" / ".python-version").write_text("3.12.1\n")
    assert pyenv_shim_target(System(env={}), str(shim), cwd=str(project)) == str(root / "versions" / "3.12.1" / "bin" / "uv")
    assert pyenv_shim_target(System(env={"PYENV_VERSION": "3.11.7"}), str(shim), cwd=str(project)).endswith("3.11.7/bin/uv")
    assert pyenv_shim_target(System(env={"PYENV_VERSION": "system"}), str(shim), cwd=str(project)) is None  # left to the shim
    assert pyenv_shim_target(System(env={"PYENV_VERSION": "3.11.7 3.12.1"}), str(shim), cwd=str(project)) is None
    assert pyenv_shim_target(System(env={}), str(root / "versions" / "3.11.7" / "bin" / "uv")) is None  # not a shim
