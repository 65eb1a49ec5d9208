"""Which witness saw each reconciled value: the rows ``check -v`` and the Markdown report show.

One row per reconciled value (the NVIDIA driver, the newest CUDA it runs, each GPU's name, compute
capability or gfx target and PCI address), with the value kept, where it came from, and what every
witness said; then one row per disagreement and per recognised message. Pure: the machine's view in, strings out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stackdoctor import kinds
from stackdoctor.core.texts import ui
from stackdoctor.kinds.base import Say
from stackdoctor.model.facts import Facts, SeenValue
from stackdoctor.model.view import MachineView

DERIVED = "reconcile: "  # stackdoctor.reconcile.DERIVED (not imported: renderers sit above it, it sits below)
_FIELDS = (("name", "w_name"), ("compute_capability", "w_cc"), ("gfx", "w_gfx"), ("bus_id", "w_pci"), ("uuid", "w_uuid"))


@dataclass
class WitnessRow:
    what: str  # "NVIDIA driver", "GPU0 Tesla P4: compute capability"
    value: str  # the value kept ("-" when none)
    source: str  # where the kept value came from
    witnesses: str  # "nvidia-smi: 550.40.07; /proc/driver/nvidia/version: 550.40.07"
    kind: str = "value"  # "value" | "disagreement" | "evidence"


def _said(by: dict[str, str]) -> str:
    return "; ".join(f"{w.removeprefix(DERIVED)}: {v}" for w, v in sorted(by.items())) or "-"


def _seen(what: str, s: SeenValue) -> WitnessRow | None:
    if s.value is None and not s.witnesses:
        return None
    return WitnessRow(what, s.value or "-", (s.source or "-").removeprefix(DERIVED), _said(s.witnesses))


def driver_lines(view: MachineView, say: Say) -> list[tuple[str, str | None]]:
    """The driver layer of the screen and the Markdown stack, from one source: each kind's driver line, in priority
    order, with the note its driver's own tool adds (``Accelerator.driver_note``: nvidia-smi's state where it failed)."""
    f = view.facts
    return [(line, kind.driver_note(f)) for kind in kinds.ALL if (line := kind.driver_line(f, say))]


def toolkit_lines(facts: Facts) -> list[tuple[str, str | None]]:
    """The toolkit layer of the screen, the Markdown stack and the HTML report: each kind's compiler toolkit (tool and
    version, path), in priority order."""
    return [tk for kind in kinds.ALL if (tk := kind.toolkit(facts))]


def witness_rows(view: MachineView, lang: str = "en") -> list[WitnessRow]:
    """Every reconciled value with its witnesses, then the disagreements and the recognised messages (labels in ``lang``)."""
    seen = [(ui(k.witness_keys[0], lang), view.driver(k.name), ui(k.witness_keys[1], lang), view.runtime(k.name)) for k in kinds.ALL if k.witness_keys]
    rows = [r for driver, d, runtime, rt in seen for r in (_seen(driver, d), _seen(runtime, rt)) if r]
    for g in view.gpus:
        kind = kinds.by_vendor(g.vendor)
        label = f"{kind.vendor_label if kind is not None and kind.vendor_label else g.vendor.upper()} GPU{g.index}"
        rows.append(WitnessRow(label, g.name or "-", ui("w_seen_by", lang), ", ".join(g.witnesses) or "-"))
        for field, key in _FIELDS:
            value = getattr(g, field)
            said = g.seen.get(field, {})
            if value is None and not said:
                continue
            title = ui(key, lang)
            rows.append(WitnessRow(f"{label}: {title}", str(value) if value is not None else "-", g.sources.get(field, "-").removeprefix(DERIVED), _said(said)))
    for d in view.disagreements:
        why = ui("w_explained", lang, why=d.explained_by) if d.explained_by else ui("w_unexplained", lang)
        what = ui("w_disagreement", lang, subject=d.subject) + (f" ({d.note})" if d.note else "")
        rows.append(WitnessRow(what, why, "-", _said(d.values), "disagreement"))
    for e in view.evidence:
        rows.append(WitnessRow(ui("w_proves", lang, code=e.proves), e.line, e.source, _said(e.values), "evidence"))
    return rows


# facts.python.selected_by (stackdoctor.pipeline.which_python.RULES) -> its words
_CHOSEN_BY = {"--python": "target_by_flag", "VIRTUAL_ENV": "target_by_venv", "CONDA_PREFIX": "target_by_conda", ".venv": "target_by_dotvenv",
              "PATH": "target_by_path", "self": "target_by_self"}


def chosen_by(rule: str | None, say: Callable[..., str]) -> str:
    """Which rule chose the target interpreter, in words ("" for a report that does not say)."""
    key = _CHOSEN_BY.get(rule or "")
    return say("target_chosen", rule=say(key)) if key else ""
