"""How the CUDA runtime and driver write their errors in torch's text (:class:`~stackdoctor.kinds.runtime_errors.ErrorDialect`,
read with every other kind's by :mod:`stackdoctor.kinds.runtime_errors`)."""

from __future__ import annotations

from stackdoctor.kinds.for_lower import ErrorDialect

CUDA_APIS = ("cuda-runtime", "cuda-driver")  # the APIs whose answer is NVIDIA's driver's (the others: HIP's, AMD's)

DIALECT = ErrorDialect(
    names=((r"cudaError[A-Z]\w*", "cuda-runtime"), (r"CUDA_ERROR_[A-Z0-9_]+", "cuda-driver")),
    numbers=(
        # c10's (torch >= 1.5): "Error 802: system not yet initialized (Triggered internally at ...)"
        r"\bError (?P<n>\d{1,5}): (?P<msg>[^()\n]+?)(?=\s*\(Triggered internally|\s*$|\s*\(function )",
        r"\bcuda runtime error \((?P<n>\d{1,5})\)(?: : (?P<msg>[^\n]+?)(?= at |$))?",  # THC's
        r"\berror=(?P<n>\d{1,5}) : (?P<msg>[^\n]+?)\s*$",
        r"\bCUDA failure (?P<n>\d{1,5}): (?P<msg>[^\n]+?)\s*$",
        r"\((?P<n>\d{1,5}) vs\. 0\)",
        r"\bcudaGetDeviceCount returned (?P<n>\d{1,5})\b",
    ),
    messages=((r"\bCUDA error: ", "cuda-runtime"),),
    context=r"cuda|\bTH[CH]\b|THCudaCheck",
    number_api="cuda-runtime",  # a number on a line no other runtime claims
)
