"""Run real kernels and collectives in the target interpreter, and turn what they did into facts.

Parent side of ``stackdoctor/_worker/sd_kernels.py`` and ``sd_allreduce.py``. The workers
run in the *target* interpreter (``<python> -I <worker> '<json args>'``) through
:meth:`System.run`, so a Python error, a segfault, an abort or a hang is a
:class:`CommandResult` and becomes facts (``KernelFacts.error`` / ``signal`` /
``stderr_tail``), never a crash or a hang of stackdoctor. torch is never imported here.

Pure parts (tested without torch): :func:`kernel_facts_from_run`, :func:`merge_allreduce`,
:func:`format_busbw_chart`, :func:`fleet_table`. Judging the results is the rules' business
(:mod:`stackdoctor.rules.kernel_results`); peaks are derived in :mod:`stackdoctor.reconcile`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from stackdoctor import kinds
from stackdoctor._worker import MARK, marked, worker_path
from stackdoctor.model.facts import Facts, KernelFacts, KernelResult, from_data
from stackdoctor.system import CommandResult, Started, System, signame

__all__ = [
    "KERNELS_SCHEMA",
    "AllreduceOptions",
    "fleet_fields",
    "fleet_kind",
    "fleet_table",
    "format_busbw_chart",
    "free_port",
    "kernel_facts_from_run",
    "merge_allreduce",
    "node_summary",
    "run_allreduce_local",
    "run_allreduce_rank",
    "KernelsInterrupted",
    "result_from",
    "run_kernels",
    "worker_path",
]

KERNELS_SCHEMA = "stackdoctor.kernels/1"
STDERR_TAIL_LINES = 20


def _tail(text: str, lines: int = STDERR_TAIL_LINES) -> str | None:
    kept = [ln for ln in text.splitlines() if MARK not in ln and ln.strip()]
    return "\n".join(kept[-lines:]) or None


def _result(data: Mapping[str, Any]) -> KernelResult | None:
    clean = {k: v for k, v in data.items() if k not in ("section", "elapsed_s")}
    try:
        return from_data(KernelResult, clean)
    except TypeError:
        return None


def result_from(data: Mapping[str, Any]) -> KernelResult | None:
    """One worker ``result`` line as a :class:`KernelResult` (None: not one)."""
    return _result(data)


# ---------------------------------------------------------------------------- kernels


def kernel_facts_from_run(res: CommandResult, mode: str = "full") -> KernelFacts:
    """KernelFacts from one run of ``sd_kernels.py``: every result printed before any failure is kept."""
    kf = KernelFacts(ran=False, mode=mode)
    done: dict[str, Any] | None = None
    for sec in marked(res.stdout):
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
        kf.signal = signame(res.signal)
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


def worker_device_specs() -> str | None:
    """The accelerator kinds' worker device specs (``accelerators.device_specs()``) as the workers read them."""
    specs = kinds.device_specs()
    return json.dumps(specs, sort_keys=True) if specs else None


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
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> KernelFacts:
    """The full kernel suite in ``python`` (a subprocess with a timeout); ``on_result`` gets each result (a matmul
    size, a conv) as the worker finishes it. Never raises but :class:`KernelsInterrupted` (Ctrl-C: the results so far)."""
    args = {"kernels": list(kernels), "devices": list(devices), "sizes": [int(s) for s in sizes], "min_time": min_time}
    env: dict[str, str | None] = {"STACKDOCTOR_TEST_HOOK": hook, "STACKDOCTOR_DEVICES": worker_device_specs()}
    seen: list[dict[str, Any]] = []

    def got(sec: dict[str, Any]) -> None:
        seen.append(sec)
        if on_result is not None:
            with contextlib.suppress(Exception):  # a screen that cannot draw must not lose a result
                on_result(sec)

    try:
        res = system.run([python, "-I", str(worker_path("sd_kernels.py")), json.dumps(args)], timeout=timeout_s, env=env, parse_env=False,
                         on_stdout=_ProgressLines(got, "result"))
    except KeyboardInterrupt:
        kf = KernelFacts(ran=bool(seen), mode="full", results=[r for r in map(_result, list(seen)) if r is not None])
        raise KernelsInterrupted(kf) from None
    return kernel_facts_from_run(res, mode="full")


