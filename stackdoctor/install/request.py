"""The install flow's request: the options checked, the machine's view gathered, the request made and resolved into a plan
(with its command, its leftovers and, for a what-if, the machine it is for)."""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from stackdoctor import kinds, pipeline
from stackdoctor.core.errors import UsageError
from stackdoctor.install.options import DRIVER_RE, EMITS, INSTALLERS, KNOWN_PACKAGES, PROBES, InstallOptions

if TYPE_CHECKING:  # pragma: no cover
    from stackdoctor.matrix import Matrix
    from stackdoctor.model.plan import Plan, Request
    from stackdoctor.model.view import MachineView


# ---------------------------------------------------------------------------- the request


def check_options(opts: InstallOptions) -> None:
    """Input errors that need no facts: one sentence each, exit 2."""
    if opts.installer not in INSTALLERS:
        raise UsageError(f"--installer must be one of {', '.join(INSTALLERS)}, not {opts.installer!r}.")
    if opts.emit is not None and opts.emit not in EMITS:
        raise UsageError(f"--emit must be requirements, uv or environment.yml, not {opts.emit!r}.")
    if opts.emit and opts.json_out:
        raise UsageError("--emit and --json both print on stdout; choose one.")
    if opts.timeout_s <= 0 or opts.sources.index_timeout_s <= 0:
        raise UsageError("--timeout and --index-timeout must be positive.")
    unknown = [p for p in opts.packages if p.lower() not in KNOWN_PACKAGES]
    if unknown:
        import difflib

        close = difflib.get_close_matches(unknown[0].lower(), sorted(KNOWN_PACKAGES), n=1, cutoff=0.75)
        if close:  # a typo of a family member (torchvison): name the one meant
            raise UsageError(f"stackdoctor install handles torch, torchvision and torchaudio, not {', '.join(unknown)}; did you mean {close[0]}?")
        raise UsageError(
            f"stackdoctor install handles torch, torchvision and torchaudio, not {', '.join(unknown)}; install other packages with pip afterwards."
        )
    if opts.machine.driver is not None and not DRIVER_RE.match(opts.machine.driver.strip()):
        from stackdoctor.resolve.machine import flag_kind

        owner = flag_kind("--driver")
        kind_err = owner.bad_driver_error(opts.machine.driver) if owner is not None else f"--driver {opts.machine.driver}: no kind's driver is named by it."
        raise UsageError(kind_err)
    for acc in kinds.ALL:  # a kind's what-if values of its host (AMD's --rocm-userspace 6.3.1), each checked as it declares
        given = opts.machine.values.get(acc.name, {})
        bad = next((err for v in acc.what_if_values if v.key in given and (err := v.error(given[v.key]))), None)
        if bad:
            raise UsageError(bad)
    if opts.sources.mirror and opts.sources.index_base:
        raise UsageError("--mirror and --index-base both name the PyTorch index; give one.")
    from stackdoctor.resolve import request_value_error

    bad = request_value_error(opts.torch, opts.machine.platform, opts.machine.python_version)
    if bad:
        raise UsageError(bad)


def published_variants(matrix: Matrix) -> list[str]:
    """Every variant some release in the matrix publishes: cpu, cuXYZ (newest first), rocm, xpu."""
    from stackdoctor.matrix import variant_kind

    names = {v.name for r in matrix.releases for v in r.variants}
    ranks: dict[str, int] = {k: i for i, k in enumerate(dict.fromkeys([kinds.CPU, *(a.build_kind for a in kinds.BUILTIN)]))}  # the built-in kinds' order

    def key(n: str) -> tuple[int, tuple[int, ...]]:
        kind = variant_kind(n)
        order = ranks.get(kind[0] if kind else "", len(ranks))
        return (order, tuple(-int(x) for x in re.findall(r"\d+", n)))

    return sorted(names, key=key)


def windows_shell(opts: InstallOptions, view: MachineView) -> bool:
    """Whether the plan's commands are for a Windows shell (PowerShell): the planned machine is Windows,
    this one or a replayed one, or a what-if's ``--platform win_*``."""
    if opts.machine.platform:
        return opts.machine.platform.lower().startswith("win")
    return view.facts.platform.system == "Windows"


