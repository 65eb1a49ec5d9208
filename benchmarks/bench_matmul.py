"""matmul GFLOP/s measured by stackdoctor vs a bare torch timing loop (same interpreter, same sizes).

The bare loop is what anyone would write: warm up, then time ``a @ b`` for a fixed number of
calls. stackdoctor runs its worker (sd_kernels.py) through ``run_kernels``, which adds the
correctness check and the adaptive timing loop around the same product. Overhead =
1 - stackdoctor / bare on GFLOP/s (goal: under 10%). Runs alternate, ``--rounds`` times, and
the medians (and the bests) are compared, since this machine is shared.

    python3 benchmarks/bench_matmul.py --python /root/.cache/sd/torchvenv/bin/python

Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from stackdoctor.system import System
from stackdoctor.verify.runner import run_kernels

BARE = r"""
import json, sys, time, torch
n, iters = int(sys.argv[1]), int(sys.argv[2])
a = torch.randn(n, n); b = torch.randn(n, n)
for _ in range(2): a @ b
t = time.perf_counter()
for _ in range(iters): a @ b
dt = (time.perf_counter() - t) / iters
print(json.dumps({"gflops": 2 * n ** 3 / dt / 1e9}))
"""


def bare(python: str, n: int, iters: int) -> float:
    out = subprocess.run([python, "-I", "-c", BARE, str(n), str(iters)], capture_output=True, text=True, timeout=600)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["gflops"])


def stackdoctor(python: str, n: int, min_time: float) -> float:
    env = {k: v for k, v in os.environ.items() if k != "STACKDOCTOR_TEST_HOOK"}
    kf = run_kernels(System(env=env), python, kernels=["matmul"], devices=["cpu"], sizes=[n], min_time=min_time, timeout_s=600)
    r = next(r for r in kf.results if r.dtype == "fp32")
    assert r.ok, r.error
    return float(r.tflops) * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=os.environ.get("STACKDOCTOR_TEST_TORCH_PYTHON", sys.executable))
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    b, s = [], []
    for _ in range(args.rounds):
        b.append(bare(args.python, args.n, args.iters))
        s.append(stackdoctor(args.python, args.n, min_time=0.5))
    mb, ms = statistics.median(b), statistics.median(s)
    print(json.dumps({"n": args.n, "bare_gflops": round(mb, 2), "stackdoctor_gflops": round(ms, 2),
                      "overhead": round(1 - ms / mb, 4), "overhead_best_of": round(1 - max(s) / max(b), 4), "goal": 0.10, "bare_runs": [round(x, 1) for x in b],
                      "stackdoctor_runs": [round(x, 1) for x in s], "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
