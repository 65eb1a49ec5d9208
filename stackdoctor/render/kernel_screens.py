"""The ``kernels`` screens: the results table, the allreduce sweep and chart, the fleet table, the findings,
and allreduce's progress while it runs.

Every table fits the console's width without cutting a cell: short headers with the units in them
(``GFLOP/s``, ``µs``, ``GB/s``), one unit per column, and, where the width is short (80 columns), the
least needed columns left out (the time, derivable from the rate; the element count, from the size)
until the table's narrowest layout fits. Text cells (an error) wrap; numbers are never cut.
Kernel rates are the median of a few timed runs with their spread (``±4%``: half the min-max range).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

__all__ = ["NOISY_PCT", "SweepProgress", "kernel_rate", "ms_cells", "print_kernels", "spread_pct"]


def spread_pct(r: Any) -> float | None:
    """Half the min-max range of a result's timed runs, in % of the median (None with fewer than two runs)."""
    lo, hi, mid = getattr(r, "tflops_min", None), getattr(r, "tflops_max", None), r.tflops
    if not (getattr(r, "runs", None) or 0) > 1 or lo is None or hi is None or not mid:
        return None
    return 100.0 * (hi - lo) / 2.0 / mid


def kernel_rate(r: Any) -> str:
    """``"183 GFLOP/s ±4%"``: the median rate and its spread (the ``check`` screen's rate cell)."""
    from stackdoctor.core.units import format_flops

    text = format_flops(r.tflops)
    pct = spread_pct(r)
    return f"{text} ±{pct:.0f}%" if text and pct is not None else text


# ---------------------------------------------------------------------------- fitting tables


@dataclass
class Column:
    header: str
    cells: list[Any]
    justify: str = "left"
    wrap: bool = False  # text that may wrap onto more lines (an error); numbers never do
    drop: int = 0  # 0: always shown; else left out first (1), then (2), ... where the width is short


WRAP_MIN = 12  # the narrowest a text column that wraps is made (a word longer than that folds)


def _plain(cell: Any) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


def _longest_line(text: str) -> int:
    from rich.cells import cell_len

    return max((cell_len(line) for line in text.split("\n")), default=0)


def _widths(c: Column) -> tuple[int, int]:
    """(narrowest, natural) width of a column: a number column is never narrower than its widest cell."""
    from rich.cells import cell_len

    head = _longest_line(c.header)
    natural = max([head, *(_longest_line(_plain(x)) for x in c.cells)])
    if not c.wrap:
        return natural, natural
    word = max((cell_len(w) for x in c.cells for w in _plain(x).split()), default=0)  # a size wraps between its words
    return max(head, min(natural, WRAP_MIN, word)), natural


def fit_table(console: Console, columns: Sequence[Column], width: int, dropped: list[str] | None = None, **table_args: Any) -> Table:
    """A table of ``columns`` that fits ``width`` without cutting a cell (no ``…``): droppable columns are
    left out, lowest ``drop`` first, until every number column has its widest cell's width and each
    text column at least :data:`WRAP_MIN` (text wraps, a long word folds). Where even the essential
    columns cannot fit (a very narrow terminal), everything folds rather than being cut."""
    del console  # (the widths are the cells' own: a table's measurement is clamped to the width it is given)
    order = sorted({c.drop for c in columns if c.drop})
    for level in [0, *order]:
        kept = [c for c in columns if not c.drop or c.drop > level]
        sizes = [_widths(c) for c in kept]
        spare = width - (sum(lo for lo, _ in sizes) + 3 * (len(kept) - 1))  # " │ " between columns
        if spare < 0:
            continue
        if dropped is not None:  # said under the table: a column is never left out silently
            dropped += [" ".join(c.header.split()) for c in columns if c not in kept]
        fixed = [lo for lo, _ in sizes]
        while spare > 0:  # the room left goes to the text columns, a character at a time, up to their natural width
            short = [k for k, c in enumerate(kept) if c.wrap and fixed[k] < sizes[k][1]]
            if not short:
                break
            for k in short[:spare]:
                fixed[k] += 1
            spare -= min(spare, len(short))
        return _table(kept, fixed, **table_args)
    return _table([c for c in columns if not c.drop], None, **table_args)