# ---------------------------------------------------------------------------- gather


def pipeline_options(opts: InstallOptions) -> pipeline.Options:
    # install needs the target's tags and what torch build is there, not a working torch:
    # read torch/version.py instead of importing it (seconds faster, and safe on a broken torch)
    return pipeline.Options(
        python=opts.python, kernels=False, import_torch=False, replay=opts.machine.replay, matrix_files=list(opts.sources.matrix),
        probes=[*PROBES, *(a.subject for a in kinds.ALL if a.probe)],  # and each accelerator kind's own (not nvcc's)
    )


def gather_view(opts: InstallOptions) -> tuple[MachineView, str, Matrix]:
    """(the machine's view (:func:`stackdoctor.reconcile.reconcile`), target interpreter path, matrix): probed here, or from ``--replay``."""
    if opts.python and not opts.machine.replay:
        from stackdoctor.pipeline.engine import validate_python

        validate_python(opts.python)  # a folder, a missing path, not Python 3: one sentence, exit 2 (as check, kernels, report)
    popts = pipeline_options(opts)
    matrix = pipeline.load_matrix(popts)
    report = pipeline.gather(popts)
    from stackdoctor.reconcile import reconcile

    view = reconcile(report.facts, matrix)  # what the flow reads and resolves; the raw facts stay in the report
    if opts.machine.replay:
        return view, view.facts.python.executable or "python", matrix
    if opts.python and view.facts.python.error and not view.facts.python.version:
        raise UsageError(f"--python {opts.python}: {view.facts.python.error}.")
    from stackdoctor.pipeline.engine import select_target

    return view, select_target(opts.python, os.environ).python, matrix


def wanted_packages(opts: InstallOptions, view: MachineView) -> list[str]:
    """torch, plus torchvision / torchaudio when named or already installed in the target."""
    named = {p.lower() for p in opts.packages}
    have = {k.lower() for k in view.facts.torch.distributions}
    if view.facts.torch.torchvision_version:
        have.add("torchvision")
    if view.facts.torch.torchaudio_version:
        have.add("torchaudio")
    return [p for p in KNOWN_PACKAGES if p == "torch" or p in named or (p in have and not opts.what_if)]


def make_request(opts: InstallOptions, view: MachineView, matrix: Matrix | None = None, torch: str | None = None) -> Request:
    from stackdoctor.model.plan import Request
    from stackdoctor.wheels.index import index_base

    return Request(
        torch=torch or opts.torch,
        variant=opts.variant,
        packages=wanted_packages(opts, view),
        python_version=opts.machine.python_version,
        platform=opts.machine.platform,
        driver=opts.machine.driver,
        gpus=list(opts.machine.gpus),
        gfx=list(opts.machine.gfx),
        values={k: {key: v.strip() for key, v in given.items() if v} for k, given in opts.machine.values.items() if any(given.values())},
        devices={k: list(v) for k, v in opts.machine.devices.items() if v},
        index_base=index_base(opts.sources.index_base, os.environ, matrix),
        installer=opts.installer if opts.installer in ("pip", "uv") else "pip",
        keep_torch=_adds_companions(opts),
        torch_asked=bool(opts.torch),
    )


def _adds_companions(opts: InstallOptions) -> bool:
    """``install torchvision`` (torch not named, no --torch, no --variant): the installed torch stays (issue 43)."""
    named = {p.lower() for p in opts.packages}
    return bool(named) and "torch" not in named and not opts.torch and opts.variant == "auto"

def accelerator_seen(view: MachineView, variant: str | None) -> str | None:
    """The backend the verification must find usable after installing ``variant``: the accelerator
    model's answer for this machine, when the variant is a build for it ("cuda", "rocm", "xpu", "mps")."""
    acc = kinds.select(view.facts)  # the accelerator model asks the kinds' own facts
    if acc is None:
        return None
    return acc.backend if acc.verified_after(variant, view.facts) else None


# ---------------------------------------------------------------------------- resolve


