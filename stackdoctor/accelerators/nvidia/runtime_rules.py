"""torch.cuda's own findings (NVIDIA's CUDA, and AMD's ROCm where torch answers through torch.cuda): GPUs hidden by
CUDA_VISIBLE_DEVICES, CUDA libraries shadowed by LD_LIBRARY_PATH, an error number from the CUDA / HIP runtime, and
torch.cuda unavailable, with the finding that explains it. They were rules/runtime.py's and keep its group (``runtime``)
and their places in the run (imported by :mod:`stackdoctor.accelerators.nvidia.rules`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stackdoctor import kinds
from stackdoctor.accelerators.nvidia.rule_helpers import torch_found_no_driver
from stackdoctor.core import shell
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import built_for, imports, install_fix, python_exe, read_only, visible_count


# the runtime layer's torch.cuda findings, in their places when they were rules/runtime.py's: after requirements-ok
@rule("cuda-visible-devices-hides-all", severity="fail", layer="runtime", group="runtime", after="requirements-ok")
def cuda_visible_devices_hides_all(ctx: Ctx) -> None:
    env = ctx.view.facts.environment
    # the GPUs the driver gives out, as the view joined them: the tools' list, else the kernel module's
    # (/proc/driver/nvidia/gpus), so a container without nvidia-smi, or the fast path, judges the variable the same way torch would
    listed: Sequence[Any] = ctx.view.driven("nvidia")
    where = "nvidia.gpus"
    if "CUDA_VISIBLE_DEVICES" in env and listed and visible_count(env["CUDA_VISIBLE_DEVICES"], listed) == 0:
        ctx.add(facts=["environment.CUDA_VISIBLE_DEVICES", where], var="CUDA_VISIBLE_DEVICES", value=env["CUDA_VISIBLE_DEVICES"], count=len(listed))
    elif "CUDA_VISIBLE_DEVICES" in env and not listed and _torch_counts_none_under_a_driver(ctx):
        # no tool or kernel list to count against: torch itself counted 0 devices while its runtime reached a driver
        t = ctx.view.facts.torch
        ctx.add(
            detail="torch_only",
            facts=["environment.CUDA_VISIBLE_DEVICES", "torch.device_count", "torch.driver_api_version", "torch.cuda_error"],
            var="CUDA_VISIBLE_DEVICES",
            value=env["CUDA_VISIBLE_DEVICES"],
            count="?",
            driver_cuda=ctx.view.runtime("nvidia").value or "?",
            error=t.cuda_error or "-",
        )
    for a in kinds.ALL:  # another kind's variables that hide its GPUs from torch.cuda (ROCm's HIP_/ROCR_VISIBLE_DEVICES)
        a.hidden_devices(ctx)


_NO_DEVICE = re.compile(r"No CUDA GPUs are available|no CUDA-capable device is detected|cudaErrorNoDevice", re.I)


def _torch_counts_none_under_a_driver(ctx: Ctx) -> bool:
    """A CUDA torch that ran, reached a driver (its runtime's driver CUDA level, or another witness) and counted
    no device, with nothing said but "no device": what a device-hiding variable does (cudaErrorNoDevice)."""
    f, t = ctx.view, ctx.view.facts.torch
    nvidia = kinds.by_name("nvidia")  # the variable is CUDA's: asked of NVIDIA's kind
    if not imports(t) or nvidia is None or not nvidia.targeted(kinds.build_kind(t)) or t.cuda_available is not False or (t.device_count or 0) != 0:
        return False
    if torch_found_no_driver(t) or (t.cuda_error and not _NO_DEVICE.search(t.cuda_error)):
        return False
    return (t.driver_api_version or 0) > 0 or f.runtime("nvidia").value is not None or f.driver("nvidia").value is not None


_SHADOW_DIR = re.compile(r"(/cuda[^/]*/|/cuda$|/cuda[^/]*$|cudnn|nccl|/conda[^/]*/|/miniconda|/anaconda|/mambaforge|/miniforge|/envs/)", re.I)


@rule("lib-path-shadowing", severity="fail", layer="runtime", group="runtime", after="cuda-visible-devices-hides-all")
def lib_path_shadowing(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    if f.facts.platform.system not in (None, "Linux"):
        return
    entries = [e for e in f.facts.environment.get("LD_LIBRARY_PATH", "").split(":") if e]
    bad = _shadowing_dirs(ctx, entries)
    if _predicted_shadow(ctx, entries):
        return
    err = t.import_error or t.cudnn_error or t.cuda_error or ""
    symptom = re.search(r"undefined symbol: __nvJitLink\w*|lib(cudnn|cublas|cusparse|nvJitLink|nccl)[\w.]*: cannot open shared object file"
                        r"|cuDNN version (?:incompatibility|mismatch): PyTorch was compiled\s+against \S+(?: \S+)*? but (?:found runtime version|linked against) [\d(), ]+", err)
    bundled = kinds.build_kind(t) == "cuda" and any(k.startswith("nvidia-") for k in t.distributions)
    if symptom and symptom.group(0).startswith("cuDNN") and not bad:
        _torch_said_shadow(ctx, entries, symptom.group(0))  # torch's own words: another cuDNN was loaded first
        return
    if not bad or not (bundled or symptom):
        return
    keep = [e for e in entries if e not in bad]
    ctx.add(
        severity="fail" if symptom else "warn",
        detail="symptom" if symptom else "default",
        facts=["environment.LD_LIBRARY_PATH", "torch.distributions"],
        fix_text=shell.export({"LD_LIBRARY_PATH": ":".join(keep)}) if keep else "unset LD_LIBRARY_PATH",
        dirs=", ".join(bad),
        error=symptom.group(0) if symptom else "",
    )


def _torch_said_shadow(ctx: Ctx, entries: list[str], said: str) -> None:
    """torch found another cuDNN than the one it was built with, and no LD_LIBRARY_PATH entry stackdoctor saw
    explains it (the variable was not recorded, or names no CUDA folder): torch's words are the witness."""
    t = ctx.view.facts.torch
    ctx.add(
        severity="fail",
        detail="torch_said",
        facts=["torch.cudnn_error" if t.cudnn_error else "torch.cuda_error", "environment.LD_LIBRARY_PATH"],
        fix_text="unset LD_LIBRARY_PATH",  # torch needs none of its folders (the wheel's RUNPATH finds its own cuDNN)
        error=said,
        dirs=", ".join(entries) or "-",
    )


def _shadowing_dirs(ctx: Ctx, entries: list[str]) -> list[str]:
    """The LD_LIBRARY_PATH entries that may hold another copy of torch's CUDA libraries (a toolkit, conda's lib)."""
    f = ctx.view
    conda_prefix = f.facts.environment.get("CONDA_PREFIX")
    bad = [e for e in entries if _SHADOW_DIR.search(e + "/") or (conda_prefix and e.rstrip("/").startswith(conda_prefix.rstrip("/") + "/lib"))]
    if f.facts.platform.is_wsl:
        bad = [e for e in bad if not e.startswith("/usr/lib/wsl")]
    return bad


def _predicted_shadow(ctx: Ctx, entries: list[str]) -> bool:
    """The loader would take a copy of one of torch's libraries from LD_LIBRARY_PATH ahead of the wheel's own (read
    from the files, on both paths): the finding, naming both copies and their versions, and True."""
    t = ctx.view.facts.torch
    shadowed = next((p for p in t.linkage if p.kind == "shadowed"), None)
    if shadowed is None:
        return False
    where = next((e for e in entries if shadowed.library.startswith(e.rstrip("/") + "/")), None)
    keep = [e for e in entries if e != where]
    found, wheel = _version_word(shadowed.found_version), _version_word(shadowed.wheel_version)
    same = found is not None and found == wheel
    ctx.add(
        severity="warn" if same and not read_only(t) and not t.import_error else "fail",
        detail="predicted" if read_only(t) else "files",
        facts=["environment.LD_LIBRARY_PATH", "torch.linkage"] + (["torch.requires"] if t.requires.get("torch") else []),
        fix_text=shell.export({"LD_LIBRARY_PATH": ":".join(keep)}) if keep else "unset LD_LIBRARY_PATH",
        dirs=where or shadowed.library.rsplit("/", 1)[0],
        lib=shadowed.library,
        needed_by=shadowed.needed_by.rsplit("/", 1)[-1],
        wheel_copy=shadowed.detail or "-",
        found_version=shadowed.found_version or "?",
        wheel_version=shadowed.wheel_version or "?",
        pinned=_pin_of(t.requires.get("torch", []), shadowed.wheel_version) or "-",
    )
    return True


def _version_word(said: str | None) -> str | None:
    """``9.1.0.70 (nvidia_cudnn_cu12-9.1.0.70.dist-info)`` -> ``9.1.0.70``."""
    return said.split(" ", 1)[0] if said else None


def _pin_of(requires: Sequence[str], wheel_version: str | None) -> str | None:
    """torch's Requires-Dist line for the distribution whose dist-info ``wheel_version`` names (``nvidia-cudnn-cu12==9.1.0.70``)."""
    m = re.search(r"\(([A-Za-z0-9_.]+)-[^-]+\.dist-info\)", wheel_version or "")
    if m is None:
        return None
    want = re.sub(r"[-_.]+", "-", m.group(1)).lower()
    for line in requires:
        req = line.split(";", 1)[0].strip()
        name = re.match(r"[A-Za-z0-9_.\-]+", req)
        if name and re.sub(r"[-_.]+", "-", name.group(0)).lower() == want:
            return req
    return None


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
    "runtime-error-code",
)


