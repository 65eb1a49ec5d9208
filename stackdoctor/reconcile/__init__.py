"""Reconcile: join every witness into one view of the machine, and derive what follows from the facts.

``reconcile(facts, matrix) -> MachineView`` is pure: it returns a new frozen view of the machine and never changes its input.
It runs once, between the probes and the rules, on a live run and on a replay alike (a replayed
report is reconciled again with today's matrix, so stale derivations never survive).

What it does, in order:

1. **Derivations from the matrix**, each marked with a ``reconcile:`` source so that a replay can
   tell them from probed values and redo them: an NVIDIA GPU's compute capability from its name
   (``gpus.yaml``), a Jetson's JetPack and CUDA from its L4T release (``jetson.yaml``), an AMD GPU's
   ``integrated`` flag from its gfx target (``rocm.yaml``), an Intel GPU's family, ``discrete`` and
   ``xpu`` flags from its PCI id (``intel.yaml``), and the peak TFLOP/s of kernel results
   (``peaks.yaml``).
2. **The reconciled view** (the :class:`MachineView`; the report's ``reconciled`` section): every GPU seen by any witness (the driver's tools
   and NVML, the PCI bus, torch's device list, ROCm's tools), the same GPU seen by several witnesses
   joined into one, with each witness named; the NVIDIA driver version and the newest CUDA it runs,
   with every witness's value; recognised messages as evidence; the disagreements between witnesses;
   and the machine's accelerator (:mod:`stackdoctor.accelerators`).

The rules and the resolver read the reconciled view, so a finding fires whichever witness is there.
"""

from __future__ import annotations

import copy
import re

from stackdoctor import kinds
from stackdoctor.matrix import Matrix
from stackdoctor.model.facts import Disagreement, Evidence, Facts, GpuView, ReconciledFacts, SeenValue
from stackdoctor.model.view import MachineView
from stackdoctor.reconcile.gpus import DERIVED, bus_key, derived

__all__ = ["DERIVED", "reconcile", "recognise", "bus_key", "report_facts", "user_space_driver"]


def reconcile(facts: Facts | MachineView, matrix: Matrix) -> MachineView:
    """The machine's view: derivations redone from the matrix on a copy of the facts, every witness joined, and
    the values chosen from them held by the view beside those facts (``view.driver("nvidia")``, ``view.gpus``
    ...). Pure: the facts keep what the witnesses said (no chosen value is written into them); what the report
    publishes under its stable keys is :func:`report_facts`. A view given is reconciled again from its facts."""
    f = copy.deepcopy(facts.facts if isinstance(facts, MachineView) else facts)
    _unpublish(f)
    for a in kinds.ALL:
        a.derive(f, matrix)  # each kind's derivations from the matrix, its witnesses weighed
    _derive_torch(f)
    view = ReconciledFacts(done=True)
    view.evidence = recognise(f, matrix)
    chosen: dict[str, SeenValue] = {}
    for a in kinds.ALL:
        chosen.update(a.reconciled(f, view))  # each kind's driver and runtime values, from every witness
    view.gpus = [g for a in kinds.ALL for g in a.joined_gpus(f, matrix)]
    view.disagreements = _disagreements(f, view)
    f.reconciled = view  # the accelerator kinds read the joined view from the facts they are given
    _derive_peaks(f, matrix, view)
    chosen_kind = kinds.select(f)
    view.accelerator = chosen_kind.name if chosen_kind else None
    return MachineView.of(f, chosen, keys=kinds.view_keys())  # the view of the facts just reconciled (the one constructor)


def report_facts(view: MachineView) -> Facts:
    """The facts a report carries, from the view: its ``reconciled`` section and the stable keys
    (``nvidia.driver_version``, ``nvidia.gpus``, ``rocm.version``, ``rocm.gpus`` ...) written with the values
    the view chose, every witness's own value kept beside them. The one place they are published (the
    pipeline's judge); the view's facts are not changed."""
    f = copy.deepcopy(view.facts)
    rec = view.to_reconciled()
    f.reconciled = rec
    for a in kinds.ALL:
        a.publish(f, view, rec)
    return f


# ---------------------------------------------------------------------------- the stable keys carry the view

def user_space_driver(view: MachineView) -> str | None:
    """The user-space driver's version (its management library, its tools): the view's driver version unless
    reconcile took it from the kernel module because no user-space witness answered (the first kind that has one)."""
    return next((v for a in kinds.ALL if (v := a.user_space_driver(view)) is not None), None)


def _unpublish(f: Facts) -> None:
    """Undo what an earlier reconcile wrote into torch's facts (a replayed report), so it is derived again (each
    kind undoes its own: ``Accelerator.derive``)."""
    t = f.torch
    if derived(t.sources.get("cudnn_version")):
        t.cudnn_version = t.sources.pop("cudnn_version").split("torch.backends.cudnn.version() ", 1)[-1].strip() or None


