"""The pipeline every command shares: gather (probe or replay) -> reconcile -> judge -> report.

- :func:`gather` runs the probes concurrently (:mod:`stackdoctor.pipeline.engine`), or loads a report to replay.
- :func:`stackdoctor.reconcile.reconcile` joins every witness into one view and derives what follows
  from the facts and the matrix (pure; redone on replay).
- :func:`judge` runs every declared rule (:mod:`stackdoctor.rules`) on the reconciled facts, with the
  project's requirements, then applies the project's policy and ``--only`` / ``--skip``.

Commands only turn flags into :class:`Options`, call :func:`build_report` (or the pieces), and render.
No command imports another. The matrix files (``--matrix`` or ``STACKDOCTOR_MATRIX``) are resolved in
one place, :func:`stackdoctor.matrix.user_matrix_paths`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackdoctor import kinds
from stackdoctor.core.errors import ExitCode
from stackdoctor.model.facts import Facts, KernelFacts
from stackdoctor.model.report import Report
from stackdoctor.model.view import MachineView

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.config import Requirements
    from stackdoctor.matrix import Matrix
    from stackdoctor.rules.core import Gates
    from stackdoctor.system import System
    from stackdoctor.verify.runner import AllreduceOptions

# (the rules are imported on the prepare thread while the probes run: build_report)

__all__ = ["AllreduceRun", "KernelRun", "Options", "build_kernels_report", "build_report", "exit_code", "failing_reason", "gather", "gather_kernels",
           "judge", "judge_kernels", "load_matrix", "probe_facts", "requirements_for", "run_kernel_facts"]


@dataclass
class Options:
    """What the pipeline takes; a command fills it from its flags."""

    python: str | None = None  # target interpreter (None: active venv, conda env, or this Python)
    timeout_s: float = 5.0  # each tool
    torch_timeout_s: float = 60.0  # the target worker (imports torch, runs the quick kernels)
    kernels: bool = True  # the quick kernel pass in the target
    compile: bool = False  # ... with a torch.compile check
    import_torch: bool = True  # False: read torch from its files only, never import it (the kernel pass imports it anyway)
    replay: str | None = None  # a report to re-judge instead of probing
    matrix_files: list[str] = field(default_factory=list)  # --matrix (else STACKDOCTOR_MATRIX)
    config: str | None = None  # project requirements file (else found upward)
    lang: str | None = None  # --lang (else the locale variables)
    only: list[str] | None = None
    skip: list[str] | None = None
    strict: bool = False
    gates: Gates | None = None  # thresholds beyond the project file (kernels --min-busbw)
    worker_hook: str | None = None  # tests only: STACKDOCTOR_TEST_HOOK for the target worker
    probes: Sequence[str] | None = None  # a subset of the probes (install needs fewer)
    check_python: bool = False  # a --python that is not a Python 3 interpreter is a UsageError (engine.validate_python)
    groups: Sequence[str] | None = None  # only the rules of these groups (``kernels`` judges with its own: ["kernels"])


def load_matrix(opts: Options) -> Matrix:
    from stackdoctor.matrix import load_matrix as _load

    return _load(opts.matrix_files)


def lang_of(opts: Options) -> str:
    from stackdoctor.core.texts import detect_lang

    return detect_lang(os.environ, opts.lang)


def gather(opts: Options, *, progress: Callable[[], AbstractContextManager[object]] | None = None) -> Report:
    """Probe this machine, or load the report to replay (its findings are dropped: they are judged again)."""
    if opts.replay:
        from stackdoctor.model.report import load_report, replay_file

        report = load_report(opts.replay)
        report.replayed_from = str(replay_file(opts.replay))  # a folder `report` wrote: its report.json
        report.findings = []
        return report
    from stackdoctor.model.probing import ProbeContext
    from stackdoctor.pipeline.engine import run_probes, select_target
    from stackdoctor.system import LENT_PREFIX, System, sweep_dead_lent

    # the folders an earlier stackdoctor lent the target ($TMPDIR/stackdoctor-pkg-*, a link to its packaging) and left
    # when it was killed: the worker needs none now, but what a killed run left is removed by the next one (not a probe's job)
    sweep_dead_lent(LENT_PREFIX)
    system = System.from_env(timeout_s=opts.timeout_s)
    target = select_target(opts.python, os.environ)
    if target.selected_by != "--python":
        # an environment whose interpreter is missing or a dangling link (its base Python removed): one sentence, exit 2,
        # never a switch to another Python; one that runs but is not Python 3 is the target probe's failing finding
        from stackdoctor.pipeline.engine import validate_python

        validate_python(target.python, system=system, selected_by=target.selected_by, run=False)
    ctx = ProbeContext(
        system=system,
        target=target,
        timeout_s=opts.timeout_s,
        torch_timeout_s=opts.torch_timeout_s,
        kernels=opts.kernels,
        compile=opts.compile,
        import_torch=opts.import_torch,
        live_driver=not system.moved,
        worker_hook=opts.worker_hook,
    )
    with (progress() if progress else nullcontext()):
        return run_probes(ctx, only=opts.probes)


def probe_facts(opts: Options) -> MachineView:
    """Probed (or replayed) facts, reconciled with the matrix: the machine's view."""
    return _reconciled(gather(opts).facts, load_matrix(opts))


