"""The wheel tags THIS interpreter accepts, best first: ``packaging.tags.sys_tags()`` without packaging.

Imported by ``sd_target.py`` in the target interpreter (stdlib only, Python 3.8+ syntax). packaging's
import costs more than the rest of the target worker (issue 33), and a target often lacks it. This is a
port of pypa/packaging 26.4 ``src/packaging/tags.py``, ``_manylinux.py``, ``_musllinux.py`` and
``_elffile.py`` (the parts ``sys_tags()`` runs, same order, same answers): tests/test_target_tags.py
compares it with packaging's own ``sys_tags()`` on the interpreters at hand, and each platform's
function with packaging's for given versions and architectures.
"""

import functools
import os
import re
import struct
import sys
import sysconfig
import warnings
from importlib.machinery import EXTENSION_SUFFIXES

INTERPRETER_SHORT_NAMES = {"python": "py", "cpython": "cp", "pypy": "pp", "ironpython": "ip", "jython": "jy"}
_32_BIT_INTERPRETER = struct.calcsize("P") == 4
_CPYTHON_ABI_RE = re.compile(r"cp\d+(.*)")


def _version_nodot(version):
    return "".join(map(str, version))


def _normalize_string(string):
    return string.replace(".", "_").replace("-", "_").replace(" ", "_")


def _tag(interpreter, abi, platform):
    return "%s-%s-%s" % (interpreter.lower(), abi.lower(), platform.lower())


# ---------------------------------------------------------------- interpreter and ABI


def interpreter_name():
    name = sys.implementation.name
    return INTERPRETER_SHORT_NAMES.get(name) or name


def interpreter_version():
    version = sysconfig.get_config_var("py_version_nodot")
    return str(version) if version else _version_nodot(sys.version_info[:2])


def _cpython_abis(py_version):
    py_version = tuple(py_version)
    version = _version_nodot(py_version[:2])
    threading = debug = pymalloc = ucs4 = ""
    with_debug = sysconfig.get_config_var("Py_DEBUG")
    has_refcount = hasattr(sys, "gettotalrefcount")
    has_ext = "_d.pyd" in EXTENSION_SUFFIXES  # Windows does not set Py_DEBUG
    if with_debug or (with_debug is None and (has_refcount or has_ext)):
        debug = "d"
    if py_version >= (3, 13) and sysconfig.get_config_var("Py_GIL_DISABLED"):
        threading = "t"
    if py_version < (3, 8):
        with_pymalloc = sysconfig.get_config_var("WITH_PYMALLOC")
        if with_pymalloc or with_pymalloc is None:
            pymalloc = "m"
        if py_version < (3, 3):
            unicode_size = sysconfig.get_config_var("Py_UNICODE_SIZE")
            if unicode_size == 4 or (unicode_size is None and sys.maxunicode == 0x10FFFF):
                ucs4 = "u"
    out = ["cp%s%s%s%s%s" % (version, threading, debug, pymalloc, ucs4)]
    if py_version >= (3, 8) and debug:  # debug builds also load "normal" extension modules
        out.append("cp%s%s" % (version, threading))
    return out


def _is_threaded_cpython(abis):
    for abi in abis:
        if abi == "abi3t":
            return True
        match = _CPYTHON_ABI_RE.match(abi)
        if match:
            return "t" in match.group(1)
    return False


def _generic_abi():
    """The ABI tag from EXT_SUFFIX ('.cpython-310-x86_64-linux-gnu.so' -> cp310, '.pypy38-pp73-...' -> pypy38_pp73)."""
    ext_suffix = sysconfig.get_config_var("EXT_SUFFIX")
    if not isinstance(ext_suffix, str) or not ext_suffix.startswith("."):
        raise SystemError("invalid sysconfig.get_config_var('EXT_SUFFIX')")
    parts = ext_suffix.split(".")
    if len(parts) < 3:  # CPython 3.7 and earlier: ".pyd" on Windows
        return _cpython_abis(sys.version_info[:2])
    soabi = parts[1]
    if soabi.startswith("cpython"):
        cpython_parts = soabi.split("-")
        if len(cpython_parts) < 2 or not cpython_parts[1]:
            raise SystemError("invalid sysconfig.get_config_var('EXT_SUFFIX')")
        abi = "cp" + cpython_parts[1]
    elif soabi.startswith("cp"):
        abi = soabi.split("-")[0]
    elif soabi.startswith("pypy"):
        abi = "-".join(soabi.split("-")[:2])
    elif soabi.startswith("graalpy"):
        abi = "-".join(soabi.split("-")[:3])
    elif soabi:
        abi = soabi
    else:
        return []
    return [_normalize_string(abi)]


