"""The dynamic-linking tables of one ELF file, read lazily with caps, for :mod:`stackdoctor.binaries.linkage`.

Layouts: ELF ``Elf32/64_Shdr``, ``Elf*_Dyn``, ``Elf*_Sym``, ``Elf*_Verneed`` / ``Vernaux`` / ``Verdef`` /
``Verdaux`` (System V gABI and the LSB "Symbol Versioning" chapter), the GNU hash table (``nbuckets, symoffset,
bloom_size, bloom_shift``, bloom words, buckets, chain; hash ``h = h*33 + c`` from 5381) as in glibc's
``dl-lookup.c``. Every count and size trusted from the file is capped; nothing raises on arbitrary bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

from stackdoctor.binaries.binfmt import BoundedReader

MAX_NEEDED = 256  # DT_NEEDED of one object
MAX_DYNAMIC = 1 << 16  # .dynamic entries
MAX_SYMBOLS = 1 << 21  # .dynsym entries of one object
MAX_UNDEFINED = 1 << 16  # undefined symbols checked per object
MAX_TABLE = 64 << 20  # bytes of one table (.dynsym, .gnu.version, .gnu.hash) read
MAX_STRTAB = 16 << 20  # .dynstr read at once (more: name by name)
MAX_VERSIONS = 4096
SHT_DYNSYM, SHT_DYNAMIC, SHT_STRTAB = 11, 6, 3
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
STB_WEAK = 2


# ---------------------------------------------------------------------------- one ELF object


@dataclass
class _Sec:
    type: int
    link: int
    info: int
    offset: int
    size: int
    entsize: int


class DynElf:
    """The dynamic-linking tables of one ELF file, read lazily with caps."""

    def __init__(self, fh: BinaryIO, deadline: float | None) -> None:
        self.r = BoundedReader(fh, deadline)
        self.error: str | None = None
        self.klass = 0
        self.machine = 0
        self.secs: list[_Sec] = []
        self.needed: list[str] = []
        self.soname: str | None = None
        self.rpath: list[str] = []
        self.runpath: list[str] = []
        self._str: dict[int, tuple[int, bytes | None]] = {}
        self._verdefs: dict[int, str] | None = None
        self._versym: bytes | None = None
        self._hash: tuple[int, int, int, int, bytes, bytes] | None = None
        self._hash_read = False
        self._ds: _Sec | None = None  # .dynsym, looked up once
        self._ds_read = False
        self._parse()

    # -- header and sections
    def _parse(self) -> None:
        shoff = self._header()
        if shoff is None:
            return
        shentsize, shnum, fmt, need = shoff[1:]
        if not self._sections(shoff[0], shentsize, shnum, fmt, need):
            return
        dyn = next((s for s in self.secs if s.type == SHT_DYNAMIC), None)
        if dyn is None:
            self.error = self.error or "no dynamic section (not a shared library)"
            return
        self._dynamic(dyn)

    def _header(self) -> tuple[int, int, int, str, int] | None:
        """(section table offset, entry size, count, entry format, bytes needed per entry); None and ``error`` set
        when the file is no ELF this reader can use."""
        head = self.r.read(0, 64)
        if not head:
            self.error = "empty file (file too short)"
            return None
        if head[:4] != b"\x7fELF"[: len(head[:4])] or (len(head) >= 4 and head[:4] != b"\x7fELF"):
            self.error = "invalid ELF header"
            return None
        if len(head) < 52:
            self.error = "file too short"
            return None
        self.klass, enc = head[4], head[5]
        if self.klass not in (1, 2) or enc not in (1, 2):
            self.error = "invalid ELF class or data encoding"
            return None
        self.bo = "<" if enc == 1 else ">"
        self.w = 8 if self.klass == 2 else 4
        (self.machine,) = struct.unpack_from(self.bo + "H", head, 18)
        if self.klass == 2:
            if len(head) < 64:
                self.error = "file too short"
                return None
            (shoff,) = struct.unpack_from(self.bo + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(self.bo + "HH", head, 0x3A)
            fmt, need = self.bo + "IIQQQQIIQQ", 64
        else:
            (shoff,) = struct.unpack_from(self.bo + "I", head, 0x20)
            shentsize, shnum = struct.unpack_from(self.bo + "HH", head, 0x2E)
            fmt, need = self.bo + "IIIIIIIIII", 40
        if shoff == 0 or shentsize < need:
            self.error = "no section header table"
            return None
        return shoff, shentsize, shnum, fmt, need

    def _sections(self, shoff: int, shentsize: int, shnum: int, fmt: str, need: int) -> bool:
        """Read the section headers into ``secs``; False when there are none to read."""
        first = self.r.read(shoff, need)
        if len(first) < need:
            self.error = "file too short (the section headers are past its end)"
            return False
        if shnum == 0:
            shnum = struct.unpack_from(fmt, first, 0)[5]
        shnum = min(shnum, 65535)
        if shnum * shentsize <= (16 << 20):
            table = self.r.read(shoff, shnum * shentsize)
            ents = [table[i * shentsize : i * shentsize + need] for i in range(len(table) // shentsize)]
        else:
            ents = [self.r.read(shoff + i * shentsize, need) for i in range(shnum)]
        for e in ents:
            if len(e) < need:
                break
            _n, typ, _fl, _addr, off, size, link, info, _al, ents_ = struct.unpack_from(fmt, e, 0)
            self.secs.append(_Sec(typ, link, info, off, size, ents_))
        if len(self.secs) < shnum:
            self.error = f"file too short ({len(self.secs)} of {shnum} section headers)"
        return True

    def _dynamic(self, dyn: _Sec) -> None:
        """DT_NEEDED, DT_SONAME, DT_RPATH and DT_RUNPATH of the dynamic section."""
        esz = 2 * self.w
        data = self.r.read(dyn.offset, min(dyn.size, MAX_DYNAMIC * esz))
        fmt_d = self.bo + ("qQ" if self.w == 8 else "iI")
        for i in range(len(data) // esz):
            tag, val = struct.unpack_from(fmt_d, data, i * esz)
            if tag == 0:
                break
            if tag == DT_NEEDED and len(self.needed) < MAX_NEEDED:
                self.needed.append(self.string(dyn.link, val))
            elif tag == DT_SONAME:
                self.soname = self.string(dyn.link, val)
            elif tag in (DT_RPATH, DT_RUNPATH):
                paths = self.rpath if tag == DT_RPATH else self.runpath
                paths += [p for p in self.string(dyn.link, val).split(":") if p]
        self.needed = [n for n in self.needed if n]

    def sec(self, index: int) -> _Sec | None:
        return self.secs[index] if 0 <= index < len(self.secs) else None

    def string(self, strndx: int, off: int) -> str:
        """A NUL-terminated name at ``off`` in string table section ``strndx``."""
        s = self.sec(strndx)
        if s is None or off < 0 or off >= s.size:
            return ""
        blob = self.strtab(strndx)
        base = s.offset
        if blob is not None:
            end = blob.find(b"\0", off, off + 4096)
            return blob[off : end if end >= 0 else off + 4096].decode("latin-1")
        raw = self.r.read(base + off, 1024)
        return raw.split(b"\0", 1)[0].decode("latin-1")

    # -- symbols
    def _dynsym(self) -> _Sec | None:
        if not self._ds_read:
            self._ds_read, self._ds = True, next((s for s in self.secs if s.type == SHT_DYNSYM), None)
        return self._ds

    def _symsize(self) -> int:
        return 24 if self.w == 8 else 16

    def symbol(self, ds: _Sec, i: int, raw: bytes | None = None, at: int = 0) -> tuple[str, int, int]:
        """(name, binding, section index) of dynamic symbol ``i``."""
        b = raw[at : at + self._symsize()] if raw is not None else self.r.read(ds.offset + i * self._symsize(), self._symsize())
        if len(b) < self._symsize():
            return "", 0, 0
        if self.w == 8:
            name, info, _other, shndx = struct.unpack_from(self.bo + "IBBH", b, 0)
        else:
            name, _v, _s, info, _other, shndx = struct.unpack_from(self.bo + "IIIBBH", b, 0)
        return self.string(ds.link, name), info >> 4, shndx

    def versym(self, i: int) -> int:
        if self._versym is None:
            vs = next((s for s in self.secs if s.type == SHT_GNU_VERSYM), None)
            self._versym = self.r.read(vs.offset, min(vs.size, MAX_TABLE)) if vs else b""
        if 2 * i + 2 > len(self._versym):
            return 1
        return int(struct.unpack_from(self.bo + "H", self._versym, 2 * i)[0])

    def verneeds(self) -> dict[int, tuple[str, str]]:
        """version index -> (file, version name) this object requires."""
        out: dict[int, tuple[str, str]] = {}
        s = next((x for x in self.secs if x.type == SHT_GNU_VERNEED), None)
        if s is None:
            return out
        data = self.r.read(s.offset, min(s.size, 1 << 20))
        pos, seen = 0, 0
        while 0 <= pos and pos + 16 <= len(data) and seen < MAX_VERSIONS:
            _ver, cnt, file_off, aux, nxt = struct.unpack_from(self.bo + "HHIII", data, pos)
            fname = self.string(s.link, file_off)
            a = pos + aux
            for _ in range(min(cnt, MAX_VERSIONS)):
                if a < 0 or a + 16 > len(data):
                    break
                _h, _flags, other, name_off, anext = struct.unpack_from(self.bo + "IHHII", data, a)
                out[other & 0x7FFF] = (fname, self.string(s.link, name_off))
                seen += 1
                if anext == 0:
                    break
                a += anext
            if nxt == 0:
                break
            pos += nxt
        return out

    def verdefs(self) -> dict[int, str]:
        """version index -> version name this object defines (index 1 is the file's own name)."""
        if self._verdefs is not None:
            return self._verdefs
        out: dict[int, str] = {}
        s = next((x for x in self.secs if x.type == SHT_GNU_VERDEF), None)
        if s is not None:
            data = self.r.read(s.offset, min(s.size, 1 << 20))
            pos = 0
            while 0 <= pos and pos + 20 <= len(data) and len(out) < MAX_VERSIONS:
                _v, _flags, ndx, _cnt, _h, aux, nxt = struct.unpack_from(self.bo + "HHHHIII", data, pos)
                if 0 <= pos + aux and pos + aux + 8 <= len(data):
                    (name_off,) = struct.unpack_from(self.bo + "I", data, pos + aux)
                    out[ndx & 0x7FFF] = self.string(s.link, name_off)
                if nxt == 0:
                    break
                pos += nxt
        self._verdefs = out
        return out

    def undefined(self) -> list[tuple[str, int]]:
        """(name, version index) of the undefined, non-weak dynamic symbols (GNU ld puts them before the
        hashed ones, so only the first ``symoffset`` entries are read when there is a .gnu.hash table)."""
        ds = self._dynsym()
        return [(self.string(ds.link, off), v) for off, v in self.undefined_refs()] if ds is not None else []

    def undefined_refs(self) -> list[tuple[int, int]]:
        """:meth:`undefined` with each name left as its offset in the dynamic string table (:meth:`name`): of
        thousands of undefined symbols a check needs the names of a few (issue 33: read less)."""
        ds = self._dynsym()
        size = self._symsize()
        if ds is None or ds.entsize not in (0, size):
            return []
        n = min(ds.size // size, MAX_SYMBOLS)
        ht = self._gnu_hash()
        if ht is not None:
            n = min(n, ht[1])
        raw = self.r.read(ds.offset, min(n * size, MAX_TABLE))
        raw = raw[: len(raw) // size * size]
        # (st_name, st_info, st_shndx) of each entry: Elf64_Sym is name, info, other, shndx, value, size;
        # Elf32_Sym is name, value, size, info, other, shndx
        fmt = self.bo + ("IBxHxxxxxxxxxxxxxxxx" if self.w == 8 else "IxxxxxxxxBxH")
        versyms = self._versyms()
        blob = self.strtab(ds.link)
        out: list[tuple[int, int]] = []
        for i, (name, info, shndx) in enumerate(struct.iter_unpack(fmt, raw)):
            if shndx != 0 or (info >> 4) in (0, STB_WEAK) or i == 0:
                continue
            if blob is not None and (name >= len(blob) or blob[name] == 0):  # an empty name (string() == "")
                continue
            if blob is None and not self.string(ds.link, name):
                continue
            out.append((name, (versyms[i] if i < len(versyms) else 1) & 0x7FFF))
            if len(out) >= MAX_UNDEFINED:
                break
        return out

    def strtab(self, strndx: int) -> bytes | None:
        """String table ``strndx`` read whole (None when there is none or it is too big to read at once)."""
        s = self.sec(strndx)
        if s is None:
            return None
        if self._str.get(strndx) is None:
            self._str[strndx] = (s.offset, self.r.read(s.offset, s.size) if s.size <= MAX_STRTAB else None)
        return self._str[strndx][1]

    def name(self, off: int) -> str:
        """A dynamic symbol's name from its offset (:meth:`undefined_refs`)."""
        ds = self._dynsym()
        return self.string(ds.link, off) if ds is not None else ""

    def dynstr(self) -> bytes | None:
        """The dynamic symbols' string table, whole (None: no table, or too big to hold: read name by name)."""
        ds = self._dynsym()
        return self.strtab(ds.link) if ds is not None else None

    def _versyms(self) -> tuple[int, ...]:
        """Every entry of .gnu.version, unpacked once."""
        if self._versym is None:
            vs = next((s for s in self.secs if s.type == SHT_GNU_VERSYM), None)
            self._versym = self.r.read(vs.offset, min(vs.size, MAX_TABLE)) if vs else b""
        return struct.unpack_from(f"{self.bo}{len(self._versym) // 2}H", self._versym, 0)

    def _gnu_hash(self) -> tuple[int, int, int, int, bytes, bytes] | None:
        """(nbuckets, symoffset, bloom words, bloom shift, buckets, chain) or None."""
        if self._hash_read:
            return self._hash
        self._hash_read = True
        s = next((x for x in self.secs if x.type == SHT_GNU_HASH), None)
        if s is None:
            return None
        data = self.r.read(s.offset, min(s.size, MAX_TABLE))
        if len(data) < 16:
            return None
        nb, symoff, bsize, bshift = struct.unpack_from(self.bo + "IIII", data, 0)
        bstart = 16 + bsize * self.w
        if nb == 0 or bstart + 4 * nb > len(data):
            return None
        self._hash = (nb, symoff, bsize, bshift, data[bstart : bstart + 4 * nb], data[bstart + 4 * nb :])
        return self._hash

    def defines(self, name: str, version: str | None) -> bool:
        """Whether this object defines ``name`` (with ``version``, when given) in its dynamic symbols."""
        ds = self._dynsym()
        if ds is None:
            return False
        vdefs = self.verdefs()
        ht = self._gnu_hash()

        def ok(i: int) -> bool:
            sname, _bind, shndx = self.symbol(ds, i)
            if sname != name or shndx == 0:
                return False
            if version is None or not vdefs:
                return True
            return vdefs.get(self.versym(i) & 0x7FFF) == version

        if ht is not None:
            nb, symoff, _bs, _sh, buckets, chain = ht
            h = 5381
            for c in name.encode("latin-1", "replace"):
                h = (h * 33 + c) & 0xFFFFFFFF
            (i,) = struct.unpack_from(self.bo + "I", buckets, 4 * (h % nb))
            steps = 0
            while i >= symoff and steps < 1 << 16:
                ci = i - symoff
                if 4 * ci + 4 > len(chain):
                    return False
                (ch,) = struct.unpack_from(self.bo + "I", chain, 4 * ci)
                if (ch | 1) == (h | 1) and ok(i):
                    return True
                if ch & 1:
                    return False
                i += 1
                steps += 1
            return False
        n = min(ds.size // self._symsize(), MAX_SYMBOLS)
        raw = self.r.read(ds.offset, min(n * self._symsize(), MAX_TABLE))
        for i in range(1, len(raw) // self._symsize()):
            sname, _b, shndx = self.symbol(ds, i, raw, i * self._symsize())
            if sname == name and shndx != 0 and (version is None or not vdefs or vdefs.get(self.versym(i) & 0x7FFF) == version):
                return True
        return False
