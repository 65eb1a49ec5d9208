"""The folders an earlier stackdoctor lent a target interpreter (``$TMPDIR/stackdoctor-pkg-*``, a link to its own
packaging, each marked with its owner): today's target worker needs none, so none is made, but one a killed run left
behind is swept by the next run (:func:`sweep_dead_lent`) once its owner is gone."""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import time

from stackdoctor.system.processes import process_alive

LENT_PREFIX = "stackdoctor-pkg-"  # the lent folders an earlier stackdoctor made for a target (a link to its packaging)
OWNER_FILE = ".stackdoctor-owner"  # in a lent directory: "<pid> <start time>" of the process that made it
UNOWNED_STALE_S = 6 * 3600.0  # a lent directory with no owner file (an older stackdoctor's) is stale after this


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
