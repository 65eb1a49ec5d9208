"""NVIDIA's own findings, declared through the seam (:attr:`Nvidia.rules` names this module, so
:mod:`stackdoctor.rules` imports it with every kind's rules): a CUDA build against the NVIDIA driver (too old, or
running by minor-version compatibility), against the GPUs' compute capabilities, against nvcc, and a CUDA build where
no witness sees NVIDIA hardware. Their texts are stackdoctor's own (``stackdoctor/locale/en.yaml``, ``zh.yaml``);
each keeps the group of its layer (``check --list-checks``, ``explain``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stackdoctor import kinds
from stackdoctor import matrix as mx
from stackdoctor.accelerators.nvidia.rule_helpers import nvidia_gpus, nvidia_pci, nvidia_witnesses, torch_found_no_driver, windows_driver
from stackdoctor.core import shell
from stackdoctor.core.versions import public
from stackdoctor.core.versions import release as vt
from stackdoctor.model.facts import NvidiaGpu
from stackdoctor.reconcile import bus_key, user_space_driver
from stackdoctor.rules.core import Ctx, rule
from stackdoctor.rules.helpers import (
    built_for,
    built_for_files,
    container_fix_key,
    gpu_label,
    imports,
    install_fix,
    python_exe,
    read_only,
    sm,
    variant_name,
    variant_row,
    visible_count,
    visible_to_torch,
)
from stackdoctor.rules.ok import layer_ok


def _too_old_verdict(ctx: Ctx) -> tuple[str | None, dict[str, Any]]:
    """("no" | "minor-compat" | "full" | None, values for the texts) for the installed CUDA torch and the driver."""
    f, t = ctx.view, ctx.view.facts.torch
    if built_for_files(f) != "cuda" or not t.cuda or f.facts.jetson.is_jetson:
        return None, {}
    driver = f.driver("nvidia").value
    ceiling = f.runtime("nvidia").value
    row = ctx.matrix.cuda_row(t.cuda) if ctx.matrix is not None else None
    windows = windows_driver(f)
    verdict: str | None = None
    if row is not None and driver:
        verdict = mx.driver_meets(row, driver, windows)
    elif ceiling and vt(ceiling) and vt(t.cuda):
        # no driver version, but the driver's own CUDA level (a tool, or torch's "found version NNNN")
        verdict = "no" if vt(t.cuda)[0] > vt(ceiling)[0] else None  # a newer minor of the same major runs (minor-version compatibility)
    proof = next((e for e in f.evidence if e.proves == "driver-too-old"), None)
    if verdict is None and proof is not None:
        verdict = "no"
    floor, minimum = _driver_floors(row, windows)
    values = dict(
        torch=t.version or "?",
        cuda=t.cuda,
        driver=driver or "?",
        driver_cuda=ceiling or "?",
        floor=floor,
        minimum=minimum,
        os="Windows" if windows else "Linux",
        error=proof.line if proof else (t.cuda_error or ""),
    )
    return verdict, values


def _driver_floors(row: Any, windows: bool) -> tuple[str, str]:
    """(the minor-version-compatibility floor, the driver the CUDA release ships with) for the OS, "?" when unknown."""
    if row is None:
        return "?", "?"
    floor = (row.minor_compat_floor_windows if windows else row.minor_compat_floor_linux) or "?"
    return floor, (row.min_driver_windows if windows else row.min_driver_linux) or floor


@rule("driver-too-old", severity="fail", layer="driver", precedes=("torch-import-failed",))
def driver_too_old(ctx: Ctx) -> None:
    verdict, values = _too_old_verdict(ctx)
    if verdict == "no":
        detail = "default" if values["driver"] != "?" else "no_driver_version"
        ctx.add(detail=detail, facts=["reconciled.nvidia_driver", "reconciled.cuda_driver_version", "torch.cuda"], install=install_fix(ctx), **values)


@rule("driver-minor-compat", severity="warn", layer="driver")
def driver_minor_compat(ctx: Ctx) -> None:
    verdict, values = _too_old_verdict(ctx)
    if verdict == "minor-compat":
        values.pop("error", None)
        ctx.add(facts=["reconciled.nvidia_driver", "torch.cuda"], install=install_fix(ctx), **values)


@rule("gpu-arch-unsupported", severity="fail", layer="gpu", precedes=("torch-import-failed",))
def gpu_arch_unsupported(ctx: Ctx) -> None:
    """A GPU (seen by any witness: the driver's tools, torch, the matrix's name lookup) whose compute
    capability the installed CUDA build has no kernels for; or a kernel that said so itself."""
    f, t = ctx.view, ctx.view.facts.torch
    # a CUDA build by its files, or by torch's own word: an imported torch that listed sm_XX code (its version unread)
    said_cuda = bool(t.imported) and any(a.startswith("sm_") for a in t.arch_list)
    if (built_for_files(f) != "cuda" and not said_cuda) or f.facts.jetson.is_jetson:
        return
    arch = list(t.arch_list)
    source = t.sources.get("arch_list") or "torch.cuda.get_arch_list()"
    if not arch:
        v = variant_row(ctx)
        if v is not None:
            arch = list(v.arch_for(f.facts.python.platform_tag))
            source = "inferred from the matrix: torch's libraries could not be read"
    proof = next((e for e in f.evidence if e.proves == "gpu-arch-unsupported"), None)
    fired = False
    if arch:
        for g in nvidia_gpus(f):
            if not visible_to_torch(g, f.facts.environment):
                continue  # hidden from torch (CUDA_VISIBLE_DEVICES): its kernels never run there
            if g.compute_capability and not mx.arch_runs(arch, g.compute_capability):
                fired = True
                ctx.add(
                    detail="default" if proof is None else "proven",
                    facts=[f"reconciled.gpus[{g.index}].compute_capability", "torch.arch_list"],
                    fix_text=install_fix(ctx, exclude=variant_name(f)),
                    gpu=gpu_label(g),
                    sm=sm(g.compute_capability),
                    cc=g.compute_capability,
                    torch=t.version,
                    arch=" ".join(arch),
                    source=source,
                    witnesses=", ".join(dict.fromkeys([g.sources.get("compute_capability", "?")] + g.witnesses)),
                    error=proof.line if proof else "",
                )
    if proof is not None and not fired:
        ctx.add(
            detail="evidence",
            facts=[proof.source],
            fix_text=install_fix(ctx, exclude=variant_name(f)),
            torch=t.version,
            arch=" ".join(arch) or "?",
            error=proof.line,
            where=proof.source,
        )


@rule("nvcc-mismatch", severity="warn", layer="toolkit")
def nvcc_mismatch(ctx: Ctx) -> None:
    f, t, tk = ctx.view, ctx.view.facts.torch, ctx.view.facts.cuda_toolkit
    if built_for(f) != "cuda" or not t.cuda or not tk.nvcc_version or vt(tk.nvcc_version)[:1] == vt(t.cuda)[:1]:
        return
    major = vt(t.cuda)[0]
    match = next((k for k in tk.toolkits if vt(k.nvcc_version or k.version_json)[:1] == (major,)), None)
    fix_text = None
    if match is not None:
        root = re.sub(r"[/\\]bin[/\\]nvcc(\.exe)?$", "", match.path)  # C:\...\v12.4\bin\nvcc.exe too
        bin_dir = root + ("\\bin" if "\\" in root else "/bin")
        # every probed path one quoted word (C:\Program Files\... has spaces; a `$(...)` or `;` in it stays a name)
        fix_text = shell.export({"CUDA_HOME": root, "PATH": bin_dir}, prepend_to="PATH", windows=f.facts.platform.system == "Windows")
    ctx.add(
        fix=None if fix_text else "default",
        fix_text=fix_text,
        facts=["cuda_toolkit.nvcc_version", "torch.cuda"],
        nvcc=tk.nvcc_version,
        nvcc_path=tk.nvcc_path or "nvcc",
        cuda=t.cuda,
        major=major,
        torch=t.version,
    )


def _size(n: int) -> str:
    """Bytes for a person: "5.4 GB", "612 MB" (decimal, as disks and pip report them)."""
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return f"{n} B"


def _leftover_sizes(ctx: Ctx) -> dict[str, int]:
    """The runtime packages the CPU build's install would remove (``--remove-leftovers``), with their disk: the
    resolver's one prediction (``plan.leftovers``, from ``install.leftovers.predict_leftovers``), so check promises
    what install lists; every nvidia-* package where no CPU plan resolves."""
    from stackdoctor.model.plan import Request
    from stackdoctor.resolve import resolve

    t = ctx.view.facts.torch

    def canon(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    plan = resolve(ctx.view, ctx.matrix, Request(torch=public(t.version) or None, variant=kinds.CPU))
    if not plan.satisfiable:
        plan = resolve(ctx.view, ctx.matrix, Request(variant=kinds.CPU))
    if plan.satisfiable:
        gone = {canon(n) for n in plan.leftovers}
        return {k: v for k, v in t.runtime_bytes.items() if canon(k) in gone}
    return {k: v for k, v in t.runtime_bytes.items() if k.startswith("nvidia-")}


@rule("torch-gpu-build-no-gpu", severity="warn", layer="torch", defers_to=("container-no-gpu", "torch-backend-mismatch"))
def torch_gpu_build_no_gpu(ctx: Ctx) -> None:
    """A CUDA build where no witness sees an NVIDIA GPU or driver: the CPU build would do, and the
    NVIDIA runtime packages' disk (measured from their RECORD files) would be saved."""
    f, t = ctx.view, ctx.view.facts.torch
    if not t.installed or built_for_files(f) != "cuda" or t.cuda_available or f.facts.jetson.is_jetson or f.facts.apple.is_macos:
        return
    if ctx.has("container-no-gpu") or ctx.has("torch-backend-mismatch") or nvidia_witnesses(f):
        return  # a witness saw NVIDIA hardware or a driver: "no NVIDIA GPU" would contradict it
    if kinds.select(f.facts) is not None and kinds.select(f.facts).build_kind != "cpu":  # type: ignore[union-attr]
        return  # another accelerator is there: torch-backend-mismatch speaks of it
    sizes = _leftover_sizes(ctx)
    fix = install_fix(ctx, keep_torch=True, exclude=variant_name(f))
    if "--variant" not in fix:
        fix += " --variant cpu"
    if sizes:
        fix += " --remove-leftovers"  # the NVIDIA packages go too: that is the disk saved
    largest = sorted(sizes.items(), key=lambda kv: -kv[1])[:2]
    key = _no_gpu_witness(f.facts)
    ctx.add(
        detail=key if sizes else ("unknown_size" if key == "default" else key + "_unknown_size"),
        facts=["torch.variant", "torch.cuda", "torch.runtime_bytes", "reconciled.gpus"],
        install=fix,
        torch=t.version or "?",
        cuda=t.cuda or "?",
        count=len(sizes),
        size=_size(sum(sizes.values())),
        largest=", ".join(f"{k} {_size(v)}" for k, v in largest),
        container=f.facts.platform.container or "?",
        how=ctx.msg("container-no-gpu", "fix", container_fix_key(f.facts.platform.container)) if f.facts.platform.container else "",
        torch_said=_last_line(t.cuda_error) if imports(t) else "-",
    )


