"""Post-install verification: torch imported in the target (``sd_verify.py``), judged against the plan and the
accelerator seen; the GPU code of the installed binaries read and compared with this machine's GPUs
(:func:`check_gpu_code`); whether a family is intact (every RECORD hash, and the import)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from stackdoctor._worker import worker_path
from stackdoctor.install.backup import BACKUP_MARK, marked, str_dict
from stackdoctor.model.facts import Verification

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.kinds.base import Accelerator
    from stackdoctor.model.facts import Facts, GpuView
    from stackdoctor.model.plan import Plan
    from stackdoctor.system import System


VERIFY_MARK = "@@stackdoctor-verify@@ "


def verify(system: System, python: str, *, timeout: float = 300.0) -> Verification:
    from stackdoctor import kinds

    asked = kinds.torch_questions()
    ask = {"STACKDOCTOR_TORCH_ASK": json.dumps(asked, sort_keys=True) if asked else None}
    res = system.run([python, "-I", str(worker_path("sd_verify.py"))], timeout=timeout, record=False, env=ask)
    data = marked(res.stdout, VERIFY_MARK)
    if data is None:
        why = res.describe_failure() or "it printed nothing"
        tail = (res.stderr.strip().splitlines() or [""])[-1][:300]
        return Verification(error=f"importing torch in the target failed: {why}" + (f" ({tail})" if tail and tail not in why else ""))
    return Verification.read(data)


def intact(system: System, python: str, names: Sequence[str], *, sizes_only: bool = False) -> str | None:
    """None when every named distribution is complete per its RECORD (every sha256) and torch imports; else why not.

    ``sizes_only`` (a dry run, ``--emit``: nothing is changed, so nothing is repaired): each file's size against its
    RECORD, a stat per file, and no import: a fraction of a second where reading every byte of a CUDA build and
    importing it takes seconds to minutes. The screen says which check was made."""
    argv = [python, "-I", str(worker_path("sd_backup.py")), "sizes" if sizes_only else "check", json.dumps(list(names))]
    res = system.run(argv, timeout=600, record=False)
    data = marked(res.stdout, BACKUP_MARK)
    if data is None or isinstance(data.get("error"), str):
        return str((data or {}).get("error") or res.describe_failure() or "the backup worker printed nothing")
    bad = str_dict(data.get("damaged"))
    if bad:
        return "; ".join(f"{n}: {w}" for n, w in bad.items())
    if sizes_only:
        return None
    v = verify(system, python)
    return None if v.imported else f"torch does not import: {v.error or '?'}"


def what_check_says(v: Verification, facts: Facts | None) -> list[str]:
    """What ``stackdoctor check`` will say about the torch just installed and imported, from check's own rules: the
    machine's facts with the new torch's import (its version and what ``import torch`` warned), judged, and each
    warning or failure that the import gave rise to (torch-numpy-missing, ...), in the user's language. Install's
    "done" and the next check then agree."""
    import copy

    from stackdoctor import rules
    from stackdoctor.core.texts import detect_lang, ui
    from stackdoctor.matrix import load_matrix
    from stackdoctor.reconcile import reconcile

    if facts is None or not v.imported:
        return []
    f = copy.deepcopy(facts)
    f.torch.installed, f.torch.imported, f.torch.version = True, True, v.version or f.torch.version
    f.torch.import_error, f.torch.import_warnings = None, list(v.import_warnings)
    lang = detect_lang(os.environ)
    try:
        matrix = load_matrix([])
        found = rules.judge(reconcile(f, matrix), matrix, lang=lang)
    except Exception:  # a verdict beside "done", never a reason to lose it
        return []
    said = [x for x in found if x.severity in ("warn", "fail") and any(k.startswith("torch.import") for k in x.facts)]
    return [ui("nc4_check_says", lang, code=x.code, detail=(x.detail or x.title).rstrip("."), fix=x.fix or "") for x in said]


def expected_version(plan: Plan) -> str | None:
    for p in plan.packages:
        if p.name == "torch":
            return p.requirement.split("==", 1)[1]
    return None


def judge(plan: Plan, v: Verification, accelerator: str | None, facts: Facts | None = None) -> tuple[bool, str]:
    """(ok, sentence): did the install give the planned torch, and can it use the accelerator seen?

    ``accelerator`` is what the machine's facts show: "cuda" | "rocm" | "xpu" | "mps" | a plug-in kind's backend |
    None. The sentence for the kind is the registry's (``accelerators.verify_install``: each kind's ``verify``), and
    a failure ends with the kind's hint (``accelerators.import_hint``, from ``facts``: CANN's ``source`` line).
    """
    from stackdoctor import kinds

    if not v.imported:
        hint = kinds.import_hint(accelerator, v.error or "", facts)
        return False, f"torch does not import in the target: {v.error or 'unknown error'}" + (f"; {hint}" if hint else "")
    want = expected_version(plan)
    if want and v.version != want:
        from packaging.version import InvalidVersion, Version

        try:
            same = Version(v.version or "") == Version(want)
        except InvalidVersion:
            same = False
        if not same:
            return False, f"the target imports torch {v.version}, not the planned {want} (another torch shadows it? {v.location})"
    got = f"torch {v.version} imports in the target"
    verdict = kinds.verify_install(accelerator, plan.variant, v)
    if verdict is not None:
        ok, clause = verdict
        hint = None if ok else kinds.import_hint(accelerator, clause, facts)
        clause += f" — {hint}" if hint else ""
        return (True, f"{got} and {clause}") if ok else (False, f"{got}, but {clause}; run `stackdoctor check`")
    if kinds.for_variant(plan.variant) is not None:  # a GPU build, and no kind of it here to try
        return True, f"{got} (no matching GPU on this machine, so the accelerator was not tried)"
    return True, got


GPU_CODE_READ_S = 60.0  # the static read of libtorch_cuda.so / libtorch_hip.so (headers only; seconds on a 1 GB library)


@dataclass
class GpuCodeCheck:
    """What the installed binaries of a GPU build carry, against the GPUs of that kind here."""

    sentence: str  # the note (committed), or why the install is not done (``cannot_run``)
    cannot_run: bool = False  # a GPU here that none of the code read can run: roll back
    data: dict[str, Any] = field(default_factory=dict)  # InstallResult.gpu_code


def _code_kind(variant: str | None) -> Accelerator | None:
    """The kind whose GPU code a build of ``variant`` carries (the seam: :attr:`Accelerator.gpu_code_library`, CUDA
    on NVIDIA, HIP on AMD), from the variant's build kind (:func:`stackdoctor.matrix.variant_kind`); None for a build
    whose code is not read."""
    from stackdoctor import kinds
    from stackdoctor.matrix import variant_kind

    kind = variant_kind(variant or "")
    if not kind:
        return None
    return next((a for a in kinds.ALL if a.gpu_code_library and a.build_kind == kind[0]), None)


def _gpus_for(plan: Plan, vendor: str, gpus: Sequence[GpuView]) -> list[GpuView]:
    """The GPUs of ``vendor`` the installed torch will run on: listed by their driver's tools (not seen only on the
    PCI bus, as the resolver counts them), minus those the plan's environment hides (``CUDA_VISIBLE_DEVICES``...,
    read as the rules read it: :func:`stackdoctor.rules.helpers.visible_to_torch`)."""
    from stackdoctor.rules.helpers import visible_to_torch

    return [g for g in gpus if g.vendor == vendor and g.witnesses != ["pci"] and visible_to_torch(g, plan.env)]


def _label(g: GpuView, arch: str | None) -> str:
    return f"GPU {g.index} {g.name or '?'}" + (f" ({arch})" if arch else "")


def _planned_gpu_code(plan: Plan, acc: Accelerator) -> tuple[list[str], str | None] | None:
    """The plan's GPU code as the matrix (the embedded rows, the learned layer, ``STACKDOCTOR_MATRIX``) lists it, and
    where it came from (``inferred: ...`` for a release learned without its binaries); None when no row says."""
    if not plan.torch_version or not plan.variant:
        return None
    try:
        from stackdoctor.matrix import load_matrix

        variant = load_matrix().variant(plan.torch_version, plan.variant)
    except Exception:  # noqa: BLE001 - the matrix only adds a comparison to the note; what was read stands without it
        return None
    if variant is None:
        return None
    wheel = next((p.wheel for p in plan.packages if p.name == "torch" and p.wheel), None)
    platform = wheel[: -len(".whl")].rsplit("-", 1)[-1] if wheel and wheel.endswith(".whl") else None
    listed = acc.planned_gpu_code(variant, platform)
    return (listed, variant.derived_from) if listed else None


def _as_read(archs: Iterable[str]) -> set[str]:
    """The matrix's notation (``sm_120+PTX``) as the binaries name their code (``sm_120``, ``compute_120``)."""
    out: set[str] = set()
    for a in archs:
        base, plus, _ = a.partition("+")
        out.add(base.split(":", 1)[0].lower())
        if plus and base.startswith("sm_"):
            out.add("compute_" + base[3:])
    return out


