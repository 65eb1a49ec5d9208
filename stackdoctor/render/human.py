"""The ``check`` screen: the stack as layers, the findings with their fixes, one summary line.

Renderers only draw: everything shown comes from the report. External text (tool output,
device names) is wrapped in :class:`rich.text.Text`, never parsed as markup.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from stackdoctor import kinds
from stackdoctor.core.console import UNICODE_MARKS, marks
from stackdoctor.model.facts import Facts
from stackdoctor.model.report import NOT_VERIFIED_STATUS, STATUS_RANK, Finding, Report, layer_status
from stackdoctor.model.report import status as status_of
from stackdoctor.render.witnesses import chosen_by, toolkit_lines, witness_rows
from stackdoctor.render.witnesses import driver_lines as witness_driver_lines

MARKS = UNICODE_MARKS
_MARKS: ContextVar[dict] = ContextVar("marks", default=MARKS)  # the console's glyphs while render_report draws
_WHOLE: ContextVar[bool] = ContextVar("whole_rows", default=False)  # a pipe: each tree row one line, never folded
_LANG: ContextVar[str] = ContextVar("lang", default="en")  # the screen's language while render_report draws
LABEL_CELLS = 9  # the tree labels' column, in terminal cells (a CJK character takes two)


@contextmanager
def speaking(lang: str) -> Iterator[None]:
    """The screen's lines (:func:`runtime_line`, :func:`cpu_line`, ...) in ``lang`` while inside (``report.html`` draws them too)."""
    token = _LANG.set(lang)
    try:
        yield
    finally:
        _LANG.reset(token)


def _t(key: str, /, **values: object) -> str:
    """An interface word in the screen's language (``locale/<lang>.yaml``, ``ui:``)."""
    from stackdoctor.core.texts import ui

    return ui(key, _LANG.get(), **values)


def _word(prefix: str, value: str) -> str:
    """``value`` (a closed-set word such as an env kind or a probe status) in the screen's language, or as is."""
    from stackdoctor.core.texts import texts

    key = f"{prefix}{value}"
    return _t(key) if key in texts("en")["ui"] else value


def _worst(findings: list[Finding], layer: str) -> str | None:
    return layer_status(findings, layer)  # a layer only a not-verified statement judged is marked not verified (issue 42)


def _label(title: str, value: str, sev: str | None, note: str = "") -> Text:
    mk = _MARKS.get()
    mark, style = mk.get(sev, mk[None])
    t = Text()
    t.append(f"{mark} ", style=f"bold {style}")
    t.append(title + " " * max(1, LABEL_CELLS - cell_len(title)), style="bold")
    t.append(value)
    if note:
        t.append(f"  {note}", style="dim")
    return t


def _available(f: Facts, kind: kinds.Accelerator | None) -> str:
    t = f.torch
    if t.import_error or t.import_error_kind:
        return _t("runtime_no_import")
    if t.imported is False:
        return _t("runtime_not_started")
    return _t("runtime_available") if kind is not None and kind.torch_available(t) else _t("runtime_not_available")


def runtime_line(f: Facts) -> str:
    """The runtime layer: the runtime the installed torch carries, in the words of the kind it is of
    (``Accelerator.runtime_words``), with whether torch reaches the devices."""
    t = f.torch
    if not t.installed or t.version is None:
        return _t("runtime_no_torch")
    for kind in kinds.ALL:
        said = kind.runtime_words(t, _t)
        if said is not None:
            words, follows = said
            return words + _t("clause_sep") + _available(f, kind) if follows else words
    if t.imported is False and not t.import_error:
        built = next((w for kind in kinds.ALL if (w := kind.files_build_words(f, _t))), None)
        if built:
            return built + _t("clause_sep") + _available(f, None)
        if t.variant and t.variant != kinds.CPU:
            return _t("runtime_variant_build", variant=t.variant) + _t("clause_sep") + _available(f, None)
    return _t("runtime_cpu_only")


def driver_lines(f: Facts) -> list[str]:
    """The driver layer: each accelerator's line from the reconciled view (the Markdown stack's source too)."""
    return [line for line, _ in witness_driver_lines(kinds.view_of(f), _t)]  # the report's facts (a renderer's input), read back