@rule("libcuda-stub", severity="fail", layer="driver")
def libcuda_stub(ctx: Ctx) -> None:
    """The ``libcuda.so.1`` the CUDA runtime would open is the toolkit's stub (read from the files, on both paths):
    every CUDA call then answers cudaErrorStubLibrary, whatever driver the machine has."""
    f, t = ctx.view, ctx.view.facts.torch
    stub = next((p for p in t.linkage if p.kind == "stub"), None)
    if stub is None:
        return
    folder = stub.library.rsplit("/", 1)[0]
    entries = [e for e in f.facts.environment.get("LD_LIBRARY_PATH", "").split(":") if e]
    keep = [e for e in entries if e.rstrip("/") != folder.rstrip("/")]
    how = stub.detail or "system"
    key = how if how in ("ld_library_path", "ldcache") else "file"
    fix_text = None
    if key == "ld_library_path":
        fix_text = shell.export({"LD_LIBRARY_PATH": ":".join(keep)}) if keep else "unset LD_LIBRARY_PATH"
    driver = f.driver("nvidia").value
    ctx.add(
        severity="fail" if nvidia_gpus(f) or driver is not None else "warn",
        detail=key,
        fix=key,
        fix_text=fix_text,
        facts=["torch.linkage"] + (["environment.LD_LIBRARY_PATH"] if key == "ld_library_path" else []),
        lib=stub.library,
        lib_q=shell.word(stub.library),
        folder=folder,
        folder_q=shell.word(folder),
        opener=stub.needed_by.rsplit("/", 1)[-1],
        version=stub.found_version or "?",
        driver=driver or "?",
    )


