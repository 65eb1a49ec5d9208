"""``stackdoctor kernels``: run real kernels (matmul, conv, compile) and allreduce in the target.

    stackdoctor kernels [matmul|conv|compile|allreduce ...] [--device D] [--json]
    stackdoctor kernels allreduce --nproc 3                       # ranks on this host
    stackdoctor kernels allreduce --rank 0 --world-size 2 --master-addr A --master-port P --iface IF
    torchrun --nproc-per-node 2 -m stackdoctor kernels allreduce  # RANK/WORLD_SIZE/... from the launcher

Exit code: 1 when a finding fails (wrong numbers, a crash, a timeout, busbw under
``--min-busbw``), else 0. ``--json`` prints one ``stackdoctor.kernels/1`` document.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Annotated, Any, Optional

import typer

from stackdoctor.errors import ExitCode, UsageError

KERNEL_NAMES = ("matmul", "conv", "compile", "allreduce")


def parse_size(text: str) -> int:
    """Bytes from ``8``, ``64K``, ``256M``, ``1G`` (binary multiples, like nccl-tests' -b/-e)."""
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?B)?\s*", str(text))
    if not m:
        raise UsageError(f"{text!r} is not a size (try 8, 64K, 256M).")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[m.group(2).lower()]


def _launcher_env(env: Any) -> bool:
    return "RANK" in env and "WORLD_SIZE" in env


