"""The resolver: facts + compat matrix + request -> install plan. Pure: no I/O, no environment.

Rules (issue 3):

- Unpinned means the newest release that can use this machine's accelerator; a GPU build of an older
  release beats a CPU build of the newest (the plan says so).
- A variant fits when it is published for the target's platform (OS, arch, glibc / macOS floor) and
  Python; the NVIDIA driver meets its CUDA toolkit minimum (only the major's minor-version-compatibility
  floor met: still eligible, with a warning naming the driver to upgrade to; under WSL2 and on Windows
  the Windows column); EVERY GPU runs its arch list (:func:`stackdoctor.matrix.arch_runs`); an AMD GPU's
  gfx is in its list or a known ``HSA_OVERRIDE_GFX_VERSION`` applies (then ``env`` carries it).
- Among fitting variants of a release: the newest CUDA / ROCm. Intel GPU -> xpu; macOS arm64 -> the
  default PyPI build (MPS); Jetson -> its own wheel source; nothing usable -> cpu, saying why and what
  would make a GPU build possible. Nothing at all -> ``Plan(variant=None)`` with suggestions.
- Mixed GPUs: a variant that runs on all, else the plan names the GPU left out and how to hide it.
- Every rejected variant carries its reason.

The package, one file per stage: :mod:`.target` (the machine's facts -> what to plan for), :mod:`.candidates` (the
releases a request allows), :mod:`.fit` (does a variant fit, and why not), :mod:`.packages` (what a plan installs and
its command), :mod:`.installed` (the plan against the installed torch), :mod:`.plan` (the stages that build the
plan); :mod:`.availability` (the sources a plan's wheels are looked for on) is the install flow's, imported by it
alone.
"""

from __future__ import annotations

from stackdoctor.resolve.candidates import request_value_error
from stackdoctor.resolve.machine import Gpu, Target, parse_gpu_request, target_from
from stackdoctor.resolve.planner import resolve

__all__ = ["resolve", "Target", "Gpu", "target_from", "request_value_error", "parse_gpu_request"]
