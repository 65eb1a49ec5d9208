"""The parsed embedded matrix, kept between runs (issue 33): parsing and validating the shipped YAML is a third of
``check --no-kernels``; reading back what the last run parsed is a hundredth of it.

The cache is one file, ``<cache dir>/matrix-<key>.pickle``, in stackdoctor's cache folder (``STACKDOCTOR_CACHE_DIR``,
else ``$XDG_CACHE_HOME/stackdoctor``, else ``~/.cache/stackdoctor``: the rule of :func:`stackdoctor.index.cache_dir`).
``key`` is a hash of everything the parse depends on: the YAML texts, the source of the matrix package (its tables,
readers and row types), the plug-in variant kinds registered, stackdoctor's and Python's versions; a changed file
is a new key, never a stale matrix. It is read only when the file and its folder belong to this user and no one else
may write them (unpickling runs what the file says); anything odd or unreadable is a miss: the files are parsed as
before. ``STACKDOCTOR_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parent


def cache_dir(env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    """As :func:`stackdoctor.index.cache_dir` (not imported: the index module is not needed to check)."""
    e = os.environ if env is None else env
    if e.get("STACKDOCTOR_CACHE_DIR"):
        return Path(e["STACKDOCTOR_CACHE_DIR"])
    if e.get("XDG_CACHE_HOME"):
        return Path(e["XDG_CACHE_HOME"]) / "stackdoctor"
    return Path(e.get("HOME") or os.path.expanduser("~")) / ".cache" / "stackdoctor"


def key(texts: Sequence[tuple[str, str]]) -> str:
    """The hash of what the parsed matrix depends on (``texts``: each embedded file's name and text)."""
    from stackdoctor import __version__
    from stackdoctor.matrix.pure import PLUGIN_VARIANT_KINDS

    h = hashlib.sha256(f"{__version__}\0{sys.version}\0{pickle.HIGHEST_PROTOCOL}\0".encode())
    for kind, pattern in sorted(PLUGIN_VARIANT_KINDS.items()):
        h.update(f"variant-kind {kind} {pattern.pattern}\0".encode())
    for name, text in texts:
        h.update(f"{name}\0{len(text)}\0".encode())
        h.update(text.encode("utf-8", errors="surrogatepass"))
    for source in sorted(_PACKAGE.glob("*.py")):
        h.update(source.name.encode() + b"\0")
        h.update(source.read_bytes())
    for name in ("versions.py", "errors.py"):  # what the readers use from outside the package
        h.update((_PACKAGE.parent / name).read_bytes())
    return h.hexdigest()[:32]


def _enabled() -> bool:
    return os.environ.get("STACKDOCTOR_NO_CACHE", "") in ("", "0")


def _private(st: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (POSIX; elsewhere the folder's own protection stands)."""
    if not hasattr(os, "getuid"):
        return True
    return st.st_uid == os.getuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def read(k: str) -> Any | None:
    """What :func:`write` kept under ``k``, or None (a miss: absent, unreadable, not private, not a cache)."""
    if not _enabled():
        return None
    folder = cache_dir()
    path = folder / f"matrix-{k}.pickle"
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not _private(st) or not _private(os.stat(folder)) or st.st_size > 64 << 20:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = pickle.load(fh)
    except Exception:  # a truncated or foreign file: parse instead
        return None
    finally:
        os.close(fd)
    return data[1] if isinstance(data, tuple) and len(data) == 2 and data[0] == k else None


def write(k: str, value: Any) -> None:
    """Keep ``value`` under ``k`` (atomically, readable by this user alone); a failure only loses the speed-up."""
    if not _enabled():
        return
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not _private(os.stat(folder)):
            return
        for old in folder.glob("matrix-*.pickle"):  # the keys of earlier versions: one file is kept
            if old.name != f"matrix-{k}.pickle":
                old.unlink(missing_ok=True)
        fd, tmp = tempfile.mkstemp(prefix="matrix-", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((k, value), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, folder / f"matrix-{k}.pickle")
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:
        pass
