"""stackdoctor allreduce worker: one rank of a torch.distributed allreduce sweep.

Standalone (stdlib + torch only; never imports stackdoctor): it runs inside the target
interpreter, possibly on another host or in another network namespace. Run as::

    python sd_allreduce.py '{"rank": 0, "world_size": 2, "master_addr": "169.254.0.1",
                             "master_port": 29500, "iface": "thunderbolt0", ...}'

Missing keys come from the launcher's environment (RANK, WORLD_SIZE, LOCAL_RANK,
MASTER_ADDR, MASTER_PORT), so it runs under torchrun, srun or a PyTorchJob.

Rendezvous is an explicit TCPStore: each rank writes ``sd/joined/<rank>``; ranks wait for
every key up to the timeout, so a peer that never joins ends in ``status: timeout`` with
the missing ranks named, and a port already in use ends in ``status: failed``.

The sweep is reported in nccl-tests' vocabulary: per message size, out-of-place and
in-place ``time`` (µs per call, the slowest rank), ``algbw`` = bytes / time (GB/s, 1e9),
``busbw`` = algbw * 2(n-1)/n, and ``#wrong`` from an exact check of every element (inputs
are small integers stored as float32, so every sum is exact), summed over ranks. torch has
no out-of-place allreduce, so out-of-place is "copy the send buffer into the receive
buffer, then reduce in place" and includes the copy.

Prints ``@@stackdoctor@@ {"section": "allreduce", ...}`` once at the end, and a ``progress`` line on
stderr as each message size completes (index/total, bytes, time, busbw), which the parent shows as it comes. Test hooks (``STACKDOCTOR_TEST_HOOK``): ``corrupt-rank=R``
(rank R adds 1 to its input), ``abort-rank=R``, ``hang-rank=R`` (never joins).
With ``"node": {...}`` in the arguments (the parent's probe summary of this host), every rank
publishes it in the rendezvous store and reads all of them back into ``nodes`` (the fleet
table; through the store rather than ``all_gather_object``, which needs numpy in the target).
Must stay importable by Python 3.8+.
"""

import datetime
import json
import os
import sys
import threading
import time

MARK = "@@stackdoctor@@ "


_BOILERPLATE = ("Set TORCHDYNAMO_VERBOSE", "For even more developer context", "You can suppress this exception",
                "Exception raised from", "frame #")


def last_line(exc):
    """``Type: message`` in one line: the first line of the message that says something."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    lines = [ln for ln in lines if not ln.startswith(_BOILERPLATE)] or lines
    return ("%s: %s" % (type(exc).__name__, lines[0]) if lines else type(exc).__name__)[:500]


def address_in_use(exc, msg):
    """Whether opening the store failed because the port is taken (EADDRINUSE: 98 on Linux, 48 on macOS)."""
    import errno

    low = msg.lower()
    return (getattr(exc, "errno", None) == errno.EADDRINUSE or "eaddrinuse" in low
            or "address already in use" in low or "address in use" in low)


def hooks():
    out = {}
    for part in os.environ.get("STACKDOCTOR_TEST_HOOK", "").split(","):
        key, _, value = part.strip().partition("=")
        if key:
            out[key] = value
    return out


def emit(data):
    data = dict(data)
    data["section"] = "allreduce"
    sys.stdout.write(MARK + json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def progress(data):
    sys.stderr.write(MARK + json.dumps(data) + "\n")
    sys.stderr.flush()


def sizes(min_bytes, max_bytes, factor=2):
    """Message sizes in bytes, nccl-tests ``-b min -e max -f factor`` (multiples of 4 bytes)."""
    out = []
    s = max(4, int(min_bytes))
    while s <= max_bytes:
        out.append(s - s % 4)
        s *= factor
    return out or [max(4, int(max_bytes) - int(max_bytes) % 4)]


def busbw_factor(n):
    """nccl-tests' allreduce bus factor 2(n-1)/n (0 for a single rank, as nccl-tests reports it)."""
    return 2.0 * (n - 1) / n


