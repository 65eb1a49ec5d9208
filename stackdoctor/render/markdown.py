"""A report as GitHub-flavoured Markdown that pastes cleanly into an issue or a step summary.

Summary table first (severity, code, title), then the stack, findings with their fixes, the
project requirements, kernel results and probes, then the raw tool outputs, each in a
collapsed ``<details>`` section. External text is escaped: ``|`` and newlines in table cells,
HTML in ``<summary>``, and code fences are longer than any backtick run they enclose.
"""

from __future__ import annotations

import html
import re
from typing import Any

from stackdoctor import kinds
from stackdoctor.model.report import NOT_VERIFIED_STATUS, Finding, Report, status_key
from stackdoctor.model.report import status as status_of
from stackdoctor.render.witnesses import chosen_by, driver_lines, toolkit_lines, witness_rows

__all__ = ["MARKS", "format_counts", "render_markdown", "stack_rows"]

MARKS = {"fail": "❌ fail", "warn": "⚠️ warn", "ok": "✅ ok", "not-verified": "❔ not verified"}
_GLYPHS = {"fail": "❌", "warn": "⚠️", "ok": "✅", "not-verified": "❔"}
_ORDER = {"fail": 0, "warn": 1, "not-verified": 2, "ok": 3}
RAW_LIMIT_CHARS = 12_000  # per output; GitHub issue bodies stop at 65,536 characters
RAW_BUDGET_CHARS = 40_000  # all raw outputs together
_BACKTICKS = re.compile(r"`+")


def _t(key: str, lang: str, /, **values: Any) -> str:
    from stackdoctor.core.texts import ui

    return ui(key, lang, **values)


def _mark(shown: str, lang: str) -> str:
    """``❌ fail`` / ``⚠️ warn`` / ``❔ not verified`` / ``✅ ok`` in ``lang`` (a finding's :func:`~stackdoctor.model.report.status`)."""
    if shown not in _GLYPHS:
        return cell(shown)
    return f"{_GLYPHS[shown]} {_t(status_key(shown), lang)}"


def format_counts(report: Report, lang: str = "en", strict: bool = False) -> str:
    """``2 failed, 1 warning, 14 ok`` (and what was not verified; why the exit code is 1 when only warnings make it so)."""
    from stackdoctor.pipeline import failing_reason

    c = report.counts
    warn = c.get("warn", 0)
    parts = [
        _t("summary_failed", lang, n=c.get("fail", 0)),
        _t("summary_warning" if warn == 1 else "summary_warnings", lang, n=warn),
        _t("summary_ok", lang, n=c.get("ok", 0)),
    ]
    text = _t("summary_sep", lang).join(parts)
    if c.get(NOT_VERIFIED_STATUS):
        text += _t("summary_not_verified", lang)  # never "all ok" while a layer is not verified
    reason = failing_reason(report, strict)
    if reason == "--strict":
        text += _t("summary_fails_strict", lang)
    elif reason is not None:
        text += _t("summary_fails_warnings_fail", lang, source=str((report.requirements or {}).get("source") or "pyproject.toml"))
    return text


def cell(text: Any) -> str:
    """One table cell: no newlines, no bare pipes, no HTML."""
    if text is None or text == "":
        return "—"
    s = html.escape(_CONTROL.sub("", str(text)), quote=False)
    return s.replace("|", "\\|").replace("\r", " ").replace("\n", "<br>")


def code(text: str) -> str:
    """Inline code whose delimiter is longer than any backtick run inside."""
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    tick = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{tick}{pad}{text}{pad}{tick}"


def fence(text: str, lang: str = "text") -> str:
    text = _CONTROL.sub("", text)
    longest = max((len(m.group(0)) for m in _BACKTICKS.finditer(text)), default=0)
    f = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{f}{lang}\n{body}{f}"


def _sorted(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: _ORDER.get(status_of(f), 4))


def stack_rows(report: Report, lang: str = "en") -> list[tuple[str, str]]:
    """(layer, what was found) top to bottom: Python -> torch -> runtime -> driver -> GPUs -> CPU -> platform."""
    f = report.facts
    rows: list[tuple[str, str]] = []
    py = f.python
    if py.version or py.executable:
        by = chosen_by(py.selected_by, lambda key, /, **v: _t(key, lang, **v))
        env = f" ({', '.join(w for w in (py.env_kind or '', by) if w)})" if py.env_kind or by else ""
        rows.append(("Python", f"{py.version or '?'}{env} {py.executable or ''}".strip()))
    rows.append(("torch", _torch_row(f.torch, lang)))

    def say(key: str, /, **values: object) -> str:
        return _t(key, lang, **values)

    for drv, note in driver_lines(kinds.view_of(report.facts), say):  # the screen's driver lines, with what the driver's tool said
        rows.append((_t("md_layer_driver", lang), f"{drv} · {note}" if note else drv))
    for tool, path in toolkit_lines(f):
        rows.append((_t("md_layer_toolkit", lang), f"{tool} {path or ''}".strip()))
    for line in kinds.device_lines(f, say):
        rows.append(("GPU", line))
    return rows + _machine_rows(report, lang)


