"""Real outputs recorded on the NVIDIA H200 machine the project's device tool lends (fixture d01):
every form of nvidia-smi the NVIDIA probe reads, and the kernel module's /proc files, parse to the facts
its source.md derives; the probe reads them end to end through fake tools that replay them per argument list."""

from __future__ import annotations

import yaml

from conftest import FIXTURES
from stackdoctor.probes.nvidia import QUERY_FIELDS, parse_proc_driver_version, parse_smi_list, parse_smi_query, parse_smi_table

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
