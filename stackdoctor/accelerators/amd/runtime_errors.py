"""How HIP writes its errors in torch's text (:class:`~stackdoctor.kinds.runtime_errors.ErrorDialect`, read with every
other kind's by :mod:`stackdoctor.kinds.runtime_errors`)."""

from __future__ import annotations

from stackdoctor.kinds.for_lower import ErrorDialect

DIALECT = ErrorDialect(
    names=((r"hipError[A-Z]\w*", "hip"),),
    numbers=(r"\bhip runtime error \((?P<n>\d{1,5})\)(?: : (?P<msg>[^\n]+?)(?= at |$))?",),
    messages=((r"\bHIP error: ", "hip"),),
    context=r"\bhip",
    number_api="hip",
    claims=r"\bhip|\bHIP\b|ROCm",  # a line that says HIP or ROCm: its numbers are HIP's
)
