"""Rules about the kernel driver and its user-space library: what its witnesses say against each other (a kind's own
driver findings, a missing driver, a library that does not match it, /dev/kfd, are its package's ``rules.py``)."""

from __future__ import annotations

from collections.abc import Callable

from stackdoctor import kinds
from stackdoctor.model.facts import Disagreement
from stackdoctor.reconcile import DERIVED
from stackdoctor.rules.core import Ctx, rule


@rule("source-conflict", severity="warn", layer="driver", defers_to=("driver-library-mismatch",))
def source_conflict(ctx: Ctx) -> None:
    f = ctx.view
    for a in kinds.ALL:  # what a kind's own witnesses of its driver say against each other
        a.source_conflicts(ctx)
    for d in f.disagreements:
        said = _DISAGREEMENT_SENTENCES.get(d.subject)
        if said is not None:
            said(ctx, d)


def _cc_disagreement(ctx: Ctx, d: Disagreement) -> None:
    measured = {w: v for w, v in d.values.items() if not w.startswith(DERIVED)}
    lookup = next((v for w, v in d.values.items() if w.startswith(DERIVED)), None)
    if lookup is not None and len(set(measured.values())) == 1:
        # one measured value (torch, nvidia-smi) against the matrix's name lookup: the matrix is wrong for this name
        ctx.add(
            detail="lookup",
            fix="lookup",
            facts=["reconciled.disagreements", "reconciled.gpus"],
            gpu=d.note or "GPU",
            lookup=lookup,
            measured=next(iter(measured.values())),
            witnesses=", ".join(sorted(measured)),
        )
        return
    ctx.add(
        detail="observed",
        fix="observed",
        facts=["reconciled.disagreements"],
        key=f"compute capability of {d.note}" if d.note else "compute capability",
        values="; ".join(f"{src.removeprefix(DERIVED)}: {val}" for src, val in sorted(d.values.items())),
    )


def _gfx_disagreement(ctx: Ctx, d: Disagreement) -> None:
    if d.explained_by is None:
        ctx.add(
            detail="observed",
            fix="observed",
            facts=["reconciled.disagreements"],
            key=f"gfx target of {d.note}" if d.note else "gfx target",
            values="; ".join(f"{src}: {val}" for src, val in sorted(d.values.items())),
        )


def _count_disagreement(ctx: Ctx, d: Disagreement) -> None:
    if d.explained_by is not None:
        return
    witness = next((w for w in d.values if w != "torch"), "?")
    hidden = d.note.split("; ", 1)[1] if d.note and "; " in d.note else None
    ctx.add(
        detail="count_hidden" if hidden else "count",
        fix="count",
        facts=["torch.device_count", "reconciled.gpus", "reconciled.disagreements"],
        torch_count=d.values.get("torch", "?"),
        witness=witness,
        count=d.values.get(witness, "?"),
        hidden=hidden or "",
    )


# the disagreements between witnesses that driver-source-conflict says (the others are their own findings, or explained)
_DISAGREEMENT_SENTENCES: dict[str, Callable[[Ctx, Disagreement], None]] = {
    "gpu.compute_capability": _cc_disagreement,
    "gpu.gfx": _gfx_disagreement,
    "gpu.count": _count_disagreement,
}