def _torch_row(t: Any, lang: str) -> str:
    if not t.installed:
        return _t("md_torch_not_importable", lang, error=t.import_error) if t.import_error else _t("not_installed", lang)
    from stackdoctor import kinds

    def say(key: str, /, **values: object) -> str:
        return _t(key, lang, **values)

    runtimes = [pair for kind in kinds.ALL for pair in kind.torch_versions(t)]  # ("CUDA", "12.6"), in the kinds' order
    extra = [f"{name} {v}" for name, v in (*runtimes, ("cuDNN", t.cudnn_version), ("NCCL", t.nccl_version), ("numpy", t.numpy_version)) if v]
    avail = []
    if t.import_error:
        avail.append(f"not importable: {t.import_error}")
    elif t.imported is False:
        avail.append("read from its files, not imported")
    avail += [words for kind in kinds.ALL if (words := kind.availability_words(t, say))]
    return " · ".join([f"{t.version or '?'} ({t.variant or '?'})", *extra, *avail])


def _machine_rows(report: Report, lang: str) -> list[tuple[str, str]]:
    """The CPU and platform rows of the stack."""
    f = report.facts
    rows: list[tuple[str, str]] = []
    p = f.platform
    capability = (f.torch.config or {}).get("CPU capability usage")
    cpu = [x for x in (p.cpu_model, p.cpu_count and _t("cpu_cores", lang, n=p.cpu_count), capability and _t("cpu_torch_uses", lang, capability=capability),
                       p.memory_total_mib and _t("cpu_memory", lang, gib=f"{p.memory_total_mib / 1024:.1f}")) if x]
    if cpu:
        rows.append(("CPU", " · ".join(str(x) for x in cpu)))
    plat = " · ".join(x for x in (p.os_name or p.system, p.machine, p.kernel and _t("md_kernel", lang, kernel=p.kernel), p.container, "WSL" if p.is_wsl else None) if x)
    if plat:
        rows.append((_t("md_layer_platform", lang), plat))
    return rows


def _summary_table(report: Report, lang: str = "en") -> list[str]:
    if not report.findings:
        return [f"_{_t('md_no_findings', lang)}_", ""]
    out = [f"| {_t('md_col_status', lang)} | {_t('md_col_check', lang)} | {_t('md_col_finding', lang)} |", "|---|---|---|"]
    for f in _sorted(report.findings):
        out.append(f"| {_mark(status_of(f), lang)} | `{cell(f.code)}` | {cell(_told_apart(f, report))} |")
    return [*out, ""]


def _told_apart(f: Any, report: Report) -> str:
    """A finding's title, or where its code is on several rows (each unmet requirement), its detail: the rows
    must say which is which."""
    again = sum(1 for g in report.findings if g.code == f.code) > 1
    return f.detail if again and f.detail else f.title


def _findings(report: Report, lang: str = "en") -> list[str]:
    out: list[str] = []
    for f in _sorted(report.findings):
        if status_of(f) == "ok":
            continue  # a not-verified statement is shown with what verifies it
        out.append(f"### {_mark(status_of(f), lang)} · {code(f.code)} — {_inline(_told_apart(f, report))}")
        out.append("")
        if f.detail:
            out.append(_inline(f.detail))
            out.append("")
        if f.fix:
            out.append(f"**{_t('md_fix', lang)}**")
            out.append("")
            command = f.fix.startswith(("stackdoctor", "pip", "uv ", "sudo", "export", "conda")) or re.match(r"(/|\./|~/|[A-Z_][A-Z0-9_]*=)\S", f.fix)
            out.append(fence(f.fix, "sh") if "\n" in f.fix or command else _inline(f.fix))  # a path-first command too
            out.append("")
    return out


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]])")
_LINE_START = re.compile(r"^(\s*)([#>+\-=|]|\d+[.)])", re.MULTILINE)


def _inline(text: str) -> str:
    """Free text (a finding's detail): shown as written, never read as Markdown or HTML."""
    t = _CONTROL.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    t = html.escape(t, quote=False)
    t = _MD_SPECIAL.sub(r"\\\1", t)
    return _LINE_START.sub(lambda m: m.group(1) + "\\" + m.group(2), t)


_LONG_LINE = 200  # a raw output line longer than this is made readable in Markdown (report.json keeps it whole)
_LONG_LIST = 12  # a JSON list longer than this shows its first items and how many more