def _table(columns: Sequence[Column], widths: Sequence[int] | None, **table_args: Any) -> Table:
    table = Table(show_edge=False, pad_edge=False, **table_args)
    for k, c in enumerate(columns):
        table.add_column(c.header, justify=c.justify, no_wrap=not c.wrap and widths is not None, overflow="fold",  # type: ignore[arg-type]
                         width=widths[k] if widths is not None else None)
    rows = max((len(c.cells) for c in columns), default=0)
    for i in range(rows):
        table.add_row(*[c.cells[i] if i < len(c.cells) else "" for c in columns])
    return table


def _number(value: float) -> str:
    """Three significant figures, never in exponent form for the values a rate takes."""
    if value >= 100:
        return f"{value:.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 0.01:
        return f"{value:.2f}" if value >= 1 else f"{value:.3g}"
    return f"{value:.2g}"


def flops_unit(values: Sequence[float]) -> tuple[str, float]:
    """One unit for a column of TFLOP/s values, chosen by the largest: (name, divisor)."""
    top = max(values, default=0.0)
    if top >= 1.0:
        return "TFLOP/s", 1.0
    if top >= 1e-3:
        return "GFLOP/s", 1e-3
    return "MFLOP/s", 1e-6


def _size_cell(r: Any, t: Callable[..., str] | None = None) -> str:
    """``1024³`` for an n x n x n matmul; compile's element count with its unit ("4096 elements"); other sizes as the
    kernel gave them."""
    size = r.size or ""
    parts = size.split("x")
    if len(parts) == 3 and len(set(parts)) == 1 and parts[0].isdigit():
        return f"{parts[0]}³"
    if t is not None and r.kernel == "compile" and size.isdigit():  # a 1-D tensor of that many elements
        return t("k_size_elements", n=size)
    return size


NOISY_PCT = 25.0  # a spread (half the min-max range of the timed runs) above this % of the median is a noisy run


def ms_cells(values: Sequence[float | None]) -> list[str]:
    """Milliseconds with one precision for the whole column: as many decimals as the smallest value needs for two
    significant figures (0 to 4), so ``0.018``, ``0.820`` and ``8.000`` line up instead of ``0.0182``, ``0.82``, ``8.00``."""
    import math

    shown = [v for v in values if v]
    smallest = min(shown, default=1.0)
    decimals = max(0, min(4, 1 - math.floor(math.log10(smallest))))
    return [f"{v:.{decimals}f}" if v else "" for v in values]


def _spread_cell(r: Any) -> Text:
    """The spread as a number, in yellow when the run was noisy (said under the table)."""
    pct = spread_pct(r)
    if pct is None:
        return Text("")
    return Text(f"{pct:.0f}%", style="yellow" if pct > NOISY_PCT else "")


# ---------------------------------------------------------------------------- the kernels screen


def _compute_columns(compute: list[Any], t: Callable[..., str]) -> list[Column]:
    unit, div = flops_unit([r.tflops for r in compute if r.tflops])
    cols = [
        Column(t("col_kernel"), [r.kernel for r in compute]),
        Column(t("col_device"), [r.device for r in compute]),
        Column(t("col_dtype"), [r.dtype or "" for r in compute]),
        # the size tells rows of one kernel, device and dtype apart (a matmul sweep): then it is never left out
        Column(t("col_size"), [_size_cell(r, t) for r in compute], wrap=True, drop=0 if len({r.size for r in compute}) > 1 else 3),
        Column(t("col_result"), [Text(t("result_ok"), style="green") if r.ok else Text(r.error or t("result_wrong"), style="red")
                                 for r in compute], wrap=True),
        Column(t("col_max_err"), [f"{r.max_error:.1e}" if r.max_error is not None else "" for r in compute], "right", drop=2),
        Column(t("k_col_ms"), ms_cells([r.time_s * 1e3 if r.time_s else None for r in compute]), "right", drop=1),
        Column(t("k_col_rate", unit=unit), [_number(r.tflops / div) if r.tflops else "" for r in compute], "right"),
        Column(t("k_col_spread"), [_spread_cell(r) for r in compute], "right"),
    ]
    if any(r.percent_of_peak is not None for r in compute):
        cols.append(Column(t("col_peak"), [f"{r.percent_of_peak:.0f}%" if r.percent_of_peak is not None else "" for r in compute],
                           "right", drop=4))
    return cols


