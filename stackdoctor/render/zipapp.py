"""One file for a broken machine: the installation stackdoctor runs from, as a zipapp (``stackdoctor bundle``).

A support engineer sends it; the user runs ``python3 stackdoctor.pyz check`` with any Python 3.10 or newer and nothing
installed (no pip, no venv, ``python3 -I -S`` too). It holds:

- the ``stackdoctor`` package with its data: the compatibility matrix (``stackdoctor/compat_matrix``), the locale
  texts, the schemas and the ``_worker`` scripts (which run in the target interpreter: they are copied out of the zip
  into a private folder when first asked for, :func:`stackdoctor._worker.worker_path`);
- its pure-Python dependencies, found from the installed distributions' metadata (``Requires-Dist``, followed
  through), each with its ``METADATA`` and licence files;
- a ``__main__.py`` that refuses a Python older than 3.10 in one sentence and turns the caches off (their keys are
  source files on disk, which a zip does not have).

Left out: compiled code. A distribution that has compiled modules is left out whole (``zstandard``: ROCm code objects
compressed with zstd are then "not read" unless the Python has ``compression.zstd``; ``psutil``: Windows' tree kill),
except where its compiled part is an optional accelerator (:data:`OPTIONAL_COMPILED`: PyYAML's C loader, whose
pure-Python loader does the same work). What was left out, and why, is returned and said by the command.
"""

from __future__ import annotations

import io
import os
import stat
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

__all__ = ["COMPILED_SUFFIXES", "Bundle", "OPTIONAL_COMPILED", "build_bundle", "write_bundle"]

COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
# distributions whose compiled modules are optional: the pure-Python code works without them (they are dropped)
OPTIONAL_COMPILED = {"pyyaml": "its C loader is optional: yaml's pure-Python loader reads the same files"}
_SKIP_PARTS = {"__pycache__"}
_LICENCE_WORDS = ("LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS")

MAIN = '''\
# stackdoctor, as one file (stackdoctor bundle): python3 stackdoctor.pyz check
import sys

if sys.version_info < (3, 10):
    sys.stderr.write("stackdoctor: this file needs Python 3.10 or newer; %s is Python %d.%d.\\n" % (sys.executable, sys.version_info[0], sys.version_info[1]))
    sys.exit(2)
import os

os.environ.setdefault("STACKDOCTOR_NO_CACHE", "1")  # the caches are keyed on source files on disk; a zip has none
from stackdoctor.cli import main  # noqa: E402

main()
'''


@dataclass
class Bundle:
    """What :func:`build_bundle` put in, and what it left out with the reason."""

    files: dict[str, bytes] = field(default_factory=dict)  # archive name -> content
    packages: dict[str, str] = field(default_factory=dict)  # distribution -> version
    left_out: dict[str, str] = field(default_factory=dict)  # distribution (or file) -> why


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _walk(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_PARTS)
        for f in sorted(files):
            if not f.endswith((".pyc", ".pyo")):
                yield Path(root) / f


def _add_stackdoctor(b: Bundle) -> None:
    """The stackdoctor package as installed (a wheel, an editable checkout, or this very zip)."""
    import stackdoctor
    from stackdoctor.core.parsecache import package_files

    origin = Path(stackdoctor.__file__).parent
    if not origin.is_dir():  # running from a bundle: copy the zip's own stackdoctor/ (and its data) as it is
        archive = next((p for p in origin.parents if p.is_file()), None)
        if archive is None:
            raise FileNotFoundError(f"stackdoctor's files are not in {origin}")
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if info.filename.startswith("stackdoctor/") and not info.is_dir():
                    b.files[info.filename] = z.read(info)
        return
    for p in _walk(origin):
        rel = p.relative_to(origin)
        if p.suffix in COMPILED_SUFFIXES:
            b.left_out[f"stackdoctor/{rel.as_posix()}"] = "compiled"
            continue
        b.files[f"stackdoctor/{rel.as_posix()}"] = p.read_bytes()
    matrix = Path(str(package_files("stackdoctor.compat_matrix")))
    if matrix.resolve() != (origin / "compat_matrix").resolve():  # an editable checkout: the matrix sits beside the package
        for p in _walk(matrix):
            b.files[f"stackdoctor/compat_matrix/{p.relative_to(matrix).as_posix()}"] = p.read_bytes()


