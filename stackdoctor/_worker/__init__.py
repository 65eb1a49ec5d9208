"""Standalone scripts run in a child process: inside the target interpreter (stdlib + torch only),
or, for NVML, in stackdoctor's own interpreter so that a hanging driver never hangs stackdoctor.

Nothing in the scripts may import stackdoctor: the target environment may not have it. This
``__init__`` (imported by stackdoctor only, never by the scripts) says where they are.
"""

from __future__ import annotations

from pathlib import Path


def worker_path(name: str) -> Path:
    """The path of the worker script ``name`` (``sd_target.py``, ``sd_kernels.py``, ...)."""
    path = Path(__file__).resolve().parent / name
    if not path.is_file():  # a typo here is a stackdoctor bug, not a machine fact
        raise FileNotFoundError(f"stackdoctor worker {name} is missing from {path.parent}")
    return path
