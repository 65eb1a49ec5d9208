"""``stackdoctor diff``: two fake machines (synthetic Facts) differ in exactly what we changed."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

from stackdoctor import kinds
from stackdoctor.core.redact import redact_report
from stackdoctor.model.diff import DIFF_SCHEMA, diff_reports
from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, NvidiaFacts, NvidiaGpu, PlatformFacts, PythonFacts, TorchFacts
from stackdoctor.model.report import Finding, ProbeStatus, Report, report_from_data

REPO = Path(__file__).resolve().parents[1]


def workstation() -> Report:
    f = Facts()
    f.platform = PlatformFacts(system="Linux", machine="x86_64", os_id="ubuntu", os_name="Ubuntu 22.04.4 LTS", kernel="6.5.0-35-generic", hostname="ws-alice")
    f.python = PythonFacts(executable="/home/alice/p/.venv/bin/python", version="3.11.7", implementation="cpython", env_kind="venv")
    f.nvidia = NvidiaFacts(
        driver_version="550.54.14",
        cuda_driver_version="12.4",
        smi_state="ok",
        gpus=[NvidiaGpu(index=0, name="NVIDIA GeForce RTX 4090", uuid="GPU-11111111-2222-3333-4444-555555555555", compute_capability="8.9", memory_total_mib=24564)],
    )
    f.torch = TorchFacts(
        installed=True,
        version="2.6.0+cu124",
        variant="cu124",
        cuda="12.4",
        cuda_available=True,
        device_count=1,
        distributions={"torch": "2.6.0+cu124", "nvidia-cudnn-cu12": "9.1.0.70", "triton": "3.2.0"},
    )
    f.kernels = KernelFacts(ran=True, results=[KernelResult(kernel="matmul", device="cuda:0", dtype="bfloat16", ok=True, time_s=0.01, tflops=150.0)])
    f.environment = {"PATH": "/home/alice/bin:/usr/bin", "CUDA_VISIBLE_DEVICES": "0"}
    rep = Report(facts=f, created_at="2026-11-01T10:00:00+00:00")
    rep.probes = [ProbeStatus("nvidia", "ok", 0.31)]
    rep.findings = [Finding("driver-ok", "ok", "driver fine"), Finding("torch-ok", "ok", "torch fine")]
    rep.raw_outputs = [{"argv": ["nvidia-smi"], "stdout": "ws output", "duration_s": 0.2}]
    return rep


def ci_runner() -> Report:
    rep = copy.deepcopy(workstation())
    f = rep.facts
    # volatile / identifying: must not count
    rep.created_at = "2026-11-29T08:00:00+00:00"
    rep.probes = [ProbeStatus("nvidia", "ok", 1.7)]
    rep.raw_outputs = [{"argv": ["nvidia-smi"], "stdout": "ci output", "duration_s": 0.9}]
    f.platform.hostname = "runner-17"
    f.python.executable = "/opt/hostedtoolcache/Python/3.11.7/x64/bin/python"
    f.nvidia.gpus[0].uuid = "GPU-99999999-2222-3333-4444-555555555555"
    f.kernels.results[0].tflops = 20.0
    f.kernels.results[0].time_s = 0.5
    f.environment["PATH"] = "/usr/local/bin:/usr/bin"
    # real differences
    f.nvidia.driver_version = "535.183.01"
    f.nvidia.cuda_driver_version = "12.2"
    f.nvidia.gpus[0].name = "Tesla T4"
    f.nvidia.gpus[0].compute_capability = "7.5"
    f.nvidia.gpus[0].memory_total_mib = 15360
    f.torch.cuda_available = False
    f.torch.distributions["nvidia-cudnn-cu12"] = "9.1.0.70"
    del f.torch.distributions["triton"]
    f.environment["CUDA_VISIBLE_DEVICES"] = ""
    rep.findings = [Finding("driver-ok", "ok", "driver fine"), Finding("driver-too-old", "fail", "driver 535 runs CUDA 12.2 < 12.4")]
    return rep


EXPECTED = {
    "nvidia.driver_version": ("550.54.14", "535.183.01"),
    "nvidia.cuda_driver_version": ("12.4", "12.2"),
    "nvidia.gpus[0].name": ("NVIDIA GeForce RTX 4090", "Tesla T4"),
    "nvidia.gpus[0].compute_capability": ("8.9", "7.5"),
    "nvidia.gpus[0].memory_total_mib": (24564, 15360),
    "torch.cuda_available": (True, False),
    "installed_distributions.triton": ("3.2.0", None),
    "environment.CUDA_VISIBLE_DEVICES": ("0", ""),
    "findings.torch-ok": ("ok", None),
    "findings.driver-too-old": (None, "fail"),
}


def test_diff_lists_exactly_the_differences():
    diffs = diff_reports(workstation(), ci_runner(), kinds.ALL)
    assert {d.key: (d.a, d.b) for d in diffs} == EXPECTED
    assert [d.section for d in diffs][0] == "nvidia" and diffs[-1].section == "findings"  # stack order
    assert diff_reports(workstation(), workstation(), kinds.ALL) == []


def test_redacted_reports_diff_the_same():
    """Diffing the redacted bundles of two machines shows the same stack differences."""
    a = report_from_data(redact_report(workstation().to_data(), ids=kinds.device_ids()))
    b = report_from_data(redact_report(ci_runner().to_data(), ids=kinds.device_ids()))
    assert {d.key: (d.a, d.b) for d in diff_reports(a, b, kinds.ALL)} == EXPECTED


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], cwd=REPO, capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "200"})


def test_diff_cli(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(workstation().to_json(), encoding="utf-8")
    b.write_text(ci_runner().to_json(), encoding="utf-8")
    r = run("diff", str(a), str(b), "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == DIFF_SCHEMA and doc["count"] == len(EXPECTED)
    assert {d["key"]: (d["a"], d["b"]) for d in doc["differences"]} == EXPECTED
    r = run("diff", str(a), str(b))
    assert r.returncode == 1
    for key in ("nvidia.driver_version", "535.183.01", "Tesla T4", "findings.driver-too-old"):
        assert key in r.stdout, key
    r = run("diff", str(a), str(a))
    assert r.returncode == 0 and "No differences" in r.stdout
    r = run("diff", str(a), str(a), "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["differences"] == []


def test_diff_unreadable_input(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(workstation().to_json(), encoding="utf-8")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "stackdoctor.report/1", "facts": ', encoding="utf-8")
    for other in (bad, tmp_path / "missing.json"):
        r = run("diff", str(a), str(other))
        assert r.returncode == 2 and "Traceback" not in r.stderr and str(other) in r.stderr
