"""The dynamic loader's cache (``/etc/ld.so.cache``) and the version of one copy of a library, read from files.

glibc's ``ld.so`` looks a needed name up in ``/etc/ld.so.cache`` (which ``ldconfig`` writes from the directories of
``/etc/ld.so.conf``) after ``LD_LIBRARY_PATH`` and ``DT_RUNPATH`` and before the default directories. The layout is
glibc's ``sysdeps/generic/dl-cache.h``: the new format starts with ``glibc-ld.so.cache1.1`` and a 48-byte header
(``nlibs``, ``len_strings``, ``flags``, ``extension_offset``), then ``nlibs`` entries of 24 bytes (``int32 flags``,
``uint32 key``, ``uint32 value``, ``uint32 osversion``, ``uint64 hwcap``) whose key (the name, ``libcuda.so.1``) and
value (the path) are offsets of NUL-terminated strings from the start of that header. Caches written by glibc before
2.32 put the old format (``ld.so-1.7.0``, 12-byte entries) first and the new one after it, 8-byte aligned. ``ldconfig``
sorts the entries so that the one ``ld.so`` takes comes first; a path of another ELF class or machine is skipped by the
caller, as ``ld.so`` skips it.

Every read goes through :class:`~stackdoctor.system.System` (a moved ``STACKDOCTOR_SYSROOT`` replays a captured
``/etc``); counts from the file are capped; nothing raises.
"""

from __future__ import annotations

import posixpath
import re
import struct

from stackdoctor.system import ReadResult, System

CACHE = "/etc/ld.so.cache"
MAX_CACHE_BYTES = 16 * 1024 * 1024  # a real cache is tens to hundreds of KiB
MAX_ENTRIES = 65536
_OLD = b"ld.so-1.7.0"
_NEW = b"glibc-ld.so.cache1.1"


def parse_ld_cache(data: bytes) -> dict[str, list[str]] | None:
    """name -> paths in the cache's order; None when ``data`` is no ld.so.cache of a format glibc writes."""
    start = 0
    if data.startswith(_OLD):
        if len(data) < 16:
            return None
        (nlibs,) = struct.unpack_from("<I", data, 12)
        if nlibs > MAX_ENTRIES:
            return None
        start = 16 + nlibs * 12
        start = (start + 7) & ~7
        if not data[start:].startswith(_NEW):
            return None
    elif not data.startswith(_NEW):
        return None
    hdr = start + len(_NEW)
    if len(data) < start + 48:
        return None
    nlibs, _len_strings = struct.unpack_from("<II", data, hdr)
    if nlibs > MAX_ENTRIES:
        return None
    out: dict[str, list[str]] = {}
    body = data[start + 48 : start + 48 + nlibs * 24]
    body = body[: len(body) - len(body) % 24]
    for _flags, key, value, _os, _hwcap in struct.iter_unpack("<iIIIQ", body):
        name, path = _string(data, start + key), _string(data, start + value)
        if name and path:
            out.setdefault(name, []).append(path)
    return out


def _string(data: bytes, off: int) -> str | None:
    if off <= 0 or off >= len(data):
        return None
    end = data.find(b"\0", off, off + 4096)
    return data[off:end].decode("utf-8", "replace") if end > off else None


def read_ld_cache(system: System, path: str = CACHE) -> dict[str, list[str]] | None:
    """The loader's cache of this machine (under the sysroot); None when absent, unreadable or not a cache."""
    fh = system.open_binary(path)
    if isinstance(fh, ReadResult):
        return None
    try:
        data = fh.read(MAX_CACHE_BYTES)
    except OSError:
        return None
    finally:
        fh.close()
    try:
        return parse_ld_cache(data)
    except struct.error:
        return None


# ---------------------------------------------------------------------------- the version of one copy

_FULL = re.compile(r"\.so\.(\d+(?:\.\d+)+)$")


def name_version(name: str) -> str | None:
    """The version a library's file name carries beyond the major: ``libcudnn.so.8.9.2`` -> ``8.9.2``."""
    m = _FULL.search(name)
    return m.group(1) if m else None


def copy_version(system: System, path: str) -> str | None:
    """The version of the library at ``path``, with where it was read: its real file's name
    (``8.9.2 (libcudnn.so.8.9.2)``), the ``nvidia-*`` wheel that ships it (``9.1.0.70 (nvidia_cudnn_cu12-9.1.0.70.dist-info)``),
    or the conda package that does (``8.9.2.26 (conda-meta/cudnn-8.9.2.26-cuda12_0.json)``); None when no file says."""
    real = system.realpath(path)
    base = posixpath.basename(real)
    v = name_version(base) or name_version(posixpath.basename(path))
    if v:
        return f"{v} ({base})"
    return _wheel_version(system, path) or _conda_version(system, path)


def _wheel_version(system: System, path: str) -> str | None:
    """``<site>/<ns>/<folder>/lib/<lib>`` (``nvidia/cudnn/lib``): the version of the ``<ns>-<folder>[-cuNN]`` distribution
    in ``<site>`` (``nvidia_cudnn_cu12-9.1.0.70.dist-info``)."""
    parts = path.split("/")
    if len(parts) < 5 or parts[-2] != "lib":
        return None
    site, ns, folder = "/".join(parts[:-4]), parts[-4].lower(), parts[-3].lower()
    want = re.compile(rf"^{re.escape(ns)}_{re.escape(folder)}(?:_cu\d+)?-([^-]+)\.dist-info$", re.I)
    for entry in system.listdir(site):
        m = want.match(entry)
        if m:
            return f"{m.group(1)} ({entry})"
    return None


def _conda_version(system: System, path: str) -> str | None:
    """``<prefix>/lib/<lib>`` of a conda env: the package of that library named in ``<prefix>/conda-meta``."""
    folder = posixpath.dirname(path)
    if posixpath.basename(folder) != "lib":
        return None
    prefix = posixpath.dirname(folder)
    stem = re.split(r"\.so", posixpath.basename(path), maxsplit=1)[0]
    stem = stem[3:] if stem.startswith("lib") else stem
    names = {stem, f"lib{stem}", stem.split("_", 1)[0], f"lib{stem.split('_', 1)[0]}"}
    for entry in system.listdir(posixpath.join(prefix, "conda-meta"))[:4096]:
        m = re.match(r"^(.+)-(\d[^-]*)-[^-]+\.json$", entry)
        if m and m.group(1).lower() in names:
            return f"{m.group(2)} (conda-meta/{entry})"
    return None
