"""The report as one HTML page a support engineer opens in a browser (``report.html``, ``check --format html``).

Self-contained: no network, no script, no external style or font. The page's own Content-Security-Policy forbids
everything but its inline style and ``data:`` images, so a browser that opens it asks nothing of the network even if
a value from the machine looked like a URL (every value is escaped text). Drawn from the report's data alone (a saved
``report.json`` renders the same): the stack as layers with their marks, the findings with their fixes and
explanations, the kernel rates against the device's peak and allreduce's bus bandwidth by message size as inline SVG
charts, the witnesses and the probes. Readable at a phone's width; the words from the catalogue (``--lang zh``).
The caller hands a report already redacted as the bundle is (:func:`stackdoctor.commands.report.bundle`).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

from stackdoctor import kinds
from stackdoctor.core.units import format_flops
from stackdoctor.model.report import Finding, Report, layer_status, status_key
from stackdoctor.model.report import status as status_of
from stackdoctor.render.markdown import format_counts
from stackdoctor.render.witnesses import chosen_by, witness_rows

__all__ = ["CSP", "render_html"]

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"
_ORDER = {"fail": 0, "warn": 1, "not-verified": 2, "ok": 3}
_MARK = {"fail": "✗", "warn": "!", "ok": "✓", "not-verified": "?", None: "·"}

_STYLE = """
:root{--fail:#c62828;--warn:#b26a00;--ok:#2e7d32;--dim:#5f6b7a;--line:#d8dee6;--bg:#f6f8fa;--ink:#1b2430;--bar:#3b6fb6;--peak:#dfe7f3}
*{box-sizing:border-box}
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","PingFang SC","Microsoft YaHei",sans-serif;color:var(--ink);background:#fff}
main{max-width:980px;margin:0 auto;padding:16px}
header{border-bottom:3px solid var(--ink);padding-bottom:8px;margin-bottom:8px}
h1{font-size:1.5em;margin:0 0 4px}
h2{font-size:1.15em;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid var(--line)}
.meta{color:var(--dim);font-size:.9em}
.summary{font-weight:600;font-size:1.05em;margin:6px 0}
.badge{display:inline-block;min-width:3.2em;text-align:center;border-radius:4px;padding:0 6px;color:#fff;font-weight:700;font-size:.85em}
.badge.fail{background:var(--fail)}.badge.warn{background:var(--warn)}.badge.ok{background:var(--ok)}.badge.none{background:var(--dim)}.badge.not-verified{background:var(--warn)}
ol.stack{list-style:none;margin:0;padding:0}
ol.stack li{display:flex;gap:10px;align-items:baseline;padding:6px 8px;border-left:4px solid var(--line);margin:0 0 4px;background:var(--bg);border-radius:0 4px 4px 0}
ol.stack li.fail{border-left-color:var(--fail)}ol.stack li.warn{border-left-color:var(--warn)}ol.stack li.ok{border-left-color:var(--ok)}ol.stack li.not-verified{border-left-color:var(--warn);border-left-style:dashed}
.layer{font-weight:700;min-width:5.5em}
.val{overflow-wrap:anywhere}
.note{color:var(--dim);font-size:.9em}
.finding{border:1px solid var(--line);border-left:5px solid var(--dim);border-radius:4px;padding:8px 12px;margin:0 0 10px}
.finding.fail{border-left-color:var(--fail)}.finding.warn{border-left-color:var(--warn)}.finding.ok{border-left-color:var(--ok)}.finding.not-verified{border-left-color:var(--warn);border-left-style:dashed}
.finding h3{font-size:1em;margin:0 0 4px;display:flex;gap:8px;flex-wrap:wrap;align-items:baseline}
.finding code.code{font-weight:700}
.detail{margin:4px 0;overflow-wrap:anywhere}
pre{background:#0f1720;color:#e6edf3;padding:8px 10px;border-radius:4px;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere;margin:6px 0}
details{margin:4px 0}summary{cursor:pointer;color:var(--bar)}
.explain{white-space:pre-wrap;color:#2a3441;margin:6px 0 0}
.oks{color:var(--dim)}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:.9em}
th,td{border-bottom:1px solid var(--line);padding:4px 6px;text-align:left;vertical-align:top;overflow-wrap:break-word}
.scroll table{min-width:34em}
th{background:var(--bg)}
svg{display:block;width:100%;height:auto;max-width:900px}
svg text{font-family:inherit;fill:var(--ink)}
footer{margin-top:32px;color:var(--dim);font-size:.85em}
@media (max-width:600px){body{font-size:14px}main{padding:10px}ol.stack li{flex-wrap:wrap;gap:2px 8px}.layer{min-width:0}}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _worst(findings: list[Finding], layer: str) -> str | None:
    return layer_status(findings, layer)  # a layer only a not-verified statement judged is marked not verified


def _stack(report: Report, say: Callable[..., str]) -> list[tuple[str, str, str, str | None]]:
    """(layer word, value, note, worst severity) top to bottom: python, torch, runtime, drivers, devices, CPU."""
    from stackdoctor.render.human import cpu_line, runtime_line

    f, fs = report.facts, report.findings
    py = f.python
    note = ", ".join(w for w in (say(f"env_{py.env_kind}") if py.env_kind else "", chosen_by(py.selected_by, say)) if w)
    rows = [(say("layer_python"), f"Python {py.version or '?'}  {py.executable or ''}", note, _worst(fs, "python"))]
    t = f.torch
    if t.installed and t.version:
        extras = " ".join(f"{n} {v}" for n, v in (("torchvision", t.torchvision_version), ("torchaudio", t.torchaudio_version), ("numpy", t.numpy_version)) if v)
        rows.append((say("layer_torch"), f"torch {t.version}  [{t.variant}]", extras, _worst(fs, "torch")))
    else:
        rows.append((say("layer_torch"), say("torch_cannot_import", error=t.import_error) if t.import_error else say("not_installed"), "", _worst(fs, "torch")))
    from stackdoctor.render.witnesses import driver_lines, toolkit_lines

    for tool, path in toolkit_lines(f):
        rows.append((say("layer_toolkit"), tool, path or "", _worst(fs, "toolkit")))
    rows.append((say("layer_runtime"), runtime_line(f), "", _worst(fs, "runtime")))

    for line, said in driver_lines(kinds.view_of(report.facts), say):
        rows.append((say("layer_driver"), line, said or "", _worst(fs, "driver")))
    devices = kinds.device_lines(f, say) or [say("none_found")]
    rows += [(say("layer_gpu"), line, "", _worst(fs, "gpu")) for line in devices]
    cpu = cpu_line(f)
    if cpu:
        rows.append((say("layer_cpu"), cpu, "", _worst(fs, "platform")))
    return rows


def _stack_html(report: Report, say: Callable[..., str]) -> list[str]:
    out = [f"<h2>{_e(say('html_stack'))}</h2>", '<ol class="stack">']
    for layer, value, note, sev in _stack(report, say):
        cls = sev or "none"
        out.append(f'<li class="{cls}"><span class="badge {cls}" title="{_e(sev or "")}">{_MARK.get(sev, "·")}</span>'
                   f'<span class="layer">{_e(layer)}</span><span class="val">{_e(value)}'
                   + (f' <span class="note">{_e(note)}</span>' if note else "") + "</span></li>")
    return out + ["</ol>"]


def _findings_html(report: Report, lang: str, say: Callable[..., str]) -> list[str]:
    from stackdoctor.core.texts import explain

    out = [f"<h2>{_e(say('html_findings'))}</h2>"]
    shown = sorted(report.findings, key=lambda x: _ORDER.get(status_of(x), 4))
    for f in shown:
        st = status_of(f)
        if st == "ok":
            continue  # a not-verified statement is drawn with what verifies it
        out.append(f'<section class="finding {_e(st)}" id="{_e(f.code)}">')
        out.append(f'<h3><span class="badge {_e(st)}">{_e(say(status_key(st)))}</span><code class="code">{_e(f.code)}</code>'
                   f"<span>{_e(f.title)}</span></h3>")
        if f.detail:
            out.append(f'<p class="detail">{_e(f.detail)}</p>')
        if f.fix:
            out.append(f"<div>{_e(say('html_fix'))}</div><pre><code>{_e(f.fix)}</code></pre>")
        text = explain(f.code, lang)
        if text:
            out.append(f"<details><summary>{_e(say('html_explain'))}</summary><p class=\"explain\">{_e(text.strip())}</p></details>")
        out.append("</section>")
    oks = [f for f in shown if status_of(f) == "ok"]
    if oks:
        out.append(f'<p class="oks"><span class="badge ok">{_e(say("sev_ok"))}</span> '
                   + ", ".join(f'<code id="{_e(f.code)}" title="{_e(f.title)}">{_e(f.code)}</code>' for f in oks) + "</p>")
    if not report.findings:
        out.append(f"<p>{_e(say('html_no_findings'))}</p>")
    return out


# ---------------------------------------------------------------------------- charts (inline SVG)


def _kernel_label(r: Any) -> str:
    return "  ".join(str(x) for x in (r.kernel, r.dtype, r.device, r.size) if x)


def kernels_svg(report: Report, say: Callable[..., str]) -> str | None:
    """One bar per kernel result that has a rate (its name above it): the rate, over a track as long as the device's
    peak where it is known, else against the fastest rate of its device."""
    rows = [r for r in report.facts.kernels.results if r.kernel != "allreduce" and r.tflops]
    if not rows:
        return None
    left, bar_w, row_h, top = 4, 340, 46, 4
    width, height = left + bar_w + 190, top + row_h * len(rows) + 22
    fastest: dict[str, float] = {}
    for r in rows:
        fastest[r.device] = max(fastest.get(r.device, 0.0), r.tflops or 0.0)
    out = [f'<svg viewBox="0 0 {width} {height}" style="max-width:{width}px" role="img" aria-label="{_e(say("html_kernels"))}" xmlns="http://www.w3.org/2000/svg">']
    for i, r in enumerate(rows):
        y = top + i * row_h
        scale = max(r.peak_tflops, r.tflops or 0.0) if r.peak_tflops else fastest[r.device]
        length = max(bar_w * (r.tflops or 0.0) / scale if scale else 0.0, 1.5)
        colour = "var(--bar)" if r.ok else "var(--fail)"
        out.append(f'<text x="{left}" y="{y + 13}" font-size="13">{_e(_kernel_label(r))}</text>')
        if r.peak_tflops:
            out.append(f'<rect x="{left}" y="{y + 18}" width="{bar_w}" height="18" fill="var(--peak)" rx="2"><title>{_e(say("html_peak"))} {_e(format_flops(r.peak_tflops))}</title></rect>')
        out.append(f'<rect x="{left}" y="{y + 18}" width="{length:.1f}" height="18" fill="{colour}" rx="2"><title>{_e(format_flops(r.tflops))}</title></rect>')
        said = format_flops(r.tflops) + (f" · {r.percent_of_peak:g}% {say('html_of_peak')}" if r.percent_of_peak is not None else "")
        out.append(f'<text x="{left + (bar_w if r.peak_tflops else length) + 6:.1f}" y="{y + 32}" font-size="12">{_e(said)}</text>')
    y = top + row_h * len(rows) + 14
    out.append(f'<rect x="{left}" y="{y - 10}" width="12" height="10" fill="var(--bar)"/><text x="{left + 16}" y="{y}" font-size="12">{_e(say("html_rate"))}</text>')
    out.append(f'<rect x="{left + 150}" y="{y - 10}" width="12" height="10" fill="var(--peak)"/><text x="{left + 166}" y="{y}" font-size="12">{_e(say("html_peak"))}</text>')
    return "\n".join(out + ["</svg>"])


def allreduce_svg(report: Report, say: Callable[..., str]) -> str | None:
    """In-place bus bandwidth (GB/s) by message size: one column per size, the sizes in order (a log scale by nature)."""
    from stackdoctor.verify.runner import format_size

    ar = report.facts.kernels.allreduce or {}
    rows = [r for r in ar.get("rows") or [] if isinstance(r, dict) and isinstance(r.get("ip"), dict) and isinstance(r.get("bytes"), int)]
    if not rows:
        return None
    vals = [float(r["ip"].get("busbw") or 0.0) for r in rows]
    peak = max(vals) or 1.0
    left, plot_h, col_w, top = 56, 180, 58, 28
    width, height = left + col_w * len(rows) + 10, top + plot_h + 70
    out = [f'<svg viewBox="0 0 {width} {height}" style="max-width:{width}px" role="img" aria-label="{_e(say("html_allreduce"))}" xmlns="http://www.w3.org/2000/svg">']
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{width - 6}" y1="{y:.1f}" y2="{y:.1f}" stroke="var(--line)"/>'
                   f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end" font-size="11">{peak * frac:.3g}</text>')
    for i, (r, v) in enumerate(zip(rows, vals, strict=True)):
        x = left + i * col_w + 6
        h = plot_h * v / peak
        wrong = int(r["ip"].get("wrong") or 0) + int((r.get("oop") or {}).get("wrong") or 0)
        colour = "var(--fail)" if wrong else "var(--bar)"
        out.append(f'<rect x="{x}" y="{top + plot_h - h:.1f}" width="{col_w - 12}" height="{max(h, 1.0):.1f}" fill="{colour}" rx="2">'
                   f'<title>{_e(format_size(r["bytes"]))}: {v:.3f} GB/s</title></rect>')
        cx = x + (col_w - 12) / 2
        out.append(f'<text x="{cx:.1f}" y="{top + plot_h - h - 4:.1f}" font-size="10" text-anchor="middle">{v:.3g}</text>')
        out.append(f'<text x="{cx:.1f}" y="{top + plot_h + 14}" font-size="10" text-anchor="end" transform="rotate(-45 {cx:.1f} {top + plot_h + 14})">{_e(format_size(r["bytes"]))}</text>')
    out.append(f'<text x="{left}" y="14" font-size="12">{_e(say("html_busbw_axis"))}</text>')
    return "\n".join(out + ["</svg>"])


def _charts_html(report: Report, say: Callable[..., str]) -> list[str]:
    out = []
    ks = kernels_svg(report, say)
    out.append(f"<h2>{_e(say('html_kernels'))}</h2>")
    out.append(f'<div class="scroll">{ks}</div><p class="note">{_e(say("html_kernels_note"))}</p>' if ks else f"<p class=\"note\">{_e(say('html_no_kernels'))}</p>")
    ar = report.facts.kernels.allreduce or {}
    ars = allreduce_svg(report, say)
    if ars:
        head = say("html_allreduce_head", backend=ar.get("backend") or "?", device=ar.get("device") or "?", n=ar.get("world_size") or "?")
        out += [f"<h2>{_e(say('html_allreduce'))}</h2>", f"<p>{_e(head)}</p>", f'<div class="scroll">{ars}</div>']
    return out


def _witnesses_html(report: Report, lang: str, say: Callable[..., str]) -> list[str]:
    rows = witness_rows(kinds.view_of(report.facts), lang)
    if not rows:
        return []
    heads = "".join(f"<th>{_e(say(k))}</th>" for k in ("w_value", "w_kept", "w_from", "w_said"))
    out = [f"<h2>{_e(say('md_witnesses'))}</h2>", '<div class="scroll"><table>', f"<thead><tr>{heads}</tr></thead><tbody>"]
    out += [f"<tr><td>{_e(r.what)}</td><td>{_e(r.value)}</td><td>{_e(r.source)}</td><td>{_e(r.witnesses)}</td></tr>" for r in rows]
    return out + ["</tbody></table></div>"]


def _probes_html(report: Report, say: Callable[..., str]) -> list[str]:
    if not report.probes:
        return []
    out = [f"<h2>{_e(say('html_probes'))}</h2>", '<div class="scroll"><table>',
           f"<thead><tr><th>{_e(say('html_probe'))}</th><th>{_e(say('html_status'))}</th><th>s</th><th>{_e(say('html_error'))}</th></tr></thead><tbody>"]
    for p in report.probes:
        out.append(f"<tr><td>{_e(p.name)}</td><td>{_e(p.status)}</td><td>{p.duration_s:.2f}</td><td>{_e(p.error or '')}</td></tr>")
    return out + ["</tbody></table></div>"]


def render_html(report: Report, *, lang: str = "en", redacted: bool = True, strict: bool = False) -> str:
    """The whole page (``report`` already redacted when ``redacted``, and made safe to draw: :func:`stackdoctor.render.output.shown`)."""
    from stackdoctor.core.texts import ui
    from stackdoctor.render import human

    def say(key: str, /, **values: object) -> str:
        return ui(key, lang, **values)

    with human.speaking(lang):  # the stack's lines are the screen's (render.human), in this page's language
        body = [*_stack_html(report, say), *_findings_html(report, lang, say), *_charts_html(report, say), *_witnesses_html(report, lang, say), *_probes_html(report, say)]
    meta = say("html_meta", version=report.stackdoctor_version, created=report.created_at)
    note = say("html_redacted") if redacted else say("html_not_redacted")
    head = [
        "<!DOCTYPE html>",
        f'<html lang="{"zh-CN" if lang == "zh" else "en"}">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{_e(say('html_title'))}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body><main>",
        f"<header><h1>{_e(say('html_title'))}</h1>",
        f'<div class="summary">{_e(format_counts(report, lang, strict))}</div>',
        f'<div class="meta">{_e(meta)} · {_e(note)}</div></header>',
    ]
    foot = [f"<footer>{_e(say('html_footer'))}</footer>", "</main></body></html>", ""]
    return "\n".join(head + body + foot)
