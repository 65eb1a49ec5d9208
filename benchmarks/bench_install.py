"""Time ``stackdoctor install --dry-run --offline --json`` end to end (goal: median under 0.5 s).

Runs the console entry point as a user would (a new process each time: start-up, probes,
matrix, resolver, JSON), median of N runs after one warm-up, and checks the output is a
``stackdoctor.plan/1`` document. ``--python`` picks the target (a target with real torch
costs its ``import torch`` in the target probe; the goal is for a target without torch).

    python benchmarks/bench_install.py [-n 7] [--python PATH] [--torch 2.13.0 --variant cu130]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

GOAL_S = 0.5


def timed(argv: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True)
    return time.perf_counter() - start, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--python", help="target interpreter (default: this one)")
    ap.add_argument("--torch")
    ap.add_argument("--variant")
    args = ap.parse_args()
    argv = [sys.executable, "-m", "stackdoctor", "install", "--dry-run", "--offline", "--json"]
    for flag, value in (("--python", args.python), ("--torch", args.torch), ("--variant", args.variant)):
        if value:
            argv += [flag, value]
    timed(argv)  # warm the page cache
    times = []
    last = None
    for _ in range(args.n):
        t, last = timed(argv)
        times.append(t)
    assert last is not None
    try:
        plan = json.loads(last.stdout)
        ok = plan.get("schema") == "stackdoctor.plan/1"
    except ValueError:
        plan, ok = {}, False
    med = statistics.median(times)
    print(f"command: {' '.join(argv[1:])}")
    print(f"runs: {args.n}  median: {med:.3f} s  min: {min(times):.3f} s  max: {max(times):.3f} s  exit: {last.returncode}")
    print(f"plan: torch {plan.get('torch_version')} ({plan.get('variant')})  valid JSON plan: {ok}")
    print(f"goal < {GOAL_S} s: {'met' if med < GOAL_S else 'NOT met'}")
    if not ok:
        print(last.stderr[-2000:], file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