def _compute_table(compute: list[Any], t: Callable[..., str], console: Console, width: int) -> list[Any]:
    """The results table (and what it left out, and what was noisy, said under it)."""
    cols = _compute_columns(compute, t)
    runs = {r.runs for r in compute if getattr(r, "runs", None)}
    title = t("k_title_runs", n=f"{min(runs)}–{max(runs)}" if len(runs) > 1 else runs.pop()) if runs else t("kernels_title")
    dropped: list[str] = []
    out: list[Any] = [fit_table(console, cols, width, dropped, title=title, title_justify="left")]
    if dropped:
        out.append(Text(t("k_dropped", width=width, cols=", ".join(dropped)), style="dim"))
    noisy = [p for r in compute if (p := spread_pct(r)) is not None and p > NOISY_PCT]
    if noisy:
        out.append(Text(t("k_noisy_note", n=len(noisy), limit=f"{NOISY_PCT:.0f}", worst=f"{max(noisy):.0f}"), style="yellow"))
    return out


def _allreduce_lines(ar: dict[str, Any], t: Callable[..., str], lang: str, console: Console, width: int, bar: str) -> list[Any]:
    """allreduce's head line, the backend's reason, the sweep table, its chart and the averages."""
    from stackdoctor.core.texts import sentence  # the worker's reason, written in English
    from stackdoctor.verify.runner import format_busbw_chart, format_size

    head = t("ar_head", backend=ar.get("backend") or "?", device=ar.get("device") or "?", n=ar.get("world_size"))
    if ar.get("iface"):
        head += t("ar_iface", iface=ar["iface"])
    out: list[Any] = [Text(head, style="bold")]
    if ar.get("backend_reason"):
        out.append(Text(t("ar_backend_reason", reason=sentence(ar["backend_reason"], lang))))
    rows = ar.get("rows") or []
    if not rows:
        return out
    oop, ip = [row["oop"] for row in rows], [row["ip"] for row in rows]
    cols = [
        Column(t("col_size"), [format_size(row["bytes"]) for row in rows], "right"),
        Column(t("col_count"), [str(row["count"]) for row in rows], "right", drop=1),
        Column(t("ar_k_oop_time"), [f"{o['time_us']:.1f}" for o in oop], "right"),
        Column(t("ar_k_algbw"), [f"{o['algbw']:.3f}" for o in oop], "right", drop=2),
        Column(t("ar_k_busbw"), [f"{o['busbw']:.3f}" for o in oop], "right"),
        Column(t("ar_k_ip_time"), [f"{i['time_us']:.1f}" for i in ip], "right"),
        Column(t("ar_k_algbw"), [f"{i['algbw']:.3f}" for i in ip], "right", drop=2),
        Column(t("ar_k_busbw"), [f"{i['busbw']:.3f}" for i in ip], "right"),
        Column(t("ar_col_wrong"), [str(int(o["wrong"]) + int(i["wrong"])) for o, i in zip(oop, ip, strict=True)], "right"),
    ]
    out.append(fit_table(console, cols, width))
    out.append(Text(t("ar_chart")))
    out += [Text(line) for line in format_busbw_chart(rows, width=max(10, min(30, width - 30)), bar=bar)]
    if ar.get("avg_busbw_gbs") is not None:
        extra = t("ar_of_link", pct=ar["percent_of_link"], rate=f"{ar['link_rate_gbps']:g}") if ar.get("percent_of_link") is not None else ""
        out.append(Text(t("ar_avg", avg=f"{ar['avg_busbw_gbs']:.3f}", max=f"{ar['max_busbw_gbs']:.3f}", extra=extra)))
    return out


