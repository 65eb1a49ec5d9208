"""Units a user types: bandwidths (the one parser for ``--min-busbw`` and ``min_busbw``) and sizes.

>>> parse_bandwidth("20 GB/s"), parse_bandwidth("160Gb/s"), parse_bandwidth("500 MB/s")
(20.0, 20.0, 0.5)
>>> parse_bandwidth("1 GiB/s") == parse_bandwidth("1GiB/s") == 2**30 / 1e9
True
>>> parse_bandwidth(20), parse_bandwidth("2.5 TB/s")
(20.0, 2500.0)
"""

from __future__ import annotations

import re

__all__ = ["parse_bandwidth"]

# number [space] [prefix][i](B|b)[/s|ps]; a bare number is GB/s (nccl-tests' busbw unit, 1e9 bytes/s)
_BW_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(?:([kKmMgGtT]?)(i?)([Bb])(?:\s*/\s*s|ps)?)?\s*$")
_DECIMAL = {"": 1e-9, "k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3}
_BINARY = {"k": 2**10 / 1e9, "m": 2**20 / 1e9, "g": 2**30 / 1e9, "t": 2**40 / 1e9}


def parse_bandwidth(value: object) -> float:
    """A bandwidth in GB/s (decimal gigabytes per second, as nccl-tests reports busbw).

    ``20`` / ``"20"`` / ``"20 GB/s"`` -> 20.0; ``"160Gb/s"`` (bits) -> 20.0; ``"500 MB/s"`` -> 0.5;
    ``"1 GiB/s"`` -> 1.073741824. A lower-case ``b`` means bits.

    :raises ValueError: one sentence when ``value`` is not a bandwidth.
    """
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a bandwidth")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"{value!r} is negative")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a bandwidth")
    m = _BW_RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a bandwidth (write e.g. 20, \"20 GB/s\", \"1 GiB/s\" or \"160Gb/s\")")
    number = float(m.group(1))
    prefix, binary, unit = (m.group(2) or "").lower(), m.group(3), m.group(4)
    if unit is None:
        return number
    if binary and not prefix:
        raise ValueError(f"{value!r} is not a bandwidth (\"iB\" needs a prefix: KiB, MiB, GiB, TiB)")
    scale = _BINARY[prefix] if binary else _DECIMAL[prefix]
    if unit == "b":
        scale /= 8.0
    return number * scale


def format_flops(tflops: float | None) -> str:
    """A FLOP rate with a unit chosen by magnitude and three significant figures: a CPU conv is
    ``"1.23 GFLOP/s"``, an H200 bf16 matmul ``"712 TFLOP/s"``; ``""`` when unknown.

    >>> format_flops(0.195), format_flops(4.61e-05), format_flops(712.4), format_flops(12.34)
    ('195 GFLOP/s', '46.1 MFLOP/s', '712 TFLOP/s', '12.3 TFLOP/s')
    """
    if tflops is None:
        return ""
    value, unit = tflops, "TFLOP/s"
    for scale, name in ((1e-6, "MFLOP/s"), (1e-3, "GFLOP/s")):
        if tflops < scale * 1000:
            value, unit = tflops / scale, name
            break
    if value >= 100:
        text = f"{value:.0f}"
    elif value >= 10:
        text = f"{value:.1f}"
    else:
        text = f"{value:.2f}"
    return f"{text} {unit}"


def format_bytes(n: int) -> str:
    """A size in a few words, decimal units as ``du -h --si`` says them: ``759 MB``, ``1.5 GB``, ``12 kB``."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.0f} {unit}" if n >= 10 * scale else f"{n / scale:.1f} {unit}"
    return f"{n} bytes"
