"""What ``import torch`` would make the dynamic loader do, predicted from the files ("ldd without running anything").

``import torch`` loads ``torch/lib/libtorch_global_deps.so`` and the extension ``torch/_C*.so``, and
the dynamic loader loads what they need, breadth first. This module walks the same graph from the
files alone: each library's ``DT_NEEDED`` names are resolved as glibc's ``ld.so`` resolves them
(``man 8 ld.so``, "Rpath token expansion" and the search order):

1. a name already loaded (by ``SONAME`` or file name) is reused;
2. ``DT_RPATH`` of the requesting object and of the objects that loaded it (the interpreter's
   included), unless the requesting object has ``DT_RUNPATH``;
3. ``LD_LIBRARY_PATH``;
4. ``DT_RUNPATH`` of the requesting object only;
5. the directories of ``/etc/ld.so.conf`` (its ``include`` globs followed), read under the sysroot
   in place of ``/etc/ld.so.cache``;
6. the default directories (``/lib``, ``/usr/lib`` and their 64-bit and multiarch forms).

``$ORIGIN`` (``${ORIGIN}``) is the directory of the requesting object (links resolved), ``$LIB`` is
``lib64`` or ``lib``, ``$PLATFORM`` the machine (``x86_64``). A candidate of another ELF class or
machine is skipped, as ``ld.so`` skips it. A CUDA library found nowhere is looked for where torch's
own ``_load_global_deps`` preloads it from (``nvidia/<name>/lib`` in the site directories) before it
is called missing.

Symbols (the ``version `X' not found`` and ``undefined symbol`` errors): every undefined, non-weak
dynamic symbol that carries a version (``.gnu.version`` / ``.gnu.version_r``) is checked against the
library that version names: the version must be among its ``.gnu.version_d`` definitions (for every
provider, glibc's and libstdc++'s included: ``version `GLIBCXX_3.4.32' not found``), and, for a
provider that is not one of the system's own libraries (a wheel's, or one from ``LD_LIBRARY_PATH``),
the symbol must be defined with it by a loaded object (looked up through the ``.gnu.hash`` table, as
``ld.so`` looks it up; a table-less library is scanned). The system's libraries are held to their
versions only: they keep every symbol of a version they define, and that keeps the check to tens of
milliseconds (23 ms for torch 2.13.0+cpu, 60-100 ms for the 35 libraries of torch 2.14.1+cu130). An unversioned undefined symbol is checked only against a
needed library whose name it carries (``ncclMemFree`` against ``libnccl.so.2``), since any loaded
object (the interpreter itself) may define an unversioned symbol.

Layouts: ELF ``Elf32/64_Shdr``, ``Elf*_Dyn``, ``Elf*_Sym``, ``Elf*_Verneed`` / ``Vernaux`` /
``Verdef`` / ``Verdaux`` (System V gABI and the LSB "Symbol Versioning" chapter), the GNU hash table
(``nbuckets, symoffset, bloom_size, bloom_shift``, bloom words, buckets, chain; hash ``h = h*33 + c``
from 5381) as in glibc's ``dl-lookup.c``.

Every count and size trusted from a file is capped, and the whole walk has a time budget; what is
not checked is said (``LinkCheck.note``). Nothing is loaded, nothing is executed, nothing raises.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

from stackdoctor.binfmt import BoundedReader
from stackdoctor.facts import LinkProblem
from stackdoctor.system import ReadResult, System

MAX_LIBRARIES = 512  # objects loaded in one walk
MAX_NEEDED = 256  # DT_NEEDED of one object
MAX_DYNAMIC = 1 << 16  # .dynamic entries
MAX_SYMBOLS = 1 << 21  # .dynsym entries of one object
MAX_UNDEFINED = 1 << 16  # undefined symbols checked per object
MAX_TABLE = 64 << 20  # bytes of one table (.dynsym, .gnu.version, .gnu.hash) read
MAX_STRTAB = 16 << 20  # .dynstr read at once (more: name by name)
MAX_VERSIONS = 4096
MAX_PROBLEMS = 64
MAX_CONF_FILES = 256
DEFAULT_BUDGET_S = 5.0

SHT_DYNSYM, SHT_DYNAMIC, SHT_STRTAB = 11, 6, 3
SHT_GNU_HASH, SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFF6, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
STB_WEAK = 2

# torch's _load_global_deps preloads these from nvidia/<folder>/lib when libtorch_global_deps.so fails to load
CUDA_PRELOAD = ("cublas", "cudnn", "cuda_nvrtc", "cuda_runtime", "cuda_cupti", "cufft", "curand", "nvjitlink",
                "cusparse", "cusparselt", "cusolver", "nccl", "nvtx", "cufile", "nvshmem")


@dataclass
class LinkCheck:
    """The predicted load of torch's libraries."""

    checked: bool = False  # False: there was nothing to start from (no torch, not ELF: Windows, macOS)
    problems: list[LinkProblem] = field(default_factory=list)
    loaded: dict[str, str] = field(default_factory=dict)  # name -> path, in load order
    symbols_checked: int = 0
    elapsed_ms: float = 0.0
    note: str | None = None  # what was not checked (the time budget, a cap), in one sentence