def _fleet_lines(fl: dict[str, Any], t: Callable[..., str], console: Console, width: int) -> list[Any]:
    """The fleet table (a difference between nodes in yellow, the slowest node's rate in red) and its sentences."""
    from stackdoctor.core.units import format_flops
    from stackdoctor.verify.runner import fleet_kind

    nodes = fl.get("nodes") or []
    diffs = fl.get("differences") or {}

    def cell(n: dict[str, Any], key: str) -> Text:
        return Text(str(n.get(key) or "-"), style="yellow" if key in diffs else "")

    cols = [Column(t("col_rank"), [str(n.get("rank")) for n in nodes], "right"),
            Column(t("col_host"), [str(n.get("hostname") or "") for n in nodes], wrap=True)]
    kind = fleet_kind()
    runtime = ((kind.fleet_runtime, f"col_{kind.fleet_runtime}", 2),) if kind is not None and kind.fleet_runtime else ()
    for key, header, drop in (("driver", "layer_driver", 3), ("torch", "layer_torch", 0), *runtime, ("nccl", "col_nccl", 1)):
        cols.append(Column(t(header), [cell(n, key) for n in nodes], drop=0 if key in diffs else drop))  # a difference stays
    cols.append(Column(t("col_gpus"), [cell(n, "gpus") for n in nodes], wrap=True))
    cols.append(Column(t("col_matmul_fp32"), [Text(format_flops(n.get("matmul_fp32_tflops")) if n.get("matmul_fp32_tflops") else "-",
                                                   style="red" if n.get("rank") == fl.get("slowest_rank") else "") for n in nodes], "right"))
    out: list[Any] = [fit_table(console, cols, width, title=t("nodes_title"), title_justify="left")]
    for key, values in diffs.items():
        said = t("list_sep").join(t("fleet_on_ranks", value=v, ranks=",".join(map(str, rs))) for v, rs in values.items())
        out.append(Text(t("fleet_differs", key=key, values=said), style="yellow"))
    if fl.get("slowest_rank") is not None:
        out.append(Text(t("fleet_slowest", rank=fl["slowest_rank"], ratio=f"{fl['slowest_ratio']:.0%}")))
    return out


def _finding_lines(findings: list[Any], t: Callable[..., str], mk: dict[Any, Any]) -> list[Any]:
    """Each finding: its mark and code, its detail, and its fix never folded (copied as one line)."""
    from rich.cells import cell_len

    out: list[Any] = []
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
    return out


def print_kernels(kf: Any, findings: list[Any], lang: str = "en") -> None:
    """The kernels screen in ``lang``: results, the allreduce sweep and chart, the fleet table, findings.

    Not on a terminal (a pipe, a CI log), lines carry no trailing spaces and fix commands are
    never folded, so each one copies as one line."""
    from rich.console import Group

    from stackdoctor.core.console import make_console, marks
    from stackdoctor.core.texts import ui

    def t(key: str, /, **values: Any) -> str:
        return ui(key, lang, **values)

    console = make_console()  # in a pipe too: COLUMNS, else 80 (README: tables fit 80 columns)
    width = console.width
    mk = marks(console)
    out: list[Any] = []
    compute = [r for r in kf.results if r.kernel != "allreduce"]
    if compute:
        out += _compute_table(compute, t, console, width)
    ar = kf.allreduce
    if ar:
        out += _allreduce_lines(ar, t, lang, console, width, mk["bar"])
    fl = (ar or {}).get("fleet")
    if fl and ar.get("rank", 0) == 0:
        out += _fleet_lines(fl, t, console, width)
    if kf.error:
        out.append(Text(t("kernel_process", error=kf.error), style="red"))
    if findings:
        out += _finding_lines(findings, t, mk)
    elif kf.results:
        out.append(Text(t("kernels_all_ok"), style="green"))
    screen = Group(*out)  # each Text keeps its own no_wrap (console.print would merge them into one Text)
    if console.is_terminal or console.color_system is not None:
        console.print(screen, crop=False)
        return
    with console.capture() as captured:
        console.print(screen, crop=False)
    console.print(Text("\n".join(line.rstrip() for line in captured.get().splitlines())), soft_wrap=True)


