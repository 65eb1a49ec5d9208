"""Tool faults: nvidia-smi, nvcc, rocminfo ... as fake tools on PATH that fail in every way a real one can.

A tool that is simply missing is a fact, not a problem (exit 0). A tool that exists and fails, hangs, cannot
be executed or prints nothing recognisable is a WARNING: part of the stack is unknown, and one sentence says
which tool and how. Warnings do not fail ``check`` (exit 0) unless ``--strict`` / ``warnings_fail`` says so,
and a CI gate that needs the GPU states it (``min_gpus``, ``backend = "cuda"``): then the unknown GPU fails the
gate (exit 1). A tool that reports a broken driver is a FAILING finding (exit 1). Each test pins its exit code,
the exact set of problems, and its sentence; every run finishes in its timeout with every other probe's facts.
"""

from __future__ import annotations

import json

import pytest
from conftest import real_fixture

from .conftest import NO_TORCH, assert_others_intact, check, finding, messages, pin, probe_status

# what the nvidia probe says when nvidia-smi exits 0 with output that is not nvidia-smi's
UNRECOGNISED = "nvidia-smi answered, but with nothing stackdoctor recognises as nvidia-smi output"

C14 = "c14-rtx4070-driver550-linux"


def smi_table() -> str:
    text = real_fixture(C14, "nvidia-smi.txt")
    return text.split("\n", 1)[1] if text.startswith(("$", "user")) else text


def test_tool_missing(machine):
    """No nvidia-smi, nvcc or ROCm tool anywhere: a laptop without a GPU. Facts, not findings."""
    run, data = check(machine)
    pin(run, data, 0, NO_TORCH)  # nothing is wrong: nothing is said about NVIDIA at all
    nv = data["facts"]["nvidia"]
    assert nv["smi_state"] == "absent" and nv["smi_message"] is None and nv["gpus"] == []
    assert data["facts"]["cuda_toolkit"]["nvcc_version"] is None
    assert not any("nvidia-smi" in m for m in messages(data))
    assert_others_intact(data)


def test_tool_not_executable(machine):
    tool = machine.tool("nvidia-smi", stdout=smi_table())
    tool.chmod(0o644)
    nvcc = machine.tool("nvcc", stdout="nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 12.4, V12.4.131\n")
    nvcc.chmod(0o644)
    run, data = check(machine)
    # installed but not executable is a tool that cannot run (a warning), never "not installed"
    pin(run, data, 0, ("warn", "probe-failed"), NO_TORCH)
    says = f"nvidia-smi could not be run: {tool} is not executable"
    nv = data["facts"]["nvidia"]
    assert (nv["smi_state"], nv["smi_message"], nv["smi_path"]) == ("error", says, str(tool))
    finding(data, "probe-failed", says, title="A tool that is installed failed, so part of the stack is unknown")
    # nothing invented from a file it could not run: the driver version is the loaded kernel module's, marked as reconcile's
    assert nv["gpus"] == [] and "nvidia-smi" not in nv["observed"].get("driver_version", {})
    assert nv["sources"]["driver_version"].startswith("reconcile: /"), nv["sources"]
    assert data["facts"]["cuda_toolkit"]["nvcc_version"] is None
    assert_others_intact(data, faulted={"nvidia", "cuda_toolkit"})


def test_tool_hangs_forever(machine):
    machine.tool("nvidia-smi", script="exec sleep 600\n")
    machine.tool("rocminfo", script="exec sleep 600\n")
    run, data = check(machine)
    # a stuck driver tool is a warning (exit 0); the gate tests below show when it fails a CI job.
    # (Two probe-timeout findings say the same thing: the engine's for the probe, the rule's for nvidia-smi.)
    pin(run, data, 0, ("warn", "probe-timeout"), ("warn", "probe-timeout"), ("warn", "probe-failed"), NO_TORCH)
    st = probe_status(data)
    assert (st["nvidia"]["status"], st["nvidia"]["error"]) == ("timeout", "nvidia-smi did not answer in 1 s")
    assert data["facts"]["nvidia"]["smi_message"] == "nvidia-smi did not answer in 1 s"
    finding(data, "probe-timeout", "nvidia-smi did not answer in time: nvidia-smi did not answer in 1 s.")
    assert data["facts"]["rocm"]["tool_errors"]["rocminfo"] == "rocminfo did not answer in 1 s"
    finding(data, "probe-failed", "rocminfo failed: rocminfo did not answer in 1 s.")
    assert_others_intact(data, faulted={"nvidia", "rocm"})


