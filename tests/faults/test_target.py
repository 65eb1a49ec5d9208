"""Target-interpreter faults: ``--python`` missing, not Python, Python 2; ``import torch`` raises, hangs,
segfaults; CUDA initialisation fails. Fake ``torch`` packages live in real venvs
(tests/test_target_probe.py: make_fake_torch_env). A ``--python`` that is not a Python 3 interpreter
is bad input (one sentence, exit 2); a target found by itself that cannot report is a failing
finding (exit 1) naming the interpreter; every other probe's facts are still in the report.
"""

from __future__ import annotations

import pytest

from helpers import run_sd

from .conftest import FAST, assert_others_intact, assert_usage_error, check, one_clear_message, probe_status

from test_target_probe import FAKE_CU130_TORCH_OLD_DRIVER, make_fake_torch_env


def failing(data):
    return [f for f in data["findings"] if f["severity"] == "fail"]


# A target given with --python is checked before anything runs (stackdoctor.engine.validate_python):
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
    assert run.rc == 1
    data = run.json()
    one_clear_message(data, fake, "not a Python interpreter")
    assert_others_intact(data, faulted={"target"})


@pytest.mark.posix
def test_target_is_python2(machine, tmp_path):
    venv, fake = _venv_with(tmp_path, PYTHON2)
    assert_usage_error(run_sd(["check", "--json", *FAST, "--python", fake], env=machine.env()), fake, "Python 2.7.18", "needs a Python 3")
    run = run_sd(["check", "--json", *FAST], env=machine.env(VIRTUAL_ENV=venv))
    assert run.rc == 1
    data = run.json()
    one_clear_message(data, "Python 2.7.18")
    assert_others_intact(data, faulted={"target"})


def test_target_import_torch_raises(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "raise OSError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n")
    run, data = check(machine, python=py)
    t = data["facts"]["torch"]
    assert t["installed"] is True and t["import_error_kind"] == "exception"
    assert t["import_error"] == "OSError: libcudnn.so.9: cannot open shared object file: No such file or directory"
    assert_others_intact(data)  # python facts come from the same child: still there


def test_target_import_torch_raises_is_a_failing_finding(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "raise OSError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n")
    run, data = check(machine, python=py)
    assert not any(f["code"] in ("torch-ok", "runtime-ok") for f in data["findings"]), data["findings"]
    assert run.rc == 1
    assert any(f["code"] == "torch-import-failed" for f in failing(data))
    one_clear_message(data, "libcudnn.so.9")


def test_target_import_torch_hangs(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "import time\ntime.sleep(600)\n")
    run, data = check(machine, "--torch-timeout", "3", python=py)
    assert run.elapsed < 3 + 20
    t = data["facts"]["torch"]
    assert t["import_error_kind"] == "timeout"
    assert probe_status(data)["target"]["status"] == "timeout"
    assert run.rc == 1
    one_clear_message(data, "3 s")
    assert (data["facts"]["python"]["version"] or "").startswith("3.")  # reported before the import
    assert_others_intact(data, faulted={"target"})


@pytest.mark.posix
def test_target_import_torch_segfaults(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    run, data = check(machine, python=py)
    t = data["facts"]["torch"]
    assert t["import_error_kind"] == "crash" and "SIGSEGV" in t["import_error"]
    assert "\n" not in t["import_error"]
    assert (data["facts"]["python"]["version"] or "").startswith("3.")
    assert_others_intact(data, faulted={"target"})


@pytest.mark.posix
def test_target_import_torch_segfaults_is_a_failing_finding(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    run, data = check(machine, python=py)
    assert not any(f["code"] in ("torch-ok", "runtime-ok") for f in data["findings"]), data["findings"]
    assert run.rc == 1
    one_clear_message(data, "SIGSEGV")


def test_target_cuda_initialisation_fails(machine, tmp_path):
    py = make_fake_torch_env(tmp_path, FAKE_CU130_TORCH_OLD_DRIVER)
    run, data = check(machine, python=py)
    t = data["facts"]["torch"]
    assert t["version"] == "2.13.0+cu130" and t["cuda_available"] is False
    assert "driver on your system is too old" in t["cuda_error"]
    one_clear_message(data, "too old")
    assert_others_intact(data)
