"""``stackdoctor kernels``: run real kernels (matmul, conv, compile) and allreduce in the target.

    stackdoctor kernels [matmul|conv|compile|allreduce ...] [--device D] [--json]
    stackdoctor kernels allreduce --nproc 3                       # ranks on this host: 8 B..16 MiB by 8 (--full: ..256 MiB by 2)
    stackdoctor kernels allreduce --rank 0 --world-size 2 --master-addr A --master-port P --iface IF
    torchrun --nproc-per-node 2 -m stackdoctor kernels allreduce  # RANK/WORLD_SIZE/... from the launcher

allreduce reports each message size as it completes (a status line on a terminal, one flushed line on
stderr in a pipe or CI log). The command only turns flags into a :class:`stackdoctor.pipeline.KernelRun`;
the pipeline runs it and judges it as ``check`` is judged (:func:`stackdoctor.pipeline.build_kernels_report`:
run -> gather -> reconcile -> judge), and the one judged report is drawn by :mod:`stackdoctor.render.kernel_screens`
and gives the exit code (:func:`stackdoctor.pipeline.exit_code`).

Exit code: 1 when a finding fails (wrong numbers, a crash, a timeout, busbw under
``--min-busbw``), or warns where the project sets ``warnings_fail`` (as ``check``), else 0. ``--json`` prints one ``stackdoctor.kernels/1`` document.
"""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any, Optional

import typer

from stackdoctor.core.errors import UsageError

KERNEL_NAMES = ("matmul", "conv", "compile", "allreduce")


