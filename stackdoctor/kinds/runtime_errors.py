"""Numbers before words (issue 42): the CUDA runtime's, the CUDA driver's or HIP's error in torch's text, read as a row
of the matrix's ``runtime_errors`` table (``compat_matrix/runtime_errors.yaml``, from the headers of the releases torch
builds with), whatever the wording of the torch release that wrote it.

Pure: text in, rows out. What is read, in this order on each line:

- an enum name: ``cudaErrorSystemNotReady``, ``CUDA_ERROR_NOT_FOUND``, ``hipErrorInvalidDevice``;
- a number in the forms torch and the CUDA tools print: c10's ``Error 802: system not yet initialized`` (torch >= 1.5,
  ``Unexpected error from cudaGetDeviceCount()``), the THC era's ``cuda runtime error (802)`` and ``error=802``,
  ``CUDA failure 804:``, ``(46 vs. 0)``, ``cudaGetDeviceCount returned 35``;
- the runtime's own string (``CUDA error: named symbol not found``), matched to a row's ``message``;
- c10's own sentence where it prints no number (``CUDA driver initialization failed, you might not have a CUDA gpu.``
  is cudaErrorInitializationError), matched to a row's ``torch_says``.

A number no row names is still read (its row is None): the finding says the number, and that the table does not know it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from stackdoctor.kinds.for_lower import ErrorDialect
from stackdoctor.matrix.errors_table import RuntimeError_


@dataclass(frozen=True)
class _Grammar:
    names: tuple[tuple[re.Pattern[str], str], ...]
    numbers: tuple[re.Pattern[str], ...]
    messages: tuple[tuple[re.Pattern[str], str], ...]
    context: tuple[re.Pattern[str], ...]
    claims: tuple[tuple[re.Pattern[str], str], ...]
    fallback: str | None


@lru_cache(maxsize=8)
def _grammar(dialects: tuple[ErrorDialect, ...]) -> _Grammar:
    return _Grammar(
        names=tuple((re.compile(rf"\b(?:{rx})\b"), api) for d in dialects for rx, api in d.names),
        numbers=tuple(re.compile(rx, re.I) for d in dialects for rx in d.numbers),
        messages=tuple((re.compile(rf"{rx}(?P<msg>[^\n]+?)\s*$"), api) for d in dialects for rx, api in d.messages),
        context=tuple(re.compile(d.context, re.I) for d in dialects),
        claims=tuple((re.compile(d.claims, re.I), d.number_api) for d in dialects if d.claims is not None),
        fallback=next((d.number_api for d in dialects if d.claims is None), None),
    )


def _dialects() -> tuple[ErrorDialect, ...]:
    """Every kind's dialect, in the registry's order (the registry is this layer's; it loads the kinds lazily)."""
    from stackdoctor import kinds

    return tuple(dict.fromkeys(d for d in (k.runtime_error_dialect() for k in kinds.ALL) if d is not None))


def _first(patterns: Sequence[tuple[re.Pattern[str], str]], line: str) -> tuple[re.Match[str], str] | None:
    """The leftmost match of any of ``patterns`` in ``line`` (the first of them on a tie), with its API."""
    best: tuple[re.Match[str], str] | None = None
    for rx, api in patterns:
        m = rx.search(line)
        if m is not None and (best is None or m.start() < best[0].start()):
            best = (m, api)
    return best


@dataclass(frozen=True)
class Found:
    """An error read from a line: its API, number and name, the row that judges it (None: a number the table lacks)."""

    api: str
    number: int | None
    name: str | None
    row: RuntimeError_ | None
    line: str


def _numbered(line: str, rows: Sequence[RuntimeError_], g: _Grammar) -> Found | None:
    """The error a line names by its number, in one of the forms torch and the tools print."""
    api = next((a for rx, a in g.claims if rx.search(line)), g.fallback)
    n = _first([(rx, "") for rx in g.numbers], line) if any(rx.search(line) for rx in g.context) else None  # a bare "Error 12: ..." of another library is not the runtime's
    if not n:
        return None
    number = int(n[0].group("n"))
    row = next((r for r in rows if r.api == api and r.number == number), None)
    return Found(api or "", number, row.name if row else None, row, line)


def _said(line: str, rows: Sequence[RuntimeError_], g: _Grammar) -> Found | None:
    """The error a line names by the runtime's own string or by c10's sentence."""
    msg = _first(g.messages, line)
    said = msg[0].group("msg").strip().rstrip(".").lower() if msg else None
    said_api = msg[1] if msg else None
    for r in rows:
        if said and r.message and r.api == said_api and said == r.message.rstrip(".").lower():
            return Found(r.api, r.number, r.name, r, line)
        if any(s in line for s in r.torch_says):
            return Found(r.api, r.number, r.name, r, line)
    return None


def read_line(line: str, rows: Sequence[RuntimeError_], dialects: tuple[ErrorDialect, ...] | None = None) -> Found | None:
    """The error one line of torch's text names, judged from ``rows``; None when it names none."""
    g = _grammar(_dialects() if dialects is None else dialects)
    named = _first(g.names, line)
    if named:
        name = named[0].group(0)
        row = next((r for r in rows if r.name == name), None)
        return Found(named[1], row.number if row else None, name, row, line)
    return _numbered(line, rows, g) or _said(line, rows, g)


def read_text(text: str, rows: Sequence[RuntimeError_]) -> list[Found]:
    """Every distinct error ``text`` names, in the order met (the last 400 lines, each capped: bounded on any input)."""
    dialects = _dialects()
    out: list[Found] = []
    seen: set[tuple[str, int | None, str | None]] = set()
    for line in text.splitlines()[-400:]:
        found = read_line(line[:1000], rows, dialects)
        if found is not None and (found.api, found.number, found.name) not in seen:
            seen.add((found.api, found.number, found.name))
            out.append(found)
    return out
