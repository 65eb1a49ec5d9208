"""Probes: one module per subject. A probe gathers and parses; it never judges, never raises.

Each module exposes ``probe(ctx: ProbeContext) -> ProbeOutput``. Parsers are pure
``parse_*(text) -> value`` functions next to it, tested on recorded real outputs.
"""

from __future__ import annotations

from stackdoctor.model.probing import ProbeContext, ProbeOutput, Target

__all__ = ["ProbeContext", "ProbeOutput", "Target"]  # the contract, for a plug-in's probe
