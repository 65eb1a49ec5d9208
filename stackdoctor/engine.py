"""Run every probe concurrently into one :class:`~stackdoctor.report.Report`.

The whole run takes about as long as the slowest probe. Each tool call inside a probe
is bounded by its own timeout; the engine adds an outer deadline per probe so that
even a probe bug cannot hold ``check`` past it.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from stackdoctor.facts import Facts
from stackdoctor.probes import ProbeContext, ProbeOutput, Target
from stackdoctor.report import ProbeStatus, Report

# (probe name, module). Order is the order of the report's "probes" list.
PROBES: tuple[tuple[str, str], ...] = (
    ("target", "stackdoctor.probes.target"),  # python + torch (+ quick kernels), one child process
    ("platform", "stackdoctor.probes.platform"),
    ("nvidia", "stackdoctor.probes.nvidia"),
    ("cuda_toolkit", "stackdoctor.probes.cuda_toolkit"),
    ("rocm", "stackdoctor.probes.rocm"),
    ("apple", "stackdoctor.probes.apple"),
    ("intel", "stackdoctor.probes.intel"),
    ("jetson", "stackdoctor.probes.jetson"),
    ("thunderbolt", "stackdoctor.probes.thunderbolt"),
)

# Environment variables that shape the stack, recorded in facts.environment.
ENV_PREFIXES = (
    "CUDA_",
    "NVIDIA_",
    "NCCL_",
    "HIP_",
    "HSA_",
    "ROCM_",
    "ROCR_",
    "TORCH_",
    "PYTORCH_",
    "PIP_",
    "UV_",
    "CONDA_",
    "GLOO_",
    "LD_",
    "DYLD_",
    "ZE_",
    "ONEAPI_",
)
ENV_NAMES = (
    "PATH",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "NO_PROXY",
    "https_proxy",
    "http_proxy",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "WORLD_SIZE",
    "RANK",
    "LOCAL_RANK",
)


# Where an environment keeps its interpreter: a venv's bin/python (POSIX) or Scripts\python.exe
# (Windows); a conda env's bin/python (POSIX) or python.exe at its root (Windows). The native
# layout is tried first; both are tried on every OS (an env made by MSYS2 or copied across).
VENV_PYTHONS = {"posix": (("bin", "python"), ("Scripts", "python.exe")), "nt": (("Scripts", "python.exe"), ("bin", "python"))}
CONDA_PYTHONS = {"posix": (("bin", "python"), ("python.exe",)), "nt": (("python.exe",), ("bin", "python"))}


def select_target(python: str | None, env: dict[str, str] | os._Environ, os_name: str | None = None) -> Target:
    """``--python``, else the active virtualenv, else the active conda env, else this interpreter.

    ``os_name`` (default ``os.name``) orders the layouts: ``"nt"`` tries ``Scripts\\python.exe`` first."""
    if python:
        return Target(python, "--python")
    kind = "nt" if (os_name or os.name) == "nt" else "posix"
    for var, layouts in (("VIRTUAL_ENV", VENV_PYTHONS), ("CONDA_PREFIX", CONDA_PYTHONS)):
        prefix = env.get(var)
        if not prefix:
            continue
        for parts in layouts[kind]:
            cand = os.path.join(prefix, *parts)
            if os.path.isfile(cand):
                return Target(cand, var)
    return Target(sys.executable, "self")


def capture_environment(env: dict[str, str] | os._Environ) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def _load(module: str) -> Callable[[ProbeContext], ProbeOutput]:
    return importlib.import_module(module).probe  # type: ignore[no-any-return]


def run_probes(
    ctx: ProbeContext,
    *,
    only: Sequence[str] | None = None,
    on_progress: Callable[[str, ProbeStatus], None] | None = None,
) -> Report:
    """Run the probes concurrently; never raises; returns a report without findings."""
    facts = Facts()
    facts.environment = capture_environment(ctx.system.env)
    statuses: dict[str, ProbeStatus] = {}
    lock = threading.Lock()
    selected = [(n, m) for n, m in PROBES if only is None or n in only]

    def one(name: str, module: str) -> None:
        start = time.monotonic()
        try:
            out = _load(module)(ctx)
        except Exception as exc:  # a probe bug (or a broken install of it) must not take the run down
            out = ProbeOutput(status="error", error=f"internal error in {name} probe: {type(exc).__name__}: {exc}")
        st = ProbeStatus(name, out.status, round(time.monotonic() - start, 4), out.error)
        with lock:
            for subject, value in out.facts.items():
                setattr(facts, subject, value)
            statuses[name] = st
        if on_progress:
            on_progress(name, st)

    deadline = max(ctx.torch_timeout_s, ctx.timeout_s * 4) + 5.0
    pool = ThreadPoolExecutor(max_workers=len(selected) or 1, thread_name_prefix="probe")
    futures = {pool.submit(one, n, m): n for n, m in selected}
    end = time.monotonic() + deadline
    for fut, name in futures.items():
        try:
            fut.result(timeout=max(0.0, end - time.monotonic()))
        except Exception:  # TimeoutError: abandon the thread (daemon); record the probe as timed out
            with lock:
                statuses.setdefault(name, ProbeStatus(name, "timeout", deadline, f"{name} probe did not finish in {deadline:g} s"))
    pool.shutdown(wait=False, cancel_futures=True)
    with lock:
        probes = [statuses[n] for n, _ in selected if n in statuses]
        raw = [r.to_dict() for r in ctx.system.record]
        snapshot = facts
    return Report(facts=snapshot, probes=probes, raw_outputs=raw)
