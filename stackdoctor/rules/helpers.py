"""Small pure helpers the rules share (facts + matrix look-ups, the install fix line)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from stackdoctor import kinds
from stackdoctor import matrix as mx
from stackdoctor.core import shell
from stackdoctor.core.versions import public
from stackdoctor.model.facts import BuildKind, GpuView, TorchFacts
from stackdoctor.model.view import MachineView
from stackdoctor.rules.core import Ctx

_MISSING_RE = re.compile(r"No module named ['\"]?torch['\"]?\s*$")


def variant_name(facts: MachineView) -> str | None:
    t = facts.facts.torch
    return t.variant or mx.variant_from_version(t.version)


def import_failed(t: TorchFacts) -> bool:
    """torch is there but `import torch` raised or crashed (not a timeout, not "no torch")."""
    return bool(t.import_error) and t.import_error_kind != "timeout" and not _MISSING_RE.search(t.import_error or "")


def imports(t: TorchFacts) -> bool:
    """torch is installed and `import torch` ran and worked (so its runtime facts were asked).

    False where torch was only read from its files (``check --no-kernels``: ``imported`` is False
    without an import error); a report from before ``imported`` existed (None) counts as imported."""
    return t.installed and not t.import_error and t.import_error_kind is None and t.imported is not False


def read_only(t: TorchFacts) -> bool:
    """torch is installed and was read from its files only, with no import tried (``check --no-kernels``)."""
    return t.installed and t.imported is False and not t.import_error and t.import_error_kind is None


def built_for(facts: MachineView) -> BuildKind | None:
    """The build kind of a torch that imports, or that was only read from its files without trying
    (``check --no-kernels``: the same verdicts as an import that works, for what the files decide);
    None when there is no torch, or its import failed. The rules about torch's runtime ask
    ``cuda_available`` & co., which only an import sets."""
    t = facts.facts.torch
    if not (imports(t) or read_only(t)):
        return None
    return kinds.build_kind(t)


def built_for_files(facts: MachineView) -> BuildKind | None:
    """The build kind from what the files say (``version.py``, the variant), even when torch does not import."""
    t = facts.facts.torch
    if t.import_error_kind == "timeout" and not t.version:
        return None
    return kinds.build_kind(t)


def python_exe(facts: MachineView) -> str:
    """The target's interpreter as one word of a fix line, quoted only where the shell needs it (a path with
    spaces: ``C:\\Users\\First Last\\...\\python.exe``); PowerShell's rules on Windows."""
    return shell.word(facts.facts.python.executable or "python", windows=facts.facts.platform.system == "Windows")


def gpu_label(g: GpuView) -> str:
    return f"GPU{g.index} {g.name or '?'}"


def sm(cc: str) -> str:
    return "sm_" + cc.replace(".", "")


def release(ctx: Ctx, version: str | None) -> Any:
    if ctx.matrix is None or not version:
        return None
    return ctx.matrix.release(public(version))


def variant_row(ctx: Ctx) -> Any:
    """The matrix's row for the installed torch's variant (PyPI builds without a label: by CUDA version, else cpu)."""
    rel = release(ctx, ctx.view.facts.torch.version)
    name = variant_name(ctx.view)
    if rel is None:
        return None
    if name:
        return rel.variant(name)
    kind = built_for_files(ctx.view)
    t = ctx.view.facts.torch
    # a label-less build is PyPI's: the CPU build's row, or the row of a build whose level (a kind's runtime version)
    # it has (a kind whose builds always carry their label has no label-less one)
    return next((v for v in rel.variants if v.kind == kind and _same_level(v, t, kind)), None)


def _same_level(v: Any, t: TorchFacts, kind: BuildKind | None) -> bool:
    """Whether matrix row ``v`` is the label-less build ``t``: the level a kind reads on the row, else a CPU build."""
    said = next((r for a in kinds.ALL if (r := a.same_build_level(v, t)) is not None), None)
    return said if said is not None else kind == kinds.CPU


