"""Real outputs recorded on the NVIDIA H200 machine the project's device tool lends (fixture d01):
every form of nvidia-smi the NVIDIA probe reads, and the kernel module's /proc files, parse to the facts
its source.md derives; the probe reads them end to end through fake tools that replay them per argument list."""

from __future__ import annotations

import pytest
import yaml
from conftest import FIXTURES

from stackdoctor.accelerators.nvidia.probe import QUERY_FIELDS, parse_proc_driver_version, parse_smi_list, parse_smi_query, parse_smi_table

CASE = FIXTURES / "real" / "d01-h200-driver580-open-kernel-module-lent-device"


def read(name: str) -> str:
    return (CASE / name).read_text(encoding="utf-8")


def derived() -> dict:
    text = read("source.md")
    return yaml.safe_load(text.split("```yaml", 1)[1].split("```", 1)[0])["derived"]["nvidia"]


def test_the_recorded_query_csv_is_the_query_the_probe_sends():
    assert "compute_cap" in QUERY_FIELDS and "index,name,uuid,compute_cap" in read("source.md").replace("\n  ", "")


def test_query_csv_parses_to_the_recorded_gpu():
    (gpu,) = parse_smi_query(read("nvidia-smi-query-gpu.csv"))
    want = derived()["gpus"][0]
    assert (gpu.index, gpu.name, gpu.uuid, gpu.compute_capability, gpu.memory_total_mib) == (
        0, want["name"], want["uuid"], want["compute_capability"], want["memory_total_mib"])
    assert gpu.bus_id == want["bus_id"] and gpu.persistence_mode == "Enabled" and gpu.mig_mode == "Disabled"


def test_table_list_and_proc_agree_on_the_driver():
    d = derived()
    table = parse_smi_table(read("nvidia-smi.txt"))
    assert table.driver_version == d["driver_version"] and table.cuda_version == d["cuda_driver_version"]
    assert [g.name for g in table.gpus] == ["NVIDIA H200"]
    (listed,) = parse_smi_list(read("nvidia-smi-L.txt"))
    assert listed.uuid == d["gpus"][0]["uuid"]
    assert parse_proc_driver_version(read("proc_driver_nvidia_version.txt")) == (d["kernel_module_version"], d["kernel_module_flavor"])


def test_the_recorded_h200_check_replays_healthy_and_tf32_gets_its_own_peak():
    """The real H200 run: `check --json` facts replay to no problem; the recorded kernel results get % of
    peak from each dtype's own figure (tf32 was judged against bf16's peak before the H200 run showed it)."""
    import json

    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, from_data
    from stackdoctor.reconcile import reconcile
    from stackdoctor.rules.diagnose import diagnose

    m = load_matrix([])
    data = json.loads((FIXTURES / "machines" / "d01-h200-driver580-torch211-cu130.json").read_text())
    facts = from_data(Facts, data["facts"])
    assert [f.code for f in diagnose(facts, m) if f.severity != "ok"] == []
    assert facts.torch.version == "2.11.0+cu130" and facts.reconciled.gpus[0].witnesses == ["nvml", "pci", "torch"]
    raw = json.loads(read("kernels-results.json"))["results"]
    results = [from_data(KernelResult, {k: v for k, v in r.items() if k not in ("peak_tflops", "percent_of_peak")}) for r in raw]
    for r in results:
        r.extra.pop("peak_source", None)
    facts.kernels = KernelFacts(ran=True, results=results)
    got = {(r.dtype, r.size): r.percent_of_peak for r in reconcile(facts, m).facts.kernels.results if r.kernel == "matmul"}
    assert got[("bf16", "4096x4096x4096")] == pytest.approx(78.9, abs=0.1)  # 780.96 of 989.5
    assert got[("tf32", "8192x8192x8192")] == pytest.approx(74.2, abs=0.1)  # 367.03 of 494.5 (not of bf16's 989.5)
    assert got[("fp32", "4096x4096x4096")] == pytest.approx(76.6, abs=0.1)  # 51.31 of 67.0
