"""Windows and macOS through the real probes, here on Linux, with no monkeypatching.

The OS is injected (``System(host_override=Host(...))``) or named by a captured tree's
``/.stackdoctor/host.json``; Windows files live under the sysroot as ``<root>/C/...``; fake tools
replay outputs recorded on real machines (``tests/fixtures/real/{w01,w02,w03,m01}-*``, each with
its ``source.md``), placed where Windows keeps them. The last tests replay whole machines through
the CLI, like a support engineer would."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

import pytest
import yaml
from helpers import machine_env, run_sd

from stackdoctor.accelerators.nvidia import probe as nvidia
from stackdoctor.accelerators.nvidia import toolkit as cuda_toolkit
from stackdoctor.accelerators.nvidia.nvml import parse_nvml_output
from stackdoctor.accelerators.nvidia.probe import find_smi, parse_smi_table
from stackdoctor.matrix import load_matrix
from stackdoctor.model.facts import Facts
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.pipeline.engine import select_target
from stackdoctor.probes import platform as platform_probe
from stackdoctor.probes.platform import parse_windows_version
from stackdoctor.reconcile import reconcile, report_facts
from stackdoctor.system import Host, System

# The replaying tools are /bin/sh scripts placed where Windows keeps its tools; on a real Windows
# runner the live probes run instead (the rest of the suite), so these replays need POSIX.
pytestmark = pytest.mark.posix

REAL = Path(__file__).resolve().parent / "fixtures" / "real"
W01 = REAL / "w01-win10-quadro-rtx8000-tcc-p2000-wddm-442-nvsmi-folder"
W02 = REAL / "w02-win-rtx3050-laptop-560-wddm-driver-model-column"
W03 = REAL / "w03-win-nvcc-11.8-system32-prompt"
M01 = REAL / "m01-macbook-m1-macos-12.7.6-sw_vers"
NVSMI = "C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe"
SYSTEM32_SMI = "C:\\Windows\\System32\\nvidia-smi.exe"
CUDA118 = "C:\\Program Files\\NVIDIA GPU Computing Toolkit\\CUDA\\v11.8"


def derived(case: Path) -> dict:
    """The YAML "Derived facts" of a case's source.md."""
    text = (case / "source.md").read_text(encoding="utf-8")
    return yaml.safe_load(text.split("```yaml", 1)[1].split("```", 1)[0])


def windows_host(**over: str) -> Host:
    vals = {"system": "Windows", "machine": "AMD64", "release": "10", "version": "10.0.19044", "source": "test"}
    vals.update(over)
    return Host(**vals)  # type: ignore[arg-type]


