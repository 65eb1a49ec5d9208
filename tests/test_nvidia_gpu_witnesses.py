"""The NVIDIA probe keeps every witness's value of each GPU field (NVML, nvidia-smi's query, -L and table) and picks
no winner; reconcile weighs them (reconcile.GPU_WITNESS_ORDER), shows each in the view's ``seen`` and names a
disagreement. Real recordings replayed by a fake nvidia-smi (tests/fakesmi.py), NVML through the fake pynvml
binding of tests/test_probe_nvidia.py in the probe's child process."""

from __future__ import annotations

import copy
import os

from conftest import FIXTURES
from fakesmi import fake_nvidia_smi
from test_probe_nvidia import REAL, ctx_for, fake_pynvml, sysroot  # noqa: F401  (fixtures)

from stackdoctor.accelerators.nvidia import probe as nvidia
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, NvidiaFacts, NvidiaGpu
from stackdoctor.reconcile import reconcile

MATRIX = load_matrix([])
H200 = FIXTURES / "real" / "d01-h200-driver580-open-kernel-module-lent-device"


def probed_h200(tmp_path, sysroot, env=None, use_nvml=False) -> NvidiaFacts:  # noqa: F811
    bindir = tmp_path / "smi-bin"
    fake_nvidia_smi(bindir, H200)
    env = dict(env or os.environ)
    env["PATH"] = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    return nvidia.probe(ctx_for(sysroot, env, use_nvml=use_nvml)).facts["nvidia"]


def test_the_recorded_h200_keeps_every_nvidia_smi_form_and_reconcile_keeps_the_query(tmp_path, sysroot):  # noqa: F811
    raw = probed_h200(tmp_path, sysroot)
    (g,) = raw.gpus
    assert g.observed["name"] == {"nvidia-smi --query-gpu": "NVIDIA H200", "nvidia-smi -L": "NVIDIA H200", "nvidia-smi": "NVIDIA H200"}
    assert set(g.observed["uuid"]) == {"nvidia-smi --query-gpu", "nvidia-smi -L"} and len(set(g.observed["uuid"].values())) == 1
    f = reconcile(Facts(nvidia=raw), MATRIX)
    (kept,) = f.facts.nvidia.gpus
    assert g.observed["memory_total_mib"] == {"nvidia-smi --query-gpu": 143771, "nvidia-smi": 143771}
    assert (kept.name, kept.sources["name"], kept.memory_total_mib, kept.sources["memory_total_mib"]) == (
        "NVIDIA H200", "nvidia-smi --query-gpu", 143771, "nvidia-smi --query-gpu")
    (v,) = [x for x in f.reconciled.gpus if x.vendor == "nvidia"]
    assert v.seen["name"]["nvidia-smi"] == "NVIDIA H200"
    assert [d.subject for d in f.reconciled.disagreements if d.subject.startswith("gpu.")] == []


def test_nvml_and_nvidia_smi_disagreeing_are_both_kept_and_weighed_by_reconcile(tmp_path, sysroot, fake_pynvml):  # noqa: F811
    """NVML says the H200 (same UUID and bus) has another name and memory, and compute capability 8.6 (the matrix's
    name lookup says 9.0). The probe keeps both tools' values; reconcile keeps NVML's (the stable interface), shows
    every witness and names the disagreements."""
    uuid = "GPU-0c0b4ad5-79ab-d7ac-2bb4-bfd8c95e6ea8"
    smi_only = probed_h200(tmp_path / "a", sysroot)
    uuid = smi_only.gpus[0].uuid or uuid
    env = fake_pynvml({"driver": "580.159.04", "gpus": [{"name": "NVIDIA H200 NVL", "uuid": uuid, "bus": smi_only.gpus[0].bus_id, "cc": [8, 6],
                                                          "mem": 100 * 2**30}]})
    raw = probed_h200(tmp_path / "b", sysroot, env, use_nvml=True)
    assert raw.nvml_state == "ok"
    (g,) = raw.gpus
    assert g.observed["compute_capability"] == {"nvml": "8.6"}
    assert g.observed["memory_total_mib"] == {"nvml": 102400, "nvidia-smi --query-gpu": 143771, "nvidia-smi": 143771}
    assert g.observed["name"]["nvml"] == "NVIDIA H200 NVL" and g.observed["name"]["nvidia-smi --query-gpu"] == "NVIDIA H200"
    f = reconcile(Facts(nvidia=raw), MATRIX)
    (kept,) = f.facts.nvidia.gpus
    assert (kept.compute_capability, kept.sources["compute_capability"], kept.name, kept.memory_total_mib) == ("8.6", "nvml", "NVIDIA H200 NVL", 102400)
    (v,) = [x for x in f.reconciled.gpus if x.vendor == "nvidia"]
    assert v.seen["memory_total_mib"] == {"nvml": "102400", "nvidia-smi": "143771"}
    assert {"nvidia-smi", "nvml"} <= set(v.witnesses)
    subjects = {d.subject: d.values for d in f.reconciled.disagreements}
    assert subjects["gpu.compute_capability"]["nvml"] == "8.6" and "9.0" in subjects["gpu.compute_capability"].values()
    assert subjects["gpu.name"] == {"nvml": "NVIDIA H200 NVL", "nvidia-smi": "NVIDIA H200"}
    assert subjects["gpu.memory_total_mib"] == {"nvml": "102400", "nvidia-smi": "143771"}


def test_reconcile_not_the_probe_decides(tmp_path, sysroot):  # noqa: F811
    """The fields the probe leaves are provisional: swap one to the table's witness and reconcile puts the query's
    value back from ``observed``; a report with no ``observed`` (an older stackdoctor) keeps what it carries."""
    raw = probed_h200(tmp_path, sysroot)
    moved = copy.deepcopy(raw)
    g = moved.gpus[0]
    g.observed["memory_total_mib"]["nvidia-smi"] = 1  # the table's witness says something else
    g.memory_total_mib, g.sources["memory_total_mib"] = 1, "nvidia-smi"
    kept = reconcile(Facts(nvidia=moved), MATRIX).facts.nvidia.gpus[0]
    assert (kept.memory_total_mib, kept.sources["memory_total_mib"]) == (raw.gpus[0].memory_total_mib, "nvidia-smi --query-gpu")
    old = NvidiaFacts(gpus=[NvidiaGpu(0, "NVIDIA H200", compute_capability="9.0", memory_total_mib=143771, sources={"name": "nvml", "compute_capability": "nvml"})])
    assert reconcile(Facts(nvidia=old), MATRIX).facts.nvidia.gpus[0].memory_total_mib == 143771


def test_a_name_the_table_cut_short_is_no_disagreement():
    """nvidia-smi's table cuts long names (``Tesla V100-SXM2...``); NVML's full name is the same GPU."""
    from stackdoctor.accelerators.nvidia.witnesses import names_agree as _names_agree

    assert _names_agree(["Tesla V100-SXM2-32GB", "Tesla V100-SXM2..."])
    assert _names_agree(["NVIDIA H200", "NVIDIA H200"])
    assert not _names_agree(["NVIDIA H200 NVL", "NVIDIA H100 80GB HBM3"])
    assert "Tesla V100-SXM2..." in (REAL / "c05-v100sxm2-32gb-driver525-linux" / "nvidia-smi.txt").read_text()  # a recording that cuts it
