"""What a new user trips over, second pass (issue 24, part A), each through the real console script:
kernel tables that fit 80 columns on a real terminal, allreduce progress as it happens, kernel rates with
their spread, nothing left in the temp directory, a CUDA build on a machine without a GPU, torch's NumPy
warning, a requirement's fix that is not ``check`` itself, and SIGTERM / SIGHUP answered in words.

The terminal items run under a real pseudo-terminal (Python's ``pty``) of 80 columns.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import console_script, machine_env, run_sd

from stackdoctor.report import Report


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


def private_tmp(tmp_path: Path) -> Path:
    d = tmp_path / "tmp"
    d.mkdir(exist_ok=True)
    return d


def _alive(marker: bytes) -> list[int]:
    """Processes (not zombies) whose command line holds ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(int(pid))
    return out


# ---------------------------------------------------------------------------- the temp directory


@pytest.mark.posix
def test_check_report_and_a_dry_run_leave_nothing_in_the_temp_directory(tmp_path, plain_python):
    tmp = private_tmp(tmp_path)
    e = env(tmp_path, TMPDIR=str(tmp))
    check = run_sd(["check", "--no-kernels", "--json", "--python", plain_python], env=e)
    assert check.rc in (0, 1) and json.loads(check.stdout)["schema"] == "stackdoctor.report/1", check.stderr
    assert sorted(os.listdir(tmp)) == [], "check left temp folders behind"
    report = run_sd(["report", "--no-kernels", "--python", plain_python, "--output", str(tmp_path / "bundle")], env=e)
    assert report.rc in (0, 1), report.stderr
    assert sorted(os.listdir(tmp)) == [], "report left temp folders behind"
    dry = run_sd(["install", "--dry-run", "--python", plain_python], env=e)
    assert "Traceback" not in dry.stderr
    assert sorted(os.listdir(tmp)) == [], "install --dry-run left temp folders behind"


# ---------------------------------------------------------------------------- SIGTERM / SIGHUP


@pytest.mark.posix
@pytest.mark.linux
@pytest.mark.parametrize(("sig", "code", "words"), [(signal.SIGTERM, 143, "terminated (SIGTERM)"), (signal.SIGHUP, 129, "hung up (SIGHUP")])
def test_sigterm_and_sighup_of_check_stop_the_target_in_one_sentence(tmp_path, plain_python, sig, code, words):
    tmp = private_tmp(tmp_path)
    argv = [*console_script(), "check", "--no-kernels", "--import-torch", "--python", plain_python, "--lang", "en"]
    before = set(_alive(b"sd_target.py"))
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(tmp_path, TMPDIR=str(tmp), STACKDOCTOR_TEST_HOOK="torch-import-hang"))
    try:
        start = time.monotonic()
        while not (set(_alive(b"sd_target.py")) - before) and time.monotonic() - start < 60:
            time.sleep(0.05)
        workers = set(_alive(b"sd_target.py")) - before
        assert workers, "the target worker never started"
        assert os.listdir(tmp), "the worker runs with a folder lent to it"
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, (proc.returncode, err)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("stackdoctor: ") and words in lines[0], err
    assert "Traceback" not in err and not out.strip()
    deadline = time.monotonic() + 5
    while set(_alive(b"sd_target.py")) & workers and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not set(_alive(b"sd_target.py")) & workers, "the target worker outlived stackdoctor"
    assert os.listdir(tmp) == [], "the lent folder outlived stackdoctor"


# ---------------------------------------------------------------------------- a requirement's fix


def test_a_backend_requirement_fix_is_the_install_that_meets_it_never_check_itself(tmp_path):
    from test_config import cpu_laptop, cuda_box

    cfg = tmp_path / "pyproject.toml"
    cfg.write_text('[tool.stackdoctor]\nbackend = "cuda"\n', encoding="utf-8")
    box = cuda_box()  # two A100s and a driver, but a CPU build of torch
    box.torch.version, box.torch.variant, box.torch.cuda, box.torch.cuda_available, box.torch.device_count = "2.13.0+cpu", "cpu", None, False, 0
    box.torch.devices = []
    for f in (box,):
        f.platform.system, f.platform.machine, f.platform.libc, f.platform.glibc_version = "Linux", "x86_64", "glibc", "2.35"
        f.python.executable, f.python.version = "/usr/bin/python3", "3.12.3"
    fixes = {}
    for name, facts in (("laptop", cpu_laptop()), ("box", box)):
        p = tmp_path / f"{name}.json"
        p.write_text(Report(facts=facts).to_json(), encoding="utf-8")
        run = run_sd(["check", "--replay", str(p), "--config", str(cfg), "--json"], env=env(tmp_path), cwd=tmp_path)
        doc = json.loads(run.stdout)
        unmet = [f for f in doc["findings"] if f["code"] == "requirement-unmet"]
        assert len(unmet) == 1 and "backend cuda" in unmet[0]["detail"], unmet
        fixes[name] = unmet[0]["fix"]
        assert not any((f.get("fix") or "").startswith("stackdoctor check") for f in unmet), unmet
    # the box: the CUDA build the resolver plans for its GPUs; the laptop: the CUDA build, for a machine that has a GPU
    assert re.fullmatch(r"stackdoctor install (--torch \S+ )?--variant cu\d+", fixes["box"]), fixes["box"]
    assert re.fullmatch(r"stackdoctor install --variant cu\d+ +# on a machine with a cuda device.*", fixes["laptop"]), fixes["laptop"]


