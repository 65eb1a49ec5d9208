"""Time `stackdoctor check` against a bare `import torch` and `python -m torch.utils.collect_env`.

All run against the same torch environment (``--python``). The runs are *paired*: each round runs
every command once, one after the other, so a burst of load on a shared machine hits a whole
round rather than one command; the ratios are computed per round and their median reported,
beside the median time of each command. Goals (issue 14): ``check --json --no-kernels`` (torch
read from its files, never imported) <= 0.35x ``import torch``; issue 2: under 0.5 s when the target
has no torch, and more facts than collect_env; issue 23 tightens both: <= 0.15x and <= 0.30 s, and <= 0.30 s
without torch.

    python benchmarks/bench_check.py --torch-python ~/.cache/stackdoctor-tests/torch-venv/bin/python [-n 7]

Issue 33, measured with ``--fast-only`` on 2 shared cores (load average about 3; a bare ``import torch`` of the
2.13.0 CPU venv took 3.4-3.5 s at that load, 1.85 s on a quiet machine). The second run's figures (the first run
after a change parses the embedded matrix and the locale texts once and keeps them: ``stackdoctor/parsecache.py``):

- before (commit 9a82f57, 7 paired rounds against this branch): ``check --no-kernels`` 1.155 s = 0.34x ``import
  torch``; the target without torch 1.162 s = 2.69x ``stackdoctor --version`` (0.414 s);
- after (7 paired rounds, this script): ``check --no-kernels`` 0.750 s = **0.21x**; without torch 0.652 s = **1.97x**
  ``--version`` (0.334 s). The 2x goal is met (1.88x-2.31x over three runs at load 2-4); 0.15x is not.
- what went: pydantic (typer 0.29 validates every option through a ``TypeAdapter``; 0.14 s of imports), yaml and
  the parse of 200 kB of matrix and 190 kB of texts (0.1-0.3 s), ``importlib.metadata`` for the plug-in scan,
  ``install_flow`` and the resolver imported by every command, typer reading all seven commands' signatures, the
  secret scrub running 15 patterns over every string (0.2 s of a report's JSON), one child process (the Python-3
  check, now asked only when the worker gave no Python facts). Modules imported by ``check --no-kernels``: 357 -> 257.
- what is left, on this load: the interpreter and typer (0.1 s), the target worker (0.14-0.28 s wall, its
  ``packaging.tags`` import most of it), the linkage reader on torch's libraries, ``nvcc --version`` twice, all
  competing for 2 cores.
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


def count_leaves(x) -> int:
    if isinstance(x, dict):
        return sum(count_leaves(v) for v in x.values())
    if isinstance(x, list):
        return sum(count_leaves(v) for v in x) if x else 0
    return 0 if x is None or x == "" or x is False else 1


def paired(commands: dict[str, list[str]], n: int) -> tuple[dict[str, list[float]], dict[str, subprocess.CompletedProcess]]:
    """Each command ``n`` times, interleaved round by round (after one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    last: dict[str, subprocess.CompletedProcess] = {}
    for argv in commands.values():  # warm the page cache once
        timed(argv)
    for _ in range(n):
        for name, argv in commands.items():
            t, last[name] = timed(argv)
            times[name].append(t)
    return times, last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-python", default=os.path.expanduser("~/.cache/stackdoctor-tests/torch-venv/bin/python"))
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--json", dest="json_out", help="also write the raw times here")
    ap.add_argument("--fast-only", action="store_true", help="only the fast path's commands (import torch, check --no-kernels on both targets, --version): a frugal run on a shared machine")
    args = ap.parse_args()
    tp = args.torch_python
    sd = [sys.executable, "-m", "stackdoctor"]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", d], check=True)
        notorch = os.path.join(d, "bin", "python")
        commands = {
            "import torch": [tp, "-c", "import torch"],
            "check --no-kernels": [*sd, "check", "--json", "--no-kernels", "--python", tp],
            "collect_env": [tp, "-m", "torch.utils.collect_env"],
            "check --no-kernels --import-torch": [*sd, "check", "--json", "--no-kernels", "--import-torch", "--python", tp],
            "check (quick kernels)": [*sd, "check", "--json", "--python", tp],
            "check, target without torch": [*sd, "check", "--json", "--python", notorch],
            # issue 33: the fast path on a target without torch against stackdoctor's own start (<= 2x)
            "check --no-kernels, no torch": [*sd, "check", "--json", "--no-kernels", "--python", notorch],
            "stackdoctor --version": [*sd, "--version"],
        }
        if args.fast_only:
            for name in ("collect_env", "check --no-kernels --import-torch", "check (quick kernels)", "check, target without torch"):
                commands.pop(name)
        times, last = paired(commands, args.n)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    imp = times["import torch"]

    def ratio(name: str) -> float:
        return statistics.median(t / i for t, i in zip(times[name], imp, strict=True))

    width = max(len(name) for name in commands)
    print(f"{args.n} paired rounds, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the end")
    print(f"  {'command':<{width}}  median    median of per-round ratio to import torch")
    for name in commands:
        print(f"  {name:<{width}}  {med[name]:6.3f} s  {ratio(name):5.2f}x")
    print(f"check --no-kernels / import torch = {ratio('check --no-kernels'):.2f}x, {med['check --no-kernels']:.3f} s   (goal <= 0.15x and <= 0.30 s)")
    if "collect_env" in times:
        print(f"check --no-kernels / collect_env  = {statistics.median(t / c for t, c in zip(times['check --no-kernels'], times['collect_env'], strict=True)):.2f}x")
    if "check, target without torch" in times:
        print(f"check without torch              = {med['check, target without torch']:.3f} s    (goal <= 0.30 s)")
    nt = statistics.median(t / v for t, v in zip(times["check --no-kernels, no torch"], times["stackdoctor --version"], strict=True))
    print(f"check --no-kernels, no torch / --version = {nt:.2f}x, {med['check --no-kernels, no torch']:.3f} s   (goal <= 2x, issue 33)")
    facts = json.loads(last["check --no-kernels"].stdout)["facts"]
    collect = last["collect_env"].stdout if "collect_env" in last else ""
    collect_lines = [ln for ln in collect.splitlines() if ":" in ln and not ln.rstrip().endswith(": N/A") and not ln.rstrip().endswith("Could not collect")]
    print(f"facts: check --no-kernels {count_leaves(facts)} non-empty values; collect_env {len(collect_lines)} 'key: value' lines")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"n": args.n, "times": times}, fh, indent=1)


if __name__ == "__main__":
    main()