def _requirements(dist_name: str) -> list[str]:
    """The distributions ``dist_name`` requires (markers ignored but ``extra``: the file may run on another Python)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    names = []
    for line in metadata.distribution(dist_name).requires or []:
        req = Requirement(line)
        if req.marker is not None and "extra" in str(req.marker):
            continue
        names.append(req.name)
    return names


def _files_of(dist: Any) -> list[PurePosixPath]:
    return [PurePosixPath(*f.parts) for f in (dist.files or []) if f.parts and f.parts[0] != ".." and not (_SKIP_PARTS & set(f.parts))
            and not f.name.endswith((".pyc", ".pyo"))]


def _compiled(files: list[PurePosixPath]) -> list[PurePosixPath]:
    return [f for f in files if f.suffix in COMPILED_SUFFIXES or ".so." in f.name]


def _add_distribution(b: Bundle, dist: Any, key: str) -> None:
    """One dependency's files: pure Python and data, its METADATA and licences (its optional compiled modules dropped)."""
    files = _files_of(dist)
    compiled = set(_compiled(files))
    for f in files:
        info = f.parts[0].endswith(".dist-info")
        if f in compiled or (not info and f.parts[0].endswith((".data", ".egg-info"))):
            continue
        if info and not (f.name == "METADATA" or f.name.upper().startswith(_LICENCE_WORDS) or "licenses" in f.parts):
            continue
        try:
            b.files[str(f)] = Path(str(dist.locate_file(f))).read_bytes()
        except OSError:
            continue
    b.packages[key] = dist.version


def build_bundle() -> Bundle:
    """The installation stackdoctor runs from: itself, then its requirements, followed through. A distribution with
    compiled modules is left out (unless they are optional), and so is one that needs such a distribution."""
    from importlib import metadata

    b = Bundle()
    _add_stackdoctor(b)
    try:
        todo = _requirements("stackdoctor")
    except metadata.PackageNotFoundError:  # a checkout on sys.path, not installed: its declared dependencies
        todo = _declared()
    found: dict[str, tuple[Any, list[str]]] = {}  # key -> (distribution, what it requires)
    seen: set[str] = {"stackdoctor"}
    while todo:
        name = todo.pop(0)
        if _norm(name) in seen:
            continue
        seen.add(_norm(name))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            b.left_out[_norm(name)] = "not installed here"
            continue
        needs = _requirements(dist.metadata["Name"] or name)
        found[_norm(dist.metadata["Name"] or name)] = (dist, needs)
        todo.extend(needs)
    for key, (dist, _) in found.items():
        compiled = _compiled(_files_of(dist))
        if compiled and key not in OPTIONAL_COMPILED:
            b.left_out[key] = f"compiled: {compiled[0].name}"
    for key, (dist, needs) in found.items():
        if key not in b.left_out:
            gone = [_norm(n) for n in needs if b.left_out.get(_norm(n), "").startswith("compiled")]
            if gone:
                b.left_out[key] = f"needs {gone[0]}"
            else:
                _add_distribution(b, dist, key)
    b.files["__main__.py"] = MAIN.encode()
    return b


def _declared() -> list[str]:
    """``[project] dependencies`` of the checkout stackdoctor runs from."""
    import re

    import stackdoctor

    text = (Path(stackdoctor.__file__).resolve().parent.parent / "pyproject.toml").read_text(encoding="utf-8")
    block = text[text.index("dependencies = [") :]
    return [re.split(r"[<>=!~;\s\[]", m)[0] for m in re.findall(r'^\s*"([^"]+)"', block[: block.index("\n]")], re.M)]


def write_bundle(b: Bundle, out: Path) -> int:
    """The zipapp at ``out`` (shebang ``python3``, executable), written beside it and renamed into place. Returns its size."""
    buf = io.BytesIO()
    buf.write(b"#!/usr/bin/env python3\n")
    stamp = time.localtime(time.time())[:6]
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        for name in sorted(b.files):
            info = zipfile.ZipInfo(name, date_time=max(stamp, (1980, 1, 1, 0, 0, 0)))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            z.writestr(info, b.files[name])
    data = buf.getvalue()
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(data)
