"""stackdoctor's own cache files: where they live, and reading and writing one so that no file another user could
have written is ever read (what is read from them runs: unpickled objects, compiled code). Used by
:mod:`stackdoctor.parsecache` (parsed shipped files) and :mod:`stackdoctor.classcode` (dataclasses' compiled methods);
imports nothing of stackdoctor (the package's ``__init__`` reaches it)."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path


def enabled() -> bool:
    """False under ``STACKDOCTOR_NO_CACHE=1``."""
    return os.environ.get("STACKDOCTOR_NO_CACHE", "") in ("", "0")


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """As :func:`stackdoctor.install.index.cache_dir` (not imported: the index module is not needed to check)."""
    e = os.environ if env is None else env
    if e.get("STACKDOCTOR_CACHE_DIR"):
        return Path(e["STACKDOCTOR_CACHE_DIR"])
    if e.get("XDG_CACHE_HOME"):
        return Path(e["XDG_CACHE_HOME"]) / "stackdoctor"
    return Path(e.get("HOME") or os.path.expanduser("~")) / ".cache" / "stackdoctor"


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (POSIX; elsewhere the folder's own protection stands)."""
    if not hasattr(os, "getuid"):
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read_private(path: Path, limit: int = 64 << 20) -> bytes | None:
    """The bytes of ``path`` when it is a regular file (not a link) that this user owns in a folder this user owns,
    both writable by no one else, and at most ``limit`` bytes; else None. What is read from it runs (unpickling,
    code), so anything another user could have written is never read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st) or not _private(os.stat(path.parent)) or st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)


def write_private(path: Path, data: bytes, *, stale: str | None = None) -> None:
    """``data`` into ``path`` atomically, in a folder readable by this user alone (made if need be); files matching
    the glob ``stale`` beside it, other than ``path``, are removed once a week old. A failure only loses a speed-up."""
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(os.stat(folder)):
            return
        if stale is not None:
            week_ago = time.time() - 7 * 86400
            for old in folder.glob(stale):  # other keys' files (other versions, checkouts): kept a week
                if old.name != path.name and old.stat().st_mtime < week_ago:
                    old.unlink(missing_ok=True)
        import tempfile  # only when a file is written

        fd, tmp = tempfile.mkstemp(prefix=path.stem + "-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:
        pass
