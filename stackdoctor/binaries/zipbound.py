"""Bounded reads of a zip (a wheel) from a file object: the number of entries and the size of the central directory
are checked BEFORE :mod:`zipfile` builds its directory (1.5 M empty entries made ``ZipFile`` hold 0.9 GB), and every
member is read with a cap on what it unpacks to (a RECORD that inflates to 2 GB drove a run to ``MemoryError``;
issue 44). Each refusal is one :class:`ZipRefused` sentence naming the file. Imports nothing of stackdoctor but its
errors (:mod:`stackdoctor.wheels.lazywheel`, :mod:`stackdoctor.wheels.learn_wheels` and :mod:`stackdoctor.wheels.mirrors`
read wheels through it)."""

from __future__ import annotations

import struct
import zipfile
import zlib
from typing import Any

from stackdoctor.core.errors import IndexError_

MAX_ENTRIES = 100_000  # a real torch wheel has ~12 000 members (ROCm's the most); ten times that is not a wheel
MAX_DIRECTORY_BYTES = 32 << 20  # its central directory is ~1.5 MB
MAX_RECORD_BYTES = 32 << 20  # a real torch RECORD is ~1.5 MB (one line per member)
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"


class ZipRefused(IndexError_):
    """A zip whose directory or a member is past a cap: not read further (one sentence)."""


def _read_at(fh: Any, pos: int, n: int) -> bytes:
    fh.seek(pos)
    return fh.read(n)


def _directory(fh: Any, size: int, what: str) -> tuple[int, int, int]:
    """(entries the end record claims, central directory offset, its size in bytes)."""
    tail_len = min(size, 65535 + 22)
    tail = _read_at(fh, size - tail_len, tail_len)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) - at < 22:
        raise ZipRefused(f"{what} is not a readable zip (no end of central directory).")
    count, cd_size, cd_offset = struct.unpack_from("<HII", tail, at + 10)
    loc = at - 20
    if loc >= 0 and tail[loc:loc + 4] == _EOCD64_LOCATOR:  # zip64: the real numbers are in the zip64 end record
        (rec_at,) = struct.unpack_from("<Q", tail, loc + 8)
        rec = _read_at(fh, rec_at, 56)
        if len(rec) == 56 and rec[:4] == b"PK\x06\x06":
            count, cd_size, cd_offset = struct.unpack_from("<QQQ", rec, 32)
    return count, cd_offset, cd_size


def check_directory(fh: Any, what: str, *, max_entries: int = MAX_ENTRIES, max_bytes: int = MAX_DIRECTORY_BYTES) -> None:
    """Refuse (:class:`ZipRefused`) a zip whose central directory holds more than ``max_entries`` entries or more than
    ``max_bytes`` bytes: what its end record claims, then the entries counted in the directory itself (a record
    that understates its count is caught too). Reads at most ``max_bytes`` + 64 KiB."""
    size = fh.seek(0, 2)
    count, cd_offset, cd_size = _directory(fh, size, what)
    if count > max_entries:
        raise ZipRefused(f"{what} lists {count} zip entries, more than the {max_entries} a wheel can have; not read.")
    if cd_size > max_bytes:
        raise ZipRefused(f"{what}: its zip directory is {cd_size // (1 << 20)} MiB, more than the {max_bytes // (1 << 20)} MiB a wheel's can be; not read.")
    cd = _read_at(fh, cd_offset, cd_size) if cd_offset + cd_size <= size else b""
    pos = seen = 0
    while pos + 46 <= len(cd) and cd[pos:pos + 4] == _CENTRAL:
        seen += 1
        if seen > max_entries:
            raise ZipRefused(f"{what} lists {seen} zip entries, more than the {max_entries} a wheel can have; not read.")
        n, m, k = struct.unpack_from("<HHH", cd, pos + 28)
        pos += 46 + n + m + k


def open_zip(fh: Any, what: str) -> zipfile.ZipFile:
    """``zipfile.ZipFile(fh)`` once :func:`check_directory` passed; a broken zip is one :class:`ZipRefused` too."""
    check_directory(fh, what)
    fh.seek(0)
    try:
        return zipfile.ZipFile(fh)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, struct.error) as exc:
        raise ZipRefused(f"{what} is not a readable zip ({exc}).") from None


def read_member(z: zipfile.ZipFile, member: str | zipfile.ZipInfo, cap: int, what: str) -> bytes:
    """The bytes of ``member``, never more than ``cap``: one whose directory entry says more is refused before a
    byte is unpacked, and the read itself stops at ``cap`` + 1 (a size the directory understates)."""
    info = member if isinstance(member, zipfile.ZipInfo) else z.getinfo(member)
    if info.file_size > cap:
        raise ZipRefused(f"{what}: {info.filename} unpacks to {info.file_size // (1 << 20)} MiB, more than the {cap // (1 << 20)} MiB read; not read.")
    with z.open(info) as fh:
        data = fh.read(cap + 1)
    if len(data) > cap:
        raise ZipRefused(f"{what}: {info.filename} unpacks to more than the {cap // (1 << 20)} MiB read; not read.")
    return data


# what zipfile raises on a broken zip or member, and a refusal: every reader catches these and nothing else
READ_ERRORS: tuple[type[Exception], ...] = (
    ZipRefused, zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error, struct.error, KeyError, NotImplementedError, RuntimeError,
)