def parse_size(text: str) -> int:
    """Bytes from ``8``, ``64K``, ``256M``, ``1G`` (binary multiples, like nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?B)?\s*", str(text))
    if not m:
        raise UsageError(f"{text!r} is not a size (try 8, 64K, 256M).")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def _launcher_env(env: Any) -> bool:
    return "RANK" in env and "WORLD_SIZE" in env


def _device_examples() -> list[str]:
    """One device of each kind that names one, as ``--device`` takes it ("cuda:0", "mps", "xpu:0"), for the help."""
    from stackdoctor import kinds

    return sorted({a.device_example for a in kinds.ALL if a.device_example})


def register(app: typer.Typer) -> None:
    @app.command("kernels")
    def kernels(
        which: Annotated[Optional[list[str]], typer.Argument(help="matmul | conv | compile | allreduce (default: matmul conv compile).")] = None,
        device: Annotated[Optional[list[str]], typer.Option("--device", help=f"{', '.join(['cpu', *_device_examples()])} (repeatable; default: every device).")] = None,
        json_: Annotated[bool, typer.Option("--json", help="Print one stackdoctor.kernels/1 JSON document.")] = False,
        python: Annotated[Optional[str], typer.Option("--python", help="Target interpreter (default: active venv, conda env, or this Python).")] = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds the kernel process (or a peer to join) may take.", min=0.1)] = 300.0,
        sizes: Annotated[Optional[str], typer.Option("--sizes", help="Matmul sizes N (N x N x N), comma-separated.")] = None,
        nproc: Annotated[Optional[int], typer.Option("--nproc", help="allreduce: spawn N ranks on this host.", min=1)] = None,
        rank: Annotated[Optional[int], typer.Option("--rank", help="allreduce across hosts: this host's rank.", min=0)] = None,
        world_size: Annotated[Optional[int], typer.Option("--world-size", help="allreduce across hosts: number of ranks.", min=1)] = None,
        master_addr: Annotated[Optional[str], typer.Option("--master-addr", help="Address of rank 0.")] = None,
        master_port: Annotated[Optional[int], typer.Option("--master-port", help="Port of rank 0's rendezvous store.")] = None,
        iface: Annotated[Optional[str], typer.Option("--iface", help="Network interface (sets GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME).")] = None,
        backend: Annotated[str, typer.Option("--backend", help="auto | gloo | nccl | xccl | tccl")] = "auto",
        min_bytes: Annotated[Optional[str], typer.Option("--min-bytes", help="Smallest allreduce message (8, 64K, 1M; default 8).")] = None,
        max_bytes: Annotated[Optional[str], typer.Option("--max-bytes", help="Largest allreduce message (default 16M; 256M with --full).")] = None,
        factor: Annotated[Optional[int], typer.Option("--factor", help="Each allreduce message this many times the last (default 2; the default sweep, without --min-bytes / --max-bytes / --full, uses 8).", min=2)] = None,
        full: Annotated[bool, typer.Option("--full", help="allreduce: nccl-tests' full sweep, 8 B to 256 MiB by factors of 2 (minutes on a few cores).")] = False,
        iters: Annotated[int, typer.Option("--iters", help="Timed allreduce calls per size (at most).", min=1)] = 20,
        min_busbw: Annotated[Optional[str], typer.Option("--min-busbw", help="Fail below this busbw: 20, 20GB/s or 160Gb/s.")] = None,
        over: Annotated[Optional[str], typer.Option("--over", help="thunderbolt: bind allreduce to the Thunderbolt interface.")] = None,
        fleet: Annotated[bool, typer.Option("--fleet/--no-fleet", help="Across hosts: probe every node and print one table of differences on rank 0.")] = True,
        lang: Annotated[Optional[str], typer.Option("--lang", help="en | zh (default from LC_ALL / LC_MESSAGES / LANG).")] = None,
    ) -> int:
        """Run real kernels and collectives in the target interpreter and check their numbers."""
        from stackdoctor import pipeline
        from stackdoctor.core.texts import LANGS, detect_lang, ui
        from stackdoctor.pipeline.engine import select_target, validate_python
        from stackdoctor.render.kernel_screens import ResultProgress, SweepProgress, print_interrupted, print_kernels
        from stackdoctor.rules import Gates
        from stackdoctor.system import System
        from stackdoctor.verify.runner import FULL_SWEEP, QUICK_SWEEP, AllreduceOptions, KernelsInterrupted

        if lang is not None and lang not in LANGS:
            raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
        lg = detect_lang(os.environ, lang)
        names = _kernel_names(which)
        env = os.environ
        wants_ar = "allreduce" in names or nproc is not None or rank is not None or over is not None or (not names and _launcher_env(env))
        compute = [n for n in names if n != "allreduce"] or ([] if names or wants_ar else ["matmul", "conv", "compile"])
        gate = _gate(min_busbw)
        if over is not None and over != "thunderbolt":
            raise UsageError(f"unknown --over {over!r}; only 'thunderbolt' is known.")
        size_list = _sizes(sizes)
        lo, hi = _byte_range(min_bytes, max_bytes, full)

        system = System.from_env()
        target = select_target(python, env)
        found = validate_python(target.python, system=system, selected_by=target.selected_by, timeout_s=min(timeout, 30.0))
        _torch_there(found, target, python)
        hook = env.get("STACKDOCTOR_TEST_HOOK")
        run = pipeline.KernelRun(python=target.python, compute=compute, devices=device or [], sizes=size_list, timeout_s=timeout, hook=hook)
        if wants_ar:
            quick = min_bytes is None and max_bytes is None and not full  # an explicit range keeps nccl-tests' factor 2
            opts = AllreduceOptions(min_bytes=lo, max_bytes=hi, factor=factor or (QUICK_SWEEP[2] if quick else FULL_SWEEP[2]), iters=iters,
                                    timeout_s=min(timeout, 600.0), backend=backend, device=None, iface=iface)
            run.allreduce = _allreduce_run(system, target, opts, device, over, nproc, rank, world_size, master_addr, master_port, fleet, python)

        # as `check` is built: run (gather) -> reconcile -> judge by the kernel rules, the --min-busbw gate and the
        # project's policy; the screen, --json and the exit code all read the one judged report
        each = ResultProgress(lg, ui("kernels_running", lg, kernels=", ".join(compute), python=target.python), enabled=not json_)
        try:
            report = pipeline.build_kernels_report(
                run, pipeline.Options(python=python, lang=lg, gates=Gates(min_busbw_gbs=gate)), system,
                progress=lambda: each, on_result=each, sweep=lambda: SweepProgress(lg),
            )
        except KernelsInterrupted as stop:  # Ctrl-C: what was measured stays on the screen, then "interrupted" (exit 130)
            if not json_:
                print_interrupted(stop, lg)
            raise
        kf, findings = report.facts.kernels, report.findings  # kf: with the peaks reconcile derived
        _devices_there(device, kf, target.python)
        if json_:
            _print_json(kf, findings, target.python)
        else:
            print_kernels(kf, findings, lg)
        return pipeline.exit_code(report)


def _kernel_names(which: list[str] | None) -> list[str]:
    """The kernels named (``matmul,conv`` or separate words), each one known (a did-you-mean where it is close)."""
    names = [n.strip() for w in which or [] for n in w.split(",") if n.strip()]
    for n in names:
        if n not in KERNEL_NAMES:
            import difflib

            close = difflib.get_close_matches(n, KERNEL_NAMES, n=1, cutoff=0.6)
            if close:  # matmal -> matmul
                raise UsageError(f"unknown kernel {n!r}; did you mean {close[0]}? (choose from {', '.join(KERNEL_NAMES)}).")
            raise UsageError(f"unknown kernel {n!r}; choose from {', '.join(KERNEL_NAMES)}.")
    return names


def _torch_there(found: Any, target: Any, python: str | None) -> None:
    if found.torch is False:
        from stackdoctor.core.shell import format_command

        how = format_command(["stackdoctor", "install", *(["--python", target.python] if python else [])], windows=os.name == "nt")
        raise UsageError(f"torch is not installed in {target.python}; install it with: {how}")


def _byte_range(min_bytes: str | None, max_bytes: str | None, full: bool) -> tuple[int, int]:
    """allreduce's smallest and largest message: the flags', else the sweep's (quick, or --full)."""
    from stackdoctor.verify.runner import FULL_SWEEP, QUICK_SWEEP

    sweep = FULL_SWEEP if full else QUICK_SWEEP
    lo = parse_size(min_bytes) if min_bytes is not None else sweep[0]
    hi = parse_size(max_bytes) if max_bytes is not None else sweep[1]
    if lo > hi:
        raise UsageError(f"--min-bytes {min_bytes or lo} is larger than --max-bytes {max_bytes or hi}.")
    return lo, hi


