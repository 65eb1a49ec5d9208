"""Cut a small skeleton out of a real torch CUDA wheel: what `stackdoctor matrix learn` reads, nothing else.

    python benchmarks/make_wheel_skeleton.py REAL.whl OUT.whl --url URL

The skeleton is a zip under the real wheel's file name holding

- ``<name>.dist-info/METADATA`` and ``WHEEL``, byte for byte;
- ``torch/version.py``, byte for byte;
- ``torch/lib/libtorch_cuda.so`` rebuilt as a small ELF64: the real ELF header fields (class, data, machine,
  type), and three sections: null, ``.nv_fatbin``, ``.shstrtab``. The ``.nv_fatbin`` holds every real fat-binary
  container header and every real entry header (kind, version, header size, sm, flags, ... byte for byte) in the
  real order, with the entries' payloads (the compressed cubins / PTX) dropped: each entry's payload size is set
  to 0 and each container's body size to the sum of its entry headers.

So :func:`stackdoctor.binaries.binfmt.walk_fatbin` sees the same containers and entries (kinds, sm, flags) as in the real
library, and the arch list read from it is the real one. A ``SOURCE.txt`` beside the output records the real
wheel's URL, sha256 and the reading of the real library, for the test to compare against.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import struct
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stackdoctor.binaries import binfmt  # noqa: E402

FATBIN_MAGIC = binfmt.FATBIN_MAGIC


def skeleton_fatbin(data: bytes) -> bytes:
    """Container and entry headers of a real ``.nv_fatbin`` section, payloads dropped."""
    out = bytearray()
    pos = 0
    while pos + 16 <= len(data):
        magic, version, hsize, fsize = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # zero padding between containers
            continue
        head = bytearray(data[pos:pos + hsize])
        body = bytearray()
        e, stop = pos + hsize, pos + hsize + fsize
        while e + 64 <= stop:
            kind, ev, ehs, psize = struct.unpack_from("<HHIQ", data, e)
            ent = bytearray(data[e:e + ehs])
            struct.pack_into("<Q", ent, 8, 0)  # payload size -> 0 (payload dropped)
            # compressed entries also record the uncompressed size at +56: kept as read (a header fact)
            body += ent
            e += ehs + psize
        struct.pack_into("<Q", head, 8, len(body))
        out += head + body
        while len(out) % 8:
            out += b"\0"
        pos = stop
        while pos < len(data) and pos % 8:
            pos += 1
    return bytes(out)


def rebuild_elf(real: Path, fatbin: bytes) -> bytes:
    with open(real, "rb") as fh:
        ident = fh.read(64)
    e_type, e_machine, e_version = struct.unpack_from("<HHI", ident, 16)
    names = b"\0.nv_fatbin\0.shstrtab\0"
    fat_off = 64
    str_off = fat_off + len(fatbin)
    sh_off = (str_off + len(names) + 7) // 8 * 8
    hdr = bytearray(ident[:16])
    hdr += struct.pack("<HHIQQQIHHHHHH", e_type, e_machine, e_version, 0, 0, sh_off, 0, 64, 0, 0, 64, 3, 2)
    body = bytearray(hdr) + fatbin + names
    while len(body) < sh_off:
        body += b"\0"
    body += b"\0" * 64  # SHT_NULL
    body += struct.pack("<IIQQQQIIQQ", 1, 1, 2, 0, fat_off, len(fatbin), 0, 0, 8, 0)  # PROGBITS, SHF_ALLOC
    body += struct.pack("<IIQQQQIIQQ", 12, 3, 0, 0, str_off, len(names), 0, 0, 1, 0)  # STRTAB
    return bytes(body)


def reading(path: Path) -> dict[str, object]:
    from stackdoctor.probes.torch_static import majority, sort_archs

    with open(path, "rb") as fh:
        table = binfmt.read_sections(fh)
        sec = table.find(".nv_fatbin")
        assert sec is not None, f"{path}: no .nv_fatbin"
        fat = binfmt.walk_fatbin(fh, sec.offset, sec.size)
    counts = fat.arch_containers()
    main, extra = majority(counts, fat.containers)
    return {
        "containers": fat.containers,
        "entries": len(fat.entries),
        "arch_list": sort_archs(main),
        "arch_extra": sort_archs(extra),
        "ptx": sorted(a for a in counts if a.startswith("compute_")),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wheel")
    ap.add_argument("out")
    ap.add_argument("--url", required=True, help="the public URL the real wheel was downloaded from")
    a = ap.parse_args()
    real = Path(a.wheel)
    sha = hashlib.sha256(real.read_bytes()).hexdigest()
    with zipfile.ZipFile(real) as z, tempfile.TemporaryDirectory() as tmp:
        dist = next(n.split("/")[0] for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lib = z.extract("torch/lib/libtorch_cuda.so", tmp)
        real_reading = reading(Path(lib))
        with open(lib, "rb") as fh:
            table = binfmt.read_sections(fh)
            sec = table.find(".nv_fatbin")
            assert sec is not None
            fh.seek(sec.offset)
            fat = fh.read(sec.size)
        skel = rebuild_elf(Path(lib), skeleton_fatbin(fat))
        skel_path = Path(tmp) / "skel.so"
        skel_path.write_bytes(skel)
        skel_reading = reading(skel_path)
        assert skel_reading == real_reading, (skel_reading, real_reading)
        out = Path(a.out)
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zo:
            for member in (f"{dist}/METADATA", f"{dist}/WHEEL", "torch/version.py"):
                zo.writestr(member, z.read(member))
            zo.writestr("torch/lib/libtorch_cuda.so", skel)
    src = {
        "real_wheel": real.name,
        "url": a.url,
        "sha256": sha,
        "size": real.stat().st_size,
        "libtorch_cuda.so": real_reading,
        "made_by": "benchmarks/make_wheel_skeleton.py",
    }
    Path(str(out) + ".source.json").write_text(json.dumps(src, indent=2) + "\n")
    print(json.dumps(src, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