# ---------------------------------------------------------------------------- allreduce


QUICK_SWEEP = (8, 16 * 1024 * 1024, 8)  # min bytes, max bytes, factor: 8 sizes, 8 B .. 16 MiB, seconds on two cores
FULL_SWEEP = (8, 256 * 1024 * 1024, 2)  # nccl-tests' usual -b 8 -e 256M -f 2: 26 sizes (``--full``)


@dataclass
class AllreduceOptions:
    min_bytes: int = QUICK_SWEEP[0]
    max_bytes: int = QUICK_SWEEP[1]
    factor: int = QUICK_SWEEP[2]
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


class _ProgressLines:
    """A stderr (or stdout) sink: the worker's ``progress`` lines (one per message size done; ``section``: the
    compute kernels' ``result`` lines) passed on as they arrive."""

    def __init__(self, on_progress: Callable[[dict[str, Any]], None], section: str = "progress") -> None:
        self.on_progress = on_progress
        self.section = section
        self.pending = ""

    def __call__(self, text: str) -> None:
        self.pending += text
        while "\n" in self.pending:
            line, self.pending = self.pending.split("\n", 1)
            for sec in marked(line):
                if sec.get("section") == self.section:
                    self.on_progress(sec)


class KernelsInterrupted(KeyboardInterrupt):
    """Ctrl-C while kernels ran: the work already finished (``facts``: the compute results; ``sizes``: the allreduce
    message sizes done, as the worker reported them), for the screen to keep before "interrupted"."""

    def __init__(self, facts: KernelFacts, sizes: list[dict[str, Any]] | None = None) -> None:
        super().__init__()
        self.facts = facts
        self.sizes = list(sizes or [])


def _rank_outcome(rank: int, res: CommandResult) -> dict[str, Any]:
    """One rank's report, or a description of how its process failed."""
    secs = [s for s in marked(res.stdout) if s.get("section") == "allreduce"]
    if secs:
        out = {k: v for k, v in secs[-1].items() if k != "section"}
        out.setdefault("rank", rank)
        return out
    if res.status == "timeout":
        why = f"rank {rank} did not finish in {res.detail} s (killed)"
        return {"rank": rank, "status": "timeout", "error": why, "stderr_tail": _tail(res.stderr)}
    if res.signal is not None:
        why = f"rank {rank} was killed by {signame(res.signal)}"
        return {"rank": rank, "status": "failed", "error": why, "signal": signame(res.signal), "stderr_tail": _tail(res.stderr)}
    why = f"rank {rank}: " + (res.describe_failure() or "ended without reporting")
    return {"rank": rank, "status": "failed", "error": why, "stderr_tail": _tail(res.stderr)}


def _merged_status(ranks: Mapping[int, Mapping[str, Any]], world_size: int) -> tuple[str, set[int]]:
    """(ok | timeout | failed, the missing ranks): a rank named missing by any peer, or a rank that timed out, is a
    timeout; any other failing or unreported rank a failure."""
    missing: set[int] = set()
    for o in ranks.values():
        missing.update(int(m) for m in o.get("missing_ranks") or [])
    statuses = {o.get("status") for o in ranks.values()}
    if missing or "timeout" in statuses:
        return "timeout", missing or {r for r, o in ranks.items() if o.get("status") == "timeout"}
    if statuses != {"ok"} or len(ranks) < world_size:
        return "failed", missing
    return "ok", missing


