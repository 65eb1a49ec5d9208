"""Time the install backup on a real torch: ``sd_backup.py save`` (hard-link the family's files aside), removing the
backup folder again (what every install pays, success included), and ``sd_backup.py restore`` (put back and sha256-check
every file: what a failed install pays). Goal: save + removal under 2 s for torch 2.13.0+cpu, a few percent of the
~40 s its pip install takes here.

``--restore`` removes and puts back the target's torch files: run it only on a venv of your own (copy one:
``python -m venv /tmp/v && /tmp/v/bin/pip install torch==2.13.0+cpu``), never on a shared one.

    python benchmarks/bench_backup.py --python /tmp/v/bin/python [-n 5] [--restore]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

from stackdoctor.install import backup as install_backup
from stackdoctor.install.result import fmt as _fmt
from stackdoctor.install.verify import verify
from stackdoctor.system import System
from stackdoctor.wheels import leftovers

GOAL_S = 2.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", required=True)
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--restore", action="store_true", help="also time a restore (changes the target's files: your own venv only)")
    args = ap.parse_args()
    system = System.from_env()
    snap = install_backup.snapshot(system, args.python)
    prev = snap.torch_family()
    if not prev:
        print(f"no torch family in {args.python}", file=sys.stderr)
        return 2
    saves, removals = [], []
    b = None
    for i in range(args.n):
        d = os.path.join(snap.prefix or tempfile.gettempdir(), f".stackdoctor-bench-backup-{os.getpid()}-{i}")
        b = install_backup.save_backup(system, args.python, list(prev), d)
        if b.error:
            print(f"backup incomplete: {b.error}", file=sys.stderr)
            shutil.rmtree(d, ignore_errors=True)
            return 1
        if args.restore and i == args.n - 1:
            r = install_backup.restore_backup(system, args.python, b.dir, leftovers.TORCH_FAMILY)
            v = verify(system, args.python)
            print(f"restore: {r.seconds:.2f} s, {r.linked} files linked back, {r.copied} copied, mismatches {len(r.mismatch)}, "
                  f"missing {len(r.missing)}; torch {v.version} imports: {v.imported}")
        saves.append(b.seconds)
        start = time.perf_counter()
        shutil.rmtree(d, ignore_errors=True)
        removals.append(time.perf_counter() - start)
    assert b is not None
    total = statistics.median(saves) + statistics.median(removals)
    print(f"{_fmt(prev)} in {snap.prefix}: {b.linked} files, {b.linked_bytes / 1e6:.0f} MB linked, {b.copied} copied")
    print(f"save: median {statistics.median(saves):.2f} s (min {min(saves):.2f}, max {max(saves):.2f}); "
          f"removal: median {statistics.median(removals):.2f} s; together {total:.2f} s (goal < {GOAL_S:g} s)")
    return 0 if total < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
