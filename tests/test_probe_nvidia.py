"""nvidia probe: parsers on real nvidia-smi / procfs outputs, NVML through a fake ``pynvml`` in the child,
and the whole probe against fake tools and a SYSROOT tree."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from stackdoctor.accelerators.nvidia import probe as nvidia
from stackdoctor.accelerators.nvidia.nvml import cuda_version_from_int, parse_nvml_output, query_nvml, throttle_reason_names
from stackdoctor.accelerators.nvidia.probe import (
    parse_proc_driver_version,
    parse_smi_failure,
    parse_smi_list,
    parse_smi_query,
    parse_smi_table,
    parse_sys_module_version,
)
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts, NvidiaFacts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.reconcile import reconcile, report_facts
from stackdoctor.system import System


def weighed(out) -> NvidiaFacts:
    """The probe's NVIDIA facts after reconcile weighed the witnesses (the probe records each witness; it picks no winner)."""
    return report_facts(reconcile(Facts(nvidia=out.facts["nvidia"]), load_matrix([]))).nvidia  # as the report publishes them

FIX = Path(__file__).resolve().parent / "fixtures"
REAL = FIX / "real"
SYN = FIX / "nvidia"


def real_case(prefix: str) -> Path:
    found = sorted(REAL.glob(prefix + "-*"))
    assert found, f"fixture {prefix} missing"
    return found[0]


def source_facts(case: Path) -> dict:
    """The YAML 'Derived facts' block of a case's source.md, with trailing comments stripped from values."""
    text = (case / "source.md").read_text(encoding="utf-8")
    block = text.split("```yaml", 1)[1].split("```", 1)[0]
    data = yaml.safe_load(block)

    def clean(v):
        if isinstance(v, str):
            v = v.split("#", 1)[0].strip().strip('"')
            return None if v == "null" else v
        if isinstance(v, list):
            return [clean(x) for x in v]
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        return v

    return clean(data)


# ---------------------------------------------------------------------------- real tables

TABLE_CASES = ["c05", "c06", "c10", "c14", "c36"]


@pytest.mark.parametrize("prefix", TABLE_CASES)
def test_table_real_outputs_give_the_source_facts(prefix):
    case = real_case(prefix)
    want = source_facts(case)
    table = parse_smi_table((case / "nvidia-smi.txt").read_text(encoding="utf-8"))
    assert table.driver_version == want["driver_version"]
    assert table.cuda_version == (str(want["driver_max_cuda"]) if want["driver_max_cuda"] is not None else None)
    if "nvidia_smi_version" in want:
        assert table.smi_version == want["nvidia_smi_version"]
    gpu_want = want["gpus"]
    expected_count = gpu_want[0].get("visible_in_copy", len(gpu_want)) if len(gpu_want) == 1 else len(gpu_want)
    assert len(table.gpus) == expected_count
    for gpu in table.gpus:
        assert gpu.name == gpu_want[0]["name"]
        assert gpu.memory_total_mib == gpu_want[0]["memory_mib"]
        assert gpu.bus_id and gpu.sources["bus_id"] == "nvidia-smi"
        assert gpu.compute_capability is None  # the name -> capability lookup is the engine's job
    assert parse_smi_failure((case / "nvidia-smi.txt").read_text(encoding="utf-8")) is None


def test_c06_wsl_cuda_err_and_tool_version_differs_from_driver():
    table = parse_smi_table((real_case("c06") / "nvidia-smi.txt").read_text(encoding="utf-8"))
    assert table.cuda_raw == "ERR!" and table.cuda_version is None
    assert (table.smi_version, table.driver_version) == ("545.46", "546.80")
    assert table.gpus[0].persistence_mode == "Enabled" and table.gpus[0].power_limit_w == 80.0


def test_c10_kmd_umd_header():
    table = parse_smi_table((real_case("c10") / "nvidia-smi.txt").read_text(encoding="utf-8"))
    assert table.driver_label == "KMD Version"
    assert [g.index for g in table.gpus] == [0, 1]
    assert [g.bus_id for g in table.gpus] == ["00000000:63:00.0", "00000000:68:00.0"]
    assert all(g.mig_mode == "Disabled" and g.power_limit_w == 1000.0 for g in table.gpus)


def test_c18_lib_mismatch_failure():
    case = real_case("c18")
    want = source_facts(case)
    text = (case / "nvidia-smi.txt").read_text(encoding="utf-8")
    fail = parse_smi_failure(text)
    assert fail is not None
    assert fail.state == "lib-mismatch"
    assert fail.message == "Failed to initialize NVML: Driver/library version mismatch"
    assert fail.nvml_library_version == want["nvml_library_version"]
    table = parse_smi_table(text)
    assert table.driver_version is None and table.gpus == []