def _read_code(plan: Plan, v: Verification, acc: Accelerator, system: System, timeout_s: float, data: dict[str, Any]) -> GpuCodeCheck | Mapping[str, Any]:
    """The GPU code read from the installed torch's folder (``v.location``'s), or the note that it was not read."""
    if not v.location:
        return GpuCodeCheck("the GPU code of the installed torch was not read: its import did not say where it is", data=data)
    from stackdoctor.wheels.learn import read_installed_gpu_code

    torch_dir = os.path.dirname(v.location)
    try:
        read = read_installed_gpu_code(torch_dir, system=system, timeout_s=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a reader bug must not decide an install: it is said, and nothing is judged
        return GpuCodeCheck(f"the GPU code of the installed torch was not read ({type(exc).__name__}: {exc})", data=data)
    if read is None:
        return GpuCodeCheck(f"the GPU code of the installed torch was not read: {torch_dir} has no {acc.gpu_code_library}", data=data)
    data["read"] = read
    if not acc.gpu_code_read(read):
        where = str(read.get("library") or acc.gpu_code_library)
        return GpuCodeCheck(f"the GPU code of the installed torch was not read from {where}: {read.get('error') or 'no GPU code found'}", data=data)
    return read


def _differs(plan: Plan, acc: Accelerator, got: Sequence[str], data: dict[str, Any]) -> str:
    """How the code read differs from the plan's (the matrix's list), as the end of the note; "" when it does not."""
    planned = _planned_gpu_code(plan, acc)
    if planned is None:
        return ""
    data["planned"] = {"list": planned[0], "derived_from": planned[1]}
    if _as_read(planned[0]) == _as_read(got):
        return ""
    return f"; the plan had {' '.join(planned[0])}" + (f" ({planned[1]})" if planned[1] else "")


def check_gpu_code(plan: Plan, v: Verification, gpus: Sequence[GpuView], system: System, *, timeout_s: float = GPU_CODE_READ_S) -> GpuCodeCheck | None:
    """Read the GPU code of the installed torch (``v.location``'s folder) and compare it with this machine's GPUs.

    None: not a CUDA / ROCm build, or no GPU of its kind here (nothing to judge). A GPU whose compute capability has
    no cubin the arch rules let it run and no PTX at or below it (:func:`stackdoctor.matrix.arch_match`), or whose
    gfx target (after the plan's ``HSA_OVERRIDE_GFX_VERSION``) has no code object, makes ``cannot_run``; an incomplete
    read never does (it is a note: not judged). A read that fails is a note too, never a silent ok. How a GPU runs
    the code is its kind's answer (:meth:`Accelerator.gpu_code_runs`)."""
    acc = _code_kind(plan.variant)
    here = _gpus_for(plan, acc.vendor, gpus) if acc is not None else []
    if acc is None or not here:
        return None
    data: dict[str, Any] = {"read": None, "gpus": [], "planned": None, "verdict": "unread"}
    read = _read_code(plan, v, acc, system, timeout_s, data)
    if isinstance(read, GpuCodeCheck):
        return read
    got = acc.gpu_code_read(read)
    words = acc.gpu_code_words(read)
    where = str(read.get("library") or acc.gpu_code_library)
    served: list[str] = []
    unserved: list[str] = []
    unknown: list[str] = []
    for g in here:
        arch, how = acc.gpu_code_runs(g, got, plan.env)
        data["gpus"].append({"gpu": _label(g, None), "arch": arch, "runs": how})
        (unknown if arch is None else served if how else unserved).append(_label(g, arch))
    differs = _differs(plan, acc, got, data)
    complete = not read.get("error")
    if unserved and complete:
        data["verdict"] = "cannot-run"
        torch = f"torch {v.version}" if v.version else "torch"
        missing = f"no code for {', '.join(sorted({u.rsplit('(', 1)[-1].rstrip(')') for u in unserved}))}" + acc.gpu_code_missing
        return GpuCodeCheck(
            f"the installed {torch} cannot run on {', '.join(unserved)}: its GPU code, read from {where}, is {words} ({missing}){differs}",
            cannot_run=True, data=data,
        )
    if unserved or not complete:
        data["verdict"] = "not-judged"
        return GpuCodeCheck(
            f"GPU code read from the installed {where}: {words}, but the read was incomplete ({read.get('error')}), so it was not judged"
            + (f" (in what was read, nothing runs on {', '.join(unserved)})" if unserved else "") + differs,
            data=data,
        )
    data["verdict"] = "runs" if served else "not-judged"
    runs = f"it runs on {', '.join(served)}" if served else "no GPU here said its compute capability, so nothing was judged"
    tail = f" ({', '.join(unknown)}: compute capability unknown, not judged)" if unknown and served else ""
    return GpuCodeCheck(f"GPU code read from the installed {where}: {words}; {runs}{tail}{differs}", data=data)


def reads_gpu_code(plan: Plan, gpus: Sequence[GpuView]) -> bool:
    acc = _code_kind(plan.variant)
    return acc is not None and bool(_gpus_for(plan, acc.vendor, gpus))