def _reconciled(facts: Facts, matrix: Matrix) -> MachineView:
    from stackdoctor.reconcile import reconcile

    return reconcile(facts, matrix)


def requirements_for(report: Report, opts: Options) -> Requirements | None:
    """``--config FILE``, else the requirements a replayed report recorded, else ``[tool.stackdoctor]`` found upward."""
    from stackdoctor import config as cfg

    if opts.config:
        return cfg.discover_config(Path.cwd(), Path(opts.config))
    if opts.replay:
        return cfg.Requirements.from_report_entry(report.requirements)
    return cfg.discover_config(Path.cwd(), None)


def judge(report: Report, opts: Options, matrix: Matrix) -> Report:
    """The report with reconciled facts and every finding (the project's policy and --only/--skip applied)."""
    from stackdoctor import config as cfg
    from stackdoctor import rules
    from stackdoctor.rules.diagnose import select

    reqs = requirements_for(report, opts)
    view = _reconciled(report.facts, matrix)
    from stackdoctor.reconcile import report_facts

    report.facts = report_facts(view)  # the report publishes the view's values (its `reconciled` section, the stable keys)
    findings = rules.judge(view, matrix, probes=report.probes, lang=lang_of(opts), requirements=reqs, gates=opts.gates,
                           groups=opts.groups)
    if reqs is not None:
        findings = cfg.apply_policy(findings, reqs, lang=lang_of(opts))
        report.requirements = reqs.as_report_entry()
    report.findings = select(findings, opts.only, opts.skip)
    return report


def gather_kernels(kernels: KernelFacts, opts: Options, system: System | None = None) -> Report:
    """gather for ``kernels``: what the kernels did in the target (run by the command, which shows their
    progress), with the NVIDIA probe's facts where a CUDA device ran (the peaks reconcile derives)."""
    facts = Facts(kernels=kernels)
    report = Report(facts=facts)
    peaked = list(dict.fromkeys(a for r in kernels.results for a in kinds.with_device(r.device) if a.peaks))
    if peaked:
        from stackdoctor.model.probing import ProbeContext
        from stackdoctor.pipeline.engine import run_probes, select_target
        from stackdoctor.system import System as _System

        sys_ = system or _System.from_env(timeout_s=opts.timeout_s)
        probed = run_probes(ProbeContext(system=sys_, target=select_target(opts.python, os.environ), live_driver=not sys_.moved), only=[a.subject for a in peaked])
        for a in peaked:
            setattr(facts, a.subject, getattr(probed.facts, a.subject))
        report.probes = probed.probes
    return report


def judge_kernels(kernels: KernelFacts, opts: Options, system: System | None = None) -> Report:
    """``kernels`` through the pipeline: gather (:func:`gather_kernels`) -> reconcile -> judge by the kernel
    rules (``opts.groups``, default ``["kernels"]``) with ``opts.gates`` and the project's policy."""
    if opts.groups is None:
        opts = dataclasses.replace(opts, groups=["kernels"])
    return judge(gather_kernels(kernels, opts, system), opts, load_matrix(opts))


@dataclass
class AllreduceRun:
    """How ``kernels`` runs allreduce: ``nproc`` ranks here (``rank`` None), or this host's ``rank`` of ``world_size``."""

    opts: AllreduceOptions
    nproc: int = 2
    rank: int | None = None
    world_size: int = 0
    master_addr: str = ""
    master_port: int | None = None
    local_rank: int | None = None
    node: Mapping[str, Any] | None = None  # this host's fleet summary (across hosts)
    link_gbps: float | None = None  # --over thunderbolt: the link's rate, for % of link
    iface_reason: str | None = None  # why that interface


