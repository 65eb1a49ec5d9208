"""The ``runtime_errors`` table (issue 42): the CUDA runtime's, the CUDA driver's and HIP's error numbers, each with its
name, meaning, the layer of the stack it points to, what its answer proves about the machine and the key of its fix.
Declared here, beside its row, and registered in :data:`stackdoctor.matrix.tables.TABLES`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from stackdoctor.matrix.reader import Ctx, LDict
from stackdoctor.matrix.table import NOTE, SOURCE, Field, Table, one_row

APIS = ("cuda-runtime", "cuda-driver", "hip")
LAYERS = ("driver", "fabric-manager", "device", "runtime", "library", "user")
WITNESSES = ("driver", "library", "none")


@dataclass(frozen=True)
class RuntimeError_:
    """One error number of one API (``cudaError_t``, ``CUresult``, ``hipError_t``) from its header."""

    api: str  # "cuda-runtime" | "cuda-driver" | "hip"
    number: int
    name: str  # the enum name: "cudaErrorSystemNotReady"
    layer: str  # the layer it points to: driver | fabric-manager | device | runtime | library | user
    witness: str  # what the answer proves: driver (a real driver answered) | library (a stub) | none
    fix: str  # the key of its fix sentence (locale: runtime-error-code fix.<key>)
    meaning: str
    source: str
    message: str | None = None  # the runtime's own string for it (cudaGetErrorString), as torch prints it
    torch_says: tuple[str, ...] = ()  # c10's own sentences for it, where c10 writes no number
    note: str | None = None


def _choice(ctx: Ctx, d: LDict, key: str, where: str, allowed: tuple[str, ...]) -> str:
    v = ctx.text(d, key, where, required=True) or ""
    if v not in allowed:
        raise ctx.fail(ctx.line_of(d, key), f"{where}.{key}", f"must be one of {', '.join(allowed)}, not {v!r}")
    return v


def _row(ctx: Ctx, d: LDict, where: str, _key: str) -> tuple[RuntimeError_]:
    number = d.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise ctx.fail(ctx.line_of(d, "number"), f"{where}.number", "expected the error's number (an integer >= 0)")
    name = ctx.text(d, "name", where, required=True) or ""
    if not re.fullmatch(r"(cuda|hip)Error\w+|CUDA_ERROR_[A-Z0-9_]+", name):
        raise ctx.fail(ctx.line_of(d, "name"), f"{where}.name", f"not an error enum name: {name!r}")
    fix = ctx.text(d, "fix", where, required=True) or ""
    if not re.fullmatch(r"[a-z][a-z-]*", fix):
        raise ctx.fail(ctx.line_of(d, "fix"), f"{where}.fix", f"not a fix key (lower-case words joined by '-'): {fix!r}")
    return one_row(RuntimeError_(
        api=_choice(ctx, d, "api", where, APIS),
        number=number,
        name=name,
        layer=_choice(ctx, d, "layer", where, LAYERS),
        witness=_choice(ctx, d, "witness", where, WITNESSES),
        fix=fix,
        meaning=ctx.text(d, "meaning", where, required=True) or "",
        source=ctx.text(d, "source", where, required=True) or "",
        message=ctx.text(d, "message", where),
        torch_says=ctx.strings(d, "torch_says", where),
        note=ctx.text(d, "note", where),
    ))


RUNTIME_ERRORS: Table[RuntimeError_] = Table(
    key="runtime_errors",
    summary="CUDA runtime / CUDA driver / HIP error numbers -> the layer they point to and the fix (runtime_errors.yaml)",
    shape="list",
    fields=(
        Field("api", "string, required", "`cuda-runtime` (cudaError_t), `cuda-driver` (CUresult) or `hip` (hipError_t)"),
        Field("number", "integer, required", "the enum's value: `802`"),
        Field("name", "string, required", "the enum's name: `cudaErrorSystemNotReady`"),
        Field("layer", "string, required", "the layer it points to: " + " | ".join(LAYERS)),
        Field("witness", "string, required", "what the answer proves: `driver` (a real driver answered), `library` (a stub library), `none`"),
        Field("fix", "string, required", "the key of its fix sentence (`runtime-error-code` in the locale files)"),
        Field("meaning", "string, required", "the header's words for it"),
        Field("message", "string", "the runtime's own string for it, as torch prints it (`system not yet initialized`)"),
        Field("torch_says", "list", "c10's own sentences for it where c10 prints no number"),
        SOURCE, NOTE,
    ),
    parse=_row,
    key_of=lambda r: (r.api, r.number),
    holds="tuple",
    layering="by (`api`, `number`)",
    doc=(
        "```yaml\n"
        "runtime_errors:\n"
        "  - {api: cuda-runtime, number: 802, name: cudaErrorSystemNotReady, layer: fabric-manager, witness: driver,\n"
        "     fix: fabric-manager, message: \"system not yet initialized\", meaning: \"...\", source: \"...\"}\n"
        "```\n"
        "\n"
        "`stackdoctor/kinds/runtime_errors.py` reads a number (`Error 802`, `cuda runtime error (802)`, `error=802`), an enum name\n"
        "(`cudaErrorSystemNotReady`, `CUDA_ERROR_SYSTEM_NOT_READY`), the runtime's message or c10's sentence from torch's text,\n"
        "and the rules judge from the row: a driver stack that answered with an error is never \"no GPU\"."
    ),
)
