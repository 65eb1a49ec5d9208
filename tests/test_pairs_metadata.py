"""Pairs judged from their metadata (stackdoctor/rules/pairs.py, accelerators/ascend/rules.py): torch and NumPy,
torch and torch_npu, torch and torchvision / torchaudio.

Each case is a real venv whose site-packages holds the distributions' ``*.dist-info`` as pip writes them (the
``Requires-Dist`` lines are the ones the real wheels carry, quoted where each test says) and a stand-in torch; the
real CLI runs on the fast path (``check --no-kernels``: files only) and, where torch says something of its own, on
the import path. The warning texts are torch's own, as users pasted them (sources beside each).
"""

from __future__ import annotations

import shlex
import subprocess
import textwrap
from pathlib import Path

import pytest
from helpers import machine_env, run_sd
from test_target_probe import make_fake_torch_env

import stackdoctor.rules  # noqa: F401  (the kinds' rules and texts, Ascend's among them, for the report checks here)

# torch 2.2.2's NumPy warning under NumPy 2, as printed at import (neuromorphs/tonic#317; pytorch/pytorch#132179)
NUMPY_WARNING = "Failed to initialize NumPy: _ARRAY_API not found (Triggered internally at ../torch/csrc/utils/tensor_numpy.cpp:84.)"


def cpu_torch(version: str, warn: str | None = None) -> str:
    return textwrap.dedent(
        f"""
        import warnings
        {f'warnings.warn({warn!r})' if warn else ''}
        __version__ = {version!r}
        class version:
            cuda = None; hip = None; debug = False
        class _Cuda:
            is_available = staticmethod(lambda: False)
            device_count = staticmethod(lambda: 0)
            get_arch_list = staticmethod(lambda: [])
        cuda = _Cuda()
        """
    )


def venv(tmp_path: Path, version: str, dists: dict[str, tuple[str, list[str]]], warn: str | None = None) -> tuple[str, Path]:
    """A venv with a stand-in torch ``version`` (its version.py and dist-info too) and ``dists``: name -> (version, Requires-Dist lines)."""
    base = version.split("+", 1)[0]
    version_py = f"__version__ = {version!r}\ngit_version = 'x'\ncuda = None\nhip = None\ndebug = False\n"
    py = make_fake_torch_env(tmp_path, cpu_torch(version, warn), version_py=version_py, dist_version=base)
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout.strip())
    meta = site / f"torch-{base}.dist-info" / "METADATA"
    meta.write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n\n")
    for name, (ver, requires) in dists.items():
        d = site / f"{name.replace('-', '_')}-{ver}.dist-info"
        d.mkdir()
        lines = "".join(f"Requires-Dist: {r}\n" for r in requires)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n{lines}\nlong description\n")
    return py, site


def check(py: str, tmp_path: Path, *args: str) -> dict[str, dict]:
    run = run_sd(["check", "--json", "--no-kernels", *args, "--python", py], env=machine_env(tmp_path / "bin"))
    return {f["code"]: f for f in run.json()["findings"]}


def test_numpy_2_under_torch_2_2_on_both_paths(tmp_path):
    """torch 2.2.2 beside NumPy 2.0.1: the fast path fails from the two dist-infos alone; the import path says the
    same with torch's own warning, and does not tell the user to run `import numpy` (it loads)."""
    py, _ = venv(tmp_path, "2.2.2+cpu", {"numpy": ("2.0.1", [])}, warn=NUMPY_WARNING)
    fast = check(py, tmp_path)
    assert fast["torch-numpy-abi"]["severity"] == "fail", sorted(fast)
    assert "NumPy 2.0.1" in fast["torch-numpy-abi"]["detail"] and "2.3.0" in fast["torch-numpy-abi"]["detail"]
    assert fast["torch-numpy-abi"]["fix"] == f"{shlex.quote(py)} -m pip install 'numpy<2'"
    slow = check(py, tmp_path, "--import-torch")
    assert "torch-numpy-abi" in slow and "_ARRAY_API not found" in slow["torch-numpy-abi"]["detail"]
    assert "torch-numpy-missing" not in slow and 'import numpy"' not in str(slow)


def test_numpy_2_under_torch_2_3_is_fine_and_numpy_1_under_2_2_too(tmp_path):
    py, site = venv(tmp_path, "2.3.1+cpu", {"numpy": ("2.0.1", [])})
    assert "torch-numpy-abi" not in check(py, tmp_path)
    (site / "torch" / "version.py").write_text("__version__ = '2.2.2+cpu'\ncuda = None\nhip = None\ndebug = False\n")
    meta = site / "numpy-2.0.1.dist-info"
    meta.rename(site / "numpy-1.26.4.dist-info")
    (site / "numpy-1.26.4.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: numpy\nVersion: 1.26.4\n\n")
    assert "torch-numpy-abi" not in check(py, tmp_path)


def test_torchvision_pinning_another_torch_than_a_release_the_matrix_does_not_know(tmp_path):
    """torchvision 0.16.0's METADATA pins `torch (==2.1.0)` (its PyPI wheel); beside a torch release the matrix does
    not know (2.99.0), the pin still decides, and the fix installs the pinned torch, quoted."""
    py, _ = venv(tmp_path, "2.99.0+cpu", {"torchvision": ("0.16.0", ["numpy", "requests", "torch (==2.1.0)", "pillow (!=8.3.*,>=5.3.0)",
                                                                    'scipy ; extra == "scipy"'])})
    found = check(py, tmp_path)
    f = found["torch-companion-pin"]
    assert f["severity"] == "fail" and "torchvision 0.16.0 pins torch==2.1.0" in f["detail"] and "METADATA" in f["detail"]
    assert f["fix"] == f"{shlex.quote(py)} -m pip install torch==2.1.0+cpu --index-url https://download.pytorch.org/whl/cpu"


def test_a_torchvision_whose_pin_torch_meets_says_nothing(tmp_path):
    py, _ = venv(tmp_path, "2.99.0+cpu", {"torchvision": ("0.114.0", ["torch (==2.99.0)"]), "torchaudio": ("2.99.0", ["torch==2.99.0"])})
    found = check(py, tmp_path)
    assert "torch-companion-pin" not in found and "torchvision-mismatch" not in found


@pytest.mark.parametrize("npu, requires, torch, wants", [
    ("2.99.0", ["torch==2.99.0.*", "numpy", "pyyaml"], "2.98.0+cpu", "2.99.0"),  # a release Ascend's table does not list
    ("2.14.0", ["torch==2.14.0.*", "numpy", "pyyaml"], "2.14.0+cpu", None),  # compat-facts.md: torch-npu 2.14.0's own pin, met
])
def test_torch_npu_is_judged_by_its_own_requires_dist(tmp_path, npu, requires, torch, wants):
    py, _ = venv(tmp_path, torch, {"torch-npu": (npu, requires)})
    found = check(py, tmp_path)
    if wants is None:
        assert "ascend-torch-npu-mismatch" not in found
        return
    f = found["ascend-torch-npu-mismatch"]
    assert f"needs torch {wants}" in f["detail"] and "Requires-Dist: torch==2.99.0.*" in f["detail"]
    assert f["fix"] == f"pip install torch=={wants} --index-url https://download.pytorch.org/whl/cpu"
