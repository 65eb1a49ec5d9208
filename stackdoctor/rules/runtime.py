"""Rules about what torch sees when it runs: the GPU unavailable, hidden, shadowed libraries, MPS, XPU."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stackdoctor import accelerators
from stackdoctor.accelerators.apple import is_mac, runs_x86
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import amd_gpus, built_for, imports, nvidia_gpus, python_exe, read_only, release, torch_found_no_driver
from stackdoctor.versions import release as vt


def visible_count(value: str, gpus: Sequence[Any]) -> int:
    """How many devices a CUDA_VISIBLE_DEVICES-style value leaves (CUDA stops at the first invalid entry)."""
    v = value.strip()
    if v == "" or v in ("-1", "NoDevFiles", "none", "void"):
        return 0
    seen: list[int] = []
    for tok in (x.strip() for x in v.split(",")):
        if re.fullmatch(r"-?\d+", tok):
            i = int(tok)
            if i < 0 or i >= len(gpus) or i in seen:
                break
            seen.append(i)
        elif tok.startswith(("GPU-", "MIG-")):
            if tok.startswith("MIG-"):
                seen.append(-len(seen) - 1)
                continue
            hit = [k for k, g in enumerate(gpus) if (getattr(g, "uuid", None) or "").startswith(tok)]
            if not hit:
                if not any(getattr(g, "uuid", None) for g in gpus):  # uuids unknown to the facts: cannot judge, count it
                    seen.append(-len(seen) - 1)
                    continue
                break
            seen.append(hit[0])
        else:
            break
    return len(seen)


@rule("cuda-visible-devices-hides-all", severity="fail", layer="runtime")
def cuda_visible_devices_hides_all(ctx: Ctx) -> None:
    env, r = ctx.facts.environment, ctx.facts.rocm
    # the GPUs the driver gives out, as the view joined them: the tools' list, else the kernel module's
    # (/proc/driver/nvidia/gpus), so a container without nvidia-smi, or the fast path, judges the variable the same way torch would
    listed: Sequence[Any] = ctx.facts.driven("nvidia")
    where = "nvidia.gpus"
    if "CUDA_VISIBLE_DEVICES" in env and listed and visible_count(env["CUDA_VISIBLE_DEVICES"], listed) == 0:
        ctx.add(facts=["environment.CUDA_VISIBLE_DEVICES", where], var="CUDA_VISIBLE_DEVICES", value=env["CUDA_VISIBLE_DEVICES"], count=len(listed))
    elif "CUDA_VISIBLE_DEVICES" in env and not listed and _torch_counts_none_under_a_driver(ctx):
        # no tool or kernel list to count against: torch itself counted 0 devices while its runtime reached a driver
        t = ctx.facts.torch
        ctx.add(
            detail="torch_only",
            facts=["environment.CUDA_VISIBLE_DEVICES", "torch.device_count", "torch.driver_api_version", "torch.cuda_error"],
            var="CUDA_VISIBLE_DEVICES",
            value=env["CUDA_VISIBLE_DEVICES"],
            count="?",
            driver_cuda=ctx.facts.runtime("nvidia").value or "?",
            error=t.cuda_error or "-",
        )
    for var in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES"):
        if var in env and r.gpus and visible_count(env[var], r.gpus) == 0:
            ctx.add(facts=[f"environment.{var}", "rocm.gpus"], var=var, value=env[var], count=len(r.gpus))


_XPU_INIT = re.compile(r"Failed to initialize XPU devices|XPU device count is zero|No XPU devices are available", re.I)
_NO_DEVICE = re.compile(r"No CUDA GPUs are available|no CUDA-capable device is detected|cudaErrorNoDevice", re.I)


def _torch_counts_none_under_a_driver(ctx: Ctx) -> bool:
    """A CUDA torch that ran, reached a driver (its runtime's driver CUDA level, or another witness) and counted
    no device, with nothing said but "no device": what a device-hiding variable does (cudaErrorNoDevice)."""
    f, t = ctx.facts, ctx.facts.torch
    if not imports(t) or accelerators.build_kind(t) != "cuda" or t.cuda_available is not False or (t.device_count or 0) != 0:
        return False
    if torch_found_no_driver(t) or (t.cuda_error and not _NO_DEVICE.search(t.cuda_error)):
        return False
    return (t.driver_api_version or 0) > 0 or f.runtime("nvidia").value is not None or f.driver("nvidia").value is not None


_SHADOW_DIR = re.compile(r"(/cuda[^/]*/|/cuda$|/cuda[^/]*$|cudnn|nccl|/conda[^/]*/|/miniconda|/anaconda|/mambaforge|/miniforge|/envs/)", re.I)


@rule("lib-path-shadowing", severity="fail", layer="runtime")
def lib_path_shadowing(ctx: Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    if f.platform.system not in (None, "Linux"):
        return
    entries = [e for e in f.environment.get("LD_LIBRARY_PATH", "").split(":") if e]
    bad = _shadowing_dirs(ctx, entries)
    if _predicted_shadow(ctx, entries):
        return
    err = t.import_error or t.cuda_error or ""
    symptom = re.search(r"undefined symbol: __nvJitLink\w*|lib(cudnn|cublas|cusparse|nvJitLink|nccl)[\w.]*: cannot open shared object file", err)
    bundled = accelerators.build_kind(t) == "cuda" and any(k.startswith("nvidia-") for k in t.distributions)
    if not bad or not (bundled or symptom):
        return
    keep = [e for e in entries if e not in bad]
    ctx.add(
        severity="fail" if symptom else "warn",
        detail="symptom" if symptom else "default",
        facts=["environment.LD_LIBRARY_PATH", "torch.distributions"],
        fix_text=f"export LD_LIBRARY_PATH={':'.join(keep)}" if keep else "unset LD_LIBRARY_PATH",
        dirs=", ".join(bad),
        error=symptom.group(0) if symptom else "",
    )


def _shadowing_dirs(ctx: Ctx, entries: list[str]) -> list[str]:
    """The LD_LIBRARY_PATH entries that may hold another copy of torch's CUDA libraries (a toolkit, conda's lib)."""
    f = ctx.facts
    conda_prefix = f.environment.get("CONDA_PREFIX")
    bad = [e for e in entries if _SHADOW_DIR.search(e + "/") or (conda_prefix and e.rstrip("/").startswith(conda_prefix.rstrip("/") + "/lib"))]
    if f.platform.is_wsl:
        bad = [e for e in bad if not e.startswith("/usr/lib/wsl")]
    return bad


def _predicted_shadow(ctx: Ctx, entries: list[str]) -> bool:
    """torch read from its files only, and the loader would take a copy of one of its libraries from LD_LIBRARY_PATH
    first (an import that ran says what happened itself): the finding, and True."""
    t = ctx.facts.torch
    shadowed = next((p for p in t.linkage if p.kind == "shadowed"), None) if read_only(t) else None
    if shadowed is None:
        return False
    where = next((e for e in entries if shadowed.library.startswith(e.rstrip("/") + "/")), None)
    keep = [e for e in entries if e != where]
    ctx.add(
        severity="fail",
        detail="predicted",
        facts=["environment.LD_LIBRARY_PATH", "torch.linkage"],
        fix_text=f"export LD_LIBRARY_PATH={':'.join(keep)}" if keep else "unset LD_LIBRARY_PATH",
        dirs=where or shadowed.library.rsplit("/", 1)[0],
        lib=shadowed.library,
        needed_by=shadowed.needed_by.rsplit("/", 1)[-1],
        wheel_copy=shadowed.detail or "-",
    )
    return True


# Codes that explain why torch cannot use the GPU: cuda-unavailable points at the first one found.
CAUSES = (
    "driver-missing",
    "driver-library-mismatch",
    "driver-too-old",
    "cuda-visible-devices-hides-all",
    "container-no-gpu",
    "wsl-driver",
    "rocm-kfd-permission",
    "amdgpu-not-loaded",
    "gpu-lost",
    "torch-backend-mismatch",
    "jetson-wrong-wheel",
    "gpu-arch-unsupported",
    "rocm-gfx-unsupported",
)


@rule("cuda-unavailable", severity="fail", layer="runtime", defers_to=CAUSES)
def cuda_unavailable(ctx: Ctx) -> None:
    f, t = ctx.facts, ctx.facts.torch
    kind = built_for(f)
    if kind not in ("cuda", "rocm") or t.cuda_available is not False:
        return
    if kind == "cuda":
        nv = accelerators.by_name("nvidia")
        seen = (nv is not None and nv.present(f.facts)) or f.jetson.is_jetson or f.runtime("nvidia").value is not None
        if not seen:
            return
    if kind == "rocm" and not amd_gpus(f):
        return
    causes = [c for c in CAUSES if ctx.has(c)]
    key = "explained" if causes else "default"
    err = (t.cuda_error or "").strip()
    if not causes and "too old" in err.lower():
        key = "too_old"
    ctx.add(
        detail=key,
        fix=key,
        facts=["torch.cuda_available", "torch.cuda_error"],
        torch=t.version,
        error=err or "-",
        causes=", ".join(causes),
        explain_cmd=f"stackdoctor explain {causes[0]}" if causes else "",
        python=python_exe(f),
    )


@rule("xpu-unavailable", severity="fail", layer="runtime", defers_to=("torch-backend-mismatch",))
def xpu_unavailable(ctx: Ctx) -> None:
    """An XPU build on a machine with an Intel GPU the build targets, but torch.xpu.is_available() is False."""
    f, t = ctx.facts, ctx.facts.torch
    intel = accelerators.by_name("intel")
    if built_for(f) != "xpu" or t.xpu_available is not False or intel is None:
        return
    # torch's own words that its XPU runtime found no device to initialise (c10/xpu/XPUFunctions.cpp: "Failed to
    # initialize XPU devices" from torch 2.6 on, "XPU device count is zero!" before): with an Intel GPU here, the
    # driver / Level Zero side, even for a GPU whose family the matrix does not list
    said = bool(_XPU_INIT.search(t.xpu_error or ""))
    if not (intel.usable(f.facts) or (said and intel.present(f.facts))):
        return
    if ctx.has("torch-backend-mismatch"):
        return
    ctx.add(
        detail="default",
        facts=["torch.xpu_available", "torch.xpu_error", "intel.gpus"],
        torch=t.version,
        gpus=", ".join(f"Intel {g.name or g.device_id} ({g.driver or 'no driver'})" for g in f.intel.gpus if g.xpu or not intel.usable(f.facts)) or "-",
        error=t.xpu_error or "-",
        python=python_exe(f),
        os=f.platform.os_id or f.platform.system or "?",
    )


@rule("mps-unavailable", severity="fail", layer="runtime")
def mps_unavailable(ctx: Ctx) -> None:
    f, t, a = ctx.facts, ctx.facts.torch, ctx.facts.apple
    if not is_mac(f.facts) or not t.installed or t.mps_available is not False:
        return
    rel = release(ctx, t.version)
    mps_floor = getattr(rel, "mps_min_macos", None) if rel is not None else None
    if a.rosetta or runs_x86(f.facts) and a.arch == "arm64":
        key = "rosetta"
    elif t.mps_built is False:
        key = "not_built"
    elif mps_floor and a.macos_version and vt(a.macos_version) < vt(mps_floor):
        key = "old_macos"
    elif a.arch == "x86_64" or (a.chip and "Intel" in a.chip):
        return  # Intel Macs have no MPS in current torch: not a problem to fix
    else:
        key = "default"
    older = None
    if key == "old_macos" and ctx.matrix is not None:
        for r in ctx.matrix.releases:
            if r.mps_min_macos and vt(a.macos_version) >= vt(r.mps_min_macos):
                older = str(r.version)
                break
    ctx.add(
        detail=key,
        fix=key if (key != "old_macos" or older) else "old_macos_no_torch",
        facts=["torch.mps_available", "torch.mps_built", "apple.macos_version", "apple.rosetta"],
        torch=t.version,
        macos=a.macos_version or "?",
        floor=mps_floor or "?",
        older=older or "",
        python=python_exe(f),
    )


__all__ = ["CAUSES", "nvidia_gpus", "visible_count"]
