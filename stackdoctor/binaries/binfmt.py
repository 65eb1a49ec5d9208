"""Readers for the binary formats that carry GPU code, by seeking and reading headers only.

Everything here works on a seekable binary file object, reads only headers (never a whole
library into memory), caps every count and size it trusts from the file, never raises on
arbitrary bytes (a result object carries ``error``) and runs in time linear in what it reads.
Nothing here opens files or judges anything: :mod:`stackdoctor.probes.torch_static` does.

Formats and where their layout comes from
------------------------------------------
ELF (32/64-bit, either byte order): the System V gABI section header table. The section
count and the name-table index may overflow into section 0 (``e_shnum == 0``,
``e_shstrndx == SHN_XINDEX``); both escapes are honoured.

PE/COFF (Windows DLLs): Microsoft's "PE Format" specification: the ``MZ`` stub's
``e_lfanew`` at 0x3C, the ``PE\\0\\0`` signature, the COFF file header and its 40-byte
section headers. Image section names are at most 8 bytes, so nvcc's ``.nv_fatbin`` is
stored as ``.nv_fatb`` in a DLL; both spellings are looked for (``/nnn`` long names of
object files are resolved through the COFF string table).

NVIDIA fat binaries (``.nv_fatbin``): NVIDIA documents only the outer header, in
``fatbinary_section.h``/``fatBinary.h`` (``struct fatBinaryHeader { unsigned int magic;
unsigned short version; unsigned short headerSize; unsigned long long fatSize; }``, magic
``0xBA55ED50``). The entry header is known from open-source re-implementations, which
agree: n-eiling/cuda-fatbin-decompression ``fatbin-decompress.h`` (``struct
fat_text_header``), jiegec/fatbinary ``src/lib.rs`` (``FatBinaryEntryHeader``) and ZLUDA's
``FatbinFileHeader`` (flags ``Is64Bit 0x1, Debug 0x2, Linux 0x10, Mac 0x20, Windows 0x40,
CompressedLz4 0x2000, CompressedZstd 0x8000``). Little-endian, 64 bytes::

    0  u16 kind (1 PTX, 2 ELF cubin, 4 old cubin)   2  u16 version (0x0101)
    4  u32 header size (64, or more: an object name, PTX options, or the
           48-byte extension nvcc writes for sm_100 and later)
    8  u64 payload size (padded; the next entry starts at +header size +payload size)
    16 u32 compressed size                          20 u32 options offset
    24 u16 code version minor, u16 major            28 u32 SM number (90 for sm_90)
    32 u32 object name offset, u32 length           40 u64 flags
    48 u64 reserved                                 56 u64 uncompressed size

A section holds many containers back to back (one per translation unit, 8-aligned), each
``headerSize + fatSize`` bytes. Entry payloads may be compressed; the headers never are.

Architecture suffixes: flag ``0x100000`` marks an architecture-specific target (``sm_90a``).
This was verified against NVIDIA's own ``cuobjdump -lelf`` (release 13.4, V13.4.92, from
PyPI's ``nvidia-cuda-cuobjdump``) on torch 2.14.1's ``libtorch_cuda.so``: the 4 sm_90, 59
sm_100, 1 sm_120 and 1 sm_121 entries that carry the bit are exactly the ones cuobjdump
names ``sm_90a``/``sm_100a``/``sm_120a``/``sm_121a``. Flag ``0x200000`` is on 59 sm_103
entries that cuobjdump names plain ``sm_103``; it is probably the family-specific (``f``)
marker (PyTorch builds that file for ``103f``), but NVIDIA does not say so, so arch names
here follow cuobjdump (no suffix) and the bit is kept as ``FatbinEntry.family_specific``.

Clang offload bundles (ROCm ``.hip_fatbin``; section name from clang's CGCUDANV, which puts
``__hip_fatbin`` in ``.hip_fatbin`` and its wrapper in ``.hipFatBinSegment``): layout from
LLVM ``clang/lib/Driver/OffloadBundler.cpp`` (``BinaryFileHandler``, all integers
little-endian): the magic ``__CLANG_OFFLOAD_BUNDLE__``, a u64 entry count, then per entry
u64 offset, u64 size, u64 id length and the id (``hipv4-amdgcn-amd-amdhsa--gfx942:xnack-``,
``host-x86_64-unknown-linux-gnu-``). Offsets are relative to the bundle's start. The
compressed form (``CompressedOffloadBundle``, same file) starts ``CCOB``, u16 version,
u16 method (``llvm::compression::Format``: 0 zlib, 1 zstd), then V1: u32 uncompressed size,
u64 hash (20 bytes); V2: u32 total size, u32 uncompressed size, u64 hash (24 bytes); V3: u64
total size, u64 uncompressed size, u64 hash (32 bytes); the compressed stream follows and
decompresses to an ordinary bundle. zlib is decompressed here (only the prefix that holds
the header); zstd only through a caller-supplied decoder (the standard library has one from
Python 3.14 as ``compression.zstd``); without one the ids are reported as inside a zstd stream.

SYCL/XPU (``__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen`` sections, from Intel's DPC++): the
section name itself says what kind of image is there (``spir64_gen``: ahead-of-time code
for Intel GPUs; ``spir64``: SPIR-V compiled at run time). Inside an AOT image, Intel's
``ocloc`` writes a Unix ``ar`` archive whose member names are the device IP versions
(``64.12.60.7``). That naming is not documented anywhere NVIDIA-style: it is read from
intel/compute-runtime's offline compiler sources and from real files (bitsandbytes'
``libbitsandbytes_xpu2026.so``), and real images are zstd-compressed, so
:func:`read_sycl_image` reports the kind, the compression and, for an uncompressed archive,
the raw member names; it does not translate them into device names.
"""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

