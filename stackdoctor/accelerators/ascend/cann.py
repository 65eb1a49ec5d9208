"""CANN's version order (pure; used by the Ascend rules and the torch_npu pairing)."""

from __future__ import annotations

import re

__all__ = ["cann_key"]


def cann_key(version: str) -> tuple[int, ...]:
    """CANN's versions in release order: 8.0.RC3 < 8.0.0 < 8.1.RC1 < 8.3.RC2 < 8.5.0 (an RC comes before its
    final release; a test build "8.0.T6" before its RCs).

    >>> cann_key("8.0.RC3") < cann_key("8.0.0") < cann_key("8.1.RC1") < cann_key("8.5.0")
    True
    """
    m = re.match(r"^(\d+)\.(\d+)\.(?:(RC|T|rc)(\d+)|(\d+))", version.strip())
    if not m:
        return (0,)
    major, minor = int(m.group(1)), int(m.group(2))
    if m.group(5) is not None:
        return (major, minor, 2, int(m.group(5)))
    return (major, minor, 0 if m.group(3) == "T" else 1, int(m.group(4)))
