"""The drift between an index (PyPI) and the shipped compatibility matrix: releases missing, rows that disagree.

    python benchmarks/matrix_drift.py                         # PyPI over HTTP (https://pypi.org/simple)
    python benchmarks/matrix_drift.py --index URL             # another index or mirror
    python benchmarks/matrix_drift.py --snapshot snap.json    # an index read through pip (benchmarks/pypi_via_pip.py)

It learns every final torch release >= 2.0 the index serves (file names and core metadata, the same code as
`stackdoctor matrix learn`, nothing downloaded) and compares each with

- the shipped matrix (hand-kept rows with compat_matrix/learned.yaml over them): what a user gets today;
- the hand-kept rows alone (compat_matrix/releases.yaml, mirrors.yaml): what the learned layer corrects.

Printed: releases the index serves that a matrix does not know, and per release the facts that differ (Pythons,
torchvision / torchaudio pairing, Requires-Python, the PyPI default build's variant). Exit 0 when the shipped
matrix knows every release and agrees with the index, 1 otherwise (a release-day reminder to learn).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stackdoctor import learn as L  # noqa: E402
from stackdoctor import matrix as mx  # noqa: E402


def hand_kept() -> mx.Matrix:
    return mx._build([p for p in mx._embedded() if not p[0].rsplit("/", 1)[-1].startswith("learned")])


def expand(archs: list[str]) -> tuple[str, ...]:
    """``sm_120+PTX`` -> ``sm_120``, ``compute_120`` (the matrix's parsed form)."""
    out: list[str] = []
    for a in archs:
        base = a.removesuffix("+PTX")
        out.append(base)
        if a.endswith("+PTX"):
            out.append("compute_" + base.split("_", 1)[1])
    return tuple(out)


def compare(row: dict, m: mx.Matrix) -> list[str]:
    rel = m.release(row["version"])
    if rel is None:
        return ["not in the matrix"]
    out = []
    pys = set(row.get("pythons") or [])
    known = {p for v in rel.variants for p in v.pythons} | set(rel.pythons)
    if pys - known:
        out.append(f"Pythons the index has, the matrix not: {', '.join(sorted(pys - known, key=L._py_key))}")
    claimed = set(rel.pythons) - pys
    if pys and claimed:
        out.append(f"Pythons the matrix claims, the index has no wheel for: {', '.join(sorted(claimed, key=L._py_key))}")
    for comp in ("torchvision", "torchaudio"):
        if row.get(comp) and getattr(rel, comp) != row[comp]:
            out.append(f"{comp}: index {row[comp]}, matrix {getattr(rel, comp) or 'unknown'}")
    for vr in row.get("variants") or []:
        if vr.get("index") != "pypi":
            continue
        for plat in vr["platforms"]:
            fam = L._family(plat)
            d = m.pypi_default(row["version"], fam)
            if d is None or d.variant != vr["name"]:
                out.append(f"PyPI's {fam} build is {vr['name']}; the matrix says {d.variant if d and d.variant else 'unknown'}")
        mv = rel.variant(vr["name"])
        if mv is None:
            out.append(f"{vr['name']} ({', '.join(vr['platforms'])}) is not a build of this release in the matrix")
        elif vr.get("arch_list") and expand(vr["arch_list"]) != mv.arch_list:
            out.append(f"{vr['name']} arch list: index {' '.join(vr['arch_list'])}, matrix {' '.join(mv.arch_list)}")
    return list(dict.fromkeys(out))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--index", help="index URL (default https://pypi.org/simple)")
    g.add_argument("--snapshot", help="an index snapshot from benchmarks/pypi_via_pip.py")
    ap.add_argument("--since", default="2.0")
    a = ap.parse_args()
    client = None
    if a.snapshot:
        src: L.Source = L.SnapshotSource(Path(a.snapshot))
    else:
        from stackdoctor.index import IndexClient

        client = IndexClient()
        src = L.HttpSource(a.index or mx.default_index_url("pypi"), client)
    try:
        res = L.learn(src, since=a.since)
    finally:
        if client is not None:
            client.close()
    shipped, kept = mx.load_matrix(), hand_kept()
    drift = 0
    print(f"{len(res.rows)} final torch releases >= {a.since} on {src.name}")
    for title, m in (("shipped matrix (hand-kept + compat_matrix/learned.yaml)", shipped), ("hand-kept rows alone", kept)):
        missing = [r["version"] for r in res.rows if m.release(r["version"]) is None]
        differing = {r["version"]: d for r in res.rows if m.release(r["version"]) is not None and (d := compare(r, m))}
        print(f"\n{title}: {len(missing)} release(s) missing, {len(differing)} disagreeing")
        if missing:
            print(f"  missing: {', '.join(missing)}")
        for v, diffs in differing.items():
            for d in diffs:
                print(f"  torch {v}: {d}")
        if m is shipped:
            drift = len(missing) + len(differing)
    if drift:
        print("\nrefresh: stackdoctor matrix learn --shipped (README: 'Refreshing the matrix on a release day')")
    return 1 if drift else 0


if __name__ == "__main__":
    raise SystemExit(main())