# ---------------------------------------------------------------------------- caps

MAX_SECTIONS = 65_535  # section headers read from one file
MAX_NAME_TABLE = 4 * 1024 * 1024  # bytes of section names read
MAX_FATBIN_CONTAINERS = 200_000
MAX_FATBIN_ENTRIES = 1_000_000
MAX_BUNDLES = 200_000
MAX_BUNDLE_ENTRIES = 4096  # entries in one offload bundle
MAX_BUNDLE_ID = 4096  # bytes of one bundle id
MAX_AR_MEMBERS = 4096
MAX_ZERO_SKIP = 1 << 20  # padding skipped between containers before giving up
MAX_DECOMPRESSED_PREFIX = 1 << 20  # output decompressed to find a compressed bundle's header
MAX_COMPRESSED_READ = 4 << 20  # input read to get that prefix
MAX_TOTAL_DECOMPRESSED = 128 << 20  # output decompressed in one walk, all bundles together (a time bound)
MAX_TOTAL_BUNDLE_ENTRIES = 1 << 19  # bundle entries kept from one walk, all bundles together
MAX_DISTINCT_IDS = 1 << 14  # different bundle ids kept (each stored once): a real build has a few dozen
MAX_ID_BYTES = 8 << 20
MAX_SECTION_TABLE = 16 << 20  # bytes of section headers read at once (more: entry by entry)

FATBIN_MAGIC = 0xBA55ED50
BUNDLE_MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB_MAGIC = b"CCOB"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
AR_MAGIC = b"!<arch>\n"

FATBIN_FLAG_COMPRESS = 0x1000  # fatbinary.h (FATBIN_FLAG_COMPRESS)
FATBIN_FLAG_LZ4 = 0x2000  # ZLUDA CompressedLz4 / FATBIN_FLAG_COMPRESS2
FATBIN_FLAG_ZSTD = 0x8000  # ZLUDA CompressedZstd / FATBIN_FLAG_ZCOMPRESS
FATBIN_FLAG_ARCH_SPECIFIC = 0x100000  # "a" targets (verified with cuobjdump 13.4, see above)
FATBIN_FLAG_FAMILY_SPECIFIC = 0x200000  # probably "f" targets (inferred, see above)

CUDA_SECTIONS = (".nv_fatbin", ".nv_fatb")  # ELF name, PE (8-byte) name
HIP_SECTIONS = (".hip_fatbin", ".hip_fat")  # ELF name, PE (8-byte) name
SYCL_SECTION_PREFIX = "__CLANG_OFFLOAD_BUNDLE__sycl-"

ZstdDecoder = Callable[[bytes, int], "bytes | None"]


class BoundedReader:
    """Positioned reads from a file object; short reads and OS errors become ``b""``.

    ``deadline`` (a ``time.monotonic()`` value): past it every read returns ``b""`` and ``expired``
    is set, so a walk stops where it is and keeps what it read (a time budget for hostile files)."""

    def __init__(self, fh: BinaryIO, deadline: float | None = None) -> None:
        self.fh = fh
        self.deadline = deadline
        self.expired = False
        self.size = -1
        try:
            self.size = int(fh.seek(0, 2))
        except (OSError, ValueError, TypeError, AttributeError):
            self.size = -1

    def read(self, pos: int, n: int) -> bytes:
        if pos < 0 or n <= 0 or (self.size >= 0 and pos >= self.size):
            return b""
        if self.deadline is not None and (self.expired or time.monotonic() > self.deadline):
            self.expired = True
            return b""
        if self.size >= 0:
            n = min(n, self.size - pos)
        try:
            self.fh.seek(pos)
            data = self.fh.read(n)
        except (OSError, ValueError, OverflowError, TypeError, AttributeError):
            return b""
        return data if isinstance(data, bytes) else bytes(data or b"")