def _why_not(ranks: Mapping[int, Mapping[str, Any]]) -> dict[str, Any]:
    """What a run that did not complete says: the first rank that failed by itself (not one stopped because of it),
    the first stderr tail, the first signal."""
    first = next((o for o in ranks.values() if o.get("status") not in ("ok", "stopped") and o.get("error")), None)
    first = first or next((o for o in ranks.values() if o.get("status") != "ok" and o.get("error")), None)
    out: dict[str, Any] = {"error": first.get("error") if first else "allreduce did not complete"}
    tails = [o.get("stderr_tail") for o in ranks.values() if o.get("stderr_tail")]
    if tails:
        out["stderr_tail"] = tails[0]
    sigs = [o["signal"] for o in ranks.values() if o.get("signal")]
    if sigs:
        out["signal"] = sigs[0]
    return out


def merge_allreduce(outcomes: Mapping[int, Mapping[str, Any]], world_size: int) -> dict[str, Any]:
    """One summary from the ranks that reported (pure). Status: ok | timeout | failed.

    A rank named missing by any peer, or whose process never reported, makes ``timeout``
    with ``missing_ranks``; otherwise any failing rank makes ``failed``."""
    ranks = dict(sorted(outcomes.items()))
    lead = ranks.get(0) or (next(iter(ranks.values())) if ranks else {})
    summary: dict[str, Any] = {k: v for k, v in lead.items() if k not in ("status", "error", "stderr_tail", "signal")}
    summary["world_size"] = world_size
    summary["ranks_reported"] = [r for r, o in ranks.items() if o.get("status") in ("ok", "timeout", "failed") and "signal" not in o]
    status, missing = _merged_status(ranks, world_size)
    summary["status"] = status
    summary["missing_ranks"] = sorted(missing)
    summary["errors"] = {str(r): o["error"] for r, o in ranks.items() if o.get("error")}
    if status != "ok":
        summary.update(_why_not(ranks))
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
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> KernelFacts:
    """``nproc`` ranks here on loopback (one process each), joined within ``opts.timeout_s``.

    ``on_progress`` gets rank 0's report of each message size as the sweep completes it.

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

        sink = _ProgressLines(on_progress) if on_progress is not None and rank == 0 else None
        res = system.run(_rank_argv(python, args, ()), timeout=outer, env={"STACKDOCTOR_TEST_HOOK": hook, "STACKDOCTOR_DEVICES": worker_device_specs()}, parse_env=False,
                         on_start=keep, on_stderr=sink)
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
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + outer + 10
        while any(t.is_alive() for t in threads) and time.monotonic() < deadline:
            if decided.wait(0.1):
                _stop_ranks(started, threads, outcomes, stopped, trigger[0], lock)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    except BaseException:  # Ctrl-C (or any exit) while ranks run: every rank stops with us, none runs on
        _kill_all(started, lock)
        raise
    return allreduce_kernel_facts(merge_allreduce(outcomes, nproc))


def _kill_all(started: Mapping[int, Started], lock: threading.Lock) -> None:
    """Kill the process tree of every rank started so far (each rank leads a session of its own,
    so the terminal's SIGINT never reaches it)."""
    with lock:
        handles = list(started.values())
    for handle in handles:
        try:
            handle.kill()
        except Exception:  # one rank's kill failing must not leave the others running
            pass


def _reported(res: CommandResult) -> bool:
    """Whether the worker printed its allreduce report (as opposed to dying or being killed)."""
    return any(s.get("section") == "allreduce" for s in marked(res.stdout))


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
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> KernelFacts:
    """This host's rank of a multi-host allreduce (``prefix``: e.g. ``ip netns exec NS``).

    ``node``: this host's :func:`node_summary`; when given, the ranks gather them (fleet table)."""
    args = {**opts.args(), "rank": rank, "world_size": world_size, "master_addr": master_addr, "master_port": master_port,
            "local_rank": rank if local_rank is None else local_rank}
    if node is not None:
        args["node"] = dict(node)
    res = system.run(_rank_argv(python, args, prefix), timeout=opts.timeout_s * 2 + 30, env={"STACKDOCTOR_TEST_HOOK": hook, "STACKDOCTOR_DEVICES": worker_device_specs()}, parse_env=False,
                     on_stderr=_ProgressLines(on_progress) if on_progress is not None else None)
    outcome = _rank_outcome(rank, res)
    summary = merge_allreduce({rank: outcome}, world_size)
    if isinstance(outcome.get("nodes"), list):
        summary["fleet"] = fleet_table(outcome["nodes"])
        summary.pop("nodes", None)
    if summary["status"] == "failed" and outcome.get("status") == "ok":
        summary["status"] = "ok"  # only this rank is here; its peers reported to themselves
        summary.pop("error", None)
    return allreduce_kernel_facts(summary)


# ---------------------------------------------------------------------------- chart


def format_size(n: int) -> str:
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def format_busbw_chart(rows: Sequence[Mapping[str, Any]], width: int = 40, bar: str = "█") -> list[str]:
    """busbw (in-place) by message size as text bars, one line per size (``bar``: the glyph;
    ``#`` on a console that cannot show a block, see :func:`stackdoctor.core.console.marks`)."""
    vals = [float((r.get("ip") or {}).get("busbw") or 0.0) for r in rows]
    top = max(vals, default=0.0) or 1.0
    lines = []
    for r, v in zip(rows, vals, strict=True):
        drawn = bar * max(0, int(round(width * v / top)))
        lines.append(f"{format_size(int(r.get('bytes') or 0)):>9} {drawn:<{width}} {v:8.3f} GB/s")
    return lines


# ---------------------------------------------------------------------------- fleet

def fleet_kind() -> kinds.Accelerator | None:
    """The kind whose driver, runtime and GPUs the fleet table compares: the first that declares a runtime column
    (:attr:`~stackdoctor.kinds.base.Accelerator.fleet_runtime`)."""
    return next((a for a in kinds.ALL if a.fleet_runtime), None)


def fleet_fields() -> tuple[str, ...]:
    """The fields of a node's summary the fleet table compares: driver, torch, the fleet kind's runtime, nccl, GPUs."""
    kind = fleet_kind()
    return ("driver", "torch", *((kind.fleet_runtime,) if kind is not None and kind.fleet_runtime else ()), "nccl", "gpus")


def node_summary(facts: Facts) -> dict[str, Any]:
    """What one node contributes to the fleet table (pure; JSON-ready)."""
    mm = [r for r in facts.kernels.results if r.kernel == "matmul" and r.dtype == "fp32" and r.tflops]
    gpu_mm = [r for r in mm if r.device.split(":", 1)[0] in kinds.device_types()] or mm
    kind = fleet_kind()
    driver, runtime, gpus = kind.fleet_node(facts) if kind is not None else (None, None, None)
    return {
        "hostname": facts.platform.hostname,
        "driver": driver,
        "torch": facts.torch.version,
        **({kind.fleet_runtime: runtime} if kind is not None and kind.fleet_runtime else {}),
        "nccl": facts.torch.nccl_version,
        "gpus": gpus,
        "matmul_fp32_tflops": gpu_mm[0].tflops if gpu_mm else None,
        "matmul_device": gpu_mm[0].device if gpu_mm else None,
    }


def fleet_table(nodes: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """Differences between nodes and the slowest one (pure).

    ``differences``: field -> {value: [ranks]} for every field of :func:`fleet_fields` that is
    not the same everywhere. ``slowest``: the rank with the lowest quick fp32 matmul TFLOP/s.
    """
    present = [dict(n, rank=n.get("rank", i)) for i, n in enumerate(nodes) if isinstance(n, Mapping)]
    diffs: dict[str, dict[str, list[int]]] = {}
    for key in fleet_fields():
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
