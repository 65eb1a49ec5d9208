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

Per artifact (issue 30): every (release, variant, platform) a wheel of the index serves is looked up in the shipped
matrix, and with ``--pytorch`` the PyTorch variant indexes (``<url>/<variant>/torch/``, default the matrix's
download.pytorch.org/whl, for every variant the matrix names since ``--since``) are listed too (file names only):
an artifact an index serves that the matrix lacks is drift; an index that does not answer is said and skipped.

    python benchmarks/matrix_drift.py --pytorch               # PyPI and download.pytorch.org
    python benchmarks/matrix_drift.py --pytorch URL --variants cpu,cu130 --no-pypi
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from stackdoctor import matrix as mx  # noqa: E402
from stackdoctor.wheels import learn as L  # noqa: E402
from stackdoctor.wheels.learn_wheels import python_key, tag_family  # noqa: E402


def hand_kept() -> mx.Matrix:
    return mx.build([p for p in mx.embedded_parts() if not p[0].rsplit("/", 1)[-1].startswith("learned")])


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
    out: list[str] = []
    pys = set(row.get("pythons") or [])
    known = {p for v in rel.variants for p in v.pythons} | set(rel.pythons)
    if pys - known:
        out.append(f"Pythons the index has, the matrix not: {', '.join(sorted(pys - known, key=python_key))}")
    claimed = set(rel.pythons) - pys
    if pys and claimed:
        out.append(f"Pythons the matrix claims, the index has no wheel for: {', '.join(sorted(claimed, key=python_key))}")
    ranged = set(row.get("paired_by_range") or [])
    for comp in ("torchvision", "torchaudio"):
        # a companion paired by its own Requires-Dist range (torchaudio 2.11.x: torch>=2.11) pairs validly with the
        # matrix's pairing too, when that is a release of the same companion line: no drift
        if row.get(comp) and getattr(rel, comp) != row[comp] and not (comp in ranged and getattr(rel, comp)):
            out.append(f"{comp}: index {row[comp]}, matrix {getattr(rel, comp) or 'unknown'}")
    for vr in row.get("variants") or []:
        if vr.get("index") != "pypi":
            continue
        for plat in vr["platforms"]:
            fam = tag_family(plat)
            d = m.pypi_default(row["version"], fam)
            if d is None or d.variant != vr["name"]:
                out.append(f"PyPI's {fam} build is {vr['name']}; the matrix says {d.variant if d and d.variant else 'unknown'}")
        mv = rel.variant(vr["name"])
        if mv is None:
            out.append(f"{vr['name']} ({', '.join(vr['platforms'])}) is not a build of this release in the matrix")
            continue
        out += variant_drift(vr, mv)
    return list(dict.fromkeys(out))


def variant_drift(vr: dict, mv: mx.Variant) -> list[str]:
    """A learned variant against the matrix's: its Linux x86_64 arch list, each other platform's (aarch64, Windows),
    and its runtime pins (exact versions and ranges, as the wheels' Requires-Dist write them)."""
    out: list[str] = []
    if vr.get("arch_list") and expand(vr["arch_list"]) != mv.arch_list:
        out.append(f"{vr['name']} arch list: index {' '.join(vr['arch_list'])}, matrix {' '.join(mv.arch_list)}")
    for plat, archs in (vr.get("arch_by_platform") or {}).items():
        have = mv.arch_for(plat) if mv.arch_known_for(plat) else ()
        if expand(archs) != have:
            out.append(f"{vr['name']} {plat} arch list: index {' '.join(archs)}, matrix {' '.join(have) or 'unknown'}")
    for dist, pin in sorted((vr.get("runtime") or {}).items()):
        if mv.runtime.get(dist) != pin:
            out.append(f"{vr['name']} runtime pin {dist}: index {pin}, matrix {mv.runtime.get(dist) or 'none'}")
    return out


def artifacts(files: list, since: str = "2.0") -> dict[tuple[str, str | None, tuple[str, str]], str]:
    """(release, local label or None, (os, arch)) -> one wheel's file name, for every final torch wheel listed."""
    from packaging.version import Version

    from stackdoctor.matrix import parse_platform
    from stackdoctor.wheels.index import wheel_parts

    out: dict[tuple[str, str | None, tuple[str, str]], str] = {}
    for f in files:
        parts = wheel_parts(f.filename)
        if parts is None or parts[0] != "torch" or getattr(f, "yanked", False):
            continue
        v = parts[1]
        if v.is_prerelease or v.is_devrelease or Version(v.public) < Version(since):
            continue
        for tag in parts[2]:
            out.setdefault((v.public, str(v.local) if v.local else None, parse_platform(tag.split("-")[2])[:2]), f.filename)
    return out


