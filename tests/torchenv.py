"""The one venv with the CPU build of torch 2.13.0 that the real-torch tests share.

Used by ``tests/conftest.py`` (``torch_python``) and by ``.ci/run`` (``python3 tests/torchenv.py DIR``).

The requirement is pinned to the CPU build, ``torch==2.13.0+cpu``, so the suite means the same on every
machine (PyPI's ``torch==2.13.0`` for Linux x86_64 is a CUDA build). It is installed in two steps:

1. from pip's configured sources only (``pip install torch==2.13.0+cpu``): a machine whose pip has a
   find-links folder or a mirror holding that build takes it from there and never contacts another host;
   on an ordinary machine PyPI answers at once that it has no ``+cpu`` build;
2. only then from PyTorch's CPU index (``--extra-index-url https://download.pytorch.org/whl/cpu``).

Adding the CPU index to a single command instead costs a machine that cannot reach that host one failed
lookup per package, each retried five times: measured here (download.pytorch.org unreachable, the CPU wheel
in pip's find-links), 50 retries and 84 s before pip fell back to the local wheel, against 15 s for step 1.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

TORCH_VERSION = "2.13.0"
TORCH_REQUIREMENT = f"torch=={TORCH_VERSION}+cpu"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_DIR = Path.home() / ".cache" / "stackdoctor-tests" / "torch-venv"


def has_cpu_torch(python: Path | str) -> bool:
    """``python`` imports torch and it is exactly the CPU build of 2.13.0."""
    code = f"import torch, sys; sys.exit(0 if torch.__version__ == '{TORCH_VERSION}+cpu' else 1)"
    try:
        return subprocess.run([str(python), "-c", code], check=False, capture_output=True, timeout=300).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One builder at a time (parallel test workers, two checkouts on one machine)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f".{path.name}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure(path: Path = DEFAULT_DIR, *, log=print) -> Path:
    """The interpreter of ``path`` (a venv), created with the CPU build of torch 2.13.0 when it lacks it."""
    from helpers import venv_bin

    py = venv_bin(path)
    if has_cpu_torch(py):
        return py
    with _locked(path):
        if has_cpu_torch(py):  # built by another worker meanwhile
            return py
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(path)], check=True)
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH_REQUIREMENT]
        log(f"installing {TORCH_REQUIREMENT} into {path} from pip's configured sources")
        first = subprocess.run(pip, check=False, capture_output=True, text=True)
        if first.returncode != 0:
            log(f"not there; installing {TORCH_REQUIREMENT} from {CPU_INDEX}")
            second = subprocess.run([*pip, "--extra-index-url", CPU_INDEX], check=False, capture_output=True, text=True)
            if second.returncode != 0:
                raise RuntimeError(
                    f"could not install {TORCH_REQUIREMENT} into {path}, neither from pip's configured sources nor from {CPU_INDEX}:\n"
                    f"{first.stderr[-1500:]}\n{second.stderr[-1500:]}"
                )
        if not has_cpu_torch(py):
            raise RuntimeError(f"{py} does not import torch {TORCH_VERSION}+cpu after installing it")
    return py


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_DIR
    try:
        print(ensure(path, log=lambda m: print(m, file=sys.stderr)))
    except (RuntimeError, subprocess.CalledProcessError) as exc:
        print(f"torchenv: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
