"""A wheel on an index, read by HTTP range requests: its zip directory, small members, and the GPU code headers.

The model is pip's ``pip/_internal/network/lazy_wheel.py`` (https://github.com/pypa/pip/blob/main/src/pip/_internal/network/lazy_wheel.py):
a seekable file object whose reads become ``Range: bytes=a-b`` requests, handed to :mod:`zipfile`, which reads
the end-of-central-directory record, the central directory, and then only the members asked for.

- :meth:`RangeWheel.read_member` reads one small member (``*.dist-info/METADATA``, ``RECORD``) through zipfile
  and checks it against ``RECORD``'s sha256 where RECORD lists it (the wheel's own sha256 cannot be checked
  without every byte; each member read can).
- :meth:`RangeWheel.gpu_code` streams one GPU library member (``torch/lib/libtorch_cuda.so``, deflated in
  every torch wheel) in one range request through ``zlib`` and keeps only what :mod:`stackdoctor.binaries.binfmt` reads
  for the arch list: the ELF header and section table (and the tail before it, where ``.shstrtab`` lies), every
  fat-binary container header and every entry header (found as they stream past: a container starts with
  ``0xBA55ED50`` at an 8-byte offset, its entry headers follow at offsets its own sizes give). The library is
  never written out; the compressed bytes up to its section table must still arrive (deflate cannot be
  skipped). A ROCm library's offload bundles are read from a bounded temporary copy of the member instead.

Every read is counted (:attr:`RangeWheel.fetched`) and bounded (``budget`` bytes, ``deadline``); a server that
answers a range request with the whole file raises :class:`RangesRefused` (the caller may then download the
whole wheel, within its size cap).
"""

from __future__ import annotations

import base64
import bisect
import hashlib
import heapq
import io
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackdoctor.binaries.zipbound import MAX_RECORD_BYTES, open_zip
from stackdoctor.binaries.zipbound import read_member as bounded_member
from stackdoctor.core.errors import IndexError_
from stackdoctor.wheels.http import Budget

if TYPE_CHECKING:  # pragma: no cover
    import httpx

MIN_READ = 256 * 1024  # one range request reads at least this much (zipfile reads in small pieces)
TAIL_READ = 2 * 1024 * 1024  # bytes before an ELF section table kept (the section names live there)
PROBE_SLACK = 64 * 1024  # bytes accepted in answer to the 1-byte size probe (one is right)
FATBIN_MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50, little-endian


class RangesRefused(IndexError_):
    """The server answered a range request with something other than the bytes asked for."""