def _gate(min_busbw: str | None) -> float | None:
    from stackdoctor.core.units import parse_bandwidth

    if min_busbw is None:
        return None
    try:
        return parse_bandwidth(min_busbw)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _sizes(sizes: str | None) -> list[int]:
    if not sizes:
        return []
    try:
        out = [int(s) for s in sizes.split(",") if s.strip()]
    except ValueError:
        raise UsageError(f"--sizes {sizes!r}: expected comma-separated integers.") from None
    if any(n < 1 for n in out):
        raise UsageError(f"--sizes {sizes!r}: a matmul size N (N x N x N) is a positive integer.")
    return out


def _devices_there(asked: list[str] | None, kf: Any, python: str) -> None:
    """A ``--device`` the target's torch does not have is the user's input to fix (exit 2, one sentence), not a kernel
    that failed: every result for it is the worker's ``unavailable`` one (``_worker/sd_kernels.py``, with the devices
    torch has in ``present``)."""
    from stackdoctor.core.shell import word

    quoted = word(python, windows=os.name == "nt")  # one word of the command it names (the template says it twice)
    for d in asked or []:
        results = [r for r in kf.results if r.device == d]
        if results and all(r.extra.get("unavailable") for r in results):
            present = ", ".join(results[0].extra.get("present") or []) or "none"
            raise UsageError(f"--device {d}: torch in {quoted} has no such device (it has: {present}); "
                             f"stackdoctor check --python {quoted} says whether its build supports one.")