def index_for(ctx: Ctx, variant: str | None) -> str | None:
    return f"{ctx.matrix.index_url('pytorch').rstrip('/')}/{variant}" if variant else None


def _older(a: str | None, b: str | None) -> bool:
    """``a`` is an older torch version than ``b`` (False where either is unknown)."""
    from packaging.version import InvalidVersion, Version

    try:
        return bool(a and b) and Version(str(a)) < Version(str(b))
    except InvalidVersion:
        return False


def install_fix(ctx: Ctx, *, keep_torch: bool = True, exclude: str | None = None) -> str:
    """The ``stackdoctor install ...`` line the resolver plans for this machine.

    Tries the installed torch version first (``--torch X --variant V``), then the newest usable
    (``--variant V``); falls back to plain ``stackdoctor install`` (which explains, with reasons, why
    nothing better fits). The same resolver ``install`` uses: ``check`` and ``install`` agree.
    """
    from stackdoctor.model.plan import Request
    from stackdoctor.resolve import resolve

    facts = ctx.view
    current = (public(facts.facts.torch.version), variant_name(facts))
    chosen = kinds.select(facts.facts)
    # a CPU build is no fix where a GPU is usable, nor where a kind's driver is known to be there
    want_gpu = (chosen is not None and chosen.build_kind != kinds.CPU) or any(a.driver_wants_build(facts) for a in kinds.ALL)
    attempts: list[Request] = []
    if keep_torch and facts.facts.torch.installed and current[0]:
        attempts.append(Request(torch=current[0]))
    attempts.append(Request())
    for req in attempts:
        plan = resolve(facts, ctx.matrix, req)
        if not plan.satisfiable or not plan.variant:
            continue
        if plan.variant == exclude or (plan.torch_version, plan.variant) == current:
            continue
        if plan.variant == current[1] and _older(plan.torch_version, current[0]):
            continue  # no fix downgrades torch to reach the variant it already has
        if want_gpu and kinds.gpu_build_for(plan.variant) is None:
            continue  # a CPU build is no fix on a machine whose GPU should work
        if req.torch:
            return f"stackdoctor install --torch {plan.torch_version} --variant {plan.variant}"
        return f"stackdoctor install --variant {plan.variant}"
    return "stackdoctor install"


def visible_to_torch(g: GpuView, env: dict[str, str]) -> bool:
    """Whether ``CUDA_VISIBLE_DEVICES`` / ``HIP_VISIBLE_DEVICES`` leave GPU ``g`` to torch (True when unset
    or unreadable). Entries are indices (the driver's order) or UUID prefixes; CUDA stops at the first bad one."""
    kind = kinds.by_vendor(g.vendor)
    var = kind.hide_var if kind is not None else None  # CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES
    if var is None or var not in env:
        return True
    uuid = (g.uuid or "").lower()
    for tok in (x.strip() for x in env[var].split(",")):
        if re.fullmatch(r"\d+", tok):
            if int(tok) == g.index:
                return True
        elif tok.lower().startswith(("gpu-", "mig-")):
            if uuid and uuid.startswith(tok.lower()):
                return True
        else:
            break
    return False


def container_fix_key(container: str | None) -> str:
    """The key of the way a container runtime gives a container the host's GPU (container-no-gpu's fix texts)."""
    return {"podman": "podman", "kubernetes": "kubernetes", "containerd": "kubernetes", "apptainer": "apptainer"}.get(container or "", "docker")


def answered_with_error(e: Any) -> bool:
    """An error number (``runtime-error-code`` evidence) whose row says a driver stack answered: never "no GPU" (a
    number the table lacks counts too: something answered with it; a stub library's answer does not prove a GPU, but
    it does not prove its absence either)."""
    return bool(e.proves == "runtime-error-code" and e.values.get("witness", "driver") in ("driver", "library"))


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


def build_version_facts() -> list[str]:
    """The torch facts that hold a build's version, every kind's once, in priority order ("torch.cuda", "torch.hip")."""
    return list(dict.fromkeys(x for a in kinds.ALL if (x := a.build_version_fact())))