class RangeWheel:
    """One remote wheel read by ranges. ``fetched``: bytes received so far (every request)."""

    def __init__(self, client: httpx.Client, url: str, *, budget: int, timeout_s: float, public: str = "", net: Budget | None = None) -> None:
        self.client = client
        self.url = url
        self.public = public or url
        self.budget = budget
        self.timeout_s = timeout_s
        # this wheel's bytes and time, inside the run's (issue 44): checked on every read, never per MiB
        self.net = (net if net is not None else Budget()).part(budget, timeout_s)
        self.per_read_s = float(getattr(getattr(client, "timeout", None), "read", None) or 20.0)
        self.fetched = 0
        self.requests = 0
        self.size = self._size()
        self._blocks: dict[int, bytes] = {}  # start -> bytes, for zipfile's small reads
        self._zip: zipfile.ZipFile | None = None

    # ------------------------------------------------------------------ transport

    def _size(self) -> int:
        """The wheel's size, from a one-byte range request (a HEAD may be refused where GET is not)."""
        import httpx

        try:
            with self.client.stream("GET", self.url, headers={"Range": "bytes=0-0", "Accept-Encoding": "identity"},
                                    timeout=self.net.timeout(self.per_read_s)) as resp:
                self.requests += 1
                if resp.status_code == 416:
                    return 0  # nothing to read: an empty file
                if resp.status_code == 404:
                    raise IndexError_(f"{self.public} does not exist (HTTP 404).")
                if resp.status_code >= 400:
                    raise IndexError_(f"{self.public} answered HTTP {resp.status_code}.")
                if resp.status_code != 206:
                    length = resp.headers.get("content-length", "")
                    if length == "0":
                        return 0
                    raise RangesRefused(f"{self.public}: the server does not answer range requests (HTTP {resp.status_code}).")
                total = resp.headers.get("content-range", "").rpartition("/")[2]
                for chunk in resp.iter_bytes():
                    self.net.take(len(chunk), self.public)
                    self.fetched += len(chunk)
                    if self.fetched > PROBE_SLACK:  # an answer to "bytes=0-0" that does not end (issue 44)
                        raise IndexError_(f"{self.public}: the server answered a 1-byte range request with more than {PROBE_SLACK} bytes; stopped.")
                if not total.isdigit():
                    raise RangesRefused(f"{self.public}: the server's range answer gives no size ({resp.headers.get('content-range')!r}).")
                return int(total)
        except httpx.HTTPError as exc:
            raise IndexError_(f"{self.public} could not be read: {type(exc).__name__}.") from None


    def stream(self, start: int, end: int) -> Iterator[bytes]:
        """The bytes [start, end) in one range request, as they arrive (counted, bounded)."""
        import httpx

        if end <= start:
            return
        self.net.check_time(self.public)
        try:
            with self.client.stream("GET", self.url, headers={"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"},
                                    timeout=self.net.timeout(self.per_read_s)) as resp:
                self.requests += 1
                if resp.status_code != 206:
                    raise RangesRefused(f"{self.public}: a range request was answered HTTP {resp.status_code}, not 206.")
                got = 0
                for chunk in resp.iter_bytes():  # each network read as it arrives: bytes and time checked per read
                    if got + len(chunk) > end - start:
                        raise IndexError_(f"{self.public}: the range answer had more than {end - start} bytes; stopped.")
                    self.net.take(len(chunk), self.public)
                    self.fetched += len(chunk)
                    got += len(chunk)
                    yield chunk
                if got != end - start:
                    raise IndexError_(f"{self.public}: the range answer had {got} bytes, not {end - start}.")
        except httpx.HTTPError as exc:
            raise IndexError_(f"{self.public} could not be read: {type(exc).__name__}.") from None

    def read_at(self, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos`` (fewer at the end), served from blocks read before where they cover it."""
        n = max(0, min(n, self.size - pos))
        if n == 0:
            return b""
        starts = sorted(self._blocks)
        i = bisect.bisect_right(starts, pos) - 1
        if i >= 0:
            s = starts[i]
            blk = self._blocks[s]
            if s + len(blk) >= pos + n:
                return blk[pos - s:pos - s + n]
        start = pos
        end = min(self.size, pos + max(n, MIN_READ))
        data = b"".join(self.stream(start, end))
        self._blocks[start] = data
        return data[:n]

    # ------------------------------------------------------------------ the zip

    def zip(self) -> zipfile.ZipFile:
        if self._zip is None:
            # the tail first: end-of-central-directory and (usually) the whole central directory in one request
            tail = min(self.size, MIN_READ)
            self.read_at(self.size - tail, tail)
            self._zip = open_zip(_RangeFile(self), self.public)  # entries and directory bytes capped first (issue 44)
        return self._zip

    def names(self) -> list[str]:
        return self.zip().namelist()

    def record(self) -> dict[str, str]:
        """``RECORD``'s sha256 per member (urlsafe base64, as written), {} when there is none."""
        z = self.zip()
        name = next((n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")), None)
        if name is None:
            return {}
        try:
            text = bounded_member(z, name, MAX_RECORD_BYTES, self.public).decode("utf-8", errors="replace")
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
            raise IndexError_(f"{self.public}: its RECORD cannot be read ({exc}).") from None
        out: dict[str, str] = {}
        for line in text.splitlines():
            parts = line.rsplit(",", 2)
            if len(parts) == 3 and parts[1].startswith("sha256="):
                out[parts[0]] = parts[1][len("sha256="):]
        return out

    def read_member(self, name: str, cap: int, record: dict[str, str] | None = None) -> bytes:
        z = self.zip()
        info = z.getinfo(name)
        if info.file_size > cap:
            raise IndexError_(f"{self.public}: {name} is {info.file_size} bytes, more than the {cap} read.")
        try:
            data = bounded_member(z, info, cap, self.public)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, zlib.error) as exc:
            raise IndexError_(f"{self.public}: {name} cannot be read ({exc}).") from None
        want = (record or {}).get(name)
        if want and _b64sha(hashlib.sha256(data).digest()) != want:
            raise IndexError_(f"{self.public}: {name} does not match the sha256 its RECORD lists; not used.")
        return data

    def _member_data(self, info: zipfile.ZipInfo) -> tuple[int, int]:
        """(start, end) of a member's stored bytes: after its local header, whose name and extra lengths may
        differ from the central directory's."""
        head = self.read_at(info.header_offset, 30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise IndexError_(f"{self.public}: no local header for {info.filename}.")
        n, m = struct.unpack_from("<HH", head, 26)
        start = info.header_offset + 30 + n + m
        return start, start + info.compress_size

    def member_chunks(self, name: str, cap: int) -> Iterator[bytes]:
        """The uncompressed bytes of member ``name``, streamed (stored or deflated), at most ``cap``."""
        info = self.zip().getinfo(name)
        if info.file_size > cap:
            raise IndexError_(f"{self.public}: {name} is {info.file_size // (1024 * 1024)} MiB, more than the {cap // (1024 * 1024)} MiB read limit.")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise IndexError_(f"{self.public}: {name} uses zip compression {info.compress_type}, which is not read.")
        start, end = self._member_data(info)
        dec = zlib.decompressobj(-15) if info.compress_type == zipfile.ZIP_DEFLATED else None
        out = 0
        for chunk in self.stream(start, end):
            data = dec.decompress(chunk) if dec is not None else chunk
            out += len(data)
            if out > cap:
                raise IndexError_(f"{self.public}: {name} unpacks past the {cap // (1024 * 1024)} MiB read limit.")
            if data:
                yield data
        if dec is not None:
            tail = dec.flush()
            if tail:
                yield tail

    # ------------------------------------------------------------------ GPU code

    def gpu_code(self, member: str, kind: str, cap: int, read: Callable[[Any, str, str], dict[str, Any]]) -> dict[str, Any]:
        """The GPU code of library ``member``: ``read(file, kind, member)`` (:func:`stackdoctor.wheels.learn.read_open_library`)
        over the headers-only view of the library (CUDA), or over a bounded temporary copy of it (ROCm)."""
        record = self.record()
        want = record.get(member)
        h = hashlib.sha256()
        info = self.zip().getinfo(member)
        from stackdoctor import kinds

        if not any(a.gpu_code_kind == kind and a.gpu_code_headers_only for a in kinds.ALL):  # a bounded temporary copy, read as an installed library is
            with tempfile.TemporaryDirectory(prefix="sd-learn-lib-") as tmp:
                path = Path(tmp) / "lib"
                with open(path, "wb") as fh:
                    for chunk in self.member_chunks(member, cap):
                        h.update(chunk)
                        fh.write(chunk)
                _verify(h, want, self.public, member)
                with open(path, "rb") as fh:
                    return read(fh, kind, member)
        sparse = _FatbinCapture(info.file_size)
        for chunk in self.member_chunks(member, cap):
            h.update(chunk)
            sparse.feed(chunk)
        _verify(h, want, self.public, member)
        return read(sparse.view(), kind, member)


def _verify(h: Any, want: str | None, public: str, member: str) -> None:
    if want and _b64sha(h.digest()) != want:
        raise IndexError_(f"{public}: {member} does not match the sha256 its RECORD lists; its GPU code is not used.")


def _b64sha(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class _ReadOnlyFile(io.RawIOBase):
    """A seekable, read-only file of ``size`` bytes whose :meth:`read` a subclass gives (what
    :class:`zipfile.ZipFile` and the ELF readers need)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size
        self.pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.size}[whence]
        self.pos = max(0, base + offset)
        return self.pos

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[: len(data)] = data
        return len(data)


class _RangeFile(_ReadOnlyFile):
    """A :class:`RangeWheel` as a file: each read is a range request (its blocks cached by the wheel)."""

    def __init__(self, wheel: RangeWheel) -> None:
        super().__init__(wheel.size)
        self.wheel = wheel

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        data = self.wheel.read_at(self.pos, n)
        self.pos += len(data)
        return data


class _FatbinCapture:
    """Keeps, of an ELF library streaming past, what :func:`stackdoctor.binaries.binfmt.read_sections` and
    :func:`~stackdoctor.binaries.binfmt.walk_fatbin` read; :meth:`view` is a file of the library's size that holds those
    bytes where they were and zeros elsewhere (the padding between containers is zeros in the real file too)."""

    CARRY = 128
    MAX_KEPT = 64 * 1024 * 1024

    def __init__(self, size: int, tail: int = TAIL_READ) -> None:
        self.size = size
        self.tail = tail
        self.pos = 0  # bytes seen so far
        self.carry = b""
        self.kept: list[tuple[int, bytes]] = []  # (offset, bytes), in stream order; pieces may overlap
        self.kept_bytes = 0
        self.wants: list[tuple[int, int]] = []  # entry headers to keep: (offset, its container's end), a heap
        self.scanned = 0  # magic searched below this offset
        self.shoff: int | None = None
        self.sh_end = 0
        self.head = bytearray()

    def _keep(self, off: int, data: bytes) -> None:
        if self.kept_bytes + len(data) > self.MAX_KEPT:
            return
        self.kept.append((off, data))
        self.kept_bytes += len(data)

    def feed(self, chunk: bytes) -> None:
        base = self.pos - len(self.carry)
        window = self.carry + chunk
        end = base + len(window)
        if self.pos < 4096:  # the ELF header (and what follows it)
            self.head += chunk[:4096 - self.pos]
            if self.shoff is None and len(self.head) >= 64 and self.head[:4] == b"\x7fELF" and self.head[4] == 2:
                bo = "<" if self.head[5] == 1 else ">"
                (shoff,) = struct.unpack_from(bo + "Q", self.head, 0x28)
                shentsize, shnum = struct.unpack_from(bo + "HH", self.head, 0x3A)
                self.shoff = shoff
                self.sh_end = shoff + max(shnum, 1) * shentsize
        # the section table and the bytes before it (.shstrtab)
        if self.shoff is not None:
            lo, hi = max(self.shoff - self.tail, 0), self.sh_end
            a, b = max(lo, self.pos), min(hi, self.pos + len(chunk))
            if a < b:
                self._keep(a, chunk[a - self.pos:b - self.pos])
        # fat-binary containers: their 16-byte headers at 8-byte offsets
        i = window.find(FATBIN_MAGIC, max(0, self.scanned - base))
        while i >= 0:
            p = base + i
            if p % 8 == 0 and p >= self.scanned and i + 16 <= len(window):
                hsize, fsize = struct.unpack_from("<HQ", window, i + 6)
                self._keep(p, window[i:i + 16])
                if hsize >= 16 and len(self.wants) < 2_000_000 and p + hsize + 64 <= p + hsize + fsize:
                    heapq.heappush(self.wants, (p + hsize, p + hsize + fsize))
            elif i + 16 > len(window):
                break  # finish it with the next chunk
            i = window.find(FATBIN_MAGIC, i + 1)
        self.scanned = max(self.scanned, end - 16)
        # entry headers asked for by the containers (each names the next)
        while self.wants and self.wants[0][0] + 64 <= end:
            off, stop = heapq.heappop(self.wants)
            if off < base:
                continue  # fell behind the window (cannot happen with CARRY >= 64)
            ent = window[off - base:off - base + 64]
            self._keep(off, ent)
            ehs, psize = struct.unpack_from("<IQ", ent, 4)
            nxt = off + ehs + psize
            if ehs >= 64 and nxt + 64 <= stop:
                heapq.heappush(self.wants, (nxt, stop))
        self.pos += len(chunk)
        self.carry = window[-self.CARRY:]

    def view(self) -> io.RawIOBase:
        """The kept bytes as one file; overlapping pieces merged (they are the same bytes of the same stream)."""
        merged: dict[int, bytes] = {}
        cur_start, cur = -1, bytearray()
        for s, d in sorted([(0, bytes(self.head)), *self.kept], key=lambda p: (p[0], -len(p[1]))):
            if cur_start >= 0 and s <= cur_start + len(cur):
                over = cur_start + len(cur) - s
                if over < len(d):
                    cur += d[over:]
                continue
            if cur_start >= 0:
                merged[cur_start] = bytes(cur)
            cur_start, cur = s, bytearray(d)
        if cur_start >= 0:
            merged[cur_start] = bytes(cur)
        return _SparseFile(self.size, merged)


class _SparseFile(_ReadOnlyFile):
    """The bytes a capture kept, where they were in the library, zeros elsewhere."""

    def __init__(self, size: int, kept: dict[int, bytes]) -> None:
        super().__init__(size)
        self.starts = sorted(kept)
        self.kept = kept

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            n = self.size - self.pos
        n = max(0, min(n, self.size - self.pos))
        out = bytearray(n)
        lo, hi = self.pos, self.pos + n
        i = max(0, bisect.bisect_right(self.starts, lo) - 1)
        while i < len(self.starts) and self.starts[i] < hi:
            s = self.starts[i]
            d = self.kept[s]
            a, b = max(lo, s), min(hi, s + len(d))
            if a < b:
                out[a - lo:b - lo] = d[a - s:b - s]
            i += 1
        self.pos = hi
        return bytes(out)
