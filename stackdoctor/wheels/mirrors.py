"""Mirrors of the PyTorch wheel index, and what PyPI's plain ``torch`` wheel is.

The mirror table lives in ``compat_matrix/mirrors.yaml`` (sourced): a ``simple`` mirror is a PEP 503
copy of ``https://download.pytorch.org/whl/<variant>/`` (``--index-url`` / ``--index``); a ``flat``
mirror serves the files of each variant in one folder with a page of links (``--find-links``).
``--mirror NAME`` picks a row; ``--mirror URL`` names one the matrix does not know (its layout is
found by asking: a PEP 503 project page first, then a listing of files).

PyPI's ``torch`` wheel carries no local label, yet it is one variant (Linux: a CUDA build). Its
METADATA says which (``Requires-Dist: cuda-toolkit[...]==13.0.3`` -> cu130), and where no wheel is at
hand the matrix's ``pypi_default`` rows do.

The parsers here (``parse_flat_listing``, ``parse_wheel_metadata``) are pure and never raise; what a METADATA's
requirements say of a kind's runtime is the kind's (:meth:`Accelerator.default_build_requires`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from stackdoctor.core.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Matrix, MirrorRow
    from stackdoctor.wheels.index import IndexFile
    from stackdoctor.wheels.sources import Source

DIST_RE = re.compile(r"\.(whl|tar\.gz|zip|tar\.bz2)$", re.I)
MAX_METADATA_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Mirror:
    """A ``--mirror`` choice: a matrix row, or a URL whose layout is found by asking (``layout="auto"``)."""

    name: str  # the matrix name, or the URL
    url: str
    layout: str  # "simple" | "flat" | "auto"
    listing: str | None = None
    origin: str = "--mirror"

    def index_url(self, variant: str) -> str:
        return f"{self.url.rstrip('/')}/{variant}"

    def listing_url(self, variant: str) -> str:
        template = self.listing or "{url}/{variant}/"
        return template.format(url=self.url.rstrip("/"), variant=variant)

    def sources(self, variant: str) -> list[Source]:
        """The source(s) this mirror gives for one variant ("auto": both forms, the check keeps what answers)."""
        from stackdoctor.wheels.sources import Source

        out: list[Source] = []
        if self.layout in ("simple", "auto"):
            out.append(Source(self.index_url(variant), "index", "mirror", self.origin, configured=False))
        if self.layout in ("flat", "auto"):
            out.append(Source(self.listing_url(variant), "links", "mirror", self.origin, configured=False))
        return out


def resolve_mirror(value: str, matrix: Matrix, *, origin: str = "--mirror") -> Mirror:
    """``--mirror NAME|URL`` (or ``STACKDOCTOR_MIRROR``) -> :class:`Mirror`; an unknown name is a usage error."""
    v = value.strip()
    if re.match(r"^(https?|file)://", v) or v.startswith("/"):
        url = v if "://" in v else Path(v).resolve().as_uri()
        row = next((m for m in matrix.mirrors if m.url.rstrip("/") == url.rstrip("/")), None)
        if row is not None:
            return _from_row(row, origin)
        return Mirror(v, url.rstrip("/"), "auto", None, origin)
    row = matrix.mirror(v)
    if row is None:
        known = ", ".join(m.name for m in matrix.mirrors) or "none"
        raise UsageError(f"{origin} {v}: not a mirror the compatibility matrix knows (known: {known}); give its URL instead.")
    return _from_row(row, origin)


def _from_row(row: MirrorRow, origin: str) -> Mirror:
    return Mirror(row.name, row.url, row.layout, row.listing, f"{origin} {row.name}")


def mirror_option(option: str | None, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(value, origin): ``--mirror``, else ``STACKDOCTOR_MIRROR``."""
    if option:
        return option, "--mirror"
    value = (env.get("STACKDOCTOR_MIRROR") or "").strip()
    return (value or None), "STACKDOCTOR_MIRROR"


# ---------------------------------------------------------------------------- listings (pure)


