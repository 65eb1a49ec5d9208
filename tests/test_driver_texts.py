"""torch's "driver too old" in the words of torch's own source (issue 33), and install's verification keeping all of
torch's text and the driver's number.

The sentence is ``c10/cuda/CUDAFunctions.cpp`` ``device_count_impl`` of pytorch/pytorch at commit
01a6a16d9bb6424c034f5623c46bfd08ec21613b (the 2.x source: ``TORCH_CHECK(false, "The NVIDIA driver on your system is
too old (found version ", version, "). Please update ...")``, the same words the 1.7.1 and 2.9 bug reports of
``tests/test_diagnose_meaning.py`` quote): raised as a ``RuntimeError`` by ``torch.cuda.init()`` /
``torch._C._cuda_init()``, and warned by ``device_count()`` as ``TORCH_WARN("CUDA initialization: ", ex.msg())``
(what ``torch.cuda.is_available()`` shows). ``_check_driver``'s multi-line ``AssertionError`` of torch 1.0's
``torch/cuda/__init__.py`` and the CUDA runtime's "driver version is insufficient" are in that file's WORDINGS.
"""

from __future__ import annotations

import pytest
from test_accelerator_verify import plan
from test_diagnose import by_code, codes, healthy
from test_diagnose_meaning import _no_tools
from test_target_probe import make_fake_torch_env

from stackdoctor.install import verify as install_verify
from stackdoctor.install.verify import verify
from stackdoctor.matrix import load_matrix
from stackdoctor.reconcile import reconcile
from stackdoctor.rules.diagnose import diagnose
from stackdoctor.system import System

SOURCE_MESSAGE = (  # the TORCH_CHECK's pieces, joined as c10's str() joins them
    "The NVIDIA driver on your system is too old (found version {v}). Please update your GPU driver by downloading and "
    "installing a new version from the URL: http://www.nvidia.com/Download/index.aspx Alternatively, go to: "
    "https://pytorch.org to install a PyTorch version that has been compiled with your version of the CUDA driver."
)
FROM_SOURCE = [
    pytest.param("RuntimeError: " + SOURCE_MESSAGE.format(v=12080), "12.8", id="torch.cuda.init-runtimeerror"),
    pytest.param("CUDA initialization: " + SOURCE_MESSAGE.format(v=11040), "11.4", id="device_count-torch_warn"),
    # a CUDA init error naming the driver with no number at all: still a driver, never "no NVIDIA GPU"
    pytest.param("RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.", None, id="driver-initialization-failed"),
]


@pytest.fixture(scope="module")
def matrix():
    return load_matrix([])


@pytest.mark.parametrize("text, level", FROM_SOURCE[:2])
def test_the_source_wording_is_driver_too_old(matrix, text, level):
    f = _no_tools(healthy(matrix), text)
    out = diagnose(f, matrix)
    assert by_code(out, "driver-too-old").severity == "fail"
    assert reconcile(f, matrix).reconciled.cuda_driver_version.value == level
    assert "torch-gpu-build-no-gpu" not in codes(out)


@pytest.mark.parametrize("text, level", FROM_SOURCE)
def test_a_cuda_init_error_naming_the_driver_is_never_no_gpu(matrix, text, level):
    f = _no_tools(healthy(matrix), text)
    out = diagnose(f, matrix)
    assert "torch-gpu-build-no-gpu" not in codes(out)
    assert all("--variant cpu" not in (x.fix or "") for x in out if x.severity == "fail")


# ---------------------------------------------------------------------------- install's verification (sd_verify.py)

STAND_IN = '''
import warnings
__version__ = "2.13.0"
class version:
    cuda = "12.4"; hip = None; debug = False
class _C:
    @staticmethod
    def _cuda_getDriverVersion():
        return 11040
class _Cuda:
    @staticmethod
    def is_available():
        warnings.warn(%r)
        return False
cuda = _Cuda()
'''


def test_verify_keeps_the_whole_warning_and_judges_from_the_driver_number(tmp_path):
    """A stand-in cu124 torch on a CUDA 11.4 driver: is_available() warns the two-line form; the verification keeps
    both lines and the driver's number, and the verdict says which CUDA the driver runs and the build needs."""
    said = "CUDA initialization: The NVIDIA driver on your system is too old (found version 11040).\nPlease update your GPU driver."
    python = make_fake_torch_env(tmp_path, STAND_IN % said)
    v = verify(System.from_env(), python, timeout=120)
    assert v.imported and v.cuda_available is False and v.driver_api_version == 11040
    assert v.warnings == [said.replace("\n", " ")]
    ok, sentence = install_verify.judge(plan("cu124"), v, "cuda")
    assert not ok
    assert "the NVIDIA driver runs CUDA 11.4 at most, this build needs CUDA 12.4" in sentence
    assert "Please update your GPU driver." in sentence  # the line after the first is kept


def test_verify_keeps_every_line_of_an_exception(tmp_path):
    body = STAND_IN.replace("        warnings.warn(%r)\n        return False", "        raise AssertionError(%r)")
    text = "\nThe NVIDIA driver on your system is too old (found version 9000).\nPlease update your GPU driver.\nof the CUDA driver."
    python = make_fake_torch_env(tmp_path, body % text)
    v = verify(System.from_env(), python, timeout=120)
    assert v.cuda_error == "AssertionError: The NVIDIA driver on your system is too old (found version 9000). Please update your GPU driver. of the CUDA driver."


def test_a_driver_of_the_same_major_is_not_blamed():
    """minor-version compatibility: a 12.2 driver runs a cu124 build's kernels (as accelerators/nvidia_rules.py judges it)."""
    v = install_verify.Verification(imported=True, version="2.13.0", cuda="12.4", cuda_available=False, driver_api_version=12020,
                          cuda_error="RuntimeError: CUDA unknown error")
    ok, sentence = install_verify.judge(plan("cu124"), v, "cuda")
    assert not ok and "at most" not in sentence and "CUDA unknown error" in sentence
    none = install_verify.Verification(imported=True, version="2.13.0", cuda="12.4", cuda_available=False, driver_api_version=0)
    assert "no NVIDIA driver answers" in install_verify.judge(plan("cu124"), none, "cuda")[1]
