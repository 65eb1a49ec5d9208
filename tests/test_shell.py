"""Fix lines a Windows user can paste: POSIX environment commands become PowerShell ones, on Windows only.

The rules write `export NAME=value` / `unset NAME` (the locale texts too); stackdoctor.core.shell rewrites them
when the judged machine is Windows. Pure tests first, then the rules on the same facts as Linux and as
Windows, then the real CLI replaying the recorded Windows machine with CUDA_VISIBLE_DEVICES=-1 set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import machine_env, run_sd

from stackdoctor.core.shell import for_windows
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import CudaToolkit, Facts, NvidiaFacts, NvidiaGpu, PlatformFacts, TorchFacts
from stackdoctor.rules.diagnose import diagnose

HERE = Path(__file__).parent


@pytest.mark.parametrize(
    ("posix", "powershell"),
    [
        ("unset CUDA_VISIBLE_DEVICES   # or list valid devices, e.g. export CUDA_VISIBLE_DEVICES=0",
         'Remove-Item Env:CUDA_VISIBLE_DEVICES   # or list valid devices, e.g. $env:CUDA_VISIBLE_DEVICES = "0"'),
        ("export HSA_OVERRIDE_GFX_VERSION=11.0.0   # runs gfx1100 code",
         '$env:HSA_OVERRIDE_GFX_VERSION = "11.0.0"   # runs gfx1100 code'),
        ('export CUDA_HOME="C:\\Program Files\\CUDA\\v12.4" PATH="C:\\Program Files\\CUDA\\v12.4\\bin:$PATH"',
         '$env:CUDA_HOME = "C:\\Program Files\\CUDA\\v12.4"; $env:PATH = "C:\\Program Files\\CUDA\\v12.4\\bin;$env:PATH"'),
        # no environment command: unchanged, even where the words appear inside other words
        ("python -m pip install torch --index-url https://example.org/exported/unset", None),
        ("stackdoctor explain driver-too-old", None),
    ],
)
def test_posix_environment_commands_become_powershell(posix, powershell):
    assert for_windows(posix) == (powershell if powershell is not None else posix)


def _machine(system: str) -> Facts:
    f = Facts()
    f.platform = PlatformFacts(system=system, machine="AMD64" if system == "Windows" else "x86_64")
    f.nvidia = NvidiaFacts(driver_version="566.36", cuda_driver_version="12.7",
                           gpus=[NvidiaGpu(index=0, name="NVIDIA GeForce RTX 4070", compute_capability="8.9")])
    f.torch = TorchFacts(installed=True, version="2.13.0+cu126", variant="cu126", cuda="12.6", cuda_available=False, device_count=0)
    f.environment = {"CUDA_VISIBLE_DEVICES": "-1"}
    return f


def _fix(f: Facts, code: str) -> str:
    hit = next(x for x in diagnose(f, load_matrix([])) if x.code == code)
    assert hit.fix
    return hit.fix


def test_the_same_finding_is_fixed_in_each_shell():
    assert _fix(_machine("Linux"), "cuda-visible-devices-hides-all").startswith("unset CUDA_VISIBLE_DEVICES ")
    win = _fix(_machine("Windows"), "cuda-visible-devices-hides-all")
    assert win.startswith("Remove-Item Env:CUDA_VISIBLE_DEVICES ") and '$env:CUDA_VISIBLE_DEVICES = "0"' in win
    assert "export" not in win and "unset" not in win


def test_nvcc_fix_on_windows_quotes_the_toolkit_path():
    f = _machine("Windows")
    f.environment = {}
    root = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v12.6"
    f.cuda_toolkit.nvcc_version, f.cuda_toolkit.nvcc_path = "11.8", "C:\\cuda118\\bin\\nvcc.exe"
    f.cuda_toolkit.toolkits = [CudaToolkit(path=root + "\\bin\\nvcc.exe", nvcc_version="12.6")]
    assert _fix(f, "nvcc-mismatch") == f"$env:CUDA_HOME = '{root}'; $env:PATH = '{root}\\bin' + ';' + $env:PATH"
    f.platform.system = "Linux"
    f.cuda_toolkit.toolkits = [CudaToolkit(path="/usr/local/cuda-12.6/bin/nvcc", nvcc_version="12.6")]
    assert _fix(f, "nvcc-mismatch") == 'export CUDA_HOME=/usr/local/cuda-12.6 PATH=/usr/local/cuda-12.6/bin:"$PATH"'


def test_replayed_windows_machine_prints_a_powershell_fix(tmp_path):
    facts = json.loads((HERE / "fixtures" / "machines" / "windows-gtx1070-driver551.json").read_text())["facts"]
    facts["environment"] = {"CUDA_VISIBLE_DEVICES": "-1"}
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    run = run_sd(["check", "--replay", str(report), "--json"], env=machine_env(tmp_path / "bin", None, HOME=str(tmp_path)))
    hit = next(f for f in run.json()["findings"] if f["code"] == "cuda-visible-devices-hides-all")
    assert run.rc == 1 and hit["fix"].startswith("Remove-Item Env:CUDA_VISIBLE_DEVICES"), hit
    screen = run_sd(["check", "--replay", str(report)], env=machine_env(tmp_path / "bin", None, HOME=str(tmp_path), COLUMNS="200"))
    assert "Remove-Item Env:CUDA_VISIBLE_DEVICES" in screen.stdout and "unset CUDA_VISIBLE_DEVICES" not in screen.stdout


def test_install_commands_for_powershell():
    from stackdoctor.commands.install import format_command

    argv = ["C:\\Program Files\\Python312\\python.exe", "-m", "pip", "install", "torch==2.13.0+cu126", "torch>=2", "--index-url", "https://download.pytorch.org/whl/cu126"]
    assert format_command(argv, {"PIP_CONSTRAINT": None, "PIP_NO_INDEX": "1"}, windows=True) == (
        'Remove-Item Env:PIP_CONSTRAINT; $env:PIP_NO_INDEX = "1"; '
        "& 'C:\\Program Files\\Python312\\python.exe' -m pip install torch==2.13.0+cu126 'torch>=2' --index-url https://download.pytorch.org/whl/cu126"
    )
    # a plain path stays bare (POSIX quoting made it a string PowerShell would print, not run)
    assert format_command(["C:\\Python312\\python.exe", "-m", "pip"], windows=True) == "C:\\Python312\\python.exe -m pip"
    assert format_command(["C:\\Python312\\python.exe", "-m", "pip"]) == "'C:\\Python312\\python.exe' -m pip"
    assert format_command(["/usr/bin/python3", "-m", "pip", "install", "torch>=2"], {"PIP_CONSTRAINT": None}) == "env -u PIP_CONSTRAINT /usr/bin/python3 -m pip install 'torch>=2'"


def test_replayed_windows_machine_gets_a_windows_install_command(tmp_path):
    facts = json.loads((HERE / "fixtures" / "machines" / "windows-gtx1070-driver551.json").read_text())["facts"]
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"schema": "stackdoctor.report/1", "facts": facts, "probes": [], "findings": []}))
    run = run_sd(["install", "--replay", str(report), "--offline"], env=machine_env(tmp_path / "bin", None, HOME=str(tmp_path), COLUMNS="200"))
    lines = (run.stdout + run.stderr).splitlines()
    cmd = lines[next(i for i, ln in enumerate(lines) if ln.startswith("command")) + 1].strip()
    assert cmd.startswith("python -m pip install torch==") and "+cu12" in cmd, cmd
    linux = run_sd(["install", "--replay", str(report), "--offline", "--platform", "manylinux_2_28_x86_64"],
                   env=machine_env(tmp_path / "bin", None, HOME=str(tmp_path), COLUMNS="200"))
    assert "  python3 -m pip install torch==" in linux.stdout + linux.stderr


@pytest.mark.parametrize(
    ("system", "exe", "start"),
    [
        ("Windows", "C:\\Users\\First Last\\AppData\\Local\\Programs\\Python\\Python312\\python.exe",
         "& 'C:\\Users\\First Last\\AppData\\Local\\Programs\\Python\\Python312\\python.exe' -c "),
        ("Windows", "C:\\Python312\\python.exe", "C:\\Python312\\python.exe -c "),
        ("Linux", "/home/first last/venv/bin/python", "'/home/first last/venv/bin/python' -c "),
        ("Linux", "/venv/bin/python", "/venv/bin/python -c "),
    ],
)
def test_a_python_path_with_spaces_is_one_word_in_the_fix(system, exe, start):
    """A user name with a space puts one in the interpreter's path: the fix line quotes it as that shell needs
    (PowerShell: a single-quoted program run with &), and leaves a plain path bare."""
    f = _machine(system)
    f.environment = {}
    f.python.executable = exe
    assert _fix(f, "cuda-unavailable").startswith(start)