def parse_flat_listing(text: str, page_url: str) -> list[IndexFile]:
    """Distribution files linked from a listing page (a mirror folder, ``torch_stable.html``, an nginx or
    S3-style index): anchors whose file name is a wheel or sdist; folders, ``../`` and sort links dropped.
    Relative and root-relative links resolve against the page; ``&#43;`` / ``%2B`` decode to ``+``."""
    from stackdoctor.wheels.index import parse_simple_html

    try:
        files = parse_simple_html(text, page_url)
    except Exception:  # parse_simple_html is lenient; belt and braces for a pure parser
        return []
    out = []
    seen: set[str] = set()
    for f in files:
        if not DIST_RE.search(f.filename) or "/" in f.filename or f.url in seen:
            continue
        seen.add(f.url)
        out.append(f)
    return out


# ---------------------------------------------------------------------------- PyPI's default build


def pypi_platform(tag: str | None) -> str | None:
    """A wheel platform tag -> the ``pypi_default`` platform key (``manylinux_2_28_x86_64`` -> ``linux_x86_64``)."""
    if not tag:
        return None
    t = tag.lower()
    m = re.search(r"(x86_64|aarch64|amd64|arm64)$", t)
    if not m:
        return None
    arch = m.group(1)
    if t.startswith(("manylinux", "linux", "musllinux")):
        return f"linux_{'x86_64' if arch in ('x86_64', 'amd64') else 'aarch64'}"
    if t.startswith("win"):
        return "win_amd64" if arch in ("amd64", "x86_64") else None
    if t.startswith("macosx"):
        return f"macos_{'arm64' if arch in ('arm64', 'aarch64') else 'x86_64'}"
    return None


def parse_wheel_metadata(text: str) -> dict[str, list[str]]:
    """The header fields of a METADATA file: ``{"name": [...], "version": [...], "requires-dist": [...]}``
    (field names lower-cased; only the header, up to the first blank line)."""
    out: dict[str, list[str]] = {}
    last: str | None = None
    for line in text.splitlines():
        if not line.strip():
            break
        if line[:1] in (" ", "\t") and last is not None:
            out[last][-1] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            last = None
            continue
        last = key.strip().lower()
        out.setdefault(last, []).append(value.strip())
    return out


def local_wheel_metadata(path: Path) -> dict[str, list[str]] | None:
    """METADATA of a wheel on disk (``None`` when it is not a readable wheel).

    Reads only the zip's central directory bytes and the one member (a torch wheel has ~10 000 members, whose
    full directory ``zipfile`` takes ~0.3 s to build); any anomaly falls back to ``zipfile``."""
    fast = _metadata_from_central_directory(path)
    if fast is not None:
        return parse_wheel_metadata(fast)
    from stackdoctor.binaries import zipbound
    from stackdoctor.system import open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as raw, zipbound.open_zip(raw, str(path)) as zf:  # a FIFO never blocks
            names = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1]
            if not names:
                return None
            return parse_wheel_metadata(zipbound.read_member(zf, names[0], MAX_METADATA_BYTES, str(path)).decode("utf-8", errors="replace"))
    except zipbound.READ_ERRORS:
        return None