def replay_tool(at: Path, recording: Path) -> Path:
    """A fake tool at ``at`` that prints ``recording`` whatever it is asked (the lead's fake-tool contract)."""
    at.parent.mkdir(parents=True, exist_ok=True)
    cat = shutil.which("cat") or "/bin/cat"  # absolute: the replayed machine's PATH may be empty
    at.write_text(f"#!/bin/sh\nexec {cat} {shlex.quote(str(recording))}\n", encoding="utf-8")
    at.chmod(at.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return at


def place(root: Path, winpath: str, recording: Path) -> Path:
    """Put a replaying tool where ``winpath`` is under the captured tree (``C:\\X`` -> ``<root>/C/X``)."""
    return replay_tool(System(sysroot=str(root), host_override=windows_host()).path(winpath), recording)


def ctx(root: Path, env: dict[str, str], host: Host | None = None, timeout: float = 10.0) -> ProbeContext:
    system = System(sysroot=str(root), env=env, timeout_s=timeout, host_override=host or windows_host())
    return ProbeContext(system=system, target=Target(sys.executable, "self"), timeout_s=timeout, live_driver=False)


def empty_path(tmp_path: Path) -> str:
    d = tmp_path / "emptybin"
    d.mkdir(exist_ok=True)
    return str(d)


# ---------------------------------------------------------------------------- recorded outputs


@pytest.mark.parametrize("case", [W01, W02], ids=["w01", "w02"])
def test_recorded_windows_tables_give_their_facts(case):
    want = derived(case)
    table = parse_smi_table((case / "nvidia-smi.txt").read_text(encoding="utf-8"))
    assert (table.smi_version, table.driver_version, table.cuda_version) == (want["nvidia_smi_version"], want["driver_version"], want["driver_max_cuda"])
    got = [(g.index, g.name, g.bus_id, g.driver_model, g.memory_total_mib) for g in table.gpus]
    assert got == [(g["index"], g["name"], g["bus_id"], g["driver_model"], g["memory_mib"]) for g in want["gpus"]]
    assert all(g.sources["driver_model"] == "nvidia-smi" and g.persistence_mode is None for g in table.gpus)


def test_recorded_windows_nvcc_and_build():
    want = derived(W03)
    assert cuda_toolkit.parse_nvcc_version((W03 / "nvcc-version.txt").read_text()) == (want["nvcc_version"], want["nvcc_build"])
    assert parse_windows_version((W01 / "ver.txt").read_text()) == (derived(W01)["windows_version"], 19044, "10")
    assert parse_windows_version("10.0.22631") == ("10.0.22631", 22631, "11")  # Windows 11's first build is 22000
    assert parse_windows_version("10.0.21999")[2] == "10"
    assert parse_windows_version("6.1.7601") == ("6.1.7601", 7601, None)  # Windows 7: no 10/11 name
    assert parse_windows_version("Linux 6.8") == (None, None, None)


def test_nvml_driver_model_becomes_tcc_or_wddm():
    """NVML's nvmlDeviceGetDriverModel (0 WDDM, 1 WDM = TCC, 2 MCDM), as the worker prints it."""
    doc = {"state": "ok", "device_count": 3, "system": {}, "gpus": [{"index": 0, "driver_model": 1}, {"index": 1, "driver_model": 0},
                                                                   {"index": 2, "driver_model": 2}]}
    gpus = parse_nvml_output(json.dumps(doc)).gpus
    assert [(g.driver_model, g.sources.get("driver_model")) for g in gpus] == [("TCC", "nvml"), ("WDDM", "nvml"), ("MCDM", "nvml")]
    assert parse_nvml_output(json.dumps({**doc, "gpus": [{"index": 0, "driver_model": None}]})).gpus[0].driver_model is None


def test_nvml_worker_asks_for_the_driver_model(tmp_path):
    """The real worker with a minimal pynvml: Windows answers the driver model, Linux NotSupported (left None)."""
    from stackdoctor.accelerators.nvidia.nvml import query_nvml

    pkg = tmp_path / "fake"
    pkg.mkdir()
    (pkg / "pynvml.py").write_text(
        "import os\n"
        "class NVMLError(Exception): pass\n"
        "class NVMLError_NotSupported(NVMLError): pass\n"
        "def nvmlInit(): pass\n"
        "def nvmlShutdown(): pass\n"
        "def nvmlSystemGetDriverVersion(): return '442.92'\n"
        "def nvmlDeviceGetCount(): return 2\n"
        "def nvmlDeviceGetHandleByIndex(i): return i\n"
        "def nvmlDeviceGetName(h): return ['Quadro RTX 8000', 'Quadro P2000'][h]\n"
        "def nvmlDeviceGetDriverModel(h):\n"
        "    if os.environ.get('FAKE_OS') != 'nt': raise NVMLError_NotSupported('Not Supported')\n"
        "    return [[1, 1], [0, 0]][h]\n"
    )
    for fake_os, want in (("nt", ["TCC", "WDDM"]), ("posix", [None, None])):
        env = {**os.environ, "PYTHONPATH": str(pkg), "FAKE_OS": fake_os}
        res = query_nvml(System(env=env), timeout=30)
        assert res.state == "ok", res.error
        assert [g.driver_model for g in res.gpus] == want
        assert all("driver_model" not in g.errors for g in res.gpus)  # NotSupported is not an error


# ---------------------------------------------------------------------------- probes, injected Windows


def test_nvidia_smi_from_the_nvsmi_folder_when_not_on_path(tmp_path):
    """w01 ran nvidia-smi from %ProgramFiles%\\NVIDIA Corporation\\NVSMI: the probe finds it there."""
    root = tmp_path / "win"
    place(root, NVSMI, W01 / "nvidia-smi.txt")
    c = ctx(root, {"PATH": empty_path(tmp_path)})
    assert find_smi(c.system) == (NVSMI, str(root / "C" / "Program Files" / "NVIDIA Corporation" / "NVSMI" / "nvidia-smi.exe"))
    out = nvidia.probe(c)
    f = report_facts(reconcile(Facts(nvidia=out.facts["nvidia"]), load_matrix([]))).nvidia  # the witnesses weighed, as published
    want = derived(W01)
    assert out.status == "ok" and f.smi_state == "ok" and f.smi_path == NVSMI
    assert (f.driver_version, f.cuda_driver_version, f.smi_version) == (want["driver_version"], want["driver_max_cuda"], want["nvidia_smi_version"])
    assert [(g.name, g.driver_model, g.bus_id) for g in f.gpus] == [(g["name"], g["driver_model"], g["bus_id"]) for g in want["gpus"]]
    assert f.kernel_module_version is None and f.libcuda_paths == []  # Linux-only sources are not read on Windows


def test_system32_then_nvsmi_and_path_first(tmp_path, fake_bin):
    """The order a user gets: PATH, then %SystemRoot%\\System32 (DCH drivers), then the NVSMI folder."""
    root = tmp_path / "win"
    place(root, SYSTEM32_SMI, W02 / "nvidia-smi.txt")
    place(root, NVSMI, W01 / "nvidia-smi.txt")
    s = ctx(root, {"PATH": empty_path(tmp_path)}).system
    assert find_smi(s)[0] == SYSTEM32_SMI
    on_path = fake_bin("nvidia-smi", (W02 / "nvidia-smi.txt").read_text())
    s = ctx(root, {"PATH": str(fake_bin.dir)}).system
    assert find_smi(s) == (str(on_path), str(on_path))
    # Windows spells the variable SystemRoot; os.environ there says SYSTEMROOT: both work, and a D: install is found
    place(root, "D:\\WINNT\\System32\\nvidia-smi.exe", W02 / "nvidia-smi.txt")
    s = ctx(root, {"PATH": empty_path(tmp_path), "SYSTEMROOT": "D:\\WINNT"}).system
    assert find_smi(s)[0] == "D:\\WINNT\\System32\\nvidia-smi.exe"
    # not Windows: the Windows folders are never looked at
    linux = ctx(root, {"PATH": empty_path(tmp_path)}, host=Host(system="Linux", source="test")).system
    assert find_smi(linux) is None


def test_cuda_path_toolkit_with_nvcc_exe(tmp_path):
    """%CUDA_PATH%\\bin\\nvcc.exe replaying w03's nvcc; the same folder through %CUDA_PATH_V11_8% and the
    default %ProgramFiles% folder is one toolkit, not three."""
    root = tmp_path / "win"
    place(root, CUDA118 + "\\bin\\nvcc.exe", W03 / "nvcc-version.txt")
    env = {"PATH": empty_path(tmp_path), "CUDA_PATH": CUDA118, "CUDA_PATH_V11_8": CUDA118}
    out = cuda_toolkit.probe(ctx(root, env))
    f = out.facts["cuda_toolkit"]
    assert out.status == "ok"
    assert (f.nvcc_version, f.nvcc_path, f.sources["nvcc_path"]) == ("11.8", CUDA118 + "\\bin\\nvcc.exe", "CUDA_PATH")
    assert [(t.path, t.nvcc_version, t.nvcc_build, t.found_via) for t in f.toolkits] == [(CUDA118 + "\\bin\\nvcc.exe", "11.8", "V11.8.89", "CUDA_PATH")]
    assert f.cuda_home == CUDA118 and f.sources["cuda_home"] == "env:CUDA_PATH"


def test_toolkit_in_the_default_folder_without_cuda_path(tmp_path):
    root = tmp_path / "win"
    place(root, CUDA118 + "\\bin\\nvcc.exe", W03 / "nvcc-version.txt")
    f = cuda_toolkit.probe(ctx(root, {"PATH": empty_path(tmp_path)})).facts["cuda_toolkit"]
    assert f.nvcc_version == "11.8" and f.toolkits[0].found_via == "%ProgramFiles%\\NVIDIA GPU Computing Toolkit\\CUDA"
    assert f.cuda_home is None


def test_windows_platform_facts_and_never_wsl(tmp_path):
    root = tmp_path / "win"
    (root / "usr" / "lib" / "wsl").mkdir(parents=True)  # even a stray WSL marker does not make Windows a WSL
    f = platform_probe.gather(ctx(root, {"PATH": empty_path(tmp_path)}))
    assert (f.system, f.machine, f.os_id, f.os_version, f.os_name) == ("Windows", "AMD64", "windows", "10.0.19044", "Windows 10")
    assert f.is_wsl is False and f.kernel is None and f.libc is None and f.nvidia_pci_devices == []
    # Python before 3.12 says release "10" on Windows 11: the build decides
    f11 = platform_probe.gather(ctx(root, {"PATH": empty_path(tmp_path)}, host=windows_host(version="10.0.22631")))
    assert f11.os_name == "Windows 11" and "22631" in f11.sources["os_name"]
    server = platform_probe.gather(ctx(root, {"PATH": empty_path(tmp_path)}, host=windows_host(release="2022Server", version="10.0.20348")))
    assert server.os_name == "Windows 2022Server"


def test_wsl_is_still_wsl(tmp_path):
    """The Linux side of the distinction: WSL2's kernel makes a Linux host WSL, as before."""
    root = tmp_path / "wsl"
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "osrelease").write_text("5.15.153.1-microsoft-standard-WSL2\n")
    f = platform_probe.gather(ctx(root, {"PATH": empty_path(tmp_path)}, host=Host(system="Linux", machine="x86_64", source="test")))
    assert f.system == "Linux" and f.is_wsl is True and f.wsl_version == 2


