"""``stackdoctor check``: probe (or replay) -> derive -> diagnose -> render -> exit code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from stackdoctor.errors import ExitCode, UsageError
from stackdoctor.facts import Facts
from stackdoctor.report import Finding, Report


@dataclass
class CheckOptions:
    python: str | None = None
    timeout_s: float = 5.0
    torch_timeout_s: float = 60.0
    kernels: bool = True
    compile: bool = False
    replay: str | None = None
    matrix_files: list[str] = field(default_factory=list)
    config: str | None = None
    lang: str | None = None
    only: list[str] | None = None
    skip: list[str] | None = None
    strict: bool = False
    worker_hook: str | None = None
    show_progress: bool = False


def matrix_files(explicit: list[str] | None) -> list[str]:
    """``--matrix FILE`` (repeatable) else ``STACKDOCTOR_MATRIX`` (os.pathsep-separated)."""
    if explicit:
        return list(explicit)
    env = os.environ.get("STACKDOCTOR_MATRIX", "")
    return [p for p in env.split(os.pathsep) if p]


def load_matrix(files: list[str]) -> Any:
    from stackdoctor.matrix import load_matrix as _load

    return _load(files)


def derive(facts: Facts, matrix: Any) -> None:
    """Fill what can be derived from the matrix, marking the source (GPU name -> compute capability)."""
    for gpu in facts.nvidia.gpus:
        if gpu.compute_capability is None and gpu.name:
            cc = matrix.gpu_compute_capability(gpu.name)
            if cc:
                gpu.compute_capability = cc
                gpu.sources["compute_capability"] = "compat_matrix/gpus.yaml (name lookup)"


def gather(opts: CheckOptions) -> Report:
    """Probe this machine, or load the report to replay."""
    if opts.replay:
        from stackdoctor.report import load_report

        report = load_report(opts.replay)
        report.replayed_from = opts.replay
        report.findings = []
        return report
    from stackdoctor.engine import run_probes, select_target
    from stackdoctor.probes import ProbeContext
    from stackdoctor.system import System

    system = System.from_env(timeout_s=opts.timeout_s)
    target = select_target(opts.python, os.environ)
    ctx = ProbeContext(
        system=system,
        target=target,
        timeout_s=opts.timeout_s,
        torch_timeout_s=opts.torch_timeout_s,
        kernels=opts.kernels,
        compile=opts.compile,
        use_nvml=not system.moved,
        worker_hook=opts.worker_hook,
    )
    if opts.show_progress and sys.stderr.isatty():
        with _delayed_spinner("probing the stack…"):
            return run_probes(ctx)
    return run_probes(ctx)


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
        from stackdoctor.console import make_console, marks

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


def judge(report: Report, opts: CheckOptions, matrix: Any = None) -> Report:
    """Findings for the report's facts: pure rules + kernel results + project requirements."""
    if matrix is None:
        matrix = load_matrix(matrix_files(opts.matrix_files))
    derive(report.facts, matrix)
    findings: list[Finding] = []
    from stackdoctor import diagnose as dx

    lang = dx.detect_lang(os.environ, opts.lang)
    findings.extend(dx.diagnose(report.facts, matrix, probes=report.probes, lang=lang))
    reqs = _requirements(report, opts)
    k = report.facts.kernels
    if k.ran or k.error or k.allreduce:
        from stackdoctor.kernels import annotate_peaks, kernel_findings

        annotate_peaks(k, report.facts, matrix)
        findings.extend(kernel_findings(k, min_busbw_gbs=getattr(reqs, "min_busbw", None)))
    if reqs is not None:
        from stackdoctor import config as cfg

        findings.extend(cfg.requirements_findings(report.facts, reqs))
        findings = cfg.apply_policy(findings, reqs)
        report.requirements = {"source": reqs.source, "values": reqs.to_data()}
    report.findings = dx.select(findings, opts.only, opts.skip)
    return report