def _no_gpu_witness(f: Any) -> str:
    """The detail of "no NVIDIA GPU" by its witness: inside a container no witness can say whether the host has a GPU the
    container was not given (both paths say so, a running torch adds its answer); read from the files only on a system
    with no PCI list, a GPU may be known only to a running torch (not verified); on Linux outside WSL the PCI bus read
    is the witness ("default"); with none of these, not known (WSL's GPU is not on its bus)."""
    if f.platform.container:
        return "container"
    if read_only(f.torch) and f.platform.system not in (None, "Linux"):
        return "unverified"
    pci_read = bool(f.platform.sources.get("nvidia_pci_devices")) and f.platform.system == "Linux" and not f.platform.is_wsl
    return "default" if pci_read else "no_witness"


def _last_line(text: str | None) -> str:
    lines = (text or "").strip().splitlines()
    return lines[-1][:200] if lines else "-"


# the python layer's NVIDIA finding, in its place when it was rules/python.py's: after python-unsupported
@rule("pynvml-deprecated", severity="warn", layer="python", after="python-unsupported")
def pynvml_deprecated(ctx: Ctx) -> None:
    d = ctx.view.facts.torch.distributions
    shim = d.get("pynvml")
    if shim and ("nvidia-ml-py" in d or (vt(shim)[:1] and vt(shim)[0] >= 13)):
        ctx.add(
            facts=["torch.distributions.pynvml"],
            version=shim,
            official=d.get("nvidia-ml-py") or "-",
            python=python_exe(ctx.view),
        )