# ---------------------------------------------------------------------------- backend


def tccl_library(dist):
    """Path of the shared library behind the ``tccl`` backend, when one can be found."""
    try:
        mod = sys.modules.get("torch._C._distributed_c10d")
        path = getattr(mod, "__file__", None)
        if path:
            return path
    except Exception:
        pass
    return None


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sd_devices  # noqa: E402  (beside this file; the target's interpreter runs us with -I)


def _backend_missing(torch, dist, spec):
    """Why the spec'd kind's collectives' backend cannot be used here (a sentence), or None when it can."""
    backend = spec.get("backend") or "gloo"
    reasons = spec.get("reasons") or {}
    if spec.get("backend_check"):
        ask = getattr(dist, spec["backend_check"], None)  # "is_nccl_available"
        missing = ask is None or not ask()
    else:
        ask = getattr(dist, "is_backend_available", None)
        missing = backend != sd_devices.DEFAULTS["backend"] and ask is not None and not ask(backend)
    if missing:
        return reasons.get("missing") or "%s device present, but torch.distributed has no %s backend: gloo over TCP" % (
            spec.get("label") or spec["device"], backend)
    if spec.get("library"):
        import ctypes.util

        if not ctypes.util.find_library(spec["library"]):
            return reasons.get("no_library") or "%s is registered but lib%s is absent: gloo over TCP" % (backend, spec["library"])
    return None


def spec_backend(torch, dist, device):
    """(backend, device, reason) of the first spec'd kind (in the kinds' priority order) whose devices torch sees
    ("nccl", "cuda"; "hccl", "npu"), else None. Its backend missing from torch.distributed is gloo on the CPU, saying
    so, or, for a kind whose spec falls through (CUDA without NCCL), the next kind."""
    for spec in sd_devices.specs():
        if device not in (None, spec["device"]) or not sd_devices.available(torch, spec):
            continue
        why = _backend_missing(torch, dist, spec)
        if why is not None and spec.get("fall_through"):
            continue
        if why is not None:
            return "gloo", "cpu", why
        backend = spec.get("backend") or "gloo"
        label = spec.get("label") or spec["device"]
        return backend, spec["device"], (spec.get("reasons") or {}).get("ok") or "%s device present and torch has %s" % (label, backend.upper())
    return None


def choose_backend(torch, dist, requested, device):
    """(backend, device, reason). ``auto``: the first kind whose devices torch sees and whose backend torch has (nccl
    for CUDA, xccl for XPU, tccl for MPS if it is Apple's Thunderbolt RDMA one, hccl for an Ascend NPU ...), else
    gloo on the CPU. A backend asked for runs on the device of the kind it is the backend of."""
    if requested and requested != "auto":
        spec = sd_devices.by_backend(requested)  # "hccl": the spec'd kind's device
        return requested, device or (spec["device"] if spec else "cpu"), "asked for"
    chosen = spec_backend(torch, dist, device)
    if chosen is not None:
        return chosen
    return "gloo", "cpu", "CPU tensors: gloo over TCP"


# ---------------------------------------------------------------------------- run


synchronize = sd_devices.synchronize


def _rank_device(torch, backend, device, local_rank):
    """(the device this rank runs on, an error): one device per local rank of a spec'd kind, made current where the
    kind says how; an error when torch sees none of the kind's devices."""
    spec = sd_devices.spec_for(device)
    if spec is None:
        return device, None
    if not sd_devices.available(torch, spec):
        return device, "%s needs a %s device, but this torch (%s) sees none" % (backend, spec.get("label") or spec["device"], torch.__version__)
    if not spec.get("indexed", True):
        return device, None
    mine = "%s:%d" % (spec["device"], local_rank % max(1, sd_devices.count(torch, spec)))
    set_device = sd_devices.attr(torch, spec.get("set_device"))
    if set_device is not None:
        set_device(mine)
    return mine, None