def test_c40_proc_open_module_and_proprietary_form():
    case = real_case("c40")
    want = source_facts(case)
    version, flavor = parse_proc_driver_version((case / "proc_driver_nvidia_version.txt").read_text(encoding="utf-8"))
    assert version == want["driver_version"]
    assert flavor == "open" and want["kernel_module_flavor"].startswith("open")
    # the proprietary form, as quoted in failures.md B1.8 (uv's sample)
    assert parse_proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  375.74  Wed Jun 14 01:39:39 PDT 2017\n") == ("375.74", "proprietary")
    assert parse_sys_module_version("550.144.03\n") == "550.144.03"
    assert parse_sys_module_version("garbage") is None


def test_c48_collect_env_gpu_line_parses_as_smi_list():
    case = real_case("c48")
    want = source_facts(case)
    gpus = parse_smi_list((case / "collect_env.txt").read_text(encoding="utf-8"))
    assert [(g.index, g.name) for g in gpus] == [(0, want["gpus"][0]["name"])]
    assert gpus[0].uuid is None


# ---------------------------------------------------------------------------- synthetic layouts


def test_synthetic_layouts():
    r384 = parse_smi_table((SYN / "table_r384_no_cuda.txt").read_text())
    assert (r384.driver_version, r384.cuda_raw, r384.cuda_version) == ("384.111", None, None)
    assert [g.memory_total_mib for g in r384.gpus] == [8114, 8119]  # the processes table is not a GPU
    win = parse_smi_table((SYN / "table_win_tcc_wddm_517.txt").read_text())
    assert win.gpus[0].driver_model == "WDDM" and win.gpus[0].persistence_mode is None and win.gpus[0].power_limit_w is None
    wide = parse_smi_table((SYN / "table_win_driver_model_616.txt").read_text())
    assert (wide.driver_version, wide.cuda_version) == ("616.92", "13.4")
    assert [g.driver_model for g in wide.gpus] == ["WDDM", "TCC"]
    r580 = parse_smi_table((SYN / "table_r580.txt").read_text())
    assert [g.mig_mode for g in r580.gpus] == ["Enabled", "Disabled"]
    assert [g.power_limit_w for g in r580.gpus] == [700.0, None]
    na = parse_smi_table((SYN / "table_cuda_na.txt").read_text())
    assert na.cuda_raw == "N/A" and na.cuda_version is None


def test_query_and_list():
    gpus = parse_smi_query((SYN / "query_2gpu.csv").read_text())
    assert [g.compute_capability for g in gpus] == ["8.9", "8.0"]
    assert gpus[0].mig_mode is None and gpus[1].mig_mode == "Enabled"
    assert gpus[1].pcie_gen is None and gpus[1].pcie_width == 16  # [Not Supported]
    assert gpus[0].sources["compute_capability"] == "nvidia-smi --query-gpu"
    fields = tuple(f for f in nvidia.QUERY_FIELDS if f != "compute_cap")
    old = parse_smi_query((SYN / "query_no_compute_cap.csv").read_text(), fields)
    assert old[0].compute_capability is None and old[0].memory_total_mib == 7979
    # a row from the wrong field list is not misread
    assert parse_smi_query((SYN / "query_no_compute_cap.csv").read_text()) == []
    listed = parse_smi_list((SYN / "list_2gpu.txt").read_text())
    assert [g.uuid for g in listed] == ["GPU-5c3b0e1f-0000-1111-2222-333344445555", "GPU-0a1b2c3d-6666-7777-8888-999900001111"]


@pytest.mark.parametrize(
    ("name", "state"), [("no_driver.txt", "no-driver"), ("no_devices.txt", "no-devices")]
)
def test_failure_texts(name, state):
    fail = parse_smi_failure((SYN / name).read_text())
    assert fail is not None and fail.state == state


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_parsers_never_raise(text):
    parse_smi_table(text)
    parse_smi_query(text)
    parse_smi_list(text)
    parse_smi_failure(text)
    parse_proc_driver_version(text)
    parse_sys_module_version(text)
    parse_nvml_output(text)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from((REAL / "c14-rtx4070-driver550-linux" / "nvidia-smi.txt").read_text().splitlines() + ["|", "| 0 x On |", "+"]), max_size=30))
def test_table_parser_survives_shuffled_real_lines(lines):
    parse_smi_table("\n".join(lines))


