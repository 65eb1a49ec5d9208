"""Two "hosts": network namespaces joined by a veth pair whose ends are named ``thunderbolt0``
(the Linux thunderbolt-net name), with link-local 169.254/16 addresses that exist only inside
the namespaces, as a Thunderbolt Bridge assigns. One rank per namespace, bound with
``--iface thunderbolt0``; and the case where the peer never joins.

Needs root and ``ip netns``; skipped otherwise. Names are unique per run and always removed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

import pytest

pytestmark = [pytest.mark.netns, pytest.mark.headline("netns")]

ADDR_A = "169.254.77.1"
ADDR_B = "169.254.77.2"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20, check=check)


@pytest.fixture
def tb_link():
    """(ns_a, ns_b): a veth 'thunderbolt0' in each, 169.254.77.1/16 and .2/16, up."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    tag = uuid.uuid4().hex[:8]
    ns_a, ns_b = f"sdtb-{tag}-a", f"sdtb-{tag}-b"
    va, vb = f"sdv{tag[:6]}a", f"sdv{tag[:6]}b"
    made: list[str] = []
    try:
        for ns in (ns_a, ns_b):
            r = _ip("netns", "add", ns, check=False)
            if r.returncode != 0:
                pytest.skip(f"ip netns add failed: {r.stderr.strip()}")
            made.append(ns)
        _ip("link", "add", va, "type", "veth", "peer", "name", vb)
        _ip("link", "set", va, "netns", ns_a)
        _ip("link", "set", vb, "netns", ns_b)
        for ns, dev, addr in ((ns_a, va, ADDR_A), (ns_b, vb, ADDR_B)):
            _ip("-n", ns, "link", "set", dev, "name", "thunderbolt0")
            _ip("-n", ns, "addr", "add", f"{addr}/16", "dev", "thunderbolt0")
            _ip("-n", ns, "link", "set", "thunderbolt0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield ns_a, ns_b
    finally:
        for ns in made:
            _ip("netns", "del", ns, check=False)  # removes the veth pair with it
        _ip("link", "del", va, check=False)


def _rank(ns: str, torch_python: str, rank: int, port: int, timeout: float, max_bytes: str = "64K", iface: str | None = "thunderbolt0",
          over: bool = False, sysroot: str | None = None) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("STACKDOCTOR_TEST_HOOK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    if sysroot:
        env["STACKDOCTOR_SYSROOT"] = sysroot
    pick = ["--iface", iface] if iface else []
    pick += ["--over", "thunderbolt"] if over else []
    argv = ["ip", "netns", "exec", ns, sys.executable, "-m", "stackdoctor", "kernels", "allreduce",
            "--rank", str(rank), "--world-size", "2", "--master-addr", ADDR_A, "--master-port", str(port),
            *pick, "--python", torch_python, "--max-bytes", max_bytes, "--iters", "5",
            "--timeout", str(timeout), "--json"]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_two_hosts_over_thunderbolt0(tb_link, torch_python):
    ns_a, ns_b = tb_link
    # the link-local addresses exist only inside the namespaces
    assert ADDR_A not in _ip("-4", "addr").stdout
    assert ADDR_A in _ip("-n", ns_a, "-4", "addr", "show", "thunderbolt0").stdout
    procs = [_rank(ns_a, torch_python, 0, 29531, 30), _rank(ns_b, torch_python, 1, 29531, 30)]
    docs = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err + out
        docs.append(json.loads(out))
    for rank, doc in enumerate(docs):
        ar = doc["allreduce"]
        assert ar["status"] == "ok" and ar["rank"] == rank and ar["world_size"] == 2
        assert ar["iface"] == "thunderbolt0" and ar["backend"] == "gloo"
        assert ar["rows"] and all(row["oop"]["wrong"] == 0 and row["ip"]["wrong"] == 0 for row in ar["rows"])
        assert ar["rows"][-1]["bytes"] == 64 * 1024
        assert doc["findings"] == []


def test_peer_never_joins_across_namespaces(tb_link, torch_python):
    """Rank 1 in its namespace waits for rank 0, which is never started: allreduce-timeout naming rank 0."""
    _, ns_b = tb_link
    start = time.monotonic()
    p = _rank(ns_b, torch_python, 1, 29532, 5, max_bytes="64")
    out, err = p.communicate(timeout=120)
    assert time.monotonic() - start < 60
    assert p.returncode == 1, err
    doc = json.loads(out)
    assert doc["allreduce"]["status"] == "timeout" and doc["allreduce"]["missing_ranks"] == [0]
    (f,) = doc["findings"]
    assert f["code"] == "allreduce-timeout" and "Rank(s) 0 never joined" in f["detail"] and ADDR_A in f["fix"] and "thunderbolt0" in f["fix"]


def test_rank0_alone_names_rank1(tb_link, torch_python):
    ns_a, _ = tb_link
    p = _rank(ns_a, torch_python, 0, 29533, 4, max_bytes="64")
    out, err = p.communicate(timeout=120)
    doc = json.loads(out)
    assert p.returncode == 1, err
    assert doc["allreduce"]["missing_ranks"] == [1]
    assert [f["code"] for f in doc["findings"]] == ["allreduce-timeout"]


def test_iface_is_really_used(tb_link, torch_python):
    """The same two ranks bound to an interface that does not exist there fail in gloo: --iface reaches it."""
    ns_a, ns_b = tb_link
    procs = [_rank(ns, torch_python, r, 29534, 10, max_bytes="64", iface="nosuch0") for r, ns in enumerate((ns_a, ns_b))]
    for p in procs:
        out, err = p.communicate(timeout=120)
        doc = json.loads(out)
        assert p.returncode == 1, err
        assert doc["allreduce"]["status"] == "failed" and "nosuch0" in doc["allreduce"]["error"]
        assert [f["code"] for f in doc["findings"]] == ["allreduce-failed"]


def _thunderbolt_sysroot(root) -> str:
    """Synthetic sysfs of a Linux host with thunderbolt-net: thunderbolt0 up (IPv6 link-local in
    /proc/net/if_inet6) riding one XDomain peer at 20.0 Gb/s x 2 lanes (formats: thunderbolt.md section 7)."""
    files = {
        "sys/class/net/thunderbolt0/device/uevent": "DRIVER=thunderbolt-net\n",
        "sys/class/net/thunderbolt0/operstate": "up\n",
        "sys/class/net/thunderbolt0/mtu": "65522\n",
        "sys/bus/thunderbolt/devices/0-1/uevent": "DEVTYPE=thunderbolt_xdomain\n",
        "sys/bus/thunderbolt/devices/0-1/rx_speed": "20.0 Gb/s\n",
        "sys/bus/thunderbolt/devices/0-1/rx_lanes": "2\n",
        "sys/bus/thunderbolt/devices/0-1/tx_speed": "20.0 Gb/s\n",
        "sys/bus/thunderbolt/devices/0-1/tx_lanes": "2\n",
        "sys/bus/thunderbolt/devices/0-1/device_name": "peer\n",
        "proc/net/if_inet6": "fe80000000000000a8c9fffffe2f1a3b 05 40 20 80 thunderbolt0\n",
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return str(root)


def test_over_thunderbolt_picks_the_interface(tb_link, torch_python, tmp_path):
    sysroot = _thunderbolt_sysroot(tmp_path / "root")
    procs = [_rank(ns, torch_python, r, 29535, 30, max_bytes="1M", iface=None, over=True, sysroot=sysroot) for r, ns in enumerate(tb_link)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err + out
        ar = json.loads(out)["allreduce"]
        assert ar["status"] == "ok" and ar["iface"] == "thunderbolt0"
        assert ar["link_rate_gbps"] == 40.0
        assert ar["percent_of_link"] == pytest.approx(100 * ar["max_busbw_gbs"] * 8 / 40.0, abs=0.1)
