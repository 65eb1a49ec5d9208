"""Project requirements ([tool.stackdoctor]): discovery, validation, and judging fake machines.

The machines here are synthetic Facts built in the test (a CUDA box with two A100s, a CPU-only
laptop, a box with an old V100 next to a new GPU); the values are the kinds the probes record.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from stackdoctor.config import Requirements, apply_policy, discover_config
from stackdoctor.core.errors import ConfigError, ExitCode
from stackdoctor.core.units import parse_bandwidth
from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, NvidiaFacts, NvidiaGpu, TorchDevice, TorchFacts
from stackdoctor.model.report import Finding


def requirements_findings(facts, reqs):
    """The requirement rules' findings for ``facts`` (reconciled, then judged by the requirements group)."""
    from stackdoctor import rules
    from stackdoctor.matrix import load_matrix
    from stackdoctor.reconcile import reconcile

    matrix = load_matrix([])
    return rules.judge(reconcile(facts, matrix), matrix, requirements=reqs, groups=["requirements"])


def cuda_box(n: int = 2, cap: str = "8.0", torch_version: str = "2.7.1+cu126", busbw: float | None = 42.0) -> Facts:
    f = Facts()
    f.nvidia = NvidiaFacts(
        driver_version="570.133.20",
        cuda_driver_version="12.8",
        gpus=[NvidiaGpu(index=i, name="NVIDIA A100-SXM4-80GB", compute_capability=cap) for i in range(n)],
    )
    f.torch = TorchFacts(
        installed=True,
        version=torch_version,
        variant="cu126",
        cuda="12.6",
        cuda_available=True,
        device_count=n,
        devices=[TorchDevice(index=i, name="NVIDIA A100-SXM4-80GB", capability=cap) for i in range(n)],
    )
    results = [KernelResult(kernel="matmul", device=f"cuda:{i}", dtype="bfloat16", ok=True) for i in range(n)]
    if busbw is not None:
        results.append(KernelResult(kernel="allreduce", device="cuda", ok=True, extra={"busbw_gbps": busbw}))
    f.kernels = KernelFacts(ran=True, mode="quick", results=results)
    return f


def cpu_laptop() -> Facts:
    f = Facts()
    f.torch = TorchFacts(installed=True, version="2.13.0+cpu", variant="cpu", cuda=None, cuda_available=False, device_count=0)
    f.kernels = KernelFacts(ran=True, results=[KernelResult(kernel="matmul", device="cpu", ok=True)])
    return f


FULL = Requirements(
    torch=">=2.6",
    backend="cuda",
    min_gpus=2,
    compute_capability=">=8.0",
    kernels=["matmul", "allreduce"],
    min_busbw=20.0,
    source="pyproject.toml",
)


def codes(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.code, f.severity) for f in findings]


# ---------------------------------------------------------------------------- judging


def test_requirements_pass_on_a_machine_that_meets_them():
    out = requirements_findings(cuda_box(), FULL)
    assert codes(out) == [("requirements-ok", "ok")]
    assert "42 GB/s" in out[0].detail


def test_every_requirement_trips_on_a_cpu_laptop():
    out = requirements_findings(cpu_laptop(), FULL)
    assert all(f.code == "requirement-unmet" and f.severity == "fail" and f.fix for f in out)
    details = " | ".join(f.detail for f in out)
    for needle in ("backend cuda", "at least 2 GPU", "compute capability >=8.0", "the allreduce kernel", "busbw >= 20"):
        assert needle in details
    # torch 2.13 meets >=2.6 and matmul passed on cpu: those are not reported
    assert "torch >=2.6" not in details and "the matmul kernel" not in details
    backend = next(f for f in out if "backend" in f.detail)
    assert "CPU-only build" in backend.detail and "pyproject.toml" in backend.detail
    assert backend.fix.startswith("stackdoctor install --variant cu") and "no cuda device" in backend.detail