# ---------------------------------------------------------------------------- derivations


def _derive_peaks(f: Facts, matrix: Matrix, view: ReconciledFacts) -> None:
    """``peak_tflops`` / ``percent_of_peak`` of matmul results, from the kind whose devices the matrix's peaks know
    (``Accelerator.peak``: the peaks table, else its own measure)."""
    for r in f.kernels.results:
        if derived(r.extra.get("peak_source")):
            r.peak_tflops = r.percent_of_peak = None
            del r.extra["peak_source"]
        kind = next((k for k in kinds.with_device(r.device) if k.peaks), None)
        if r.kernel != "matmul" or r.tflops is None or kind is None or r.peak_tflops is not None:
            continue
        peak, source = kind.peak(f, view, r, matrix)
        if peak:
            r.peak_tflops = round(peak, 3)
            r.percent_of_peak = round(100.0 * r.tflops / peak, 1)
            r.extra["peak_source"] = DERIVED + source


def _derive_torch(f: Facts) -> None:
    """cuDNN's version in one form, the runtime's own ("9.10.2"): torch.backends.cudnn.version() answers an
    integer (91002 = 9.10.2; 8907 = 8.9.7 before cuDNN 9); the runtime wheels' files name "9.24.0.43"."""
    t = f.torch
    raw = t.cudnn_version
    if raw and raw.isdigit():
        v = int(raw)
        major, rest = (v // 10000, v % 10000) if v >= 90000 else (v // 1000, v % 1000)
        dotted = f"{major}.{rest // 100}.{rest % 100}"
        files = t.runtime_versions.get("cudnn")
        t.cudnn_version = files if files and (files == dotted or files.startswith(dotted + ".")) else dotted
        t.sources["cudnn_version"] = DERIVED + "torch.backends.cudnn.version() " + raw


# ---------------------------------------------------------------------------- evidence


# (regex, the finding it proves): matched line by line against torch's messages, the kernel pass's errors and
# the kinds' tool errors, after each kind's own (``Accelerator.recognised``). Each is a message the runtime prints
# when that fault is the cause; the sources are in tests/fixtures/real/*/source.md.
_RECOGNISED: tuple[tuple[re.Pattern[str], str], ...] = (
    # a library loaded from elsewhere (or an older/newer copy) lacks a symbol torch was linked against
    (re.compile(r"(?P<lib>[\w./+-]*\.so[\w.]*): undefined symbol: (?P<symbol>[\w@.]+)"), "torch-lib-stale"),
)


def _texts(f: Facts) -> list[tuple[str, str]]:
    """The messages a finding may be proven by, each with where it was read."""
    texts: list[tuple[str, str]] = [m for a in kinds.ALL for m in a.torch_messages(f)]
    t = f.torch
    if t.import_error:
        texts.append(("torch.import_error", t.import_error))
    k = f.kernels
    if k.error:
        texts.append(("kernels.error", k.error))
    if k.stderr_tail:
        texts.append(("kernels.stderr_tail", k.stderr_tail))
    for i, r in enumerate(k.results):
        if r.error:
            texts.append((f"kernels.results[{i}].error", r.error))
    texts.extend(m for a in kinds.ALL for m in a.tool_messages(f))
    return texts


RUNTIME_ERROR = "runtime-error-code"  # the evidence of an error number (compat_matrix/runtime_errors.yaml)


def _error_codes(texts: list[tuple[str, str]], matrix: Matrix | None) -> list[Evidence]:
    """The CUDA runtime's, CUDA driver's or HIP's error each message names (a number, an enum name, the runtime's words,
    c10's sentence), judged from the matrix's ``runtime_errors`` row (:mod:`stackdoctor.kinds.runtime_errors`)."""
    from stackdoctor.kinds.runtime_errors import read_text

    rows = (matrix.table("runtime_errors") if matrix is not None else None) or ()
    out: list[Evidence] = []
    for source, text in texts:
        for found in read_text(text, rows):
            r = found.row
            values = {"api": found.api, "number": "" if found.number is None else str(found.number), "name": found.name or "?"}
            if r is not None:
                values.update(layer=r.layer, witness=r.witness, fix=r.fix, meaning=r.meaning, table_source=r.source)
            out.append(Evidence(proves=RUNTIME_ERROR, source=source, line=found.line.strip()[:500], values=values))
    return out


def recognise(f: Facts, matrix: Matrix | None = None) -> list[Evidence]:
    """Messages that prove a finding, with the line quoted: torch's init message for a device, its import error,
    the kernel pass's errors and the kinds' tool errors; with a matrix, every error number they name too. An
    unrecognised message stays what it was."""
    texts = _texts(f)
    patterns = [(p, proves, a) for a in kinds.ALL for p, proves in a.recognised()] + [(p, proves, None) for p, proves in _RECOGNISED]
    out: list[Evidence] = []
    seen: set[tuple[str, str]] = set()
    for source, text in texts:
        for line in text.splitlines()[-400:]:
            line = line[:1000]  # real lines are short; the cap keeps every pattern linear on hostile input
            for pattern, proves, kind in patterns:
                m = pattern.search(line)
                if not m or (proves, source) in seen:
                    continue
                seen.add((proves, source))
                groups = m.groupdict()
                values = kind.evidence_values(groups) if kind is not None else {}
                for key in ("lib", "symbol"):
                    if groups.get(key):
                        values[key] = groups[key]
                out.append(Evidence(proves=proves, source=source, line=line.strip()[:500], values=values))
    return out + _error_codes(texts, matrix)


# ---------------------------------------------------------------------------- disagreements

def _kind(vendor: str) -> kinds.Accelerator:
    """The accelerator kind of ``vendor``'s devices: its tools, its kernel driver's list and its hiding variables."""
    acc = kinds.by_vendor(vendor)
    if acc is None:  # pragma: no cover - the built-in kinds are always registered
        raise LookupError(f"no accelerator kind for vendor {vendor!r}")
    return acc


def _disagreements(f: Facts, view: ReconciledFacts) -> list[Disagreement]:
    out = [d for a in kinds.ALL for d in a.driver_disagreements(view)]
    for g in view.gpus:
        acc = kinds.by_vendor(g.vendor)  # the witnesses of each kind's GPU fields that may disagree
        if acc is not None:
            out.extend(acc.gpu_disagreements(f, g, f"GPU{g.index} {g.name or ''}".strip()))
    out.extend(_count_disagreements(f, view))
    return out


def visible_entries(value: str, count: int) -> int:
    """How many of ``count`` GPUs a ``CUDA_VISIBLE_DEVICES``-style value leaves (CUDA stops at the first bad entry)."""
    v = value.strip()
    if v in ("", "-1", "NoDevFiles", "none", "void"):
        return 0
    seen: list[str] = []
    for tok in (x.strip() for x in v.split(",")):
        if re.fullmatch(r"\d+", tok):
            if int(tok) >= count or tok in seen:
                break
        elif not tok.upper().startswith(("GPU-", "MIG-")):
            break
        seen.append(tok)
    return len(seen)


def _count_disagreements(f: Facts, view: ReconciledFacts) -> list[Disagreement]:
    """torch's device count against the driver's: the tools' list, else the kernel's (outside a container,
    where /proc and /sys show the host's GPUs). What explains a difference is kept beside it."""
    t = f.torch
    acc = next((a for a in kinds.ALL if a.counts_torch(t)), None)  # the kind torch's device count is of
    if acc is None or t.device_count is None:
        return []
    counted, witness = _driver_count(view, acc)
    if not counted or t.device_count == len(counted):
        return []
    why = _count_why(f, acc, len(counted), witness)
    explained = why if why and "(leaves" not in why else None
    d = Disagreement("gpu.count", {witness: str(len(counted)), "torch": str(t.device_count)}, f"{acc.vendor} GPUs", explained)
    if why and explained is None:
        d.note = f"{acc.vendor} GPUs; {why}"
    return [d]


def _driver_count(view: ReconciledFacts, acc: kinds.Accelerator) -> tuple[list[GpuView], str]:
    """The GPUs of kind ``acc`` its driver lists and the witness that listed them: its tools, else its kernel driver's list."""
    gpus = [g for g in view.gpus if g.vendor == acc.vendor]
    tools = [g for g in gpus if set(g.witnesses) & set(acc.tool_witnesses)]
    if tools:
        return tools, "/".join(w for w in acc.tool_witnesses if any(w in g.witnesses for g in tools))
    kernel = [g for g in gpus if acc.kernel_witness in g.witnesses]
    if kernel and acc.kernel_witness:
        return kernel, acc.kernel_witness
    return [], ""


def _count_why(f: Facts, acc: kinds.Accelerator, count: int, witness: str) -> str | None:
    """What explains torch counting another number of GPUs than the driver: a hiding variable, else what the kind
    knows (MIG, a container)."""
    t, env = f.torch, f.environment
    for var in acc.hiding():
        if var in env:
            left = visible_entries(env[var], count)
            return f"{var}={env[var]}" if t.device_count == left else f"{var}={env[var]} (leaves {left})"
    return acc.count_note(f, witness)