def run(args):
    h = hooks()
    env = os.environ
    rank = int(args.get("rank", env.get("RANK", 0)))
    world = int(args.get("world_size", env.get("WORLD_SIZE", 1)))
    local_rank = int(args.get("local_rank", env.get("LOCAL_RANK", rank)))
    addr = args.get("master_addr") or env.get("MASTER_ADDR") or "127.0.0.1"
    port = int(args.get("master_port") or env.get("MASTER_PORT") or 29500)
    timeout_s = float(args.get("timeout_s", 60))
    iface = args.get("iface")
    out = {"rank": rank, "world_size": world, "master_addr": addr, "master_port": port, "iface": iface,
           "hostname": _hostname(), "status": "failed"}
    if iface:
        os.environ["GLOO_SOCKET_IFNAME"] = iface
        os.environ["NCCL_SOCKET_IFNAME"] = iface
    if h.get("hang-rank") == str(rank):
        time.sleep(timeout_s + 3600)
    if h.get("abort-rank") == str(rank):
        sys.stdout.flush()
        os.abort()
    try:
        import torch
        import torch.distributed as dist
    except BaseException as exc:
        out["error"] = "import torch failed: %s" % last_line(exc)
        return out
    out["torch_version"] = torch.__version__
    if not dist.is_available():
        out["error"] = "this torch build has no torch.distributed"
        return out
    backend, device, reason = choose_backend(torch, dist, args.get("backend"), args.get("device"))
    out.update({"backend": backend, "backend_reason": reason, "device": device})
    device, error = _rank_device(torch, backend, device, local_rank)
    if error:
        out["error"] = error
        return out
    out["device"] = device

    # ---- rendezvous: who joined, within the timeout
    deadline = time.monotonic() + timeout_s
    store = _open_store(dist, out, addr, port, world, rank, timeout_s)
    if store is None:
        return out
    fleet = isinstance(args.get("node"), dict)
    if fleet:  # published before "joined", so a rank seen as joined has its node summary there
        store.set("sd/node/%d" % rank, json.dumps(dict(args["node"], rank=rank, hostname=_hostname()), default=str))
    store.set("sd/joined/%d" % rank, _hostname())
    keys = ["sd/joined/%d" % r for r in range(world)]
    if not _all_joined(store, keys, out, deadline, timeout_s):
        return out
    try:
        return _joined(torch, dist, args, out, store, keys, rank, world, device, h, backend, deadline, fleet)
    finally:
        _linger(store, rank, world, deadline)


def _within(make, seconds):
    """``make()`` run on a daemon thread for at most ``seconds``: (value, None), or (None, the exception it raised), or
    (None, None) when it had not returned by then. A client TCPStore retries its connect after a random back-off, so
    one with timeout=5 s gives up after 10-15 s; the caller's timeout is what the user asked for. A thread still in
    torch's connect dies with the worker (``main`` leaves with ``os._exit``)."""
    done = {}

    def call():
        try:
            done["value"] = make()
        except BaseException as exc:  # handed to the caller as it was raised
            done["error"] = exc

    t = threading.Thread(target=call, name="sd-store", daemon=True)
    t.start()
    t.join(seconds)
    return done.get("value"), done.get("error")


