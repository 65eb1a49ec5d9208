"""The target probe: Python and torch facts from the target interpreter, in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from stackdoctor.probes import ProbeContext, Target
from stackdoctor.probes.target import parse_sections, probe
from stackdoctor.system import System


def run_probe(python: str, *, torch_timeout: float = 60.0, kernels: bool = False, env: dict | None = None):
    system = System.from_env(env=env or dict(os.environ))
    return probe(ProbeContext(system, Target(python, "--python"), torch_timeout_s=torch_timeout, kernels=kernels))


def make_fake_torch_env(tmp_path: Path, init_body: str) -> str:
    """A real venv whose ``torch`` package does what ``init_body`` says when imported."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(p for p in (*venv.glob("lib/python3*/site-packages"), venv / "Lib" / "site-packages") if p.is_dir())
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text(textwrap.dedent(init_body))
    from helpers import venv_bin

    return str(venv_bin(venv))


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
    assert "version.py" in torch.sources["*"]


@pytest.mark.posix
def test_static_mode_does_not_run_torch_init(tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    site = Path(py).parents[1] / "lib"
    vfile = next(site.glob("python3*/site-packages")) / "torch" / "version.py"
    vfile.write_text("__version__ = '2.12.0+cu126'\ncuda: Optional[str] = '12.6'\nhip: Optional[str] = None\n")
    out = probe(ProbeContext(System.from_env(), Target(py, "--python"), import_torch=False))
    torch = out.facts["torch"]
    assert out.status == "ok" and torch.version == "2.12.0+cu126" and torch.variant == "cu126" and torch.cuda == "12.6"