def test_venv_target_in_scripts_python_exe(tmp_path):
    """A Windows venv keeps its interpreter in Scripts\\python.exe; os.name "nt" tries it first."""
    venv = tmp_path / "venv"
    (venv / "Scripts").mkdir(parents=True)
    (venv / "Scripts" / "python.exe").symlink_to(sys.executable)
    t = select_target(None, {"VIRTUAL_ENV": str(venv)}, os_name="nt")
    assert (t.python, t.selected_by) == (str(venv / "Scripts" / "python.exe"), "VIRTUAL_ENV")
    (venv / "bin").mkdir()
    (venv / "bin" / "python").symlink_to(sys.executable)
    assert select_target(None, {"VIRTUAL_ENV": str(venv)}, os_name="nt").python.endswith(os.path.join("Scripts", "python.exe"))
    assert select_target(None, {"VIRTUAL_ENV": str(venv)}, os_name="posix").python.endswith(os.path.join("bin", "python"))
    conda = tmp_path / "conda"
    conda.mkdir()
    (conda / "python.exe").symlink_to(sys.executable)
    assert select_target(None, {"CONDA_PREFIX": str(conda)}, os_name="nt") == Target(str(conda / "python.exe"), "CONDA_PREFIX")


def test_windows_paths_map_under_the_sysroot(tmp_path):
    s = System(sysroot=str(tmp_path), host_override=windows_host())
    assert s.path("C:\\Program Files\\NVIDIA Corporation\\NVSMI\\nvidia-smi.exe") == tmp_path / "C" / "Program Files" / "NVIDIA Corporation" / "NVSMI" / "nvidia-smi.exe"
    assert s.path("d:/cuda//v12.4\\bin") == tmp_path / "D" / "cuda" / "v12.4" / "bin"
    assert s.path("/proc/version") == tmp_path / "proc" / "version"
    assert s.ospath.dirname("C:\\CUDA\\v12.4\\bin\\nvcc.exe") == "C:\\CUDA\\v12.4\\bin"
    assert System(host_override=windows_host()).path("C:\\x") == Path("C:\\x")  # no moved root: as it is