def cpython_tags(python_version, platforms):
    interpreter = "cp%s" % _version_nodot(python_version[:2])
    abis = _cpython_abis(python_version) if len(python_version) > 1 else []
    threading = _is_threaded_cpython(abis)
    for explicit in ("abi3", "abi3t", "none") if threading else ("abi3", "none"):
        if explicit in abis:
            abis.remove(explicit)
    out = [_tag(interpreter, abi, p) for abi in abis for p in platforms]
    stable = len(python_version) > 1 and tuple(python_version) >= (3, 2)
    use_abi3, use_abi3t = stable and not threading, stable and threading
    if use_abi3:
        out += [_tag(interpreter, "abi3", p) for p in platforms]
    if use_abi3t:
        out += [_tag(interpreter, "abi3t", p) for p in platforms]
    out += [_tag(interpreter, "none", p) for p in platforms]
    if use_abi3 or use_abi3t:
        for minor in range(python_version[1] - 1, 1, -1):
            older = "cp%s" % _version_nodot((python_version[0], minor))
            for p in platforms:
                out += [_tag(older, abi, p) for abi, used in (("abi3", use_abi3), ("abi3t", use_abi3t)) if used]
    return out


def generic_tags(platforms):
    interpreter = "%s%s" % (interpreter_name(), interpreter_version())
    abis = list(_generic_abi())
    if "none" not in abis:
        abis.append("none")
    return [_tag(interpreter, abi, p) for abi in abis for p in platforms]


def _py_interpreter_range(py_version):
    out = []
    if len(py_version) > 1:
        out.append("py%s" % _version_nodot(py_version[:2]))
    out.append("py%s" % py_version[0])
    if len(py_version) > 1:
        out += ["py%s" % _version_nodot((py_version[0], minor)) for minor in range(py_version[1] - 1, -1, -1)]
    return out


def compatible_tags(python_version, interpreter, platforms):
    versions = _py_interpreter_range(python_version)
    out = [_tag(v, "none", p) for v in versions for p in platforms]
    if interpreter:
        out.append(_tag(interpreter, "none", "any"))
    return out + [_tag(v, "none", "any") for v in versions]


# ---------------------------------------------------------------- Linux: manylinux (PEP 600), musllinux (PEP 656)


class ELFFile:
    """The ELF header and PT_INTERP of an executable (packaging's ``_elffile.ELFFile``); ValueError if not ELF."""

    _FORMATS = {
        (1, 1): ("<HHIIIIIHHH", "<IIIIIIII", (0, 1, 4)),
        (1, 2): (">HHIIIIIHHH", ">IIIIIIII", (0, 1, 4)),
        (2, 1): ("<HHIQQQIHHH", "<IIQQQQQQ", (0, 2, 5)),
        (2, 2): (">HHIQQQIHHH", ">IIQQQQQQ", (0, 2, 5)),
    }

    def __init__(self, f):
        self._f = f
        try:
            ident = self._read("16B")
        except struct.error as e:
            raise ValueError("unable to parse identification") from e
        if bytes(ident[:4]) != b"\x7fELF":
            raise ValueError("invalid magic")
        self.capacity, self.encoding = ident[4], ident[5]
        try:
            e_fmt, self._p_fmt, self._p_idx = self._FORMATS[(self.capacity, self.encoding)]
        except KeyError as e:
            raise ValueError("unrecognized capacity or encoding") from e
        try:
            fields = self._read(e_fmt)
        except struct.error as e:
            raise ValueError("unable to parse machine and section information") from e
        self.machine, self._e_phoff, self.flags, self._e_phentsize, self._e_phnum = fields[1], fields[4], fields[6], fields[8], fields[9]

    def _read(self, fmt):
        return struct.unpack(fmt, self._f.read(struct.calcsize(fmt)))

    @property
    def interpreter(self):
        for index in range(self._e_phnum):
            self._f.seek(self._e_phoff + self._e_phentsize * index)
            try:
                data = self._read(self._p_fmt)
            except struct.error:
                continue
            if data[self._p_idx[0]] != 3:  # not PT_INTERP
                continue
            self._f.seek(data[self._p_idx[1]])
            return os.fsdecode(self._f.read(data[self._p_idx[2]])).strip("\0")
        return None


def _elf(path):
    try:
        with open(path, "rb") as f:
            return ELFFile(f)
    except (OSError, TypeError, ValueError):
        return None


def _have_compatible_abi(executable, archs):
    if "armv7l" in archs:  # 32-bit LSB ARM, EABI 5, hard float
        f = _elf(executable)
        return f is not None and f.capacity == 1 and f.encoding == 1 and f.machine == 40 and f.flags & 0xFF000000 == 0x05000000 and f.flags & 0x400 == 0x400
    if "i686" in archs:
        f = _elf(executable)
        return f is not None and f.capacity == 1 and f.encoding == 1 and f.machine == 3
    return any(arch in ("x86_64", "aarch64", "ppc64", "ppc64le", "s390x", "loongarch64", "riscv64") for arch in archs)


