"""The torch-npu releases PyPI serves that stackdoctor/accelerators/ascend/torch_npu.yaml lacks, as rows of that table.

    python benchmarks/torch_npu_rows.py              # print the missing rows (final and .postN releases >= 2.6)
    python benchmarks/torch_npu_rows.py --write      # insert them into the table, newest first

Every value is read from PyPI: the release list and each file's upload time from https://pypi.org/pypi/torch-npu/json,
the Pythons and platform tags from the wheels' names, the torch each pins from the cp311 wheels' own METADATA (PEP 658
``<wheel url>.metadata``, its sha256 kept beside it). The CANN a release needs is Ascend's table (COMPATIBILITY.en.md at
the commit the table cites); a release that table does not list gets ``cann: null`` and says so.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import urllib.request
from pathlib import Path

from packaging.version import InvalidVersion, Version

TABLE = Path(__file__).resolve().parent.parent / "stackdoctor" / "accelerators" / "ascend" / "torch_npu.yaml"
JSON_URL = "https://pypi.org/pypi/torch-npu/json"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=60) as r:  # noqa: S310 (a fixed https URL)
        return r.read()


def _urls(url: str) -> tuple[str, str]:
    """(where to read it from here, its public address): a proxy of PyPI may answer with relative links
    (``../../packages/packages/<hash path>``); the public file lives at files.pythonhosted.org/packages/<hash path>."""
    from urllib.parse import urljoin

    here = urljoin(JSON_URL, url)
    m = re.search(r"/packages/(?:packages/)?([0-9a-f]{2}/[0-9a-f]{2}/[0-9a-f]+/[^/]+)$", here)
    return here, (f"https://files.pythonhosted.org/packages/{m.group(1)}" if m else here)


def _metadata(url: str) -> bytes:
    """The wheel's METADATA member, read by HTTP range requests (stackdoctor/wheels/lazywheel.py), a small part of it."""
    import httpx

    sys.path.insert(0, str(TABLE.parents[3]))
    from stackdoctor.wheels.lazywheel import RangeWheel

    with httpx.Client(timeout=60, follow_redirects=True) as client:
        rw = RangeWheel(client, url, budget=8 * 1024 * 1024, timeout_s=120)
        name = next(n for n in rw.names() if n.endswith(".dist-info/METADATA"))
        return rw.read_member(name, 1024 * 1024)


def _torch_pin(metadata: bytes) -> str | None:
    for line in metadata.decode("utf-8", "replace").splitlines():
        if re.match(r"^Requires-Dist:\s*torch\b(?![-_])", line):
            return line.split(":", 1)[1].strip()
    return None


def _platform(filename: str) -> str:
    return filename[:-4].split("-", 4)[4]


def row_for(version: str, files: list[dict]) -> dict:
    wheels = [f for f in files if f["filename"].endswith(".whl") and not f.get("yanked")]
    pythons = sorted({m.group(1)[0] + "." + m.group(1)[1:] for f in wheels if (m := re.search(r"-cp(\d+)-cp\d+t?-", f["filename"]))},
                     key=lambda p: tuple(int(x) for x in p.split(".")))
    platforms = sorted({_platform(f["filename"]) for f in wheels}, key=lambda t: ("x86_64" in t, t))
    picked, pins = [], {}
    for arch in ("x86_64", "aarch64"):
        cands = [f for f in wheels if _platform(f["filename"]).endswith(arch)]
        f = next((c for c in cands if "-cp311-" in c["filename"]), cands[0] if cands else None)
        if f is None:
            continue
        here, public = _urls(f["url"])
        meta = _metadata(public)
        pins[arch] = _torch_pin(meta)
        picked.append({"file": f["filename"], "url": public, "sha256": f["digests"]["sha256"], "metadata_sha256": hashlib.sha256(meta).hexdigest()})
    first = picked[0] if picked else None
    return {
        "version": version,
        "torch": Version(version).base_version,
        "uploaded": min(f["upload_time"] for f in wheels)[:10],
        "pythons": pythons,
        "platforms": platforms,
        "requires_dist": pins,
        "source": f"{first['file']} METADATA (PyPI, sha256 {first['sha256'][:8]}…); upload time: {JSON_URL}" if first else JSON_URL,
        "wheels": picked,
        "cann": None,
        "cann_source": "not in Ascend/pytorch COMPATIBILITY.en.md (commit b48e6481, read 2026-12-02)",
    }


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def row_text(r: dict) -> str:
    lines = [f"  - version: {_q(r['version'])}", f"    torch: {_q(r['torch'])}", f"    uploaded: {_q(r['uploaded'])}",
             f"    pythons: [{', '.join(_q(p) for p in r['pythons'])}]", f"    platforms: [{', '.join(r['platforms'])}]", "    requires_dist:"]
    lines += [f"      {arch}: {_q(pin)}" for arch, pin in r["requires_dist"].items() if pin]
    lines += [f"    source: {_q(r['source'])}", "    wheels:"]
    for w in r["wheels"]:
        lines += [f"      - file: {w['file']}", f"        url: {w['url']}", f"        sha256: {w['sha256']}", f"        metadata_sha256: {w['metadata_sha256']}"]
    lines += ["    cann: null", f"    cann_source: {_q(r['cann_source'])}"]
    return "\n".join(lines) + "\n"


def missing_rows(since: str = "2.6") -> list[dict]:
    import yaml

    have = {str(r["version"]) for r in yaml.safe_load(TABLE.read_text(encoding="utf-8"))["releases"]}
    data = json.loads(_get(JSON_URL))
    out = []
    for v, files in data["releases"].items():
        try:
            pv = Version(v)
        except InvalidVersion:
            continue
        if pv.is_prerelease or pv.is_devrelease or pv < Version(since) or v in have or not files:
            continue
        out.append(row_for(v, files))
    return sorted(out, key=lambda r: Version(r["version"]), reverse=True)


def insert(text: str, rows: list[dict]) -> str:
    """The table's text with ``rows`` placed among the existing ones, newest version first."""
    head, _, body = text.partition("releases:\n")
    blocks = re.split(r"(?m)^(?=  - version: )", body)
    pre, existing = blocks[0], [b for b in blocks[1:] if b]
    keyed = [(Version(re.match(r'  - version: "([^"]+)"', b).group(1)), b) for b in existing]  # type: ignore[union-attr]
    keyed += [(Version(r["version"]), row_text(r)) for r in rows]
    keyed.sort(key=lambda kv: kv[0], reverse=True)
    return head + "releases:\n" + pre + "".join(b for _, b in keyed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--since", default="2.6")
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args(argv)
    rows = missing_rows(a.since)
    print(f"{len(rows)} torch-npu release(s) on PyPI missing from {TABLE.name}: {', '.join(r['version'] for r in rows)}", file=sys.stderr)
    if a.write:
        TABLE.write_text(insert(TABLE.read_text(encoding="utf-8"), rows), encoding="utf-8")
    else:
        sys.stdout.write("".join(row_text(r) for r in rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
