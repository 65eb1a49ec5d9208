"""Tool faults: nvidia-smi, nvcc, rocminfo ... as fake tools on PATH that fail in every way a real one can.

A tool that is simply missing is a fact, not a problem (exit 0). A tool that exists and
fails or hangs is a finding; either way the run finishes in its timeout with every other
probe's facts in the report.
"""

from __future__ import annotations

import pytest

from conftest import real_fixture
from .conftest import assert_others_intact, check, one_clear_message, probe_status

C14 = "c14-rtx4070-driver550-linux"


def smi_table() -> str:
    text = real_fixture(C14, "nvidia-smi.txt")
    return text.split("\n", 1)[1] if text.startswith(("$", "user")) else text


def test_tool_missing(machine):
    """No nvidia-smi, nvcc or ROCm tool anywhere: a laptop without a GPU. Facts, not findings."""
    run, data = check(machine)
    assert run.rc == 0, [f for f in data["findings"] if f["severity"] == "fail"]
    nv = data["facts"]["nvidia"]
    assert nv["smi_state"] == "absent" and nv["gpus"] == []
    assert data["facts"]["cuda_toolkit"]["nvcc_version"] is None
    assert not [f for f in data["findings"] if f["severity"] != "ok" and f["code"] != "torch-missing"], data["findings"]
    assert_others_intact(data)


def test_tool_not_executable(machine):
    tool = machine.tool("nvidia-smi", stdout=smi_table())
    tool.chmod(0o644)
    nvcc = machine.tool("nvcc", stdout="nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n")
    nvcc.chmod(0o644)
    run, data = check(machine)
    nv = data["facts"]["nvidia"]
    assert nv["gpus"] == [] and nv["driver_version"] is None  # nothing invented from a file it could not run
    assert data["facts"]["cuda_toolkit"]["nvcc_version"] is None
    assert_others_intact(data, faulted={"nvidia", "cuda_toolkit"})


def test_tool_hangs_forever(machine):
    machine.tool("nvidia-smi", script="exec sleep 600\n")
    machine.tool("rocminfo", script="exec sleep 600\n")
    run, data = check(machine)
    st = probe_status(data)
    assert st["nvidia"]["status"] == "timeout"
    one_clear_message(data, "nvidia-smi", "did not answer in 1 s")
    one_clear_message(data, "rocminfo", "did not answer in 1 s")
    assert data["facts"]["rocm"]["tool_errors"]["rocminfo"] == "rocminfo did not answer in 1 s"
    assert any(f["code"] == "probe-timeout" for f in data["findings"])
    assert_others_intact(data, faulted={"nvidia", "rocm"})


