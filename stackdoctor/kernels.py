"""Run real kernels and collectives in the target interpreter, and judge what they did.

Parent side of ``stackdoctor/_worker/sd_kernels.py`` and ``sd_allreduce.py``. The workers
run in the *target* interpreter (``<python> -I <worker> '<json args>'``) through
:meth:`System.run`, so a Python error, a segfault, an abort or a hang is a
:class:`CommandResult` and becomes facts (``KernelFacts.error`` / ``signal`` /
``stderr_tail``), never a crash or a hang of stackdoctor. torch is never imported here.

Pure parts (tested without torch): :func:`kernel_facts_from_run`, :func:`merge_allreduce`,
:func:`kernel_findings`, :func:`parse_bandwidth`, :func:`peak_from_sm_clock`,
:func:`format_busbw_chart`.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackdoctor._worker import worker_path
from stackdoctor.facts import Facts, KernelFacts, KernelResult, NvidiaGpu, from_data
from stackdoctor.report import Finding
from stackdoctor.system import CommandResult, Started, System, _signame

__all__ = [
    "KERNELS_SCHEMA",
    "AllreduceOptions",
    "annotate_peaks",
    "fleet_table",
    "format_busbw_chart",
    "free_port",
    "kernel_facts_from_run",
    "kernel_findings",
    "merge_allreduce",
    "node_summary",
    "parse_bandwidth",
    "peak_from_sm_clock",
    "run_allreduce_local",
    "run_allreduce_rank",
    "run_kernels",
    "worker_path",
]

KERNELS_SCHEMA = "stackdoctor.kernels/1"
MARK = "@@stackdoctor@@ "
STDERR_TAIL_LINES = 20
SLOW_FRACTION = 0.25  # kernel-slow below this fraction of the device's peak (largest size of a sweep)

# FP32 fused multiply-add results per clock per SM by compute capability, from the NVIDIA
# CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table (32-bit
# floating-point add, multiply, multiply-add). Peak FP32 = SMs x lanes x 2 x clock.
FP32_LANES_PER_SM: dict[str, int] = {
    "6.0": 64,
    "6.1": 128,
    "7.0": 64,
    "7.5": 64,
    "8.0": 64,
    "8.6": 128,
    "8.9": 128,
    "9.0": 128,
}


def _sections(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        i = line.find(MARK)
        if i < 0:
            continue
        try:
            data = json.loads(line[i + len(MARK) :])
        except ValueError:
            continue
        if isinstance(data, dict):
            out.append(data)
    return out


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str | None:
    kept = [ln for ln in text.splitlines() if MARK not in ln and ln.strip()]
    return "\n".join(kept[-lines:]) or None


def _result(data: Mapping[str, Any]) -> KernelResult | None:
    clean = {k: v for k, v in data.items() if k not in ("section", "elapsed_s")}
    try:
        return from_data(KernelResult, clean)
    except TypeError:
        return None


# ---------------------------------------------------------------------------- kernels


def kernel_facts_from_run(res: CommandResult, mode: str = "full") -> KernelFacts:
    """KernelFacts from one run of ``sd_kernels.py``: every result printed before any failure is kept."""
    kf = KernelFacts(ran=False, mode=mode)
    done: dict[str, Any] | None = None
    for sec in _sections(res.stdout):
        if sec.get("section") == "result":
            r = _result(sec)
            if r is not None:
                kf.results.append(r)
        elif sec.get("section") == "done":
            done = sec
    kf.ran = bool(kf.results) or bool(done and done.get("ran"))
    where = f" after {len(kf.results)} result(s)" if kf.results else " before any result"
    if res.status == "timeout":
        kf.error = f"the kernel process did not finish in {res.detail} s{where} (hung; killed)"
    elif res.signal is not None:
        kf.signal = _signame(res.signal)
        kf.error = f"the kernel process was killed by {kf.signal}{where}"
    elif res.status in ("absent", "denied", "error"):
        kf.error = f"the target interpreter could not be run: {res.describe_failure()}"
    elif res.returncode not in (0, None) and done is None:
        kf.error = f"the kernel process exited with code {res.returncode}{where}"
    elif done is None:
        kf.error = f"the kernel process ended without reporting{where}"
    elif done.get("error"):
        kf.error = str(done["error"])
    if kf.error:
        kf.stderr_tail = _tail(res.stderr)
    return kf


def run_kernels(
    system: System,
    python: str,
    *,
    kernels: Sequence[str] = ("matmul", "conv", "compile"),
    devices: Sequence[str] = (),
    sizes: Sequence[int] = (),
    timeout_s: float = 300.0,
    min_time: float = 0.2,
    hook: str | None = None,
) -> KernelFacts:
    """The full kernel suite in ``python`` (a subprocess with a timeout). Never raises."""
    args = {"kernels": list(kernels), "devices": list(devices), "sizes": [int(s) for s in sizes], "min_time": min_time}
    env: dict[str, str | None] = {"STACKDOCTOR_TEST_HOOK": hook}
    res = system.run([python, "-I", str(worker_path("sd_kernels.py")), json.dumps(args)], timeout=timeout_s, env=env, parse_env=False)
    return kernel_facts_from_run(res, mode="full")


# ---------------------------------------------------------------------------- peaks


def peak_from_sm_clock(gpu: NvidiaGpu) -> float | None:
    """FP32 (CUDA-core) peak TFLOP/s from NVML's SM count and max SM clock; None when unknown."""
    lanes = FP32_LANES_PER_SM.get(gpu.compute_capability or "")
    if not lanes or not gpu.sm_count or not gpu.max_sm_clock_mhz:
        return None
    return gpu.sm_count * lanes * 2 * gpu.max_sm_clock_mhz * 1e6 / 1e12


