"""Builders of small binary files for the static torch tests, and the cached real wheels.

The builders write the documented layouts (see ``stackdoctor/binaries/binfmt.py``'s docstring for the
sources): ELF (32/64-bit, either byte order) and PE/COFF files with named sections, NVIDIA
fat-binary containers, clang offload bundles (plain and ``CCOB``) and ``ar`` archives.

``cached_wheel`` downloads a real wheel once with real pip into the test cache
(``STACKDOCTOR_TEST_CACHE``, default ``~/.cache/stackdoctor-tests``) and ``extract`` takes one
member out of it, once.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

import pytest

# ---------------------------------------------------------------------------- object files


def elf(sections: list[tuple[str, bytes]], bits: int = 64, endian: str = "<", extra_nobits: str | None = None) -> bytes:
    """An ELF file with ``sections`` (name, data) after a NULL section, plus ``.shstrtab``."""
    names = b"\0"
    name_off = []
    all_secs = list(sections) + [(".shstrtab", b"")]
    for name, _ in all_secs:
        name_off.append(len(names))
        names += name.encode() + b"\0"
    if extra_nobits:
        nobits_off = len(names)
        names += extra_nobits.encode() + b"\0"
    ehsize = 64 if bits == 64 else 52
    body = b""
    offsets = []
    for name, data in all_secs:
        if name == ".shstrtab":
            data = names
        while (ehsize + len(body)) % 8:
            body += b"\0"
        offsets.append(ehsize + len(body))
        body += data
    while (ehsize + len(body)) % 8:
        body += b"\0"
    shoff = ehsize + len(body)
    shentsize = 64 if bits == 64 else 40
    headers = [b"\0" * shentsize]
    for i, (name, data) in enumerate(all_secs):
        size = len(names) if name == ".shstrtab" else len(data)
        headers.append(_shdr(bits, endian, name_off[i], 3 if name == ".shstrtab" else 1, offsets[i], size))
    if extra_nobits:
        headers.append(_shdr(bits, endian, nobits_off, 8, 0, 4096))
    shnum = len(headers)
    shstrndx = len(all_secs)  # index of .shstrtab (after the NULL section)
    ident = b"\x7fELF" + bytes([1 if bits == 32 else 2, 1 if endian == "<" else 2, 1]) + b"\0" * 9
    if bits == 64:
        hdr = ident + struct.pack(endian + "HHIQQQIHHHHHH", 3, 62, 1, 0, 0, shoff, 0, ehsize, 56, 0, shentsize, shnum, shstrndx)
    else:
        hdr = ident + struct.pack(endian + "HHIIIIIHHHHHH", 3, 3, 1, 0, 0, shoff, 0, ehsize, 32, 0, shentsize, shnum, shstrndx)
    assert len(hdr) == ehsize
    return hdr + body + b"".join(headers)


def _shdr(bits: int, endian: str, name: int, sh_type: int, offset: int, size: int) -> bytes:
    if bits == 64:
        return struct.pack(endian + "IIQQQQIIQQ", name, sh_type, 2, 0, offset, size, 0, 0, 8, 0)
    return struct.pack(endian + "IIIIIIIIII", name, sh_type, 2, 0, offset, size, 0, 0, 8, 0)


def pe(sections: list[tuple[str, bytes]], long_names: bool = False) -> bytes:
    """A PE image (x86-64) with ``sections``; ``long_names`` stores names as ``/n`` string-table refs."""
    lfanew = 0x80
    optsize = 240
    nsec = len(sections)
    table_at = lfanew + 24 + optsize
    data_at = (table_at + 40 * nsec + 0x1FF) & ~0x1FF
    strtab = b""
    raw = b""
    table = b""
    for name, data in sections:
        if long_names:
            ref = f"/{4 + len(strtab)}".encode()
            strtab += name.encode() + b"\0"
            name_b = ref.ljust(8, b"\0")
        else:
            name_b = name.encode()[:8].ljust(8, b"\0")
        rawsize = (len(data) + 0x1FF) & ~0x1FF
        table += name_b + struct.pack("<IIIIIIHHI", len(data), 0x1000 + len(raw), rawsize, data_at + len(raw), 0, 0, 0, 0, 0x40000040)
        raw += data.ljust(rawsize, b"\0")
    symptr = data_at + len(raw) if long_names else 0
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, nsec, 0, symptr, 0, optsize, 0x2022)
    mz = b"MZ" + b"\0" * 0x3A + struct.pack("<I", lfanew)
    head = mz.ljust(lfanew, b"\0") + coff + b"\0" * optsize + table
    out = head.ljust(data_at, b"\0") + raw
    if long_names:
        out += struct.pack("<I", 4 + len(strtab)) + strtab
    return out


# ---------------------------------------------------------------------------- GPU code containers

ZSTD = 0x8000
LZ4 = 0x2000
ARCH_SPECIFIC = 0x100000
FAMILY = 0x200000


def fatbin_entry(kind: int, sm: int, flags: int = 0x11, payload: bytes = b"\x7fELF....", header_size: int = 64) -> bytes:
    padded = payload + b"\0" * (-len(payload) % 8)
    h = bytearray(header_size)
    struct.pack_into("<HHIQ", h, 0, kind, 0x0101, header_size, len(padded))
    struct.pack_into("<I", h, 16, len(payload) if flags & (ZSTD | LZ4) else 0)
    struct.pack_into("<HHI", h, 24, 7, 1, sm)
    struct.pack_into("<Q", h, 40, flags)
    return bytes(h) + padded


def fatbin_container(entries: list[bytes]) -> bytes:
    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def fatbin(*containers: list[bytes]) -> bytes:
    out = b""
    for c in containers:
        out += fatbin_container(c)
        out += b"\0" * (-len(out) % 8)
    return out


def bundle(entries: list[tuple[str, bytes]], align: int = 4096) -> bytes:
    """A plain ``__CLANG_OFFLOAD_BUNDLE__`` whose payloads start at ``align``-aligned offsets."""
    header_len = 24 + 8 + sum(24 + len(i.encode()) for i, _ in entries)
    pos = header_len
    layout = []
    for bid, data in entries:
        if align:
            pos = -(-pos // align) * align
        layout.append((pos, len(data), bid))
        pos += len(data)
    head = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(entries))
    for off, size, bid in layout:
        head += struct.pack("<QQQ", off, size, len(bid.encode())) + bid.encode()
    out = bytearray(head)
    for (off, _size, _), (_, data) in zip(layout, entries, strict=True):
        out += b"\0" * (off - len(out))
        out += data
    return bytes(out)


def ccob(inner: bytes, version: int = 3, method: int = 0, stream: bytes | None = None) -> bytes:
    """A compressed bundle around ``inner`` (zlib unless ``stream`` gives the compressed bytes)."""
    data = zlib.compress(inner) if stream is None else stream
    head = b"CCOB" + struct.pack("<HH", version, method)
    if version == 1:
        head += struct.pack("<IQ", len(inner), 0x1234)
    elif version == 2:
        head += struct.pack("<IIQ", 24 + len(data), len(inner), 0x1234)
    else:
        head += struct.pack("<QQQ", 32 + len(data), len(inner), 0x1234)
    return head + data


def ar(members: list[tuple[str, bytes]]) -> bytes:
    out = b"!<arch>\n"
    for name, data in members:
        hdr = f"{name + '/':<16}{0:<12}{0:<6}{0:<6}{644:<8}{len(data):<10}`\n".encode()
        assert len(hdr) == 60
        out += hdr + data + (b"\n" if len(data) % 2 else b"")
    return out


# ---------------------------------------------------------------------------- real wheels


def cache_dir() -> Path:
    return Path(os.environ.get("STACKDOCTOR_TEST_CACHE") or Path.home() / ".cache" / "stackdoctor-tests")


def cached_wheel(requirement: str, prefix: str) -> Path:
    """The wheel for ``requirement`` (cp311, manylinux x86_64), downloaded once with real pip."""
    d = cache_dir() / "wheels"
    found = sorted(d.glob(f"{prefix}*.whl")) if d.is_dir() else []
    if found:
        return found[-1]
    d.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
            *(a for tag in ("manylinux_2_28_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64") for a in ("--platform", tag)),
            "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311", "--abi", "abi3", "--abi", "none", "-d", str(d), requirement]
    res = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=900)
    found = sorted(d.glob(f"{prefix}*.whl"))
    if res.returncode != 0 or not found:
        pytest.fail(f"could not download {requirement} into {d} (needs PyPI): {res.stderr.strip()[-500:]}")
    return found[-1]


def extract(wheel: Path, member: str) -> Path:
    """``member`` of ``wheel``, extracted once next to it."""
    out = wheel.parent / (wheel.stem + ".extract") / member
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    with zipfile.ZipFile(wheel) as zf, zf.open(member) as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
    tmp.replace(out)
    return out
