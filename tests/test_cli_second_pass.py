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
import select
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import console_script, machine_env, run_sd

from stackdoctor.model.facts import KernelFacts, KernelResult
from stackdoctor.model.report import Report


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return machine_env(tmp_path / "bin", None, **extra)


def private_tmp(tmp_path: Path) -> Path:
    d = tmp_path / "tmp"
    d.mkdir(exist_ok=True)
    return d


def _alive(marker: bytes, parent: int | None = None) -> list[int]:
    """Processes (not zombies) whose command line holds ``marker`` (children of ``parent`` only, when given:
    another test running the same worker at the same time is not this one's)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if marker in cmd and stat[0] != "Z" and (parent is None or int(stat[1]) == parent):
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
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env(tmp_path, TMPDIR=str(tmp), STACKDOCTOR_TEST_HOOK="torch-import-hang"))
    try:
        start = time.monotonic()
        while not _alive(b"sd_target.py", proc.pid) and time.monotonic() - start < 60:
            time.sleep(0.05)
        workers = set(_alive(b"sd_target.py", proc.pid))
        assert workers, "the target worker never started"
        # (the worker once ran with a folder lent to it, stackdoctor's packaging; issue 33's worker needs none: then
        # nothing of this run may be left in TMPDIR either, below)
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
    # issue 43: check promises to free what install lists (one prediction): the fix's own dry run names the same packages
    fix = shlex.split(f["fix"])
    dry = run_sd([*fix[1:], "--dry-run", "--json", "--offline"], env=env(tmp_path))
    left = json.loads(dry.stdout)["leftovers"]
    assert sorted(left) == sorted(doc["facts"]["torch"]["runtime_bytes"]) and f"{len(left)} NVIDIA runtime packages" in f["detail"], (left, f["detail"])


def test_torch_without_numpy_is_a_warning_and_kernel_rates_are_medians_with_their_spread(tmp_path, torch_python):
    """The suite's real torch 2.13.0+cpu venv has no NumPy: torch warns "Failed to initialize NumPy" on import.
    The same check's quick kernels give each rate as the median of a few timed runs, with the slowest and fastest."""
    run = run_sd(["check", "--json", "--python", torch_python], env=env(tmp_path))
    doc = json.loads(run.stdout)
    timed = [r for r in doc["facts"]["kernels"]["results"] if r["kernel"] == "matmul"]
    assert timed, doc["facts"]["kernels"]
    for r in timed:
        assert r["runs"] >= 3 and len(r["extra"]["run_times_s"]) == r["runs"], r
        assert r["tflops_min"] <= r["tflops"] <= r["tflops_max"], r
    saved = tmp_path / "report.json"
    saved.write_text(run.stdout, encoding="utf-8")
    screen = run_sd(["check", "--replay", str(saved), "--lang", "en"], env=env(tmp_path)).stdout
    assert re.search(r"matmul .* \d[\d.]* [GMT]FLOP/s ±\d+%", screen), screen
    md = run_sd(["check", "--replay", str(saved), "--format", "markdown"], env=env(tmp_path)).stdout
    assert re.search(r"FLOP/s ±\d+% \|", md), md
    assert any("Failed to initialize NumPy: No module named 'numpy'" in w for w in doc["facts"]["torch"]["import_warnings"]), doc["facts"]["torch"]
    found = [f for f in doc["findings"] if f["code"] == "torch-numpy-missing"]
    assert len(found) == 1 and found[0]["severity"] == "warn", [f["code"] for f in doc["findings"]]
    assert found[0]["fix"] == f"{torch_python} -m pip install numpy"
    assert "Failed to initialize NumPy" in found[0]["detail"]


def test_the_record_sizes_are_the_sums_source_md_derived():
    from stackdoctor.probes.torch_static import parse_record_bytes

    base = REAL / "local-nvidia-cu13-runtime-dist-info"
    got = {d: parse_record_bytes((base / d / "RECORD").read_text(encoding="utf-8"))
           for d in ("nvidia_cuda_runtime-13.0.96.dist-info", "nvidia_nvvm-13.0.88.dist-info")}
    assert got == {"nvidia_cuda_runtime-13.0.96.dist-info": 7242477, "nvidia_nvvm-13.0.88.dist-info": 140063827}


# ---------------------------------------------------------------------------- kernels on a real 80-column terminal


