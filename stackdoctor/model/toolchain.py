"""What a source build found on this machine (:func:`stackdoctor.install.buildtools.probe_build_tools`): each tool
where it is, its version and what said so. Plain data, never judged here."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Tool:
    """One tool as found: where, its version, and what said so (``gcc --version``, a header's path)."""

    name: str  # "gcc", "clang", "cl", "cmake", "ninja", "git", "nvcc", "cudnn", "nvtx", "rocm"
    path: str | None = None
    version: str | None = None
    witness: str | None = None  # what gave the version: the command, or the file read
    error: str | None = None  # it is there but did not answer (timeout, crash)


@dataclass
class BuildTools:
    """What :func:`probe_build_tools` found (plain data; never judged here)."""

    compilers: list[Tool] = field(default_factory=list)  # gcc / clang (Linux, macOS), cl (Windows), in that order
    cmake: Tool = field(default_factory=lambda: Tool("cmake"))
    ninja: Tool = field(default_factory=lambda: Tool("ninja"))
    git: Tool = field(default_factory=lambda: Tool("git"))
    nvcc: Tool = field(default_factory=lambda: Tool("nvcc"))
    cuda_home: str | None = None  # the toolkit root the nvcc belongs to
    cudnn: Tool = field(default_factory=lambda: Tool("cudnn"))
    nvtx: Tool = field(default_factory=lambda: Tool("nvtx"))
    rocm: Tool = field(default_factory=lambda: Tool("rocm"))
    free_disk_bytes: int | None = None
    disk_path: str | None = None  # where the free space was measured (the build directory, or its nearest parent)
    memory_available_bytes: int | None = None
    memory_witness: str | None = None
    cpus: int | None = None
