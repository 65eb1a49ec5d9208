"""allreduce busbw over a veth 'thunderbolt0' link vs iperf3 TCP throughput on the same link.

Two network namespaces joined by a veth pair named ``thunderbolt0`` (169.254.77.1/.2, as in
tests/test_netns.py). First iperf3 (one TCP stream, A <- B) measures what TCP carries over
that link; then ``stackdoctor kernels allreduce`` runs one gloo rank in each namespace
(``--iface thunderbolt0``) and we take the best busbw of the sweep. With 2 ranks busbw =
algbw x 2(n-1)/n = algbw: every rank sends and receives S bytes per allreduce, so busbw is
directly comparable to one direction of the link. Goal: busbw >= 0.7 x iperf3.

Both directions carry S bytes at the same time during an allreduce, so we also measure
iperf3 ``--bidir`` (one stream each way at once) and report its per-direction rate: on a
veth both directions share the same CPUs, on a real full-duplex cable they do not; the
one-way ratio is the headline, the bidirectional one tells how much of the gap is the
machine rather than gloo.

Needs root, iproute2 and iperf3 (Debian: ``apt-get install -y iperf3``), and a torch venv::

    sudo python3 benchmarks/bench_allreduce.py --python /root/.cache/sd/torchvenv/bin/python

Prints one JSON line with both numbers and the ratio. Namespaces are always removed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid

ADDR_A, ADDR_B = "169.254.77.1", "169.254.77.2"


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


def make_link() -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:8]
    a, b, va, vb = f"sdbench-{tag}-a", f"sdbench-{tag}-b", f"sdb{tag[:6]}a", f"sdb{tag[:6]}b"
    ip("netns", "add", a)
    ip("netns", "add", b)
    ip("link", "add", va, "type", "veth", "peer", "name", vb)
    ip("link", "set", va, "netns", a)
    ip("link", "set", vb, "netns", b)
    for ns, dev, addr in ((a, va, ADDR_A), (b, vb, ADDR_B)):
        ip("-n", ns, "link", "set", dev, "name", "thunderbolt0")
        ip("-n", ns, "addr", "add", f"{addr}/16", "dev", "thunderbolt0")
        ip("-n", ns, "link", "set", "thunderbolt0", "up")
        ip("-n", ns, "link", "set", "lo", "up")
    return a, b, va


def iperf3_gbs(a: str, b: str, seconds: int, bidir: bool = False) -> float:
    """GB/s per direction: one TCP stream B -> A, or (``bidir``) one each way at once, averaged."""
    server = subprocess.Popen(["ip", "netns", "exec", a, "iperf3", "-s", "-1", "-B", ADDR_A], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        argv = ["ip", "netns", "exec", b, "iperf3", "-c", ADDR_A, "-t", str(seconds), "-J"] + (["--bidir"] if bidir else [])
        out = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 30)
        end = json.loads(out.stdout)["end"]
        if bidir:
            return (float(end["sum_received"]["bits_per_second"]) + float(end["sum_received_bidir_reverse"]["bits_per_second"])) / 2 / 8 / 1e9
        return float(end["sum_received"]["bits_per_second"]) / 8 / 1e9
    finally:
        server.kill()
        server.wait()


def allreduce_gbs(a: str, b: str, python: str, max_bytes: str, iters: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "STACKDOCTOR_TEST_HOOK")}
    procs = []
    for rank, ns in enumerate((a, b)):
        argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "stackdoctor", "kernels", "allreduce", "--rank", str(rank),
                "--world-size", "2", "--master-addr", ADDR_A, "--master-port", "29540", "--iface", "thunderbolt0",
                "--python", python, "--min-bytes", "1M", "--max-bytes", max_bytes, "--iters", str(iters), "--timeout", "120", "--json"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env))
    docs = [json.loads(p.communicate(timeout=900)[0]) for p in procs]
    ar = docs[0]["allreduce"]
    if ar.get("status") != "ok":
        raise SystemExit(f"allreduce did not complete: {ar.get('error')}")
    best = max(ar["rows"], key=lambda r: r["ip"]["busbw"])
    return {"busbw_gbs": ar["max_busbw_gbs"], "at_bytes": best["bytes"], "wrong": ar.get("wrong"),
            "rows": [(r["bytes"], round(r["oop"]["busbw"], 3), round(r["ip"]["busbw"], 3)) for r in ar["rows"]]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=os.environ.get("STACKDOCTOR_TEST_TORCH_PYTHON", sys.executable))
    ap.add_argument("--max-bytes", default="64M")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--iperf-seconds", type=int, default=5)
    args = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("ip"):
        print("needs root and iproute2", file=sys.stderr)
        return 2
    if not shutil.which("iperf3"):
        print("iperf3 is missing: apt-get install -y iperf3", file=sys.stderr)
        return 2
    a, b, va = make_link()
    try:
        tcp = iperf3_gbs(a, b, args.iperf_seconds)
        tcp_bidir = iperf3_gbs(a, b, args.iperf_seconds, bidir=True)
        ar = allreduce_gbs(a, b, args.python, args.max_bytes, args.iters)
    finally:
        ip("netns", "del", a, check=False)
        ip("netns", "del", b, check=False)
        ip("link", "del", va, check=False)
    out = {"iperf3_tcp_gbs": round(tcp, 3), "allreduce_busbw_gbs": round(ar["busbw_gbs"], 3), "at_bytes": ar["at_bytes"],
           "ratio": round(ar["busbw_gbs"] / tcp, 3), "iperf3_bidir_per_direction_gbs": round(tcp_bidir, 3),
           "ratio_vs_bidir": round(ar["busbw_gbs"] / tcp_bidir, 3), "goal": 0.7, "wrong": ar["wrong"], "sweep_bytes_oop_ip_busbw": ar["rows"],
           "cpus": os.cpu_count()}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
