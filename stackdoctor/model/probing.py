"""What a probe is given and what it gives back: the contract between the engine (:mod:`stackdoctor.pipeline.engine`)
and every probe, generic (:mod:`stackdoctor.probes`) or a kind's (``stackdoctor/accelerators/<kind>/probe.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from stackdoctor.system import System


@dataclass
class Target:
    """The interpreter whose environment is diagnosed."""

    python: str  # path to the interpreter
    selected_by: str  # stackdoctor.pipeline.which_python.RULES: "--python" | "VIRTUAL_ENV" | "CONDA_PREFIX" | ".venv" | "PATH" | "self"


@dataclass
class ProbeContext:
    system: System
    target: Target
    timeout_s: float = 5.0  # per tool call
    torch_timeout_s: float = 60.0  # the target worker (imports torch)
    kernels: bool = False  # run the quick kernel pass in the torch child
    compile: bool = False  # ... and a torch.compile check in it (check --compile)
    import_torch: bool = True  # False: torch is only read from its files, never imported (check --no-kernels, install)
    live_driver: bool = True  # False under a moved sysroot: the live driver (its management library) is not the replayed machine's to ask
    worker_hook: str | None = None  # tests only: STACKDOCTOR_TEST_HOOK for the target worker


@dataclass
class ProbeOutput:
    """What a probe returns: facts per subject, and how the probe itself went."""

    facts: dict[str, Any] = field(default_factory=dict)  # subject name -> facts dataclass
    status: str = "ok"  # "ok" | "error" | "timeout" | "skipped"
    error: str | None = None