def run_in_pty(argv: list[str], env_: dict[str, str], columns: int = 80, timeout: float = 120) -> tuple[int, str]:
    """Run ``argv`` on a real pseudo-terminal of ``columns`` x 40 (stdout and stderr both on it): (exit code, what it drew)."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env={**env_, "COLUMNS": str(columns), "TERM": "xterm"}, close_fds=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return rc, b"".join(chunks).decode("utf-8", "replace")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


def screen_lines(drawn: str) -> list[str]:
    return [ANSI.sub("", ln) for ln in drawn.split("\n")]


@pytest.mark.posix
@pytest.mark.linux
def test_kernels_and_allreduce_fit_80_columns_on_a_real_terminal_with_progress_per_size(tmp_path, torch_python):
    from rich.cells import cell_len

    argv = [*console_script(), "kernels", "matmul", "conv", "allreduce", "--device", "cpu", "--sizes", "64", "--nproc", "2",
            "--max-bytes", "512", "--factor", "8", "--iters", "2", "--python", torch_python, "--lang", "en"]
    rc, drawn = run_in_pty(argv, env(tmp_path))
    assert rc == 0, drawn[-3000:]
    # progress: the status line named every message size as the sweep completed it (8, 64, 512 B)
    for i, size in ((1, "8 B"), (2, "64 B"), (3, "512 B")):
        assert f"allreduce {i}/3: {size} done" in drawn, drawn[-3000:]
    lines = screen_lines(drawn)
    table = [ln for ln in lines if "│" in ln or "┃" in ln]
    assert table, drawn[-3000:]
    cut = [ln for ln in lines if "…" in ln and "running " not in ln]  # (the status lines end "running ...…" while a child runs)
    assert not cut, cut
    assert all(cell_len(ln.rstrip()) <= 80 for ln in table), [ln for ln in table if cell_len(ln.rstrip()) > 80]
    heads = " ".join(ln for ln in lines if "┃" in ln)
    for head in ("kernel", "device", "dtype", "result", "GFLOP/s", "±", "µs", "GB/s", "#wrong"):
        assert head in heads, (head, heads)
    # every number whole: each compute row has its rate and spread as numbers; each sweep row its size and figures
    rows = [[c.strip() for c in ln.split("│")] for ln in table if "│" in ln]
    matmul = [r for r in rows if r[0] in ("matmul", "conv")]
    sweep = [r for r in rows if re.fullmatch(r"\d+ (B|KiB|MiB)", r[0])]
    assert len(matmul) == 3 and [r[0] for r in sweep] == ["8 B", "64 B", "512 B"], rows
    for r in matmul:
        rate, spread = r[-2], r[-1]
        assert re.fullmatch(r"[0-9.]+(e-\d+)?", rate) and re.fullmatch(r"\d+%", spread), r
    for r in sweep:
        assert all(re.fullmatch(r"[0-9.]+", c) for c in r[1:]), r


@pytest.mark.posix
def test_allreduce_in_a_pipe_prints_one_line_per_size_as_it_completes(tmp_path, torch_python):
    argv = [*console_script(), "kernels", "allreduce", "--nproc", "2", "--max-bytes", "512", "--factor", "8", "--iters", "2", "--python", torch_python,
            "--lang", "en"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(tmp_path))
    try:
        first = proc.stderr.readline()  # read incrementally: the first size, while the sweep goes on
        alive_then = proc.poll() is None
        rest_err = proc.stderr.read()
        out = proc.stdout.read()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert first.startswith("allreduce 1/3: 8 B done"), (first, rest_err)
    assert alive_then, "the first size's line came only when the process had ended"
    lines = [first.rstrip("\n"), *[ln for ln in rest_err.splitlines() if ln.strip()]]
    assert [ln.split(":")[0] for ln in lines] == ["allreduce 1/3", "allreduce 2/3", "allreduce 3/3"], lines
    assert proc.returncode == 0 and "# Avg bus bandwidth" in out


def test_the_widest_kernel_screens_fit_80_columns_without_cutting(monkeypatch):
    """Worst cases the suite's CPU cannot produce: eight GPUs with peaks, a long error, a 256 MiB sweep, a fleet."""
    import io

    from rich.console import Console

    from stackdoctor.core import console as console_mod
    from stackdoctor.render.kernel_screens import print_kernels

    buf = io.StringIO()
    monkeypatch.setattr(console_mod, "make_console", lambda **kw: Console(file=buf, width=80, force_terminal=True, color_system=None))
    results = [KernelResult("matmul", f"cuda:{i}", dt, "8192x8192x8192", ok=True, max_error=1.2e-3, time_s=0.00154, tflops=712.4,
                            runs=5, tflops_min=700.1, tflops_max=719.9, percent_of_peak=72.0) for i in range(8) for dt in ("fp32", "bf16")]
    results.append(KernelResult("conv", "cuda:7", "fp16", "N32 C64->64 56x56 k3", ok=False, time_s=0.5, tflops=0.000123,
                                error="CUDNN_STATUS_EXECUTION_FAILED: cudnnConvolutionBackwardData returned 8 on /pytorch/aten/src/ATen/native/cudnn/Conv_v8.cpp"))
    rows = [{"bytes": 8 << k, "count": (8 << k) // 4, "oop": {"time_us": 123456.7, "algbw": 123.456, "busbw": 216.048, "wrong": 0},
             "ip": {"time_us": 1234567.8, "algbw": 123.456, "busbw": 216.048, "wrong": 12345}} for k in range(0, 28, 3)]
    node = {"driver": "580.126.09", "torch": "2.14.1+cu130", "cuda": "13.0", "nccl": "2.30.7", "gpus": "NVIDIA H200, NVIDIA H100 80GB HBM3",
            "matmul_fp32_tflops": 51.2}
    fleet = {"nodes": [dict(node, rank=r, hostname=f"gpu-node-{r:03d}.cluster.example.org") for r in range(4)], "differences": {},
             "slowest_rank": 3, "slowest_ratio": 0.93}
    kf = KernelFacts(ran=True, results=results, allreduce={"backend": "nccl", "device": "cuda", "world_size": 4, "rows": rows, "rank": 0,
                                                            "avg_busbw_gbs": 216.0, "max_busbw_gbs": 216.0, "fleet": fleet})
    print_kernels(kf, [], "en")
    text = buf.getvalue()
    from rich.cells import cell_len

    assert "…" not in text, text
    assert all(cell_len(ln) <= 80 for ln in text.splitlines()), [ln for ln in text.splitlines() if cell_len(ln) > 80]
    for number in ("712", "0.00012", "72%", "1%", "123456.7", "1234567.8", "216.048", "12345", "128 MiB", "51.2 TFLOP/s", "TFLOP/s"):
        assert number in text, (number, text)
    # the long error wraps in its column, whole: its pieces, read down the column, are the error
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("conv"))
    pieces = []
    for ln in lines[start:]:
        cells = [c.strip() for c in ln.split("│")]
        if len(cells) < 5 or (pieces and cells[0]):
            break
        pieces.append(cells[4])
    assert "".join(pieces).replace(" ", "") == results[-1].error.replace(" ", ""), pieces