def test_nvml_conversions():
    assert cuda_version_from_int(12040) == "12.4"
    assert cuda_version_from_int(13000) == "13.0"
    assert cuda_version_from_int(9020) == "9.2"
    assert cuda_version_from_int(0) is None and cuda_version_from_int("x") is None
    assert throttle_reason_names(0x8 | 0x20 | 0x4 | 0x80) == ["sw_power_cap", "hw_slowdown", "sw_thermal", "hw_power_brake"]
    assert throttle_reason_names(0x1000) == ["0x1000"]
    assert throttle_reason_names(0) == []


# ---------------------------------------------------------------------------- fake pynvml in the child

FAKE_PYNVML = r'''
"""A fake nvidia-ml-py for stackdoctor's tests: behaviour from FAKE_NVML (JSON) in the environment."""
import json, os, time

SPEC = json.loads(os.environ.get("FAKE_NVML", "{}"))

class NVMLError(Exception):
    def __init__(self, msg):
        super().__init__(msg)

def _cls(name):
    return type("NVMLError_" + name, (NVMLError,), {})

ERRORS = {n: _cls(n) for n in ("LibraryNotFound", "DriverNotLoaded", "LibRmVersionMismatch", "Unknown",
                                "FunctionNotFound", "NotSupported", "GpuIsLost", "NoPermission")}
globals().update({"NVMLError_" + k: v for k, v in ERRORS.items()})

def _raise(kind):
    raise ERRORS[kind](kind)

def nvmlInit():
    init = SPEC.get("init")
    if init == "hang":
        time.sleep(600)
    if init == "crash":
        os.abort()
    if init:
        _raise(init)

def nvmlShutdown():
    pass

def nvmlSystemGetDriverVersion():
    return SPEC.get("driver", "550.54.14")

def nvmlSystemGetNVMLVersion():
    return b"12.550.54.14"

def nvmlSystemGetCudaDriverVersion_v2():
    return SPEC.get("cuda", 12040)

def nvmlDeviceGetCount():
    return len(SPEC.get("gpus", []))

def nvmlDeviceGetHandleByIndex(i):
    return i

def _gpu(h, key, default=None):
    g = SPEC["gpus"][h]
    v = g.get(key, default)
    if isinstance(v, str) and v.startswith("raise:"):
        _raise(v[6:])
    return v

def nvmlDeviceGetName(h): return _gpu(h, "name")
def nvmlDeviceGetUUID(h): return _gpu(h, "uuid", "GPU-%d" % h)
def nvmlDeviceGetCudaComputeCapability(h): return tuple(_gpu(h, "cc", [8, 9]))

class _Mem:
    def __init__(self, total): self.total = total

def nvmlDeviceGetMemoryInfo(h): return _Mem(_gpu(h, "mem", 12878610432))

class _Pci:
    def __init__(self, b): self.busId = b

def nvmlDeviceGetPciInfo(h): return _Pci(_gpu(h, "bus", "00000000:%02X:00.0" % (h + 1)).encode())
def nvmlDeviceGetCurrPcieLinkGeneration(h): return _gpu(h, "gen", 4)
def nvmlDeviceGetCurrPcieLinkWidth(h): return _gpu(h, "width", 16)
def nvmlDeviceGetMaxPcieLinkGeneration(h): return _gpu(h, "gen_max", 4)
def nvmlDeviceGetMaxPcieLinkWidth(h): return _gpu(h, "width_max", 16)
def nvmlDeviceGetPowerManagementLimit(h): return _gpu(h, "power_mw", 200000)
def nvmlDeviceGetMigMode(h): return _gpu(h, "mig", [0, 0])
def nvmlDeviceGetPersistenceMode(h): return _gpu(h, "persist", 1)
def nvmlDeviceGetSerial(h): return _gpu(h, "serial", "raise:NotSupported")
def nvmlDeviceGetMaxClockInfo(h, t): return _gpu(h, "max_sm", 3105)
def nvmlDeviceGetTotalEccErrors(h, e, c): return _gpu(h, "ecc", "raise:NotSupported")
def nvmlDeviceGetRetiredPagesPendingStatus(h): return _gpu(h, "retired", 0)
def nvmlDeviceGetCurrentClocksEventReasons(h): return _gpu(h, "reasons", 0x1)
'''


@pytest.fixture
def fake_pynvml(tmp_path):
    """Returns ``env(spec, drop=())``: a System env whose child imports the fake pynvml (functions in ``drop`` removed)."""

    def make(spec: dict, drop: tuple[str, ...] = ()) -> dict[str, str]:
        d = tmp_path / f"pynvml_{len(list(tmp_path.glob('pynvml_*')))}"
        d.mkdir()
        src = FAKE_PYNVML + "".join(f"\ndel {name}\n" for name in drop)
        (d / "pynvml.py").write_text(src, encoding="utf-8")
        env = dict(os.environ)
        env["PYTHONPATH"] = str(d)
        env["FAKE_NVML"] = json.dumps(spec)
        return env

    return make


