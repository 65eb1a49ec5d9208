"""stackdoctor's own cache and state files: where they live, and the ONE way every one of them is read and written
(issue 44), so that no file another user could have written is ever read (what is read from them runs: unpickled
objects, compiled code; or changes a plan: an index page) and nothing read can hang or flood a run.

A cache file is read only through :func:`read_private`: its folder is opened with ``O_NOFOLLOW | O_DIRECTORY`` and
``fstat``-ed (this user's, writable by no one else), the file is opened *in that folder* with
``O_NOFOLLOW | O_NONBLOCK`` (a link is refused, a FIFO never blocks ``open``) and ``fstat``-ed on the descriptor: a
regular file owned by this user, not group- or other-writable, at most the caller's cap; then at most cap + 1 bytes
are read. Anything else is ignored (a miss, as if absent), and removed when this user owns it (a FIFO, a link, an
oversized or loosened file of ours: nothing the next run could use). Folders are made 0700. An existing folder of
ours that others may read but not write, and that stackdoctor named itself (``stackdoctor``, ``index-pages``: a
0755 ``~/.cache/stackdoctor`` an older version made), is tightened to 0700 on the descriptor before use; any other
looser folder (one others may write in, a sticky ``/tmp``, a folder the user named in ``STACKDOCTOR_CACHE_DIR`` and
left 0755) and any folder another user owns or a link names is not used at all: nothing read, nothing written,
nothing changed. Used by :mod:`stackdoctor.core.parsecache`, :mod:`stackdoctor.core.classcode` and the index page cache
(:class:`stackdoctor.wheels.index.PageCache`); imports nothing of stackdoctor (the package's ``__init__`` reaches it).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

_DIR_FD = os.open in os.supports_dir_fd and hasattr(os, "O_DIRECTORY")
OWN_NAMES = ("stackdoctor", "index-pages")  # the folders stackdoctor names itself: the only ones it ever tightens


def enabled() -> bool:
    """False under ``STACKDOCTOR_NO_CACHE=1``."""
    return os.environ.get("STACKDOCTOR_NO_CACHE", "") in ("", "0")


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """As :func:`stackdoctor.wheels.index.cache_dir` (not imported: the index module is not needed to check)."""
    e = os.environ if env is None else env
    if e.get("STACKDOCTOR_CACHE_DIR"):
        return Path(e["STACKDOCTOR_CACHE_DIR"])
    if e.get("XDG_CACHE_HOME"):
        return Path(e["XDG_CACHE_HOME"]) / "stackdoctor"
    return Path(e.get("HOME") or os.path.expanduser("~")) / ".cache" / "stackdoctor"


def _ours(st: os.stat_result) -> bool:
    """Owned by this user (POSIX; elsewhere the folder's own protection stands)."""
    return not hasattr(os, "getuid") or st.st_uid == os.getuid()


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (POSIX; elsewhere the folder's own protection stands)."""
    return _ours(st) and (not hasattr(os, "getuid") or not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _flags(*names: str) -> int:
    out = 0
    for n in names:
        out |= getattr(os, n, 0)
    return out


def open_folder(folder: Path, *, create: bool = False) -> int | None:
    """A descriptor on ``folder`` when it is a real folder (not a link) of this user's, made (0700) when ``create``
    and absent; a looser folder of ours is tightened to 0700 first; another user's folder is None (not used)."""
    if create:
        missing = [folder, *(p for p in folder.parents)]
        missing = missing[: next((i for i, p in enumerate(missing) if os.path.lexists(p)), len(missing))]
        try:
            for p in reversed(missing):  # every folder made here is 0700, the cache folder's parents too
                p.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return None
    try:
        fd = os.open(folder, _flags("O_RDONLY", "O_DIRECTORY", "O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC"))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode) or not _ours(st):
            os.close(fd)
            return None
        mode = stat.S_IMODE(st.st_mode)
        if hasattr(os, "fchmod") and mode & 0o077:
            if mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_ISVTX) or folder.name not in OWN_NAMES:
                os.close(fd)  # others may write in it, or it is a folder the user named (/tmp, $HOME): not used, not changed
                return None
            os.fchmod(fd, 0o700)  # stackdoctor's own folder, readable by others (an older version's): tightened first
        return fd
    except OSError:
        os.close(fd)
        return None


def _open_in(dfd: int | None, path: Path, flags: int, mode: int = 0o600) -> int:
    if dfd is not None and _DIR_FD:
        return os.open(path.name, flags, mode, dir_fd=dfd)
    return os.open(path, flags, mode)


def _remove_if_ours(dfd: int | None, path: Path) -> None:
    """Unlink ``path`` when this user owns the entry itself (a link is not followed); anything else stays."""
    try:
        if dfd is not None and _DIR_FD:
            if _ours(os.stat(path.name, dir_fd=dfd, follow_symlinks=False)):
                os.unlink(path.name, dir_fd=dfd)
        elif _ours(os.lstat(path)):
            os.unlink(path)
    except OSError:
        pass


def read_private(path: Path, limit: int = 64 << 20) -> bytes | None:
    """The bytes of the cache file ``path`` when it is a regular file (not a link) that this user owns, in a folder
    this user owns, both writable by no one else, and at most ``limit`` bytes; else None (and the entry is removed
    when it is this user's). Never blocks (a FIFO), never reads more than ``limit`` + 1 bytes (``/dev/zero``)."""
    dfd = open_folder(path.parent) if _DIR_FD else None
    if _DIR_FD and dfd is None:
        return None
    try:
        data = _read_in(dfd, path, limit)
        if data is None:
            _remove_if_ours(dfd, path)
        return data
    except FileNotFoundError:
        return None
    finally:
        if dfd is not None:
            os.close(dfd)


def _read_in(dfd: int | None, path: Path, limit: int) -> bytes | None:
    """None for anything but this user's own regular file within ``limit`` (a link: ELOOP, a socket, a folder...)."""
    try:
        fd = _open_in(dfd, path, _flags("O_RDONLY", "O_NOFOLLOW", "O_NONBLOCK", "O_NOCTTY", "O_CLOEXEC", "O_BINARY"))
    except FileNotFoundError:
        raise
    except OSError:
        return None
    try:
        return _read_fd(fd, limit)
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int) -> bytes | None:
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > limit:
            return None
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            part = os.read(fd, min(left, 1 << 20))
            if not part:
                break
            chunks.append(part)
            left -= len(part)
        return None if left <= 0 else b"".join(chunks)
    except OSError:
        return None