def cpu_line(f: Facts) -> str | None:
    """The CPU as torch sees it: model, cores, the vector extensions torch dispatches to, memory."""
    p = f.platform
    parts = [p.cpu_model or _t("cpu_model_unknown")] if (p.cpu_model or p.cpu_count or p.memory_total_mib) else []
    if p.cpu_count:
        parts.append(_t("cpu_cores", n=p.cpu_count))
    capability = (f.torch.config or {}).get("CPU capability usage")
    if capability:
        parts.append(_t("cpu_torch_uses", capability=capability))
    if p.memory_total_mib:
        parts.append(_t("cpu_memory", gib=f"{p.memory_total_mib / 1024:.1f}"))
    return _t("list_sep").join(parts) if parts else None


def build_tree(report: Report) -> Tree:
    f, fs = report.facts, report.findings
    py = f.python
    pyv = f"Python {py.version or '?'}"
    if py.free_threaded:
        pyv += _t("python_free_threaded")
    pyv += f"  {py.executable or ''}"
    note = ", ".join(w for w in (_word("env_", py.env_kind) if py.env_kind else "", chosen_by(py.selected_by, _t)) if w)
    root = Tree(_label(_t("layer_python"), pyv, _worst(fs, "python"), note), guide_style="dim")
    t = f.torch
    if t.installed and t.version:
        extras = [f"{name} {ver}" for name, ver in (("torchvision", t.torchvision_version), ("torchaudio", t.torchaudio_version), ("numpy", t.numpy_version)) if ver]
        tv = f"torch {t.version}  [{t.variant}]" + ("  " + _t("torch_cannot_import", error=t.import_error) if t.import_error else "")
        node = root.add(_label(_t("layer_torch"), tv, _worst(fs, "torch"), " ".join(extras)))
    elif t.import_error:
        node = root.add(_label(_t("layer_torch"), _t("torch_cannot_import", error=t.import_error), _worst(fs, "torch")))
    elif t.installed:
        node = root.add(_label(_t("layer_torch"), _t("torch_version_unknown"), _worst(fs, "torch")))
    else:
        node = root.add(_label(_t("layer_torch"), _t("not_installed"), _worst(fs, "torch")))  # no mark of its own: --skip torch-missing is heard
    for tool, path in toolkit_lines(f):
        node.add(_label(_t("layer_toolkit"), tool, _worst(fs, "toolkit"), path or ""))
    node = node.add(_label(_t("layer_runtime"), runtime_line(f), _worst(fs, "runtime")))
    for drv in driver_lines(f):
        node = node.add(_label(_t("layer_driver"), drv, _worst(fs, "driver")))
    gpu_sev = _worst(fs, "gpu")
    gpu = _t("layer_gpu")
    devices = kinds.device_lines(f, _t)
    for line in devices:
        node.add(_label(gpu, line, gpu_sev))
    if not devices:
        node.add(_label(gpu, _t("none_found"), gpu_sev))
    cpu = cpu_line(f)
    if cpu:
        node.add(_label(_t("layer_cpu"), cpu, _worst(fs, "platform")))
    return root


def kernels_table(report: Report) -> Table | None:
    from stackdoctor.render.kernel_screens import kernel_rate

    k = report.facts.kernels
    if not k.results:
        return None
    with_peak = any(r.percent_of_peak is not None for r in k.results)
    table = Table(title=_t("kernels_title"), title_justify="left", show_edge=False, pad_edge=False)
    cols = [(_t("col_kernel"), "left"), (_t("col_device"), "left"), (_t("col_dtype"), "left"), (_t("col_result"), "left"), (_t("col_rate"), "right")]
    if with_peak:
        cols.append((_t("col_peak"), "right"))
    for col, just in cols:
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    compute = [r for r in k.results if r.kernel != "allreduce"]
    ar = [r for r in k.results if r.kernel == "allreduce"]
    for r in compute:
        row: list[str | Text] = [
            r.kernel,
            r.device,
            r.dtype or "",
            Text(_t("result_ok"), style="green") if r.ok else Text(r.error or _t("result_wrong"), style="red"),
            kernel_rate(r),  # the median of a few runs, ± their spread
        ]
        if with_peak:
            row.append(f"{r.percent_of_peak:.0f}%" if r.percent_of_peak is not None else "")
        table.add_row(*row)
    if ar:  # the sweep a project's allreduce requirement ran: one row, its best bus bandwidth (the JSON has each size)
        bad = next((r for r in ar if not r.ok), None)
        bw = (k.allreduce or {}).get("max_busbw_gbs")
        rate = _t("ar_row_busbw", busbw=f"{bw:.3g}") if isinstance(bw, (int, float)) else ""
        row = [ar[0].kernel, ar[0].device, ar[0].dtype or "",
               Text(_t("result_ok"), style="green") if bad is None else Text(bad.error or _t("result_wrong"), style="red"), rate]
        if with_peak:
            row.append("")
        table.add_row(*row)
    return table