@dataclass
class KernelRun:
    """What ``kernels`` runs in the target (the command fills it from its flags)."""

    python: str  # the target interpreter
    compute: Sequence[str] = ()  # matmul conv compile
    devices: Sequence[str] = ()
    sizes: Sequence[int] = ()
    timeout_s: float = 300.0
    hook: str | None = None  # tests only: STACKDOCTOR_TEST_HOOK for the workers
    allreduce: AllreduceRun | None = None


def run_kernel_facts(
    run: KernelRun,
    system: System,
    *,
    progress: Callable[[], AbstractContextManager[object]] | None = None,
    sweep: Callable[[], AbstractContextManager[Callable[[dict[str, Any]], None]]] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> KernelFacts:
    """gather for ``kernels``: the compute kernels, then allreduce, in the target (``progress`` is shown while the
    kernels run, ``on_result`` called as each result (a matmul size) is done, ``sweep`` is entered around allreduce
    and called as each message size completes). Ctrl-C: :class:`stackdoctor.verify.runner.KernelsInterrupted` with what
    was finished."""
    from stackdoctor.verify.runner import KernelsInterrupted, run_allreduce_local, run_allreduce_rank, run_kernels

    kf = KernelFacts(ran=False, mode="full")
    if run.compute:
        with (progress() if progress else nullcontext()):
            kf = run_kernels(system, run.python, kernels=list(run.compute), devices=list(run.devices), sizes=list(run.sizes), timeout_s=run.timeout_s,
                             hook=run.hook, on_result=on_result)
    a = run.allreduce
    if a is None:
        return kf
    done: list[dict[str, Any]] = []
    with (sweep() if sweep else nullcontext(None)) as shown:

        def on_progress(data: dict[str, Any]) -> None:
            done.append(data)
            if shown is not None:
                shown(data)

        try:
            if a.rank is not None:
                ar = run_allreduce_rank(system, run.python, rank=a.rank, world_size=a.world_size, master_addr=a.master_addr,
                                        master_port=a.master_port or 29500, opts=a.opts, local_rank=a.local_rank, hook=run.hook, node=a.node,
                                        on_progress=on_progress)
            else:
                ar = run_allreduce_local(system, run.python, a.nproc, a.opts, master_port=a.master_port, hook=run.hook, on_progress=on_progress)
        except KeyboardInterrupt:
            raise KernelsInterrupted(kf, done) from None
    summary = ar.allreduce or {}
    if a.link_gbps:
        summary["link_rate_gbps"] = a.link_gbps
        if summary.get("max_busbw_gbs") is not None:
            summary["percent_of_link"] = round(100.0 * summary["max_busbw_gbs"] * 8 / a.link_gbps, 1)
    if a.iface_reason:
        summary["iface_reason"] = a.iface_reason
    merge_allreduce(kf, ar, summary)
    return kf


def merge_allreduce(kf: KernelFacts, ar: KernelFacts, summary: dict[str, Any]) -> None:
    """The allreduce run's results beside the compute kernels' (``kernels`` and ``check``'s project allreduce alike):
    ran if either ran, every result kept, the sweep's summary, the first signal that stopped one."""
    kf.ran = kf.ran or ar.ran
    kf.results.extend(ar.results)
    kf.allreduce = summary
    if ar.signal and not kf.signal:
        kf.signal = ar.signal


def build_kernels_report(
    run: KernelRun,
    opts: Options,
    system: System,
    *,
    progress: Callable[[], AbstractContextManager[object]] | None = None,
    sweep: Callable[[], AbstractContextManager[Callable[[dict[str, Any]], None]]] | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
) -> Report:
    """``kernels`` as ``check`` is built: run the kernels in the target (:func:`run_kernel_facts`), then gather ->
    reconcile -> judge by the kernel rules (:func:`judge_kernels`). The screen, ``--json`` and the exit code
    (:func:`exit_code`) all read the one judged report."""
    return judge_kernels(run_kernel_facts(run, system, progress=progress, sweep=sweep, on_result=on_result), opts, system)


def needs_torch_runtime(reqs: Requirements | None) -> bool:
    """Whether the project's requirements can only be judged by ``import torch`` in the target (a GPU
    backend, a number of GPUs torch can use): then ``check --no-kernels`` imports torch all the same."""
    return reqs is not None and ((reqs.backend or "cpu") != "cpu" or (reqs.min_gpus or 0) > 0)


def build_report(opts: Options, *, progress: Callable[[], AbstractContextManager[object]] | None = None) -> Report:
    """Probe (or replay) and judge. The matrix, the rules and the texts load on a thread while the
    probes run (the target's ``import torch`` takes seconds), so they add nothing to the wall time."""

    def prepare() -> Matrix:
        matrix = load_matrix(opts)
        from stackdoctor import rules  # noqa: F401  (declares the rules, loads the texts)
        from stackdoctor.rules import catalog

        catalog.title("torch-ok", lang_of(opts))
        return matrix

    def check_python() -> None:
        from stackdoctor.pipeline.engine import validate_python

        if opts.check_python and opts.python and not opts.replay:
            validate_python(opts.python, timeout_s=max(opts.timeout_s, 5.0))

    reqs = None if opts.replay else requirements_for(Report(), opts)
    if not opts.import_torch and not opts.replay and needs_torch_runtime(reqs):
        opts = dataclasses.replace(opts, import_torch=True)  # a backend or GPU count is proven only by torch itself
    if opts.kernels and reqs is not None and "compile" in reqs.kernels:
        opts = dataclasses.replace(opts, compile=True)  # the project names the compile kernel: the quick pass runs it
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="prepare") as pool:
        pending = pool.submit(prepare)
        report = gather(opts, progress=progress)
        if opts.replay or not report.facts.python.version:
            # is --python a Python 3 interpreter? Asked only when the target's worker gave no Python facts: one that
            # did is one (issue 33: no child process for an answer already given). Not Python (perl, Python 2): its
            # one sentence, exit 2, instead of a report
            check_python()
        matrix = pending.result()  # a bad --matrix raises its MatrixError here, after the probes
    if opts.kernels and wants_allreduce(reqs):
        project_allreduce(report, opts)
    return judge(report, opts, matrix)