def register(app: typer.Typer) -> None:
    @app.command("kernels")
    def kernels(
        which: Annotated[Optional[list[str]], typer.Argument(help="matmul | conv | compile | allreduce (default: matmul conv compile).")] = None,
        device: Annotated[Optional[list[str]], typer.Option("--device", help="cpu, cuda:0, mps, xpu:0 (repeatable; default: every device).")] = None,
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
        min_bytes: Annotated[str, typer.Option("--min-bytes", help="Smallest allreduce message (8, 64K, 1M).")] = "8",
        max_bytes: Annotated[str, typer.Option("--max-bytes", help="Largest allreduce message.")] = "256M",
        iters: Annotated[int, typer.Option("--iters", help="Timed allreduce calls per size (at most).", min=1)] = 20,
        min_busbw: Annotated[Optional[str], typer.Option("--min-busbw", help="Fail below this busbw: 20, 20GB/s or 160Gb/s.")] = None,
        over: Annotated[Optional[str], typer.Option("--over", help="thunderbolt: bind allreduce to the Thunderbolt interface.")] = None,
        fleet: Annotated[bool, typer.Option("--fleet/--no-fleet", help="Across hosts: probe every node and print one table of differences on rank 0.")] = True,
        lang: Annotated[Optional[str], typer.Option("--lang", help="en | zh (default from LC_ALL / LC_MESSAGES / LANG).")] = None,
    ) -> int:
        """Run real kernels and collectives in the target interpreter and check their numbers."""
        from stackdoctor.catalog import LANGS, detect_lang, ui
        from stackdoctor.engine import select_target, validate_python
        from stackdoctor.facts import KernelFacts
        from stackdoctor.kernels import AllreduceOptions, run_allreduce_local, run_allreduce_rank, run_kernels
        from stackdoctor.system import System
        from stackdoctor.units import parse_bandwidth

        if lang is not None and lang not in LANGS:
            raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
        lg = detect_lang(os.environ, lang)
        names = [n.strip() for w in which or [] for n in w.split(",") if n.strip()]
        for n in names:
            if n not in KERNEL_NAMES:
                raise UsageError(f"unknown kernel {n!r}; choose from {', '.join(KERNEL_NAMES)}.")
        env = os.environ
        wants_ar = "allreduce" in names or nproc is not None or rank is not None or over is not None or (not names and _launcher_env(env))
        compute = [n for n in names if n != "allreduce"] or ([] if names or wants_ar else ["matmul", "conv", "compile"])
        gate = None
        if min_busbw is not None:
            try:
                gate = parse_bandwidth(min_busbw)
            except ValueError as exc:
                raise UsageError(str(exc)) from None
        if over is not None and over != "thunderbolt":
            raise UsageError(f"unknown --over {over!r}; only 'thunderbolt' is known.")
        size_list: list[int] = []
        if sizes:
            try:
                size_list = [int(s) for s in sizes.split(",") if s.strip()]
            except ValueError:
                raise UsageError(f"--sizes {sizes!r}: expected comma-separated integers.") from None
        lo, hi = parse_size(min_bytes), parse_size(max_bytes)
        if lo > hi:
            raise UsageError(f"--min-bytes {min_bytes} is larger than --max-bytes {max_bytes}.")

        system = System.from_env()
        target = select_target(python, env)
        found = validate_python(target.python, system=system, selected_by=target.selected_by, timeout_s=min(timeout, 30.0))
        if found.torch is False:
            how = "stackdoctor install" + (f" --python {target.python}" if python else "")
            raise UsageError(f"torch is not installed in {target.python}; install it with: {how}")
        hook = env.get("STACKDOCTOR_TEST_HOOK")
        kf = KernelFacts(ran=False, mode="full")
        status = _Status(enabled=not json_)

        if compute:
            with status(ui("kernels_running", lg, kernels=", ".join(compute), python=target.python)):
                kf = run_kernels(system, target.python, kernels=compute, devices=device or [], sizes=size_list, timeout_s=timeout, hook=hook)

        if wants_ar:
            link_gbps = None
            iface_reason = None
            if over == "thunderbolt" and iface is None:
                iface, link_gbps, iface_reason = _thunderbolt_iface(system, target)
                if iface is None:
                    raise UsageError(f"--over thunderbolt: {iface_reason}")
            ar_dev = None
            for d in device or []:
                ar_dev = d.split(":")[0]
            opts = AllreduceOptions(min_bytes=lo, max_bytes=hi, iters=iters, timeout_s=min(timeout, 600.0), backend=backend, device=ar_dev, iface=iface)
            r = rank if rank is not None else (int(env["RANK"]) if _launcher_env(env) and nproc is None else None)
            with status(ui("kernels_running_allreduce", lg)):
                if r is not None:
                    ws = world_size or int(env.get("WORLD_SIZE", 0) or 0)
                    if not ws:
                        raise UsageError("--rank needs --world-size (or WORLD_SIZE from the launcher).")
                    addr = master_addr or env.get("MASTER_ADDR")
                    port = master_port or int(env.get("MASTER_PORT", 0) or 0) or 29500
                    if not addr:
                        raise UsageError("--rank needs --master-addr (or MASTER_ADDR from the launcher).")
                    lr = int(env["LOCAL_RANK"]) if "LOCAL_RANK" in env else None
                    node = _node(system, target) if fleet and ws > 1 else None
                    ar = run_allreduce_rank(system, target.python, rank=r, world_size=ws, master_addr=addr, master_port=port, opts=opts,
                                            local_rank=lr, hook=hook, node=node)
                else:
                    ar = run_allreduce_local(system, target.python, nproc or 2, opts, master_port=master_port, hook=hook)
            summary = ar.allreduce or {}
            if link_gbps:
                summary["link_rate_gbps"] = link_gbps
                if summary.get("max_busbw_gbs") is not None:
                    summary["percent_of_link"] = round(100.0 * summary["max_busbw_gbs"] * 8 / link_gbps, 1)
            if iface_reason:
                summary["iface_reason"] = iface_reason
            kf.ran = kf.ran or ar.ran
            kf.results.extend(ar.results)
            kf.allreduce = summary
            if ar.signal and not kf.signal:
                kf.signal = ar.signal

        facts, findings = _judge(kf, system, target, gate, lg)
        kf = facts.kernels  # with the peaks reconcile derived
        if json_:
            _print_json(kf, findings, target.python)
        else:
            _render(kf, findings, lg)
        return ExitCode.FAILED if any(f.severity == "fail" for f in findings) else ExitCode.OK