def test_tool_hangs_after_half_its_output(machine):
    table = smi_table()
    half = table[: len(table) // 2]
    (machine.bindir / ".half").write_text(half)
    machine.tool("nvidia-smi", script=f"cat {machine.bindir / '.half'}\nexec sleep 600\n")
    run, data = check(machine)
    assert probe_status(data)["nvidia"]["status"] == "timeout"
    one_clear_message(data, "nvidia-smi", "did not answer")
    # the partial output is kept, verbatim
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi") and r["status"] == "timeout"]
    assert raw and all(r["stdout"] == half for r in raw), [r["stdout"][:80] for r in raw]
    assert_others_intact(data, faulted={"nvidia"})


def test_tool_exits_by_sigsegv(machine):
    machine.tool("nvidia-smi", script="kill -SEGV $$\n")
    machine.tool("nvcc", script="kill -SEGV $$\n")
    run, data = check(machine)
    nv = data["facts"]["nvidia"]
    assert nv["gpus"] == [] and nv["smi_state"] not in (None, "ok", "absent"), nv["smi_state"]
    one_clear_message(data, "nvidia-smi", "SIGSEGV")
    assert_others_intact(data, faulted={"nvidia", "cuda_toolkit"})


def test_tool_prints_non_utf8_bytes(machine):
    (machine.bindir / ".bytes").write_bytes(b"\xff\xfe\x80 NVIDIA-SMI \xc3\x28 550.54.14 \xed\xa0\x80\n\x00\x01garbage\n")
    machine.tool("nvidia-smi", script=f"cat {machine.bindir / '.bytes'}\n")
    machine.tool("rocminfo", script=f"cat {machine.bindir / '.bytes'}\n")
    machine.tool("nvcc", script=f"cat {machine.bindir / '.bytes'}\n")
    run, data = check(machine)
    # decoded with replacement characters, never a UnicodeDecodeError; the report is valid UTF-8 JSON
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi")]
    assert raw and any("\ufffd" in r["stdout"] for r in raw)
    assert data["facts"]["nvidia"]["gpus"] == []
    assert_others_intact(data, faulted={"nvidia", "rocm", "cuda_toolkit"})


def test_tool_prints_50mb_of_garbage(machine):
    # 50 MB of random-ish text, produced by the tool (never held by the test)
    machine.tool("nvidia-smi", script="head -c 52428800 /dev/urandom | od -An -v -tx1\n")
    run, data = check(machine, timeout=120)
    nv = data["facts"]["nvidia"]
    assert nv["gpus"] == []
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi")]
    assert raw
    for r in raw:  # capture is capped: the report never carries 50 MB
        assert len(r["stdout"]) <= 8 * 1024 * 1024
    assert len(run.stdout) < 40 * 1024 * 1024
    assert_others_intact(data, faulted={"nvidia"})


# Known driver-failure messages (/work/shared/reference/failures.md A3/A4/A6, B1.6), with their exit codes.
DRIVER_FAILURES = [
    pytest.param(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n",
        9,
        "no-driver",
        id="no-driver",
    ),
    pytest.param("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n", 18, "lib-mismatch", id="lib-mismatch"),
    pytest.param("No devices were found\n", 6, "no-devices", id="no-devices"),
    pytest.param("Failed to initialize NVML: No supported GPUs were found\nUnable to determine the number of GPUs\n", 255, "no-devices", id="no-supported-gpus"),
]


@pytest.mark.parametrize(("text", "rc", "state"), DRIVER_FAILURES)
def test_tool_prints_known_driver_failure(machine, text, rc, state):
    machine.tool("nvidia-smi", stdout=text, rc=rc)
    run, data = check(machine)
    nv = data["facts"]["nvidia"]
    assert nv["smi_state"] == state
    assert nv["smi_exit_code"] == rc
    assert nv["smi_message"] == text.splitlines()[0]
    assert run.rc == 1, data["findings"]  # a broken driver is a failing finding
    fails = [f for f in data["findings"] if f["severity"] == "fail"]
    assert fails and all(f["fix"] for f in fails)
    assert_others_intact(data, faulted={"nvidia"})


def test_tool_closes_stdout_but_keeps_running(machine):
    (machine.bindir / ".table").write_text(smi_table())
    # prints its output, closes stdout and stderr, then lingers (a daemonising helper)
    machine.tool("nvidia-smi", script=f"cat {machine.bindir / '.table'}\nexec >&- 2>&-\nexec sleep 600\n")
    run, data = check(machine)
    # the tool never exits: bounded by the timeout like a hang, and what it printed is kept verbatim
    assert probe_status(data)["nvidia"]["status"] == "timeout"
    one_clear_message(data, "nvidia-smi", "did not answer in 1 s")
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi")]
    assert raw and any("550.40.07" in r["stdout"] for r in raw)
    assert_others_intact(data, faulted={"nvidia"})


ROCMINFO_FAILURES = [
    ("r-rocminfo-kfd-permission-denied-rocm-docker-116", "Permission denied"),
    ("r-rocminfo-kfd-cannot-allocate-rocminfo-41", "Cannot allocate memory"),
    ("r-mi300x-container-kfd-invalid-argument-4043", "Invalid argument"),
]


@pytest.mark.parametrize(("case", "reason"), ROCMINFO_FAILURES, ids=[r for _, r in ROCMINFO_FAILURES])
def test_tool_prints_known_rocm_failure(machine, case, reason):
    """rocminfo's real /dev/kfd failures (public reports, tests/fixtures/real): a fact quoted verbatim, not a crash."""
    text = real_fixture(case, "rocminfo.txt")
    machine.tool("rocminfo", stdout=text, rc=1)
    run, data = check(machine)
    rocm = data["facts"]["rocm"]
    assert rocm["kfd_error"] == f"Unable to open /dev/kfd read-write: {reason}"
    assert rocm["gpus"] == []
    one_clear_message(data, "rocminfo")
    assert_others_intact(data, faulted={"rocm"})


@pytest.mark.parametrize(("case", "reason"), ROCMINFO_FAILURES, ids=[r for _, r in ROCMINFO_FAILURES])
def test_tool_prints_known_rocm_failure_finding_names_kfd(machine, case, reason):
    machine.tool("rocminfo", stdout=real_fixture(case, "rocminfo.txt"), rc=1)
    run, data = check(machine)
    texts = [f["title"] + " " + f["detail"] for f in data["findings"] if f["severity"] != "ok"]
    assert any("/dev/kfd" in t and reason in t for t in texts), texts