@pytest.mark.parametrize(
    ("machine", "reqs", "needle"),
    [
        pytest.param(cuda_box(torch_version="2.5.1+cu124"), Requirements(torch=">=2.6"), "torch 2.5.1+cu124", id="old-torch"),
        pytest.param(cuda_box(n=1), Requirements(min_gpus=2), "torch can use 1", id="one-gpu"),
        pytest.param(cuda_box(cap="7.0"), Requirements(compute_capability=">=8.0"), "(7.0)", id="v100"),
        pytest.param(cuda_box(busbw=12.5), Requirements(min_busbw=parse_bandwidth("160Gb/s")), "12.5 GB/s", id="slow-busbw"),
        pytest.param(cuda_box(busbw=None), Requirements(kernels=["allreduce"]), "no allreduce result", id="no-allreduce"),
        pytest.param(cuda_box(), Requirements(backend="rocm"), "CUDA 12.6 build", id="wrong-backend"),
    ],
)
def test_one_unmet_requirement(machine, reqs, needle):
    out = requirements_findings(machine, reqs)
    assert codes(out) == [("requirement-unmet", "fail")]
    assert needle in out[0].detail


def test_torch_missing_and_cuda_unavailable():
    f = cuda_box()
    f.torch = TorchFacts(installed=False, import_error="ModuleNotFoundError: No module named 'torch'")
    out = requirements_findings(f, Requirements(torch=">=2.6", backend="cuda"))
    assert [o.detail for o in out][0].endswith("the target has no torch.")
    assert "No module named 'torch'" in out[1].detail
    g = cuda_box()
    g.torch.cuda_available = False
    g.torch.cuda_error = "CUDA driver version is insufficient for CUDA runtime version"
    out = requirements_findings(g, Requirements(backend="cuda"))
    assert codes(out) == [("requirement-unmet", "fail")] and "insufficient" in out[0].detail


def test_no_requirements_no_findings():
    assert requirements_findings(cpu_laptop(), None) == []
    assert requirements_findings(cpu_laptop(), Requirements()) == []


def test_apply_policy_ignores_and_promotes_warnings():
    fs = [
        Finding("nvcc-mismatch", "warn", "nvcc differs"),
        Finding("persistence-off", "warn", "persistence mode off"),
        Finding("driver-ok", "ok", "driver fine"),
    ]
    out = apply_policy(fs, Requirements(ignore=["nvcc-*"], warnings_fail=True, source="stackdoctor.toml"))
    assert codes(out) == [("persistence-off", "fail"), ("driver-ok", "ok")]
    assert "warnings_fail" in out[0].detail
    assert fs[1].severity == "warn"  # pure: inputs untouched
    assert apply_policy(fs, None) == fs


# ---------------------------------------------------------------------------- files


def write(p: Path, text: str) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def test_discover_from_pyproject_upward(tmp_path):
    write(
        tmp_path / "pyproject.toml",
        """\
        [project]
        name = "train"
        [tool.stackdoctor]
        torch = ">=2.6"
        backend = "cuda"
        min_gpus = 2
        compute_capability = "8.0"
        kernels = ["matmul", "allreduce"]
        min_busbw = "160Gb/s"
        ignore = ["nvcc-mismatch"]
        warnings_fail = true
        """,
    )
    sub = tmp_path / "src" / "pkg"
    sub.mkdir(parents=True)
    r = discover_config(sub, None)
    assert r is not None
    assert r.source == str(tmp_path / "pyproject.toml")
    assert (r.torch, r.backend, r.min_gpus, r.compute_capability) == (">=2.6", "cuda", 2, ">=8.0")
    assert r.kernels == ["matmul", "allreduce"] and r.min_busbw == 20.0 and r.ignore == ["nvcc-mismatch"] and r.warnings_fail
    # round-trips through the report
    again = Requirements.from_report_entry(r.as_report_entry())
    assert again == r


def test_stackdoctor_toml_wins_and_pyproject_without_table_is_skipped(tmp_path):
    write(tmp_path / "stackdoctor.toml", 'backend = "rocm"\n')
    write(tmp_path / "a" / "pyproject.toml", '[project]\nname = "x"\n')
    r = discover_config(tmp_path / "a", None)
    assert r is not None and r.backend == "rocm" and r.source.endswith("stackdoctor.toml")