def wants_allreduce(reqs: Requirements | None) -> bool:
    """Whether the project's requirements can only be met by an allreduce run (``kernels`` names it, or ``min_busbw``)."""
    return reqs is not None and ("allreduce" in reqs.kernels or reqs.min_busbw is not None)


def allreduce_plan(facts: Facts) -> tuple[int, str]:
    """(ranks, backend) of the allreduce ``check`` runs for a project that asks for one: a rank per GPU torch can use
    where there are two or more (the backend torch has for them: nccl, xccl), else two gloo ranks on the CPU."""
    t = facts.torch
    n = next((c for a in kinds.ALL if (c := a.torch_count(t))), 0)
    return (n, "auto") if n >= 2 else (2, "gloo")


def project_allreduce(report: Report, opts: Options) -> None:
    """``check`` for a project whose requirements name allreduce or ``min_busbw``: the quick sweep of ``kernels
    allreduce`` in the target, after the probes, its results beside the quick kernels' (so the requirement is judged
    on this run, not left unmet with a fix a later ``check`` could not see). Not run when torch did not import."""
    from stackdoctor.system import System
    from stackdoctor.verify.runner import AllreduceOptions, run_allreduce_local

    t, kf = report.facts.torch, report.facts.kernels
    python = report.facts.python.executable
    if not python or not t.installed or t.imported is not True or t.import_error or kf.allreduce:
        return
    nproc, backend = allreduce_plan(report.facts)
    system = System.from_env(timeout_s=opts.timeout_s)
    ar = run_allreduce_local(system, python, nproc, AllreduceOptions(backend=backend, timeout_s=min(opts.torch_timeout_s, 600.0)), hook=opts.worker_hook)
    merge_allreduce(kf, ar, ar.allreduce or {})


def warnings_fail(report: Report, strict: bool) -> bool:
    return strict or bool(((report.requirements or {}).get("values") or {}).get("warnings_fail"))


def exit_code(report: Report, strict: bool = False) -> ExitCode:
    """1 when a finding fails (or warns, with ``--strict`` / ``warnings_fail``), else 0."""
    sev = {f.severity for f in report.findings}
    if "fail" in sev or (warnings_fail(report, strict) and "warn" in sev):
        return ExitCode.FAILED
    return ExitCode.OK


def failing_reason(report: Report, strict: bool) -> str | None:
    """Why the exit code is 1 when only warnings are there (``--strict`` or ``warnings_fail``), for the summary line."""
    sev = {f.severity for f in report.findings}
    if "fail" in sev or "warn" not in sev or not warnings_fail(report, strict):
        return None
    return "--strict" if strict else "warnings_fail"
