"""NVML faults: a fake ``pynvml`` put first on PYTHONPATH of the NVML child (stackdoctor/accelerators/nvidia/nvml.py runs
``python -c _CHILD``, which honours PYTHONPATH). NVML is only used on the live root, so these runs
have no SYSROOT; the fake nvidia-smi replays a real RTX 4070 machine (c14, tests/fakesmi.py) as the fallback source.

NVML that is missing, lacks a function or fails for one GPU is a fact with its error quoted (``nvml_error`` /
the GPU's ``errors``), never a finding by itself while nvidia-smi answers: each run exits 0 with only the
torch-less target's warning.
"""

from __future__ import annotations

import json
from typing import Any

from conftest import FIXTURES
from fakesmi import fake_nvidia_smi
from helpers import machine_env, run_sd, validate_report
from test_probe_nvidia import FAKE_PYNVML  # the probe tests' fake binding, reused, not copied

from .conftest import BOUND_S, NO_TORCH, Machine, pin, probe_status

C14 = "c14-rtx4070-driver550-linux"


def live_check(m: Machine, spec: dict[str, Any] | None, *, drop: tuple[str, ...] = (), binding: str | None = None) -> tuple[Any, dict[str, Any]]:
    d = m.root / "pynvml"
    d.mkdir()
    # NVML answers for the same machine nvidia-smi replays: c14's driver, unless a test says otherwise (two
    # witnesses that disagree on the driver are a source-conflict finding, which is not what these tests are about)
    spec = {"driver": "550.40.07", **(spec or {})}
    src = binding if binding is not None else FAKE_PYNVML + "".join(f"\ndel {name}\n" for name in drop)
    (d / "pynvml.py").write_text(src)
    fake_nvidia_smi(m.bindir, FIXTURES / "real" / C14)  # answers the query, -L and the table as c14 recorded them
    env = machine_env(m.bindir, None, PYTHONPATH=str(d), FAKE_NVML=json.dumps(spec or {}))
    # --timeout 5: the NVML child is a Python start-up, slow on a loaded 2-core machine
    args = ["check", "--json", "--no-kernels", "--timeout", "5", "--torch-timeout", "5", "--python", m.python]
    run = run_sd(args, env=env, timeout=90)
    assert run.elapsed < BOUND_S
    data = run.json()
    validate_report(data)
    pin(run, data, 0, NO_TORCH)
    st = probe_status(data)
    for name in ("target", "platform", "cuda_toolkit", "rocm", "intel", "jetson", "thunderbolt"):
        assert st[name]["status"] in ("ok", "skipped"), st[name]
    assert data["facts"]["python"]["version"].startswith("3.")
    assert data["facts"]["platform"]["system"] == "Linux"
    return run, data


def test_nvml_library_missing(machine):
    _, data = live_check(machine, {"init": "LibraryNotFound"})
    nv = data["facts"]["nvidia"]
    assert nv["nvml_state"] == "absent" and nv["nvml_error"] == "LibraryNotFound"  # the one sentence: NVML's own error name
    # nvidia-smi still answered: its facts are all there
    assert nv["driver_version"] == "550.40.07" and nv["cuda_driver_version"] == "12.4"  # c14 source.md
    assert [g["name"] for g in nv["gpus"]] == ["NVIDIA GeForce RTX 4070"]
    assert probe_status(data)["nvidia"]["status"] == "ok"


def test_nvml_binding_not_importable(machine):
    _, data = live_check(machine, None, binding="raise ImportError('libnvidia-ml.so.1: cannot open shared object file')\n")
    nv = data["facts"]["nvidia"]
    assert nv["nvml_state"] == "absent"
    assert nv["nvml_error"] == "nvidia-ml-py (pynvml) is not importable: ImportError: libnvidia-ml.so.1: cannot open shared object file"
    assert nv["driver_version"] == "550.40.07"


def test_nvml_function_missing_in_old_library(machine):
    spec = {"gpus": [{"name": "NVIDIA GeForce RTX 4070", "bus": "00000000:01:00.0"}]}
    drop = ("nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMigMode", "nvmlDeviceGetCudaComputeCapability")
    _, data = live_check(machine, spec, drop=drop)
    nv = data["facts"]["nvidia"]
    assert nv["nvml_state"] == "ok"
    g = nv["gpus"][0]
    assert g["name"] == "NVIDIA GeForce RTX 4070"
    assert g["memory_total_mib"] == 12282  # other calls still answered
    assert g["mig_mode"] in (None, "Disabled", "N/A")  # NVML had no function; nvidia-smi may fill it
    assert not any("FunctionNotFound" in v or "nvmlDeviceGetMigMode" in v for v in g["errors"].values()), g["errors"]
    # the CUDA version NVML could not give comes from nvidia-smi, recorded as such
    assert nv["cuda_driver_version"] == "12.4"
    assert "nvml" not in nv["observed"].get("cuda_driver_version", {})


def test_nvml_error_mid_query_for_one_gpu_of_several(machine):
    spec = {
        "gpus": [
            {"name": "NVIDIA H100 80GB HBM3", "bus": "00000000:01:00.0", "cc": [9, 0]},
            {"name": "raise:GpuIsLost", "mem": "raise:GpuIsLost", "bus": "00000000:02:00.0", "cc": [9, 0]},
            {"name": "NVIDIA H100 80GB HBM3", "bus": "00000000:03:00.0", "cc": [9, 0]},
        ]
    }
    _, data = live_check(machine, spec)
    nv = data["facts"]["nvidia"]
    assert nv["nvml_state"] == "ok"
    by_bus = {(g.get("bus_id") or "").upper(): g for g in nv["gpus"]}
    good = [g for g in nv["gpus"] if g["name"] == "NVIDIA H100 80GB HBM3"]
    assert len(good) >= 2 and all(g["compute_capability"] == "9.0" for g in good)
    lost = by_bus.get("00000000:02:00.0")
    assert lost is not None, list(by_bus)
    assert lost["errors"] == {"name": "nvmlDeviceGetName: GpuIsLost", "memory_total_mib": "nvmlDeviceGetMemoryInfo: GpuIsLost"}