def _gpu_label(g: NvidiaGpu) -> str:
    return f"GPU{g.index} {g.name or '?'}"


# the gpu layer's findings, NVIDIA's GPUs', in their place when they were rules/gpu.py's: after the driver's, before
# the kernels'
@rule(
    "gpu-lost", severity="fail", layer="gpu", defers_to=("driver-missing", "driver-library-mismatch", "container-no-gpu"),
    before="kernel-failed",
)
def gpu_lost(ctx: Ctx) -> None:
    n = ctx.view.facts.nvidia
    pci = nvidia_pci(ctx.view)
    if ctx.has("driver-missing", "driver-library-mismatch", "container-no-gpu"):
        return
    if n.smi_state == "no-devices":
        ctx.add(
            facts=["nvidia.smi_state", "platform.nvidia_pci_devices"],
            message=n.smi_message or "No devices were found",
            pci=len(pci),
            seen=0,
            flavor=n.kernel_module_flavor or "?",
        )
        return
    given, lost = ctx.view.driven("nvidia"), ctx.view.lost("nvidia")
    if pci and given and lost and len(given) < len(pci) and (n.nvml_state == "ok" or n.smi_state == "ok"):
        gone = {g.bus_id for g in lost}
        ctx.add(
            detail="partial",
            facts=["nvidia.gpus", "platform.nvidia_pci_devices", "reconciled.gpus"],
            message=", ".join(d.address for d in pci if bus_key(d.address) in gone) or "-",
            pci=len(pci),
            seen=len(given),
            flavor=n.kernel_module_flavor or "?",
        )


@rule("gpu-ecc-errors", severity="fail", layer="gpu", after="gpu-lost")
def gpu_ecc_errors(ctx: Ctx) -> None:
    for g in ctx.view.facts.nvidia.gpus:
        if (g.ecc_uncorrected or 0) > 0 or g.retired_pages_pending:
            ctx.add(
                detail="pending" if g.retired_pages_pending and not g.ecc_uncorrected else "default",
                facts=[f"nvidia.gpus[{g.index}].ecc_uncorrected", f"nvidia.gpus[{g.index}].retired_pages_pending"],
                gpu=_gpu_label(g),
                index=g.index,
                count=g.ecc_uncorrected or 0,
            )


_BAD_THROTTLE = ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")