def _allreduce_run(system: Any, target: Any, opts: Any, device: list[str] | None, over: str | None, nproc: int | None, rank: int | None,
                   world_size: int | None, master_addr: str | None, master_port: int | None, fleet: bool, python: str | None) -> Any:
    """The allreduce to run: on this host (``--nproc`` ranks), or as one rank across hosts (``--rank`` or a launcher's
    RANK / WORLD_SIZE), over the Thunderbolt interface with ``--over thunderbolt``."""
    from stackdoctor import pipeline

    env = os.environ
    link_gbps = None
    iface_reason = None
    if over == "thunderbolt" and opts.iface is None:
        opts.iface, link_gbps, iface_reason = _thunderbolt_iface(system, target)
        if opts.iface is None:
            raise UsageError(f"--over thunderbolt: {iface_reason}")
    for d in device or []:
        opts.device = d.split(":")[0]
    ar = pipeline.AllreduceRun(opts=opts, nproc=nproc or 2, master_port=master_port, link_gbps=link_gbps, iface_reason=iface_reason)
    r = rank if rank is not None else (int(env["RANK"]) if _launcher_env(env) and nproc is None else None)
    if r is not None:
        _across_hosts(ar, r, world_size, master_addr, master_port, fleet, python)
    return ar


def _across_hosts(ar: Any, r: int, world_size: int | None, master_addr: str | None, master_port: int | None, fleet: bool,
                  python: str | None) -> None:
    """``ar`` as rank ``r`` of a run across hosts: the world size, rank 0's address and port (flags, else the launcher's)."""
    env = os.environ
    ws = world_size or int(env.get("WORLD_SIZE", 0) or 0)
    if not ws:
        raise UsageError("--rank needs --world-size (or WORLD_SIZE from the launcher).")
    addr = master_addr or env.get("MASTER_ADDR")
    if not addr:
        raise UsageError("--rank needs --master-addr (or MASTER_ADDR from the launcher).")
    ar.rank, ar.world_size, ar.master_addr = r, ws, addr
    ar.master_port = master_port or int(env.get("MASTER_PORT", 0) or 0) or 29500
    ar.local_rank = int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None
    ar.node = _node(python) if fleet and ws > 1 else None


def _node(python: str | None) -> dict[str, Any] | None:
    """This host's fleet summary: platform, driver and torch probes plus the quick kernels (the pipeline's gather)."""
    try:
        from stackdoctor import pipeline
        from stackdoctor.verify.runner import fleet_kind, node_summary

        kind = fleet_kind()
        probes = ["target", "platform", *([kind.subject] if kind is not None else [])]  # the fleet kind's driver and GPUs
        return node_summary(pipeline.gather(pipeline.Options(python=python, kernels=True, probes=probes)).facts)
    except Exception as exc:  # the fleet table is a bonus: never cost the allreduce
        return {"error": f"{type(exc).__name__}: {exc}"}


def _thunderbolt_iface(system: Any, target: Any) -> tuple[str | None, float | None, str]:
    """(interface, link rate Gb/s, why) from the Thunderbolt probe."""
    try:
        from stackdoctor.model.probing import ProbeContext
        from stackdoctor.probes.thunderbolt import choose_thunderbolt_interface, probe

        out = probe(ProbeContext(system=system, target=target))
        tb = out.facts.get("thunderbolt")
    except Exception as exc:
        return None, None, f"the Thunderbolt probe is not available ({type(exc).__name__}: {exc})."
    if tb is None:
        return None, None, "the Thunderbolt probe found nothing."
    choice = choose_thunderbolt_interface(tb)
    if choice is None:
        return None, None, "no Thunderbolt network interface is up with an address (connect the cable; on macOS enable the Thunderbolt Bridge or give enX an address)."
    rate: float | None = None
    try:
        from stackdoctor.probes.thunderbolt import link_rate_gbps

        rate = link_rate_gbps(tb, choice)
    except Exception:
        rate = choice.speed_mbps / 1000.0 if choice.speed_mbps else None
    return choice.name, rate, f"{choice.name} ({choice.kind})" + (f", link {rate:g} Gb/s" if rate else "")


def _print_json(kf: Any, findings: list[Any], python: str) -> None:
    from stackdoctor import __version__
    from stackdoctor.model.facts import to_data
    from stackdoctor.verify.runner import KERNELS_SCHEMA

    doc = {"schema": KERNELS_SCHEMA, "stackdoctor_version": __version__, "target": python, **to_data(kf), "findings": to_data(findings)}
    from stackdoctor.core.console import write_stdout

    write_stdout(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
