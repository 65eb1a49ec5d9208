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
5. ``/etc/ld.so.cache`` (:mod:`stackdoctor.binaries.ldcache`), read under the sysroot; where there is none, the
   directories of ``/etc/ld.so.conf`` (its ``include`` globs followed) in its place;
6. the default directories (``/lib``, ``/usr/lib`` and their 64-bit and multiarch forms).

``$ORIGIN`` (``${ORIGIN}``) is the directory of the requesting object (links resolved), ``$LIB`` is
``lib64`` or ``lib``, ``$PLATFORM`` the machine (``x86_64``). A candidate of another ELF class or
machine is skipped, as ``ld.so`` skips it. A CUDA library found nowhere is looked for where torch's
own ``_load_global_deps`` preloads it from (``nvidia/<name>/lib`` in the site directories) before it
is called missing.

The driver library: the CUDA runtime ``dlopen``-s ``libcuda.so.1`` when torch first touches CUDA, so the walk looks
it up from ``libcudart`` (or ``libtorch_cuda.so`` where the runtime is linked in) in the same order and keeps which
file it would take (``LinkCheck.driver``); a stub (the toolkit's ``…/stubs/libcuda.so``, which answers every call
with ``cudaErrorStubLibrary``) found first is a "stub" problem.

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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from stackdoctor.binaries import ldcache, observed
from stackdoctor.binaries.elfdyn import DynElf as _Elf
from stackdoctor.core import parsecache
from stackdoctor.model.facts import LinkProblem
from stackdoctor.system import ReadResult, System

MAX_LIBRARIES = 512  # objects loaded in one walk
MAX_PROBLEMS = 64
MAX_CONF_FILES = 256
DEFAULT_BUDGET_S = 5.0


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
    driver: str | None = None  # the libcuda.so.1 the CUDA runtime would dlopen (None: no CUDA library, or none found)
    driver_where: str | None = None  # how it was found: "ld_library_path", "ldcache", "system", "rpath", "runpath"


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
    where: str = ""  # how it was found: "root", "rpath", "ld_library_path", "runpath", "system", "ldcache", "preload", "interpreter"


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
    keep: bool = True,
) -> LinkCheck:
    """Predict loading ``roots`` (machine paths, in order). ``env`` gives ``LD_LIBRARY_PATH``;
    ``interpreter``'s own needs are loaded first and its RPATH is inherited, as for an extension
    module; ``site_dirs`` are where torch preloads CUDA libraries from; a library found outside
    ``wheel_dirs`` while a copy of it is inside is "shadowed". Never raises.

    ``keep``: the answer of a complete walk is kept in stackdoctor's cache with every question the walk asked of
    the files (:mod:`stackdoctor.binaries.observed`), and the next walk from the same start is that answer while every
    question still gets the same answer (a walk is 23-100 ms of each ``check``; asking again, about one)."""
    t0 = time.monotonic()
    ld_path = (env or {}).get("LD_LIBRARY_PATH") or ""
    k = _memo_key(system, roots, ld_path, interpreter, site_dirs, wheel_dirs) if keep and parsecache.enabled() else None
    if k is not None:
        kept = parsecache.read("linkage", k)
        if isinstance(kept, tuple) and len(kept) == 2 and isinstance(kept[1], LinkCheck) and observed.unchanged(system, kept[0]):
            kept[1].elapsed_ms = round((time.monotonic() - t0) * 1000, 2)
            return kept[1]
    deadline = t0 + budget_s
    res = LinkCheck()
    seeing = observed.Observing(system) if k is not None else None
    try:
        _walk(cast(System, seeing) if seeing is not None else system, roots, env or {}, interpreter, site_dirs, wheel_dirs, deadline, res)
    except Exception as exc:  # a reader bug must not take the probe down: say what was not checked
        res.note = f"the linkage check stopped: {type(exc).__name__}: {exc}"
    res.elapsed_ms = round((time.monotonic() - t0) * 1000, 2)
    if k is not None and seeing is not None and res.note is None and seeing.settled():  # complete, and from files at rest
        parsecache.write("linkage", k, (seeing.seen, res))
    return res


def _memo_key(system: System, roots: Sequence[str], ld_path: str, interpreter: str | None, site_dirs: Sequence[str],
              wheel_dirs: Sequence[str]) -> str | None:
    """The walk's start (its arguments, the sysroot) and the code that walks; None when the code cannot be read."""
    here = Path(__file__).resolve().parent
    try:
        code = parsecache.source_of(here / "linkage.py", here / "ldcache.py", here / "elfdyn.py", here / "binfmt.py", here / "observed.py")
    except OSError:
        return None
    start = "\0".join([*roots, "", ld_path, interpreter or "", *site_dirs, "", *wheel_dirs, "", str(system.path("/"))])
    return parsecache.key([start, *code])


