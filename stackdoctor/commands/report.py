"""``stackdoctor report``: the bundle a user attaches to a support ticket.

Writes ``report.json`` (facts, findings, kernel results, raw tool outputs) and ``report.md``
(summary table first, raw outputs in collapsed sections: pastes cleanly into a GitHub issue)
into DIR, default a new ``stackdoctor-report-<date>`` folder. Redacted by default (see
:mod:`stackdoctor.core.redact`); ``--no-redact`` opts out, loudly; ``--preview`` prints exactly what
would be written and writes nothing. Exit code as ``check``: 1 when a finding fails.
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from stackdoctor.commands import LANG_HELP, use_lang
from stackdoctor.core.errors import ExitCode, UsageError
from stackdoctor.model.report import Report

FILES = ("report.json", "report.md", "report.html")
NO_REDACT_WARNING = (
    "stackdoctor: warning: --no-redact: this bundle keeps host and user names, IP and MAC addresses, GPU UUIDs, "
    "serial numbers and any secrets found in the environment or in tool outputs; read it before you share it."
)


def _gather(python: str | None, timeout: float, kernels: bool, replay: str | None, config: str | None) -> Report:
    """The same pipeline as ``check``: probe (or replay), reconcile, judge with the requirements."""
    from stackdoctor import pipeline

    opts = pipeline.Options(
        python=python,
        timeout_s=timeout,
        kernels=kernels,
        replay=replay,
        config=config,
        worker_hook=os.environ.get("STACKDOCTOR_TEST_HOOK"),
        check_python=True,  # not Python 3 (perl, Python 2): asked beside the probes
    )
    return pipeline.build_report(opts)


def default_dir(base: Path, today: _dt.date | None = None) -> Path:
    """``stackdoctor-report-<date>``, or ``-2``, ``-3``... when that folder exists and is not empty."""
    stem = f"stackdoctor-report-{(today or _dt.date.today()).isoformat()}"
    cand = base / stem
    n = 1
    while cand.exists() and (not cand.is_dir() or any(cand.iterdir())):
        n += 1
        cand = base / f"{stem}-{n}"
    return cand


def _check_target(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"cannot write the report into {out}: it is a file, not a folder.")
    if not out.exists() and not out.parent.is_dir():  # as check -o: never a tree of folders nobody asked for
        raise UsageError(f"cannot write {out}: the folder {out.parent} does not exist.")
    if out.is_dir() and not force:
        clash = [name for name in FILES if (out / name).exists()]
        if clash:
            raise UsageError(f"{out} already holds {' and '.join(clash)}; choose another folder with -o, or add --force to overwrite.")


def bundle(report: Report, *, redact: bool, lang: str = "en") -> tuple[str, str, dict[str, int]]:
    """(report.json text, report.md text, replacements by kind) for ``report`` (:func:`bundle_files` adds the page)."""
    json_text, md_text, counts, _ = bundle_files(report, redact=redact, lang=lang)
    return json_text, md_text, counts


def bundle_files(report: Report, *, redact: bool, lang: str = "en") -> tuple[str, str, dict[str, int], str]:
    """(report.json, report.md, replacements by kind, report.html): the page drawn from the same redacted report."""
    from stackdoctor import kinds
    from stackdoctor.core.redact import Redactor, redact_report
    from stackdoctor.model.report import report_from_data
    from stackdoctor.render.markdown import render_markdown

    counts: dict[str, int] = {}
    if redact:
        r = Redactor()
        shown = report_from_data(redact_report(report.to_data(), r, ids=kinds.device_ids()), origin="redacted report")
        counts = r.counts
    else:
        shown = report
    from stackdoctor.render.html import render_html
    from stackdoctor.render.output import shown as drawn

    md = render_markdown(drawn(shown), redacted=redact, lang=lang)  # credentials ****, control characters escaped
    note = (
        "\n---\n_Made with `stackdoctor report`. Replay it with `stackdoctor check --replay report.json`._\n"
    )
    return shown.to_json() + "\n", md + note, counts, render_html(drawn(shown), lang=lang, redacted=redact)


def _counts_in(counts: dict[str, int], lang: str) -> str:
    """What redaction replaced, by kind, in ``lang`` (``3 个主机名，1 个 UUID``); a kind without a word keeps its name."""
    from stackdoctor.core.texts import texts, ui

    words = texts(lang)["ui"]
    return ui("list_sep", lang).join(
        ui("redact_count", lang, n=n, what=words.get("redact_kind_" + kind) or kind) for kind, n in sorted(counts.items())
    )


def register(app: typer.Typer) -> None:
    @app.command("report")
    def report_cmd(
        out_dir: Annotated[Optional[str], typer.Option("--output", "-o", help="Folder to write report.json and report.md into (default: a new stackdoctor-report-<date>).")] = None,
        preview: Annotated[bool, typer.Option("--preview", help="Print exactly what would be written; write nothing.")] = False,
        no_redact: Annotated[bool, typer.Option("--no-redact", help="Keep host names, addresses, UUIDs, serials and secrets (not recommended).")] = False,
        python: Annotated[Optional[str], typer.Option("--python", help="Target interpreter (default: active venv, conda env, or this Python).")] = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds each tool may take.", min=0.1)] = 5.0,
        no_kernels: Annotated[bool, typer.Option("--no-kernels", help="Skip the quick kernel pass.")] = False,
        replay: Annotated[Optional[str], typer.Option("--replay", help="Bundle a saved report.json instead of probing this machine.")] = None,
        config: Annotated[Optional[str], typer.Option("--config", help="Project requirements file (default: [tool.stackdoctor] found upward).")] = None,
        force: Annotated[bool, typer.Option("--force", help="Overwrite report.json / report.md already in the folder.")] = False,
        lang: Annotated[Optional[str], typer.Option("--lang", help=LANG_HELP)] = None,
    ) -> int:
        """Write the bundle to attach to a support ticket: report.json + report.md, redacted."""
        use_lang(lang)
        redact = not no_redact
        if out_dir is not None:
            out = Path(out_dir)
            _check_target(out, force)
        else:
            out = default_dir(Path.cwd())
        if python and not replay:
            from stackdoctor.pipeline.engine import validate_python

            validate_python(python, run=False)  # a folder, a missing path, not executable: one sentence, exit 2, at once
        if not redact:
            from stackdoctor.core.texts import detect_lang, sentence

            print("stackdoctor: " + sentence(NO_REDACT_WARNING.removeprefix("stackdoctor: "), detect_lang(os.environ)), file=sys.stderr)
        report = _gather(python, timeout, not no_kernels, replay, config)
        from stackdoctor.core.texts import detect_lang

        json_text, md_text, counts, html_text = bundle_files(report, redact=redact, lang=detect_lang(os.environ))
        if preview:
            sys.stdout.write(f"==> {out / 'report.json'} <==\n{json_text}\n==> {out / 'report.md'} <==\n{md_text}")
            sys.stdout.flush()
        else:
            from stackdoctor.render.output import write_text_file

            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise UsageError(f"cannot create the folder {out}: {exc.strerror or exc}.") from None
            write_text_file(out / "report.json", json_text)
            write_text_file(out / "report.md", md_text)
            write_text_file(out / "report.html", html_text)
            from stackdoctor.core.redact import describe_counts
            from stackdoctor.core.texts import sentence

            lang = detect_lang(os.environ)
            what = (describe_counts(counts) if lang == "en" else _counts_in(counts, lang)) if counts else sentence("nothing needed replacing", lang)
            print(sentence(f"Wrote {out / 'report.json'}, {out / 'report.md'} and {out / 'report.html'}.", lang), file=sys.stderr)
            if redact:
                print(sentence(f"Redacted ({what}); read report.md before you share it.", lang), file=sys.stderr)
        sev = {f.severity for f in report.findings}
        return ExitCode.FAILED if "fail" in sev else ExitCode.OK