# ---------------------------------------------------------------------------- whole machines through the CLI


def capture(root: Path, host: dict) -> Path:
    (root / ".stackdoctor").mkdir(parents=True, exist_ok=True)
    (root / ".stackdoctor" / "host.json").write_text(json.dumps(host))
    return root


def test_recorded_windows_workstation_replays_through_the_cli(tmp_path, fake_bin):
    """w01 end to end: a captured tree whose host.json says Windows 10 (build 19044), nvidia-smi.exe in
    its NVSMI folder replaying the recorded table, nothing on PATH; the real probes give the facts the
    recording shows, on the screen and in the JSON."""
    root = capture(tmp_path / "w01", {"system": "Windows", "machine": "AMD64", "release": "10", "version": "10.0.19044"})
    place(root, NVSMI, W01 / "nvidia-smi.txt")
    env = machine_env(fake_bin.dir, root)
    r = run_sd(["check", "--json", "--no-kernels", "--python", sys.executable], env=env)
    assert r.rc in (0, 1), r.stderr
    facts = r.json()["facts"]
    want = derived(W01)
    p = facts["platform"]
    assert (p["system"], p["machine"], p["os_id"], p["os_version"], p["os_name"], p["is_wsl"]) == ("Windows", "AMD64", "windows", "10.0.19044", "Windows 10", False)
    assert p["sources"]["system"].startswith("file:/.stackdoctor/host.json")
    nv = facts["nvidia"]
    assert (nv["driver_version"], nv["cuda_driver_version"], nv["smi_path"], nv["smi_state"]) == ("442.92", "10.2", NVSMI, "ok")
    assert nv["nvml_state"] == "skipped"  # never the live NVML under a moved root
    gpus = [(g["index"], g["name"], g["driver_model"], g["bus_id"], g["memory_total_mib"]) for g in nv["gpus"]]
    assert gpus == [(g["index"], g["name"], g["driver_model"], g["bus_id"], g["memory_mib"]) for g in want["gpus"]]
    cc = {g["name"]: g["compute_capability"] for g in nv["gpus"]}
    assert cc["Quadro RTX 8000"] in (None, want["compute_capability"]["Quadro RTX 8000"])  # only what the matrix knows
    assert facts["cuda_toolkit"]["nvcc_version"] is None and facts["apple"]["is_macos"] is False
    screen = run_sd(["check", "--no-kernels", "--python", sys.executable], env=env)
    assert screen.rc == r.rc
    assert "NVIDIA 442.92, supports CUDA <= 10.2" in screen.stdout
    assert screen.stdout.count("Quadro RTX 8000") == 2 and "Quadro P2000" in screen.stdout