def _requirements(report: Report, opts: CheckOptions) -> Any:
    from stackdoctor import config as cfg

    if opts.config:
        return cfg.discover_config(Path.cwd(), Path(opts.config))
    if opts.replay:
        if report.requirements and isinstance(report.requirements.get("values"), dict):
            return cfg.Requirements.from_data(report.requirements["values"], source=report.requirements.get("source"))
        return None
    return cfg.discover_config(Path.cwd(), None)


def build_report(opts: CheckOptions) -> Report:
    """Probe and judge. The matrix and the rules load on a thread while the probes run
    (the target's ``import torch`` takes seconds), so they add nothing to the wall time."""
    from concurrent.futures import ThreadPoolExecutor

    def prepare() -> Any:
        matrix = load_matrix(matrix_files(opts.matrix_files))
        import stackdoctor.kernels  # noqa: F401
        from stackdoctor import catalog, diagnose

        catalog.title("torch-ok", diagnose.detect_lang(os.environ, opts.lang))  # loads the texts

        return matrix

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare") as pool:
        pending = pool.submit(prepare)
        report = gather(opts)
        matrix = pending.result()  # a bad --matrix raises its MatrixError here, after the probes
    return judge(report, opts, matrix)


def exit_code(report: Report, strict: bool = False) -> ExitCode:
    sev = {f.severity for f in report.findings}
    if "fail" in sev or (strict and "warn" in sev):
        return ExitCode.FAILED
    return ExitCode.OK


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def register(app: typer.Typer) -> None:
    @app.command("check")
    def check(
        python: Annotated[Optional[str], typer.Option("--python", help="Target interpreter (default: active venv, conda env, or this Python).")] = None,
        json_: Annotated[bool, typer.Option("--json", help="Short for --format json.")] = False,
        fmt: Annotated[str, typer.Option("--format", help="human | json | markdown | github | junit")] = "human",
        output: Annotated[Optional[str], typer.Option("--output", "-o", help="Write the output to FILE instead of stdout.")] = None,
        timeout: Annotated[float, typer.Option("--timeout", help="Seconds each tool may take.", min=0.1)] = 5.0,
        torch_timeout: Annotated[float, typer.Option("--torch-timeout", help="Seconds the target may take to import torch (and run the quick kernels).", min=0.1)] = 60.0,
        no_kernels: Annotated[bool, typer.Option("--no-kernels", help="Skip the quick kernel pass.")] = False,
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
        if json_:
            fmt = "json"
        if fmt not in ("human", "json", "markdown", "github", "junit"):
            raise UsageError(f"unknown --format {fmt!r}; choose human, json, markdown, github or junit.")
        if lang is not None and lang not in ("en", "zh"):
            raise UsageError(f"unknown --lang {lang!r}; choose en or zh.")
        if list_checks:
            from stackdoctor import diagnose as dx

            for code, sev, layer, title in dx.list_checks(dx.detect_lang(os.environ, lang)):
                print(f"{code:<32} {sev:<5} {layer or '':<10} {title}")
            return ExitCode.OK
        opts = CheckOptions(
            python=python,
            timeout_s=timeout,
            torch_timeout_s=torch_timeout,
            kernels=not no_kernels,
            compile=compile_,
            replay=replay,
            matrix_files=matrix or [],
            config=config,
            lang=lang,
            only=_split(only),
            skip=_split(skip),
            strict=strict,
            worker_hook=os.environ.get("STACKDOCTOR_TEST_HOOK"),
            show_progress=fmt == "human" and output is None,
        )
        report = build_report(opts)
        from stackdoctor.catalog import detect_lang

        emit(report, fmt, output, verbose=verbose, lang=detect_lang(os.environ, lang))
        reqs = report.requirements or {}
        warnings_fail = bool((reqs.get("values") or {}).get("warnings_fail"))
        return exit_code(report, strict or warnings_fail)


def emit(report: Report, fmt: str, output: str | None, *, verbose: bool = False, lang: str = "en") -> None:
    """Write the report in ``fmt`` to stdout or ``output`` (``--json`` keeps stdout pure JSON)."""
    from stackdoctor.console import make_console
    from stackdoctor.output import write_output

    console = make_console()
    write_output(report, fmt, output, console=console, verbose=verbose, redact_default=False, lang=lang)