def _readable(text: str) -> str:
    """``text`` with no line a reader must scroll for: a long one-line JSON document (the target worker's
    ``@@stackdoctor@@ {...}``, with hundreds of wheel tags) is indented, its long lists cut to their first
    items and a count; any other long line is wrapped at ``_LONG_LINE`` characters."""
    import json

    def shorten(value: object) -> object:
        if isinstance(value, list):
            if len(value) > _LONG_LIST:
                return [shorten(v) for v in value[:_LONG_LIST]] + [f"... {len(value) - _LONG_LIST} more in report.json"]
            return [shorten(v) for v in value]
        if isinstance(value, dict):
            return {k: shorten(v) for k, v in value.items()}
        return value

    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= _LONG_LINE:
            out.append(line)
            continue
        brace = line.find("{")
        try:
            doc = json.loads(line[brace:]) if brace >= 0 else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            out.append(line[:brace] + json.dumps(shorten(doc), indent=1, ensure_ascii=False))
        else:
            out.extend(line[i : i + _LONG_LINE] for i in range(0, len(line), _LONG_LINE))
    return "\n".join(out)


def _raw_outputs(report: Report, limit: int, budget: int = RAW_BUDGET_CHARS, lang: str = "en") -> list[str]:
    """Each tool run in a collapsed section; past ``budget`` characters only the command lines are listed."""
    out: list[str] = []
    used = 0
    left_out: list[str] = []
    for r in report.raw_outputs:
        if used >= budget:
            argv = r.get("argv") or []
            left_out.append(" ".join(str(a) for a in argv) if isinstance(argv, list) else str(argv))
            continue
        start = sum(len(x) + 1 for x in out)
        argv = r.get("argv") or []
        cmd = " ".join(str(a) for a in argv) if isinstance(argv, list) else str(argv)
        bits = []
        if r.get("status") and r.get("status") != "ok":
            bits.append(str(r["status"]))
        if r.get("returncode") is not None:
            bits.append(_t("md_exit", lang, code=r["returncode"]))
        if isinstance(r.get("duration_s"), (int, float)):
            bits.append(f"{r['duration_s']:.2f} s")
        out.append(f"<details><summary><code>{html.escape(cmd[:300])}</code>{' — ' + html.escape(', '.join(bits)) if bits else ''}</summary>")
        out.append("")
        for stream in ("stdout", "stderr"):
            text = r.get(stream)
            if not isinstance(text, str) or not text.strip():
                continue
            text = _readable(text)
            if len(text) > limit:
                text = text[:limit] + "\n" + _t("md_more_in_json", lang, n=len(text) - limit) + "\n"
            out.append(f"{stream}:")
            out.append("")
            out.append(fence(text))
            out.append("")
        if r.get("detail"):
            out.append(f"{_t('md_detail', lang)}: {_inline(str(r['detail']))}")
            out.append("")
        out.append("</details>")
        out.append("")
        used += sum(len(x) + 1 for x in out) - start
    if left_out:
        out.append(_t("md_left_out", lang, n=len(left_out)))
        out.append("")
        out.extend(f"- {code(c[:300])}" for c in left_out)
        out.append("")
    return out


def _witnesses(report: Report, lang: str) -> list[str]:
    """Which witness saw each reconciled value (driver, GPUs), the disagreements and the recognised messages."""
    rows = witness_rows(kinds.view_of(report.facts), lang)
    if not rows:
        return []
    heads = " | ".join(_t(k, lang) for k in ("w_value", "w_kept", "w_from", "w_said"))
    out = [f"<details><summary>{html.escape(_t('md_witnesses', lang))}</summary>", "", f"| {heads} |", "|---|---|---|---|"]
    out += [f"| {cell(r.what)} | {cell(r.value)} | {cell(r.source)} | {cell(r.witnesses)} |" for r in rows]
    return out + ["", "</details>", ""]


def render_markdown(
    report: Report,
    *,
    raw: bool = True,
    redacted: bool | None = None,
    raw_limit: int = RAW_LIMIT_CHARS,
    heading: str | None = None,
    lang: str = "en",
    strict: bool = False,
) -> str:
    """The whole report as Markdown in ``lang``. ``raw=False`` leaves out the raw tool outputs (``check``'s
    stdout and step summaries: short; the bundle ``stackdoctor report`` writes keeps them)."""
    lines = [f"## {heading or _t('md_heading', lang)}", "", _meta(report, redacted, lang, strict), ""]
    lines += _summary_table(report, lang)
    rows = stack_rows(report, lang)
    if rows:
        lines += [f"### {_t('md_stack', lang)}", "", f"| {_t('md_col_layer', lang)} | {_t('md_col_found', lang)} |", "|---|---|"]
        lines += [f"| {cell(a)} | {cell(b)} |" for a, b in rows]
        lines.append("")
    body = _findings(report, lang)
    if body:
        lines += [f"### {_t('md_findings', lang)}", "", *body]
    lines += _requirements(report, lang)
    lines += _kernels(report, lang)
    lines += _witnesses(report, lang)
    lines += _probes(report, lang)
    if raw and report.raw_outputs:
        lines += [f"### {_t('md_raw', lang)}", "", *_raw_outputs(report, raw_limit, lang=lang)]
    elif report.raw_outputs:
        lines += [_t("md_raw_elsewhere", lang, n=len(report.raw_outputs)), ""]
    return "\n".join(lines).rstrip() + "\n"