def _matrix_peak(name: str | None, dtype: str | None, matrix: Any) -> tuple[float | None, str | None]:
    if matrix is None or not name or not dtype:
        return None, None
    try:
        peak = matrix.peak(name)
    except Exception:
        return None, None
    if peak is None:
        return None, None
    value = getattr(peak, {"tf32": "bf16"}.get(dtype, dtype), None) if dtype in ("fp32", "bf16", "fp16") else None
    return (float(value), f"compat matrix: {peak.source}") if value else (None, None)


def annotate_peaks(kernels: KernelFacts, facts: Facts | None = None, matrix: Any = None) -> None:
    """Fill ``peak_tflops`` / ``percent_of_peak`` on matmul results where the device's peak is known:
    the compat matrix's ``peaks`` table first, else (fp32 on NVIDIA) SM count x clock from NVML."""
    gpus = facts.nvidia.gpus if facts is not None else []
    for r in kernels.results:
        if r.kernel != "matmul" or r.tflops is None or not r.device.startswith("cuda"):
            continue
        name = r.extra.get("device_name")
        gpu = next((g for g in gpus if g.name and name and g.name == name), None)
        if gpu is None and name is None:
            idx = r.device.partition(":")[2]
            gpu = next((g for g in gpus if str(g.index) == idx), None)
        peak, source = _matrix_peak(name or (gpu.name if gpu else None), r.dtype, matrix)
        if peak is None and r.dtype == "fp32" and gpu is not None:
            peak = peak_from_sm_clock(gpu)
            source = "NVML: SM count x max SM clock x FP32 lanes" if peak else None
        if peak:
            r.peak_tflops = round(peak, 3)
            r.percent_of_peak = round(100.0 * r.tflops / peak, 1)
            r.extra["peak_source"] = source


# ---------------------------------------------------------------------------- allreduce