@rule("gpu-throttled", severity="warn", layer="gpu", after="gpu-ecc-errors")
def gpu_throttled(ctx: Ctx) -> None:
    for g in ctx.view.facts.nvidia.gpus:
        bad = [r for r in g.throttle_reasons if r in _BAD_THROTTLE]
        if bad:
            ctx.add(facts=[f"nvidia.gpus[{g.index}].throttle_reasons"], gpu=_gpu_label(g), index=g.index, reasons=", ".join(bad))


# Data-center parts, where persistence mode is expected on (names as nvidia-smi prints them, "NVIDIA " dropped).
_DATACENTER = re.compile(
    r"\b(tesla|[abhl]\d{1,3}[a-z]?|gh200|gb200|gb300|b[12]00|b300|h[12]00|h800|a800|l40s?|t4|v100|p100|p40|mi\d{3})\b", re.I
)


@rule("gpu-persistence-off", severity="warn", layer="gpu", after="gpu-throttled")
def gpu_persistence_off(ctx: Ctx) -> None:
    f = ctx.view
    if f.facts.platform.system not in (None, "Linux") or f.facts.platform.is_wsl:
        return
    off = [g for g in f.facts.nvidia.gpus if g.persistence_mode == "Disabled" and g.name and _DATACENTER.search(g.name.replace("NVIDIA ", ""))]
    if off:
        ctx.add(facts=[f"nvidia.gpus[{g.index}].persistence_mode" for g in off], gpus=", ".join(_gpu_label(g) for g in off))


# the platform layer's NVIDIA finding, in its place when it was rules/system.py's: before glibc-too-old
@rule("container-no-gpu", severity="fail", layer="platform", before="glibc-too-old")
def container_no_gpu(ctx: Ctx) -> None:
    p = ctx.view.facts.platform
    if not p.container or p.container_nvidia_devices is not False:
        return
    f, t = ctx.view, ctx.view.facts.torch
    # a claim needs a witness that the host has a GPU for this container: the PCI bus, or the runtime's variable.
    # torch's "found no NVIDIA driver" is no such witness (issue 42): torch-gpu-build-no-gpu says what is unknown
    wants = bool(nvidia_pci(f)) or f.facts.environment.get("NVIDIA_VISIBLE_DEVICES", "").strip() not in ("", "void", "none")
    if not wants:
        return
    ctx.add(
        detail="default",
        fix=container_fix_key(p.container),
        facts=["platform.container", "platform.container_nvidia_devices", "torch.cuda_error"],
        container=p.container,
        pci=", ".join(d.name or d.device_id for d in nvidia_pci(f)) or "-",
        torch=t.version or "?",
        error=(t.cuda_error or f"torch._C._cuda_getDriverVersion() = {t.driver_api_version}")[:300],
    )


# the driver layer's NVIDIA findings, in their places when they were rules/driver.py's: before and after source-conflict
@rule("driver-missing", severity="fail", layer="driver", defers_to=("container-no-gpu",), before="source-conflict")
def driver_missing(ctx: Ctx) -> None:
    f = ctx.view
    n, p = f.facts.nvidia, f.facts.platform
    if ctx.has("container-no-gpu") or f.facts.jetson.is_jetson:
        return
    pci = nvidia_pci(f)
    said_no_driver = n.smi_state == "no-driver" or n.nvml_state == "no-driver"
    torch_runs = bool(f.facts.torch.cuda_available) and not f.facts.torch.hip
    silent = (
        bool(pci)
        and f.driver("nvidia").value is None
        and not torch_runs
        and n.smi_state in (None, "absent", "no-driver")
        and n.nvml_state in (None, "absent", "no-driver", "skipped")
    )
    if not (said_no_driver or silent) or (not pci and not said_no_driver):
        return
    devices = ", ".join(f"{d.name or d.device_id} ({d.address}, driver {d.driver or 'none'})" for d in pci) or "-"
    nouveau = any(d.driver == "nouveau" for d in pci)
    key = "wsl" if p.is_wsl else ("nouveau" if nouveau else ("ubuntu" if p.os_id == "ubuntu" else "default"))
    ctx.add(
        detail="default" if pci else "no_pci",
        fix=key,
        facts=["platform.nvidia_pci_devices", "nvidia.smi_state", "nvidia.nvml_state"],
        devices=devices,
        message=n.smi_message or n.nvml_error or "-",
    )


