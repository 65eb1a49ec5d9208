"""``stackdoctor check``: flags -> :mod:`stackdoctor.pipeline` (probe or replay, reconcile, judge) -> render -> exit code."""

from __future__ import annotations

import os
import sys
from typing import Annotated, Any, Optional

import typer

from stackdoctor import pipeline
from stackdoctor.core.errors import ExitCode, UsageError
from stackdoctor.model.report import Report
from stackdoctor.pipeline import Options


class _delayed_spinner:  # noqa: N801 - used as a context manager
    """A spinner on stderr that appears only if the work takes longer than ``delay_s``."""

    def __init__(self, text: str, delay_s: float = 0.5) -> None:
        import threading

        self.text, self.delay_s = text, delay_s
        self._lock = threading.Lock()
        self._status: Any = None
        self._done = False
        self._timer = threading.Timer(delay_s, self._start)
        self._timer.daemon = True

    def _start(self) -> None:
        from stackdoctor.core.console import make_console, marks

        with self._lock:
            if not self._done:
                console = make_console(stderr=True)
                self._status = console.status(self.text, spinner=marks(console)["spinner"])
                self._status.start()

    def __enter__(self) -> _delayed_spinner:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True
            if self._status is not None:
                self._status.stop()


def spinner(show: bool, lang: str = "en") -> Any:
    """The progress context ``build_report`` shows while probing (only on a terminal)."""
    if show and sys.stderr.isatty():
        from stackdoctor.core.texts import ui

        return lambda: _delayed_spinner(ui("probing", lang))
    return None


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def _runtime_word() -> str:
    """The first kind's build in a word ("CUDA"), for the help's example of what importing torch initialises."""
    from stackdoctor import kinds

    return next((a.build_label for a in kinds.ALL if a.build_label), "GPU")


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check(
        python: Annotated[Optional[str], typer.Option("--python", help="Target interpreter (default: active venv, conda env, or this Python).")] = None,
        json_: Annotated[bool, typer.Option("--json", help="Short for --format json.")] = False,
        fmt_given: Annotated[Optional[str], typer.Option("--format", help="human | json | markdown | github | junit | html (default: human)")] = None,
        output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the output to FILE instead of stdout.")] = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds each tool may take.", min=0.1)] = 5.0,
        torch_timeout: Annotated[float, typer.Option("--torch-timeout", help="Seconds the target may take to import torch (and run the quick kernels).", min=0.1)] = 60.0,
        no_kernels: Annotated[bool, typer.Option("--no-kernels", help="Skip the quick kernel pass: torch is read from its files, not imported.")] = False,
        import_torch: Annotated[bool, typer.Option("--import-torch", help=f"Import torch in the target (its runtime: devices, {_runtime_word()} init) even with --no-kernels.")] = False,
        compile_: Annotated[bool, typer.Option("--compile", help="Add a torch.compile check (Triton on GPUs, C++ on CPU) to the kernel pass.")] = False,
        replay: Annotated[Optional[str], typer.Option("--replay", help="Re-diagnose a saved report.json without touching this machine.")] = None,
        matrix: Annotated[Optional[list[str]], typer.Option("--matrix", help="Layer a YAML compatibility matrix over the embedded one.")] = None,
        config: Annotated[Optional[str], typer.Option("--config", help="Project requirements file (default: [tool.stackdoctor] found upward).")] = None,
        lang: Annotated[Optional[str], typer.Option("--lang", help="en | zh (default from LC_ALL / LC_MESSAGES / LANG).")] = None,
        only: Annotated[Optional[list[str]], typer.Option("--only", help="Only these codes (comma-separated).")] = None,
        skip: Annotated[Optional[list[str]], typer.Option("--skip", help="Skip these codes (comma-separated).")] = None,
        list_checks: Annotated[bool, typer.Option("--list-checks", help="List every check code and exit.")] = False,
        strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
        verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show each probe's source and time.")] = False,
    ) -> int:
        """Probe every layer of the PyTorch stack and say what is wrong, with the fix."""
        fmt = fmt_given or "human"
        if output and fmt_given is None and not json_:  # -o x.json: the format follows the extension unless --format says otherwise
            from stackdoctor.render.output import format_for

            fmt = format_for(output)
        if json_ and fmt_given is not None and fmt_given != "json":
            raise UsageError(f"--json and --format {fmt_given} conflict: --json is short for --format json; give one of them.")
        if json_:
            fmt = "json"
        if fmt not in ("human", "json", "markdown", "github", "junit", "html"):
            raise UsageError(f"unknown --format {fmt!r}; choose human, json, markdown, github, junit or html.")
        if lang is not None and lang not in ("en", "zh"):
            raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
        if list_checks:
            from rich.cells import cell_len

            from stackdoctor.core.texts import layer_word, ui
            from stackdoctor.model.report import code_status, status_key
            from stackdoctor.rules import diagnose as dx

            lg = dx.detect_lang(os.environ, lang)
            rows = [(code, ui(status_key(code_status(code, sev)), lg), layer_word(layer, lg) if layer else "", title) for code, sev, layer, title in dx.list_checks(lg)]
            widths = [max(cell_len(r[i]) for r in rows) for i in range(3)]  # columns as wide as their longest cell
            for row in rows:
                print("  ".join(cell + " " * (w - cell_len(cell)) for cell, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
            return ExitCode.OK
        from stackdoctor.rules.diagnose import check_patterns

        only_codes, skip_codes = _split(only), _split(skip)
        check_patterns(only_codes, "--only", pipeline.lang_of(Options(lang=lang)))
        check_patterns(skip_codes, "--skip", pipeline.lang_of(Options(lang=lang)))
        if python and not replay:
            from stackdoctor.pipeline.engine import validate_python

            validate_python(python, run=False)  # a folder, a missing path, not executable: one sentence, exit 2, at once
        opts = Options(
            python=python,
            timeout_s=timeout,
            torch_timeout_s=torch_timeout,
            kernels=not no_kernels,
            import_torch=import_torch or not no_kernels,
            compile=compile_,
            replay=replay,
            matrix_files=matrix or [],
            config=config,
            lang=lang,
            only=only_codes,
            skip=skip_codes,
            strict=strict,
            worker_hook=os.environ.get("STACKDOCTOR_TEST_HOOK"),
            check_python=True,  # not Python 3 (perl, Python 2): asked beside the probes
        )
        report = pipeline.build_report(opts, progress=spinner(fmt == "human" and output is None, pipeline.lang_of(opts)))
        emit(report, fmt, output, verbose=verbose, lang=pipeline.lang_of(opts), strict=strict)
        code = pipeline.exit_code(report, strict)
        _said_unprinted(report, replay)
        return code


def _said_unprinted(report: Report, replay: str | None) -> None:
    """The lines a stopped install could not print were shown (the ``install-unprinted`` finding, on this machine):
    marked as said in their file, so the next check lets them go (issue 44)."""
    prefix = report.facts.python.env_prefix
    if replay or not prefix or not any(f.code == "install-unprinted" for f in report.findings):
        return
    from stackdoctor.install.talk import mark_said

    mark_said(prefix)


def emit(report: Report, fmt: str, output: str | None, *, verbose: bool = False, lang: str = "en", strict: bool = False) -> None:
    """Write the report in ``fmt`` to stdout or ``output`` (``--json`` keeps stdout pure JSON)."""
    from stackdoctor.render.output import write_output

    console = None
    if fmt == "human" and output is None:  # only the screen needs rich
        from stackdoctor.core.console import make_console

        console = make_console()
    write_output(report, fmt, output, console=console, verbose=verbose, redact_default=False, lang=lang, strict=strict)
    if output is not None:  # the one line that says what went where (stdout stays free for a pipe)
        from stackdoctor.core.texts import sentence

        print(sentence(f"stackdoctor: wrote the report ({fmt}) to {output}.", lang), file=sys.stderr)