def _walk(system: System, roots: Sequence[str], env: Mapping[str, str], interpreter: str | None, site_dirs: Sequence[str],
          wheel_dirs: Sequence[str], deadline: float, res: LinkCheck) -> None:
    w = _Walk(system, env, site_dirs, wheel_dirs, deadline, res)
    try:
        base_rpath = w.load_interpreter(interpreter) if interpreter else []
        w.load_roots(roots, base_rpath)
        to_check = w.walk()
        if to_check is None:
            return
        w.driver()
        everyone = list(w.by_path.values())
        for obj, providers in to_check:
            if time.monotonic() > deadline:
                res.note = "the time budget ran out while checking symbols; the rest were not checked"
                return
            _check_symbols(obj, providers, everyone, res, w.problem)
    finally:
        w.close()


class _Walk:
    """One breadth-first load of torch's libraries, as ld.so would do it (:func:`check_linkage`)."""

    def __init__(self, system: System, env: Mapping[str, str], site_dirs: Sequence[str], wheel_dirs: Sequence[str], deadline: float,
                 res: LinkCheck) -> None:
        self.system, self.site_dirs, self.wheel_dirs, self.deadline, self.res = system, site_dirs, wheel_dirs, deadline, res
        self.handles: list[BinaryIO] = []
        self.loaded: dict[str, _Obj] = {}  # names (SONAME and file name) -> object
        self.by_path: dict[str, _Obj] = {}
        self.queue: list[_Obj] = []
        self.start: list[_Obj] = []
        self.ld_path = [p for p in (env.get("LD_LIBRARY_PATH") or "").replace(";", ":").split(":") if p]
        self.conf: list[str] | None = None
        self.cache: dict[str, list[str]] | None = None
        self.machine_dirs: list[str] = []

    def close(self) -> None:
        for fh in self.handles:
            try:
                fh.close()
            except OSError:
                pass

    def open_elf(self, path: str) -> _Elf | str:
        fh = self.system.open_binary(path)
        if isinstance(fh, ReadResult):
            return fh.detail or fh.status
        self.handles.append(fh)
        return _Elf(fh, self.deadline)

    def add(self, path: str, elf: _Elf, inherited: list[str], where: str = "") -> _Obj:
        obj = _Obj(path, elf, inherited, where)
        self.by_path[path] = obj
        for name in {posixpath.basename(path), elf.soname or ""} - {""}:
            self.loaded.setdefault(name, obj)
        self.res.loaded[elf.soname or posixpath.basename(path)] = path
        self.queue.append(obj)
        return obj

    def problem(self, p: LinkProblem) -> None:
        if len(self.res.problems) < MAX_PROBLEMS and p not in self.res.problems:
            self.res.problems.append(p)

    def candidate(self, path: str, want: _Elf) -> _Elf | str | None:
        """The ELF at ``path`` if it is loadable for ``want`` (class, machine), a reason if not loadable, None if absent/mismatched."""
        if not self.system.is_file(path):
            return None
        elf = self.open_elf(path)
        if isinstance(elf, str):
            return elf
        if elf.error and elf.klass == 0:
            return elf.error
        if elf.klass != want.klass or elf.machine != want.machine:
            return None  # ld.so skips a library of another class or machine
        return elf

    def search_order(self, obj: _Obj) -> list[tuple[str, list[str]]]:
        """(where, directories) in ld.so's order for the needs of ``obj``."""
        origin = posixpath.dirname(_machine_real(self.system, obj.path))
        e = obj.elf
        order: list[tuple[str, list[str]]] = []
        if not e.runpath:
            order.append(("rpath", [expand(p, origin, e.klass, e.machine) for p in e.rpath] + obj.inherited_rpath))
        order.append(("ld_library_path", self.ld_path))
        if e.runpath:
            order.append(("runpath", [expand(p, origin, e.klass, e.machine) for p in e.runpath]))
        if self.conf is None:
            self.cache = ldcache.read_ld_cache(self.system)
            self.conf = ld_so_conf_dirs(self.system) if self.cache is None else []  # the cache stands for ld.so.conf's folders
            md = _MULTIARCH.get(e.machine)
            self.machine_dirs = [f"/lib/{md}", f"/usr/lib/{md}"] if md else []
        order.append(("system", self.conf + default_dirs(e.klass, self.machine_dirs)))
        return order

    def resolve(self, obj: _Obj, name: str) -> tuple[str | None, _Elf | str | None, str]:
        """(path, elf or why unloadable, where found: rpath / ld_library_path / runpath / system / preload)."""
        order = self.search_order(obj)
        if "/" in name:
            c = self.candidate(name, obj.elf)
            return (name, c, "path") if c is not None else (None, None, "")
        for where, dirs in order:
            for p in (self.cache or {}).get(name, [])[:16] if where == "system" else []:
                c = self.candidate(p, obj.elf)
                if c is not None:
                    return p, c, "ldcache"
            for d in dict.fromkeys(dirs):
                if not d.startswith("/"):
                    continue
                p = posixpath.join(d, name)
                c = self.candidate(p, obj.elf)
                if c is not None:
                    return p, c, where
        return None, None, ""

    def torch_preload(self, name: str, e: _Elf) -> str | None:
        for site in self.site_dirs:
            for folder in CUDA_PRELOAD:
                p = posixpath.join(site, "nvidia", folder, "lib", name)
                if isinstance(self.candidate(p, e), _Elf):
                    return p
        return None

    def load_interpreter(self, interpreter: str) -> list[str]:
        """The interpreter's own libraries, loaded before torch's; returns its RPATH, which applies to what it loads."""
        base_rpath: list[str] = []
        ie = self.open_elf(interpreter)
        if isinstance(ie, _Elf) and ie.klass:
            origin = posixpath.dirname(_machine_real(self.system, interpreter))
            if not ie.runpath:
                base_rpath = [expand(p, origin, ie.klass, ie.machine) for p in ie.rpath]
            root = _Obj(interpreter, ie, [])
            for need in ie.needed:
                if need in self.loaded:
                    continue
                path, c, _w = self.resolve(root, need)
                if path and isinstance(c, _Elf):
                    self.add(path, c, base_rpath if not c.runpath else [], "interpreter")
            self.queue.clear()  # the interpreter's libraries are there already; only torch's are walked
        return base_rpath

    def load_roots(self, roots: Sequence[str], base_rpath: list[str]) -> None:
        for r in roots:
            e = self.open_elf(r)
            if isinstance(e, str) or (e.error and e.klass == 0):
                self.problem(LinkProblem("unloadable", r, r, detail=e if isinstance(e, str) else e.error))
                continue
            self.res.checked = True
            self.start.append(self.add(r, e, list(base_rpath), "root"))

    def walk(self) -> list[tuple[_Obj, dict[str, _Obj]]] | None:
        """Every object in load order with the providers of its needs; None when a budget or cap stopped it (said in ``note``)."""
        walked: set[str] = set()
        to_check: list[tuple[_Obj, dict[str, _Obj]]] = []
        i = 0
        while i < len(self.queue):
            if time.monotonic() > self.deadline:
                self.res.note = f"the time budget ran out after {len(walked)} libraries; the rest were not checked"
                return None
            if len(self.by_path) >= MAX_LIBRARIES:
                self.res.note = f"more than {MAX_LIBRARIES} libraries; the rest were not checked"
                return None
            obj = self.queue[i]
            i += 1
            if obj.path in walked:
                continue
            walked.add(obj.path)
            to_check.append((obj, self.needs_of(obj)))
        return to_check

    def needs_of(self, obj: _Obj) -> dict[str, _Obj]:
        """need -> the object that provides it, each found (or preloaded) and added as ld.so would; problems said."""
        e = obj.elf
        pass_on = ([expand(p, posixpath.dirname(_machine_real(self.system, obj.path)), e.klass, e.machine) for p in e.rpath] if not e.runpath else []) + obj.inherited_rpath
        providers: dict[str, _Obj] = {}
        for need in e.needed:
            have = self.loaded.get(need)
            if have is not None:
                providers[need] = have
                continue
            found = self.find(obj, need, pass_on)
            if found is not None:
                providers[need] = found
        return providers

    def find(self, obj: _Obj, need: str, pass_on: list[str]) -> _Obj | None:
        """The library ``need`` of ``obj``, added; None (and the problem said) when it cannot be loaded."""
        path, c, where = self.resolve(obj, need)
        if path is None:
            from_wheel = obj in self.start or any(obj.path.startswith(w.rstrip("/") + "/") for w in self.wheel_dirs)
            pre = self.torch_preload(need, obj.elf) if from_wheel else None
            ce = self.open_elf(pre) if pre is not None else None
            if pre is not None and isinstance(ce, _Elf):
                return self.add(pre, ce, pass_on if not ce.runpath else [], "preload")
            self.problem(LinkProblem("missing", need, obj.path))
            return None
        if not isinstance(c, _Elf):
            self.problem(LinkProblem("unloadable", path, obj.path, detail=c or "not a loadable library"))
            return None
        if c.error and not c.needed and not c.soname and c.error.startswith("file too short"):
            self.problem(LinkProblem("unloadable", path, obj.path, detail=c.error))
            return None
        added = self.add(path, c, pass_on if not c.runpath else [], where)
        if where == "ld_library_path" and self.wheel_dirs:  # only LD_LIBRARY_PATH comes before a RUNPATH
            self.shadowed(path, need, obj)
        return added

    def shadowed(self, path: str, need: str, obj: _Obj) -> None:
        for w in self.wheel_dirs:
            for sub in _wheel_lib_dirs(self.system, w):
                copy = posixpath.join(sub, need)
                if copy != path and self.system.is_file(copy):
                    self.problem(LinkProblem("shadowed", path, obj.path, detail=copy, found_version=ldcache.copy_version(self.system, path),
                                             wheel_version=ldcache.copy_version(self.system, copy)))
                    break

    def driver(self) -> None:
        """The ``libcuda.so.1`` the CUDA runtime would ``dlopen``, looked up from the object that opens it; a stub is a problem."""
        opener = next((o for o in self.by_path.values() if (o.elf.soname or "").startswith("libcudart.so")), None)
        opener = opener or next((o for o in self.by_path.values() if posixpath.basename(o.path) in ("libtorch_cuda.so", "libc10_cuda.so")), None)
        if opener is None:
            return
        path, c, where = self.resolve(opener, "libcuda.so.1")
        if path is None or not isinstance(c, _Elf):
            return
        self.res.driver, self.res.driver_where = path, where
        real = _machine_real(self.system, path)
        if "stubs" in path.split("/") or "stubs" in real.split("/"):
            self.problem(LinkProblem("stub", path, opener.path, detail=where, found_version=ldcache.copy_version(self.system, path)))


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
    undefined = e.undefined_refs()
    if not undefined:
        return
    needs = e.verneeds()
    missing_versions: set[tuple[str, str]] = set()
    stems = {s: p for s, p in ((_stem(n), p) for n, p in providers.items()) if len(s) >= 4}
    # a byte-level prefilter for the stems (ASCII case folding is str.lower's on latin-1 names, for ASCII stems)
    ascii_stems = all(s.isascii() for s in stems)
    rx = re.compile(b"|".join(re.escape(s.encode()) for s in stems), re.IGNORECASE) if stems and ascii_stems else None
    names = e.dynstr() if rx is not None else None
    for off, vidx in undefined:
        if e.r.expired:
            res.note = res.note or "the time budget ran out while checking symbols; the rest were not checked"
            return
        if vidx >= 2 and vidx in needs:
            _versioned(e, off, needs[vidx], obj, providers, everyone, res, report, missing_versions)
            continue
        if not stems or (rx is not None and names is not None and rx.match(names, off) is None):
            continue  # an unversioned symbol is checked only against a needed library whose name it carries
        name = e.name(off)
        low = name.lower()
        prov = next((p for s, p in stems.items() if low.startswith(s)), None)
        if prov is None:
            continue
        res.symbols_checked += 1
        if not _defined_anywhere(name, None, prov, everyone):
            report(LinkProblem("symbol", prov.path, obj.path, symbol=name))


def _versioned(e: _Elf, off: int, need: tuple[str, str], obj: _Obj, providers: dict[str, _Obj], everyone: Sequence[_Obj], res: LinkCheck,
               report: Callable[[LinkProblem], None], missing_versions: set[tuple[str, str]]) -> None:
    """One undefined symbol that names a version of ``need`` = (file, version): the version must be defined
    there, and (outside the system's own libraries) the symbol too."""
    fname, vname = need
    prov = providers.get(fname)
    if prov is None:
        return  # the file it names was not found (a "missing" problem) or is not a direct need
    vdefs = prov.elf.verdefs()
    if vdefs and vname not in vdefs.values():
        if (fname, vname) not in missing_versions:
            missing_versions.add((fname, vname))
            report(LinkProblem("version", prov.path, obj.path, version=vname))
        return
    if prov.where in ("system", "ldcache", "interpreter"):
        return  # the system's own libraries (glibc, libstdc++): their versions are the check, as ld.so's first one
    res.symbols_checked += 1
    name = e.name(off)
    if not _defined_anywhere(name, vname, prov, everyone):
        report(LinkProblem("symbol", prov.path, obj.path, symbol=name, version=vname))


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