def _meta(report: Report, redacted: bool | None, lang: str, strict: bool) -> str:
    f = report.facts
    meta = [f"**{format_counts(report, lang, strict)}**", f"stackdoctor {report.stackdoctor_version}"]
    if report.created_at:
        meta.append(report.created_at)
    if f.platform.system or f.platform.machine:
        meta.append(" ".join(x for x in (f.platform.system, f.platform.machine) if x))
    if redacted is True:
        meta.append(_t("md_redacted", lang))
    elif redacted is False:
        meta.append(f"**{_t('md_not_redacted', lang)}**")
    return " · ".join(cell(m) if not m.startswith("**") else m for m in meta)


def _requirements(report: Report, lang: str) -> list[str]:
    if not report.requirements:
        return []
    values = report.requirements.get("values") if isinstance(report.requirements, dict) else None
    src = report.requirements.get("source") if isinstance(report.requirements, dict) else None
    lines = [f"### {_t('md_requirements', lang, source=code(str(src)) if src else _t('md_recorded', lang))}", ""]
    if isinstance(values, dict):
        set_values = {k: v for k, v in values.items() if v not in (None, [], False)}
        lines += [f"| {_t('md_col_requirement', lang)} | {_t('md_col_value', lang)} |", "|---|---|"]
        lines += [f"| `{cell(k)}` | {cell(v)} |" for k, v in set_values.items()]
    return lines + [""]


def _kernels(report: Report, lang: str) -> list[str]:
    k = report.facts.kernels
    if not (k.results or k.error):
        return []
    from stackdoctor.render.kernel_screens import kernel_rate

    lines = [f"### {_t('md_kernels', lang)}", ""]
    if k.error:
        lines += [_t("md_kernel_run_failed", lang, error=_inline(k.error)), ""]
    if not k.results:
        return lines
    cols = ("col_kernel", "col_device", "col_dtype", "col_result", "col_rate", "col_peak")
    lines += ["| " + " | ".join(_t(c, lang) for c in cols) + " |", "|---|---|---|---|---|---|"]
    for r in k.results:
        if r.kernel == "allreduce":
            continue  # one row for the sweep, below
        res = f"✅ {_t('result_ok', lang)}" if r.ok else f"❌ {r.error or _t('md_failed', lang)}"
        pp = f"{r.percent_of_peak:.0f}%" if r.percent_of_peak is not None else None
        lines.append(f"| {cell(r.kernel)} | {cell(r.device)} | {cell(r.dtype)} | {cell(res)} | {cell(kernel_rate(r))} | {cell(pp)} |")
    ar = [r for r in k.results if r.kernel == "allreduce"]
    if ar:  # the sweep a project's allreduce requirement ran: its best bus bandwidth (the JSON has each size)
        bad = next((r for r in ar if not r.ok), None)
        res = f"✅ {_t('result_ok', lang)}" if bad is None else f"❌ {bad.error or _t('md_failed', lang)}"
        bw = (k.allreduce or {}).get("max_busbw_gbs")
        rate = _t("ar_row_busbw", lang, busbw=f"{bw:.3g}") if isinstance(bw, (int, float)) else None
        lines.append(f"| allreduce | {cell(ar[0].device)} | {cell(ar[0].dtype)} | {cell(res)} | {cell(rate)} | {cell(None)} |")
    return lines + [""]


def _probes(report: Report, lang: str) -> list[str]:
    if not report.probes:
        return []
    from stackdoctor.render.human import probe_sources

    heads = ("col_probe", "col_status", "col_time", "md_col_error")
    lines = [f"<details><summary>{html.escape(_t('md_probes', lang))}</summary>", "", "| " + " | ".join(_t(c, lang) for c in heads) + " |", "|---|---|---|---|"]

    def status(p: Any) -> str:  # what the screen says: "none found" for a probe that ran and found nothing
        return _t("none_found", lang) if p.status == "ok" and probe_sources(report, p)[1] else p.status

    lines += [f"| {cell(p.name)} | {cell(status(p))} | {p.duration_s:.2f} s | {cell(p.error)} |" for p in report.probes]
    return lines + ["", "</details>", ""]
