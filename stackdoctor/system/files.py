"""Bounded reads of regular files: every file a user, a configuration or a machine hands stackdoctor is read here."""

from __future__ import annotations

import errno
import os
import stat


class NotRegularFile(OSError):
    """A path that names a FIFO, socket, device or directory where a file was expected (see :func:`read_bounded`)."""


class TooLarge(OSError):
    """A file larger than the reader's cap (see :func:`read_bounded`)."""


def _kind_of(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def open_regular(path: str | os.PathLike[str]) -> int:
    """A read-only descriptor on ``path`` if it is a regular file (the caller closes it).

    Opened with ``O_NONBLOCK`` (a FIFO would block ``open`` itself until a writer came) and checked
    with ``fstat``. :raises NotRegularFile: a FIFO, device, socket or directory (its ``strerror``
    names which); any other ``OSError`` as ``open`` raises it."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except IsADirectoryError:
        raise NotRegularFile(errno.EISDIR, "is a directory") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(errno.EINVAL, "is a directory" if stat.S_ISDIR(mode) else f"it is {_kind_of(mode)}, not a regular file")
    return fd


def read_bounded(path: str | os.PathLike[str], max_bytes: int, *, too_large: bool = False) -> bytes:
    """At most ``max_bytes`` of the regular file ``path``: every read stackdoctor makes of a file a user,
    a configuration or a machine hands it goes through here (or :meth:`System.read_text`, which uses it).

    ``too_large``: a file larger than ``max_bytes`` raises :class:`TooLarge` instead of being cut.
    The size ``fstat`` gives is not trusted for the cut (``/proc`` and ``/sys`` files say 0).
    :raises NotRegularFile: a FIFO, device, socket or directory (never blocks, never floods)."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if too_large and size > max_bytes:
            raise TooLarge(errno.EFBIG, f"it is {size} bytes, more than the {max_bytes} a file of this kind can be")
        chunks: list[bytes] = []
        left = max_bytes
        while left > 0:
            try:
                part = os.read(fd, min(left, 1 << 20))
            except BlockingIOError:  # pragma: no cover - a regular file never says EAGAIN
                break
            if not part:
                break
            chunks.append(part)
            left -= len(part)
        if too_large and left <= 0 and os.read(fd, 1):
            raise TooLarge(errno.EFBIG, f"it is more than the {max_bytes} bytes a file of this kind can be")
        return b"".join(chunks)
    finally:
        os.close(fd)


def decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")