def _glibc_version_string():
    try:
        version_string = os.confstr("CS_GNU_LIBC_VERSION")
        assert version_string is not None
        _, version = version_string.rsplit()
        if version:
            return version
    except (AssertionError, AttributeError, OSError, ValueError):
        pass
    try:
        import ctypes

        gnu_get_libc_version = ctypes.CDLL(None).gnu_get_libc_version
    except (ImportError, OSError, AttributeError):
        return None
    gnu_get_libc_version.restype = ctypes.c_char_p
    version_str = gnu_get_libc_version()
    return version_str.decode("ascii") if isinstance(version_str, bytes) else version_str


@functools.lru_cache(maxsize=None)
def glibc_version():
    version_str = _glibc_version_string()
    if version_str is None:
        return (-1, -1)
    m = re.match(r"(?P<major>[0-9]+)\.(?P<minor>[0-9]+)", version_str)
    if not m:
        warnings.warn("Expected glibc version with 2 components major.minor, got: %s" % version_str, RuntimeWarning, stacklevel=2)
        return (-1, -1)
    return (int(m.group("major")), int(m.group("minor")))


@functools.lru_cache(maxsize=1)
def _manylinux_module():
    try:
        return __import__("_manylinux")
    except ImportError:
        return None


_LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}


def _is_compatible(arch, version, sys_glibc):
    if sys_glibc < version:
        return False
    mod = _manylinux_module()
    if mod is None:
        return True
    if hasattr(mod, "manylinux_compatible"):
        result = mod.manylinux_compatible(version[0], version[1], arch)
        return True if result is None else bool(result)
    legacy = {(2, 5): "manylinux1_compatible", (2, 12): "manylinux2010_compatible", (2, 17): "manylinux2014_compatible"}.get(version)
    if legacy and hasattr(mod, legacy):
        return bool(getattr(mod, legacy))
    return True


def manylinux_platforms(archs, current_glibc, executable=None):
    """manylinux tags for ``archs`` on a glibc ``current_glibc`` ((major, minor); (-1, -1): none)."""
    if not _have_compatible_abi(executable or sys.executable, archs):
        return []
    too_old = (2, 4) if set(archs) & {"x86_64", "i686"} else (2, 16)
    glibc_max_list = [tuple(current_glibc)] + [(major, 50) for major in range(current_glibc[0] - 1, 1, -1)]
    out = []
    for arch in archs:
        for glibc_max in glibc_max_list:
            min_minor = too_old[1] if glibc_max[0] == too_old[0] else -1
            for minor in range(glibc_max[1], min_minor, -1):
                version = (glibc_max[0], minor)
                if _is_compatible(arch, version, tuple(current_glibc)):
                    out.append("manylinux_%d_%d_%s" % (version[0], version[1], arch))
                    if version in _LEGACY_MANYLINUX:
                        out.append("%s_%s" % (_LEGACY_MANYLINUX[version], arch))
    return out


def parse_musl_version(output):
    lines = [n for n in (n.strip() for n in output.splitlines()) if n]
    if len(lines) < 2 or lines[0][:4] != "musl":
        return None
    m = re.match(r"Version (\d+)\.(\d+)", lines[1])
    return (int(m.group(1)), int(m.group(2))) if m else None


def musl_version(executable):
    """The musl the executable's loader is ((major, minor)), asked as packaging asks: run the loader alone."""
    try:
        with open(executable, "rb") as fh:
            ld = ELFFile(fh).interpreter
    except (OSError, TypeError, ValueError):
        return None
    if ld is None or "musl" not in ld:
        return None
    import subprocess

    proc = subprocess.run([ld], check=False, stderr=subprocess.PIPE, text=True)
    return parse_musl_version(proc.stderr)


def musllinux_platforms(archs, musl):
    if musl is None:
        return []
    return ["musllinux_%d_%d_%s" % (musl[0], minor, arch) for arch in archs for minor in range(musl[1], -1, -1)]


def linux_platforms(linux, is_32bit, glibc, musl, executable=None):
    """``linux`` is sysconfig.get_platform() normalised ('linux_x86_64')."""
    if not linux.startswith("linux_"):
        return [linux]
    if is_32bit:
        linux = {"linux_x86_64": "linux_i686", "linux_aarch64": "linux_armv8l"}.get(linux, linux)
    _, arch = linux.split("_", 1)
    archs = {"armv8l": ["armv8l", "armv7l"]}.get(arch, [arch])
    return ["linux_%s" % a for a in archs] + manylinux_platforms(archs, glibc, executable) + musllinux_platforms(archs, musl)


# ---------------------------------------------------------------- macOS, iOS, Android, others