@pytest.mark.parametrize(
    ("init", "state"),
    [("LibraryNotFound", "absent"), ("DriverNotLoaded", "no-driver"), ("LibRmVersionMismatch", "lib-mismatch"), ("Unknown", "error")],
)
def test_nvml_init_errors_map_to_states(fake_pynvml, init, state):
    res = query_nvml(System(env=fake_pynvml({"init": init})), timeout=20)
    assert res.state == state
    assert res.error == init
    assert res.gpus == []


def test_nvml_healthy_values_are_converted(fake_pynvml):
    spec = {"gpus": [{"name": "NVIDIA GeForce RTX 4070", "mig": [1, 1], "reasons": 0x8 | 0x20, "retired": 1, "ecc": 3, "serial": "1324"}]}
    res = query_nvml(System(env=fake_pynvml(spec)), timeout=20)
    assert res.state == "ok", res.error
    assert (res.driver_version, res.cuda_driver_version, res.nvml_version) == ("550.54.14", "12.4", "12.550.54.14")
    g = res.gpus[0]
    assert (g.name, g.compute_capability, g.memory_total_mib, g.power_limit_w) == ("NVIDIA GeForce RTX 4070", "8.9", 12282, 200.0)
    assert (g.bus_id, g.mig_mode, g.persistence_mode, g.serial) == ("00000000:01:00.0", "Enabled", "Enabled", "1324")
    assert (g.max_sm_clock_mhz, g.ecc_uncorrected, g.retired_pages_pending) == (3105, 3, True)
    assert g.throttle_reasons == ["hw_slowdown", "sw_thermal"]
    assert g.sm_count is None
    assert g.sources["name"] == "nvml" and g.errors == {}


def test_nvml_function_missing_or_unsupported_leaves_field_none(fake_pynvml):
    spec = {"gpus": [{"name": "NVIDIA A100", "cc": "raise:FunctionNotFound"}]}
    env = fake_pynvml(spec, drop=("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetMigMode"))
    res = query_nvml(System(env=env), timeout=20)
    assert res.state == "ok"
    g = res.gpus[0]
    assert g.name == "NVIDIA A100"
    assert g.compute_capability is None and g.mig_mode is None and g.throttle_reasons == []
    assert g.serial is None and g.ecc_uncorrected is None  # NotSupported
    assert g.errors == {}  # benign: not recorded as errors
    assert g.memory_total_mib == 12282


def test_nvml_error_on_one_gpu_keeps_the_others(fake_pynvml):
    spec = {"gpus": [{"name": "GPU A"}, {"name": "raise:GpuIsLost", "mem": "raise:GpuIsLost"}, {"name": "GPU C"}]}
    res = query_nvml(System(env=fake_pynvml(spec)), timeout=20)
    assert res.state == "ok"
    assert [g.name for g in res.gpus] == ["GPU A", None, "GPU C"]
    lost = res.gpus[1]
    assert "GpuIsLost" in lost.errors["name"] and "memory_total_mib" in lost.errors
    assert lost.uuid == "GPU-1"  # other calls on the same GPU still answered
    assert res.gpus[2].memory_total_mib == 12282


def test_nvml_binding_missing_is_absent(tmp_path):
    d = tmp_path / "nopynvml"
    d.mkdir()
    (d / "pynvml.py").write_text("raise ImportError('no binding here')\n")
    res = query_nvml(System(env={**os.environ, "PYTHONPATH": str(d)}), timeout=20)
    assert res.state == "absent" and "not importable" in (res.error or "")


def test_nvml_crash_and_hang_become_facts(fake_pynvml):
    crash = query_nvml(System(env=fake_pynvml({"init": "crash"})), timeout=20)
    assert crash.state == "error" and "SIGABRT" in (crash.error or "")
    start = time.monotonic()
    hang = query_nvml(System(env=fake_pynvml({"init": "hang"})), timeout=1.5)
    assert time.monotonic() - start < 15
    assert hang.state == "timeout" and hang.error == "NVML did not answer in 1.5 s"


# ---------------------------------------------------------------------------- the whole probe

SMI_DISPATCH = """\
case "$*" in
  *--query-gpu=*compute_cap*) {query_cc} ;;
  *--query-gpu=*) {query_old} ;;
  -L) cat {list} ;;
  "") cat {table} ;;
  *) echo "bad args: $*"; exit 2 ;;
esac
"""