# ---------------------------------------------------------------------------- progress


class _StatusLine:
    """Progress on stderr, one line per finished step: on a terminal one status line redrawn as each completes;
    elsewhere (a pipe, a CI log) one line per step, flushed as it completes. A closed stream never stops the work."""

    def __init__(self, lang: str, running: str, *, enabled: bool = True, stream: Any = None) -> None:
        self.lang = lang
        self.running = running
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._status: Any = None
        self._spinner = "dots"

    def __enter__(self) -> Any:
        if self.enabled and self.tty:
            from stackdoctor.core.console import make_console, marks

            console = make_console(stderr=True)
            self._spinner = marks(console)["spinner"]
            self._status = console.status(self.running, spinner=self._spinner)
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)
            self._status = None

    def show(self, text: str) -> None:
        """One step done; called from a capture thread."""
        try:
            if self._status is not None:
                self._status.update(text, spinner=self._spinner)  # (a new spinner redraws at once: each step is seen)
            elif not self.tty:
                self.stream.write(text + "\n")
                self.stream.flush()
        except Exception:  # a closed stream must not stop the sweep
            pass


class SweepProgress(_StatusLine):
    """allreduce's progress per message size."""

    def __init__(self, lang: str = "en", *, enabled: bool = True, stream: Any = None) -> None:
        from stackdoctor.core.texts import ui

        super().__init__(lang, ui("kernels_running_allreduce", lang), enabled=enabled, stream=stream)

    def line(self, data: dict[str, Any]) -> str:
        from stackdoctor.core.texts import ui
        from stackdoctor.verify.runner import format_size

        return ui("ar_progress", self.lang, i=data.get("index", "?"), n=data.get("total", "?"), size=format_size(int(data.get("bytes") or 0)),
                  time=f"{float(data.get('time_us') or 0.0):.1f}", busbw=f"{float(data.get('busbw') or 0.0):.3f}")

    def __call__(self, data: dict[str, Any]) -> None:
        """One size done (the worker's ``progress`` line)."""
        if self.enabled:
            self.show(self.line(data))


ProgressFn = Callable[[dict[str, Any]], None]


class ResultProgress(_StatusLine):
    """The compute kernels' progress per result (each matmul size, a conv), as allreduce's per size."""

    def __init__(self, lang: str, running: str, *, enabled: bool = True, stream: Any = None) -> None:
        super().__init__(lang, running, enabled=enabled, stream=stream)
        self.count = 0

    def line(self, data: dict[str, Any]) -> str:
        from stackdoctor.core.texts import ui
        from stackdoctor.verify.runner import result_from

        r = result_from(data)
        self.count += 1
        if r is None:
            return ui("k_progress_plain", self.lang, i=self.count, kernel=str(data.get("kernel", "?")))
        what = " ".join(x for x in (r.kernel, r.device, r.dtype or "", _size_cell(r)) if x)
        rate = kernel_rate(r) if r.ok else ui("k_progress_failed", self.lang)
        return ui("k_progress", self.lang, i=self.count, what=what, rate=rate)

    def __call__(self, data: dict[str, Any]) -> None:
        """One result done (the worker's ``result`` line)."""
        if self.enabled and not (data.get("extra") or {}).get("unavailable"):  # a device torch lacks: its one sentence says it
            self.show(self.line(data))


def print_interrupted(stop: Any, lang: str = "en") -> None:
    """Ctrl-C: what was finished before it (the compute results, the allreduce sizes done) on stdout, then the caller
    says "interrupted" (exit 130)."""
    kf = stop.facts
    if kf.results:
        kf.error = None
        print_kernels(kf, [], lang)
    sweep = SweepProgress(lang, enabled=False)
    for data in stop.sizes:
        print(sweep.line(data))
    sys.stdout.flush()