def _open_store(dist, out, addr, port, world, rank, timeout_s):
    """The rendezvous store (rank 0 opens it, the others reach it within ``timeout_s``), or None with why in ``out``."""
    def make():
        return dist.TCPStore(addr, port, world, rank == 0, timeout=datetime.timedelta(seconds=timeout_s), wait_for_workers=False)

    try:
        if rank == 0:
            return make()
        store, error = _within(make, timeout_s)
        if store is not None:
            return store
        if error is not None:
            raise error
        out.update({"status": "timeout", "missing_ranks": [0], "joined_ranks": [],
                    "error": "rank 0 (the store at %s:%d) never answered in %g s" % (addr, port, timeout_s)})
        return None
    except Exception as exc:
        msg = last_line(exc)
        if rank == 0 and address_in_use(exc, msg):
            out.update({"status": "failed",
                        "error": "%s:%d is already in use (address already in use): another process listens there, "
                                 "so rank 0 could not open the rendezvous store; pick a free --master-port (%s)"
                                 % (addr, port, msg)})
        elif rank != 0 and ("timed out" in msg.lower() or "timeout" in msg.lower() or "connect" in msg.lower()):
            out.update({"status": "timeout", "missing_ranks": [0], "joined_ranks": [],
                        "error": "rank 0 (the store at %s:%d) never answered in %g s: %s" % (addr, port, timeout_s, msg)})
        else:
            out["error"] = "could not %s the rendezvous store at %s:%d: %s" % ("open" if rank == 0 else "reach", addr, port, msg)
        return None


def _all_joined(store, keys, out, deadline, timeout_s):
    """Wait until every rank wrote its key; False (why in ``out``) when the store is lost or the deadline passes."""
    world = len(keys)
    while True:
        try:
            joined = [r for r in range(world) if store.check([keys[r]])]
        except Exception as exc:
            out.update({"status": "failed", "error": "rendezvous store lost: %s" % last_line(exc)})
            return False
        if len(joined) == world:
            return True
        if time.monotonic() > deadline:
            missing = [r for r in range(world) if r not in joined]
            out.update({"status": "timeout", "joined_ranks": joined, "missing_ranks": missing,
                        "error": "ranks %s never joined in %g s" % (",".join(str(r) for r in missing), timeout_s)})
            return False
        time.sleep(0.05)


def _linger(store, rank, world, deadline):
    """Rank 0 holds the rendezvous store: it waits (up to 10 s) until every peer says it is done, so a peer that
    fails on its own (an --iface it lacks) reports its own error, not "rendezvous store lost" because rank 0
    failed first and took the store with it."""
    if rank != 0:
        try:
            store.set("sd/done/%d" % rank, "1")
        except Exception:
            pass
        return
    keys = ["sd/done/%d" % r for r in range(1, world)]
    until = min(deadline, time.monotonic() + 10.0)
    while keys and time.monotonic() < until:
        try:
            keys = [k for k in keys if not store.check([k])]
        except Exception:
            return
        time.sleep(0.05)


def _joined(torch, dist, args, out, store, keys, rank, world, device, h, backend, deadline, fleet):
    out["hosts"] = {str(r): _get(store, keys[r]) for r in range(world)}
    if fleet:
        # fleet: every rank's probe summary through the store (all_gather_object would need
        # numpy in the target, and the table is wanted even when the collective then fails)
        nodes = []
        for r in range(world):
            try:
                nodes.append(json.loads(_get(store, "sd/node/%d" % r) or "null"))
            except ValueError:
                nodes.append(None)
        out["nodes"] = nodes
    try:
        kwargs = {"backend": backend, "store": store, "rank": rank, "world_size": world,
                  "timeout": datetime.timedelta(seconds=max(5.0, deadline - time.monotonic() + 30))}
        spec = sd_devices.spec_for(device)
        if spec is not None and spec.get("init_device"):  # tccl: the MPS device
            kwargs["device_id"] = torch.device(spec["device"], 0)
        dist.init_process_group(**kwargs)
    except Exception as exc:
        out["error"] = "init_process_group(%s) failed: %s" % (backend, last_line(exc))
        return out
    try:
        out["rows"] = sweep(torch, dist, args, rank, world, device, h)
        out["status"] = "ok"
        bus = [r["oop"]["busbw"] for r in out["rows"]] + [r["ip"]["busbw"] for r in out["rows"]]
        out["avg_busbw_gbs"] = sum(bus) / len(bus) if bus else None
        out["max_busbw_gbs"] = max(bus) if bus else None
        out["wrong"] = sum(r["oop"]["wrong"] + r["ip"]["wrong"] for r in out["rows"])
    except Exception as exc:
        out.update({"status": "failed", "error": "allreduce failed: %s" % last_line(exc)})
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass
    return out