# ---------------------------------------------------------------------------- sections


@dataclass(frozen=True)
class Section:
    name: str
    offset: int  # in the file
    size: int  # bytes present in the file (0 for NOBITS / uninitialised)


@dataclass
class SectionTable:
    """A file's sections. ``format``: "elf64-le", "elf32-be", "pe", ... or None when unrecognised."""

    format: str | None = None
    sections: list[Section] = field(default_factory=list)
    error: str | None = None

    def find(self, *names: str) -> Section | None:
        for name in names:
            for sec in self.sections:
                if sec.name == name:
                    return sec
        return None

    def with_prefix(self, prefix: str) -> list[Section]:
        return [s for s in self.sections if s.name.startswith(prefix)]


def read_sections(fh: BinaryIO) -> SectionTable:
    """The section table of an ELF or PE/COFF file; an ``error`` for anything else."""
    r = BoundedReader(fh)
    head = r.read(0, 64)
    if head[:4] == b"\x7fELF":
        return _elf_sections(r, head)
    if head[:2] == b"MZ":
        return _pe_sections(r, head)
    if not head:
        return SectionTable(error="empty or unreadable file")
    return SectionTable(error="not an ELF or PE file")


def _cstr(data: bytes, start: int) -> str:
    if start < 0 or start >= len(data):
        return ""
    end = data.find(b"\0", start)
    if end < 0:
        end = len(data)
    return data[start : min(end, start + 4096)].decode("latin-1")


