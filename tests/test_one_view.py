"""One view of the machine for every consumer (issue 25): what the screen shows is what the report says.

Through the real CLI on a captured tree (``STACKDOCTOR_SYSROOT``) with fake tools replaying recorded outputs.
"""

from __future__ import annotations

import os

import pytest
from conftest import real_fixture, write_fake_tool
from helpers import machine_env, run_sd

NVCC = "local-nvcc-13.0-linux"  # nvcc --version of CUDA 13.0, recorded on the project's build machine


@pytest.fixture(scope="module")
def no_gpu_with_nvcc(tmp_path_factory):
    """A Linux tree with no GPU of any kind, and the CUDA 13.0 toolkit's nvcc on PATH."""
    base = tmp_path_factory.mktemp("noview")
    root = base / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/os-release").write_text('NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="24.04"\nPRETTY_NAME="Ubuntu 24.04.1 LTS"\n')
    write_fake_tool(base / "bin", "nvcc", real_fixture(NVCC, "nvcc_version.txt"))
    return machine_env(base / "bin", root, COLUMNS="200")


@pytest.mark.skipif(os.name == "nt", reason="the fake nvcc is a /bin/sh script")
def test_screen_shows_the_toolkit_and_no_claim_the_report_does_not_make(no_gpu_with_nvcc, plain_python):
    env = no_gpu_with_nvcc
    data = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env).json()
    assert data["facts"]["cuda_toolkit"]["nvcc_version"] == "13.0"
    screen = run_sd(["check", "-v", "--no-kernels", "--skip", "torch-missing", "--python", plain_python], env=env).stdout
    lines = screen.splitlines()
    # the CUDA toolkit the JSON and the Markdown show is on the screen too
    assert any("toolkit" in ln and "nvcc 13.0" in ln for ln in lines), screen
    # a skipped finding leaves no mark: the torch layer is not "! not installed" once torch-missing is skipped
    (torch_line,) = [ln for ln in lines if "torch" in ln and "not installed" in ln]
    assert "!" not in torch_line and "✗" not in torch_line, torch_line
    # the probes table does not say "nvidia ok" where no NVIDIA hardware is
    (nvidia_row,) = [ln for ln in lines if ln.startswith("nvidia ")]
    assert "none found" in nvidia_row and " ok " not in nvidia_row, nvidia_row
    (gpu_line,) = [ln for ln in lines if " gpu " in ln]
    assert "none found" in gpu_line
    # the torch-missing finding is still there when not skipped
    plain = run_sd(["check", "--no-kernels", "--python", plain_python], env=env).stdout
    assert any("torch" in ln and "not installed" in ln and "!" in ln for ln in plain.splitlines()), plain