def noisy_note(report: Report) -> Text | None:
    """Under the quick kernel table, as under ``kernels``' own: a spread wider than the noisy limit says what it means."""
    from stackdoctor.render.kernel_screens import NOISY_PCT, spread_pct

    noisy = [p for r in report.facts.kernels.results if r.kernel != "allreduce" and (p := spread_pct(r)) is not None and p > NOISY_PCT]
    if not noisy:
        return None
    return Text(_t("k_noisy_note", n=len(noisy), limit=f"{NOISY_PCT:.0f}", worst=f"{max(noisy):.0f}"), style="yellow")


def findings_view(report: Report, verbose: bool, width: int | None = None) -> RenderableType:
    rows: list[RenderableType] = []
    problems = [f for f in report.findings if status_of(f) != "ok"]  # a not-verified statement too, with what verifies it
    problems.sort(key=lambda f: -STATUS_RANK.get(status_of(f), 0))
    for f in problems:
        mark, style = _MARKS.get()[status_of(f)]
        head = Text()
        head.append(f"{mark} ", style=f"bold {style}")
        head.append(f"{f.code}", style=f"bold {style}")
        head.append(f"  {f.title}")
        rows.append(head)
        if f.detail:
            rows.append(Padding(Text(f.detail), (0, 0, 0, 4)))
        if f.fix:
            # A fix is a command to copy: never folded at the console's width (a log keeps it on one
            # line; a terminal soft-wraps it and still copies one line). Printed with crop=False.
            for i, line in enumerate(f.fix.splitlines() or [""]):
                lead = " " * 4 + (_t("fix_prefix") if i == 0 else " " * cell_len(_t("fix_prefix")))
                command, sep, comment = line.partition("   # ")
                if width is not None and sep and cell_len(lead + line) > width:
                    # a terminal: the command stays one line to copy; its comment folds between words under it
                    # (the terminal would otherwise break it anywhere: `chec` / `k`)
                    rows.append(_fix_row(lead, command))
                    from stackdoctor.render.wrap import wrap

                    for part in wrap("# " + comment, width, indent=" " * cell_len(lead), hang=" " * (cell_len(lead) + 2)):
                        rows.append(Text(part, style="cyan", no_wrap=True, overflow="ignore"))
                    continue
                rows.append(_fix_row(lead, line))
    if verbose:
        for f in report.findings:
            if status_of(f) == "ok":
                rows.append(Text(f"{_MARKS.get()['ok'][0]} {f.code}  {f.title}", style="green"))
    return Group(*rows)


def _fix_row(lead: str, line: str) -> Text:
    fix = Text(" " * 4, no_wrap=True, overflow="ignore")
    fix.append(lead[4:], style="bold")
    fix.append(line, style="cyan")
    return fix