def artifact_drift(served: dict[tuple[str, str | None, tuple[str, str]], str], m: mx.Matrix, variant: str | None = None) -> list[str]:
    """The artifacts ``served`` (from :func:`artifacts`) that matrix ``m`` lacks: a release it does not know, or a
    known release without that variant for that platform. ``variant``: the variant index's own name (its wheels
    are that build whatever their label, as download.pytorch.org's label-less aarch64 CPU wheels)."""
    out: list[str] = []
    for (version, label, fam), filename in sorted(served.items()):
        rel = m.release(version)
        name = variant or label
        if rel is None or str(rel.version) != version:
            out.append(f"torch {version}: not in the matrix ({filename})")
            continue
        if name is None:  # a label-less default build (PyPI's): which variant it is, the learned rows say
            if not any(mx.parse_platform(t)[:2] == fam for v in rel.variants for t in v.platforms):
                out.append(f"torch {version} {fam[0]} {fam[1]}: no build for it in the matrix ({filename})")
            continue
        v = rel.variant(name)
        if v is None or not any(mx.parse_platform(t)[:2] == fam for t in v.platforms):
            out.append(f"torch {version} {name} {fam[0]} {fam[1]}: not in the matrix ({filename})")
    return list(dict.fromkeys(out))


def pytorch_drift(base: str, variants: list[str], m: mx.Matrix, since: str, client) -> tuple[list[str], list[str]]:
    """(drift lines, unreachable lines) of the PyTorch variant indexes under ``base``."""
    from stackdoctor.core.errors import IndexError_
    from stackdoctor.wheels.index import list_project

    drift: list[str] = []
    silent: list[str] = []
    for name in variants:
        index = f"{base.rstrip('/')}/{name}"
        try:
            _page, files = list_project(client, index, "torch")
        except IndexError_ as exc:
            silent.append(f"{index}: not read ({str(exc).rstrip('.')})")
            continue
        drift += [f"{index}: {d}" for d in artifact_drift(artifacts(files, since), m, name)]
    return drift, silent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--index", help="index URL (default https://pypi.org/simple)")
    g.add_argument("--snapshot", help="an index snapshot from benchmarks/pypi_via_pip.py")
    ap.add_argument("--since", default="2.0")
    ap.add_argument("--pytorch", nargs="?", const="", default=None, help="also list the PyTorch variant indexes (default base: the matrix's)")
    ap.add_argument("--variants", help="with --pytorch: the variant indexes to list (default: every variant the matrix names since --since)")
    ap.add_argument("--no-pypi", action="store_true", help="with --pytorch: only the variant indexes")
    ap.add_argument("--gpu-code", action="store_true", help="also read each build's GPU code (by ranges): checks the arch lists of every "
                    "platform (Linux x86_64, aarch64) against the matrix's")
    ap.add_argument("--matrix", action="append", default=[], help="a matrix file layered over the shipped one (a learned layer to check)")
    a = ap.parse_args(argv)
    if a.pytorch is not None:
        return _pytorch_only(a) if a.no_pypi else max(_pytorch_only(a), _pypi(a))
    return _pypi(a)


def _pytorch_only(a: argparse.Namespace) -> int:
    import time

    from packaging.version import Version

    from stackdoctor.wheels.index import IndexClient

    shipped = mx.load_matrix([Path(p) for p in a.matrix])
    base = a.pytorch or shipped.index_url("pytorch")
    names = a.variants.split(",") if a.variants else sorted({v.name for r in shipped.releases if r.version >= Version(a.since) for v in r.variants})
    client = IndexClient()
    t0 = time.monotonic()
    try:
        drift, silent = pytorch_drift(base, names, shipped, a.since, client)
    finally:
        client.close()
    print(f"{base}: {len(names)} variant index(es) listed in {time.monotonic() - t0:.1f} s; {len(silent)} did not answer, {len(drift)} artifact(s) the shipped matrix lacks")
    for line in silent + drift:
        print(f"  {line}")
    return 1 if drift else 0


def _pypi(a: argparse.Namespace) -> int:
    client = None
    if a.snapshot:
        src: L.Source = L.SnapshotSource(Path(a.snapshot))
    else:
        from stackdoctor.wheels.index import IndexClient

        client = IndexClient()
        src = L.HttpSource(a.index or mx.default_index_url("pypi"), client)
    try:
        res = L.learn(src, since=a.since, download=a.gpu_code)
        served = artifacts(src.files("torch")[1], a.since)  # the page read once (the client's page cache)
    finally:
        if client is not None:
            client.close()
    shipped, kept = mx.load_matrix([Path(p) for p in a.matrix]), hand_kept()
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
            lacking = artifact_drift(served, m)
            print(f"  per artifact: {len(lacking)} (release, variant, platform) the index serves and the matrix lacks")
            for line in lacking:
                print(f"    {line}")
            drift = len(missing) + len(differing) + len(lacking)
    if drift:
        print("\nrefresh: stackdoctor matrix learn --shipped (README: 'Refreshing the matrix on a release day')")
    return 1 if drift else 0


if __name__ == "__main__":
    raise SystemExit(main())
