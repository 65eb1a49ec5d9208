"""The accelerator kinds, each in its own package above the rules and the resolver: its probe, the parsing of its
facts and their witness joins, its fit, its rules and texts (``nvidia/``, ``jetson/``, ``amd/``, ``intel/``, ``apple/``,
``ascend/``). They register through the seam, :mod:`stackdoctor.kinds`, as a plug-in's kind does; nothing below them
imports a kind.

``stackdoctor.accelerators.X`` for a name of the seam (the path plug-ins were written against) is the seam's ``X``.
"""

from __future__ import annotations

from typing import Any

# The kinds shipped here, as the seam loads them (``module:Class``, as an entry point names a plug-in's). Built in, in
# priority order when several are present: a Jetson's iGPU is its CUDA device; a discrete NVIDIA GPU beats an AMD one
# (one torch build serves one vendor), which beats an Intel GPU; Apple last. Then the kinds shipped in a plug-in's
# shape (Ascend: Facts.plugins, torch asked by name), then the plug-ins' (entry points).
KINDS = (
    "stackdoctor.accelerators.jetson:Jetson",
    "stackdoctor.accelerators.nvidia:Nvidia",
    "stackdoctor.accelerators.amd:Amd",
    "stackdoctor.accelerators.intel:Intel",
    "stackdoctor.accelerators.apple:Apple",
)
BUNDLED_KINDS = ("stackdoctor.accelerators.ascend:Ascend",)


def __getattr__(name: str) -> Any:
    from stackdoctor import kinds

    return getattr(kinds, name)