def summary_line(report: Report, lang: str = "en", strict: bool = False) -> Text:
    """``2 failed, 1 warning, 4 ok``; when only warnings make the exit code 1, it says why."""
    from stackdoctor.core.texts import ui
    from stackdoctor.pipeline import failing_reason

    c = report.counts
    parts = []
    if c.get("fail"):
        parts.append((ui("summary_failed", lang, n=c["fail"]), "bold red"))
    if c.get("warn"):
        parts.append((ui("summary_warning" if c["warn"] == 1 else "summary_warnings", lang, n=c["warn"]), "bold yellow"))
    unverified = c.get(NOT_VERIFIED_STATUS, 0)
    parts.append((ui("summary_ok", lang, n=c.get("ok", 0)), "green"))
    t = Text()
    sep = ui("summary_sep", lang)
    for i, (s, style) in enumerate(parts):
        if i:
            t.append(sep)
        t.append(s, style=style)
    if unverified:
        t.append(ui("summary_not_verified", lang), style="yellow")  # never "all ok" with a layer not verified
    reason = failing_reason(report, strict)
    if reason == "--strict":
        t.append(ui("summary_fails_strict", lang), style="bold red")
    elif reason is not None:
        source = str((report.requirements or {}).get("source") or "pyproject.toml")
        t.append(ui("summary_fails_warnings_fail", lang, source=source), style="bold red")
    return t


def probe_sources(report: Report, p: Any) -> tuple[str, bool]:
    """A probe's sources, joined, and whether it ran and found nothing of its kind (the screen's "none found")."""
    sub = getattr(report.facts, p.name, None) if p.name != "target" else report.facts.python
    own = report.facts.plugins.get(p.name)  # a plug-in accelerator's probe: its facts are plain data
    found = getattr(sub, "sources", {}) if sub is not None else (own.get("sources") or {}) if isinstance(own, dict) else {}
    sources = ", ".join(sorted({str(v) for v in found.values()}))
    owners = kinds.for_subject(p.name)
    nothing = (owners and not any(a.present(report.facts) for a in owners)) or ((hasattr(sub, "sources") or isinstance(own, dict)) and not sources)
    return sources, bool(nothing)


