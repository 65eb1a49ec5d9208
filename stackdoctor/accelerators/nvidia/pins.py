"""What a torch wheel's metadata pins of the CUDA runtime: the variant a label-less build (PyPI's plain ``torch``) is.

Pure and never raising; asked through the seam (:meth:`Nvidia.default_build_requires`, :meth:`Nvidia.variant_from_pins`)
by :mod:`stackdoctor.wheels.mirrors` and :mod:`stackdoctor.wheels.learn_wheels`, which name no kind."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

_CUDA_REQ = [
    (re.compile(r"^cuda-toolkit(?:\[[^\]]*\])?\s*(?:===?|~=)\s*(\d+)\.(\d+)", re.I), None),
    (re.compile(r"^nvidia-cuda-runtime(?:-cu(\d+))?\s*(?:===?|~=)\s*(\d+)\.(\d+)", re.I), "runtime"),
    (re.compile(r"^nvidia-cuda-nvrtc(?:-cu(\d+))?\s*(?:===?|~=)\s*(\d+)\.(\d+)", re.I), "runtime"),
]

# the wheels whose pin says the CUDA release of a label-less build, the first found deciding
RUNTIME_PINS = ("cuda-toolkit", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu11")


def parse_cuda_requirement(requires: Iterable[str]) -> str | None:
    """The CUDA variant a torch wheel's ``Requires-Dist`` lines pin: ``cuda-toolkit[...]==13.0.3`` -> ``cu130``,
    ``nvidia-cuda-runtime-cu12==12.8.90`` -> ``cu128``; ``None`` when no CUDA runtime is required."""
    for raw in requires:
        req = raw.split(";", 1)[0].strip()
        for rx, kind in _CUDA_REQ:
            m = rx.match(req)
            if not m:
                continue
            major, minor = (m.group(2), m.group(3)) if kind else (m.group(1), m.group(2))
            return f"cu{int(major)}{int(minor)}"
    return None


def variant_from_cuda_pins(pins: Mapping[str, str]) -> str | None:
    """The variant the CUDA runtime's pin says (``cuda-toolkit==13.2.2`` -> ``cu132``); "" when it is pinned in a form
    that names no release; None when it is not pinned."""
    for name in RUNTIME_PINS:
        if name in pins:
            parts = pins[name].split(".")
            if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
                return f"cu{parts[0]}{parts[1]}"
            return ""
    return None