# ---------------------------------------------------------------------------- a CUDA build without a GPU; torch without NumPy

REAL = Path(__file__).resolve().parent / "fixtures" / "real"


def cuda_torch_venv(tmp_path: Path) -> str:
    """A venv holding PyTorch's CUDA 13.0 build as its files say it (torch 2.14.1's real version.py and METADATA)
    and two real NVIDIA runtime wheels' dist-info (METADATA + RECORD): what the static read of torch sees."""
    import shutil
    import sys

    venv = tmp_path / "cuda-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                               text=True, check=True).stdout.strip())
    wheel = REAL / "local-torch-2.14.1-cp311-pypi-wheel-files"
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("raise ImportError('a stand-in: read from its files only')\n")
    shutil.copy(wheel / "version.py", site / "torch" / "version.py")
    dist = site / (wheel / "dist-info-dirname.txt").read_text().strip()
    dist.mkdir()
    shutil.copy(wheel / "METADATA", dist / "METADATA")
    for d in (REAL / "local-nvidia-cu13-runtime-dist-info").glob("*.dist-info"):
        shutil.copytree(d, site / d.name)
    return str(py)


def test_a_cuda_build_on_a_machine_without_a_gpu_names_the_cpu_build_and_the_disk_it_saves(tmp_path):
    py = cuda_torch_venv(tmp_path)
    run = run_sd(["check", "--no-kernels", "--json", "--python", py], env=env(tmp_path))
    doc = json.loads(run.stdout)
    assert doc["facts"]["torch"]["variant"] == "cu130", doc["facts"]["torch"]
    # measured from the RECORD files (source.md: 7242477 + 140063827 bytes), each with its source
    assert doc["facts"]["torch"]["runtime_bytes"] == {"nvidia-cuda-runtime": 7242477, "nvidia-nvvm": 140063827}
    assert doc["facts"]["torch"]["sources"]["runtime_bytes.nvidia-nvvm"].endswith("nvidia_nvvm-13.0.88.dist-info/RECORD")
    found = [f for f in doc["findings"] if f["code"] == "torch-gpu-build-no-gpu"]
    assert len(found) == 1 and found[0]["severity"] == "warn", [f["code"] for f in doc["findings"]]
    f = found[0]
    assert "CUDA 13.0 build" in f["detail"] and "147 MB" in f["detail"] and "nvidia-nvvm 140 MB" in f["detail"], f["detail"]
    assert f["fix"].startswith("stackdoctor install") and "--variant cpu" in f["fix"] and f["fix"].endswith("--remove-leftovers"), f["fix"]
    screen = run_sd(["check", "--no-kernels", "--python", py, "--lang", "zh"], env=env(tmp_path)).stdout
    assert "CUDA 13.0 构建" in screen and "147 MB" in screen and "--variant cpu" in screen


def test_torch_without_numpy_is_a_warning_naming_pip_install_numpy(tmp_path, torch_python):
    """The suite's real torch 2.13.0+cpu venv has no NumPy: torch warns "Failed to initialize NumPy" on import."""
    run = run_sd(["check", "--no-kernels", "--import-torch", "--json", "--python", torch_python], env=env(tmp_path))
    doc = json.loads(run.stdout)
    assert any("Failed to initialize NumPy: No module named 'numpy'" in w for w in doc["facts"]["torch"]["import_warnings"]), doc["facts"]["torch"]
    found = [f for f in doc["findings"] if f["code"] == "torch-numpy-missing"]
    assert len(found) == 1 and found[0]["severity"] == "warn", [f["code"] for f in doc["findings"]]
    assert found[0]["fix"] == f"{torch_python} -m pip install numpy"
    assert "Failed to initialize NumPy" in found[0]["detail"]
