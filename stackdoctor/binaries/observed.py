"""A reader of files whose answer is kept with every question it asked of the file system (issue 33).

The linkage walk (:mod:`stackdoctor.binaries.linkage`) reads only files: which exist, what a folder holds, where a link
leads, and the bytes of the libraries it opens. Its answer is therefore the same for as long as every one of those
questions gets the same answer. :class:`Observing` stands in for the :class:`~stackdoctor.system.System` it is given:
it answers from that System and writes each question down with what it saw; :func:`unchanged` asks them all again.
A file is seen by its identity (type, device, inode, size, modification and change times, in nanoseconds), so a
replaced, rewritten or touched file is a changed answer, and so is a library that appeared on a search path where
there was none. This is how ``make``, ccache and git decide "unchanged" without reading the bytes, with git's answer to
its "racy" case: a file modified within :data:`RACY_S` of being seen could change again within the file system's
timestamp granularity without its times moving, so such an observation is not kept (:meth:`Observing.settled`).
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Mapping
from typing import Any

from stackdoctor.system import System

RACY_S = 2.0  # a file modified this recently when it was seen is not trusted to stay the same by its times alone

Question = tuple[str, str]  # (what was asked: "stat" / "listdir" / "realpath", the machine path)


def identity(system: System, path: str) -> tuple[int, ...] | str:
    """What a file is now, as far as its metadata says, or the name of the error that stopped ``stat``."""
    try:
        st = os.stat(system.path(path))
    except (OSError, ValueError) as exc:
        return type(exc).__name__
    return (stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def answer(system: System, kind: str, path: str) -> Any:
    """The answer to one question, asked now."""
    if kind == "listdir":
        return tuple(system.listdir(path))
    if kind == "realpath":
        return system.realpath(path)
    return identity(system, path)


def unchanged(system: System, seen: Mapping[Question, Any]) -> bool:
    """Whether every question in ``seen`` gets the answer it got then."""
    try:
        return all(answer(system, kind, path) == was for (kind, path), was in seen.items())
    except Exception:  # a question that cannot be asked any more is a changed answer
        return False


class Observing:
    """The :class:`System` it wraps, for a reader of files; every file question it answers is kept in ``seen``.

    Only the questions a file reader asks are recorded (``is_file``, ``exists``, ``open_binary``, ``read_text``,
    ``listdir``, ``realpath``); ``path`` maps a machine path and asks nothing; anything else is the wrapped System's.
    """

    def __init__(self, system: System) -> None:
        self._system = system
        self.seen: dict[Question, Any] = {}
        self._started = time.time()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._system, name)

    def _saw(self, path: str) -> None:
        if ("stat", path) not in self.seen:
            self.seen[("stat", path)] = identity(self._system, path)

    def is_file(self, path: str) -> bool:
        self._saw(path)
        return self._system.is_file(path)

    def exists(self, path: str) -> bool:
        self._saw(path)
        return self._system.exists(path)

    def open_binary(self, path: str) -> Any:
        self._saw(path)
        return self._system.open_binary(path)

    def read_text(self, path: str, **kwargs: Any) -> Any:
        self._saw(path)
        return self._system.read_text(path, **kwargs)

    def listdir(self, path: str) -> list[str]:
        found = self._system.listdir(path)
        self.seen.setdefault(("listdir", path), tuple(found))
        return found

    def realpath(self, path: str) -> str:
        found = self._system.realpath(path)
        self.seen.setdefault(("realpath", path), found)
        return found

    def settled(self) -> bool:
        """Whether every file seen was last modified well before it was seen (else its answer is not kept)."""
        line = (self._started - RACY_S) * 1e9
        return all(not isinstance(v, tuple) or v[4] < line for (kind, _), v in self.seen.items() if kind == "stat")