def resolve_plan(opts: InstallOptions, view: MachineView, python: str, matrix: Matrix, torch: str | None = None) -> tuple[Plan, Request]:
    """The plan for the request, with its command and the leftovers (the resolver's, from :func:`stackdoctor.wheels.leftovers.predict_leftovers`,
    the one prediction; on this machine narrowed by the target's packages as ``--remove-leftovers`` will be)."""
    from stackdoctor.install.argv import install_command
    from stackdoctor.resolve import resolve

    request = make_request(opts, view, matrix, torch)
    plan = resolve(view, matrix, request)
    if plan.satisfiable:
        plan.command = install_command(plan, python, request.installer, uv=view.facts.python.uv_path or "uv")
        if plan.leftovers and not opts.what_if:  # the same answer --remove-leftovers acts on (install.leftovers)
            from stackdoctor.install import backup
            from stackdoctor.system import System
            from stackdoctor.wheels.leftovers import leftovers

            if (snap := backup.snapshot(System.from_env(), python)).ok:
                plan.leftovers = leftovers(plan.leftovers, snap)
    return plan, request


def describe_machine(opts: InstallOptions, view: MachineView) -> str:
    """The hypothetical machine a what-if plan is for, in a few words."""
    parts: list[str] = []
    if opts.machine.replay:
        parts.append(f"the machine in {opts.machine.replay}")
    from stackdoctor.resolve.machine import flag_kind

    driver_kind, gfx_kind = flag_kind("--driver"), flag_kind("--gfx")
    if opts.machine.driver:
        parts.append(f"{driver_kind.vendor_label if driver_kind else 'GPU'} driver {opts.machine.driver}")
    if opts.machine.gpus:
        parts.append(f"GPU {', '.join(opts.machine.gpus)}")
    if opts.machine.gfx:
        parts.append(f"{gfx_kind.vendor_label if gfx_kind else 'GPU'} {', '.join(opts.machine.gfx)}")
    for kind, names in opts.machine.devices.items():
        acc = kinds.by_name(kind)
        if names and acc is not None:
            parts.append(f"{acc.label} {', '.join(names)}")
    if opts.machine.python_version:
        parts.append(f"Python {opts.machine.python_version}")
    if opts.machine.platform:
        parts.append(opts.machine.platform)
    kept = []
    if not opts.machine.replay:
        if not opts.machine.python_version and view.facts.python.version:
            kept.append(f"Python {'.'.join(view.facts.python.version.split('.')[:2])}")
        if not opts.machine.platform and view.facts.python.platform_tag:
            kept.append(view.facts.python.platform_tag)
    return ", ".join(parts) + (f" (otherwise this machine: {', '.join(kept)})" if kept else "")


def target_tags(view: MachineView, request: Request) -> list[str]:
    from stackdoctor.wheels.index import target_tags as _tags

    return _tags(view.facts, request)


def installed_matches(plan: Plan, view: MachineView) -> bool:
    """The target already has exactly the planned torch build and companions (read from their metadata)."""
    from packaging.version import InvalidVersion, Version

    have = {k.lower(): v for k, v in view.facts.torch.distributions.items()}
    if view.facts.torch.version:
        have.setdefault("torch", view.facts.torch.version)
    if view.facts.torch.torchvision_version:
        have.setdefault("torchvision", view.facts.torch.torchvision_version)
    if view.facts.torch.torchaudio_version:
        have.setdefault("torchaudio", view.facts.torch.torchaudio_version)
    if not plan.packages:
        return False
    for p in plan.packages:
        got = have.get(p.name)
        if not got:
            return False
        want = p.requirement.split("==", 1)[1]
        try:
            if Version(got) != Version(want):
                return False
        except InvalidVersion:
            return False
    return True


def generic_command(plan: Plan, request: Request, *, windows: bool = False) -> list[str]:
    """The install command for another machine: its own python, the PyTorch index, none of this machine's paths.
    Its python is ``python3``, or ``python`` on Windows (where python.org's installer has no ``python3``)."""
    from stackdoctor.install.argv import install_command

    return install_command(plan, "python" if windows else "python3", request.installer, uv="uv")