@dataclass
class AllreduceOptions:
    min_bytes: int = 8
    max_bytes: int = 256 * 1024 * 1024
    factor: int = 2
    iters: int = 20
    warmup: int = 2
    timeout_s: float = 60.0
    backend: str = "auto"
    device: str | None = None
    iface: str | None = None

    def args(self) -> dict[str, Any]:
        return {
            "min_bytes": self.min_bytes,
            "max_bytes": self.max_bytes,
            "factor": self.factor,
            "iters": self.iters,
            "warmup": self.warmup,
            "timeout_s": self.timeout_s,
            "backend": self.backend,
            "device": self.device,
            "iface": self.iface,
        }


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _rank_outcome(rank: int, res: CommandResult) -> dict[str, Any]:
    """One rank's report, or a description of how its process failed."""
    secs = [s for s in _sections(res.stdout) if s.get("section") == "allreduce"]
    if secs:
        out = {k: v for k, v in secs[-1].items() if k != "section"}
        out.setdefault("rank", rank)
        return out
    if res.status == "timeout":
        why = f"rank {rank} did not finish in {res.detail} s (killed)"
        return {"rank": rank, "status": "timeout", "error": why, "stderr_tail": _tail(res.stderr)}
    if res.signal is not None:
        why = f"rank {rank} was killed by {_signame(res.signal)}"
        return {"rank": rank, "status": "failed", "error": why, "signal": _signame(res.signal), "stderr_tail": _tail(res.stderr)}
    why = f"rank {rank}: " + (res.describe_failure() or "ended without reporting")
    return {"rank": rank, "status": "failed", "error": why, "stderr_tail": _tail(res.stderr)}


def merge_allreduce(outcomes: Mapping[int, Mapping[str, Any]], world_size: int) -> dict[str, Any]:
    """One summary from the ranks that reported (pure). Status: ok | timeout | failed.

    A rank named missing by any peer, or whose process never reported, makes ``timeout``
    with ``missing_ranks``; otherwise any failing rank makes ``failed``."""
    ranks = dict(sorted(outcomes.items()))
    lead = ranks.get(0) or (next(iter(ranks.values())) if ranks else {})
    summary: dict[str, Any] = {k: v for k, v in lead.items() if k not in ("status", "error", "stderr_tail", "signal")}
    summary["world_size"] = world_size
    summary["ranks_reported"] = [r for r, o in ranks.items() if o.get("status") in ("ok", "timeout", "failed") and "signal" not in o]
    missing: set[int] = set()
    for o in ranks.values():
        missing.update(int(m) for m in o.get("missing_ranks") or [])
    errors = {str(r): o["error"] for r, o in ranks.items() if o.get("error")}
    statuses = {o.get("status") for o in ranks.values()}
    if missing or "timeout" in statuses:
        summary["status"] = "timeout"
        if not missing:
            missing = {r for r, o in ranks.items() if o.get("status") == "timeout"}
    elif statuses != {"ok"} or len(ranks) < world_size:
        summary["status"] = "failed"
    else:
        summary["status"] = "ok"
    summary["missing_ranks"] = sorted(missing)
    summary["errors"] = errors
    if summary["status"] != "ok":
        # the first rank that failed by itself, not one stopped because of it
        first = next((o for o in ranks.values() if o.get("status") not in ("ok", "stopped") and o.get("error")), None)
        first = first or next((o for o in ranks.values() if o.get("status") != "ok" and o.get("error")), None)
        summary["error"] = first.get("error") if first else "allreduce did not complete"
        tails = [o.get("stderr_tail") for o in ranks.values() if o.get("stderr_tail")]
        if tails:
            summary["stderr_tail"] = tails[0]
        sigs = [o["signal"] for o in ranks.values() if o.get("signal")]
        if sigs:
            summary["signal"] = sigs[0]
    return summary


def allreduce_kernel_facts(summary: dict[str, Any]) -> KernelFacts:
    """KernelFacts holding the summary and one KernelResult per message size."""
    kf = KernelFacts(ran=True, mode="full", allreduce=summary)
    device = str(summary.get("device") or "cpu")
    for row in summary.get("rows") or []:
        oop, ip = row.get("oop") or {}, row.get("ip") or {}
        wrong = int(oop.get("wrong", 0)) + int(ip.get("wrong", 0))
        kf.results.append(
            KernelResult(
                kernel="allreduce",
                device=device,
                dtype="fp32",
                size=f"{row.get('bytes')}B",
                ok=wrong == 0,
                time_s=(ip.get("time_us") or 0) / 1e6 or None,
                error=f"#wrong = {wrong}" if wrong else None,
                extra={"bytes": row.get("bytes"), "backend": summary.get("backend"), "world_size": summary.get("world_size"),
                       "oop": oop, "ip": ip, "busbw_gbs": ip.get("busbw"), "wrong": wrong},
            )
        )
    if summary.get("status") != "ok":
        kf.signal = summary.get("signal")
        kf.stderr_tail = summary.get("stderr_tail")
    return kf