class _Status:
    """A spinner on stderr while a child runs (only on a terminal, never with --json)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled and sys.stderr.isatty()

    def __call__(self, text: str) -> Any:
        import contextlib

        if not self.enabled:
            return contextlib.nullcontext()
        from stackdoctor.console import make_console, marks

        console = make_console(stderr=True)
        return console.status(text, spinner=marks(console)["spinner"])


def _judge(kf: Any, system: Any, target: Any, gate: float | None, lang: str = "en") -> tuple[Any, list[Any]]:
    """The kernel facts reconciled (peaks from the matrix and NVML) and judged by the kernel rules."""
    from stackdoctor import rules
    from stackdoctor.engine import run_probes
    from stackdoctor.facts import Facts
    from stackdoctor.matrix import load_matrix
    from stackdoctor.probes import ProbeContext
    from stackdoctor.reconcile import reconcile

    facts = Facts(kernels=kf)
    if any(r.device.startswith("cuda") for r in kf.results):
        facts.nvidia = run_probes(ProbeContext(system=system, target=target, use_nvml=not system.moved), only=["nvidia"]).facts.nvidia
    matrix = load_matrix()
    facts = reconcile(facts, matrix)
    return facts, rules.judge(facts, matrix, lang=lang, gates=rules.Gates(min_busbw_gbs=gate), groups=["kernels"])


def _node(system: Any, target: Any) -> dict[str, Any] | None:
    """This host's fleet summary: platform, driver and torch probes plus the quick kernels."""
    try:
        from stackdoctor.engine import run_probes
        from stackdoctor.kernels import node_summary
        from stackdoctor.probes import ProbeContext

        ctx = ProbeContext(system=system, target=target, kernels=True, use_nvml=not system.moved)
        return node_summary(run_probes(ctx, only=["target", "platform", "nvidia"]).facts)
    except Exception as exc:  # the fleet table is a bonus: never cost the allreduce
        return {"error": f"{type(exc).__name__}: {exc}"}


