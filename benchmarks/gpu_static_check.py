"""On a machine with an NVIDIA GPU: the driver's CUDA level asked of libcuda, and torch read from its files.

Standard library only, from a checkout (``python3 benchmarks/gpu_static_check.py [TORCH_PYTHON]``), so it runs
on a bare GPU machine where stackdoctor's dependencies are not installed. It prints one JSON document:

- ``nvidia_smi``: what ``nvidia-smi`` says (driver, the CUDA level in its banner, the GPUs);
- ``cudriver``: ``cuDriverGetVersion`` in a child (``stackdoctor.accelerators.nvidia.cudriver``), with and without ``cuInit``,
  and how long each took;
- ``nvidia_probe``: the NVIDIA probe's facts, where ``observed["cuda_driver_version"]`` holds every witness
  (NVML, nvidia-smi, cuDriverGetVersion), and its duration;
- ``torch`` (when an interpreter with torch is given or found): ``read_static_torch`` on its site directories
  against what the imported torch says of itself (``torch.cuda.get_arch_list()``, ``_cuda_getArchFlags()``),
  timed both ways.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stackdoctor.accelerators.nvidia import cudriver
from stackdoctor.accelerators.nvidia import probe as nvidia
from stackdoctor.model.probing import ProbeContext, Target
from stackdoctor.system import System

ASK_TORCH = r"""
import json, sys, time
t = time.perf_counter()
import torch
took = time.perf_counter() - t
sys.path.insert(0, sys.argv[1])
import sd_target
flags = getattr(torch._C, "_cuda_getArchFlags", None)
print(json.dumps({"version": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
                  "available": torch.cuda.is_available(), "arch_list": torch.cuda.get_arch_list(),
                  "arch_flags": flags() if flags else None, "import_s": round(took, 3),
                  "location": torch.__path__[0], "site_dirs": sd_target.site_dirs()}))
"""


def section(out: dict, name: str, fn) -> None:
    try:
        out[name] = fn()
    except Exception as exc:  # noqa: BLE001  (a device check reports what failed and goes on)
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}


def smi() -> dict:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"error": "no nvidia-smi on PATH"}
    q = subprocess.run([exe, "--query-gpu=name,driver_version,compute_cap", "--format=csv,noheader"], capture_output=True, text=True, timeout=60, check=False)
    banner = subprocess.run([exe], capture_output=True, text=True, timeout=60, check=False)
    line = next((ln for ln in banner.stdout.splitlines() if "CUDA Version" in ln), "")
    return {"query": q.stdout.strip().splitlines(), "banner": line.strip(" |")}


def driver() -> dict:
    out = {}
    for label, init in (("with_cuinit", True), ("version_only", False)):
        t = time.perf_counter()
        res = cudriver.query_driver_cuda(System.from_env(), sys.executable, 30, init=init)
        out[label] = {**res.__dict__, "seconds": round(time.perf_counter() - t, 3)}
    return out


def probe() -> dict:
    t = time.perf_counter()
    po = nvidia.probe(ProbeContext(System.from_env(), Target(sys.executable, "self"), timeout_s=30))
    n = po.facts["nvidia"]
    return {"status": po.status, "error": po.error, "seconds": round(time.perf_counter() - t, 3),
            "driver_version": n.driver_version, "cuda_driver_version": n.cuda_driver_version, "sources": n.sources,
            "observed": n.observed, "libcuda_paths": n.libcuda_paths, "nvml_state": n.nvml_state, "smi_state": n.smi_state,
            "gpus": [(g.name, g.compute_capability) for g in n.gpus]}


def torch_both_ways(python: str) -> dict:
    from stackdoctor.probes.torch_static import read_static_torch

    worker = str(Path(__file__).resolve().parents[1] / "stackdoctor" / "_worker")
    t = time.perf_counter()
    res = subprocess.run([python, "-c", ASK_TORCH, worker], capture_output=True, text=True, timeout=300, check=False)
    wall = time.perf_counter() - t
    if res.returncode != 0:
        return {"error": (res.stderr.strip().splitlines() or ["?"])[-1]}
    said = json.loads(res.stdout.strip().splitlines()[-1])
    t = time.perf_counter()
    st = read_static_torch(System(), said["site_dirs"])
    static_s = time.perf_counter() - t
    files = st.gfx_list if st.hip else st.arch_list
    return {"imported": {k: v for k, v in said.items() if k != "site_dirs"}, "import_wall_s": round(wall, 3),
            "static": {"version": st.version, "cuda": st.cuda, "hip": st.hip, "arch_list": files, "arch_extra": st.arch_extra,
                       "runtime": st.runtime, "errors": st.errors, "location": st.location,
                       "libraries": [(lib.path.rsplit("/", 1)[-1], lib.containers, lib.entries, lib.error) for lib in st.libraries]},
            "static_s": round(static_s, 3),
            "agree": sorted(files) == sorted(said["arch_list"] or (said["arch_flags"] or "").split())}


def main() -> None:
    out: dict = {"python": sys.version.split()[0]}
    section(out, "nvidia_smi", smi)
    section(out, "cudriver", driver)
    section(out, "nvidia_probe", probe)
    candidates = sys.argv[1:] or [p for p in (shutil.which("python3"), sys.executable) if p]
    for py in candidates:
        probe_torch = subprocess.run([py, "-c", "import importlib.util as u; print(bool(u.find_spec('torch')))"], capture_output=True, text=True, check=False)
        if probe_torch.stdout.strip() == "True":
            section(out, "torch", lambda py=py: torch_both_ways(py))
            out["torch_python"] = py
            break
    else:
        out["torch"] = {"error": "no interpreter with torch: " + ", ".join(candidates)}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