def probes_table(report: Report) -> Table:
    table = Table(title=_t("probes_title"), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column(_t("col_probe"), no_wrap=True)
    table.add_column(_t("col_status"), no_wrap=True)
    table.add_column(_t("col_time"), justify="right", no_wrap=True)
    table.add_column(_t("col_source"), overflow="fold")  # whole: long paths wrap, never cut
    for p in report.probes:
        style = {"ok": "green", "skipped": "dim"}.get(p.status, "red")
        sources, nothing = probe_sources(report, p)
        sources = sources.replace(" (absent)", _t("nc_absent"))  # a probe's word, shown in lang
        status = _word("status_", p.status)
        if p.status == "ok" and nothing:
            status, style = _t("none_found"), "dim"  # it ran and found no hardware of its kind: not "nvidia ok"
        table.add_row(p.name, Text(status, style=style), f"{p.duration_s:.2f}s", Text(p.error or sources))
    return table


def witnesses_table(report: Report) -> Table | None:
    """``check -v``: every reconciled value, the value kept and what each witness said (None when there is none)."""
    lang = _LANG.get()
    rows = witness_rows(kinds.view_of(report.facts), lang)
    if not rows:
        return None
    table = Table(title=_t("w_title"), title_justify="left", show_edge=False, pad_edge=False)
    table.add_column(_t("w_value"), no_wrap=True)
    table.add_column(_t("w_kept"))
    table.add_column(_t("w_from"))
    table.add_column(_t("w_said"))
    for r in rows:
        style = {"disagreement": "yellow", "evidence": "red"}.get(r.kind, "")
        table.add_row(Text(r.what, style=style), Text(r.value), Text(r.source, style="dim"), Text(r.witnesses))
    return table


def render_report(report: Report, console: Console, *, verbose: bool = False, lang: str = "en", strict: bool = False) -> None:
    """Draw the check screen on ``console`` in ``lang``.

    On a console that is not a terminal and has no colours (a pipe, a CI log, a file), the screen is
    drawn first and written without trailing spaces; fix commands are never folded (see
    :func:`findings_view`), so each one is one line a person can copy from a log at any width."""
    marks_token = _MARKS.set(marks(console))  # ASCII stand-ins where the console's encoding has no glyph
    lang_token = _LANG.set(lang)
    try:
        if console.is_terminal or console.color_system is not None:
            _render_report(report, console, verbose=verbose, lang=lang, strict=strict)
        else:
            whole = _WHOLE.set(True)
            try:
                with console.capture() as captured:
                    _render_report(report, console, verbose=verbose, lang=lang, strict=strict)
            finally:
                _WHOLE.reset(whole)
            text = "\n".join(line.rstrip() for line in captured.get().splitlines())
            console.print(Text(text), soft_wrap=True)
    finally:
        _LANG.reset(lang_token)
        _MARKS.reset(marks_token)


def _hang(row: str, width: int) -> list[str]:
    """One tree row in lines of at most ``width`` cells, folded between words (a path longer than a line at its
    ``/``) under a hanging indent at the row's value, so nothing of it (its ``venv`` note) starts at column 0."""
    if cell_len(row) <= width:
        return [row]
    lead = len(row) - len(row.lstrip(" │├└─|`-+"))  # the tree's guides
    label = re.match(r"\S+ +\S+ +", row[lead:])  # the mark and the label, padded to the value's column
    indent = row[:lead] + (label.group(0) if label else "")
    hang = " " * min(cell_len(indent), max(0, width // 2))
    return _fold_paths(row[len(indent):], width, indent, hang)


def _fold_paths(text: str, width: int, indent: str, hang: str) -> list[str]:
    """:func:`stackdoctor.render.wrap.wrap`, a path breaking after a ``/`` rather than inside a name."""
    from stackdoctor.render.wrap import wrap

    spaced = re.sub(r"(?<=\S)/(?=\S)", "/\x00 ", text)  # a place to break a path: after each /
    return [ln.replace("\x00 ", "").replace("\x00", "") for ln in wrap(spaced, width, indent=indent, hang=hang)]


def _safe_console_like(console: Console) -> Console:
    """A console that draws as ``console`` does (its encoding: ASCII guides where it has no box glyphs), wide
    enough that no row folds."""
    import io

    from stackdoctor.core.console import make_console

    same = io.TextIOWrapper(io.BytesIO(), encoding=console.encoding or "utf-8", errors="replace")
    return make_console(file=same, width=10_000)


def _print_tree(report: Report, console: Console) -> None:
    """The stack's tree. In a pipe or a log each row is folded by :func:`_hang` (a long path after a ``/``, its note
    on the row's hanging indent); on a terminal too when a row is wider than the terminal, where rich would fold the
    path inside a name and start its ``venv`` note at column 0 (the rows then lose their colours, not their shape)."""
    wide = _safe_console_like(console)
    with wide.capture() as drawn:
        wide.print(build_tree(report))
    rows = [row.rstrip() for row in drawn.get().splitlines()]
    if _WHOLE.get() or any(cell_len(row) > console.width for row in rows):
        folded = "\n".join(line for row in rows for line in _hang(row, console.width))
        console.print(Text(folded, no_wrap=True, overflow="ignore"), crop=False, no_wrap=True, overflow="ignore")
    else:
        console.print(build_tree(report))


def _render_report(report: Report, console: Console, *, verbose: bool, lang: str, strict: bool = False) -> None:
    if report.replayed_from:
        when = _t("replay_created", created=report.created_at) if report.created_at else ""
        line = Text(_t("replay_of", path=report.replayed_from, when=when), style="dim")
        if _WHOLE.get() or cell_len(line.plain) > console.width:  # a log, or too wide: the path folded after a /, never inside a name
            folded = "\n".join(_fold_paths(line.plain, console.width, "", "  "))
            console.print(Text(folded, style="dim"), crop=False, no_wrap=True, overflow="ignore")
        else:
            console.print(line)
    _print_tree(report, console)
    kt = kernels_table(report)
    if kt is not None:
        console.print()
        console.print(kt)
        note = noisy_note(report)
        if note is not None:
            console.print(note)
    if verbose:
        console.print()
        console.print(probes_table(report))
        wt = witnesses_table(report)
        if wt is not None:
            console.print()
            console.print(wt)
    if any(status_of(f) != "ok" for f in report.findings) or verbose:
        console.print()
        console.print(findings_view(report, verbose, None if _WHOLE.get() else console.width), crop=False)
    console.print()
    console.print(summary_line(report, lang, strict))
