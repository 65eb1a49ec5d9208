"""Target-interpreter faults: ``--python`` missing, not Python, Python 2; ``import torch`` raises, hangs,
segfaults; CUDA initialisation fails. Fake ``torch`` packages live in real venvs
(tests/test_target_probe.py: make_fake_torch_env). A ``--python`` that is not a Python 3 interpreter
is bad input (one sentence, exit 2); a target found by itself that cannot report is a failing
finding (exit 1) naming the interpreter; every other probe's facts are still in the report.
``--no-kernels`` reads torch from its files only, so the import faults run with ``--import-torch``.
"""

from __future__ import annotations

import pytest
from helpers import run_sd
from test_target_probe import FAKE_CU130_TORCH_OLD_DRIVER, make_fake_torch_env

from .conftest import FAST, assert_others_intact, assert_usage_error, check, finding, pin, probe_status

TARGET_FAILED = "A tool that is installed failed, so part of the stack is unknown"
IMPORT_FAILED = "torch is installed but `import torch` fails"


# A target given with --python is checked before anything runs (stackdoctor.pipeline.engine.validate_python):
# bad input, one sentence, exit 2. A target found through VIRTUAL_ENV that cannot report is a fault of
# the machine: a failing finding naming the interpreter (exit 1), every other probe's facts intact.


def test_target_missing(machine, tmp_path):
    py = str(tmp_path / "nope" / "bin" / "python")
    assert_usage_error(run_sd(["check", "--json", *FAST, "--python", py], env=machine.env()), py, "no such file")


def _venv_with(tmp_path, script: str) -> tuple[str, str]:
    """A venv-shaped folder whose bin/python is ``script`` (a /bin/sh fake): (VIRTUAL_ENV, its python)."""
    venv = tmp_path / "fakevenv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text(script)
    fake.chmod(0o755)
    return str(venv), str(fake)


NOT_PYTHON = "#!/bin/sh\necho 'hello from a shell script'\n"
PYTHON2 = (
    "#!/bin/sh\n"
    'if [ "$1" = "--version" ] || [ "$1" = "-V" ]; then echo "Python 2.7.18" >&2; exit 0; fi\n'
    # what python2 prints for a Python 3 script it cannot parse
    'echo \'  File "<string>", line 1\' >&2\n'
    "echo 'SyntaxError: invalid syntax' >&2\nexit 1\n"
)


@pytest.mark.posix
def test_target_not_python(machine, tmp_path):
    venv, fake = _venv_with(tmp_path, NOT_PYTHON)
    assert_usage_error(run_sd(["check", "--json", *FAST, "--python", fake], env=machine.env()), fake, "not a Python interpreter")
    # the same interpreter found through VIRTUAL_ENV: a fault of the machine, reported as a finding
    run = run_sd(["check", "--json", *FAST], env=machine.env(VIRTUAL_ENV=venv))
    data = run.json()
    pin(run, data, 1, ("fail", "probe-failed"))
    finding(data, "probe-failed", f"the target {fake} is not a Python interpreter stackdoctor can use.", title=TARGET_FAILED)
    assert_others_intact(data, faulted={"target"})


@pytest.mark.posix
def test_target_is_python2(machine, tmp_path):
    venv, fake = _venv_with(tmp_path, PYTHON2)
    assert_usage_error(run_sd(["check", "--json", *FAST, "--python", fake], env=machine.env()), fake, "Python 2.7.18", "needs a Python 3")
    run = run_sd(["check", "--json", *FAST], env=machine.env(VIRTUAL_ENV=venv))
    data = run.json()
    pin(run, data, 1, ("fail", "probe-failed"))
    finding(data, "probe-failed", f"the target {fake} is Python 2.7.18; stackdoctor needs a Python 3 target.", title=TARGET_FAILED)
    assert_others_intact(data, faulted={"target"})


def test_target_import_torch_raises(machine, tmp_path):
    """A torch whose import raises is a failing finding quoting the exception, never torch-ok."""
    py = make_fake_torch_env(tmp_path, "raise OSError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n")
    run, data = check(machine, "--import-torch", python=py)
    pin(run, data, 1, ("fail", "torch-import-failed"))
    t = data["facts"]["torch"]
    assert t["installed"] is True and t["import_error_kind"] == "exception"
    assert t["import_error"] == "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    finding(data, "torch-import-failed", f"`import torch` in {py} fails: OSError: libcudnn.so.9: cannot open shared object file: No such file or directory",
            title=IMPORT_FAILED)
    assert_others_intact(data)  # python facts come from the same child: still there


def test_target_import_torch_hangs(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "import time\ntime.sleep(600)\n")
    run, data = check(machine, "--import-torch", "--torch-timeout", "3", python=py)
    assert run.elapsed < 3 + 20
    t = data["facts"]["torch"]
    assert t["import_error_kind"] == "timeout"
    assert probe_status(data)["target"]["status"] == "timeout"
    pin(run, data, 1, ("fail", "probe-timeout"))
    f = finding(data, "probe-timeout", "In the target, import torch did not finish in 3 s; the torch stack's state is unknown.")
    assert f["detail"].count("did not finish") == 1, f["detail"]  # said once, not once per layer that reported it
    assert (data["facts"]["python"]["version"] or "").startswith("3.")  # reported before the import
    assert_others_intact(data, faulted={"target"})


@pytest.mark.posix
def test_target_import_torch_segfaults(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    run, data = check(machine, "--import-torch", python=py)
    pin(run, data, 1, ("fail", "torch-import-failed"))
    t = data["facts"]["torch"]
    assert t["import_error_kind"] == "crash" and "SIGSEGV" in t["import_error"]
    assert "\n" not in t["import_error"]
    finding(data, "torch-import-failed", f"`import torch` in {py} fails: the target interpreter died while importing torch (killed by SIGSEGV)",
            title=IMPORT_FAILED)
    assert (data["facts"]["python"]["version"] or "").startswith("3.")
    assert_others_intact(data, faulted={"target"})


def test_target_cuda_initialisation_fails(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, FAKE_CU130_TORCH_OLD_DRIVER)
    run, data = check(machine, "--import-torch", python=py)
    t = data["facts"]["torch"]
    assert t["version"] == "2.13.0+cu130" and t["cuda_available"] is False
    assert "driver on your system is too old" in t["cuda_error"]
    # no nvidia-smi, no NVML on this machine: torch's own error is the witness of an NVIDIA driver (CUDA 12.4 level),
    # so the symptom is reported too, pointing at its cause
    pin(run, data, 1, ("fail", "cuda-unavailable"), ("fail", "driver-too-old"))
    symptom = finding(data, "cuda-unavailable", "caused by: driver-too-old.")
    assert symptom["fix"].startswith("Fix driver-too-old first: stackdoctor explain driver-too-old"), symptom["fix"]
    finding(data, "driver-too-old", "CUDA initialization: The NVIDIA driver on your system is too old (found version 12040).",
            title="The NVIDIA driver is too old for the CUDA version of the installed torch")
    assert_others_intact(data)