def _get(store, key):
    try:
        return store.get(key).decode("utf-8", "replace")
    except Exception:
        return None


def _hostname():
    import socket

    try:
        return socket.gethostname()
    except Exception:
        return None


def sweep(torch, dist, args, rank, world, device, h):
    min_b = int(args.get("min_bytes", 8))
    max_b = int(args.get("max_bytes", 256 * 1024 * 1024))
    iters_max = int(args.get("iters", 20))
    warmup = int(args.get("warmup", 2))
    budget_bytes = float(args.get("budget_bytes", 1 << 30))
    corrupt = h.get("corrupt-rank") == str(rank)
    rows = []
    fac = busbw_factor(world)
    sweep_sizes = sizes(min_b, max_b, int(args.get("factor", 2)))
    for index, nbytes in enumerate(sweep_sizes):
        count = nbytes // 4
        iters = int(max(1, min(iters_max, budget_bytes // max(1, nbytes))))
        row = {"bytes": count * 4, "count": count, "type": "float", "redop": "sum", "iters": iters}
        # inputs: rank r holds (r + 1) + (i mod 7): integers, exactly representable, exact sums
        idx = torch.arange(count, dtype=torch.int64) % 7
        base = (idx + (rank + 1)).to(torch.float32)
        if corrupt:
            base = base + 1
        expected = (idx * world + world * (world + 1) // 2).to(torch.float32).to(device)
        send = base.to(device)
        for mode in ("oop", "ip"):
            recv = torch.empty_like(send)

            def call(mode=mode, recv=recv, send=send):  # bound now: the loop's next round rebinds them
                if mode == "oop":
                    recv.copy_(send)
                    dist.all_reduce(recv)
                else:
                    dist.all_reduce(recv)

            recv.copy_(send)
            for _ in range(warmup):
                call()
            recv.copy_(send)  # in-place values grow while timing; re-filled for the check below
            synchronize(torch, device)
            dist.barrier()
            start = time.perf_counter()
            for _ in range(iters):
                call()
            synchronize(torch, device)
            t = (time.perf_counter() - start) / iters
            # correctness: a fresh call on fresh inputs, every element compared exactly
            recv.copy_(send)
            dist.all_reduce(recv)
            synchronize(torch, device)
            wrong = int((recv != expected).sum().item())
            stats = torch.tensor([t, float(wrong)], dtype=torch.float32 if sd_devices.spec_for(device) else torch.float64, device=device)
            tmax = stats[:1].clone()
            dist.all_reduce(tmax, op=dist.ReduceOp.MAX)
            wsum = stats[1:].clone()
            dist.all_reduce(wsum)
            t = float(tmax.item())
            algbw = row["bytes"] / t / 1e9 if t > 0 else 0.0
            row[mode] = {"time_us": t * 1e6, "algbw": algbw, "busbw": algbw * fac, "wrong": int(wsum.item())}
        rows.append(row)
        progress({"section": "progress", "rank": rank, "index": index + 1, "total": len(sweep_sizes), "bytes": row["bytes"],
                  "time_us": row["ip"]["time_us"], "busbw": row["ip"]["busbw"], "wrong": row["oop"]["wrong"] + row["ip"]["wrong"]})
    return rows


def main(argv):
    try:
        args = json.loads(argv[1]) if len(argv) > 1 else {}
    except ValueError as exc:
        emit({"status": "failed", "error": "bad arguments: %s" % exc})
        return 2
    try:
        out = run(args)
    except BaseException as exc:
        out = {"status": "failed", "error": last_line(exc)}
    emit(out)
    sys.stdout.flush()
    # never linger in a collective library's atexit handlers
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