def smi_script(tmp_path: Path, *, query: str | None = None, list_text: str = "", table: str = "", query_rc: int = 0, reject_cc: bool = False, old_query: str = "", calls: Path | None = None) -> str:
    d = tmp_path / "smi-data"
    d.mkdir(exist_ok=True)
    (d / "query").write_text(query or "")
    (d / "old").write_text(old_query)
    (d / "list").write_text(list_text)
    (d / "table").write_text(table)
    q_cc = f"cat {d / 'query'}; exit {query_rc}"
    if reject_cc:
        q_cc = "echo 'Field \"compute_cap\" is not a valid field to query.'; exit 2"
    body = SMI_DISPATCH.format(query_cc=q_cc, query_old=f"cat {d / 'old'}", list=d / "list", table=d / "table")
    if calls is not None:
        body = f'echo "$*" >> {calls}\n' + body
    return body


@pytest.fixture
def sysroot(tmp_path):
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text((real_case("c40") / "proc_driver_nvidia_version.txt").read_text())
    (root / "sys/module/nvidia").mkdir(parents=True)
    (root / "sys/module/nvidia/version").write_text("565.57.01\n")
    for lib in ("usr/lib/wsl/lib/libcuda.so.1", "usr/lib/x86_64-linux-gnu/libcuda.so.1", "usr/local/cuda-12.4/compat/libcuda.so.550.54.14"):
        (root / lib).parent.mkdir(parents=True, exist_ok=True)
        (root / lib).write_text("")
    (root / "usr/lib/x86_64-linux-gnu/libcudart.so.12").write_text("")
    return root


def ctx_for(root: Path, env: dict | None = None, timeout: float = 10.0, use_nvml: bool = False) -> ProbeContext:
    system = System(sysroot=str(root), env=dict(env or os.environ), timeout_s=timeout)
    return ProbeContext(system=system, target=Target(sys.executable, "self"), timeout_s=timeout, live_driver=use_nvml)


def test_probe_healthy_machine_from_sysroot_and_fake_smi(fake_bin, sysroot, tmp_path):
    fake_bin("nvidia-smi", script=smi_script(
        tmp_path,
        query=(SYN / "query_2gpu.csv").read_text(),
        list_text=(SYN / "list_2gpu.txt").read_text(),
        table=(REAL / "c14-rtx4070-driver550-linux" / "nvidia-smi.txt").read_text(),
    ))
    out = nvidia.probe(ctx_for(sysroot))
    assert out.status == "ok" and out.error is None
    f: NvidiaFacts = weighed(out)
    assert f.nvml_state == "skipped"
    assert (f.driver_version, f.sources["driver_version"]) == ("550.40.07", "nvidia-smi --query-gpu")
    assert (f.cuda_driver_version, f.sources["cuda_driver_version"]) == ("12.4", "nvidia-smi")
    assert f.observed["driver_version"] == {"nvidia-smi --query-gpu": "550.40.07", "nvidia-smi": "550.40.07"}
    assert (f.kernel_module_version, f.kernel_module_flavor) == ("565.57.01", "open")
    assert f.observed["kernel_module_version"] == {"/proc/driver/nvidia/version": "565.57.01", "/sys/module/nvidia/version": "565.57.01"}
    assert f.smi_state == "ok" and f.smi_version == "550.40.07"
    assert f.libcuda_paths == [
        "/usr/lib/wsl/lib/libcuda.so.1",
        "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
        "/usr/local/cuda-12.4/compat/libcuda.so.550.54.14",
    ]
    assert [g.name for g in f.gpus] == ["NVIDIA GeForce RTX 4070", "NVIDIA A100-SXM4-80GB"]
    g0 = f.gpus[0]
    assert g0.compute_capability == "8.9" and g0.sources["compute_capability"] == "nvidia-smi --query-gpu"
    # the table adds what the query did not ask for, and says so
    assert g0.mig_mode is None
    assert f.gpus[1].sources["mig_mode"] == "nvidia-smi --query-gpu"


