"""The plug-in API's first path: :mod:`stackdoctor.kinds.base` (a plug-in's ``from stackdoctor.accelerators.base
import Accelerator`` keeps working)."""

from __future__ import annotations

from stackdoctor.kinds.base import (  # noqa: F401
    Accelerator,
    BuildAsk,
    Companion,
    DeviceSpec,
    FitNotes,
    FitTarget,
    Say,
    TargetDevice,
    Unfit,
    Verified,
    device_summary,
    unverified,
)