def test_nothing_found(tmp_path):
    assert discover_config(tmp_path, None) is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[tool.stackdoctor]\nmin_gpus = "2"\n', "min_gpus"),
        ('[tool.stackdoctor]\nmin_gpu = 2\n', "min_gpu"),
        ('[tool.stackdoctor]\nbackend = "tpu"\n', "backend"),
        ('[tool.stackdoctor]\ntorch = "2.6"\n', "torch"),
        ('[tool.stackdoctor]\ntorch = ">>2.6"\n', "torch"),
        ('[tool.stackdoctor]\nmin_busbw = "fast"\n', "min_busbw"),
        ('[tool.stackdoctor]\nkernels = ["matmul", "fft"]\n', "kernels"),
        ('[tool.stackdoctor]\nwarnings_fail = "yes"\n', "warnings_fail"),
        ("[tool.stackdoctor\nbackend = 'cuda'\n", "TOML"),
    ],
)
def test_malformed_config_names_file_and_key(tmp_path, text, key):
    p = write(tmp_path / "pyproject.toml", text)
    with pytest.raises(ConfigError) as ei:
        discover_config(tmp_path, None)
    assert str(p) in str(ei.value) and key in str(ei.value)
    assert ei.value.exit_code == ExitCode.USAGE


def test_explicit_config(tmp_path):
    p = write(tmp_path / "ci" / "gpu.toml", 'min_gpus = 8\n')
    write(tmp_path / "pyproject.toml", '[tool.stackdoctor]\nmin_gpus = 1\n')
    r = discover_config(tmp_path, p)
    assert r is not None and r.min_gpus == 8
    with pytest.raises(ConfigError, match="no such config file"):
        discover_config(tmp_path, tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"no \[tool.stackdoctor\]"):
        discover_config(tmp_path, write(tmp_path / "other" / "pyproject.toml", "[project]\nname='y'\n"))


@pytest.mark.parametrize(
    ("text", "gbps"),
    [("20", 20.0), (20, 20.0), ("20 GB/s", 20.0), ("20GB/s", 20.0), ("160Gb/s", 20.0), ("160 Gbps", 20.0), ("500 MB/s", 0.5), (" 1.5 TB/s ", 1500.0)],
)
def test_parse_bandwidth(text, gbps):
    assert parse_bandwidth(text) == pytest.approx(gbps)


@pytest.mark.parametrize("bad", ["", "GB/s", "20 GB/h", "-3", True, None, "20 XB/s"])
def test_parse_bandwidth_rejects(bad):
    with pytest.raises(ValueError):
        parse_bandwidth(bad)


# ---------------------------------------------------------------------------- through the CLI


def _run(args: list[str], cwd: Path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    return subprocess.run([sys.executable, "-m", "stackdoctor", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_malformed_config_found_by_check_is_exit_2_naming_file_and_key(tmp_path):
    write(tmp_path / "pyproject.toml", '[tool.stackdoctor]\nmin_gpus = "two"\n')
    sub = tmp_path / "src"
    sub.mkdir()
    r = _run(["check", "--json", "--no-kernels", "--timeout", "5"], cwd=sub)
    assert r.returncode == 2, (r.stdout, r.stderr)
    line = r.stderr.strip()
    assert "\n" not in line and str(tmp_path / "pyproject.toml") in line and "min_gpus" in line and "Traceback" not in line


def test_requirements_trip_and_pass_through_check(tmp_path):
    """The same project requirements fail on the CPU laptop and pass on the CUDA box (replayed)."""
    from stackdoctor.model.report import Report

    write(tmp_path / "pyproject.toml", '[tool.stackdoctor]\nbackend = "cuda"\nmin_gpus = 2\ncompute_capability = ">=8.0"\n')
    for name, facts, rc in (("laptop", cpu_laptop(), 1), ("box", cuda_box(), 0)):
        p = tmp_path / f"{name}.json"
        p.write_text(Report(facts=facts).to_json(), encoding="utf-8")
        r = _run(["check", "--replay", str(p), "--config", str(tmp_path / "pyproject.toml"), "--json"], cwd=tmp_path)
        import json

        doc = json.loads(r.stdout)
        got = [(f["code"], f["severity"]) for f in doc["findings"] if f["code"].startswith("requirement")]
        assert doc["requirements"]["source"] == str(tmp_path / "pyproject.toml")
        if name == "laptop":
            assert got == [("requirement-unmet", "fail")] * 3
        else:
            assert got == [("requirements-ok", "ok")]
        assert r.returncode == rc, (name, r.stdout)