_UNIVERSAL = frozenset({"x86_64", "i386", "ppc64", "ppc", "intel"})  # macOS binary formats ("intel": i386 + x86_64)


def _mac_binary_formats(version, cpu_arch):
    formats = [cpu_arch]
    if cpu_arch == "x86_64":
        if version < (10, 4):
            return []
        formats.extend(["intel", "fat64", "fat3"])
    elif cpu_arch == "i386":
        if version < (10, 4):
            return []
        formats.extend(["intel", "fat3", "fat"])
    elif cpu_arch == "ppc64":
        if version > (10, 5) or version < (10, 4):
            return []
        formats.append("fat64")
    elif cpu_arch == "ppc":
        if version > (10, 6):
            return []
        formats.extend(["fat3", "fat"])
    if cpu_arch in {"arm64", "x86_64"}:
        formats.append("universal2")
    if cpu_arch in _UNIVERSAL:
        formats.append("universal")
    return formats


def _mac_version_and_arch():
    import platform
    import subprocess

    version_str, _, cpu_arch = platform.mac_ver()
    version = tuple(map(int, version_str.split(".")[:2]))
    if version == (10, 16):  # built against an older SDK: the real version from a compatibility-free child
        version_str = subprocess.run([sys.executable, "-sS", "-c", "import platform; print(platform.mac_ver()[0])"], check=True,
                                     env={"SYSTEM_VERSION_COMPAT": "0"}, stdout=subprocess.PIPE, text=True).stdout
        version = tuple(map(int, version_str.split(".")[:2]))
    if _32_BIT_INTERPRETER:
        cpu_arch = "ppc" if cpu_arch.startswith("ppc") else "i386"
    return version, cpu_arch


def mac_platforms(version, arch):
    out = []
    if (10, 0) <= version < (11, 0):
        for minor in range(version[1], -1, -1):
            out += ["macosx_10_%d_%s" % (minor, f) for f in _mac_binary_formats((10, minor), arch)]
    if version >= (11, 0):
        for major in range(version[0], 10, -1):
            out += ["macosx_%d_0_%s" % (major, f) for f in _mac_binary_formats((major, 0), arch)]
        for minor in range(16, 3, -1):  # 11+ on x86_64 runs older binaries; arm64 only universal2 ones
            formats = _mac_binary_formats((10, minor), arch) if arch == "x86_64" else ["universal2"]
            out += ["macosx_10_%d_%s" % (minor, f) for f in formats]
    return out


def ios_platforms(version, multiarch):
    multiarch = multiarch.replace("-", "_")
    if version[0] < 12:
        return []
    out = ["ios_%d_%d_%s" % (version[0], version[1], multiarch)]
    out += ["ios_%d_%d_%s" % (version[0], minor, multiarch) for minor in range(version[1] - 1, -1, -1)]
    for major in range(version[0] - 1, 11, -1):
        out += ["ios_%d_%d_%s" % (major, minor, multiarch) for minor in range(9, -1, -1)]
    return out


def android_platforms(api_level, abi):
    abi = _normalize_string(abi)
    return ["android_%d_%s" % (ver, abi) for ver in range(api_level, 15, -1)]


def _system():
    """platform.system(), without importing platform on Linux (where it is os.uname()'s sysname)."""
    if sys.platform == "linux" and os.uname().sysname == "Linux":
        return "Linux"
    import platform

    return platform.system()


def platform_tags():
    system = _system()
    if system == "Darwin":
        return mac_platforms(*_mac_version_and_arch())
    if system == "iOS":
        import platform

        release = platform.ios_ver()[1]
        return ios_platforms(tuple(map(int, release.split(".")[:2])), sys.implementation._multiarch)
    if system == "Android":
        import platform

        return android_platforms(platform.android_ver().api_level, sysconfig.get_platform().split("-")[-1])
    generic = _normalize_string(sysconfig.get_platform())
    if system == "Linux":
        return linux_platforms(generic, _32_BIT_INTERPRETER, glibc_version(), musl_version(sys.executable))
    if system == "Emscripten":
        version = sysconfig.get_config_var("PYEMSCRIPTEN_PLATFORM_VERSION")
        return (["pyemscripten_%s_wasm32" % version] if version else []) + [generic]
    return [generic]


def sys_tags():
    """Every tag this interpreter accepts, best first, as strings ('cp311-cp311-manylinux_2_36_x86_64')."""
    platforms = platform_tags()
    name = interpreter_name()
    if name == "cp":
        out = cpython_tags(sys.version_info[:2], platforms)
    else:
        out = generic_tags(platforms)
    interp = "pp3" if name == "pp" else ("cp" + interpreter_version()) if name == "cp" else None
    return out + compatible_tags(sys.version_info[:2], interp, platforms)
