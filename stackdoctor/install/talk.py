"""How the transaction talks: a line that cannot be shown (a closed pipe or terminal) never stops it; it is kept in
the journal's log and in the prefix, and the next run says it."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from stackdoctor.install.journal import Journal

if TYPE_CHECKING:  # pragma: no cover
    pass


def never_raises(say: Callable[[str], None], lost: Callable[[str], None] | None = None) -> Callable[[str], None]:
    """``say`` that never raises: a closed pipe or terminal (EPIPE, EIO; rich's ``SystemExit`` on a broken pipe)
    must not stop a put-back or a commit. What could not be shown goes to ``lost`` (the journal's log)."""

    def safe(line: str) -> None:
        try:
            say(line)
        except (Exception, SystemExit):  # noqa: BLE001 - a message that cannot be shown must not change what is done
            if lost is not None:
                try:
                    lost(line)
                except Exception:  # noqa: BLE001
                    pass

    return safe


class Say:
    """The transaction's one way to talk (:func:`never_raises`): a line that cannot be shown is kept in ``lost`` and
    in the journal's log (``Journal.unprinted``, fsync'd), so a closed pipe never stops the transaction and the next
    run can say it."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self.lost: list[str] = []
        self.journal: Journal | None = None
        self._safe = never_raises(say, self._lose)

    def __call__(self, line: str) -> None:
        self._safe(line)

    def _lose(self, line: str) -> None:
        self.lost.append(line)
        j = self.journal
        if j is not None and os.path.isdir(j.dir):
            j.unprinted.append(line)
            j.write()


def talker(say: Callable[[str], None] | None) -> Say:
    return say if isinstance(say, Say) else Say(say or (lambda line: print(line, file=sys.stderr, flush=True)))


UNPRINTED_FILE = ".stackdoctor-unprinted.json"  # in the prefix: what an install could not print, said by the next run


def save_unprinted(prefix: str, lines: Sequence[str]) -> None:
    """Keep what could not be printed (its output was closed) for the next install into ``prefix`` to say."""
    if not prefix or not lines:
        return
    try:
        old = take_unprinted(prefix, remove=False)
        tmp = os.path.join(prefix, UNPRINTED_FILE + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"when": time.time(), "lines": [*old, *lines][-60:]}, f)
        os.replace(tmp, os.path.join(prefix, UNPRINTED_FILE))
    except OSError:
        pass


def mark_said(prefix: str) -> None:
    """``check`` showed the kept lines (its ``install-unprinted`` finding): the file says so, and later checks let them
    go (no finding, so ``--strict`` does not fail on them again); the next install still says them and removes it.
    Lines kept after this are new, and shown again (:func:`save_unprinted` writes the file without the mark)."""
    path = os.path.join(prefix, UNPRINTED_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or data.get("said"):
            return
        data["said"] = time.time()
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except (OSError, ValueError):
        pass


def take_unprinted(prefix: str, *, remove: bool = True) -> list[str]:
    """The lines an earlier install into ``prefix`` could not print (its ``save_unprinted``), removed once read."""
    path = os.path.join(prefix, UNPRINTED_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return []
    if remove:
        with contextlib.suppress(OSError):
            os.unlink(path)
    lines = data.get("lines") if isinstance(data, dict) else None
    return [str(x) for x in lines if isinstance(x, str)] if isinstance(lines, list) else []


def say_unprinted(prefix: str, say: Callable[[str], None]) -> None:
    """At the start of a run: what the last install into ``prefix`` could not print, said now."""
    lines = take_unprinted(prefix)
    if lines:
        say(f"stackdoctor: the last install into {prefix} could not print its last lines (its output was closed); they were:")
        for line in lines:
            say(f"  {line}")


def stderr_writer(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
