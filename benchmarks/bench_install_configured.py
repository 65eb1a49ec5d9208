"""`stackdoctor install --yes` (no flags) vs `pip install torch==<same version>` on this machine's own configuration.

Goal (issue 13): in a fresh venv, stackdoctor installs torch in <= 1.2x the time plain pip takes for the same
version, using the user's pip configuration (here: a find-links folder with torch 2.13.0+cpu, PyPI-style
file:// indexes, a constraint file; download.pytorch.org unreachable).

Each round makes a fresh venv and times one command end to end (wall clock, the machine's environment
unchanged). Rounds alternate A B B A so a warmer pip cache favours neither side. Also timed: the same with
--offline, a re-run that is already satisfied (pinned: no index is asked; unpinned: the sources are asked
first), and --dry-run.

    python benchmarks/bench_install_configured.py [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def venv(root: Path, name: str) -> Path:
    d = root / name
    subprocess.run([sys.executable, "-m", "venv", str(d)], check=True)
    return d / "bin" / "python"


def timed(argv: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return time.perf_counter() - t, p


def torch_version(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('torch'))"
    return subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2, help="A B B A rounds (each installs torch twice per side)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    sd = [sys.executable, "-m", "stackdoctor", "install"]
    results: dict[str, list[float]] = {"pip": [], "stackdoctor": [], "stackdoctor --offline": [], "satisfied (pinned)": [], "satisfied (unpinned)": [], "dry-run": []}
    with tempfile.TemporaryDirectory(prefix="bench-install-") as tmp:
        root = Path(tmp)
        # what stackdoctor plans here decides the version plain pip is asked for
        probe = venv(root, "probe")
        t, p = timed([*sd, "--python", str(probe), "--dry-run", "--json"], REPO)
        results["dry-run"].append(t)
        plan = json.loads(p.stdout)
        version = plan["torch_version"]
        print(f"plan: torch {version} ({plan['variant']}), command {' '.join(plan['command'][2:])}; dry run {t:.2f} s", flush=True)
        order = ["pip", "stackdoctor", "stackdoctor", "pip"] * args.rounds
        for i, side in enumerate(order):
            py = venv(root, f"v{i}")
            if side == "pip":
                t, p = timed([str(py), "-m", "pip", "install", f"torch=={version}"], root)
            else:
                t, p = timed([*sd, "--python", str(py), "--yes"], REPO)
            ok = p.returncode == 0
            got = torch_version(py)
            print(f"{side:12s} {t:7.1f} s  rc={p.returncode} torch={got}", flush=True)
            if not ok:
                print(p.stderr[-3000:], file=sys.stderr)
                return 1
            results[side].append(t)
            if side == "stackdoctor":
                t2, p2 = timed([*sd, "--python", str(py), "--yes", "--torch", version], REPO)
                results["satisfied (pinned)"].append(t2)
                t3, p3 = timed([*sd, "--python", str(py), "--yes"], REPO)
                results["satisfied (unpinned)"].append(t3)
                assert "already satisfied" in p2.stderr and "already satisfied" in p3.stderr, (p2.stderr, p3.stderr)
        py = venv(root, "offline")
        t, p = timed([*sd, "--python", str(py), "--offline", "--yes"], REPO)
        print(f"{'--offline':12s} {t:7.1f} s  rc={p.returncode} torch={torch_version(py)}", flush=True)
        results["stackdoctor --offline"].append(t)
    med = {k: statistics.median(v) for k, v in results.items() if v}
    print()
    for k, v in med.items():
        print(f"{k:24s} median {v:7.2f} s  ({', '.join(f'{x:.2f}' for x in results[k])})")
    ratio = med["stackdoctor"] / med["pip"]
    print(f"\nratio stackdoctor / pip: {ratio:.3f} (goal <= 1.2)")
    if args.json:
        Path(args.json).write_text(json.dumps({"results": results, "median": med, "ratio": ratio, "load": os.getloadavg()}, indent=2))
    return 0 if ratio <= 1.2 else 1


if __name__ == "__main__":
    sys.exit(main())
