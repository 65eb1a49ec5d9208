"""Read PyPI's torch / torchvision / torchaudio file lists and core metadata through pip (no wheel is downloaded).

    python benchmarks/pypi_via_pip.py OUT.json [--since 2.0]

For machines where only pip reaches PyPI (a proxy or a mirror configured for pip alone): pip's own finder
lists every file of a project page (``pip install --dry-run -vv`` logs each link), and a dry run with
``--report`` reads one wheel's PEP 658 core metadata (the ``.whl.metadata`` file; pip falls back to the wheel
only when an index has no such file, which PyPI has for every release since 2.0) and its sha256. One dry run
per (release, platform family) is enough: the wheels of one release and platform share their metadata.

The result is what ``stackdoctor matrix learn --snapshot OUT.json`` learns from (the same code that reads an
index over HTTP); ``benchmarks/matrix_drift.py`` compares it with the shipped matrix.
pip runs with ``PIP_CONFIG_FILE=/dev/null`` so a local cap (constraints, find-links) does not hide releases.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.utils import parse_wheel_filename
from packaging.version import Version

LINK_RE = re.compile(r"(?:Found link|Skipping link: .*?:) (https://\S+\.whl) \(from (https://\S+?)\)(?: \(requires-python:([^)]*)\))?")
PLATFORMS = {  # family -> the pip --platform to ask with
    "linux_x86_64": "manylinux_2_28_x86_64",
    "linux_aarch64": "manylinux_2_28_aarch64",
    "win_amd64": "win_amd64",
    "macos_arm64": "macosx_14_0_arm64",
    "macos_x86_64": "macosx_10_15_x86_64",
}
OLD_LINUX = {"linux_x86_64": "manylinux2014_x86_64", "linux_aarch64": "manylinux2014_aarch64"}


def _pip(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for k in ("PIP_FIND_LINKS", "PIP_CONSTRAINT", "PIP_EXTRA_INDEX_URL", "PIP_INDEX_URL"):
        env.pop(k, None)
    cert = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    return subprocess.run([sys.executable, "-m", "pip", *args, "--cert", cert], capture_output=True, text=True, timeout=timeout, env=env)


def family(tag: str) -> str | None:
    if "macosx" in tag:
        return "macos_arm64" if tag.endswith("arm64") else "macos_x86_64" if tag.endswith("x86_64") else None
    if tag.startswith(("manylinux", "linux")):
        return "linux_x86_64" if tag.endswith("x86_64") else "linux_aarch64" if tag.endswith("aarch64") else None
    if tag == "win_amd64":
        return tag
    return None


def list_files(project: str) -> tuple[str, list[dict[str, str | None]]]:
    with tempfile.TemporaryDirectory() as tmp:
        p = _pip(["install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:", "--target", tmp, "-vv", f"{project}==0.0.0.0.1"])
    page, seen, out = "", set(), []
    for m in LINK_RE.finditer(p.stdout + p.stderr):
        url, page = m.group(1), m.group(2)
        if url in seen:
            continue
        seen.add(url)
        out.append({"filename": url.rsplit("/", 1)[-1].replace("%2B", "+"), "url": url, "requires_python": (m.group(3) or None)})
    return page, out


def read_metadata(project: str, version: str, python: str, platform: str) -> dict[str, object] | None:
    with tempfile.TemporaryDirectory() as tmp:
        rep = Path(tmp) / "report.json"
        p = _pip([
            "install", "--dry-run", "--no-deps", "--ignore-installed", "--only-binary=:all:", "--target", str(Path(tmp) / "t"),
            "--platform", platform, "--python-version", python, "--implementation", "cp", "--report", str(rep),
            f"{project}=={version}",
        ])
        if p.returncode != 0 or not rep.exists():
            return None
        item = json.loads(rep.read_text())["install"][0]
    info = item["download_info"]
    meta = item["metadata"]
    return {
        "filename": info["url"].rsplit("/", 1)[-1].replace("%2B", "+"),
        "url": info["url"],
        "sha256": info.get("archive_info", {}).get("hashes", {}).get("sha256"),
        "requires_python": meta.get("requires_python"),
        "requires_dist": meta.get("requires_dist", []),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--since", default="2.0")
    ap.add_argument("--projects", default="torch,torchvision,torchaudio")
    a = ap.parse_args()
    out_path = Path(a.out)
    snap: dict[str, object] = json.loads(out_path.read_text()) if out_path.exists() else {}
    snap.setdefault("schema", "stackdoctor.wheels.index-snapshot/1")
    snap["read"] = dt.date.today().isoformat()
    snap["via"] = "pip (PIP_CONFIG_FILE=/dev/null: https://pypi.org/simple)"
    projects: dict[str, dict[str, object]] = snap.setdefault("projects", {})  # type: ignore[assignment]
    for project in a.projects.split(","):
        page, files = list_files(project)
        if not files:
            print(f"{project}: no file links in pip's log", file=sys.stderr)
            continue
        entry = projects.setdefault(project, {"metadata": {}})
        entry["page"] = page
        entry["files"] = files
        metadata: dict[str, object] = entry.setdefault("metadata", {})  # type: ignore[assignment]
        floor = Version("0.15") if project == "torchvision" else Version(a.since)
        groups: dict[tuple[str, str], list[str]] = {}
        for f in files:
            try:
                _n, ver, _b, tags = parse_wheel_filename(str(f["filename"]))
            except Exception:
                continue
            if ver.is_prerelease or ver.is_devrelease or ver.local or ver < floor:
                continue
            for t in tags:
                fam = family(t.platform) if t.platform != "any" else "any"
                if not fam or (project != "torch" and fam not in ("linux_x86_64", "any")):
                    continue  # a companion's pairing is the same on every platform: one metadata per release
                py = t.interpreter[2] + "." + t.interpreter[3:] if t.interpreter.startswith("cp") else "3.12"
                groups.setdefault((str(ver), fam), []).append(py + ("t" if t.abi.endswith("t") else ""))
        for (ver, fam), pys in sorted(groups.items()):
            key = f"{ver}|{fam}"
            if key in metadata:
                continue
            plain = sorted({p for p in pys if not p.endswith("t")}, key=lambda s: Version(s))
            py = plain[len(plain) // 2] if plain else pys[0].rstrip("t")
            plats = [PLATFORMS.get(fam, "manylinux_2_28_x86_64")] if fam != "any" else ["manylinux_2_28_x86_64"]
            if fam in OLD_LINUX:
                plats.append(OLD_LINUX[fam])
            for plat in plats:
                got = read_metadata(project, ver, py, plat)
                if got:
                    metadata[key] = got
                    print(f"{project} {ver} {fam}: {got['filename']}", file=sys.stderr)
                    break
            else:
                print(f"{project} {ver} {fam}: no metadata read", file=sys.stderr)
            out_path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    out_path.write_text(json.dumps(snap, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
