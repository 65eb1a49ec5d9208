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

from stackdoctor.matrix.errors_table import RuntimeError_

_NAME = re.compile(r"\b((?:cuda|hip)Error[A-Z]\w*|CUDA_ERROR_[A-Z0-9_]+)\b")
_NUMBER = re.compile(
    r"\bError (?P<a>\d{1,5}): (?P<msg>[^()\n]+?)(?=\s*\(Triggered internally|\s*$|\s*\(function )"
    r"|\b(?:cuda|hip) runtime error \((?P<b>\d{1,5})\)(?: : (?P<msg2>[^\n]+?)(?= at |$))?"
    r"|\berror=(?P<c>\d{1,5}) : (?P<msg3>[^\n]+?)\s*$"
    r"|\bCUDA failure (?P<d>\d{1,5}): (?P<msg4>[^\n]+?)\s*$"
    r"|\((?P<e>\d{1,5}) vs\. 0\)"
    r"|\bcudaGetDeviceCount returned (?P<f>\d{1,5})\b",
    re.I,
)
_MESSAGE = re.compile(r"\b(?:CUDA|HIP) error: (?P<msg>[^\n]+?)\s*$")
_HIP = re.compile(r"\bhip|\bHIP\b|ROCm", re.I)
_GPU_CONTEXT = re.compile(r"cuda|\bhip|\bTH[CH]\b|THCudaCheck", re.I)  # the line says whose error number it is


CUDA_APIS = ("cuda-runtime", "cuda-driver")  # the APIs whose answer is NVIDIA's driver's (the others: HIP's, AMD's)


@dataclass(frozen=True)
class Found:
    """An error read from a line: its API, number and name, the row that judges it (None: a number the table lacks)."""

    api: str
    number: int | None
    name: str | None
    row: RuntimeError_ | None
    line: str


def _api_of(name: str) -> str:
    return "hip" if name.startswith("hip") else "cuda-driver" if name.startswith("CUDA_ERROR_") else "cuda-runtime"


def read_line(line: str, rows: Sequence[RuntimeError_]) -> Found | None:
    """The error one line of torch's text names, judged from ``rows``; None when it names none."""
    m = _NAME.search(line)
    if m:
        name = m.group(1)
        row = next((r for r in rows if r.name == name), None)
        return Found(_api_of(name), row.number if row else None, name, row, line)
    api = "hip" if _HIP.search(line) else "cuda-runtime"
    n = _NUMBER.search(line) if _GPU_CONTEXT.search(line) else None  # a bare "Error 12: ..." of another library is not CUDA's
    if n:
        number = int(next(g for g in (n.group(k) for k in "abcdef") if g is not None))
        row = next((r for r in rows if r.api == api and r.number == number), None)
        return Found(api, number, row.name if row else None, row, line)
    msg = _MESSAGE.search(line)
    said = msg.group("msg").strip().rstrip(".").lower() if msg else None
    said_api = "hip" if msg and msg.group(0).upper().startswith("HIP") else "cuda-runtime"
    for r in rows:
        if said and r.message and r.api == said_api and said == r.message.rstrip(".").lower():
            return Found(r.api, r.number, r.name, r, line)
        if any(s in line for s in r.torch_says):
            return Found(r.api, r.number, r.name, r, line)
    return None


def read_text(text: str, rows: Sequence[RuntimeError_]) -> list[Found]:
    """Every distinct error ``text`` names, in the order met (the last 400 lines, each capped: bounded on any input)."""
    out: list[Found] = []
    seen: set[tuple[str, int | None, str | None]] = set()
    for line in text.splitlines()[-400:]:
        found = read_line(line[:1000], rows)
        if found is not None and (found.api, found.number, found.name) not in seen:
            seen.add((found.api, found.number, found.name))
            out.append(found)
    return out