_API_WORDS = {"cuda-runtime": "CUDA runtime", "cuda-driver": "CUDA driver", "hip": "HIP runtime"}
# the report's layer for the layer an error row points to (compat_matrix/runtime_errors.yaml's `layer`): a device's
# error marks the GPU, a library's (a stub libcuda, a build without code for the GPU) the runtime that loaded it as
# lib-path-shadowing does; the fabric manager and the program's own call are layers of their own (never the driver's)
ROW_LAYER = {"driver": "driver", "device": "gpu", "library": "runtime", "runtime": "runtime", "fabric-manager": "fabric-manager", "user": "user"}
# the findings that already say what an error number's row says (the number is their evidence too)
_SAID_BY = {
    "arch": ("gpu-arch-unsupported", "rocm-gfx-unsupported"),
    "driver-upgrade": ("driver-too-old",),
    "no-device": ("cuda-visible-devices-hides-all", "container-no-gpu"),
    "driver-mismatch": ("driver-library-mismatch",),
}


@rule(
    "runtime-error-code", severity="fail", layer="driver", group="runtime", after="lib-path-shadowing",
    defers_to=("gpu-arch-unsupported", "rocm-gfx-unsupported", "driver-too-old", "cuda-visible-devices-hides-all", "container-no-gpu", "driver-library-mismatch"),
)
def runtime_error_code(ctx: Ctx) -> None:
    """torch's CUDA / HIP runtime answered with an error number (read from its text in any wording, judged from the
    matrix's ``runtime_errors`` row): the layer it points to and its fix. A driver stack that answered is there."""
    f, t = ctx.view, ctx.view.facts.torch
    done: set[tuple[str, str]] = set()
    for e in f.evidence:
        v = e.values
        if e.proves != "runtime-error-code" or (v.get("api", ""), v.get("number", "")) in done:
            continue
        done.add((v.get("api", ""), v.get("number", "")))
        fix_key = v.get("fix") or "unknown"
        if any(ctx.has(code) for code in _SAID_BY.get(fix_key, ())):
            continue
        fix_text = install_fix(ctx, exclude=None) if fix_key == "arch" else None
        finding = ctx.add(
            severity="warn" if v.get("layer") == "user" or t.cuda_available else "fail",
            detail=v.get("layer") or "unknown",
            fix=fix_key,
            fix_text=fix_text,
            facts=[e.source, "reconciled.evidence"],
            api=_API_WORDS.get(v.get("api", ""), v.get("api", "")),
            number=v.get("number") or "?",
            name=v.get("name") or "?",
            error=e.line[:300],
            cuda=t.cuda or "?",
            install=fix_text or "",
        )
        finding.layer = ROW_LAYER.get(v.get("layer") or "", "driver")  # an unknown number: the driver stack answered


@rule("cuda-unavailable", severity="fail", layer="runtime", group="runtime", defers_to=CAUSES, after="runtime-error-code")
def cuda_unavailable(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    kind = built_for(f)
    acc = kinds.for_build(kind)
    # a build whose kind torch answers for through torch.cuda (CUDA's, ROCm's HIP), with a device of a kind it
    # targets seen by some witness (a Jetson's iGPU, an NVIDIA driver's CUDA level, an AMD APU too)
    if acc is None or acc.available_field != "cuda_available" or t.cuda_available is not False:
        return
    if not any(a.targeted(kind) and a.reached(f) for a in kinds.ALL):
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


__all__ = ["CAUSES", "ROW_LAYER"]