def _metadata_from_central_directory(path: Path) -> str | None:
    import struct
    import zlib

    try:
        from stackdoctor.system import open_regular

        with os.fdopen(open_regular(path), "rb") as fh:  # a FIFO named like a wheel never blocks
            fh.seek(0, 2)
            size = fh.tell()
            tail_len = min(size, 65536 + 22)
            fh.seek(size - tail_len)
            tail = fh.read(tail_len)
            eocd = tail.rfind(b"PK\x05\x06")
            if eocd < 0 or len(tail) - eocd < 22:
                return None
            cd_size, cd_offset = struct.unpack("<II", tail[eocd + 12 : eocd + 20])
            if cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF or cd_size > 64 * 1024 * 1024:
                return None  # zip64: let zipfile handle it
            fh.seek(cd_offset)
            cd = fh.read(cd_size)
            pos = cd.find(b".dist-info/METADATA")
            while pos >= 0:
                start = cd.rfind(b"PK\x01\x02", 0, pos)
                if start < 0 or len(cd) < start + 46:
                    return None
                (method, csize, usize, nlen, _xlen, _clen, offset) = (
                    struct.unpack("<H", cd[start + 10 : start + 12])[0],
                    *struct.unpack("<II", cd[start + 20 : start + 28]),
                    *struct.unpack("<HHH", cd[start + 28 : start + 34]),
                    struct.unpack("<I", cd[start + 42 : start + 46])[0],
                )
                name = cd[start + 46 : start + 46 + nlen].decode("utf-8", errors="replace")
                if name.endswith(".dist-info/METADATA") and name.count("/") == 1:
                    if usize > MAX_METADATA_BYTES or csize > MAX_METADATA_BYTES or offset == 0xFFFFFFFF:
                        return None
                    fh.seek(offset)
                    local = fh.read(30)
                    if local[:4] != b"PK\x03\x04":
                        return None
                    lnlen, lxlen = struct.unpack("<HH", local[26:30])
                    fh.seek(offset + 30 + lnlen + lxlen)
                    data = fh.read(csize)
                    if method == 8:
                        dec = zlib.decompressobj(-15)
                        data = dec.decompress(data, MAX_METADATA_BYTES + 1)  # bounded: the sizes above are claims
                        if len(data) > MAX_METADATA_BYTES or dec.unconsumed_tail:
                            return None
                    elif method != 0:
                        return None
                    return data.decode("utf-8", errors="replace")
                pos = cd.find(b".dist-info/METADATA", pos + 1)
    except (OSError, ValueError, struct.error, zlib.error):
        return None
    return None


@dataclass
class DefaultBuild:
    """What a plain (label-less) ``torch`` wheel on a PyPI-style index is."""

    version: str
    variant: str | None  # "cu130", "cpu"; None: not known
    how: str  # "its METADATA requires cuda-toolkit 13.0" / "the compatibility matrix (pypi_default, 2.13 linux_x86_64)"


def default_build_variant(file: IndexFile, version: str, platform_tag: str | None, matrix: Matrix, *, read: bool = False) -> DefaultBuild:
    """The variant of a label-less torch wheel: the matrix's ``pypi_default`` row; the wheel's own METADATA
    when the file is local and the matrix does not know (or ``read`` asks for it: the wheel's word wins)."""
    from stackdoctor.wheels.index import local_path

    plat = pypi_platform(platform_tag)
    row = matrix.pypi_default(version, plat) if plat else None
    if file.url.startswith("file:") and (read or row is None or row.variant is None):
        meta = cached_wheel_metadata(str(local_path(file.url)))
        if meta is not None:
            from stackdoctor import kinds

            requires = meta.get("requires-dist", [])
            pinned = next((found for a in kinds.ALL if (found := a.default_build_requires(requires))), None)
            if pinned:
                return DefaultBuild(version, pinned[0], f"its METADATA requires {pinned[1]}")
    if row is None:
        return DefaultBuild(version, None, "not known: the compatibility matrix has no PyPI default-build row for it")
    if row.variant is None:
        return DefaultBuild(version, None, f"not known ({'; '.join(row.unknown)})")
    return DefaultBuild(version, row.variant, f"the compatibility matrix, pypi_default {row.torch} {row.platform}")


_METADATA_CACHE: dict[tuple[str, int, int], dict[str, list[str]] | None] = {}


def cached_wheel_metadata(path: str) -> dict[str, list[str]] | None:
    """A wheel's METADATA, read once per file version (a torch wheel's zip directory takes ~0.5 s to read)."""
    import os

    try:
        st = os.stat(path)
    except OSError:
        return None
    key = (path, st.st_size, int(st.st_mtime))
    if key not in _METADATA_CACHE:
        _METADATA_CACHE[key] = local_wheel_metadata(Path(path))
    return _METADATA_CACHE[key]
