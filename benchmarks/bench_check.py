"""Time `stackdoctor check` against a bare `import torch` and `python -m torch.utils.collect_env`.

All run against the same torch environment (``--python``). The runs are *paired*: each round runs
every command once, one after the other, so a burst of load on a shared machine hits a whole
round rather than one command; the ratios are computed per round and their median reported,
beside the median time of each command. Goals (issue 14): ``check --json --no-kernels`` (torch
read from its files, never imported) <= 0.35x ``import torch``; issue 2: under 0.5 s when the target
has no torch, and more facts than collect_env; issue 23 tightens both: <= 0.15x and <= 0.30 s, and <= 0.30 s
without torch.

    python benchmarks/bench_check.py --torch-python ~/.cache/stackdoctor-tests/torch-venv/bin/python [-n 7]

Issue 33: ``--fast-only`` runs only the fast path's commands; ``--baseline-src DIR`` (a checkout of an earlier
commit, e.g. ``git archive <commit> stackdoctor compat_matrix | tar -x -C DIR`` and, where this stackdoctor is an
editable install, ``ln -s ../compat_matrix DIR/stackdoctor/compat_matrix``: without it the editable finder serves
the checkout's newer matrix as ``stackdoctor.compat_matrix`` and the older code refuses it, exit 2 in milliseconds)
adds that code's ``check --no-kernels`` on both targets to the same rounds (``PYTHONPATH=DIR``), so a before/after is
paired too; a command that did not exit 0 or 1 is said, its times are not a check's. Rounds alternate their order
(A B, then B A), so neither side always runs first after the other's page-cache and CPU-frequency effects. Every
stackdoctor run writes and reads its bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped for them: an installed
stackdoctor has its ``.pyc`` from pip; without them each run compiles ~100 modules, and that is what would be
measured). The load average is printed at the start and the end: on a shared machine say it with every figure.
Figures and how they were measured: README, "How fast".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

CPU: dict[str, list[float]] = {}  # command -> CPU seconds (user + system) of it and the children it waited for


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(argv: list[str], env: dict[str, str] | None = None, name: str | None = None) -> tuple[float, subprocess.CompletedProcess]:
    cpu0, start = _cpu(), time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if name is not None:
        CPU.setdefault(name, []).append(_cpu() - cpu0)
    return wall, proc


def count_leaves(x) -> int:
    if isinstance(x, dict):
        return sum(count_leaves(v) for v in x.values())
    if isinstance(x, list):
        return sum(count_leaves(v) for v in x) if x else 0
    return 0 if x is None or x == "" or x is False else 1


def paired(commands: dict[str, list[str]], n: int, envs: dict[str, dict[str, str]] | None = None) -> tuple[dict[str, list[float]], dict[str, subprocess.CompletedProcess]]:
    """Each command ``n`` times, interleaved round by round (after one warm-up round), every other round in reverse
    order (A B B A ...). ``envs``: a command's environment, where it has its own."""
    envs = envs or {}
    times: dict[str, list[float]] = {name: [] for name in commands}
    last: dict[str, subprocess.CompletedProcess] = {}
    for name, argv in commands.items():  # warm the page cache and write the bytecode once
        timed(argv, envs.get(name))
    for r in range(n):
        order = list(commands.items()) if r % 2 == 0 else list(reversed(commands.items()))
        for name, argv in order:
            t, last[name] = timed(argv, envs.get(name), name)
            times[name].append(t)
    return times, last


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--torch-python", default=os.path.expanduser("~/.cache/stackdoctor-tests/torch-venv/bin/python"))
    ap.add_argument("-n", type=int, default=7)
    ap.add_argument("--json", dest="json_out", help="also write the raw times here")
    ap.add_argument("--fast-only", action="store_true", help="only the fast path's commands (import torch, check --no-kernels on both targets, --version): a frugal run on a shared machine")
    ap.add_argument("--baseline-src", help="a folder holding an earlier commit's stackdoctor/: its check --no-kernels runs in the same rounds")
    args = ap.parse_args()
    tp = args.torch_python
    sd = [sys.executable, "-m", "stackdoctor"]
    own = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", d], check=True)
        notorch = os.path.join(d, "bin", "python")
        # every command runs from this empty folder: `python -m stackdoctor` puts the working folder first on sys.path,
        # so run from a checkout it would import that checkout's stackdoctor, whatever --baseline-src's PYTHONPATH says
        os.chdir(d)
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
        envs = {name: own for name, argv in commands.items() if argv[: len(sd)] == sd}
        if args.baseline_src:
            base_env = {**own, "PYTHONPATH": os.path.abspath(args.baseline_src)}
            for name in ("check --no-kernels", "check --no-kernels, no torch"):
                commands[f"{name} (baseline)"] = commands[name]
                envs[f"{name} (baseline)"] = base_env
        times, last = paired(commands, args.n, envs)
    for name, proc in last.items():  # a refused baseline (exit 2) would otherwise read as a fast one
        if proc.returncode not in (0, 1):
            print(f"warning: {name} exited {proc.returncode}: {(proc.stderr or proc.stdout).strip()[:200]}")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    imp = times["import torch"]

    def ratio(name: str) -> float:
        return statistics.median(t / i for t, i in zip(times[name], imp, strict=True))

    width = max(len(name) for name in commands)
    print(f"{args.n} paired rounds, {os.cpu_count()} CPUs, load average {load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print(f"  {'command':<{width}}  median    median of per-round ratio to import torch    CPU (user+sys, median)")
    for name in commands:
        print(f"  {name:<{width}}  {med[name]:6.3f} s  {ratio(name):5.2f}x    {statistics.median(CPU[name]):6.3f} s")
    print(f"check --no-kernels / import torch = {ratio('check --no-kernels'):.2f}x, {med['check --no-kernels']:.3f} s   (goal <= 0.15x and <= 0.30 s)")
    if "collect_env" in times:
        print(f"check --no-kernels / collect_env  = {statistics.median(t / c for t, c in zip(times['check --no-kernels'], times['collect_env'], strict=True)):.2f}x")
    if "check, target without torch" in times:
        print(f"check without torch              = {med['check, target without torch']:.3f} s    (goal <= 0.30 s)")
    for suffix in ("", " (baseline)") if args.baseline_src else ("",):
        name = f"check --no-kernels, no torch{suffix}"
        nt = statistics.median(t / v for t, v in zip(times[name], times["stackdoctor --version"], strict=True))
        print(f"{name} / --version = {nt:.2f}x, {med[name]:.3f} s   (goal <= 2x, issue 33)")
    if args.baseline_src:
        print(f"check --no-kernels (baseline) / import torch = {ratio('check --no-kernels (baseline)'):.2f}x, {med['check --no-kernels (baseline)']:.3f} s")
    facts = json.loads(last["check --no-kernels"].stdout)["facts"]
    collect = last["collect_env"].stdout if "collect_env" in last else ""
    collect_lines = [ln for ln in collect.splitlines() if ":" in ln and not ln.rstrip().endswith(": N/A") and not ln.rstrip().endswith("Could not collect")]
    print(f"facts: check --no-kernels {count_leaves(facts)} non-empty values; collect_env {len(collect_lines)} 'key: value' lines")
    if args.json_out:
        with open(args.json_out, "w") as fh:
            json.dump({"n": args.n, "times": times, "cpu": CPU, "load": [load_start, os.getloadavg()]}, fh, indent=1)


if __name__ == "__main__":
    main()