def _thunderbolt_iface(system: Any, target: Any) -> tuple[str | None, float | None, str]:
    """(interface, link rate Gb/s, why) from the Thunderbolt probe."""
    try:
        from stackdoctor.probes import ProbeContext
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
    from stackdoctor.facts import to_data
    from stackdoctor.kernels import KERNELS_SCHEMA

    doc = {"schema": KERNELS_SCHEMA, "stackdoctor_version": __version__, "target": python, **to_data(kf), "findings": to_data(findings)}
    from stackdoctor.console import write_stdout

    write_stdout(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")


def _render(kf: Any, findings: list[Any], lang: str = "en") -> None:
    """The kernels screen in ``lang``: results, the allreduce sweep and chart, the fleet table, findings.

    Not on a terminal (a pipe, a CI log), lines carry no trailing spaces and fix commands are
    never folded, so each one copies as one line."""
    from rich.cells import cell_len
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from stackdoctor.catalog import ui
    from stackdoctor.console import make_console, marks
    from stackdoctor.kernels import format_busbw_chart, format_size
    from stackdoctor.units import format_flops

    def t(key: str, /, **values: Any) -> str:
        return ui(key, lang, **values)

    console = make_console()
    if not console.is_terminal:
        console = make_console(width=160)
    mk = marks(console)
    out: list[Any] = []
    compute = [r for r in kf.results if r.kernel != "allreduce"]
    if compute:
        tb = Table(title=t("kernels_title"), title_justify="left", show_edge=False, pad_edge=False)
        for key, just in (("col_kernel", "left"), ("col_device", "left"), ("col_dtype", "left"), ("col_size", "left"), ("col_result", "left"),
                          ("col_max_err", "right"), ("col_time", "right"), ("col_rate", "right"), ("col_peak", "right")):
            tb.add_column(t(key), justify=just, no_wrap=True)  # type: ignore[arg-type]
        for r in compute:
            tb.add_row(
                r.kernel, r.device, r.dtype or "", r.size or "",
                Text(t("result_ok"), style="green") if r.ok else Text(r.error or t("result_wrong"), style="red"),
                f"{r.max_error:.1e}" if r.max_error is not None else "",
                f"{r.time_s * 1e3:.3g} ms" if r.time_s else "",
                format_flops(r.tflops),
                f"{r.percent_of_peak:.0f}%" if r.percent_of_peak is not None else "",
            )
        out.append(tb)
    ar = kf.allreduce
    if ar:
        head = t("ar_head", backend=ar.get("backend") or "?", device=ar.get("device") or "?", n=ar.get("world_size"))
        if ar.get("iface"):
            head += t("ar_iface", iface=ar["iface"])
        out.append(Text(head, style="bold"))
        if ar.get("backend_reason"):
            from stackdoctor.catalog import sentence  # the worker's reason, written in English

            out.append(Text(t("ar_backend_reason", reason=sentence(ar["backend_reason"], lang))))
        rows = ar.get("rows") or []
        if rows:
            tb = Table(show_edge=False, pad_edge=False)
            for key in ("col_size", "col_count", "ar_col_oop_time", "ar_col_algbw", "ar_col_busbw", "ar_col_wrong",
                        "ar_col_ip_time", "ar_col_algbw", "ar_col_busbw", "ar_col_wrong"):
                tb.add_column(t(key), justify="right", no_wrap=True)
            for row in rows:
                o, i = row["oop"], row["ip"]
                tb.add_row(format_size(row["bytes"]), str(row["count"]),
                           f"{o['time_us']:.1f}", f"{o['algbw']:.3f}", f"{o['busbw']:.3f}", str(o["wrong"]),
                           f"{i['time_us']:.1f}", f"{i['algbw']:.3f}", f"{i['busbw']:.3f}", str(i["wrong"]))
            out.append(tb)
            out.append(Text(t("ar_chart")))
            for line in format_busbw_chart(rows, width=30, bar=mk["bar"]):
                out.append(Text(line))
            if ar.get("avg_busbw_gbs") is not None:
                extra = t("ar_of_link", pct=ar["percent_of_link"], rate=f"{ar['link_rate_gbps']:g}") if ar.get("percent_of_link") is not None else ""
                out.append(Text(t("ar_avg", avg=f"{ar['avg_busbw_gbs']:.3f}", max=f"{ar['max_busbw_gbs']:.3f}", extra=extra)))
    fl = (ar or {}).get("fleet")
    if fl and ar.get("rank", 0) == 0:
        tb = Table(title=t("nodes_title"), title_justify="left", show_edge=False, pad_edge=False)
        for key in ("col_rank", "col_host", "layer_driver", "layer_torch", "col_cuda", "col_nccl", "col_gpus", "col_matmul_fp32"):
            tb.add_column(t(key), no_wrap=True)
        diffs = fl.get("differences") or {}
        for n in fl.get("nodes") or []:
            cells: list[Any] = [str(n.get("rank")), str(n.get("hostname") or "")]
            for key in ("driver", "torch", "cuda", "nccl", "gpus"):
                cells.append(Text(str(n.get(key) or "-"), style="yellow" if key in diffs else ""))
            tf = n.get("matmul_fp32_tflops")
            cells.append(Text(format_flops(tf) if tf else "-", style="red" if n.get("rank") == fl.get("slowest_rank") else ""))
            tb.add_row(*cells)
        out.append(tb)
        for key, values in diffs.items():
            said = t("list_sep").join(t("fleet_on_ranks", value=v, ranks=",".join(map(str, rs))) for v, rs in values.items())
            out.append(Text(t("fleet_differs", key=key, values=said), style="yellow"))
        if fl.get("slowest_rank") is not None:
            out.append(Text(t("fleet_slowest", rank=fl["slowest_rank"], ratio=f"{fl['slowest_ratio']:.0%}")))
    if kf.error:
        out.append(Text(t("kernel_process", error=kf.error), style="red"))
    if findings:
        for f in findings:
            glyph, style = mk.get(f.severity, mk[None])
            head_line = Text()
            head_line.append(f"{glyph} {f.code}", style=f"bold {style}")
            head_line.append(f"  {f.title}")
            out.append(head_line)
            if f.detail:
                out.append(Text("    " + f.detail.replace("\n", "\n    ")))
            if f.fix:
                prefix = t("fix_prefix")
                for j, line in enumerate(f.fix.splitlines() or [""]):
                    out.append(Text("    " + (prefix if j == 0 else " " * cell_len(prefix)) + line, no_wrap=True, overflow="ignore"))
    elif kf.results:
        out.append(Text(t("kernels_all_ok"), style="green"))
    screen = Group(*out)  # each Text keeps its own no_wrap (console.print would merge them into one Text)
    if console.is_terminal or console.color_system is not None:
        console.print(screen, crop=False)
        return
    with console.capture() as captured:
        console.print(screen, crop=False)
    console.print(Text("\n".join(line.rstrip() for line in captured.get().splitlines())), soft_wrap=True)