def test_probe_nvml_first_then_smi(fake_bin, sysroot, tmp_path, fake_pynvml):
    fake_bin("nvidia-smi", script=smi_script(tmp_path, query=(SYN / "query_2gpu.csv").read_text(), table=(REAL / "c14-rtx4070-driver550-linux" / "nvidia-smi.txt").read_text()))
    env = fake_pynvml({"driver": "550.54.14", "gpus": [{"name": "NVIDIA GeForce RTX 4070", "bus": "00000000:2D:00.0", "uuid": "GPU-5c3b0e1f-0000-1111-2222-333344445555"}]})
    env["PATH"] = os.environ["PATH"]
    out = nvidia.probe(ctx_for(sysroot, env, use_nvml=True))
    f = weighed(out)
    assert f.nvml_state == "ok"
    assert (f.driver_version, f.sources["driver_version"]) == ("550.54.14", "nvml")
    assert f.observed["driver_version"]["nvidia-smi --query-gpu"] == "550.40.07"  # disagreement kept for the engine
    assert f.sources["cuda_driver_version"] == "nvml"
    assert len(f.gpus) == 2  # NVML's GPU merged with the query's by UUID, the second from the query
    assert f.gpus[0].sources["name"] == "nvml" and f.gpus[0].sources["pcie_gen"] == "nvml"
    assert f.gpus[1].sources["name"] == "nvidia-smi --query-gpu"


def test_probe_old_driver_rejects_compute_cap(fake_bin, sysroot, tmp_path):
    fake_bin("nvidia-smi", script=smi_script(
        tmp_path, reject_cc=True, old_query=(SYN / "query_no_compute_cap.csv").read_text(),
        table=(REAL / "c36-rtx3070-driver470-cuda114-ubuntu" / "nvidia-smi.txt").read_text(),
    ))
    f = weighed(nvidia.probe(ctx_for(sysroot)))
    assert f.smi_state == "ok"
    g = f.gpus[0]
    assert g.sources["compute_capability"].startswith("reconcile: ")  # no tool answered it: the matrix's name lookup
    assert g.name == "NVIDIA GeForce RTX 3070" and g.sources["name"] == "nvidia-smi --query-gpu"
    assert (f.driver_version, f.cuda_driver_version) == ("470.57.02", "11.4")


@pytest.mark.parametrize(
    ("text", "rc", "state", "message"),
    [
        ((REAL / "c18-nvml-mismatch-570-open-p2p-ubuntu2204" / "nvidia-smi.txt").read_text().split("\n", 1)[1], 18, "lib-mismatch",
         "Failed to initialize NVML: Driver/library version mismatch"),
        ((SYN / "no_driver.txt").read_text(), 9, "no-driver", None),
        ((SYN / "no_devices.txt").read_text(), 6, "no-devices", "No devices were found"),
    ],
    ids=["c18-lib-mismatch", "no-driver", "no-devices"],
)
def test_probe_driver_failures_are_facts_and_stop_early(fake_bin, sysroot, tmp_path, text, rc, state, message):
    calls = tmp_path / "calls.log"
    fake_bin("nvidia-smi", stdout=text, rc=rc, script=f'echo "$*" >> {calls}\nprintf "%s" "$(cat {tmp_path}/fakebin/.nvidia-smi.stdout)"\necho\nexit {rc}\n')
    out = nvidia.probe(ctx_for(sysroot))
    f = weighed(out)
    assert out.status == "ok"
    assert f.smi_state == state and f.smi_exit_code == rc
    assert f.smi_message == (message or text.strip())
    assert len(calls.read_text().splitlines()) == 1  # no re-runs after a driver failure
    assert f.kernel_module_version == "565.57.01"  # files still read
    if state == "lib-mismatch":
        assert (f.nvml_version, f.sources["nvml_version"]) == ("570.124", "nvidia-smi (NVML library version line)")


