"""What stackdoctor parses of its own shipped files, kept between runs (issue 33): parsing and validating the embedded
matrix and the locale texts was half of ``check --no-kernels``; reading back what the last run parsed is a hundredth.

Each is one file, ``<cache dir>/<kind>-<key>.pickle``, in stackdoctor's cache folder (``STACKDOCTOR_CACHE_DIR``,
else ``$XDG_CACHE_HOME/stackdoctor``, else ``~/.cache/stackdoctor``: the rule of :func:`stackdoctor.wheels.index.cache_dir`).
``key`` is a hash of everything the parse depends on (the caller names it: the YAML texts, the source of the code that
reads them, the plug-ins registered) with stackdoctor's and Python's versions; a changed input is a new key, never a
stale result. It is read only when the file and its folder belong to this user and no one else
may write them (unpickling runs what the file says); anything odd or unreadable is a miss: the files are parsed as
before. ``STACKDOCTOR_NO_CACHE=1`` turns it off.
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from stackdoctor.core.cachefiles import cache_dir, enabled, read_private, write_private

T = TypeVar("T")


def _hasher(data: bytes) -> Any:
    """BLAKE2b from CPython's built-in ``_blake2`` (hashlib's import starts OpenSSL: a few ms of every run, issue 33)."""
    try:
        from _blake2 import blake2b
    except ImportError:  # an interpreter without it
        from hashlib import blake2b
    return blake2b(data, digest_size=32)


def key(inputs: Sequence[str | bytes]) -> str:
    """The hash of ``inputs`` (each text or bytes, in order) with stackdoctor's and Python's versions."""
    from stackdoctor import __version__

    h = _hasher(f"{__version__}\0{sys.version}\0{pickle.HIGHEST_PROTOCOL}\0".encode())
    for item in inputs:
        data = item if isinstance(item, bytes) else item.encode("utf-8", errors="surrogatepass")
        h.update(f"{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:32]


def kept(kind: str, inputs: Sequence[str | bytes], parse: Callable[[], T], valid: Callable[[Any], bool]) -> T:
    """What ``parse()`` returned the last time for the same ``inputs`` (when ``valid`` of it), else ``parse()`` now, kept."""
    k = key([kind, *inputs])
    value = read(kind, k)
    if value is not None and valid(value):
        return value
    fresh = parse()
    write(kind, k, fresh)
    return fresh


def source_of(*paths: Path) -> list[bytes]:
    """The bytes of code files a parse depends on (its readers): part of a key. A file inside a zip (stackdoctor run
    from ``stackdoctor.pyz``) is read from the zip."""
    return [p.name.encode() + b"\0" + _read_code(p) for p in paths]


def _read_code(p: Path) -> bytes:
    try:
        return p.read_bytes()
    except OSError:
        archive = next((a for a in p.parents if a.is_file()), None)
        if archive is None:
            raise
        import zipfile

        with zipfile.ZipFile(archive) as z:
            return z.read(p.relative_to(archive).as_posix())


def package_files(package: str) -> Any:
    """``importlib.resources.files(package)``: the package's folder as a ``Path`` where it is one on disk (the
    resources reader imports ``zipfile`` and more: milliseconds of every run, issue 33), else the resources answer
    (a zip import). Raises ModuleNotFoundError as ``files`` does."""
    import importlib

    mod = importlib.import_module(package)
    origin = getattr(mod, "__file__", None)
    spec = getattr(mod, "__spec__", None)
    locations = list(getattr(spec, "submodule_search_locations", None) or [])
    if isinstance(origin, str) and os.path.isfile(origin) and len(locations) <= 1:
        return Path(origin).parent
    from importlib import resources

    return resources.files(package)


def read(kind: str, k: str) -> Any | None:
    """What :func:`write` kept under ``k``, or None (a miss: absent, unreadable, not private, not a cache)."""
    if not enabled():
        return None
    raw = read_private(cache_dir() / f"{kind}-{k}.pickle")
    if raw is None:
        return None
    try:
        data = pickle.loads(raw)
    except Exception:  # a truncated or foreign file: parse instead
        return None
    return data[1] if isinstance(data, tuple) and len(data) == 2 and data[0] == k else None


def write(kind: str, k: str, value: Any) -> None:
    """Keep ``value`` under ``k`` (atomically, readable by this user alone); a failure only loses the speed-up."""
    if not enabled():
        return
    try:
        data = pickle.dumps((k, value), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return
    write_private(cache_dir() / f"{kind}-{k}.pickle", data, stale=f"{kind}-*.pickle")
