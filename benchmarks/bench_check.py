"""Time `stackdoctor check` against `python -m torch.utils.collect_env` and a bare `import torch`.

All three run against the same torch environment (``--python``), median of N runs,
side by side. Goals (issue 2): check within import-torch + 0.3 s; under 0.5 s when the
target has no torch; and more facts than collect_env.

    python benchmarks/bench_check.py --torch-python ~/.cache/stackdoctor-tests/torch-venv/bin/python [-n 7]
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


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    return time.perf_counter() - start, proc


def median_of(argv: list[str], n: int, env: dict[str, str] | None = None) -> tuple[float, subprocess.CompletedProcess]:
    times, last = [], None
    timed(argv, env)  # warm the page cache once
    for _ in range(n):
        t, last = timed(argv, env)
        times.append(t)
    return statistics.median(times), last  # type: ignore[return-value]


def count_leaves(x) -> int:
    if isinstance(x, dict):
        return sum(count_leaves(v) for v in x.values())
    if isinstance(x, list):
        return sum(count_leaves(v) for v in x) if x else 0
    return 0 if x is None or x == "" or x is False else 1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-python", default=os.path.expanduser("~/.cache/stackdoctor-tests/torch-venv/bin/python"))
    ap.add_argument("-n", type=int, default=7)
    args = ap.parse_args()
    tp = args.torch_python
    sd = [sys.executable, "-m", "stackdoctor"]
    rows = []
    t_import, _ = median_of([tp, "-c", "import torch"], args.n)
    rows.append(("python -c 'import torch'", t_import))
    t_collect, collect = median_of([tp, "-m", "torch.utils.collect_env"], args.n)
    rows.append(("python -m torch.utils.collect_env", t_collect))
    t_check, check = median_of([*sd, "check", "--json", "--no-kernels", "--python", tp], args.n)
    rows.append(("stackdoctor check --no-kernels", t_check))
    t_kern, _ = median_of([*sd, "check", "--json", "--python", tp], max(3, args.n // 2))
    rows.append(("stackdoctor check (quick kernels)", t_kern))
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", d], check=True)
        t_notorch, _ = median_of([*sd, "check", "--json", "--python", os.path.join(d, "bin", "python")], args.n)
    rows.append(("stackdoctor check, target without torch", t_notorch))
    width = max(len(r[0]) for r in rows)
    print(f"median of {args.n} runs, {os.cpu_count()} CPUs")
    for name, t in rows:
        print(f"  {name:<{width}}  {t:6.3f} s  ({t / t_import:4.2f}x import torch)")
    print(f"check - import torch     = {t_check - t_import:+.3f} s   (goal <= +0.300 s)")
    print(f"check without torch      = {t_notorch:.3f} s    (goal < 0.5 s)")
    print(f"collect_env - import     = {t_collect - t_import:+.3f} s")
    facts = json.loads(check.stdout)["facts"]
    collect_lines = [ln for ln in collect.stdout.splitlines() if ":" in ln and not ln.rstrip().endswith(": N/A") and not ln.rstrip().endswith("Could not collect")]
    print(f"facts: stackdoctor {count_leaves(facts)} non-empty values; collect_env {len(collect_lines)} 'key: value' lines")


if __name__ == "__main__":
    main()