GATES = [
    pytest.param('[tool.stackdoctor]\nmin_gpus = 1\n', (), ("fail", "requirement-unmet"), id="min_gpus"),
    pytest.param('[tool.stackdoctor]\nbackend = "cuda"\n', (), ("fail", "requirement-unmet"), id="backend-cuda"),
    pytest.param("", ("--strict",), None, id="strict"),
]


@pytest.mark.parametrize("fault", ["hangs", "not-executable"])
@pytest.mark.parametrize(("config", "flags", "failing"), GATES)
def test_stuck_or_unrunnable_nvidia_smi_fails_a_gate_that_needs_the_gpu(machine, fault, config, flags, failing):
    """The CI gate: a job that declares it needs the GPU (or runs --strict) is refused (exit 1) when nvidia-smi
    hangs or cannot be executed; the same machine without such a requirement passes with a warning (above)."""
    tool = machine.tool("nvidia-smi", script="exec sleep 600\n")
    if fault == "not-executable":
        tool.chmod(0o644)
    if config:
        (machine.root / "pyproject.toml").write_text(config)
    run, data = check(machine, *flags, env=machine.env())
    assert run.rc == 1, data["findings"]
    warned = ("probe-timeout", "nvidia-smi did not answer in 1 s") if fault == "hangs" else ("probe-failed", f"{tool} is not executable")
    assert any(f["code"] == warned[0] and warned[1] in f["detail"] for f in data["findings"]), data["findings"]
    fails = [(f["severity"], f["code"]) for f in data["findings"] if f["severity"] == "fail"]
    assert fails == ([failing] if failing else []), fails