def test_probe_lib_mismatch_names_the_user_space_version_from_its_files(fake_bin, sysroot, tmp_path):
    """c18's machine as its thread tells it: user space 570.124.04 on disk, kernel module 570.124.06 loaded.
    nvidia-smi says only "570.124"; the libraries' file names say which 570.124. The forward-compatibility
    libcuda under /usr/local/cuda-12.4/compat (550.54.14 in this tree) is not the driver's and is not a witness."""
    text = (REAL / "c18-nvml-mismatch-570-open-p2p-ubuntu2204" / "nvidia-smi.txt").read_text().split("\n", 1)[1]
    fake_bin("nvidia-smi", stdout=text, rc=18, script=f'printf "%s" "$(cat {tmp_path}/fakebin/.nvidia-smi.stdout)"\necho\nexit 18\n')
    (sysroot / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build  (root@host)\n")
    libdir = sysroot / "usr/lib/x86_64-linux-gnu"
    for name in ("libcuda.so.570.124.04", "libnvidia-ml.so.570.124.04", "libnvidia-ml.so.1"):
        (libdir / name).write_text("")
    f = weighed(nvidia.probe(ctx_for(sysroot)))
    assert f.smi_state == "lib-mismatch"
    assert f.driver_library_version == "570.124.04"
    assert f.observed["driver_library_version"] == {"file:/usr/lib/x86_64-linux-gnu/libcuda.so.570.124.04": "570.124.04",
                                                    "file:/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.124.04": "570.124.04"}
    assert f.kernel_module_version == "570.124.06"
    from stackdoctor.matrix import load_matrix
    from stackdoctor.model.facts import Facts
    from stackdoctor.rules.diagnose import diagnose

    hit = next(x for x in diagnose(Facts(nvidia=f), load_matrix([])) if x.code == "driver-library-mismatch")
    assert hit.detail.startswith("The driver libraries are 570.124.04 but the loaded kernel module is 570.124.06"), hit.detail


def test_probe_cuda_err_banner(fake_bin, sysroot, tmp_path):
    fake_bin("nvidia-smi", script=smi_script(tmp_path, table=(REAL / "c06-wsl2-rtx3060laptop-driver546-cuda-err" / "nvidia-smi.txt").read_text()))
    f = weighed(nvidia.probe(ctx_for(sysroot)))
    assert f.smi_state == "cuda-err" and f.smi_message == "CUDA Version: ERR!"
    assert f.cuda_driver_version is None and f.driver_version == "546.80" and f.smi_version == "545.46"


def test_probe_without_nvidia_smi_is_a_plain_fact(tmp_path):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    out = nvidia.probe(ctx_for(tmp_path / "nothing", {"PATH": str(empty)}))
    f = weighed(out)
    assert out.status == "ok" and out.error is None
    assert f.smi_state == "absent" and f.gpus == [] and f.libcuda_paths == [] and f.kernel_module_version is None


def test_probe_hanging_smi_ends_at_timeout_with_partial_output(fake_bin, sysroot, tmp_path):
    partial = (SYN / "query_2gpu.csv").read_text().splitlines()[0]
    fake_bin("nvidia-smi", script=f"echo '{partial}'\nsleep 600\n")
    ctx = ctx_for(sysroot, timeout=1.0)
    start = time.monotonic()
    out = nvidia.probe(ctx)
    assert time.monotonic() - start < 10
    f = weighed(out)
    assert out.status == "timeout"
    assert out.error == "nvidia-smi did not answer in 1 s"
    assert f.smi_state == "timeout"
    assert [g.name for g in f.gpus] == ["NVIDIA GeForce RTX 4070"]  # what it printed before hanging
    assert any(r.status == "timeout" and partial in r.stdout for r in ctx.system.record)


def test_probe_hanging_table_after_good_query(fake_bin, sysroot, tmp_path):
    script = smi_script(tmp_path, query=(SYN / "query_2gpu.csv").read_text()).replace('"") cat', '"") head -4 {}; sleep 600; cat'.format(REAL / "c14-rtx4070-driver550-linux" / "nvidia-smi.txt"))
    fake_bin("nvidia-smi", script=script)
    out = nvidia.probe(ctx_for(sysroot, timeout=1.0))
    f = weighed(out)
    assert out.status == "timeout" and "did not answer in 1 s" in (out.error or "")
    assert len(f.gpus) == 2 and f.driver_version == "550.40.07"
    assert f.smi_version == "550.40.07"  # the banner arrived before the hang


def test_probe_facts_fit_the_report_schema_and_round_trip(fake_bin, sysroot, tmp_path, fake_pynvml):
    import jsonschema

    from stackdoctor.model.facts import from_data, to_data

    fake_bin("nvidia-smi", script=smi_script(tmp_path, query=(SYN / "query_2gpu.csv").read_text(), list_text=(SYN / "list_2gpu.txt").read_text(), table=(SYN / "table_r580.txt").read_text()))
    env = fake_pynvml({"gpus": [{"name": "NVIDIA GeForce RTX 4070", "uuid": "GPU-5c3b0e1f-0000-1111-2222-333344445555", "reasons": 0x4, "cc": "raise:GpuIsLost"}]})
    env["PATH"] = os.environ["PATH"]
    facts = nvidia.probe(ctx_for(sysroot, env, use_nvml=True)).facts["nvidia"]
    data = json.loads(json.dumps(to_data(facts)))
    schema = json.loads((Path(nvidia.__file__).resolve().parents[2] / "schemas" / "report.schema.json").read_text())
    jsonschema.validate(data, {"$defs": schema["$defs"], "$ref": "#/$defs/NvidiaFacts"})
    assert from_data(NvidiaFacts, data) == facts
    assert facts.gpus[0].errors["compute_capability"].startswith("nvmlDeviceGetCudaComputeCapability")
    # NVML failed on the capability, so the query's value fills it, and says where it came from
    assert (facts.gpus[0].compute_capability, facts.gpus[0].sources["compute_capability"]) == ("8.9", "nvidia-smi --query-gpu")


# ---------------------------------------------------------------------------- the kernel module's GPU list (/proc)


@pytest.mark.parametrize(
    "case, want",
    [
        # tabs between key and value (canonical/snapd PR 14893)
        ("r-proc-nvidia-gpus-information-l4-snapd-14893", ("0000:70:00.0", "NVIDIA L4", "GPU-3291dfa4-fcc4-0110-615b-c894a0d7c689", 0, "95.04.65.00.13", False)),
        # an older driver: no Device Minor, no Excluded line (canonical/lxd issue 3950)
        ("r-proc-nvidia-gpus-information-gtx650-lxd-3950", ("0000:04:00.0", "GeForce GTX 650", "GPU-e3f822b9-8c5f-95a5-b379-8dfdeefd7758", None, "80.07.35.00.80", None)),
        # R535: GPU Firmware line, sixth GPU of its machine
        ("r-proc-nvidia-gpus-information-h100-535", ("0000:62:00.0", "NVIDIA H100 80GB HBM3", "GPU-9221d5d1-b60b-a624-bf14-0a1819cfda3b", 5, "96.00.99.00.01", False)),
        # R580, open module, tabs again (the project's GPU machine)
        ("local-h200-driver580-open-proc-gpus", ("0000:00:06.0", "NVIDIA H200", "GPU-51a35715-0f67-e401-1003-89c33c5360ca", 0, "96.00.a5.00.1a", False)),
    ],
    ids=["l4-tabs", "gtx650-old", "h100-r535", "h200-r580-own-capture"],
)
def test_parse_proc_gpu_information_real(case, want):
    g = nvidia.parse_proc_gpu_information((REAL / case / "information.txt").read_text())
    assert g is not None
    assert (g.bus_id, g.name, g.uuid, g.device_minor, g.video_bios, g.excluded) == want


def test_parse_proc_gpu_information_uninitialised_gpu_has_no_uuid():
    # the question-mark form a GPU shows before the driver initialised it (a VM guest in a public forum post)
    text = (REAL / "r-proc-nvidia-gpus-information-gtx650-lxd-3950" / "information.txt").read_text()
    text = text.replace("GPU-e3f822b9-8c5f-95a5-b379-8dfdeefd7758", "GPU-????????-????-????-????-????????????").replace("80.07.35.00.80", "??.??.??.??.??")
    g = nvidia.parse_proc_gpu_information(text)
    assert g is not None and g.uuid is None and g.video_bios is None and g.name == "GeForce GTX 650"
    assert nvidia.parse_proc_gpu_information("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.40.07") is None


@pytest.mark.skipif(os.name == "nt", reason="the PCI address directory names hold colons")
def test_probe_reads_every_proc_gpu_without_any_tool(sysroot, tmp_path):
    """No nvidia-smi, no NVML: the kernel module's files still give the driver and every GPU, with the file as source."""
    for case, bus in (("r-proc-nvidia-gpus-information-h100-535", "0000:62:00.0"), ("r-proc-nvidia-gpus-information-l4-snapd-14893", "0000:70:00.0")):
        d = sysroot / "proc/driver/nvidia/gpus" / bus
        d.mkdir(parents=True)
        (d / "information").write_text((REAL / case / "information.txt").read_text())
    (sysroot / "proc/driver/nvidia/gpus/0000:99:00.0").mkdir(parents=True)  # a directory without its file: skipped
    empty = tmp_path / "emptybin"
    empty.mkdir()
    f = weighed(nvidia.probe(ctx_for(sysroot, {"PATH": str(empty)})))
    # no tool listed a GPU: the report's GPUs are the kernel module's, marked as reconcile's (a replay derives them again)
    assert f.smi_state == "absent" and [g.name for g in f.gpus] == ["NVIDIA H100 80GB HBM3", "NVIDIA L4"]
    assert all(g.sources["index"].startswith("reconcile: ") for g in f.gpus)
    assert [(g.bus_id, g.name, g.device_minor) for g in f.proc_gpus] == [("0000:62:00.0", "NVIDIA H100 80GB HBM3", 5), ("0000:70:00.0", "NVIDIA L4", 0)]
    assert f.proc_gpus[0].source == "/proc/driver/nvidia/gpus/0000:62:00.0/information"
    assert f.kernel_module_version == "565.57.01"
