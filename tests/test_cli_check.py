"""End to end: the installed console script against fake machines (fake tools + a SYSROOT tree)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import FIXTURES, write_fake_tool
from fakesmi import fake_nvidia_smi
from helpers import machine_env, run_sd, validate_report

C14 = "c14-rtx4070-driver550-linux"


def make_sysroot(root: Path, *, proc_version: str | None = None, os_release: str = 'NAME="Ubuntu"\nID=ubuntu\nVERSION_ID="22.04"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n') -> Path:
    (root / "etc").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "os-release").write_text(os_release)
    if proc_version is not None:
        d = root / "proc" / "driver" / "nvidia"
        d.mkdir(parents=True, exist_ok=True)
        (d / "version").write_text(proc_version)
        m = root / "sys" / "module" / "nvidia"
        m.mkdir(parents=True, exist_ok=True)
        (m / "version").write_text(proc_version.split("Kernel Module")[1].split()[0] + "\n" if "Kernel Module" in proc_version else "")
    return root


PROC_550 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.40.07  Fri Jan 26 13:12:45 UTC 2024\nGCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n"


@pytest.fixture
def fake_machine(tmp_path):
    """c14 (RTX 4070, driver 550.40.07) as a fake machine: its nvidia-smi answers each argument list from the
    recorded table (tests/fakesmi.py), and the kernel module of the same driver is loaded."""
    bindir = tmp_path / "bin"
    fake_nvidia_smi(bindir, FIXTURES / "real" / C14)
    sysroot = make_sysroot(tmp_path / "root", proc_version=PROC_550)
    return bindir, sysroot


def test_fake_machine_report_validates(fake_machine, plain_python):
    bindir, sysroot = fake_machine
    run = run_sd(["check", "--json", "--python", plain_python], env=machine_env(bindir, sysroot))
    assert run.rc == 0, run.stderr  # no torch is a warning, not a failure
    data = run.json()
    validate_report(data)
    f = data["facts"]
    assert f["nvidia"]["driver_version"] == "550.40.07"
    assert f["nvidia"]["observed"]["driver_version"] == {"nvidia-smi --query-gpu": "550.40.07", "nvidia-smi": "550.40.07"}
    assert f["nvidia"]["cuda_driver_version"] == "12.4"
    assert f["nvidia"]["smi_state"] == "ok"
    (gpu,) = f["nvidia"]["gpus"]
    assert gpu["name"] == "NVIDIA GeForce RTX 4070" and gpu["memory_total_mib"] == 12282 and gpu["bus_id"] == "00000000:2D:00.0"
    assert gpu["sources"]["memory_total_mib"] == "nvidia-smi --query-gpu"
    assert f["nvidia"]["kernel_module_version"] == "550.40.07"
    assert f["python"]["executable"] == plain_python
    codes = {x["code"]: x["severity"] for x in data["findings"]}
    assert codes.get("torch-missing") == "warn"
    assert all(x["fix"] for x in data["findings"] if x["severity"] != "ok")
    assert {p["name"] for p in data["probes"]} >= {"target", "platform", "nvidia", "cuda_toolkit", "rocm", "thunderbolt"}


def test_hung_tool_finishes_in_its_timeout(tmp_path, plain_python):
    bindir = tmp_path / "bin"
    write_fake_tool(bindir, "nvidia-smi", script="echo '+------'\nsleep 600\n")
    sysroot = make_sysroot(tmp_path / "root")
    run = run_sd(["check", "--json", "--timeout", "1", "--python", plain_python], env=machine_env(bindir, sysroot), timeout=60)
    assert run.elapsed < 20
    data = run.json()
    validate_report(data)
    nv = next(p for p in data["probes"] if p["name"] == "nvidia")
    assert nv["status"] == "timeout" and "nvidia-smi did not answer in 1 s" in nv["error"]
    assert any(x["code"] == "probe-timeout" for x in data["findings"])
    assert data["facts"]["python"]["version"]  # the other probes' facts are still there


@pytest.mark.headline("torch")
@pytest.mark.slow
def test_real_torch_in_separate_venv(torch_python, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    run = run_sd(["check", "--json", "--python", torch_python], env=machine_env(bindir, make_sysroot(tmp_path / "root")))
    data = run.json()
    validate_report(data)
    t = data["facts"]["torch"]
    assert t["version"] == "2.13.0+cpu" and t["variant"] == "cpu" and t["cuda"] is None
    assert data["facts"]["kernels"]["ran"] is True
    assert {r["kernel"] for r in data["facts"]["kernels"]["results"]} >= {"matmul"}
    assert run.rc == 0, [f for f in data["findings"] if f["severity"] == "fail"]


def test_replay_gives_the_same_findings(fake_machine, plain_python, tmp_path):
    bindir, sysroot = fake_machine
    out = tmp_path / "report.json"
    live = run_sd(["check", "--json", "--output", str(out), "--python", plain_python], env=machine_env(bindir, sysroot))
    assert live.rc == 0 and out.exists()
    live_data = json.loads(out.read_text())
    # replay on a machine with none of those tools: nothing is probed
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    replay = run_sd(["check", "--json", "--replay", str(out)], env=machine_env(empty))
    data = replay.json()
    validate_report(data)
    assert replay.rc == live.rc
    assert [(f["code"], f["severity"], f["detail"]) for f in data["findings"]] == [(f["code"], f["severity"], f["detail"]) for f in live_data["findings"]]
    assert data["facts"] == live_data["facts"]


def test_human_screen_shows_layers_and_summary(fake_machine, plain_python):
    bindir, sysroot = fake_machine
    run = run_sd(["check", "--python", plain_python], env=machine_env(bindir, sysroot))
    assert run.rc == 0
    out = run.stdout
    for layer in ("python", "torch", "runtime", "driver", "gpu"):
        assert layer in out
    assert "RTX 4070" in out and "550.40.07" in out
    assert "torch-missing" in out and "stackdoctor install" in out
    last = [ln for ln in out.splitlines() if ln.strip()][-1]
    assert "warning" in last and "ok" in last


def test_bad_flag_is_exit_2(plain_python):
    run = run_sd(["check", "--format", "yaml"])
    assert run.rc == 2 and "unknown --format" in run.stderr


def test_replay_missing_file_is_exit_2(tmp_path):
    run = run_sd(["check", "--replay", str(tmp_path / "nope.json")])
    assert run.rc == 2 and "no such file" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_version_and_help():
    assert run_sd(["--version"]).stdout.startswith("stackdoctor ")
    for cmd in (["--help"], ["check", "--help"]):
        r = run_sd(cmd)
        assert r.rc == 0 and "Usage" in r.stdout


@pytest.mark.slow
def test_compile_is_opt_in_from_check(torch_python, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    env = machine_env(bindir, make_sysroot(tmp_path / "root"))
    plain = run_sd(["check", "--json", "--python", torch_python], env=env).json()
    assert "compile" not in {r["kernel"] for r in plain["facts"]["kernels"]["results"]}
    # Inductor's first C++ compile alone can pass the default 60 s --torch-timeout on a loaded 2-core machine
    data = run_sd(["check", "--json", "--compile", "--torch-timeout", "280", "--python", torch_python], env=env, timeout=300).json()
    validate_report(data)
    compiled = [r for r in data["facts"]["kernels"]["results"] if r["kernel"] == "compile"]
    assert len(compiled) == 1 and compiled[0]["device"] == "cpu"
    assert compiled[0]["ok"] is True, compiled[0]["error"]  # gcc is on this machine: Inductor's C++ backend works


def test_reports_are_checked_as_the_suite_produces_them(fake_machine, plain_python, _every_document_keeps_the_contract):
    bindir, sysroot = fake_machine
    before = _every_document_keeps_the_contract["stackdoctor.report/1"]
    run_sd(["check", "--json", "--python", plain_python], env=machine_env(bindir, sysroot))
    assert _every_document_keeps_the_contract["stackdoctor.report/1"] == before + 1


def test_the_report_contract_check_can_fail():
    from helpers import check_report_invariants

    from stackdoctor.model.report import Finding, Report

    good = Report(findings=[Finding("torch-missing", "warn", "no torch", fix="stackdoctor install")])
    check_report_invariants(json.loads(good.to_json()))
    no_fix = Report(findings=[Finding("torch-missing", "warn", "no torch")])
    with pytest.raises(AssertionError, match="has no fix"):
        check_report_invariants(json.loads(no_fix.to_json()))
    unknown = Report(findings=[Finding("made-up-code", "ok", "x")])
    with pytest.raises(AssertionError, match="no en explanation"):
        check_report_invariants(json.loads(unknown.to_json()))


# ---------------------------------------------------------------------------- torch read from its files (issue 14)


def _problems(data) -> set[tuple[str, str]]:
    return {(f["code"], f["severity"]) for f in data["findings"] if f["severity"] != "ok"}


@pytest.mark.slow
def test_real_torch_static_and_importing_paths_give_the_same_findings(torch_python, tmp_path):
    """The torch 2.13.0 CPU venv: ``--no-kernels`` (read from the files), ``--no-kernels --import-torch`` and the
    default quick kernel pass find the same problems; only the import can say the runtime works."""
    env = machine_env(tmp_path / "bin", make_sysroot(tmp_path / "root"))
    (tmp_path / "bin").mkdir()
    runs = {name: run_sd(["check", "--json", *args, "--python", torch_python], env=env) for name, args in
            (("files", ["--no-kernels"]), ("import", ["--no-kernels", "--import-torch"]), ("kernels", []))}
    data = {name: r.json() for name, r in runs.items()}
    for d in data.values():
        validate_report(d)
    assert runs["files"].rc == runs["import"].rc == runs["kernels"].rc == 0
    # only an import hears torch's own warnings: this venv has no NumPy (torch warns "Failed to initialize NumPy")
    heard = {("torch-numpy-missing", "warn")}
    assert heard <= _problems(data["import"]) and heard <= _problems(data["kernels"])
    assert _problems(data["files"]) == _problems(data["import"]) - heard == _problems(data["kernels"]) - heard
    oks = {name: {f["code"] for f in d["findings"] if f["severity"] == "ok"} for name, d in data.items()}
    # only the import could say the runtime works; it does not, for torch without NumPy is not a working runtime
    assert oks["import"] == oks["files"] == oks["kernels"] and "runtime-ok" not in oks["import"]
    tf, ti = data["files"]["facts"]["torch"], data["import"]["facts"]["torch"]
    assert (tf["imported"], ti["imported"]) == (False, True)
    for key in ("version", "variant", "cuda", "hip", "git_version", "location", "distributions"):
        assert tf[key] == ti[key], key
    assert data["files"]["facts"]["kernels"]["ran"] is False and data["kernels"]["facts"]["kernels"]["ran"] is True


def test_no_kernels_never_imports_torch(fake_machine, tmp_path):
    """``check --no-kernels`` reads torch from its files: a torch whose ``__init__`` leaves a marker is never run."""
    from test_target_probe import (
        MARKER_INIT,
        VERSION_2_14_1,
        libtorch_cuda,
        make_fake_torch_env,
    )

    bindir, sysroot = fake_machine
    marker = tmp_path / "torch-was-imported"
    py = make_fake_torch_env(tmp_path, MARKER_INIT.format(marker=str(marker)), version_py=VERSION_2_14_1,
                             libs={"libtorch_cuda.so": libtorch_cuda(75, 80, 86, 90, 100, 120)}, dist_version="2.14.1")
    run = run_sd(["check", "--json", "--no-kernels", "--python", py], env=machine_env(bindir, sysroot))
    assert not marker.exists(), "check --no-kernels imported torch"
    data = run.json()
    t = data["facts"]["torch"]
    assert t["imported"] is False and t["version"] == "2.14.1+cu130" and t["cuda"] == "13.0"
    codes = {f["code"] for f in data["findings"]}
    assert "driver-too-old" in codes and run.rc == 1  # cu130 on the 550 driver of c14: judged from the files
    assert not codes & {"cuda-unavailable", "runtime-ok"}
    run_sd(["check", "--json", "--no-kernels", "--import-torch", "--python", py], env=machine_env(bindir, sysroot))
    assert marker.exists()  # and the marker works


@pytest.mark.posix
def test_import_abort_still_judges_the_gpu_and_the_driver(fake_machine, tmp_path):
    """The default check imports torch; here the import aborts (as a ROCm build does with hipErrorNoBinaryForGpu).
    The report keeps the version and the arch list read from the files, and judges the RTX 4070 (sm_89) and the
    550 driver against them."""
    from test_target_probe import VERSION_2_14_1, libtorch_cuda, make_fake_torch_env

    bindir, sysroot = fake_machine
    py = make_fake_torch_env(tmp_path, "import os\nos.abort()\n", version_py=VERSION_2_14_1, libs={"libtorch_cuda.so": libtorch_cuda(90, 100, 120)})
    run = run_sd(["check", "--json", "--python", py], env=machine_env(bindir, sysroot))
    data = run.json()
    validate_report(data)
    t = data["facts"]["torch"]
    assert t["import_error_kind"] == "crash" and "SIGABRT" in t["import_error"] and t["imported"] is False
    assert t["version"] == "2.14.1+cu130" and t["arch_list"] == ["sm_90", "sm_100", "sm_120"]
    found = {f["code"]: f for f in data["findings"]}
    assert {"torch-import-failed", "gpu-arch-unsupported", "driver-too-old"} <= set(found), sorted(found)
    assert "libtorch_cuda.so" in found["gpu-arch-unsupported"]["detail"] and "sm_89" in found["gpu-arch-unsupported"]["detail"]
    assert not set(found) & {"torch-missing", "torch-ok", "runtime-ok", "cuda-unavailable"}
    assert run.rc == 1


def test_torch_arch_list_differs_from_its_library(fake_machine, tmp_path):
    """torch names one arch list, its libtorch_cuda.so carries another: a finding when both are read."""
    from test_target_probe import (
        FAKE_CU130_TORCH_OLD_DRIVER,
        VERSION_2_14_1,
        libtorch_cuda,
        make_fake_torch_env,
    )

    bindir, sysroot = fake_machine
    py = make_fake_torch_env(tmp_path, FAKE_CU130_TORCH_OLD_DRIVER, version_py=VERSION_2_14_1, libs={"libtorch_cuda.so": libtorch_cuda(80, 90)})
    data = run_sd(["check", "--json", "--no-kernels", "--import-torch", "--python", py], env=machine_env(bindir, sysroot)).json()
    hit = next(f for f in data["findings"] if f["code"] == "torch-arch-list-mismatch")
    assert hit["severity"] == "warn" and "sm_75" in hit["detail"] and "libtorch_cuda.so" in hit["detail"]
    assert "--force-reinstall" in hit["fix"]
    # without the import there is nothing of torch's own to compare with
    data = run_sd(["check", "--json", "--no-kernels", "--python", py], env=machine_env(bindir, sysroot)).json()
    assert "torch-arch-list-mismatch" not in {f["code"] for f in data["findings"]}


TRITON = "r-titanv-rtx5880ada-driver570-query-triton-8070"


def test_primary_nvidia_path_end_to_end(tmp_path, plain_python):
    """The path most machines take: nvidia-smi --query-gpu (with compute_cap) and -L, answered from a real
    two-GPU machine's recordings (TITAN V + RTX 5880 Ada, driver 570.86.15; tests/fakesmi.py), through
    ``check`` and ``install --dry-run``."""
    bindir = tmp_path / "bin"
    calls = tmp_path / "calls"
    smi = fake_nvidia_smi(bindir, FIXTURES / "real" / TRITON)
    smi.write_text(smi.read_text().replace("#!/bin/sh\n", f'#!/bin/sh\necho "$*" >> {calls}\n', 1))
    sysroot = make_sysroot(tmp_path / "root")
    env = machine_env(bindir, sysroot)
    run = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=env)
    data = run.json()
    nv = data["facts"]["nvidia"]
    sent = calls.read_text().splitlines()
    assert sent[0].startswith("--query-gpu=index,name,uuid,compute_cap,") and sent[0].endswith(" --format=csv,noheader,nounits"), sent
    assert sorted(sent[1:]) == ["", "-L"], sent  # then -L and the table (no recording of the table: exit 2)
    assert (nv["driver_version"], nv["sources"]["driver_version"]) == ("570.86.15", "nvidia-smi --query-gpu")
    assert [(g["index"], g["name"], g["compute_capability"], g["uuid"]) for g in nv["gpus"]] == [
        (0, "NVIDIA TITAN V", "7.0", "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd"),
        (1, "NVIDIA RTX 5880 Ada Generation", "8.9", "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137"),
    ]
    assert all(g["sources"]["compute_capability"] == "nvidia-smi --query-gpu" for g in nv["gpus"])
    assert all(g["memory_total_mib"] is None for g in nv["gpus"])  # [N/A]: no recording shows it, nothing invented
    assert run.rc == 0, data["findings"]  # no torch in the target: a warning
    plan = run_sd(["install", "--dry-run", "--offline", "--json", "--python", plain_python], env=env)
    p = plan.json()
    assert plan.rc == 0 and p["variant"].startswith("cu"), p  # a CUDA build, chosen from what the query said:
    assert any("sm_70" in r and "sm_89" in r and "570.86.15" in r for r in p["reasons"]), p["reasons"]
    assert any(r["variant"] == "cu130" and "570.86.15" in r["reason"] for r in p["rejected"]), p["rejected"]  # CUDA 13 needs >= 580


SNAP470 = "r-rtxpro-snap-smi470-driver580-compute-cap-rejected-inference-snaps-89"


def test_old_nvidia_smi_rejects_compute_cap_end_to_end(tmp_path, plain_python):
    """The fallback path, on a real machine's recordings: a snap's nvidia-smi 470.256.02 rejects compute_cap
    (exit 2), stackdoctor asks again without it, and the table adds the CUDA ceiling of the 580.95.05 driver."""
    bindir = tmp_path / "bin"
    calls = tmp_path / "calls"
    smi = fake_nvidia_smi(bindir, FIXTURES / "real" / SNAP470)
    smi.write_text(smi.read_text().replace("#!/bin/sh\n", f'#!/bin/sh\necho "$*" >> {calls}\n', 1))
    run = run_sd(["check", "--json", "--no-kernels", "--python", plain_python], env=machine_env(bindir, make_sysroot(tmp_path / "root")))
    nv = run.json()["facts"]["nvidia"]
    sent = calls.read_text().splitlines()
    assert "compute_cap" in sent[0] and "compute_cap" not in sent[1] and sent[1].startswith("--query-gpu=index,name,uuid,memory.total,"), sent
    assert (nv["driver_version"], nv["smi_version"], nv["cuda_driver_version"]) == ("580.95.05", "470.256.02", "13.0")
    (g,) = nv["gpus"]
    assert (g["bus_id"], g["memory_total_mib"], g["power_limit_w"], g["compute_capability"]) == ("00000000:01:00.0", 8151, 60.0, None)
    assert g["sources"]["memory_total_mib"] == "nvidia-smi --query-gpu"
    assert nv["smi_state"] == "ok"