# ---------------------------------------------------------------------------- one ELF object


@dataclass
class _Sec:
    type: int
    link: int
    info: int
    offset: int
    size: int
    entsize: int


class _Elf:
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
        self._parse()

    # -- header and sections
    def _parse(self) -> None:
        head = self.r.read(0, 64)
        if not head:
            self.error = "empty file (file too short)"
            return
        if head[:4] != b"\x7fELF"[: len(head[:4])] or (len(head) >= 4 and head[:4] != b"\x7fELF"):
            self.error = "invalid ELF header"
            return
        if len(head) < 52:
            self.error = "file too short"
            return
        self.klass, enc = head[4], head[5]
        if self.klass not in (1, 2) or enc not in (1, 2):
            self.error = "invalid ELF class or data encoding"
            return
        self.bo = "<" if enc == 1 else ">"
        self.w = 8 if self.klass == 2 else 4
        (self.machine,) = struct.unpack_from(self.bo + "H", head, 18)
        if self.klass == 2:
            if len(head) < 64:
                self.error = "file too short"
                return
            (shoff,) = struct.unpack_from(self.bo + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(self.bo + "HH", head, 0x3A)
            fmt, need = self.bo + "IIQQQQIIQQ", 64
        else:
            (shoff,) = struct.unpack_from(self.bo + "I", head, 0x20)
            shentsize, shnum = struct.unpack_from(self.bo + "HH", head, 0x2E)
            fmt, need = self.bo + "IIIIIIIIII", 40
        if shoff == 0 or shentsize < need:
            self.error = "no section header table"
            return
        first = self.r.read(shoff, need)
        if len(first) < need:
            self.error = "file too short (the section headers are past its end)"
            return
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
        dyn = next((s for s in self.secs if s.type == SHT_DYNAMIC), None)
        if dyn is None:
            self.error = self.error or "no dynamic section (not a shared library)"
            return
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
            elif tag == DT_RPATH:
                self.rpath += [p for p in self.string(dyn.link, val).split(":") if p]
            elif tag == DT_RUNPATH:
                self.runpath += [p for p in self.string(dyn.link, val).split(":") if p]
        self.needed = [n for n in self.needed if n]

    def sec(self, index: int) -> _Sec | None:
        return self.secs[index] if 0 <= index < len(self.secs) else None

    def string(self, strndx: int, off: int) -> str:
        """A NUL-terminated name at ``off`` in string table section ``strndx``."""
        s = self.sec(strndx)
        if s is None or off < 0 or off >= s.size:
            return ""
        cached = self._str.get(strndx)
        if cached is None:
            blob = self.r.read(s.offset, s.size) if s.size <= MAX_STRTAB else None
            cached = self._str[strndx] = (s.offset, blob)
        base, blob = cached
        if blob is not None:
            end = blob.find(b"\0", off, off + 4096)
            return blob[off : end if end >= 0 else off + 4096].decode("latin-1")
        raw = self.r.read(base + off, 1024)
        return raw.split(b"\0", 1)[0].decode("latin-1")

    # -- symbols
    def _dynsym(self) -> _Sec | None:
        return next((s for s in self.secs if s.type == SHT_DYNSYM), None)

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
        if ds is None or ds.entsize not in (0, self._symsize()):
            return []
        n = min(ds.size // self._symsize(), MAX_SYMBOLS)
        ht = self._gnu_hash()
        if ht is not None:
            n = min(n, ht[1])
        raw = self.r.read(ds.offset, min(n * self._symsize(), MAX_TABLE))
        out: list[tuple[str, int]] = []
        for i in range(1, len(raw) // self._symsize()):
            name, bind, shndx = self.symbol(ds, i, raw, i * self._symsize())
            if shndx == 0 and name and bind != STB_WEAK and bind != 0:
                out.append((name, self.versym(i) & 0x7FFF))
                if len(out) >= MAX_UNDEFINED:
                    break
        return out

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


# ---------------------------------------------------------------------------- search paths


def glibc_version(system: System, path: str, deadline: float | None = None) -> str | None:
    """The glibc release of a ``libc.so.6`` from its own version definitions (the newest ``GLIBC_2.xx`` it
    defines: glibc 2.34 and later name the file only ``libc.so.6``); None when unreadable or no glibc."""
    fh = system.open_binary(path)
    if isinstance(fh, ReadResult):
        return None
    try:
        found: list[tuple[int, ...]] = []
        for name in _Elf(fh, deadline).verdefs().values():
            m = re.fullmatch(r"GLIBC_(\d+)\.(\d+)(?:\.(\d+))?", name or "")
            if m:
                found.append(tuple(int(x) for x in m.groups() if x is not None))
        return ".".join(str(x) for x in max(found)) if found else None
    except Exception:  # a damaged file: no version, never a crash
        return None
    finally:
        fh.close()


def ld_so_conf_dirs(system: System, path: str = "/etc/ld.so.conf", _depth: int = 0, _seen: set[str] | None = None) -> list[str]:
    """The directories ``/etc/ld.so.conf`` names, ``include`` globs followed (under the sysroot)."""
    seen = _seen if _seen is not None else set()
    if path in seen or len(seen) >= MAX_CONF_FILES or _depth > 8:
        return []
    seen.add(path)
    res = system.read_text(path, max_bytes=256 * 1024)
    if not res.ok:
        return []
    out: list[str] = []
    for line in res.text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line[len("include") :].strip()
            if not pattern.startswith("/"):
                pattern = posixpath.join(posixpath.dirname(path), pattern)
            folder, glob = posixpath.split(pattern)
            for name in system.listdir(folder):
                if fnmatch.fnmatch(name, glob):
                    out += ld_so_conf_dirs(system, posixpath.join(folder, name), _depth + 1, seen)
        elif line.startswith("hwcap"):
            continue
        else:
            out.append(line.split("=", 1)[0].strip())
    return out


def default_dirs(klass: int, machine_dirs: Sequence[str]) -> list[str]:
    bits = ["/lib64", "/usr/lib64"] if klass == 2 else []
    return [*machine_dirs, *bits, "/lib", "/usr/lib"]


_MULTIARCH = {62: "x86_64-linux-gnu", 183: "aarch64-linux-gnu", 21: "powerpc64le-linux-gnu", 3: "i386-linux-gnu"}
_PLATFORM = {62: "x86_64", 183: "aarch64", 21: "ppc64le", 3: "i686"}


def expand(entry: str, origin: str, klass: int, machine: int) -> str:
    """``$ORIGIN`` / ``${ORIGIN}``, ``$LIB``, ``$PLATFORM`` in one RPATH/RUNPATH entry."""
    lib = "lib64" if klass == 2 else "lib"
    plat = _PLATFORM.get(machine, "")
    out = re.sub(r"\$(\{ORIGIN\}|ORIGIN\b)", lambda _m: origin, entry)
    out = re.sub(r"\$(\{LIB\}|LIB\b)", lambda _m: lib, out)
    out = re.sub(r"\$(\{PLATFORM\}|PLATFORM\b)", lambda _m: plat, out)
    return posixpath.normpath(out) if out.startswith("/") else out


# ---------------------------------------------------------------------------- the walk


@dataclass
class _Obj:
    path: str
    elf: _Elf
    inherited_rpath: list[str]  # the RPATH of the loaders (theirs, expanded), for this object's needs
    where: str = ""  # how it was found: "root", "rpath", "ld_library_path", "runpath", "system", "preload", "interpreter"


def _machine_real(system: System, path: str) -> str:
    """``path`` with its links resolved, as a machine path (the sysroot prefix taken off)."""
    host = system.realpath(path)
    root = os.path.realpath(str(system.path("/")))
    if root != "/" and (host == root or host.startswith(root.rstrip("/") + "/")):
        return "/" + host[len(root) :].lstrip("/")
    return host


def _stem(soname: str) -> str:
    """``libnccl.so.2`` -> ``nccl``; ``libcudnn_ops.so.9`` -> ``cudnn``: the prefix its symbols carry."""
    base = soname[3:] if soname.startswith("lib") else soname
    base = base.split(".so", 1)[0]
    return re.split(r"[_\-\d]", base.lower(), maxsplit=1)[0]


def check_linkage(
    system: System,
    roots: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    interpreter: str | None = None,
    site_dirs: Sequence[str] = (),
    wheel_dirs: Sequence[str] = (),
    budget_s: float = DEFAULT_BUDGET_S,
) -> LinkCheck:
    """Predict loading ``roots`` (machine paths, in order). ``env`` gives ``LD_LIBRARY_PATH``;
    ``interpreter``'s own needs are loaded first and its RPATH is inherited, as for an extension
    module; ``site_dirs`` are where torch preloads CUDA libraries from; a library found outside
    ``wheel_dirs`` while a copy of it is inside is "shadowed". Never raises."""
    t0 = time.monotonic()
    deadline = t0 + budget_s
    res = LinkCheck()
    try:
        _walk(system, roots, env or {}, interpreter, site_dirs, wheel_dirs, deadline, res)
    except Exception as exc:  # a reader bug must not take the probe down: say what was not checked
        res.note = f"the linkage check stopped: {type(exc).__name__}: {exc}"
    res.elapsed_ms = round((time.monotonic() - t0) * 1000, 2)
    return res


def _walk(system: System, roots: Sequence[str], env: Mapping[str, str], interpreter: str | None, site_dirs: Sequence[str],
          wheel_dirs: Sequence[str], deadline: float, res: LinkCheck) -> None:
    handles: list[BinaryIO] = []

    def open_elf(path: str) -> _Elf | str:
        fh = system.open_binary(path)
        if isinstance(fh, ReadResult):
            return fh.detail or fh.status
        handles.append(fh)
        return _Elf(fh, deadline)

    loaded: dict[str, _Obj] = {}  # names (SONAME and file name) -> object
    by_path: dict[str, _Obj] = {}
    queue: list[_Obj] = []
    ld_path = [p for p in (env.get("LD_LIBRARY_PATH") or "").replace(";", ":").split(":") if p]
    conf: list[str] | None = None
    machine_dirs: list[str] = []

    def add(path: str, elf: _Elf, inherited: list[str], where: str = "") -> _Obj:
        obj = _Obj(path, elf, inherited, where)
        by_path[path] = obj
        for name in {posixpath.basename(path), elf.soname or ""} - {""}:
            loaded.setdefault(name, obj)
        res.loaded[elf.soname or posixpath.basename(path)] = path
        queue.append(obj)
        return obj

    def candidate(path: str, want: _Elf) -> _Elf | str | None:
        """The ELF at ``path`` if it is loadable for ``want`` (class, machine), a reason if not loadable, None if absent/mismatched."""
        if not system.is_file(path):
            return None
        elf = open_elf(path)
        if isinstance(elf, str):
            return elf
        if elf.error and elf.klass == 0:
            return elf.error
        if elf.klass != want.klass or elf.machine != want.machine:
            return None  # ld.so skips a library of another class or machine
        return elf

    def resolve(obj: _Obj, name: str) -> tuple[str | None, _Elf | str | None, str]:
        """(path, elf or why unloadable, where found: rpath / ld_library_path / runpath / system / preload)."""
        nonlocal conf, machine_dirs
        origin = posixpath.dirname(_machine_real(system, obj.path))
        e = obj.elf
        order: list[tuple[str, list[str]]] = []
        if not e.runpath:
            order.append(("rpath", [expand(p, origin, e.klass, e.machine) for p in e.rpath] + obj.inherited_rpath))
        order.append(("ld_library_path", ld_path))
        if e.runpath:
            order.append(("runpath", [expand(p, origin, e.klass, e.machine) for p in e.runpath]))
        if conf is None:
            conf = ld_so_conf_dirs(system)
            md = _MULTIARCH.get(e.machine)
            machine_dirs = [f"/lib/{md}", f"/usr/lib/{md}"] if md else []
        order.append(("system", conf + default_dirs(e.klass, machine_dirs)))
        if "/" in name:
            c = candidate(name, e)
            return (name, c, "path") if c is not None else (None, None, "")
        for where, dirs in order:
            for d in dict.fromkeys(dirs):
                if not d.startswith("/"):
                    continue
                p = posixpath.join(d, name)
                c = candidate(p, e)
                if c is not None:
                    return p, c, where
        return None, None, ""

    def torch_preload(name: str, e: _Elf) -> str | None:
        for site in site_dirs:
            for folder in CUDA_PRELOAD:
                p = posixpath.join(site, "nvidia", folder, "lib", name)
                c = candidate(p, e)
                if isinstance(c, _Elf):
                    return p
        return None

    def problem(p: LinkProblem) -> None:
        if len(res.problems) < MAX_PROBLEMS and p not in res.problems:
            res.problems.append(p)

    try:
        # the interpreter: its own libraries are loaded before torch's, and its RPATH applies to what it loads
        base_rpath: list[str] = []
        if interpreter:
            ie = open_elf(interpreter)
            if isinstance(ie, _Elf) and ie.klass:
                origin = posixpath.dirname(_machine_real(system, interpreter))
                if not ie.runpath:
                    base_rpath = [expand(p, origin, ie.klass, ie.machine) for p in ie.rpath]
                root = _Obj(interpreter, ie, [])
                for need in ie.needed:
                    if need in loaded:
                        continue
                    path, c, _w = resolve(root, need)
                    if path and isinstance(c, _Elf):
                        add(path, c, base_rpath if not c.runpath else [], "interpreter")
                queue.clear()  # the interpreter's libraries are there already; only torch's are walked
        start: list[_Obj] = []
        for r in roots:
            e = open_elf(r)
            if isinstance(e, str):
                problem(LinkProblem("unloadable", r, r, detail=e))
                continue
            if e.error and e.klass == 0:
                problem(LinkProblem("unloadable", r, r, detail=e.error))
                continue
            res.checked = True
            start.append(add(r, e, list(base_rpath), "root"))
        walked: set[str] = set()
        to_check: list[tuple[_Obj, dict[str, _Obj]]] = []
        i = 0
        while i < len(queue):
            if time.monotonic() > deadline:
                res.note = f"the time budget ran out after {len(walked)} libraries; the rest were not checked"
                return
            if len(by_path) >= MAX_LIBRARIES:
                res.note = f"more than {MAX_LIBRARIES} libraries; the rest were not checked"
                return
            obj = queue[i]
            i += 1
            if obj.path in walked:
                continue
            walked.add(obj.path)
            e = obj.elf
            pass_on = ([expand(p, posixpath.dirname(_machine_real(system, obj.path)), e.klass, e.machine) for p in e.rpath] if not e.runpath else []) + obj.inherited_rpath
            providers: dict[str, _Obj] = {}
            for need in e.needed:
                have = loaded.get(need)
                if have is not None:
                    providers[need] = have
                    continue
                path, c, where = resolve(obj, need)
                if path is None:
                    pre = torch_preload(need, e) if obj in start or any(obj.path.startswith(w.rstrip("/") + "/") for w in wheel_dirs) else None
                    if pre is not None:
                        ce = open_elf(pre)
                        if isinstance(ce, _Elf):
                            providers[need] = add(pre, ce, pass_on if not ce.runpath else [], "preload")
                            continue
                    problem(LinkProblem("missing", need, obj.path))
                    continue
                if not isinstance(c, _Elf):
                    problem(LinkProblem("unloadable", path, obj.path, detail=c or "not a loadable library"))
                    continue
                if c.error and not c.needed and not c.soname and c.error.startswith("file too short"):
                    problem(LinkProblem("unloadable", path, obj.path, detail=c.error))
                    continue
                providers[need] = add(path, c, pass_on if not c.runpath else [], where)
                if where == "ld_library_path" and wheel_dirs:  # only LD_LIBRARY_PATH comes before a RUNPATH
                    for w in wheel_dirs:
                        for sub in _wheel_lib_dirs(system, w):
                            copy = posixpath.join(sub, need)
                            if copy != path and system.is_file(copy):
                                problem(LinkProblem("shadowed", path, obj.path, detail=copy))
                                break
            to_check.append((obj, providers))
        everyone = list(by_path.values())
        for obj, providers in to_check:
            if time.monotonic() > deadline:
                res.note = "the time budget ran out while checking symbols; the rest were not checked"
                return
            _check_symbols(obj, providers, everyone, res, problem)
    finally:
        for fh in handles:
            try:
                fh.close()
            except OSError:
                pass


def _wheel_lib_dirs(system: System, site: str) -> list[str]:
    """The library folders of the wheels in one site directory: torch/lib and nvidia/*/lib."""
    out = [posixpath.join(site, "torch", "lib")]
    nv = posixpath.join(site, "nvidia")
    out += [posixpath.join(nv, d, "lib") for d in system.listdir(nv)[:128]]
    return out


def _defined_anywhere(name: str, version: str | None, first: _Obj, everyone: Sequence[_Obj]) -> bool:
    """``ld.so`` binds a symbol to the first object in scope that defines it (with the version asked, which
    the named file need not be the one to define: libpthread.so.0's GLIBC_2.2.5 symbols live in libc.so.6
    since glibc 2.34). The named provider is asked first, then every loaded object that could define it."""
    if first.elf.defines(name, version if first.elf.verdefs() else None):
        return True
    for o in everyone:
        if o is first:
            continue
        vd = o.elf.verdefs()
        if version is not None and vd and version not in vd.values():
            continue
        if o.elf.defines(name, version if vd else None):
            return True
    return False


def _check_symbols(obj: _Obj, providers: dict[str, _Obj], everyone: Sequence[_Obj], res: LinkCheck, report: Callable[[LinkProblem], None]) -> None:
    e = obj.elf
    undefined = e.undefined()
    if not undefined:
        return
    needs = e.verneeds()
    missing_versions: set[tuple[str, str]] = set()
    stems = {s: p for s, p in ((_stem(n), p) for n, p in providers.items()) if len(s) >= 4}
    for name, vidx in undefined:
        if e.r.expired:
            res.note = res.note or "the time budget ran out while checking symbols; the rest were not checked"
            return
        if vidx >= 2 and vidx in needs:
            fname, vname = needs[vidx]
            prov = providers.get(fname)
            if prov is None:
                continue  # the file it names was not found (a "missing" problem) or is not a direct need
            vdefs = prov.elf.verdefs()
            if vdefs and vname not in vdefs.values():
                if (fname, vname) not in missing_versions:
                    missing_versions.add((fname, vname))
                    report(LinkProblem("version", prov.path, obj.path, version=vname))
                continue
            if prov.where in ("system", "interpreter"):
                continue  # the system's own libraries (glibc, libstdc++): their versions are the check, as ld.so's first one
            res.symbols_checked += 1
            if not _defined_anywhere(name, vname, prov, everyone):
                report(LinkProblem("symbol", prov.path, obj.path, symbol=name, version=vname))
            continue
        low = name.lower()
        prov = next((p for s, p in stems.items() if low.startswith(s)), None)
        if prov is None:
            continue
        res.symbols_checked += 1
        if not _defined_anywhere(name, None, prov, everyone):
            report(LinkProblem("symbol", prov.path, obj.path, symbol=name))


def torch_roots(system: System, pkg: str) -> list[str]:
    """What ``import torch`` dlopens itself: ``torch/lib/libtorch_global_deps.so`` and ``torch/_C*.so``."""
    out = []
    lib = posixpath.join(pkg, "lib", "libtorch_global_deps.so")
    if system.exists(lib):
        out.append(lib)
    for name in system.listdir(pkg):
        if name.startswith("_C.") and name.endswith(".so"):
            out.append(posixpath.join(pkg, name))
            break
    return out
