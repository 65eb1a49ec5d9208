"""The tools a source build of torch needs: compilers, CMake, Ninja, git, nvcc, cuDNN, NVTX, ROCm, disk and memory.

Asked only by ``stackdoctor install --from-source`` (``check`` never runs it). Every tool is run through
:class:`~stackdoctor.system.System` (argv, no shell, a timeout); every file is read through it (under the sysroot).
The parsers are pure ``parse_*(text)`` functions, tested on recorded real outputs (``tests/fixtures/buildtools/``,
each with its source in ``SOURCE.md`` there). It gathers and parses; what is enough is
:mod:`stackdoctor.resolve.source_build`'s to say.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable

from stackdoctor import kinds
from stackdoctor.model.toolchain import BuildTools, Tool
from stackdoctor.system import System

__all__ = [
    "BuildTools",
    "Tool",
    "parse_clang_version",
    "parse_cmake_version",
    "parse_gcc_version",
    "parse_git_version",
    "parse_meminfo",
    "parse_msvc_version",
    "parse_ninja_version",
    "probe_build_tools",
]

_VERSION = r"(\d+\.\d+(?:\.\d+)*)"


# ---------------------------------------------------------------------------- parsers (pure)


def parse_gcc_version(text: str) -> str | None:
    """``gcc --version`` -> ``"11.4.0"``: the first version after the first line's ``(...)`` (a date such as
    ``20250207`` after it is not one). ``gcc (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0`` -> ``"11.4.0"``."""
    if not isinstance(text, str) or not text.strip():
        return None
    first = text.strip().splitlines()[0]
    if "clang version" in first:  # macOS's gcc is clang
        return None
    tail = first.split(")", 1)[1] if ")" in first else first
    m = re.search(rf"(?<![\w.-]){_VERSION}(?![\w.-])", tail)
    return m.group(1) if m else None


def parse_clang_version(text: str) -> str | None:
    """``clang --version`` -> ``"10.0.1"`` (``Ubuntu clang version 10.0.1-++2020...``, ``Apple clang version 15.0.0``)."""
    m = re.search(rf"clang version {_VERSION}", text or "")
    return m.group(1) if m else None


def parse_msvc_version(text: str) -> str | None:
    """``cl`` (its banner, on stderr) -> ``"19.27.29111"`` (``Microsoft (R) C/C++ Optimizing Compiler Version 19.27.29111 for x64``)."""
    m = re.search(rf"C/C\+\+ Optimizing Compiler Version {_VERSION}", text or "")
    return m.group(1) if m else None


def parse_cmake_version(text: str) -> str | None:
    """``cmake --version`` -> ``"3.25.1"`` (``cmake version 3.25.1``)."""
    m = re.search(rf"cmake version {_VERSION}", text or "")
    return m.group(1) if m else None


def parse_ninja_version(text: str) -> str | None:
    """``ninja --version`` -> ``"1.11.1"`` (its whole output; ``1.11.1.git.kitware.jobserver-1`` -> ``"1.11.1"``)."""
    m = re.match(rf"\s*{_VERSION}", text or "")
    return m.group(1) if m else None


def parse_git_version(text: str) -> str | None:
    """``git --version`` -> ``"2.39.5"`` (``git version 2.39.5``, ``git version 2.45.1.windows.1``)."""
    m = re.search(rf"git version {_VERSION}", text or "")
    return m.group(1) if m else None


def parse_meminfo(text: str) -> int | None:
    """``/proc/meminfo`` -> the bytes ``MemAvailable`` says (``MemAvailable:   12345678 kB``)."""
    m = re.search(r"^MemAvailable:\s+(\d+)\s*kB", text or "", re.M)
    return int(m.group(1)) * 1024 if m else None


# ---------------------------------------------------------------------------- the probe


def _run_tool(system: System, name: str, argv_tail: list[str], parse: Callable[[str], str | None], timeout: float, *, stderr_too: bool = False) -> Tool:
    tool = Tool(name)
    path = system.which(name)
    if path is None:
        return tool
    tool.path = path
    res = system.run([path, *argv_tail], timeout=timeout)
    text = res.stdout + ("\n" + res.stderr if stderr_too else "")
    tool.version = parse(text)
    tool.witness = " ".join([name, *argv_tail]).strip()
    if res.status == "timeout":
        tool.error = f"{path} did not answer in {timeout:g} s"
    elif tool.version is None:
        tool.error = f"{name} {' '.join(argv_tail)}: {res.describe_failure() if not res.ok else 'no version in its output'}".strip()
    return tool


def _compilers(system: System, timeout: float) -> list[Tool]:
    out: list[Tool] = []
    if system.windows:
        cl = _run_tool(system, "cl", [], parse_msvc_version, timeout, stderr_too=True)
        if cl.path:
            cl.error = None if cl.version else cl.error
            out.append(cl)
        return out
    gcc = _run_tool(system, "gcc", ["--version"], parse_gcc_version, timeout)
    if gcc.path:
        if gcc.version is None and parse_clang_version(system.run([gcc.path, "--version"], timeout=timeout).stdout):
            where = next((f" ({a.clang_as_gcc})" for a in kinds.ALL if a.clang_as_gcc), "")  # macOS's Xcode tools
            gcc = Tool("gcc", gcc.path, None, "gcc --version", f"gcc is clang here{where}")
        out.append(gcc)
    clang = _run_tool(system, "clang", ["--version"], parse_clang_version, timeout)
    if clang.path:
        out.append(clang)
    return out


def _free_disk(path: str) -> tuple[int | None, str | None]:
    """Free bytes where ``path`` is, or would be (its nearest existing parent)."""
    p = os.path.abspath(path)
    while p and not os.path.exists(p):
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    try:
        return shutil.disk_usage(p).free, p
    except OSError:
        return None, None


def probe_build_tools(system: System, build_dir: str, *, python: str = "python", timeout_s: float = 10.0) -> BuildTools:
    """Everything a source build asks of this machine; never raises (a tool that fails is a fact with its ``error``)."""
    bt = BuildTools()
    bt.compilers = _compilers(system, timeout_s)
    bt.cmake = _run_tool(system, "cmake", ["--version"], parse_cmake_version, timeout_s)
    bt.ninja = _run_tool(system, "ninja", ["--version"], parse_ninja_version, timeout_s)
    bt.git = _run_tool(system, "git", ["--version"], parse_git_version, timeout_s)
    for acc in kinds.ALL:  # each kind's toolkit (NVIDIA's nvcc, cuDNN and NVTX; ROCm)
        acc.find_build_tools(system, bt, python=python, timeout_s=timeout_s)
    bt.free_disk_bytes, bt.disk_path = _free_disk(build_dir)
    if not system.windows:
        mi = system.read_text("/proc/meminfo")
        if mi.ok:
            bt.memory_available_bytes = parse_meminfo(mi.text)
            bt.memory_witness = "/proc/meminfo MemAvailable" if bt.memory_available_bytes else None
    bt.cpus = os.cpu_count()
    return bt
