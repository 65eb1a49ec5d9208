"""Temporary directories lent to a target interpreter (:meth:`System.lend_package`): each marked with its owner,
removed when this process ends, and swept when an owner died without removing its own."""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import tempfile
import threading
import time

from stackdoctor.system.processes import process_alive, process_start

_LENT: list[str] = []  # temporary directories lent to targets (lend_package), removed at exit
_LENT_LOCK = threading.Lock()


def remember_lent(path: str) -> None:
    with _LENT_LOCK:
        if not _LENT:
            atexit.register(remove_lent)
        _LENT.append(path)


LENT_PREFIX = "stackdoctor-pkg-"  # the lent folders an earlier stackdoctor made for a target (a link to its packaging)
OWNER_FILE = ".stackdoctor-owner"  # in a lent directory: "<pid> <start time>" of the process that made it
UNOWNED_STALE_S = 6 * 3600.0  # a lent directory with no owner file (an older stackdoctor's) is stale after this


def mark_owner(d: str) -> None:
    try:
        with open(os.path.join(d, OWNER_FILE), "w", encoding="ascii") as f:
            f.write(f"{os.getpid()} {process_start(os.getpid()) or ''}\n")
    except OSError:
        pass


def owner_gone(d: str) -> bool:
    """Whether the process that made the lent directory ``d`` has ended (its pid gone, or reused by another)."""
    try:
        with open(os.path.join(d, OWNER_FILE), encoding="ascii") as f:
            words = f.read().split()
    except FileNotFoundError:
        try:
            return time.time() - os.lstat(d).st_mtime > UNOWNED_STALE_S
        except OSError:
            return False
    except OSError:
        return False
    if not words or not words[0].isdigit():
        return False
    pid = int(words[0])
    return pid != os.getpid() and not process_alive(pid, words[1] if len(words) > 1 else None)


def sweep_dead_lent(prefix: str) -> list[str]:
    """Remove the lent directories (``$TMPDIR/<prefix>*``) whose owner is gone: a stackdoctor killed by SIGKILL
    never ran its clean-up. A directory another live stackdoctor lent is left alone. Never raises."""
    removed = []
    for d in glob.glob(os.path.join(tempfile.gettempdir(), glob.escape(prefix) + "*")):
        try:
            if os.path.isdir(d) and not os.path.islink(d) and owner_gone(d):
                shutil.rmtree(d, ignore_errors=True)
                removed.append(d)
        except OSError:
            pass
    return removed


def lent_dirs() -> list[str]:
    """The temporary directories lent so far and not yet removed."""
    with _LENT_LOCK:
        return list(_LENT)


def remove_lent() -> None:
    """Remove every temporary directory :meth:`System.lend_package` made (the link inside is removed,
    never what it points to). Never raises; safe to call more than once."""
    with _LENT_LOCK:
        dirs = list(_LENT)
        _LENT.clear()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