def test_tool_hangs_after_half_its_output(machine):
    table = smi_table()
    half = table[: len(table) // 2]
    (machine.bindir / ".half").write_text(half)
    machine.tool("nvidia-smi", script=f"cat {machine.bindir / '.half'}\nexec sleep 600\n")
    run, data = check(machine)
    pin(run, data, 0, ("warn", "probe-timeout"), ("warn", "probe-timeout"), NO_TORCH)
    assert probe_status(data)["nvidia"]["error"] == "nvidia-smi did not answer in 1 s"
    finding(data, "probe-timeout", "nvidia-smi did not answer in time: nvidia-smi did not answer in 1 s.")
    # the partial output is kept, verbatim
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi") and r["status"] == "timeout"]
    assert raw and all(r["stdout"] == half for r in raw), [r["stdout"][:80] for r in raw]
    assert_others_intact(data, faulted={"nvidia"})


def test_tool_exits_by_sigsegv(machine):
    machine.tool("nvidia-smi", script="kill -SEGV $$\n")
    machine.tool("nvcc", script="kill -SEGV $$\n")
    run, data = check(machine)
    pin(run, data, 0, ("warn", "probe-failed"), NO_TORCH)
    nv = data["facts"]["nvidia"]
    assert nv["gpus"] == [] and (nv["smi_state"], nv["smi_message"]) == ("error", "nvidia-smi was killed by SIGSEGV")
    finding(data, "probe-failed", "nvidia-smi is installed but failed: nvidia-smi was killed by SIGSEGV.")
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
    # it exited 0 but said nothing that reads as nvidia-smi: a warning, never "ok"
    pin(run, data, 0, ("warn", "probe-failed"), NO_TORCH)
    assert data["facts"]["nvidia"]["smi_state"] == "error"
    finding(data, "probe-failed", f"nvidia-smi is installed but failed: {UNRECOGNISED}.")
    assert_others_intact(data, faulted={"nvidia", "rocm", "cuda_toolkit"})


def test_tool_prints_50mb_of_garbage(machine):
    # 50 MB of random text, produced by the tool (never held by the test), quickly: base64 of /dev/urandom,
    # with a timeout long enough for the tool to finish, so what is tested is the size, not a hang
    machine.tool("nvidia-smi", script="head -c 39321600 /dev/urandom | base64\n")
    run, data = check(machine, "--timeout", "20", timeout=120)
    pin(run, data, 0, ("warn", "probe-failed"), NO_TORCH)
    finding(data, "probe-failed", f"nvidia-smi is installed but failed: {UNRECOGNISED}.")
    nv = data["facts"]["nvidia"]
    assert nv["gpus"] == []
    raw = [r for r in data["raw_outputs"] if r["argv"] and r["argv"][0].endswith("nvidia-smi")]
    assert raw
    for r in raw:  # capture is capped: the report never carries 50 MB
        assert len(r["stdout"]) <= 8 * 1024 * 1024
    assert len(run.stdout) < 40 * 1024 * 1024
    assert_others_intact(data, faulted={"nvidia"})


# Known driver-failure messages (/work/shared/reference/failures.md A3/A4/A6, B1.6), with nvidia-smi's exit codes,
# and the failing finding each must give (its code, title and the sentence in its detail).
NO_DRIVER = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running."
DRIVER_FAILURES = [
    pytest.param(NO_DRIVER + "\n", 9, "no-driver", "driver-missing", "An NVIDIA GPU is present but no NVIDIA driver answers",
                 f"nvidia-smi / NVML report that no NVIDIA driver is loaded: {NO_DRIVER}", id="no-driver"),
    # (the detail names the loaded module; the NVML library version line is in the facts, see nvml_version)
    pytest.param("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 550.144\n", 18, "lib-mismatch",
                 "driver-library-mismatch", "NVIDIA user-space libraries and the loaded kernel module are different versions",
                 "the loaded kernel module is 550.54.14: Failed to initialize NVML: Driver/library version mismatch", id="lib-mismatch"),
    pytest.param("No devices were found\n", 6, "no-devices", "gpu-lost", "The driver is loaded but a GPU did not come up",
                 "No devices were found: 0 NVIDIA GPU(s) on the PCI bus, 0 initialised", id="no-devices"),
    pytest.param("Failed to initialize NVML: No supported GPUs were found\nUnable to determine the number of GPUs\n", 255, "no-devices", "gpu-lost",
                 "The driver is loaded but a GPU did not come up", "Failed to initialize NVML: No supported GPUs were found: 0 NVIDIA GPU(s) on the PCI bus",
                 id="no-supported-gpus"),
]


@pytest.mark.parametrize(("text", "rc", "state", "code", "title", "says"), DRIVER_FAILURES)
def test_tool_prints_known_driver_failure(machine, text, rc, state, code, title, says):
    machine.tool("nvidia-smi", stdout=text, rc=rc)
    run, data = check(machine)
    nv = data["facts"]["nvidia"]
    assert nv["smi_state"] == state
    assert nv["smi_exit_code"] == rc
    assert nv["smi_message"] == text.splitlines()[0]
    pin(run, data, 1, ("fail", code), NO_TORCH)  # a broken driver is a failing finding
    f = finding(data, code, says, title=title)
    assert f["fix"]
    assert_others_intact(data, faulted={"nvidia"})


def test_tool_closes_stdout_but_keeps_running(machine):
    (machine.bindir / ".table").write_text(smi_table())
    # prints its output, closes stdout and stderr, then lingers (a daemonising helper)
    machine.tool("nvidia-smi", script=f"cat {machine.bindir / '.table'}\nexec >&- 2>&-\nexec sleep 600\n")
    run, data = check(machine)
    # the tool never exits: bounded by the timeout like a hang, and what it printed is kept verbatim
    pin(run, data, 0, ("warn", "probe-timeout"), ("warn", "probe-timeout"), NO_TORCH)
    assert probe_status(data)["nvidia"]["error"] == "nvidia-smi did not answer in 1 s"
    finding(data, "probe-timeout", "nvidia-smi did not answer in time: nvidia-smi did not answer in 1 s.")
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
    """rocminfo's real /dev/kfd failures (public reports, tests/fixtures/real): a fact quoted verbatim. "Permission
    denied" is itself the witness of the cause (this user may not open /dev/kfd: not in the render/video group, or a
    container without the device), so it is the one failure ROCm's own rule owns (fail, exit 1), and the generic
    probe warning defers to it; any other reason leaves ROCm's state unknown, not broken: one warning naming
    /dev/kfd and the reason, exit 0."""
    text = real_fixture(case, "rocminfo.txt")
    machine.tool("rocminfo", stdout=text, rc=1)
    run, data = check(machine)
    rocm = data["facts"]["rocm"]
    assert rocm["kfd_error"] == f"Unable to open /dev/kfd read-write: {reason}"
    assert rocm["gpus"] == []
    said = f"rocminfo exited with code 1: Unable to open /dev/kfd read-write: {reason}"
    if reason == "Permission denied":
        pin(run, data, 1, ("fail", "rocm-kfd-permission"), NO_TORCH)
        f = finding(data, "rocm-kfd-permission", said)
        assert f["detail"].startswith("rocminfo could not open /dev/kfd: "), f["detail"]
        assert "usermod" in json.dumps(f) or "render" in json.dumps(f), f  # the fix names the group
    else:
        pin(run, data, 0, ("warn", "probe-failed"), NO_TORCH)
        finding(data, "probe-failed", f"rocminfo failed: {said}.", title="A tool that is installed failed, so part of the stack is unknown")
    assert_others_intact(data, faulted={"rocm"})