def _elf_sections(r: BoundedReader, head: bytes) -> SectionTable:
    if len(head) < 52:
        return SectionTable(error="truncated ELF header")
    klass, data_enc = head[4], head[5]
    if klass not in (1, 2) or data_enc not in (1, 2):
        return SectionTable(error=f"unknown ELF class {klass} / data encoding {data_enc}")
    bo = "<" if data_enc == 1 else ">"
    fmt = f"elf{32 if klass == 1 else 64}-{'le' if data_enc == 1 else 'be'}"
    if klass == 2:
        if len(head) < 64:
            return SectionTable(fmt, error="truncated ELF header")
        (shoff,) = struct.unpack_from(bo + "Q", head, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 0x3A)
        need, ent_fmt = 64, bo + "IIQQQQI"
    else:
        (shoff,) = struct.unpack_from(bo + "I", head, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(bo + "HHH", head, 0x2E)
        need, ent_fmt = 40, bo + "IIIIIII"
    if shoff == 0:
        return SectionTable(fmt, error="no section header table")
    if shentsize < need:
        return SectionTable(fmt, error=f"section header size {shentsize} is too small")
    first = r.read(shoff, shentsize)
    if len(first) < need:
        return SectionTable(fmt, error="section header table is past the end of the file")
    f0 = struct.unpack_from(ent_fmt, first, 0)
    if shnum == 0:  # SHN_LORESERVE overflow: the count is section 0's sh_size
        shnum = f0[5]
    if shstrndx == 0xFFFF:  # SHN_XINDEX: the index is section 0's sh_link
        shstrndx = f0[6]
    error = None
    if shnum > MAX_SECTIONS:
        shnum, error = MAX_SECTIONS, f"more than {MAX_SECTIONS} sections; the rest were not read"
    raw = _elf_section_entries(r, shoff, shnum, shentsize, need, ent_fmt)
    count = len(raw)
    if count < shnum:
        error = error or f"section header table truncated ({count} of {shnum} sections)"
    names = b""
    if 0 < shstrndx < len(raw):
        _, _, stroff, strsize = raw[shstrndx]
        names = r.read(stroff, min(strsize, MAX_NAME_TABLE))
    elif raw:
        error = error or "no section name table"
    sections = [
        Section(_cstr(names, name_off), off, 0 if sh_type == 8 else size)  # 8: SHT_NOBITS
        for name_off, sh_type, off, size in raw[1:]
    ]
    return SectionTable(fmt, sections, error)


def _elf_section_entries(r: BoundedReader, shoff: int, shnum: int, shentsize: int, need: int, ent_fmt: str) -> list[tuple[int, int, int, int]]:
    """(name offset, type, file offset, size) of each section header that is in the file: the table read at once,
    or, for oversized entries (a header claiming 65,535 x 65,535 bytes), only the fields, one entry at a time."""
    raw: list[tuple[int, int, int, int]] = []
    if shnum * shentsize <= MAX_SECTION_TABLE:
        table = r.read(shoff, shnum * shentsize)
        count = len(table) // shentsize
        for i in range(count):
            ent = struct.unpack_from(ent_fmt, table, i * shentsize)
            raw.append((ent[0], ent[1], ent[4], ent[5]))
    else:
        for i in range(shnum):
            ent_b = r.read(shoff + i * shentsize, need)
            if len(ent_b) < need:
                break
            ent = struct.unpack_from(ent_fmt, ent_b, 0)
            raw.append((ent[0], ent[1], ent[4], ent[5]))
    return raw


def _pe_sections(r: BoundedReader, head: bytes) -> SectionTable:
    if len(head) < 0x40:
        return SectionTable("pe", error="truncated MZ header")
    (lfanew,) = struct.unpack_from("<I", head, 0x3C)
    coff = r.read(lfanew, 24)
    if len(coff) < 24 or coff[:4] != b"PE\0\0":
        return SectionTable(error="MZ file without a PE header (DOS program?)")
    _machine, nsec, _ts, symptr, nsyms, optsize, _chars = struct.unpack_from("<HHIIIHH", coff, 4)
    error = None
    if nsec > MAX_SECTIONS:
        nsec, error = MAX_SECTIONS, f"more than {MAX_SECTIONS} sections; the rest were not read"
    start = lfanew + 24 + optsize
    table = r.read(start, nsec * 40)
    count = len(table) // 40
    if count < nsec:
        error = error or f"section table truncated ({count} of {nsec} sections)"
    strtab_at = symptr + nsyms * 18 if symptr else 0
    sections = []
    for i in range(count):
        name_b, vsize, _vaddr, rawsize, rawptr = struct.unpack_from("<8sIIII", table, i * 40)
        name = name_b.split(b"\0", 1)[0].decode("latin-1")
        if name.startswith("/") and name[1:].isdigit() and strtab_at:
            name = _cstr(r.read(strtab_at + int(name[1:]), 256), 0) or name
        size = min(vsize, rawsize) if vsize else rawsize
        sections.append(Section(name, rawptr, size if rawptr else 0))
    return SectionTable("pe", sections, error)


# ---------------------------------------------------------------------------- NVIDIA fatbin


@dataclass(frozen=True)
class FatbinEntry:
    kind: str  # "ptx" | "elf" | "oldcubin" | "kind<N>"
    sm: int  # 90
    arch: str  # "sm_90a" (cubin) | "compute_120" (PTX), named as cuobjdump names them
    flags: int
    compressed: bool
    compression: str | None  # "zstd" | "lz4" | "nvidia" | None
    family_specific: bool  # flag 0x200000 (probably an "f" target; see the module docstring)
    container: int  # index of the container (translation unit) it is in


@dataclass
class FatbinResult:
    containers: int = 0
    entries: list[FatbinEntry] = field(default_factory=list)
    error: str | None = None
    truncated: bool = False  # a cap was hit

    @property
    def compressed(self) -> int:
        return sum(1 for e in self.entries if e.compressed)

    def arch_containers(self) -> dict[str, int]:
        """arch -> number of containers that carry it (PTX and cubins; unknown kinds left out)."""
        seen: dict[str, set[int]] = {}
        for e in self.entries:
            if e.kind in ("ptx", "elf", "oldcubin"):
                seen.setdefault(e.arch, set()).add(e.container)
        return {a: len(c) for a, c in seen.items()}


def _fatbin_arch(kind: int, sm: int, flags: int) -> tuple[str, str]:
    suffix = "a" if flags & FATBIN_FLAG_ARCH_SPECIFIC else ""
    if kind == 1:
        return "ptx", f"compute_{sm}{suffix}"
    if kind == 2:
        return "elf", f"sm_{sm}{suffix}"
    if kind == 4:
        return "oldcubin", f"sm_{sm}{suffix}"
    return f"kind{kind}", f"kind{kind}_{sm}{suffix}"


def _compression(flags: int) -> str | None:
    if flags & FATBIN_FLAG_ZSTD:
        return "zstd"
    if flags & FATBIN_FLAG_LZ4:
        return "lz4"
    if flags & FATBIN_FLAG_COMPRESS:
        return "nvidia"
    return None


def _skip_zeros(r: BoundedReader, pos: int, end: int, align: int) -> int:
    """The first ``align``-aligned offset in [pos, end) whose bytes are not all zero (``end`` if none).

    Reads in 64 KiB chunks and gives up after :data:`MAX_ZERO_SKIP` bytes (returns that position).
    """
    limit = min(end, pos + MAX_ZERO_SKIP)
    while pos < limit:
        chunk = r.read(pos, min(65536, limit - pos))
        if not chunk:
            return end
        stripped = len(chunk) - len(chunk.lstrip(b"\0"))
        if stripped < len(chunk):
            nz = pos + stripped
            return nz - ((nz - pos) % align) if align > 1 else nz
        pos += len(chunk)
    return min(end, pos)


def walk_fatbin(fh: BinaryIO, offset: int, size: int, deadline: float | None = None) -> FatbinResult:
    """Every container and entry header of the fat binary data at ``offset`` (``size`` bytes)."""
    r = BoundedReader(fh, deadline)
    res = _walk_fatbin(r, offset, size)
    if r.expired:
        res.truncated = True
        res.error = "the time budget ran out; the rest was not read" + (f" ({res.error})" if res.error else "")
    return res


def _walk_fatbin(r: BoundedReader, offset: int, size: int) -> FatbinResult:
    res = FatbinResult()
    end = offset + max(size, 0)
    if r.size >= 0 and end > r.size:
        res.error, end = "the fat binary section runs past the end of the file", r.size
    pos = offset
    while pos + 16 <= end:
        head = r.read(pos, 16)
        if len(head) < 16:
            res.error = res.error or f"could not read at +{pos - offset}"
            break
        magic, _version, hsize, fsize = struct.unpack_from("<IHHQ", head)
        if magic != FATBIN_MAGIC:
            if head == b"\0" * 16 or head[:8] == b"\0" * 8:
                nxt = _skip_zeros(r, pos, end, 8)
                if nxt <= pos:
                    nxt = pos + 8
                pos = nxt
                continue
            res.error = res.error or f"no fat binary header at +{pos - offset} (magic 0x{magic:08x})"
            break
        if res.containers >= MAX_FATBIN_CONTAINERS:
            res.truncated = True
            res.error = res.error or f"more than {MAX_FATBIN_CONTAINERS} containers; the rest were not read"
            break
        if hsize < 16:
            res.error = res.error or f"container at +{pos - offset} has header size {hsize}"
            break
        index = res.containers
        res.containers += 1
        body_end = pos + hsize + fsize
        if body_end > end:
            res.error = res.error or f"container at +{pos - offset} is truncated ({fsize} bytes declared)"
        stop = min(body_end, end)
        e = _fatbin_entries(r, res, pos + hsize, stop, offset, index)
        if e is None:
            return res
        if e < stop and e + 64 > stop and stop == body_end:
            res.error = res.error or f"{stop - e} stray bytes at the end of container at +{pos - offset}"
        if body_end > end:
            break
        pos = body_end
    return res


def _fatbin_entries(r: BoundedReader, res: FatbinResult, e: int, stop: int, offset: int, index: int) -> int | None:
    """The entries of container ``index`` from ``e`` up to ``stop`` into ``res``; where the walk stopped, or None
    when ``res`` is full (``MAX_FATBIN_ENTRIES``) and nothing more is to be read."""
    while e + 64 <= stop:
        b = r.read(e, 64)
        if len(b) < 64:
            res.error = res.error or f"could not read entry at +{e - offset}"
            break
        kind, _ev, ehs, psize = struct.unpack_from("<HHIQ", b, 0)
        (sm,) = struct.unpack_from("<I", b, 28)
        (flags,) = struct.unpack_from("<Q", b, 40)
        if ehs < 64:
            res.error = res.error or f"entry at +{e - offset} has header size {ehs}"
            break
        if len(res.entries) >= MAX_FATBIN_ENTRIES:
            res.truncated = True
            res.error = res.error or f"more than {MAX_FATBIN_ENTRIES} entries; the rest were not read"
            return None
        k, arch = _fatbin_arch(kind, sm, flags)
        comp = _compression(flags)
        res.entries.append(
            FatbinEntry(k, sm, arch, flags, comp is not None, comp, bool(flags & FATBIN_FLAG_FAMILY_SPECIFIC), index)
        )
        e += ehs + psize
    return e


# ---------------------------------------------------------------------------- clang offload bundles


@dataclass(frozen=True)
class BundleEntry:
    id: str  # "hipv4-amdgcn-amd-amdhsa--gfx942:xnack-"
    offset: int  # from the start of the (uncompressed) bundle
    size: int

    @property
    def kind(self) -> str:
        """The offload kind: "hipv4", "hip", "host", "openmp", "sycl", ..."""
        return self.id.split("-", 1)[0]

    @property
    def target(self) -> str | None:
        """The target id after the triple ("gfx942:xnack-"), or None (host, or no target)."""
        parts = self.id.split("-", 5)
        if len(parts) == 6 and parts[5]:
            return parts[5]
        return None


@dataclass
class OffloadBundle:
    offset: int  # in the file
    compressed: bool = False
    version: int | None = None  # compressed bundles: the CCOB format version
    method: str | None = None  # "zlib" | "zstd" | "method<N>"
    total_size: int | None = None  # compressed bundles, V2+: bytes including the header
    uncompressed_size: int | None = None
    entries: list[BundleEntry] = field(default_factory=list)
    error: str | None = None  # why the entries are unknown or partial


@dataclass
class BundlesResult:
    bundles: list[OffloadBundle] = field(default_factory=list)
    error: str | None = None
    truncated: bool = False

    @property
    def compressed(self) -> int:
        return sum(1 for b in self.bundles if b.compressed)

    def target_bundles(self) -> dict[str, int]:
        """target id -> number of bundles (translation units) that carry it (host entries left out)."""
        out: dict[str, int] = {}
        for b in self.bundles:
            for t in {e.target for e in b.entries if e.kind != "host" and e.target}:
                if t is not None:
                    out[t] = out.get(t, 0) + 1
        return out


def parse_bundle_header(data: bytes) -> tuple[list[BundleEntry], str | None, int]:
    """The entries of an uncompressed bundle at the start of ``data``: (entries, error, header end).

    Pure; never raises. ``error`` is set when the header is cut short or malformed (the
    entries read so far are kept).
    """
    if not data.startswith(BUNDLE_MAGIC):
        return [], "no __CLANG_OFFLOAD_BUNDLE__ magic", 0
    p = len(BUNDLE_MAGIC)
    if len(data) < p + 8:
        return [], "bundle header truncated", p
    (n,) = struct.unpack_from("<Q", data, p)
    p += 8
    err = None
    if n > MAX_BUNDLE_ENTRIES:
        n, err = MAX_BUNDLE_ENTRIES, f"more than {MAX_BUNDLE_ENTRIES} entries; the rest were not read"
    entries: list[BundleEntry] = []
    for _ in range(n):
        if len(data) < p + 24:
            return entries, "bundle header truncated", p
        off, size, idlen = struct.unpack_from("<QQQ", data, p)
        p += 24
        if idlen > MAX_BUNDLE_ID:
            return entries, f"bundle id of {idlen} bytes", p
        if len(data) < p + idlen:
            return entries, "bundle header truncated", p
        entries.append(BundleEntry(data[p : p + idlen].decode("utf-8", "replace"), off, size))
        p += idlen
    return entries, err, p


def _read_plain_bundle(r: BoundedReader, pos: int, end: int) -> tuple[OffloadBundle, int]:
    """An uncompressed bundle at ``pos``; returns it and where it ends (header end if no entry says)."""
    want = 4096
    while True:
        data = r.read(pos, min(want, end - pos))
        entries, err, hend = parse_bundle_header(data)
        if err != "bundle header truncated" or len(data) < want or want >= (1 << 22):
            break
        want *= 4
    b = OffloadBundle(pos, entries=entries, error=err)
    last = max([e.offset + e.size for e in entries if e.offset + e.size < (1 << 62)] + [hend])
    return b, pos + max(last, len(BUNDLE_MAGIC))


def _decompress_prefix(method: int, stream: bytes, zstd: ZstdDecoder | None, out_cap: int = MAX_DECOMPRESSED_PREFIX) -> tuple[bytes | None, str | None]:
    if method == 0:
        try:
            d = zlib.decompressobj()
            return d.decompress(stream, out_cap), None
        except zlib.error as exc:
            return None, f"zlib stream is corrupt: {exc}"
    if method == 1:
        if zstd is None:
            return None, "the bundle ids are inside a zstd stream and no zstd decoder is available"
        try:
            out = zstd(stream, out_cap)
        except Exception as exc:  # a decoder is caller code: it must not take the walk down
            return None, f"zstd decoder failed: {type(exc).__name__}: {exc}"
        if out is None:
            return None, "the bundle ids are inside a zstd stream the decoder could not read"
        return out, None
    return None, f"unknown compression method {method}"


class _Budget:
    """What one bundle walk has decompressed and kept, all bundles together; equal ids are stored once, and
    the walk stops (``full``) before the ids or entries kept could grow past their caps."""

    def __init__(self) -> None:
        self.output = 0
        self.entries = 0
        self.id_bytes = 0
        self.ids: dict[str, str] = {}

    @property
    def full(self) -> bool:
        return (self.entries >= MAX_TOTAL_BUNDLE_ENTRIES or self.output >= MAX_TOTAL_DECOMPRESSED
                or len(self.ids) >= MAX_DISTINCT_IDS or self.id_bytes >= MAX_ID_BYTES)

    def keep_all(self, entries: list[BundleEntry]) -> list[BundleEntry]:
        out: list[BundleEntry] = []
        for e in entries:
            if self.full:
                break
            ident = self.ids.get(e.id)
            if ident is None:
                ident = self.ids[e.id] = e.id
                self.id_bytes += len(e.id)
            self.entries += 1
            out.append(e if ident is e.id else BundleEntry(ident, e.offset, e.size))
        return out


def _read_ccob(r: BoundedReader, pos: int, end: int, zstd: ZstdDecoder | None, budget: _Budget | None = None) -> tuple[OffloadBundle, int | None]:
    """A compressed bundle at ``pos``; returns it and where it ends (None when the header does not say)."""
    head = r.read(pos, 32)
    b = OffloadBundle(pos, compressed=True)
    if len(head) < 8:
        b.error = "compressed bundle header truncated"
        return b, None
    version, method = struct.unpack_from("<HH", head, 4)
    b.version = version
    b.method = {0: "zlib", 1: "zstd"}.get(method, f"method{method}")
    hlen = {1: 20, 2: 24, 3: 32}.get(version)
    if hlen is None:
        b.error = f"unknown compressed bundle version {version}"
        return b, None
    if len(head) < hlen:
        b.error = "compressed bundle header truncated"
        return b, None
    if version == 1:
        (b.uncompressed_size,) = struct.unpack_from("<I", head, 8)
    elif version == 2:
        b.total_size, b.uncompressed_size = struct.unpack_from("<II", head, 8)
    else:
        b.total_size, b.uncompressed_size = struct.unpack_from("<QQ", head, 8)
    stream_end = pos + b.total_size if b.total_size else end
    if b.total_size is not None and (b.total_size < hlen or stream_end > end):
        b.error = f"compressed bundle declares {b.total_size} bytes, past the end of the section"
        stream_end = end
    if method == 1 and zstd is None:
        err: str | None = "the bundle ids are inside a zstd stream and no zstd decoder is available"
    else:
        # the inner header is in the first few KiB of output: read a little input and decompress a little
        # output, more of either only while the header is cut short (a stream is never decompressed whole)
        want, avail, out_cap = 1 << 16, max(0, stream_end - pos - hlen), 1 << 12
        while True:
            stream = r.read(pos + hlen, min(want, avail))
            data, err = _decompress_prefix(method, stream, zstd, out_cap)
            if data is None:
                break
            if budget is not None:
                budget.output += len(data)
            entries, perr, _ = parse_bundle_header(data)
            b.entries, err = entries, perr and f"decompressed bundle: {perr}"
            del data
            if perr != "bundle header truncated" or (want >= min(avail, MAX_COMPRESSED_READ) and out_cap >= MAX_DECOMPRESSED_PREFIX):
                break
            want, out_cap = min(want * 4, MAX_COMPRESSED_READ), min(out_cap * 8, MAX_DECOMPRESSED_PREFIX)
    b.error = b.error or err
    return b, (pos + b.total_size if b.total_size and b.total_size >= hlen else None)


def _find_magic(r: BoundedReader, pos: int, end: int) -> int:
    """The next offset >= pos where a bundle magic starts, or ``end``. Linear, chunked."""
    overlap = len(BUNDLE_MAGIC) - 1
    while pos < end:
        chunk = r.read(pos, min(1 << 20, end - pos))
        if not chunk:
            return end
        hits = [i for i in (chunk.find(BUNDLE_MAGIC), chunk.find(CCOB_MAGIC)) if i >= 0]
        if hits:
            return pos + min(hits)
        if pos + len(chunk) >= end:
            return end
        pos += max(1, len(chunk) - overlap)
    return end


def walk_offload_bundles(fh: BinaryIO, offset: int, size: int, zstd: ZstdDecoder | None = None, deadline: float | None = None) -> BundlesResult:
    """Every offload bundle (plain or ``CCOB``) in the section data at ``offset`` (``size`` bytes).

    ``zstd(data, max_out)`` decodes a prefix of a zstd stream (at most ``max_out`` bytes of
    output, ``None`` when it cannot); without it, zstd-compressed bundles are reported with
    their header facts and no ids.
    """
    r = BoundedReader(fh, deadline)
    res = BundlesResult()
    end = offset + max(size, 0)
    if r.size >= 0 and end > r.size:
        res.error, end = "the offload bundle section runs past the end of the file", r.size
    budget = _Budget()
    pos = offset
    while pos < end:
        if r.expired:
            res.truncated = True
            res.error = "the time budget ran out; the rest was not read" + (f" ({res.error})" if res.error else "")
            break
        if budget.full:
            res.truncated = True
            res.error = res.error or (
                f"more than {MAX_TOTAL_BUNDLE_ENTRIES} bundle entries, {MAX_DISTINCT_IDS} different ids or "
                f"{MAX_TOTAL_DECOMPRESSED >> 20} MiB decompressed; the rest were not read"
            )
            break
        pos = _skip_zeros(r, pos, end, 1)
        if pos >= end:
            break
        head = r.read(pos, len(BUNDLE_MAGIC))
        if len(res.bundles) >= MAX_BUNDLES:
            res.truncated = True
            res.error = res.error or f"more than {MAX_BUNDLES} bundles; the rest were not read"
            break
        nxt: int | None
        if head.startswith(BUNDLE_MAGIC):
            b, nxt = _read_plain_bundle(r, pos, end)
        elif head.startswith(CCOB_MAGIC):
            b, nxt = _read_ccob(r, pos, end, zstd, budget)
        else:
            found = _find_magic(r, pos, end)
            if found >= end:
                if not res.bundles:
                    res.error = res.error or "no offload bundle in the section"
                break
            pos = found
            continue
        b.entries = budget.keep_all(b.entries)
        res.bundles.append(b)
        if nxt is None or nxt <= pos:
            nxt = _find_magic(r, pos + 4, end)
        pos = nxt
    return res


# ---------------------------------------------------------------------------- SYCL / XPU images


@dataclass
class SyclImage:
    section: str  # "__CLANG_OFFLOAD_BUNDLE__sycl-spir64_gen"
    target: str  # "spir64_gen" (AOT for Intel GPUs) | "spir64" (SPIR-V, JIT) | ...
    size: int
    compression: str | None = None  # "zstd" when the image is a zstd stream
    members: list[str] = field(default_factory=list)  # ar member names of an uncompressed AOT archive
    error: str | None = None


def read_sycl_image(fh: BinaryIO, section: Section, deadline: float | None = None) -> SyclImage:
    """What one ``__CLANG_OFFLOAD_BUNDLE__sycl-*`` section holds (see the module docstring)."""
    r = BoundedReader(fh, deadline)
    img = SyclImage(section.name, section.name[len(SYCL_SECTION_PREFIX) :], section.size)
    head = r.read(section.offset, 8)
    if head.startswith(ZSTD_MAGIC):
        img.compression = "zstd"
        return img
    if head != AR_MAGIC:
        return img
    pos, end = section.offset + 8, section.offset + section.size
    while pos + 60 <= end:
        h = r.read(pos, 60)
        if len(h) < 60 or h[58:60] != b"`\n":
            img.error = "malformed ar member header"
            break
        try:
            msize = int(h[48:58].decode("ascii").strip() or "0")
        except ValueError:
            img.error = "malformed ar member size"
            break
        if msize < 0 or not h[48:58].strip().isdigit():  # "-60" would walk backwards forever
            img.error = f"malformed ar member size {h[48:58].decode('latin-1').strip()!r}"
            break
        name = h[:16].decode("latin-1").rstrip().rstrip("/")
        if name and not name.startswith("pad_"):
            img.members.append(name)
        if len(img.members) >= MAX_AR_MEMBERS:
            img.error = f"more than {MAX_AR_MEMBERS} members; the rest were not read"
            break
        pos += 60 + msize + (msize & 1)  # always forward: msize >= 0
    if r.expired:
        img.error = "the time budget ran out; the rest was not read"
    return img
