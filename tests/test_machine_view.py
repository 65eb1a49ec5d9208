"""The machine's view (issue 31): reconcile returns a frozen MachineView whose answers are keyed by kind, whose
report form is the ``reconciled`` section the JSON documents, and which is the only thing the resolver and the rules
take (raw facts are refused by type, not by a flag)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from stackdoctor import kinds
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, NvidiaFacts, NvidiaGpu, NvidiaProcGpu, PciDevice, PlatformFacts, from_data, to_data
from stackdoctor.model.view import MachineView, NotAView, facts_of
from stackdoctor.reconcile import reconcile, report_facts

MACHINES = Path(__file__).parent / "fixtures" / "machines"


@pytest.fixture(scope="module")
def m():
    return load_matrix([])


def machine(name: str) -> Facts:
    return from_data(Facts, json.loads((MACHINES / f"{name}.json").read_text(encoding="utf-8"))["facts"])


def test_the_view_is_frozen_and_keyed_by_kind(m):
    v = reconcile(machine("rtx5090-driver570"), m)
    assert isinstance(v, MachineView)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.accelerator = "amd"  # type: ignore[misc]
    with pytest.raises(TypeError):
        v.drivers["amd"] = v.driver("nvidia")  # type: ignore[index]
    assert v.driver("nvidia").value == report_facts(v).nvidia.driver_version and v.driver("nvidia").value
    assert v.runtime("nvidia").value == report_facts(v).reconciled.cuda_driver_version.value
    assert v.driver("amd").value is None and "amd" not in v.drivers  # no AMD witness: no entry, an empty answer
    assert v.accelerator == "nvidia" and v.devices("nvidia") and not v.devices("amd")
    assert not hasattr(v, "torch") and not hasattr(v, "nvidia")  # the subjects are read as view.facts.X: no second name


@pytest.mark.parametrize("name", ["rtx5090-driver570", "amd-gfx1100", "c27-gfx1102-plus-igpu-gfx1036", "apple-m2-macos15", "no-gpu-linux"])
def test_the_report_section_is_the_view_written_out(m, name):
    """The JSON's ``reconciled`` section (its documented keys) and the view read back from it are one."""
    v = reconcile(machine(name), m)
    assert to_data(v.to_reconciled()) == to_data(report_facts(v).reconciled)
    again = kinds.view_of(from_data(Facts, json.loads(json.dumps(to_data(report_facts(v))))))  # a saved report read back
    assert (again.drivers, again.runtimes, again.accelerator, again.gpus) == (v.drivers, v.runtimes, v.accelerator, v.gpus)


def test_raw_facts_are_refused_by_type(m):
    raw = machine("rtx5090-driver570")
    with pytest.raises(NotAView, match="reconciled"):
        facts_of(raw)
    v = reconcile(raw, m)
    assert facts_of(v) is v.facts
    assert reconcile(v, m).driver("nvidia") == v.driver("nvidia")  # a view reconciled again: derived anew, same answers


def _lost_machine() -> Facts:
    """Two NVIDIA GPUs on the PCI bus; nvidia-smi lists one, the kernel module's list the other; a third only on PCI."""
    f = Facts(platform=PlatformFacts(system="Linux", machine="x86_64"))
    f.platform.nvidia_pci_devices = [PciDevice(f"0000:0{i}:00.0", "0x10de", "0x2330", "0x030200", driver="nvidia") for i in (1, 2, 3)]
    f.nvidia = NvidiaFacts(smi_state="ok", driver_version="550.54.15", sources={"driver_version": "nvidia-smi"},
                           gpus=[NvidiaGpu(0, "NVIDIA H100 80GB HBM3", bus_id="00000000:01:00.0", sources={"name": "nvidia-smi", "bus_id": "nvidia-smi"})],
                           proc_gpus=[NvidiaProcGpu(bus_id="0000:02:00.0", name="NVIDIA H100 80GB HBM3"),
                                      NvidiaProcGpu(bus_id="0000:03:00.0", name="NVIDIA H100 80GB HBM3", excluded=True)])
    return f


def test_lost_and_driven_are_one_answer(m):
    """"GPU lost" is the GPUs only the PCI bus sees; the ones the driver gives out are every other one, and a GPU the
    kernel module excludes is not given out."""
    v = reconcile(_lost_machine(), m)
    assert [g.bus_id for g in v.driven("nvidia")] == ["01:00.0", "02:00.0"]
    assert [g.bus_id for g in v.lost("nvidia")] == ["03:00.0"]
    assert [g.bus_id for g in report_facts(v).nvidia.gpus] == ["00000000:01:00.0", "02:00.0"]  # the stable keys carry the driven ones
    assert [g.bus_id for g in v.facts.nvidia.gpus] == ["00000000:01:00.0"]  # the view's facts: what nvidia-smi listed


def test_reconcile_writes_no_chosen_value_into_the_facts(m):
    """A driver only the kernel module names: the view answers it, its facts keep what the probes said (no driver
    version), and the report publishes it under its stable key, marked as reconcile's (issue 45)."""
    f = Facts(platform=PlatformFacts(system="Linux", machine="x86_64"))
    f.nvidia = NvidiaFacts(observed={"kernel_module_version": {"/proc/driver/nvidia/version": "570.133.07"}})
    before = to_data(f)
    v = reconcile(f, m)
    assert to_data(f) == before  # the facts given are not changed
    assert v.driver("nvidia").value == "570.133.07" and v.driver("nvidia").source == "/proc/driver/nvidia/version"
    assert v.chosen("nvidia.kernel_module_version").value == "570.133.07"
    assert v.facts.nvidia.driver_version is None and v.facts.nvidia.kernel_module_version is None
    published = report_facts(v)
    assert published.nvidia.driver_version == "570.133.07" and published.nvidia.kernel_module_version == "570.133.07"
    assert published.nvidia.sources["driver_version"] == "reconcile: /proc/driver/nvidia/version"
    assert to_data(published.reconciled) == to_data(v.to_reconciled())
    assert v.facts.nvidia.driver_version is None  # publishing did not change the view either
    back = kinds.view_of(published)  # a saved report read back answers the same
    assert (back.driver("nvidia"), back.chosen("nvidia.kernel_module_version").value) == (v.driver("nvidia"), "570.133.07")
    assert reconcile(published, m).driver("nvidia") == v.driver("nvidia")  # a replay derives it again
