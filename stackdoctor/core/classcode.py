"""The compiled code of the methods ``dataclasses`` writes, kept between runs (issue 33).

A ``@dataclass`` writes the source of its ``__init__``, ``__repr__``, ``__eq__`` (and, frozen, ``__setattr__``,
``__delattr__``, ``__hash__``) as text and ``exec``-s it; on CPython 3.11 compiling those texts was a quarter of a
``check --no-kernels`` (~90 ms of ~370 ms CPU for the ~100 classes it makes). The text of a class's methods depends only
on the class's declaration, so its compiled code can be kept: :func:`install` gives the ``dataclasses`` module an
``exec`` of its own (a module global shadows the builtin) that looks the text up and compiles it only the first
time, exactly as ``exec`` would (filename ``<string>``, no ``__future__`` flags inherited); the classes, their
methods and their globals are made at import as before. :func:`save` (called by the CLI before it exits) writes what
this run compiled to ``<cache dir>/classcode-<python>.marshal``, read next time under :mod:`stackdoctor.core.cachefiles`'
rules (this user's own file in this user's own folder, else ignored) and only by the same interpreter build. A
missing, foreign or unreadable file is a miss: the texts are compiled, as without it. ``STACKDOCTOR_NO_CACHE=1``
turns it off.
"""

from __future__ import annotations

import builtins
import marshal
import sys
from pathlib import Path
from types import CodeType
from typing import Any

from stackdoctor.core import cachefiles

MAX_ENTRIES = 4000  # a file past this (texts of many stackdoctor versions) is rewritten with this run's texts alone
MAX_BYTES = 8 << 20

_CODES: dict[str, CodeType] = {}
_USED: set[str] = set()
_STATE = {"installed": False, "compiled": 0}


def path() -> Path:
    """This interpreter build's file (marshal's format and the compiler's output are fixed within one build)."""
    tag = f"{sys.implementation.cache_tag or sys.implementation.name}-{sys.hexversion:x}"
    return cachefiles.cache_dir() / f"classcode-{tag}.marshal"


def _exec(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> None:
    """``exec`` for ``dataclasses``: a text it compiled before runs from its kept code."""
    if type(source) is not str or kwargs:
        return builtins.exec(source, globals, locals, **kwargs)
    code = _CODES.get(source)
    if code is None:
        code = compile(source, "<string>", "exec", dont_inherit=True)  # as exec(text) in dataclasses.py would
        _CODES[source] = code
        _STATE["compiled"] += 1
    _USED.add(source)
    return builtins.exec(code, globals, locals)


def _load() -> None:
    raw = cachefiles.read_private(path(), MAX_BYTES)
    if raw is None:
        return
    try:
        kept = marshal.loads(raw)
    except (EOFError, ValueError, TypeError):
        return
    if isinstance(kept, dict) and all(type(k) is str and type(v) is CodeType for k, v in kept.items()):
        _CODES.update(kept)


def install() -> None:
    """Give ``dataclasses`` the keeping ``exec`` (once; nothing when the cache is off or this is not CPython)."""
    if _STATE["installed"] or not cachefiles.enabled() or sys.implementation.name != "cpython":
        return
    import dataclasses

    _STATE["installed"] = True
    _load()
    dataclasses.exec = _exec  # type: ignore[attr-defined]


def counts() -> tuple[int, int]:
    """(texts known, texts this run compiled since the last :func:`save`)."""
    return len(_CODES), _STATE["compiled"]


def save() -> None:
    """Write the kept code when this run compiled a text the file lacked; a failure only loses the speed-up."""
    if not _STATE["compiled"]:
        return
    keep = _CODES if len(_CODES) <= MAX_ENTRIES else {k: _CODES[k] for k in _USED}
    try:
        data = marshal.dumps(keep)
    except ValueError:
        return
    if len(data) <= MAX_BYTES:
        cachefiles.write_private(path(), data, stale="classcode-*.marshal")
    _STATE["compiled"] = 0