def test_recorded_windows_laptop_replays_through_the_cli(tmp_path, fake_bin):
    """w02 end to end: nvidia-smi on PATH as recorded, the R560 Driver-Model layout."""
    root = capture(tmp_path / "w02", {"system": "Windows", "machine": "AMD64", "release": "11"})
    fake_bin("nvidia-smi", (W02 / "nvidia-smi.txt").read_text())
    r = run_sd(["check", "--json", "--no-kernels", "--python", sys.executable], env=machine_env(fake_bin.dir, root))
    assert r.rc in (0, 1), r.stderr
    facts = r.json()["facts"]
    nv = facts["nvidia"]
    assert (nv["driver_version"], nv["cuda_driver_version"], nv["smi_version"]) == ("560.78", "12.6", "560.78")
    assert nv["smi_path"].endswith("nvidia-smi") and nv["smi_state"] == "ok"
    assert [(g["name"], g["driver_model"], g["memory_total_mib"], g["power_limit_w"]) for g in nv["gpus"]] == [("NVIDIA GeForce RTX 3050 ...", "WDDM", 6144, 60.0)]
    p = facts["platform"]
    assert (p["system"], p["os_name"], p["os_version"]) == ("Windows", "Windows 11", None)  # the recording shows no build


def test_recorded_mac_replays_through_the_cli(tmp_path, fake_bin):
    """m01 end to end: host.json says an arm64 Darwin, sw_vers replays the recording; sysctl was not
    recorded, so it is absent and the chip stays unknown rather than guessed."""
    if shutil.which("sysctl", path="/usr/bin:/bin"):
        pytest.skip("a real sysctl is on /usr/bin:/bin; it would answer for the replayed Mac")
    root = capture(tmp_path / "m01", {"system": "Darwin", "machine": "arm64"})
    fake_bin("sw_vers", (M01 / "sw_vers.txt").read_text())
    r = run_sd(["check", "--json", "--no-kernels", "--python", sys.executable], env=machine_env(fake_bin.dir, root))
    assert r.rc in (0, 1), r.stderr
    facts = r.json()["facts"]
    want = derived(M01)
    p, a = facts["platform"], facts["apple"]
    assert (p["system"], p["machine"], p["os_id"], p["os_version"], p["os_name"]) == ("Darwin", "arm64", "macos", want["macos_version"], "macOS 12.7.6")
    assert (a["is_macos"], a["macos_version"], a["build"], a["chip"]) == (True, want["macos_version"], want["build"], None)
    assert a["sources"]["macos_version"] == "sw_vers"
    assert facts["nvidia"]["smi_state"] == "absent"