@rule("driver-library-mismatch", severity="fail", layer="driver", after="driver-missing")
def driver_library_mismatch(ctx: Ctx) -> None:
    n = ctx.view.facts.nvidia
    if n.smi_state == "lib-mismatch" or n.nvml_state == "lib-mismatch":
        m = re.search(r"NVML library version:\s*([\d.]+)", (n.smi_message or "") + "\n" + (n.nvml_error or ""))
        # the libraries' own file names are exact (570.124.04); nvidia-smi's line gives two fields (570.124)
        ctx.add(
            facts=["nvidia.smi_state", "nvidia.nvml_state", "nvidia.kernel_module_version", "nvidia.driver_library_version"],
            user=user_space_driver(ctx.view) or ctx.view.chosen("nvidia.driver_library_version").value or (m.group(1) if m else None) or "?",
            kernel=ctx.view.chosen("nvidia.kernel_module_version").value or "?",
            message=n.smi_message or n.nvml_error or "",
        )


@rule("wsl-driver", severity="fail", layer="driver", after="source-conflict")
def wsl_driver(ctx: Ctx) -> None:
    p, n = ctx.view.facts.platform, ctx.view.facts.nvidia
    if not p.is_wsl:
        return
    foreign = [x for x in n.libcuda_paths if not x.startswith("/usr/lib/wsl/")]
    if foreign:
        ctx.add(facts=["nvidia.libcuda_paths", "platform.is_wsl"], paths=", ".join(foreign))
    elif n.smi_state == "cuda-err":
        ctx.add(
            severity="fail" if ctx.view.facts.torch.cuda_available is False else "warn",
            detail="cuda_err",
            fix="cuda_err",
            facts=["nvidia.smi_state", "platform.is_wsl"],
            driver=ctx.view.driver("nvidia").value or "?",
            smi=n.smi_version or "?",
        )


# the toolkit layer's summary, NVIDIA's nvcc, in its place when it was rules/ok.py's: after runtime-not-verified
@rule("toolkit-ok", severity="ok", layer="toolkit", summary=True, group="ok", after="runtime-not-verified")
def toolkit_ok(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    checked = built_for(f) == "cuda" and bool(t.cuda) and bool(f.facts.cuda_toolkit.nvcc_version)
    layer_ok(ctx, "toolkit", checked, nvcc=f.facts.cuda_toolkit.nvcc_version or "?", cuda=t.cuda or "?")


# the torch layer's Jetson finding, in its place when it was rules/torch.py's: after torch-arch-list-mismatch
@rule("jetson-wrong-wheel", severity="fail", layer="torch", after="torch-arch-list-mismatch")
def jetson_wrong_wheel(ctx: Ctx) -> None:
    f, t = ctx.view, ctx.view.facts.torch
    j = f.facts.jetson
    if not j.is_jetson or not t.installed:
        return
    row = ctx.matrix.jetson_row(j.l4t_release, j.jetpack) if ctx.matrix is not None else None
    variant = variant_name(f) or ""
    on_pytorch_index = bool(row is not None and row.use_pytorch_index)
    wrong = None
    if t.cuda is None and not t.hip:
        wrong = "cpu"
    elif re.match(r"^cu\d+$", variant):
        if not on_pytorch_index:
            wrong = "pytorch"
        elif row is not None and row.cuda and vt(t.cuda)[:1] < vt(row.cuda)[:1]:
            wrong = "thor"  # the board's CUDA major (13 on Thor) is the oldest whose builds carry its GPU
    if wrong is None:
        return
    if row is not None and row.variant:
        fix_text: str | None = f"stackdoctor install --variant {row.variant}"
    elif row is not None and on_pytorch_index and row.cuda:
        fix_text = f"stackdoctor install --variant cu{row.cuda.replace('.', '')}"
    else:
        fix_text = None
    ctx.add(
        detail=wrong,
        fix=None if fix_text else "default",
        fix_text=fix_text,
        facts=["jetson.l4t_release", "torch.version", "torch.cuda"],
        torch=t.version,
        model=j.model or "Jetson",
        l4t=j.l4t_release or "?",
        jetpack=j.jetpack or "?",
        cuda=row.cuda if row is not None and row.cuda else "?",
    )


# --- torch.cuda's runtime (NVIDIA's CUDA, and AMD's ROCm where torch answers through torch.cuda): rules/runtime.py's ---
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