def _rank_argv(python: str, args: dict[str, Any], prefix: Sequence[str]) -> list[str]:
    return [*prefix, python, "-I", str(worker_path("sd_allreduce.py")), json.dumps(args)]


def run_allreduce_local(
    system: System,
    python: str,
    nproc: int,
    opts: AllreduceOptions,
    *,
    master_port: int | None = None,
    hook: str | None = None,
) -> KernelFacts:
    """``nproc`` ranks here on loopback (one process each), joined within ``opts.timeout_s``.

    As soon as one rank *reports* a failure or a timeout (a port in use, peers missing), the
    run is decided: the ranks still running are stopped (each rank's process tree is killed
    through the :class:`~stackdoctor.system.Started` handle ``System.run`` gives back, the
    same process control as a timeout) instead of waiting out the outer bound. A rank that
    dies without reporting (a signal) stops nothing: its peers then name it missing."""
    port = master_port or free_port()
    outcomes: dict[int, dict[str, Any]] = {}
    lock = threading.Lock()
    decided = threading.Event()  # set when a rank reported failed/timeout
    stopped: dict[int, int] = {}  # rank -> the rank whose report stopped it
    trigger: list[int] = []
    started: dict[int, Started] = {}  # rank -> its running child
    # the worker itself gives up on a missing peer at timeout_s; the outer bound also covers the sweep
    outer = opts.timeout_s * 2 + 30

    def one(rank: int) -> None:
        args = {**opts.args(), "rank": rank, "world_size": nproc, "local_rank": rank, "master_addr": "127.0.0.1",
                "master_port": port}

        def keep(handle: Started) -> None:
            with lock:
                started[rank] = handle

        res = system.run(_rank_argv(python, args, ()), timeout=outer, env={"STACKDOCTOR_TEST_HOOK": hook}, parse_env=False,
                         on_start=keep)
        outcome = _rank_outcome(rank, res)
        with lock:
            if rank in stopped:
                by = stopped[rank]
                outcome = {"rank": rank, "status": "stopped",
                           "error": f"rank {rank} stopped after rank {by} reported {outcomes.get(by, {}).get('status', 'a failure')}"}
            outcomes[rank] = outcome
            if _reported(res) and outcome.get("status") in ("failed", "timeout") and not decided.is_set():
                trigger.append(rank)
                decided.set()

    threads = [threading.Thread(target=one, args=(r,), daemon=True) for r in range(nproc)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + outer + 10
    while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
        if decided.wait(0.1):
            _stop_ranks(started, threads, outcomes, stopped, trigger[0], lock)
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    return allreduce_kernel_facts(merge_allreduce(outcomes, nproc))


def _reported(res: CommandResult) -> bool:
    """Whether the worker printed its allreduce report (as opposed to dying or being killed)."""
    return any(s.get("section") == "allreduce" for s in _sections(res.stdout))


def _stop_ranks(started: Mapping[int, Started], threads: Sequence[threading.Thread], outcomes: Mapping[int, Any],
                stopped: dict[int, int], by: int, lock: threading.Lock) -> None:
    """Kill the process tree of every local rank still running (not started yet: tried on the next pass)."""
    for rank, t in enumerate(threads):
        with lock:
            if not t.is_alive() or rank in outcomes:
                continue
            handle = started.get(rank)
            if handle is None:
                continue
            stopped.setdefault(rank, by)
        handle.kill()


def run_allreduce_rank(
    system: System,
    python: str,
    *,
    rank: int,
    world_size: int,
    master_addr: str,
    master_port: int,
    opts: AllreduceOptions,
    local_rank: int | None = None,
    prefix: Sequence[str] = (),
    hook: str | None = None,
    node: Mapping[str, Any] | None = None,
) -> KernelFacts:
    """This host's rank of a multi-host allreduce (``prefix``: e.g. ``ip netns exec NS``).

    ``node``: this host's :func:`node_summary`; when given, the ranks gather them (fleet table)."""
    args = {**opts.args(), "rank": rank, "world_size": world_size, "master_addr": master_addr, "master_port": master_port,
            "local_rank": rank if local_rank is None else local_rank}
    if node is not None:
        args["node"] = dict(node)
    res = system.run(_rank_argv(python, args, prefix), timeout=opts.timeout_s * 2 + 30, env={"STACKDOCTOR_TEST_HOOK": hook}, parse_env=False)
    outcome = _rank_outcome(rank, res)
    summary = merge_allreduce({rank: outcome}, world_size)
    if isinstance(outcome.get("nodes"), list):
        summary["fleet"] = fleet_table(outcome["nodes"])
        summary.pop("nodes", None)
    if summary["status"] == "failed" and outcome.get("status") == "ok":
        summary["status"] = "ok"  # only this rank is here; its peers reported to themselves
        summary.pop("error", None)
    return allreduce_kernel_facts(summary)


# ---------------------------------------------------------------------------- units, chart


_BW = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(?:([kKmMgGtT]?)([Bb])(?:/s|ps)?)?\s*$")
_PREFIX = {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}


def parse_bandwidth(text: str) -> float:
    """A bandwidth in GB/s (1e9 bytes/s, as nccl-tests): ``20``, ``20GB/s``, ``160Gb/s``, ``2.5 TB/s``.

    A bare number is GB/s; a lower-case ``b`` means bits (``160Gb/s`` = 20 GB/s).

    :raises ValueError: when ``text`` is not a bandwidth.
    """
    m = _BW.match(str(text))
    if not m:
        raise ValueError(f"{text!r} is not a bandwidth (try 20, 20GB/s or 160Gb/s)")
    value = float(m.group(1))
    if m.group(3) is None:
        return value
    scale = _PREFIX[m.group(2).lower()]
    return value * scale / (8.0 if m.group(3) == "b" else 1.0)


def format_size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def format_busbw_chart(rows: Sequence[Mapping[str, Any]], width: int = 40, bar: str = "█") -> list[str]:
    """busbw (in-place) by message size as text bars, one line per size (``bar``: the glyph;
    ``#`` on a console that cannot show a block, see :func:`stackdoctor.console.marks`)."""
    vals = [float((r.get("ip") or {}).get("busbw") or 0.0) for r in rows]
    top = max(vals, default=0.0) or 1.0
    lines = []
    for r, v in zip(rows, vals):
        drawn = bar * max(0, int(round(width * v / top)))
        lines.append(f"{format_size(int(r.get('bytes') or 0)):>9} {drawn:<{width}} {v:8.3f} GB/s")
    return lines


# ---------------------------------------------------------------------------- findings


def kernel_findings(kernels: KernelFacts, *, min_busbw_gbs: float | None = None) -> list[Finding]:
    """Findings from kernel and allreduce results (pure)."""
    out: list[Finding] = []
    if kernels.error:
        detail = kernels.error
        if kernels.stderr_tail:
            detail += "\nlast lines of its stderr:\n" + kernels.stderr_tail
        out.append(
            Finding(
                code="kernel-failed",
                severity="fail",
                title="A kernel process failed" + (f" ({kernels.signal})" if kernels.signal else ""),
                detail=detail,
                fix="Run `stackdoctor kernels --json` to reproduce; a crash (SIGSEGV/SIGABRT) inside torch usually means a wheel "
                "built for another GPU/driver: reinstall torch with `stackdoctor install`.",
                layer="kernels",
                facts=["kernels.error", "kernels.signal", "kernels.stderr_tail"],
            )
        )
    for i, r in enumerate(kernels.results):
        if r.kernel == "allreduce" or r.ok:
            continue
        label = f"{r.kernel} {r.dtype or ''} on {r.device}".replace("  ", " ")
        key = f"kernels.results[{i}]"
        if r.extra.get("exception") or r.extra.get("unavailable") or (r.max_error is None and not r.extra.get("nonfinite")):
            out.append(
                Finding(
                    code="kernel-failed",
                    severity="fail",
                    title=f"{label} raised an error",
                    detail=r.error or "",
                    fix="Check that the torch build supports this device (`stackdoctor check`); for compile, a C++ compiler "
                    "(CPU) or Triton (GPU) must be installed and working.",
                    layer="kernels",
                    facts=[key],
                )
            )
        else:
            out.append(
                Finding(
                    code="kernel-wrong-result",
                    severity="fail",
                    title=f"{label} returned wrong numbers",
                    detail=r.error or f"max relative error {r.max_error} > tolerance {r.tolerance}",
                    fix="Wrong results point at a broken library or failing hardware: reinstall torch for this device, then "
                    "check the GPU (ECC errors, `nvidia-smi -q`, clocks) and rerun `stackdoctor kernels`.",
                    layer="kernels",
                    facts=[key],
                )
            )
    for i, r in enumerate(kernels.results):
        if r.kernel != "matmul" or not r.ok or r.percent_of_peak is None or not r.extra.get("sweep_max"):
            continue
        if r.percent_of_peak < SLOW_FRACTION * 100:
            out.append(
                Finding(
                    code="kernel-slow",
                    severity="warn",
                    title=f"matmul {r.dtype} on {r.device} reaches only {r.percent_of_peak:.0f}% of peak",
                    detail=f"{r.tflops:.2f} TFLOP/s at {r.size}; peak {r.peak_tflops} TFLOP/s ({r.extra.get('peak_source')})",
                    fix="Look for throttling, a power cap or a narrow PCIe link (`nvidia-smi -q -d PERFORMANCE,POWER,CLOCK`), "
                    "and for another process using the GPU.",
                    layer="kernels",
                    facts=[f"kernels.results[{i}]"],
                )
            )
    ar = kernels.allreduce
    if ar:
        out.extend(_allreduce_findings(ar, kernels.results, min_busbw_gbs))
    return out


def _allreduce_findings(ar: Mapping[str, Any], results: Sequence[KernelResult], min_busbw_gbs: float | None) -> list[Finding]:
    out: list[Finding] = []
    status = ar.get("status")
    where = f"{ar.get('master_addr')}:{ar.get('master_port')}"
    iface = ar.get("iface")
    if status == "timeout":
        missing = ar.get("missing_ranks") or []
        names = ", ".join(str(m) for m in missing) or "?"
        out.append(
            Finding(
                code="allreduce-timeout",
                severity="fail",
                title=f"allreduce timed out: rank(s) {names} never joined",
                detail=str(ar.get("error") or ""),
                fix=f"Start rank(s) {names} with the same --master-addr/--master-port ({where}) and --world-size "
                f"{ar.get('world_size')}; check that {where} is reachable from every host"
                + (f" over {iface}" if iface else "")
                + " (firewall, interface, address).",
                layer="network",
                facts=["kernels.allreduce.missing_ranks"],
            )
        )
    elif status == "failed":
        err = str(ar.get("error") or "")
        low = err.lower()
        fix = "Check the backend and the network: run again with --iface to pick the interface; see the error above."
        if "in use" in low or "address already" in low or "eaddrinuse" in low:
            fix = f"Port {ar.get('master_port')} is in use on the master: pick another with --master-port."
        elif "needs a cuda device" in low or "_cuda" in low:
            fix = "Install a CUDA build of torch (`stackdoctor install`), or use --backend gloo for CPU tensors."
        elif "unable to find address for" in low or (iface and iface in err):
            fix = f"Interface {iface!r} has no usable address on this host: check `ip addr` and pass the right --iface."
        out.append(
            Finding(
                code="allreduce-failed",
                severity="fail",
                title=f"allreduce failed ({ar.get('backend') or 'backend unknown'})",
                detail=err + (("\nlast lines of its stderr:\n" + ar["stderr_tail"]) if ar.get("stderr_tail") else ""),
                fix=fix,
                layer="network",
                facts=["kernels.allreduce.error"],
            )
        )
    wrong = sum(int(r.extra.get("wrong") or 0) for r in results if r.kernel == "allreduce")
    if wrong:
        bad = [r.size for r in results if r.kernel == "allreduce" and r.extra.get("wrong")]
        out.append(
            Finding(
                code="kernel-wrong-result",
                severity="fail",
                title=f"allreduce returned wrong values (#wrong = {wrong})",
                detail=f"{len(bad)} message size(s) had wrong elements: {', '.join(str(b) for b in bad[:8])}",
                fix="A rank computes or sends wrong data: check each host's GPU/driver (`stackdoctor check` on every node) "
                "and the link (NIC, cable).",
                layer="kernels",
                facts=["kernels.results"],
            )
        )
    if status == "ok" and min_busbw_gbs is not None:
        best = ar.get("max_busbw_gbs")
        if best is None or best < min_busbw_gbs:
            out.append(
                Finding(
                    code="allreduce-slow",
                    severity="fail",
                    title=f"allreduce busbw {best or 0:.2f} GB/s is below the asked {min_busbw_gbs:g} GB/s",
                    detail=f"backend {ar.get('backend')}, {ar.get('world_size')} ranks"
                    + (f", interface {iface}" if iface else "")
                    + (f"; link {ar.get('link_rate_gbps')} Gb/s" if ar.get("link_rate_gbps") else ""),
                    fix="Check that the fast interface carries the traffic (--iface), its link speed and MTU, and that "
                    "the largest message size (--max-bytes) is big enough to reach peak bandwidth.",
                    layer="network",
                    facts=["kernels.allreduce.max_busbw_gbs"],
                )
            )
    return out


# ---------------------------------------------------------------------------- fleet

FLEET_FIELDS = ("driver", "torch", "cuda", "nccl", "gpus")


def node_summary(facts: Facts) -> dict[str, Any]:
    """What one node contributes to the fleet table (pure; JSON-ready)."""
    mm = [r for r in facts.kernels.results if r.kernel == "matmul" and r.dtype == "fp32" and r.tflops]
    gpu_mm = [r for r in mm if r.device != "cpu"] or mm
    return {
        "hostname": facts.platform.hostname,
        "driver": facts.nvidia.driver_version,
        "torch": facts.torch.version,
        "cuda": facts.torch.cuda or facts.torch.hip,
        "nccl": facts.torch.nccl_version,
        "gpus": ", ".join(sorted({g.name or "?" for g in facts.nvidia.gpus})) or None,
        "matmul_fp32_tflops": gpu_mm[0].tflops if gpu_mm else None,
        "matmul_device": gpu_mm[0].device if gpu_mm else None,
    }


def fleet_table(nodes: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Differences between nodes and the slowest one (pure).

    ``differences``: field -> {value: [ranks]} for every field of :data:`FLEET_FIELDS` that is
    not the same everywhere. ``slowest``: the rank with the lowest quick fp32 matmul TFLOP/s.
    """
    present = [dict(n, rank=n.get("rank", i)) for i, n in enumerate(nodes) if isinstance(n, Mapping)]
    diffs: dict[str, dict[str, list[int]]] = {}
    for key in FLEET_FIELDS:
        seen: dict[str, list[int]] = {}
        for n in present:
            seen.setdefault(str(n.get(key)), []).append(int(n["rank"]))
        if len(seen) > 1:
            diffs[key] = seen
    timed = [n for n in present if n.get("matmul_fp32_tflops")]
    slowest = min(timed, key=lambda n: n["matmul_fp32_tflops"]) if len(timed) > 1 else None
    return {
        "nodes": present,
        "differences": diffs,
        "slowest_rank": slowest["rank"] if slowest else None,
        "slowest_ratio": round(slowest["matmul_fp32_tflops"] / max(n["matmul_fp32_tflops"] for n in timed), 3) if slowest else None,
    }


ProgressFn = Callable[[str], None]