def write_private(path: Path, data: bytes, *, stale: str | None = None) -> None:
    """``data`` into ``path`` atomically (0600), in a folder readable by this user alone (made 0700 if need be);
    files matching the glob ``stale`` beside it, other than ``path``, are removed once a week old. A failure only
    loses a speed-up; a folder another user owns is never written to."""
    folder = path.parent
    dfd = open_folder(folder, create=True)
    if dfd is None:
        return
    try:
        if stale is not None:
            week_ago = time.time() - 7 * 86400
            for old in folder.glob(stale):  # other keys' files (other versions, checkouts): kept a week
                try:
                    if old.name != path.name and old.lstat().st_mtime < week_ago:
                        old.unlink(missing_ok=True)
                except OSError:
                    pass
        tmp = folder / f"{path.stem}-{os.getpid()}-{time.monotonic_ns()}.tmp"
        fd = _open_in(dfd, tmp, _flags("O_WRONLY", "O_CREAT", "O_EXCL", "O_NOFOLLOW", "O_CLOEXEC", "O_BINARY"), 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            if _DIR_FD:
                os.replace(tmp.name, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                os.replace(tmp, path)
        except BaseException:
            _remove_if_ours(dfd, tmp)
            raise
    except Exception:
        pass
    finally:
        os.close(dfd)
